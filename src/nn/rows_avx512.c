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
#include "nn/gpt_simd.h" /* GELU_K, GELU_A */

#ifdef KT__HEAD_TILES

int kt__avx512_ok(void) { return __builtin_cpu_supports("avx512f"); }

/* o = gelu(x + b), g = gelu'(x + b), as gelu_with_grad (gpt_simd.h):
 * sig = sigmoid(2u) from e = exp(-|2u|), 1 / (1 + e) and its complement
 * e / (1 + e) taken by the sign of 2u. */
KT__AVX512 static inline __attribute__((always_inline)) void bias_gelu16(float *o, float *g,
                                                                         const float *x,
                                                                         const float *b,
                                                                         __mmask16 k) {
  const __m512 k2 = _mm512_set1_ps(2.0f * GELU_K), one = _mm512_set1_ps(1.0f);
  __m512 v = _mm512_add_ps(_mm512_maskz_loadu_ps(k, x), _mm512_maskz_loadu_ps(k, b));
  __m512 v2 = _mm512_mul_ps(v, v);
  __m512 z = _mm512_mul_ps(_mm512_mul_ps(k2, v), _mm512_fmadd_ps(_mm512_set1_ps(GELU_A), v2, one));
  __m512i zi = _mm512_castps_si512(z); /* z = 2u; e = exp(-|z|) */
  __m512 e = exp16(_mm512_castsi512_ps(_mm512_or_si512(zi, _mm512_set1_epi32((int)0x80000000u))));
  __m512 d = _mm512_add_ps(one, e), r = _mm512_rcp14_ps(d);
  r = _mm512_fmadd_ps(r, _mm512_fnmadd_ps(d, r, one), r); /* 1 / (1 + e) */
  __m512 er = _mm512_mul_ps(e, r);
  __mmask16 neg = _mm512_cmplt_epi32_mask(zi, _mm512_setzero_si512());
  __m512 sig = _mm512_mask_blend_ps(neg, r, er), comp = _mm512_mask_blend_ps(neg, er, r);
  __m512 dz = _mm512_mul_ps(k2, _mm512_fmadd_ps(_mm512_set1_ps(3.0f * GELU_A), v2, one));
  __m512 grad = _mm512_fmadd_ps(_mm512_mul_ps(v, _mm512_mul_ps(sig, comp)), dz, sig);
  if (k == (__mmask16)0xFFFF) { /* unmasked where it can: masked stores cost more */
    _mm512_storeu_ps(o, _mm512_mul_ps(v, sig));
    _mm512_storeu_ps(g, grad);
  } else {
    _mm512_mask_storeu_ps(o, k, _mm512_mul_ps(v, sig));
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
