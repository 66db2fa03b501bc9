/* The GPT step's kernels around its products, one at a time, at the larger
 * model's shapes (bench_gpt: L=8, C=256, 8 heads, T=128, micro-batches of
 * b=4, so N=512 rows): bias + GELU forward (the epilogue pass a library's
 * product gets, in place on its output) and its backward, LayerNorm
 * forward and backward, attention forward and backward. Each runs on one
 * thread, in cache (one operand set, called again and again) and cold
 * (COLD_SETS operand sets in turn, past L2, as the step's stash comes),
 * alternating call by call so a slow second hits both. Also the portable
 * C GELU (kt__gelu_forward_grad, without the bias) beside the AVX-512 one
 * in the same rounds: what the intrinsics buy on this machine.
 * Reported: the median over rounds of ns per float (element-wise) or ms per
 * call (attention), with min and max.
 * Usage: bench_kernels [ROUNDS] [--quick] [--tsv FILE]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_rows.h"

#include "nn/gpt.h"
#include "nn/nn.h"

#define N 512 /* rows: b * T */
#define C 256
#define OC (4 * C)
#define B 4
#define T 128
#define NH 8
#define COLD_SETS 24 /* operand sets the cold calls cycle through (> L2) */
#define MAX_ROUNDS 100
#define CALLS 8 /* calls timed per round and kind */

typedef struct {
  float *x, *y, *g, *d; /* (N, OC): input, output, saved derivative, gradient */
  float *qkv, *att, *atty, *dqkv, *dy;
} operands;

static float *floats(size_t n, unsigned seed) {
  float *p = kt__alloc_floats(n);
  if (!p) {
    fprintf(stderr, "bench_kernels: out of memory\n");
    exit(1);
  }
  for (size_t i = 0; i < n; i++) p[i] = 0.01f * (float)((i * 7919u + seed) % 401u) - 2.0f;
  return p;
}

static operands operands_alloc(unsigned seed) {
  size_t qkv = (size_t)N * 3 * C, att = (size_t)B * NH * T * T;
  return (operands){floats((size_t)N * OC, seed),
                    floats((size_t)N * OC, seed + 1),
                    floats((size_t)N * OC, seed + 2),
                    floats((size_t)N * OC, seed + 3),
                    floats(qkv, seed + 4),
                    floats(att, seed + 5),
                    floats((size_t)N * C, seed + 6),
                    floats(qkv, seed + 7),
                    floats((size_t)N * C, seed + 8)};
}

/* shared, small: parameters, partial sums, scratch, LayerNorm statistics */
static float *bias, *weight, *partials, *scratch, *mean, *rstd, *dw, *db;

typedef enum { K_GELU, K_GELU_C, K_GELU_BWD, K_LN, K_LN_BWD, K_ATT, K_ATT_BWD, K_COUNT } kernel;

static const struct {
  const char *id, *what;
  double floats; /* per call, for ns a float; 0: ms a call */
} kernels[K_COUNT] = {
    {"gelu", "bias + GELU epilogue pass and derivative, 512 x 1024", (double)N *OC},
    {"gelu_c", "GELU forward and derivative, portable C (no bias)", (double)N *OC},
    {"gelu_bwd", "GELU backward (saved derivative) + bias gradient", (double)N *OC},
    {"ln", "LayerNorm forward, 512 x 256", (double)N *C},
    {"ln_bwd", "LayerNorm backward, 512 x 256", (double)N *C},
    {"att", "attention forward, B=4 T=128 C=256 NH=8", 0},
    {"att_bwd", "attention backward, B=4 T=128 C=256 NH=8", 0},
};

static void call(kernel k, operands *o) {
  switch (k) {
    case K_GELU: { /* as on a library, in place right after the product */
      kt__epilogue ep = {.bias = bias, .grad = o->g, .gelu = 1};
      kt__epilogue_apply(o->y, OC, N, OC, &ep);
      break;
    }
    case K_GELU_C: kt__gelu_forward_grad(o->y, o->g, o->x, (size_t)N * OC); break;
    case K_GELU_BWD: /* d is restored from x: repeated in place it would underflow */
      memcpy(o->d, o->x, sizeof(float) * (size_t)N * OC);
      kt__gelu_backward_saved_par(o->d, db, partials, o->g, N, OC);
      break;
    case K_LN: kt__layernorm_forward_par(o->y, mean, rstd, o->x, weight, bias, N, C); break;
    case K_LN_BWD:
      kt__layernorm_backward_par(o->y, dw, db, partials, o->d, o->g, o->x, weight, mean, rstd, N,
                                 C);
      break;
    case K_ATT:
      kt__attention_forward_blocked(o->atty, o->att, scratch, o->qkv, B, T, C, NH, KT__ATT_QB);
      break;
    case K_ATT_BWD:
      kt__attention_backward_blocked(o->dqkv, scratch, o->dy, o->qkv, o->att, B, T, C, NH,
                                     KT__ATT_QB);
      break;
    case K_COUNT: break;
  }
}

/* Seconds a call, over CALLS calls on set (in cache) or on sets in turn. */
static double timed(kernel k, operands *sets, int n_sets, int *turn) {
  double t0 = kt_now();
  for (int i = 0; i < CALLS; i++) call(k, &sets[n_sets > 1 ? (*turn)++ % n_sets : 0]);
  return (kt_now() - t0) / CALLS;
}

int main(int argc, char **argv) {
  bench_opts o = bench_args(argc, argv, 15, 3, 1, MAX_ROUNDS);
  kt_blas_set_threads(1);
  bias = floats(OC, 11), weight = floats(C, 12), mean = floats(N, 13), rstd = floats(N, 14);
  dw = floats(C, 15), db = floats(OC, 16);
  partials = floats(2 * kt__partials_floats(N, OC), 17);
  scratch = floats(kt__attention_scratch_floats(T, C / NH), 18);
  for (int i = 0; i < N; i++) rstd[i] = 1.0f + 0.001f * (float)i; /* positive */
  operands sets[COLD_SETS];
  int n_sets = o.quick ? 8 : COLD_SETS;
  for (int s = 0; s < n_sets; s++) sets[s] = operands_alloc((unsigned)s * 31u);
  static double hot[K_COUNT][MAX_ROUNDS], cold[K_COUNT][MAX_ROUNDS];
  int turn = 0;
  for (int k = 0; k < K_COUNT; k++) call((kernel)k, &sets[0]); /* warm up, fault in */
  for (int r = 0; r < o.reps; r++)
    for (int k = 0; k < K_COUNT; k++) {
      hot[k][r] = timed((kernel)k, sets, 1, &turn);
      cold[k][r] = timed((kernel)k, sets, n_sets, &turn);
    }
  printf("# GPT kernels at the larger model's shapes, one thread (kaiten's element-wise "
         "kernels: %s); median (min-max) of %d rounds of %d calls, in cache and over %d operand "
         "sets\n",
         kt_kernel_isa(), o.reps, CALLS, n_sets);
  printf("%-9s %-52s %26s %26s\n", "kernel", "", "in cache", "cold");
  for (int k = 0; k < K_COUNT; k++) {
    int per_float = kernels[k].floats > 0;
    double scale = per_float ? 1e9 / kernels[k].floats : 1e3;
    bench_stat h = bench_stats(hot[k], (size_t)o.reps, scale);
    bench_stat c = bench_stats(cold[k], (size_t)o.reps, scale);
    const char *unit = per_float ? "ns/float" : "ms/call";
    printf("%-9s %-52s %8.3f (%.3f-%.3f) %-8s %8.3f (%.3f-%.3f) %s\n", kernels[k].id,
           kernels[k].what, h.med, h.min, h.max, unit, c.med, c.min, c.max, unit);
    char id[64], measured[160];
    snprintf(id, sizeof id, "kernels.%s.hot", kernels[k].id);
    snprintf(measured, sizeof measured, "%s, in cache", kernels[k].what);
    bench_row(&o, id, measured, unit, h, NULL, 0);
    snprintf(id, sizeof id, "kernels.%s.cold", kernels[k].id);
    snprintf(measured, sizeof measured, "%s, %d operand sets in turn", kernels[k].what, n_sets);
    bench_row(&o, id, measured, unit, c, NULL, 0);
  }
  bench_close(&o);
  return 0;
}
