/* The GPT kernels on a rank's threads, and the fused ones: rows are split
 * into blocks of KT__ROWS handed to the current pool (kt__parallel_range).
 * A kernel that sums over rows (a bias or LayerNorm gradient) sums each
 * block into its own row of `partials`, then the blocks in order, so the
 * result does not depend on the number of threads. The serial kernels of
 * gpt_kernels.c are the reference these are tested against.
 * Legend: N = rows (B * T), C = channels, OC = output channels, V = vocabulary. */
#include <stdlib.h>

#include "nn/gpt_simd.h"

size_t kt__partials_floats(int N, int OC) { return (size_t)kt__blocks(N, KT__ROWS) * OC; }

/* dst (n) += the blocks' partial sums, partials (blocks, n), in block order */
static void add_partials(float *dst, float *partials, int blocks, int n) {
  for (int k = 1; k < blocks; k++) row_add(partials, partials + (size_t)k * n, n);
  if (blocks > 0) row_add(dst, partials, n);
}

/* ---- LayerNorm ------------------------------------------------------------- */

typedef struct {
  float *out, *mean, *rstd, *dinp, *dweight, *dbias, *partials;
  const float *inp, *weight, *bias, *dres, *dout, *cmean, *crstd;
  int C;
} ln_job;

static void ln_forward_rows(void *arg, int lo, int hi, int block, int thread) {
  (void)block, (void)thread;
  const ln_job *j = arg;
  size_t r = (size_t)lo * j->C;
  kt__layernorm_forward(j->out + r, j->mean + lo, j->rstd + lo, j->inp + r, j->weight, j->bias,
                        hi - lo, j->C);
}

void kt__layernorm_forward_par(float *out, float *mean, float *rstd, const float *inp,
                               const float *weight, const float *bias, int N, int C) {
  ln_job j = {
      .out = out, .mean = mean, .rstd = rstd, .inp = inp, .weight = weight, .bias = bias, .C = C};
  kt__parallel_range(N, KT__ROWS, ln_forward_rows, &j);
}

static void ln_backward_rows(void *arg, int lo, int hi, int block, int thread) {
  (void)thread;
  const ln_job *j = arg;
  size_t r = (size_t)lo * j->C;
  float *pw = j->partials + (size_t)block * 2 * j->C, *pb = pw + j->C; /* (C), (C) */
  row_zero(pw, 2 * j->C);
  kt__layernorm_backward(j->dinp + r, pw, pb, j->dres ? j->dres + r : NULL, j->dout + r, j->inp + r,
                         j->weight, j->cmean + lo, j->crstd + lo, hi - lo, j->C);
}

void kt__layernorm_backward_par(float *dinp, float *dweight, float *dbias, float *partials,
                                const float *dres, const float *dout, const float *inp,
                                const float *weight, const float *mean, const float *rstd, int N,
                                int C) {
  ln_job j = {.dinp = dinp,
              .partials = partials,
              .dres = dres,
              .dout = dout,
              .inp = inp,
              .weight = weight,
              .cmean = mean,
              .crstd = rstd,
              .C = C};
  kt__parallel_range(N, KT__ROWS, ln_backward_rows, &j);
  int blocks = kt__blocks(N, KT__ROWS);
  for (int k = 1; k < blocks; k++) row_add(partials, partials + (size_t)k * 2 * C, 2 * C);
  if (blocks > 0) {
    row_add(dweight, partials, C);
    row_add(dbias, partials + C, C);
  }
}

/* ---- linear layers, bias, GELU ------------------------------------------------ */

typedef struct {
  float *d, *partials;
  const float *a;
  int OC;
} rows_job;

/* The bias (and residual) ride in the product's epilogue: fused into the
 * tiles' stores on kaiten's own kernel, a pass over each thread's rows
 * right after the product on a library. */
void kt__matmul_forward_par(float *out, const float *inp, const float *weight, const float *bias,
                            int N, int C, int OC) {
  kt__epilogue ep = {.bias = bias};
  kt__matmul_ep(out, inp, weight, N, OC, C, 0, 1, 0.0f, bias ? &ep : NULL);
}

void kt__matmul_residual_forward_par(float *out, const float *inp, const float *weight,
                                     const float *bias, const float *residual, int N, int C,
                                     int OC) {
  kt__epilogue ep = {.bias = bias, .res = residual, .ldr = OC};
  kt__matmul_ep(out, inp, weight, N, OC, C, 0, 1, 0.0f, &ep);
}

void kt__matmul_bias_gelu_forward_par(float *out, float *grad, const float *inp,
                                      const float *weight, const float *bias, int N, int C,
                                      int OC) {
  kt__epilogue ep = {.bias = bias, .grad = grad, .gelu = 1};
  kt__matmul_ep(out, inp, weight, N, OC, C, 0, 1, 0.0f, &ep);
}

static void bias_backward_rows(void *arg, int lo, int hi, int block, int thread) {
  (void)thread;
  const rows_job *j = arg;
  float *p = j->partials + (size_t)block * j->OC;
  row_zero(p, j->OC);
  kt__bias_backward(p, j->d + (size_t)lo * j->OC, hi - lo, j->OC);
}

void kt__bias_backward_par(float *dbias, float *partials, const float *dout, int N, int OC) {
  rows_job j = {.d = (float *)dout, .partials = partials, .OC = OC};
  kt__parallel_range(N, KT__ROWS, bias_backward_rows, &j);
  add_partials(dbias, partials, kt__blocks(N, KT__ROWS), OC);
}

static void gelu_backward_rows(void *arg, int lo, int hi, int block, int thread) {
  (void)thread;
  const rows_job *j = arg;
  float *p = j->partials + (size_t)block * j->OC;
  row_zero(p, j->OC);
  kt__gelu_backward_saved(j->d + (size_t)lo * j->OC, p, j->a + (size_t)lo * j->OC, hi - lo, j->OC);
}

void kt__gelu_backward_saved_par(float *d, float *dbias, float *partials, const float *grad, int N,
                                 int OC) {
  rows_job j = {.d = d, .partials = partials, .a = grad, .OC = OC};
  kt__parallel_range(N, KT__ROWS, gelu_backward_rows, &j);
  add_partials(dbias, partials, kt__blocks(N, KT__ROWS), OC);
}

/* ---- embedding and cross-entropy ---------------------------------------------- */

typedef struct {
  float *out, *dlogits;
  const float *wte, *wpe, *logits;
  const int *tokens, *pos;
  double *loss;
  int T, C, V;
  float dscale;
} seq_job;

static void encoder_rows(void *arg, int lo, int hi, int block, int thread) {
  (void)block, (void)thread;
  const seq_job *j = arg;
  for (int n = lo; n < hi; n++) /* one row: B = 1, T = 1, at its position */
    kt__encoder_forward(j->out + (size_t)n * j->C, j->tokens + n, j->wte,
                        j->wpe + (size_t)(j->pos ? j->pos[n] : n % j->T) * j->C, 1, 1, j->C);
}

void kt__encoder_forward_pos_par(float *out, const int *tokens, const int *pos, const float *wte,
                                 const float *wpe, int N, int C) {
  seq_job j = {.out = out, .wte = wte, .wpe = wpe, .tokens = tokens, .pos = pos, .T = 1, .C = C};
  kt__parallel_range(N, KT__ROWS, encoder_rows, &j);
}

void kt__encoder_forward_par(float *out, const int *tokens, const float *wte, const float *wpe,
                             int B, int T, int C) {
  seq_job j = {.out = out, .wte = wte, .wpe = wpe, .tokens = tokens, .T = T, .C = C};
  kt__parallel_range(B * T, KT__ROWS, encoder_rows, &j);
}

static void crossentropy_rows(void *arg, int lo, int hi, int block, int thread) {
  (void)thread;
  const seq_job *j = arg;
  size_t r = (size_t)lo * j->V;
  j->loss[block] = kt__crossentropy_forward(j->dlogits + r, j->logits + r, j->tokens + lo, hi - lo,
                                            j->V, j->dscale);
}

double kt__crossentropy_forward_par(float *dlogits, const float *logits, const int *targets, int N,
                                    int V, float dscale) {
  int blocks = kt__blocks(N, KT__ROWS);
  double *loss = calloc((size_t)(blocks > 0 ? blocks : 1), sizeof *loss);
  if (!loss) return kt__crossentropy_forward(dlogits, logits, targets, N, V, dscale);
  seq_job j = {.dlogits = dlogits,
               .logits = logits,
               .tokens = targets,
               .loss = loss,
               .V = V,
               .dscale = dscale};
  kt__parallel_range(N, KT__ROWS, crossentropy_rows, &j);
  double sum = 0;
  for (int k = 0; k < blocks; k++) sum += loss[k];
  free(loss);
  return sum;
}
