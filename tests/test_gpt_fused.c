/* The fast GPT path against its reference:
 *  - every GEMM library (OpenBLAS, and BLIS, oneDNN and kaiten's own where
 *    installed or the CPU runs it) against a double-precision product, all
 *    transposes, strides and beta, whole and split between a pool's
 *    threads; and with each epilogue (bias, residual, bias + GELU);
 *  - the pool: every task once, whatever the threads;
 *  - the threaded and fused kernels against the serial ones, and the same
 *    bits for 1, 2 and 3 threads;
 *  - blocked attention against the full T x T kernels, for T and block
 *    sizes that do and do not divide;
 *  - 50 training steps of a GPT (AdamW, clipping) on the fast path with 2
 *    threads per rank and the GEMM library auto chooses (and kaiten's own),
 *    against the reference kernels on one thread and OpenBLAS: every loss
 *    equal to 1e-5. */
#include <stdint.h>

#include "check.h"
#include "kaiten/generators.h"
#include "kaiten/runtime.h"
#include "nn/gpt.h"
#include "nn/gpt_simd.h" /* gelu_with_grad */
#include "nn/nn.h"

static uint64_t rng_state = 7;
static float urand(void) { /* [-1, 1) */
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (float)((rng_state >> 40) * (1.0 / 8388608.0)) - 1.0f;
}
static float *rand_vec(size_t n) {
  float *v = malloc((n ? n : 1) * sizeof(float));
  for (size_t i = 0; i < n; i++) v[i] = urand();
  return v;
}
static float *copy_vec(const float *x, size_t n) {
  float *v = malloc((n ? n : 1) * sizeof(float));
  memcpy(v, x, n * sizeof(float));
  return v;
}

/* ---- GEMM libraries ------------------------------------------------------- */

/* c (m,n) = beta c + op(a) op(b) in double, row-major with leading dimensions */
static void naive_gemm(int ta, int tb, int m, int n, int k, const float *a, int lda, const float *b,
                       int ldb, float beta, float *c, int ldc) {
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double s = 0;
      for (int p = 0; p < k; p++)
        s +=
            (double)(ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
      c[i * ldc + j] = (float)(beta * c[i * ldc + j] + s);
    }
}

static void test_libraries(void) {
  int shapes[][3] = {{1, 1, 1},      {7, 5, 3},     {64, 48, 33}, {130, 70, 96},
                     {300, 257, 64}, {50, 70, 530}, {9, 1060, 40}}; /* n past a packed block */
  kt__pool *pool = kt__pool_create(3);
  CHECK(kt__pool_threads(pool) == 3);
  for (int kind = KT_GEMM_OPENBLAS; kind < KT_GEMM_COUNT; kind++) {
    const char *ver = NULL;
    if (!kt_gemm_available((kt_gemm_kind)kind, &ver)) {
      printf("  %s: not installed, skipped\n", kt_gemm_name((kt_gemm_kind)kind));
      continue;
    }
    double worst = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
      for (int t = 0; t < 8; t++) {
        int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2], ta = t & 1, tb = t >> 1 & 1;
        float beta = t & 4 ? 1.0f : 0.0f;
        int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 5, ldc = n + 2;
        float *a = rand_vec((size_t)(ta ? k : m) * lda), *b = rand_vec((size_t)(tb ? n : k) * ldb);
        float *want = rand_vec((size_t)m * ldc), *got = copy_vec(want, (size_t)m * ldc);
        float *split = copy_vec(want, (size_t)m * ldc);
        naive_gemm(ta, tb, m, n, k, a, lda, b, ldb, beta, want, ldc);
        kt__gemm_call((kt_gemm_kind)kind, ta, tb, m, n, k, a, lda, b, ldb, beta, got, ldc);
        kt__exec saved =
            kt__exec_enter(pool, (kt_gemm_kind)kind, NULL); /* split between 3 threads */
        kt__matmul_ld(split, ldc, a, lda, b, ldb, m, n, k, ta, tb, beta);
        kt__exec_leave(saved);
        double e = kt_test_rel_err(got, want, (size_t)m * ldc);
        double es = kt_test_rel_err(split, want, (size_t)m * ldc);
        worst = e > worst ? e : worst, worst = es > worst ? es : worst;
        CHECK_MSG(e < 1e-6 && es < 1e-6,
                  "%s m=%d n=%d k=%d ta=%d tb=%d beta=%g: rel err %.3g, split %.3g",
                  kt_gemm_name((kt_gemm_kind)kind), m, n, k, ta, tb, beta, e, es);
        free(a), free(b), free(want), free(got), free(split);
      }
    /* nothing to sum (k = 0, so a leading dimension of 0, as kt__matmul_ep passes): c = beta c
     * plus the epilogue, not c as it was */
    float dummy = 1.0f, c0[6] = {1, 2, 3, 4, 5, 6}, bias0[3] = {7, 8, 9};
    kt__epilogue ep0 = {.bias = bias0};
    kt__gemm_call_ep((kt_gemm_kind)kind, 0, 0, 2, 3, 0, &dummy, 0, &dummy, 3, 0.0f, c0, 3, &ep0);
    CHECK_MSG(c0[0] == 7 && c0[4] == 8 && c0[5] == 9, "%s, k = 0, beta 0: c[0] %g",
              kt_gemm_name((kt_gemm_kind)kind), c0[0]);
    kt__gemm_call((kt_gemm_kind)kind, 1, 1, 2, 3, 0, &dummy, 2, &dummy, 0, 1.0f, c0, 3);
    CHECK(c0[0] == 7 && c0[5] == 9);
    printf("  %s %s: worst rel err %.2e against double\n", kt_gemm_name((kt_gemm_kind)kind),
           ver ? ver : "", worst);
  }
  kt__pool_destroy(pool);
  CHECK(kt_gemm_from_name("onednn") == KT_GEMM_ONEDNN && kt_gemm_from_name("mkl") < 0);
  kt_model_config cfg;
  kt_model_config_default(&cfg, KT_MODEL_GPT);
  kt_gemm_choice ch;
  kt_error err;
  cfg.gemm = KT_GEMM_COUNT;
  CHECK(kt_gemm_choose(&cfg, 4, &ch, &err) == KT_EINVAL);
  cfg.gemm = KT_GEMM_OPENBLAS;
  CHECK(kt_gemm_choose(&cfg, 4, &ch, &err) == KT_OK && ch.kind == KT_GEMM_OPENBLAS &&
        !strcmp(ch.how, "given"));
}

/* Each library's products with every epilogue (bias, residual, bias +
 * GELU and its derivative), whole and split between 3 threads by rows and
 * by columns, against the double product and the reference GELU. */
static void test_epilogues(void) {
  int shapes[][3] = {{13, 40, 24}, {100, 7, 300}, {25, 150, 300}};
  kt__pool *pool = kt__pool_create(3);
  for (int kind = KT_GEMM_OPENBLAS; kind < KT_GEMM_COUNT; kind++) {
    if (!kt_gemm_available((kt_gemm_kind)kind, NULL)) continue;
    double worst = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
      for (int what = 1; what < 8; what++) {                         /* bias, res, gelu as bits */
        if ((what & KT__EPI_GELU) && (what & KT__EPI_RES)) continue; /* not a product of ours */
        int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        float *a = rand_vec((size_t)m * k), *b = rand_vec((size_t)n * k), *bias = rand_vec(n);
        float *res = rand_vec((size_t)m * n), *want = rand_vec((size_t)m * n);
        float *wgrad = rand_vec((size_t)m * n), *got = rand_vec((size_t)m * n);
        float *grad = rand_vec((size_t)m * n);
        naive_gemm(0, 1, m, n, k, a, k, b, k, 0.0f, want, n);
        for (size_t i = 0; i < (size_t)m * n; i++) {
          float v = want[i] + (what & KT__EPI_BIAS ? bias[i % (size_t)n] : 0.0f);
          v += what & KT__EPI_RES ? res[i] : 0.0f;
          want[i] = what & KT__EPI_GELU ? gelu_with_grad(v, &wgrad[i]) : v;
        }
        kt__epilogue ep = {.bias = what & KT__EPI_BIAS ? bias : NULL,
                           .res = what & KT__EPI_RES ? res : NULL,
                           .ldr = n,
                           .grad = grad,
                           .gelu = !!(what & KT__EPI_GELU)};
        CHECK(kt__epilogue_kind(&ep) == what);
        for (int threads = 1; threads <= 3; threads += 2) {
          kt__exec saved = kt__exec_enter(threads > 1 ? pool : NULL, (kt_gemm_kind)kind, NULL);
          kt__matmul_ep(got, a, b, m, n, k, 0, 1, 0.0f, &ep);
          kt__exec_leave(saved);
          double e = kt_test_rel_err(got, want, (size_t)m * n);
          double eg = what & KT__EPI_GELU ? kt_test_rel_err(grad, wgrad, (size_t)m * n) : 0;
          worst = e > worst ? e : worst, worst = eg > worst ? eg : worst;
          CHECK_MSG(e < 1e-5 && eg < 1e-5, "%s m=%d n=%d k=%d epilogue %d, %d threads: %.3g %.3g",
                    kt_gemm_name((kt_gemm_kind)kind), m, n, k, what, threads, e, eg);
        }
        free(a), free(b), free(bias), free(res), free(want), free(wgrad), free(got), free(grad);
      }
    printf("  %s with epilogues: worst rel err %.2e\n", kt_gemm_name((kt_gemm_kind)kind), worst);
  }
  kt__pool_destroy(pool);
}

/* ---- the pool ---------------------------------------------------------------- */

static int counts[1000];
static void count_task(void *ctx, int task, int thread) {
  (void)ctx;
  __atomic_fetch_add(&counts[task], 1 + 1000 * (thread > 0), __ATOMIC_RELAXED);
}

static void test_pool(void) {
  for (int threads = 1; threads <= 4; threads++) {
    kt__pool *p = kt__pool_create(threads);
    CHECK(kt__pool_threads(p) == threads);
    for (int n = 0; n < 1000; n += 97) {
      memset(counts, 0, sizeof counts);
      for (int rep = 0; rep < 3; rep++) kt__pool_run(p, n, count_task, NULL);
      int ok = 1;
      for (int i = 0; i < n; i++) ok &= counts[i] % 1000 == 3;
      CHECK_MSG(ok, "threads %d, %d tasks: some task did not run exactly 3 times", threads, n);
    }
    kt__pool_destroy(p);
  }
}

/* ---- threaded and fused kernels ------------------------------------------------ */

enum { N = 203, C = 40, OC = 72, V = 37 };

/* fn on three pools (1, 2, 3 threads): the outputs (n floats at out) of
 * the 2- and 3-thread runs must equal the 1-thread run's bit for bit. */
typedef void (*kernel_fn)(float *out);
static void same_bits(const char *name, kernel_fn fn, float *out, size_t n) {
  float *first = NULL;
  for (int threads = 1; threads <= 3; threads++) {
    kt__pool *p = kt__pool_create(threads);
    kt__exec saved = kt__exec_enter(p, KT_GEMM_OPENBLAS, NULL);
    fn(out);
    kt__exec_leave(saved);
    kt__pool_destroy(p);
    if (!first) first = copy_vec(out, n);
    else
      CHECK_MSG(!memcmp(first, out, n * sizeof(float)), "%s: %d threads changed bits", name,
                threads);
  }
  free(first);
}

static float *g_x, *g_w, *g_b, *g_d, *g_res, *g_mean, *g_rstd, *g_part;

static void ln_bwd_par(float *out) { /* out: dinp (N,C) | dw (C) | db (C) */
  memset(out + (size_t)N * C, 0, 2 * C * sizeof(float));
  kt__layernorm_backward_par(out, out + (size_t)N * C, out + (size_t)N * C + C, g_part, g_res, g_d,
                             g_x, g_w, g_mean, g_rstd, N, C);
}

static void test_layernorm(void) {
  float *out = rand_vec((size_t)N * C), *ref = rand_vec((size_t)N * C);
  float *mean = rand_vec(N), *rstd = rand_vec(N), *rm = rand_vec(N), *rr = rand_vec(N);
  kt__layernorm_forward(ref, rm, rr, g_x, g_w, g_b, N, C);
  kt__pool *p = kt__pool_create(3);
  kt__exec saved = kt__exec_enter(p, KT_GEMM_OPENBLAS, NULL);
  kt__layernorm_forward_par(out, mean, rstd, g_x, g_w, g_b, N, C);
  kt__exec_leave(saved);
  kt__pool_destroy(p);
  CHECK(!memcmp(out, ref, sizeof(float) * N * C) && !memcmp(mean, rm, sizeof(float) * N));
  g_mean = mean, g_rstd = rstd;
  size_t n = (size_t)N * C + 2 * C;
  float *got = rand_vec(n), *want = calloc(n, sizeof(float));
  kt__layernorm_backward(want, want + (size_t)N * C, want + (size_t)N * C + C, g_res, g_d, g_x, g_w,
                         mean, rstd, N, C);
  same_bits("layernorm backward", ln_bwd_par, got, n);
  double e = kt_test_rel_err(got, want, n);
  CHECK_MSG(e < 1e-6, "layernorm backward: rel err %.3g", e);
  printf("  layernorm backward (3 threads): rel err %.2e\n", e);
  free(out), free(ref), free(rm), free(rr), free(got), free(want), free(mean), free(rstd);
}

/* out: gelu (N,OC) | grad (N,OC); the epilogue pass a library's product
 * gets, in place, in two row ranges as two threads would run it */
static void bias_gelu_pass(float *out) {
  kt__epilogue ep = {.bias = g_b, .grad = out + (size_t)N * OC, .gelu = 1};
  memcpy(out, g_d, sizeof(float) * N * OC);
  kt__epilogue_apply(out, OC, N / 3, OC, &ep);
  ep.grad += (size_t)(N / 3) * OC;
  kt__epilogue_apply(out + (size_t)(N / 3) * OC, OC, N - N / 3, OC, &ep);
}
static void gelu_bwd_par(float *out) { /* out: d (N,OC) | dbias (OC) */
  memcpy(out, g_d, sizeof(float) * N * OC);
  memset(out + (size_t)N * OC, 0, OC * sizeof(float));
  kt__gelu_backward_saved_par(out, out + (size_t)N * OC, g_part, g_res, N, OC);
}
static void bias_bwd_par(float *out) {
  memset(out, 0, OC * sizeof(float));
  kt__bias_backward_par(out, g_part, g_d, N, OC);
}

static void test_gelu_bias(void) {
  size_t n = 2 * (size_t)N * OC;
  float *got = rand_vec(n), *want = rand_vec(n), *biased = rand_vec((size_t)N * OC);
  for (int r = 0; r < N; r++)
    for (int o = 0; o < OC; o++) biased[r * OC + o] = g_d[r * OC + o] + g_b[o];
  kt__gelu_forward_grad(want, want + (size_t)N * OC, biased, (size_t)N * OC);
  bias_gelu_pass(got);
  CHECK_MSG(kt_test_rel_err(got, want, n) < 1e-6, "bias + GELU: rel err %.3g",
            kt_test_rel_err(got, want, n));
  n = (size_t)N * OC + OC;
  memcpy(want, g_d, sizeof(float) * N * OC);
  memset(want + (size_t)N * OC, 0, OC * sizeof(float));
  kt__gelu_backward_saved(want, want + (size_t)N * OC, g_res, N, OC);
  same_bits("GELU backward", gelu_bwd_par, got, n);
  CHECK_MSG(kt_test_rel_err(got, want, n) < 1e-6, "GELU backward: rel err %.3g",
            kt_test_rel_err(got, want, n));
  memset(want, 0, OC * sizeof(float));
  kt__bias_backward(want, g_d, N, OC);
  same_bits("bias backward", bias_bwd_par, got, OC);
  CHECK_MSG(kt_test_rel_err(got, want, OC) < 1e-6, "bias backward: rel err %.3g",
            kt_test_rel_err(got, want, OC));
  free(got), free(want), free(biased);
}

static int g_targets[N];
static double g_loss;
static void ce_par(float *out) {
  g_loss = kt__crossentropy_forward_par(out, g_x, g_targets, N, V, 0.5f);
}

static void test_crossentropy(void) {
  for (int i = 0; i < N; i++) g_targets[i] = (i * 7) % V;
  float *got = rand_vec((size_t)N * V), *want = rand_vec((size_t)N * V);
  double lw = kt__crossentropy_forward(want, g_x, g_targets, N, V, 0.5f);
  same_bits("cross-entropy", ce_par, got, (size_t)N * V);
  CHECK(!memcmp(got, want, sizeof(float) * N * V));
  CHECK_NEAR(g_loss, lw, 1e-9 * fabs(lw));
  free(got), free(want);
}

/* ---- blocked attention ---------------------------------------------------------- */

static void attention_case(int B, int T, int Ch, int NH, int qb, int threads) {
  size_t ni = (size_t)B * T * 3 * Ch, no = (size_t)B * T * Ch, na = (size_t)B * NH * T * T;
  float *inp = rand_vec(ni), *dout = rand_vec(no);
  float *y0 = rand_vec(no), *y1 = rand_vec(no), *a0 = rand_vec(na), *a1 = rand_vec(na);
  float *d0 = rand_vec(ni), *d1 = rand_vec(ni);
  float *sc = rand_vec(kt__attention_scratch_floats(T, Ch / NH) * (size_t)threads);
  kt__attention_forward(y0, a0, sc, inp, B, T, Ch, NH);
  kt__attention_backward(d0, sc, dout, inp, a0, B, T, Ch, NH);
  kt__pool *p = kt__pool_create(threads);
  kt__exec saved = kt__exec_enter(p, KT_GEMM_OPENBLAS, NULL);
  kt__attention_forward_blocked(y1, a1, sc, inp, B, T, Ch, NH, qb);
  kt__attention_backward_blocked(d1, sc, dout, inp, a1, B, T, Ch, NH, qb);
  kt__exec_leave(saved);
  kt__pool_destroy(p);
  double ey = kt_test_rel_err(y1, y0, no), ea = kt_test_rel_err(a1, a0, na);
  double ed = kt_test_rel_err(d1, d0, ni);
  CHECK_MSG(ey < 1e-6 && ea < 1e-6 && ed < 1e-6,
            "attention B=%d T=%d C=%d NH=%d qb=%d threads=%d: rel err out %.3g att %.3g din %.3g",
            B, T, Ch, NH, qb, threads, ey, ea, ed);
  free(inp), free(dout), free(y0), free(y1), free(a0), free(a1), free(d0), free(d1), free(sc);
}

/* A NaN query makes its own output row NaN and no other (a softmax that
 * turned it into numbers would hide a diverging run): heads of 16 floats,
 * the register tiles where the CPU has AVX-512 or AVX2. */
static void attention_nan_row(void) {
  int T = 40, Ch = 32, NH = 2;
  float *inp = rand_vec((size_t)T * 3 * Ch), *y = rand_vec((size_t)T * Ch);
  float *att = rand_vec((size_t)NH * T * T), *sc = rand_vec(kt__attention_scratch_floats(T, 16));
  inp[(size_t)20 * 3 * Ch] = NAN; /* t = 20, head 0, q[0] */
  kt__pool *p = kt__pool_create(1);
  kt__exec saved = kt__exec_enter(p, KT_GEMM_OPENBLAS, NULL);
  kt__attention_forward_blocked(y, att, sc, inp, 1, T, Ch, NH, 16);
  kt__exec_leave(saved);
  kt__pool_destroy(p);
  int nan_rows = 0, finite_rest = 1;
  for (int t = 0; t < T; t++)
    for (int i = 0; i < Ch; i++) {
      int bad = !isfinite(y[(size_t)t * Ch + i]);
      if (t == 20 && i < 16) nan_rows += bad;
      else finite_rest &= !bad;
    }
  CHECK_EQ_INT(nan_rows, 16);
  CHECK(finite_rest);
  free(inp), free(y), free(att), free(sc);
}

static void test_attention(void) {
  attention_nan_row();
  int Ts[] = {1, 5, 8, 17, 64, 70, 130}, qbs[] = {1, 8, 16, 64, 0};
  for (size_t t = 0; t < sizeof Ts / sizeof *Ts; t++)
    for (size_t q = 0; q < sizeof qbs / sizeof *qbs; q++)
      attention_case(2, Ts[t], 24, 3, qbs[q], 1 + (int)(q % 3));
  printf("  blocked attention: %zu cases\n", sizeof Ts / sizeof *Ts * (sizeof qbs / sizeof *qbs));
  /* heads of 16, 32, 64 and 80 floats: the register tiles where the CPU has
   * AVX-512 (every tile height and width, whole and partial 16s of keys) */
  int hts[] = {1, 6, 16, 33, 64, 70, 130}, chs[][2] = {{48, 3}, {64, 2}, {128, 2}, {160, 2}};
  int cases = 0;
  for (size_t c = 0; c < sizeof chs / sizeof *chs; c++)
    for (size_t t = 0; t < sizeof hts / sizeof *hts; t++, cases++)
      attention_case(2, hts[t], chs[c][0], chs[c][1], t % 2 ? 64 : 0, 1 + (int)(t % 2));
#ifdef KT__HEAD_TILES
  printf("  register tiles: %s\n", kt__head_tiles_ok(16) ? "on" : "off (no AVX-512 or AVX2)");
#endif
  printf("  heads of 16..80 floats: %d cases\n", cases);
}

/* ---- 50 training steps, fast against reference ---------------------------------- */

#define STEPS 50
#define M 2
#define BMB 2

static int train(int reference, int threads, kt_gemm_kind gemm, int heads, double *losses,
                 kt_error *err) {
  kt_model_config m;
  kt_model_config_default(&m, KT_MODEL_GPT);
  m.layers = 2, m.hidden = 48, m.heads = heads, m.seq_len = 80, m.seed = 5, m.gemm = gemm;
  kt_schedule s;
  kt_gen_params gp = {.p = 1, .m = M};
  if (kt_generate(KT_SCHED_1F1B, &gp, &s, err)) return 1;
  kt_runtime_config rc;
  kt_runtime_config_default(&rc);
  rc.schedule = &s, rc.micro_batch = BMB, rc.model = m;
  rc.optim.kind = KT_OPTIM_ADAMW, rc.optim.lr = 1e-3, rc.optim.grad_clip = 1.0;
  kt__gpt_set_reference(reference);
  kt_blas_set_threads(threads);
  kt_runtime *rt;
  int rcode = kt_runtime_create_threads(&rc, &rt, err) ? 1 : 0;
  if (!rcode)
    printf("  %s kernels, %d thread%s, %s\n", reference ? "reference" : "fast", threads,
           threads > 1 ? "s" : "", kt_gemm_name(kt_chunk_gemm(kt_runtime_chunk(rt, 0, 0), NULL)));
  static int tok[M * BMB * 80], tgt[M * BMB * 80];
  for (int step = 0; !rcode && step < STEPS; step++) {
    for (int i = 0; i < M * BMB * 80; i++) {
      tok[i] = (int)((i * 131u + (unsigned)step * 977u) % 251u);
      tgt[i] = (tok[i] * 7 + 3) % 256;
    }
    kt_microbatch mbs[M];
    for (int j = 0; j < M; j++)
      mbs[j] =
          (kt_microbatch){.b = BMB, .tokens = tok + j * BMB * 80, .targets = tgt + j * BMB * 80};
    kt_step_result res;
    if (kt_runtime_step(rt, step, mbs, 1, &res, err)) rcode = 1;
    losses[step] = res.loss;
  }
  if (!rcode) kt_runtime_destroy(rt);
  kt_schedule_free(&s);
  kt__gpt_set_reference(0);
  kt_blas_set_threads(1);
  return rcode;
}

/* Heads of 12 floats (the GEMM library) and of 16 (the register tiles,
 * where the CPU has AVX-512) against the reference kernels. */
static void test_training(int heads) {
  double ref[STEPS], fast[STEPS];
  kt_error err;
  printf("  heads of %d floats\n", 48 / heads);
  REQUIRE_VOID(train(1, 1, KT_GEMM_OPENBLAS, heads, ref, &err) == 0);
  /* auto, and kaiten's own GEMM with every epilogue fused where the CPU has it */
  kt_gemm_kind libs[2] = {KT_GEMM_AUTO, KT_GEMM_KAITEN};
  for (int l = 0; l < 2; l++) {
    if (libs[l] != KT_GEMM_AUTO && !kt_gemm_available(libs[l], NULL)) continue;
    REQUIRE_VOID(train(0, 2, libs[l], heads, fast, &err) == 0);
    double worst = 0;
    for (int i = 0; i < STEPS; i++) {
      double e = fabs(fast[i] - ref[i]) / fabs(ref[i]);
      worst = e > worst ? e : worst;
    }
    printf("  50 steps: loss %.6f -> %.6f (reference %.6f -> %.6f), worst rel diff %.2e\n", fast[0],
           fast[STEPS - 1], ref[0], ref[STEPS - 1], worst);
    CHECK_MSG(worst <= 1e-5, "fast path's losses (%s) differ from the reference by %.3g",
              kt_gemm_name(libs[l]), worst);
  }
  CHECK(ref[STEPS - 1] < ref[0] - 0.5); /* it trained */
}

int main(void) {
  kt_blas_choose_core();
  printf("GEMM libraries\n");
  test_libraries();
  test_epilogues();
  printf("pool\n");
  test_pool();
  g_x = rand_vec((size_t)N * OC), /* (N,C), (N,V) */ g_w = rand_vec(OC), g_b = rand_vec(OC);
  g_d = rand_vec((size_t)N * OC), g_res = rand_vec((size_t)N * OC);
  g_part = rand_vec(2 * kt__partials_floats(N, OC));
  printf("threaded kernels\n");
  test_layernorm();
  test_gelu_bias();
  test_crossentropy();
  printf("attention\n");
  test_attention();
#ifdef KT__HEAD_TILES
  if (kt__avx512_ok() && kt__avx2_ok()) { /* the AVX2 kernels too, where AVX-512 hides them */
    printf("AVX2 kernels on this AVX-512 CPU\n");
    kt__avx512_mask(1);
    test_libraries();
    test_epilogues();
    test_attention();
    kt__avx512_mask(0);
  }
#endif
  printf("training\n");
  test_training(4);
  test_training(3);
  free(g_x), free(g_w), free(g_b), free(g_d), free(g_res), free(g_part);
  return kt_test_done(__FILE__);
}
