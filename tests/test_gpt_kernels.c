/* GPT kernels: forward against naive double-precision references, backward
 * against central finite differences.
 *
 * Each backward check defines a scalar L = sum(out * R) for a fixed random R
 * (accumulated in double), takes dout = R, and compares the analytic gradient
 * of every input and weight with (L(x + eps) - L(x - eps)) / (2 eps) over all
 * coordinates. The error of a tensor is ||fd - analytic|| / ||analytic||; the
 * tolerance (1e-2) sits well above float32 noise (~1e-4 here) and well below
 * what a wrong or missing term gives (the sensitivity checks below drop one
 * term on purpose and must fail it). */
#include <stdint.h>

#include "check.h"
#include "nn/gpt.h"

#define TOL 1e-2
#define EPS 1e-3f

static uint64_t rng_state = 42;
static float urand(void) { /* [-1, 1) */
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((rng_state >> 40) * (1.0 / 8388608.0)) - 1.0f;
}
static float *rand_vec(size_t n, float scale) {
  float *v = malloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) v[i] = scale * urand();
  return v;
}
static float *zeros(size_t n) { return calloc(n, sizeof(float)); }

/* The kernel under test: computes out from its inputs (bound via globals). */
typedef void (*forward_fn)(float *out);
static double weighted(forward_fn f, float *out, const float *R, size_t n_out) {
  f(out);
  double s = 0;
  for (size_t i = 0; i < n_out; i++) s += (double)out[i] * R[i];
  return s;
}

/* Relative error of analytic gradient g (n) for parameter x against finite
 * differences of sum(out * R). */
static double fd_error(forward_fn f, float *out, const float *R, size_t n_out, float *x,
                       const float *g, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    float keep = x[i];
    x[i] = keep + EPS;
    double lp = weighted(f, out, R, n_out);
    x[i] = keep - EPS;
    double lm = weighted(f, out, R, n_out);
    x[i] = keep;
    double fd = (lp - lm) / (2.0 * EPS);
    num += (fd - g[i]) * (fd - g[i]);
    den += (double)g[i] * g[i];
  }
  return sqrt(num) / (sqrt(den) + 1e-12);
}

#define CHECK_GRAD(name, err) \
  do { \
    double _e = (err); \
    printf("  %-28s rel err %.2e\n", name, _e); \
    CHECK_MSG(_e < TOL, "%s gradient: relative error %.3g", name, _e); \
  } while (0)

/* ---- shared inputs (small shapes with uneven sizes) --------------------------- */

enum { B = 2, T = 5, C = 12, NH = 3, OC = 7, V = 11, N = B * T };

static float *g_inp, *g_w, *g_b, *g_mean, *g_rstd, *g_res, *g_att, *g_wpe;
static int g_tokens[N];

/* ---- encoder -------------------------------------------------------------- */

static void enc_fwd(float *out) { kt__encoder_forward(out, g_tokens, g_w, g_wpe, B, T, C); }

static void test_encoder(void) {
  printf("encoder\n");
  g_w = rand_vec((size_t)V * C, 1);
  g_wpe = rand_vec((size_t)T * C, 1);
  float *out = zeros((size_t)N * C), *R = rand_vec((size_t)N * C, 1);
  float *dw = zeros((size_t)V * C), *dwpe = zeros((size_t)T * C);
  kt__encoder_backward(dw, dwpe, R, g_tokens, B, T, C);
  CHECK_GRAD("encoder dwte", fd_error(enc_fwd, out, R, (size_t)N * C, g_w, dw, (size_t)V * C));
  CHECK_GRAD("encoder dwpe", fd_error(enc_fwd, out, R, (size_t)N * C, g_wpe, dwpe, (size_t)T * C));
  free(g_w), free(g_wpe), free(out), free(R), free(dw), free(dwpe);
}

/* ---- LayerNorm -------------------------------------------------------------- */

static void ln_fwd(float *out) {
  kt__layernorm_forward(out, g_mean, g_rstd, g_inp, g_w, g_b, N, C);
}

static void test_layernorm(void) {
  printf("layernorm\n");
  g_inp = rand_vec((size_t)N * C, 2);
  g_w = rand_vec(C, 1);
  g_b = rand_vec(C, 1);
  g_mean = zeros(N), g_rstd = zeros(N);
  float *out = zeros((size_t)N * C), *R = rand_vec((size_t)N * C, 1);
  ln_fwd(out);
  /* forward against a double reference */
  double maxerr = 0;
  for (int n = 0; n < N; n++) {
    double m = 0, v = 0;
    for (int i = 0; i < C; i++) m += g_inp[n * C + i];
    m /= C;
    for (int i = 0; i < C; i++) v += (g_inp[n * C + i] - m) * (g_inp[n * C + i] - m);
    double s = 1 / sqrt(v / C + 1e-5);
    for (int i = 0; i < C; i++) {
      double ref = (g_inp[n * C + i] - m) * s * g_w[i] + g_b[i];
      maxerr = fmax(maxerr, fabs(ref - out[n * C + i]));
    }
  }
  CHECK_NEAR(maxerr, 0, 1e-5);
  size_t NC = (size_t)N * C;
  float *dinp = rand_vec(NC, 1), *dw = zeros(C), *db = zeros(C); /* dinp: written, not added to */
  kt__layernorm_backward(dinp, dw, db, NULL, R, g_inp, g_w, g_mean, g_rstd, N, C);
  CHECK_GRAD("layernorm dinp", fd_error(ln_fwd, out, R, NC, g_inp, dinp, NC));
  CHECK_GRAD("layernorm dweight", fd_error(ln_fwd, out, R, NC, g_w, dw, C));
  CHECK_GRAD("layernorm dbias", fd_error(ln_fwd, out, R, NC, g_b, db, C));
  /* with a residual gradient: dinp = dres + the same, and dw, db add up again */
  float *dres = rand_vec(NC, 1), *dinp2 = zeros(NC);
  float w0 = dw[1], b0 = db[1];
  kt__layernorm_backward(dinp2, dw, db, dres, R, g_inp, g_w, g_mean, g_rstd, N, C);
  double reserr = 0;
  for (size_t i = 0; i < NC; i++) reserr = fmax(reserr, fabs(dinp2[i] - (dres[i] + dinp[i])));
  CHECK_NEAR(reserr, 0, 1e-6);
  CHECK_NEAR(dw[1], 2 * w0, 1e-5 * fabs(w0) + 1e-6);
  CHECK_NEAR(db[1], 2 * b0, 1e-5 * fabs(b0) + 1e-6);
  free(dres), free(dinp2);
  /* sensitivity: the gradient without the mean-of-dnorm term must fail */
  float *wrong = zeros(NC);
  for (int n = 0; n < N; n++)
    for (int i = 0; i < C; i++) {
      float norm = (g_inp[n * C + i] - g_mean[n]) * g_rstd[n];
      float dnn = 0;
      for (int j = 0; j < C; j++)
        dnn += g_w[j] * R[n * C + j] * (g_inp[n * C + j] - g_mean[n]) * g_rstd[n] / C;
      wrong[n * C + i] = (g_w[i] * R[n * C + i] - norm * dnn) * g_rstd[n];
    }
  double e = fd_error(ln_fwd, out, R, NC, g_inp, wrong, NC);
  printf("  %-28s rel err %.2e (must fail)\n", "layernorm dinp, term dropped", e);
  CHECK(e > 10 * TOL);
  free(g_inp), free(g_w), free(g_b), free(g_mean), free(g_rstd), free(out), free(R);
  free(dinp), free(dw), free(db), free(wrong);
}

/* ---- linear ------------------------------------------------------------------ */

static void mm_fwd(float *out) { kt__matmul_forward(out, g_inp, g_w, g_b, N, C, OC); }
static void mm_res_fwd(float *out) {
  kt__matmul_residual_forward(out, g_inp, g_w, g_b, g_res, N, C, OC);
}

static void test_matmul(void) {
  printf("matmul (linear)\n");
  g_inp = rand_vec((size_t)N * C, 1);
  g_w = rand_vec((size_t)OC * C, 1);
  g_b = rand_vec(OC, 1);
  g_res = rand_vec((size_t)N * OC, 1);
  size_t NO = (size_t)N * OC;
  float *out = zeros(NO), *out2 = zeros(NO), *R = rand_vec(NO, 1);
  mm_fwd(out);
  mm_res_fwd(out2);
  double maxerr = 0, maxerr2 = 0;
  for (int n = 0; n < N; n++)
    for (int o = 0; o < OC; o++) {
      double ref = g_b[o];
      for (int i = 0; i < C; i++) ref += (double)g_inp[n * C + i] * g_w[o * C + i];
      maxerr = fmax(maxerr, fabs(ref - out[n * OC + o]));
      maxerr2 = fmax(maxerr2, fabs(ref + g_res[n * OC + o] - out2[n * OC + o]));
    }
  CHECK_NEAR(maxerr, 0, 1e-5);
  CHECK_NEAR(maxerr2, 0, 1e-5);
  float *dinp = zeros((size_t)N * C), *dw = zeros((size_t)OC * C), *db = zeros(OC);
  kt__matmul_backward_input(dinp, R, g_w, N, C, OC, 1);
  kt__matmul_backward_weight(dw, R, g_inp, N, C, OC);
  kt__bias_backward(db, R, N, OC);
  CHECK_GRAD("matmul dinp", fd_error(mm_fwd, out, R, NO, g_inp, dinp, (size_t)N * C));
  CHECK_GRAD("matmul dweight", fd_error(mm_fwd, out, R, NO, g_w, dw, (size_t)OC * C));
  CHECK_GRAD("matmul dbias", fd_error(mm_fwd, out, R, NO, g_b, db, OC));
  /* accumulation: a second backward adds the same amount again */
  float before = dw[3];
  kt__matmul_backward_weight(dw, R, g_inp, N, C, OC);
  CHECK_NEAR(dw[3], 2 * before, 1e-5 * fabs(before) + 1e-6);
  /* accumulate = 0 overwrites whatever was there */
  float *dinp2 = rand_vec((size_t)N * C, 100);
  kt__matmul_backward_input(dinp2, R, g_w, N, C, OC, 0);
  double owerr = 0;
  for (size_t i = 0; i < (size_t)N * C; i++) owerr = fmax(owerr, fabs(dinp2[i] - dinp[i]));
  CHECK_NEAR(owerr, 0, 1e-5);
  free(dinp2);
  free(g_inp), free(g_w), free(g_b), free(g_res), free(out), free(out2), free(R);
  free(dinp), free(dw), free(db);
}

/* ---- GELU -------------------------------------------------------------------- */

static void gelu_fwd(float *out) { kt__gelu_forward(out, g_inp, (size_t)N * C); }

static void test_gelu(void) {
  printf("gelu\n");
  size_t n = (size_t)N * C;
  g_inp = rand_vec(n, 4);
  g_inp[0] = 0.0f, g_inp[1] = -12.0f, g_inp[2] = 12.0f;
  float *out = zeros(n), *R = rand_vec(n, 1), *din = zeros(n);
  gelu_fwd(out);
  double maxerr = 0;
  for (size_t i = 0; i < n; i++) {
    double x = g_inp[i];
    double ref = 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    maxerr = fmax(maxerr, fabs(ref - out[i]));
  }
  printf("  gelu forward max abs err vs tanh: %.2e\n", maxerr);
  CHECK_NEAR(maxerr, 0, 2e-6);
  kt__gelu_backward(din, g_inp, R, n);
  CHECK_GRAD("gelu dinp", fd_error(gelu_fwd, out, R, n, g_inp, din, n));
  /* the GPT's pair: GELU and its derivative from one forward, then a multiply
   * (in place) with the bias gradient's column sums, against double */
  enum { ROWS = N, COLS = C }; /* n = ROWS * COLS */
  float *out2 = zeros(n), *grad = zeros(n), *d = malloc(n * sizeof(float)), *dbias = zeros(COLS);
  kt__gelu_forward_grad(out2, grad, g_inp, n);
  memcpy(d, R, n * sizeof(float));
  kt__gelu_backward_saved(d, dbias, grad, ROWS, COLS);
  double fwderr = 0, graderr = 0, derr = 0, dberr = 0;
  for (size_t i = 0; i < n; i++) {
    double x = g_inp[i], u = 0.7978845608028654 * (x + 0.044715 * x * x * x), th = tanh(u);
    double ref = 0.5 * x * (1 + th);
    double dref =
        0.5 * (1 + th) + 0.5 * x * (1 - th * th) * 0.7978845608028654 * (1 + 3 * 0.044715 * x * x);
    fwderr = fmax(fwderr, fabs(ref - out2[i]));
    graderr = fmax(graderr, fabs(dref - grad[i]));
    derr = fmax(derr, fabs(dref * R[i] - d[i]));
  }
  for (int j = 0; j < COLS; j++) {
    double sum = 0;
    for (int r = 0; r < ROWS; r++) sum += d[(size_t)r * COLS + j];
    dberr = fmax(dberr, fabs(sum - dbias[j]));
  }
  printf("  gelu with saved derivative: max abs err %.2e (value), %.2e (derivative), %.2e "
         "(gradient), %.2e (bias)\n",
         fwderr, graderr, derr, dberr);
  CHECK_NEAR(fwderr, 0, 2e-6);
  CHECK_NEAR(graderr, 0, 2e-6);
  CHECK_NEAR(derr, 0, 4e-6);
  CHECK_NEAR(dberr, 0, 1e-5);
  free(g_inp), free(out), free(R), free(din), free(out2), free(grad), free(d), free(dbias);
}

/* ---- softmax cross-entropy ---------------------------------------------------- */

static int g_targets[N];
static float *g_dl;
static void ce_fwd(float *out) { /* out[0] = summed loss */
  out[0] = (float)kt__crossentropy_forward(g_dl, g_inp, g_targets, N, V, 1.0f);
}

static void test_crossentropy(void) {
  printf("softmax cross-entropy\n");
  size_t n = (size_t)N * V;
  g_inp = rand_vec(n, 3);
  g_dl = zeros(n);
  for (int i = 0; i < N; i++) g_targets[i] = (i * 7 + 3) % V;
  float loss, one = 1.0f;
  ce_fwd(&loss);
  double ref = 0;
  for (int r = 0; r < N; r++) {
    double m = -1e30, s = 0;
    for (int i = 0; i < V; i++) m = fmax(m, g_inp[r * V + i]);
    for (int i = 0; i < V; i++) s += exp(g_inp[r * V + i] - m);
    ref += m + log(s) - g_inp[r * V + g_targets[r]];
  }
  CHECK_NEAR(loss, ref, 1e-5 * ref);
  float *grad = malloc(n * sizeof(float));
  memcpy(grad, g_dl, n * sizeof(float));
  CHECK_GRAD("crossentropy dlogits", fd_error(ce_fwd, &loss, &one, 1, g_inp, grad, n));
  /* in place: dlogits may alias logits */
  float *copy = malloc(n * sizeof(float));
  memcpy(copy, g_inp, n * sizeof(float));
  double l2 = kt__crossentropy_forward(copy, copy, g_targets, N, V, 1.0f);
  CHECK_NEAR(l2, ref, 1e-5 * ref);
  CHECK(!memcmp(copy, grad, n * sizeof(float)));
  free(g_inp), free(g_dl), free(grad), free(copy);
}

/* ---- attention ------------------------------------------------------------------ */

static int g_B = B, g_T = T, g_C = C, g_NH = NH;

static float *g_scratch;
static void att_fwd(float *out) {
  kt__attention_forward(out, g_att, g_scratch, g_inp, g_B, g_T, g_C, g_NH);
}

/* Naive causal attention in double, forward and backward, straight from the
 * definitions: y_t = sum_{u<=t} p_tu v_u, p_t = softmax_u(q_t.k_u / sqrt(hs)).
 * y (B,T,C); dinp (B,T,3C) = the gradient of sum(y * dy). */
static void attention_reference(double *y, double *dinp, const float *inp, const float *dy, int Bn,
                                int Tn, int Cn, int NHn) {
  int hs = Cn / NHn;
  double scale = 1 / sqrt(hs), *p = malloc(sizeof(double) * Tn), *dp = malloc(sizeof(double) * Tn);
  for (size_t i = 0; i < (size_t)Bn * Tn * 3 * Cn; i++) dinp[i] = 0;
#define Q(b, t) (inp + ((size_t)(b)*Tn + (t)) * 3 * Cn + h * hs)
#define DQ(b, t) (dinp + ((size_t)(b)*Tn + (t)) * 3 * Cn + h * hs)
  for (int b = 0; b < Bn; b++)
    for (int h = 0; h < NHn; h++)
      for (int t = 0; t < Tn; t++) {
        const float *q = Q(b, t), *g = dy + ((size_t)b * Tn + t) * Cn + h * hs;
        double m = -1e300, s = 0, dot = 0;
        for (int u = 0; u <= t; u++) {
          p[u] = 0;
          for (int i = 0; i < hs; i++) p[u] += (double)q[i] * Q(b, u)[Cn + i] * scale;
          m = fmax(m, p[u]);
        }
        for (int u = 0; u <= t; u++) s += (p[u] = exp(p[u] - m));
        for (int u = 0; u <= t; u++) p[u] /= s;
        for (int i = 0; i < hs; i++) {
          double acc = 0;
          for (int u = 0; u <= t; u++) acc += p[u] * Q(b, u)[2 * Cn + i];
          y[((size_t)b * Tn + t) * Cn + h * hs + i] = acc;
        }
        for (int u = 0; u <= t; u++) { /* dp = dy.v, dv += p dy */
          dp[u] = 0;
          for (int i = 0; i < hs; i++) {
            dp[u] += (double)g[i] * Q(b, u)[2 * Cn + i];
            DQ(b, u)[2 * Cn + i] += p[u] * g[i];
          }
          dot += p[u] * dp[u];
        }
        for (int u = 0; u <= t; u++) { /* ds = p (dp - dot); dq, dk through the scores */
          double ds = p[u] * (dp[u] - dot) * scale;
          for (int i = 0; i < hs; i++) {
            DQ(b, t)[i] += ds * Q(b, u)[Cn + i];
            DQ(b, u)[Cn + i] += ds * q[i];
          }
        }
      }
#undef Q
#undef DQ
  free(p), free(dp);
}

/* ||x - ref|| / ||ref|| */
static double rel_err(const float *x, const double *ref, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) num += (x[i] - ref[i]) * (x[i] - ref[i]), den += ref[i] * ref[i];
  return sqrt(num) / (sqrt(den) + 1e-30);
}

/* Forward and backward against the naive reference; the shapes cover rows
 * shorter than a vector block, whole blocks, and blocks plus a scalar tail. */
static void attention_vs_reference(int Bn, int Tn, int Cn, int NHn) {
  size_t n_in = (size_t)Bn * Tn * 3 * Cn, n_out = (size_t)Bn * Tn * Cn;
  float *inp = rand_vec(n_in, 2), *dy = rand_vec(n_out, 1), *out = zeros(n_out);
  float *att = malloc(sizeof(float) * Bn * NHn * Tn * Tn), *din = zeros(n_in);
  float *scratch = malloc(kt__attention_scratch_floats(Tn, Cn / NHn) * sizeof(float));
  for (size_t i = 0; i < (size_t)Bn * NHn * Tn * Tn; i++) att[i] = NAN; /* all written */
  for (size_t i = 0; i < kt__attention_scratch_floats(Tn, Cn / NHn); i++) scratch[i] = NAN;
  double *y = malloc(n_out * sizeof(double)), *dref = malloc(n_in * sizeof(double));
  attention_reference(y, dref, inp, dy, Bn, Tn, Cn, NHn);
  kt__attention_forward(out, att, scratch, inp, Bn, Tn, Cn, NHn);
  kt__attention_backward(din, scratch, dy, inp, att, Bn, Tn, Cn, NHn);
  double ey = rel_err(out, y, n_out), ed = rel_err(din, dref, n_in);
  int above = 0; /* probabilities above the diagonal are exactly 0 */
  for (int r = 0; r < Bn * NHn; r++)
    for (int t = 0; t < Tn; t++)
      for (int u = t + 1; u < Tn; u++) above += att[((size_t)r * Tn + t) * Tn + u] != 0.0f;
  printf("  B=%d T=%d C=%d NH=%d: rel err vs double %.2e (out), %.2e (dqkv)\n", Bn, Tn, Cn, NHn, ey,
         ed);
  CHECK_MSG(ey < 1e-5, "attention forward T=%d: relative error %.3g", Tn, ey);
  CHECK_MSG(ed < 1e-5, "attention backward T=%d: relative error %.3g", Tn, ed);
  CHECK_EQ_INT(above, 0);
  /* written, not accumulated: a second backward over garbage gives the same */
  for (size_t i = 0; i < n_in; i++) din[i] = 1e3f;
  kt__attention_backward(din, scratch, dy, inp, att, Bn, Tn, Cn, NHn);
  ed = rel_err(din, dref, n_in);
  CHECK_MSG(ed < 1e-5, "attention backward over a dirty buffer: relative error %.3g", ed);
  free(inp), free(dy), free(out), free(att), free(din), free(scratch), free(y), free(dref);
}

static void test_attention(void) {
  printf("attention\n");
  size_t n_in = (size_t)N * 3 * C, n_out = (size_t)N * C;
  g_inp = rand_vec(n_in, 2);
  g_att = zeros((size_t)B * NH * T * T);
  g_scratch = zeros(kt__attention_scratch_floats(T, C / NH));
  float *out = zeros(n_out), *R = rand_vec(n_out, 1), *din = zeros(n_in);
  att_fwd(out);
  kt__attention_backward(din, g_scratch, R, g_inp, g_att, B, T, C, NH);
  CHECK_GRAD("attention dqkv", fd_error(att_fwd, out, R, n_out, g_inp, din, n_in));
  /* sensitivity: a 10% error in dq alone must fail the check */
  float *wrong = zeros(n_in);
  for (size_t i = 0; i < n_in; i++) wrong[i] = din[i];
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++)
      for (int i = 0; i < C; i++)
        wrong[((size_t)b * T + t) * 3 * C + i] *= 1.1f; /* dq off by 10% */
  double e = fd_error(att_fwd, out, R, n_out, g_inp, wrong, n_in);
  printf("  %-28s rel err %.2e (must fail)\n", "attention, dq off by 10%", e);
  CHECK(e > TOL);
  free(g_inp), free(g_att), free(g_scratch), free(out), free(R), free(din), free(wrong);
  /* finite differences where the rows run in vector blocks (T = 37: two
   * blocks, masked on the diagonal, and a scalar tail) */
  g_B = 1, g_T = 37, g_C = 8, g_NH = 2;
  n_in = (size_t)g_T * 3 * g_C, n_out = (size_t)g_T * g_C;
  g_inp = rand_vec(n_in, 2);
  g_att = zeros((size_t)g_NH * g_T * g_T);
  g_scratch = zeros(kt__attention_scratch_floats(g_T, g_C / g_NH));
  out = zeros(n_out), R = rand_vec(n_out, 1), din = zeros(n_in);
  att_fwd(out);
  kt__attention_backward(din, g_scratch, R, g_inp, g_att, g_B, g_T, g_C, g_NH);
  CHECK_GRAD("attention dqkv, T=37", fd_error(att_fwd, out, R, n_out, g_inp, din, n_in));
  free(g_inp), free(g_att), free(g_scratch), free(out), free(R), free(din);
  g_B = B, g_T = T, g_C = C, g_NH = NH;
  /* a NaN query makes its head's output row NaN (no softmax that quietly
   * turns it into numbers); the other rows stay finite */
  g_inp = rand_vec(n_in = (size_t)N * 3 * C, 2);
  g_att = zeros((size_t)B * NH * T * T);
  g_scratch = zeros(kt__attention_scratch_floats(T, C / NH));
  out = zeros(n_out = (size_t)N * C);
  g_inp[3 * 3 * C] = NAN; /* b = 0, t = 3, head 0, q[0] */
  att_fwd(out);
  CHECK(isnan(out[3 * C]) && isnan(out[3 * C + C / NH - 1]));
  CHECK(isfinite(out[2 * C]) && isfinite(out[3 * C + C / NH]));
  free(g_inp), free(g_att), free(g_scratch), free(out);
  attention_vs_reference(B, T, C, NH);
  attention_vs_reference(2, 16, 8, 2);
  attention_vs_reference(2, 37, 12, 3);
  attention_vs_reference(1, 64, 64, 4);
  attention_vs_reference(1, 50, 24, 1);
}

static void test_fast_expf(void) {
  double maxrel = 0;
  for (float x = -86.0f; x < 88.0f; x += 0.0137f)
    maxrel = fmax(maxrel, fabs(kt__fast_expf(x) - exp(x)) / exp(x));
  printf("fast expf max rel err on [-86, 88]: %.2e\n", maxrel);
  CHECK(maxrel < 5e-7);
  CHECK(kt__fast_expf(-1e30f) >= 0.0f && kt__fast_expf(-1e30f) < 1e-37f);
  CHECK(kt__fast_expf(-INFINITY) < 1e-37f);
  CHECK(isfinite(kt__fast_expf(1e30f)));
  CHECK(kt__fast_expf(0.0f) == 1.0f);
  CHECK(isnan(kt__fast_expf(NAN)) && isnan(kt__fast_expf(-NAN)));
  /* NaN goes through the vectorised kernels too */
  float x[40], y[40], g[40];
  for (int i = 0; i < 40; i++) x[i] = i == 21 ? NAN : 0.1f * (float)i - 2.0f;
  kt__gelu_forward_grad(y, g, x, 40);
  CHECK(isnan(y[21]) && isnan(g[21]) && isfinite(y[20]) && isfinite(y[22]));
}

/* When kaiten replaced OpenBLAS's fallback kernels at load time, the
 * replacement is what runs (the matmul checks above ran on it). */
static void test_blas_core(void) {
  const char *chosen, *core = kt_blas_core(&chosen);
  printf("OpenBLAS core: %s%s\n", core,
         chosen ? " (chosen by kaiten over a pre-AVX2 fallback)" : "");
  if (chosen) CHECK(!strcmp(core, chosen));
}

int main(void) {
  kt_blas_choose_core(); /* as kaiten's main does */
  for (int i = 0; i < N; i++) g_tokens[i] = (i * 5 + 1) % V;
  test_fast_expf();
  test_encoder();
  test_layernorm();
  test_matmul();
  test_gelu();
  test_crossentropy();
  test_attention();
  test_blas_core();
  return kt_test_done(__FILE__);
}
