/* AVX-512 helpers shared by the kernels written with its intrinsics
 * (head_tiles.c, rows_avx512.c): built for AVX-512F whatever the build's
 * target, called only where the CPU has it (kt__avx512_ok). Only with KT__HEAD_TILES (x86-64, GCC or Clang). */
#ifndef KT_NN_AVX512_H
#define KT_NN_AVX512_H

#include "nn/gpt.h"
#include "nn/gpt_simd.h" /* GELU_K, GELU_A */

#ifdef KT__HEAD_TILES
#include <immintrin.h>

#define KT__AVX512 __attribute__((target("avx512f")))

/* exp(x), lane by lane, as kt__fast_expf computes it: x clamped to
 * [-87, 88] (max and min return their second operand when either is NaN,
 * so a NaN stays NaN), 2^n applied by scalef. */
KT__AVX512 static inline __attribute__((always_inline)) __m512 exp16(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-87.0f), _mm512_min_ps(_mm512_set1_ps(88.0f), x));
  __m512 big = _mm512_set1_ps(12582912.0f);
  __m512 n = _mm512_sub_ps(_mm512_fmadd_ps(x, _mm512_set1_ps(1.44269504f), big), big);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187e-6f), r);
  __m512 p = _mm512_fmadd_ps(r, _mm512_set1_ps(0.0013888889f), _mm512_set1_ps(0.008333334f));
  p = _mm512_fmadd_ps(r, p, _mm512_set1_ps(0.041666668f));
  p = _mm512_fmadd_ps(r, p, _mm512_set1_ps(0.16666667f));
  p = _mm512_fmadd_ps(r, p, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(r, p, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(r, p, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

/* gelu(v) lane by lane, and gelu'(v) in *grad, as gelu_with_grad
 * (gpt_simd.h): sig = sigmoid(2u) from e = exp(-|2u|), 1 / (1 + e) and its
 * complement e / (1 + e) taken by the sign of 2u; the reciprocal is the
 * 14-bit estimate and one Newton step (a vdivps stalls the vector ports). */
KT__AVX512 static inline __attribute__((always_inline)) __m512 gelu16(__m512 v, __m512 *grad) {
  const __m512 k2 = _mm512_set1_ps(2.0f * GELU_K), one = _mm512_set1_ps(1.0f);
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
  *grad = _mm512_fmadd_ps(_mm512_mul_ps(v, _mm512_mul_ps(sig, comp)), dz, sig);
  return _mm512_mul_ps(v, sig);
}

/* Lanes [i, n) of a 16-lane chunk starting at i. */
static inline __mmask16 lanes_to(int i, int n) {
  return n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1u);
}

#endif
#endif
