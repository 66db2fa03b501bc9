/* kaiten's AVX2 GEMM against another version of itself and OpenBLAS, in
 * one process, on the larger GPT's products (bench_gpt's larger model:
 * N=512 rows of a micro-batch, C=256, 4C=1024; the forward's products with
 * the weight transposed, the input gradients' with neither, the weight
 * gradients' with the first operand transposed), one thread, operands in
 * cache, no epilogue. Built and run by bench/tiles_ab.sh, which compiles a
 * revision's src/nn/gemm_tiles_avx2.c with its entry point renamed
 * kt_ab_sgemm: this tree's kernel is "new", that one "old".
 *
 * Each round calls every shape once on each side, old and new in turns
 * (which goes first alternates), then OpenBLAS; reported per shape: the
 * medians of each side's GFLOP/s and of the per-round ratios new/old and
 * new/OpenBLAS (a time ratio inverted: > 1 is new faster), and their
 * geometric means over the shapes.
 * Usage: tiles_ab [ROUNDS] (default 40). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "kaiten/core.h"
#include "kaiten/model.h"
#include "nn/gpt.h"
#include "nn/nn.h"

void kt_ab_sgemm(int trans_a, int trans_b, int m, int n, int k, const float *a, int lda,
                 const float *b, int ldb, float beta, float *c, int ldc, const kt__epilogue *ep);

#define MAX_ROUNDS 400

static const int shapes[][5] = {/* m, n, k, a transposed, b transposed */
                                {512, 1024, 256, 0, 1}, {512, 256, 1024, 0, 1},
                                {512, 768, 256, 0, 1},  {512, 256, 256, 0, 1},
                                {512, 1024, 256, 0, 0}, {512, 256, 1024, 0, 0},
                                {256, 1024, 512, 1, 0}, {1024, 256, 512, 1, 0}};

typedef void (*sgemm_fn)(int, int, int, int, int, const float *, int, const float *, int, float,
                         float *, int, const kt__epilogue *);

static void openblas(int ta, int tb, int m, int n, int k, const float *a, int lda, const float *b,
                     int ldb, float beta, float *c, int ldc, const kt__epilogue *ep) {
  (void)ep;
  kt__sgemm(ta, tb, m, n, k, a, lda, b, ldb, beta, c, ldc);
}

static double timed(sgemm_fn f, const int *s, const float *a, const float *b, float *c) {
  int m = s[0], n = s[1], k = s[2], ta = s[3], tb = s[4];
  double t0 = kt_now();
  f(ta, tb, m, n, k, a, ta ? m : k, b, tb ? k : n, 0.0f, c, n, NULL);
  return kt_now() - t0;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 40;
  if (rounds < 1 || rounds > MAX_ROUNDS) {
    fprintf(stderr, "tiles_ab: ROUNDS '%s': give 1 to %d\n", argv[1], MAX_ROUNDS);
    return 2;
  }
  if (!kt__avx2_ok()) {
    fprintf(stderr, "tiles_ab: this CPU has no AVX2 + FMA: the kernel does not run here\n");
    return 2;
  }
  kt_blas_set_threads(1);
  size_t big = 1024 * 1024; /* floats: every operand of every shape */
  float *a = kt__alloc_floats(big), *b = kt__alloc_floats(big), *c = kt__alloc_floats(big);
  if (!a || !b || !c) {
    fprintf(stderr, "tiles_ab: out of memory\n");
    return 1;
  }
  for (size_t i = 0; i < big; i++) a[i] = 0.01f * (float)(i % 17), b[i] = 0.01f * (float)(i % 13);
  size_t n_shapes = sizeof shapes / sizeof shapes[0];
  static double t_new[MAX_ROUNDS], t_old[MAX_ROUNDS], t_blas[MAX_ROUNDS];
  static double vs_old[MAX_ROUNDS], vs_blas[MAX_ROUNDS];
  double log_old = 0, log_blas = 0;
  printf("# kaiten's AVX2 GEMM, this tree (new) against another revision's (old) and OpenBLAS, "
         "one thread, in cache, median of %d rounds\n",
         rounds);
  printf("%-18s %8s %8s %9s %8s %9s\n", "m x n x k", "new GF/s", "old GF/s", "OpenBLAS", "new/old",
         "new/BLAS");
  for (size_t i = 0; i < n_shapes; i++) {
    const int *s = shapes[i];
    double gflop = 2.0 * s[0] * s[1] * s[2] / 1e9;
    for (int w = 0; w < 3; w++) /* packed buffers, pages and OpenBLAS's threads in place */
      timed(kt__tiles_avx2_sgemm, s, a, b, c), timed(kt_ab_sgemm, s, a, b, c),
          timed(openblas, s, a, b, c);
    for (int r = 0; r < rounds; r++) {
      if (r % 2) {
        t_new[r] = timed(kt__tiles_avx2_sgemm, s, a, b, c);
        t_old[r] = timed(kt_ab_sgemm, s, a, b, c);
      } else {
        t_old[r] = timed(kt_ab_sgemm, s, a, b, c);
        t_new[r] = timed(kt__tiles_avx2_sgemm, s, a, b, c);
      }
      t_blas[r] = timed(openblas, s, a, b, c);
      vs_old[r] = t_old[r] / t_new[r], vs_blas[r] = t_blas[r] / t_new[r];
    }
    double r_old = kt_median(vs_old, (size_t)rounds), r_blas = kt_median(vs_blas, (size_t)rounds);
    log_old += log(r_old), log_blas += log(r_blas);
    printf("%4d x %4d x %4d %c%c %8.1f %8.1f %9.1f %8.3f %9.3f\n", s[0], s[1], s[2],
           s[3] ? 'T' : 'N', s[4] ? 'T' : 'N', gflop / kt_median(t_new, (size_t)rounds),
           gflop / kt_median(t_old, (size_t)rounds), gflop / kt_median(t_blas, (size_t)rounds),
           r_old, r_blas);
  }
  printf("geometric mean over the shapes: new/old %.3f, new/OpenBLAS %.3f\n",
         exp(log_old / (double)n_shapes), exp(log_blas / (double)n_shapes));
  free(a), free(b), free(c);
  return 0;
}
