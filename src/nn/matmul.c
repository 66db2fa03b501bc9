/* The one matmul wrapper every product goes through (on the chunk's GEMM
 * library: gemm.c, OpenBLAS in blas.c), split between a rank's threads
 * (pool.c), plus small kernels. */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/core.h"
#include "nn/gpt_simd.h" /* gelu_with_grad */
#include "nn/nn.h"

/* Process-wide counters (every rank thread adds to them): FLOPs issued and
 * nanoseconds spent inside sgemm. */
static atomic_llong flops_issued, nanos_in;

/* Shape log for the benchmarks (off unless kt__matmul_record was called). */
static atomic_int recording;
static pthread_mutex_t shapes_mu = PTHREAD_MUTEX_INITIALIZER;
static kt__matmul_shape *shapes;
static size_t n_shapes, cap_shapes;

/* A product worth splitting between a pool's threads: each piece keeps at
 * least MIN_SPLIT rows or columns and the whole at least MIN_SPLIT_FLOPS. */
#define MIN_SPLIT 32
#define MIN_SPLIT_FLOPS 4e6

typedef struct {
  const float *a, *b;
  float *out;
  int m, n, k, lda, ldb, ldo, trans_a, trans_b, pieces, by_rows;
  float beta;
  kt_gemm_kind gemm;
  const kt__epilogue *ep;
} split_job;

/* ep for the band of rows (by_rows) or columns [lo, ...) of the result. */
static kt__epilogue epilogue_band(const kt__epilogue *ep, int by_rows, int lo, int ldo) {
  kt__epilogue e = *ep;
  size_t row = by_rows ? (size_t)lo : 0, col = by_rows ? 0 : (size_t)lo;
  if (e.bias) e.bias += col;
  if (e.res) e.res += row * (size_t)e.ldr + col;
  if (e.grad) e.grad += row * (size_t)ldo + col;
  return e;
}

/* Piece `task` of the product: a band of output rows (a's rows) or
 * columns (b's columns), each computed whole by the library. */
static void split_piece(void *arg, int task, int thread) {
  (void)thread;
  const split_job *j = arg;
  int len = j->by_rows ? j->m : j->n;
  int lo = (int)((long long)len * task / j->pieces),
      hi = (int)((long long)len * (task + 1) / j->pieces);
  kt__epilogue band;
  const kt__epilogue *ep = NULL;
  if (j->ep) band = epilogue_band(j->ep, j->by_rows, lo, j->ldo), ep = &band;
  if (j->by_rows) {
    const float *a = j->trans_a ? j->a + lo : j->a + (size_t)lo * j->lda;
    kt__gemm_call_ep(j->gemm, j->trans_a, j->trans_b, hi - lo, j->n, j->k, a, j->lda, j->b, j->ldb,
                     j->beta, j->out + (size_t)lo * j->ldo, j->ldo, ep);
  } else {
    const float *b = j->trans_b ? j->b + (size_t)lo * j->ldb : j->b + lo;
    kt__gemm_call_ep(j->gemm, j->trans_a, j->trans_b, j->m, hi - lo, j->k, j->a, j->lda, b, j->ldb,
                     j->beta, j->out + lo, j->ldo, ep);
  }
}

/* Logs a product while recording (with its operands where given); its
 * FLOPs. */
static double record(const kt__matmul_shape *s) {
  if (atomic_load_explicit(&recording, memory_order_relaxed)) {
    pthread_mutex_lock(&shapes_mu); /* recording again under the lock: none is added (nor the log
                                       moved) once kt__matmul_record(0) has returned */
    if (atomic_load(&recording) &&
        !kt_grow((void **)&shapes, &cap_shapes, n_shapes + 1, sizeof *shapes))
      shapes[n_shapes++] = *s;
    pthread_mutex_unlock(&shapes_mu);
  }
  return 2.0 * s->m * s->n * s->k;
}

int kt__epilogue_kind(const kt__epilogue *ep) {
  if (!ep) return 0;
  return (ep->bias ? KT__EPI_BIAS : 0) | (ep->res ? KT__EPI_RES : 0) |
         (ep->gelu ? KT__EPI_GELU : 0);
}

kt__epilogue kt__epilogue_of_kind(int kind, const float *bias, const float *res, int ldr,
                                  float *grad) {
  return (kt__epilogue){.bias = kind & KT__EPI_BIAS ? bias : NULL,
                        .res = kind & KT__EPI_RES ? res : NULL,
                        .ldr = ldr,
                        .grad = grad,
                        .gelu = !!(kind & KT__EPI_GELU)};
}

/* One row of an epilogue as a pass: row = row + bias + res, in that order
 * (as the tiles add them), or with grad its GELU and GELU'. */
ROW void epilogue_row(float *restrict row, float *restrict grad, const float *restrict bias,
                      const float *restrict res, int n) {
  if (grad && bias && !res) { /* the fc's bias + GELU: no test in the loop, so it vectorises */
    for (int j = 0; j < n; j++) row[j] = gelu_with_grad(row[j] + bias[j], &grad[j]);
  } else if (grad) {
    for (int j = 0; j < n; j++) {
      float v = row[j] + (bias ? bias[j] : 0.0f) + (res ? res[j] : 0.0f);
      row[j] = gelu_with_grad(v, &grad[j]);
    }
  } else if (bias && res) {
    for (int j = 0; j < n; j++) row[j] = row[j] + bias[j] + res[j];
  } else if (bias) {
    for (int j = 0; j < n; j++) row[j] += bias[j];
  } else if (res) {
    for (int j = 0; j < n; j++) row[j] += res[j];
  }
}

SIMD_CLONES void kt__epilogue_apply(float *c, int ldc, int m, int n, const kt__epilogue *ep) {
  if (!ep) return;
  for (int i = 0; i < m; i++) {
    float *row = c + (size_t)i * ldc, *grad = ep->gelu ? ep->grad + (size_t)i * ldc : NULL;
    const float *res = ep->res ? ep->res + (size_t)i * ep->ldr : NULL;
#ifdef KT__HEAD_TILES
    if (grad && ep->bias && !res && kt__avx512_ok()) { /* the fc's bias + GELU: in place */
      kt__bias_gelu_row_avx512(row, grad, row, ep->bias, n);
      continue;
    }
    if (grad && ep->bias && !res && kt__avx2_ok()) {
      kt__bias_gelu_row_avx2(row, grad, row, ep->bias, n);
      continue;
    }
#endif
    epilogue_row(row, grad, ep->bias, res, n);
  }
}

SIMD_CLONES void kt__epilogue_fill(float *c, int ldc, int m, int n, const kt__epilogue *ep) {
  for (int i = 0; i < m; i++) {
    float *row = c + (size_t)i * ldc;
    const float *res = ep->res ? ep->res + (size_t)i * ep->ldr : NULL;
    if (ep->bias && res)
      for (int j = 0; j < n; j++) row[j] = ep->bias[j] + res[j];
    else if (res && res != row) memcpy(row, res, (size_t)n * sizeof *row);
    else if (res) continue; /* c is the residual already */
    else memcpy(row, ep->bias, (size_t)n * sizeof *row);
  }
}

static void matmul_ep(float *out, int ldo, const float *a, int lda, const float *b, int ldb, int m,
                      int n, int k, int trans_a, int trans_b, float beta, const kt__epilogue *ep) {
  double t0 = kt_now();
  const kt__exec *e = kt__exec_current();
  int threads = e->in_task ? 1 : kt__pool_threads(e->pool), by_rows = m >= n;
  int len = by_rows ? m : n, pieces = len / MIN_SPLIT < threads ? len / MIN_SPLIT : threads;
  kt_gemm_kind lib = kt__gemm_for(e, m, n, k, trans_a, trans_b); /* of the whole, not a piece */
  if (pieces > 1 && 2.0 * m * n * k >= MIN_SPLIT_FLOPS) {
    split_job j = {.a = a,
                   .b = b,
                   .out = out,
                   .m = m,
                   .n = n,
                   .k = k,
                   .lda = lda,
                   .ldb = ldb,
                   .ldo = ldo,
                   .trans_a = trans_a,
                   .trans_b = trans_b,
                   .pieces = pieces,
                   .by_rows = by_rows,
                   .beta = beta,
                   .gemm = lib,
                   .ep = ep};
    kt__pool_run(e->pool, pieces, split_piece, &j);
  } else {
    kt__gemm_call_ep(lib, trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, out, ldo, ep);
  }
  double seconds = kt_now() - t0;
  kt__matmul_shape s = {.m = m,
                        .n = n,
                        .k = k,
                        .trans_a = trans_a,
                        .trans_b = trans_b,
                        .accumulate = beta != 0.0f,
                        .lda = lda,
                        .ldb = ldb,
                        .ldo = ldo,
                        .epi = kt__epilogue_kind(ep),
                        .seconds = seconds,
                        .a = a,
                        .b = b,
                        .out = out};
  kt__matmul_add(record(&s), seconds);
}

void kt__matmul_ld(float *out, int ldo, const float *a, int lda, const float *b, int ldb, int m,
                   int n, int k, int trans_a, int trans_b, float beta) {
  matmul_ep(out, ldo, a, lda, b, ldb, m, n, k, trans_a, trans_b, beta, NULL);
}

void kt__matmul_ep(float *out, const float *a, const float *b, int m, int n, int k, int trans_a,
                   int trans_b, float beta, const kt__epilogue *ep) {
  matmul_ep(out, n, a, trans_a ? m : k, b, trans_b ? k : n, m, n, k, trans_a, trans_b, beta, ep);
}

void kt__matmul_add(double flops, double seconds) {
  atomic_fetch_add_explicit(&nanos_in, (long long)(seconds * 1e9), memory_order_relaxed);
  atomic_fetch_add_explicit(&flops_issued, (long long)flops, memory_order_relaxed);
}

double kt__matmul_shape_of(int m, int n, int k, int trans_a, int trans_b, float beta, int lda,
                           int ldb, int ldo) {
  kt__matmul_shape s = {m, n, k, trans_a, trans_b, beta != 0.0f, lda, ldb, ldo, .seconds = 0};
  return record(&s);
}

void kt__matmul(float *out, const float *a, const float *b, int m, int n, int k, int trans_a,
                int trans_b, float beta) {
  kt__matmul_ld(out, n, a, trans_a ? m : k, b, trans_b ? k : n, m, n, k, trans_a, trans_b, beta);
}

double kt__matmul_flops(void) { return (double)atomic_load(&flops_issued); }
double kt__matmul_seconds(void) { return 1e-9 * (double)atomic_load(&nanos_in); }
void kt__matmul_reset_counters(void) {
  atomic_store(&flops_issued, 0);
  atomic_store(&nanos_in, 0);
}

void kt__matmul_record(int on) {
  pthread_mutex_lock(&shapes_mu);
  if (on) n_shapes = 0;
  atomic_store(&recording, on);
  pthread_mutex_unlock(&shapes_mu);
}

const kt__matmul_shape *kt__matmul_recorded(size_t *n) {
  *n = n_shapes;
  return shapes;
}

/* The logged shapes on bare sgemm, packed operands (leading dimensions of
 * the shapes themselves) and beta 0: the fastest of reps (seconds; -1 out
 * of memory, 0 when nothing was logged). */
static double replay_log(int reps) {
  size_t big = 1;
  for (size_t i = 0; i < n_shapes; i++) {
    const kt__matmul_shape *s = &shapes[i];
    size_t need[3] = {(size_t)s->m * s->k, (size_t)s->k * s->n, (size_t)s->m * s->n};
    for (int j = 0; j < 3; j++) big = need[j] > big ? need[j] : big;
  }
  float *a = calloc(big, sizeof *a), *b = calloc(big, sizeof *b), *c = calloc(big, sizeof *c);
  double best = a && b && c ? 0 : -1;
  for (int r = 0; best >= 0 && n_shapes && r < reps; r++) {
    double t0 = kt_now();
    for (size_t i = 0; i < n_shapes; i++) {
      const kt__matmul_shape *s = &shapes[i];
      kt__sgemm(s->trans_a, s->trans_b, s->m, s->n, s->k, a, s->trans_a ? s->m : s->k, b,
                s->trans_b ? s->k : s->n, 0.0f, c, s->n);
    }
    double t = kt_now() - t0;
    best = r == 0 || t < best ? t : best;
  }
  free(a), free(b), free(c);
  return best;
}

kt_status kt_matmul_measure(kt_status (*work)(void *ctx, kt_error *err), void *ctx, int reps,
                            double *flops, double *sgemm_seconds, kt_error *err) {
  *flops = *sgemm_seconds = 0;
  double before = kt__matmul_flops();
  kt__matmul_record(1);
  kt_status st = work(ctx, err);
  kt__matmul_record(0);
  *flops = kt__matmul_flops() - before;
  if (st || (st = kt__blas_load(err))) return st;
  double t = replay_log(reps);
  if (t < 0) return kt_fail(err, KT_ENOMEM, "out of memory replaying the matmuls");
  *sgemm_seconds = t;
  return KT_OK;
}

void kt__rng_seed(kt__rng *r, uint64_t seed) { r->s = seed ^ 0x9E3779B97F4A7C15ull; }

uint64_t kt__rng_next(kt__rng *r) {
  uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

float kt__rng_uniform(kt__rng *r) { return (float)(kt__rng_next(r) >> 40) * (1.0f / 16777216.0f); }

float kt__rng_normal(kt__rng *r) {
  float u1 = kt__rng_uniform(r), u2 = kt__rng_uniform(r);
  if (u1 < 1e-7f) u1 = 1e-7f;
  return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}

uint64_t kt__unit_seed(uint64_t model_seed, int unit) {
  kt__rng r;
  kt__rng_seed(&r, model_seed * 0x100000001B3ull + (uint64_t)unit * 0x5851F42D4C957F2Dull + 1);
  return kt__rng_next(&r);
}
