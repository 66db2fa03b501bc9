/* Element-wise row kernels written with AVX-512 intrinsics where the
 * vectorised C of gpt_fast.c leaves time on the table. The bias + GELU
 * pass: in C its reciprocal is a division (vdivps, a long stall on the
 * vector ports each 16 floats) and the row loop reloaded its constants
 * every vector; here the reciprocal is the 14-bit estimate and one Newton
 * step. One 512 x 1024 pass with its operands in L2 or L3: 0.55-0.58 ns a
 * float, against 0.76 for the C row loop (0.65 for the reference kernel's
 * flat loop); with its operands coming from memory it waits on them,
 * about 0.95 either way. */
#include "nn/avx512.h"

#ifdef KT__HEAD_TILES

static int avx512_masked; /* kt__avx512_mask */
void kt__avx512_mask(int masked) { avx512_masked = masked; }
int kt__avx512_ok(void) { return !avx512_masked && __builtin_cpu_supports("avx512f"); }

/* o = gelu(x + b), g = gelu'(x + b) on the lanes k */
KT__AVX512 static inline __attribute__((always_inline)) void bias_gelu16(float *o, float *g,
                                                                         const float *x,
                                                                         const float *b,
                                                                         __mmask16 k) {
  __m512 grad, v = _mm512_add_ps(_mm512_maskz_loadu_ps(k, x), _mm512_maskz_loadu_ps(k, b));
  __m512 out = gelu16(v, &grad);
  if (k == (__mmask16)0xFFFF) { /* unmasked where it can: masked stores cost more */
    _mm512_storeu_ps(o, out);
    _mm512_storeu_ps(g, grad);
  } else {
    _mm512_mask_storeu_ps(o, k, out);
    _mm512_mask_storeu_ps(g, k, grad);
  }
}

KT__AVX512 void kt__bias_gelu_row_avx512(float *o, float *g, const float *x, const float *b,
                                         int n) {
  int i = 0;
  for (; i + 16 <= n; i += 16) bias_gelu16(o + i, g + i, x + i, b + i, (__mmask16)0xFFFF);
  if (i < n) bias_gelu16(o + i, g + i, x + i, b + i, lanes_to(i, n));
}

#else
typedef int kt__no_avx512_rows; /* ISO C: a translation unit declares something */
#endif
