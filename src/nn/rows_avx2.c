/* The bias + GELU row kernel of rows_avx512.c on AVX2 + FMA, for CPUs
 * without AVX-512: the pass a library's fc product gets (kt__epilogue_apply)
 * with the reciprocal as the 12-bit estimate and one Newton step, where the
 * vectorised C divides (vdivps). */
#include "nn/avx2.h"

#ifdef KT__HEAD_TILES

int kt__avx2_ok(void) { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

/* o = gelu(x + b), g = gelu'(x + b) on the lanes k (all where full) */
AVX2 static inline __attribute__((always_inline)) void bias_gelu8(float *o, float *g,
                                                                  const float *x, const float *b,
                                                                  __m256i k, int full) {
  __m256 grad, v = _mm256_add_ps(load_lanes(x, k, full), load_lanes(b, k, full));
  __m256 out = gelu8(v, &grad);
  store_lanes(o, out, k, full);
  store_lanes(g, grad, k, full);
}

AVX2 void kt__bias_gelu_row_avx2(float *o, float *g, const float *x, const float *b, int n) {
  int i = 0;
  __m256i all = first_lanes(VW);
  for (; i + VW <= n; i += VW) bias_gelu8(o + i, g + i, x + i, b + i, all, 1);
  if (i < n) bias_gelu8(o + i, g + i, x + i, b + i, first_lanes(n - i), 0);
}

#else
typedef int kt__no_avx2_rows; /* ISO C: a translation unit declares something */
#endif
