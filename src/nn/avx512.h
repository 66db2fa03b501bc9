/* AVX-512 helpers shared by the kernels written with its intrinsics
 * (head_tiles.c, rows_avx512.c): built for AVX-512F whatever the build's
 * target, called only where the CPU has it (kt__avx512_ok). Only with KT__HEAD_TILES (x86-64, GCC or Clang). */
#ifndef KT_NN_AVX512_H
#define KT_NN_AVX512_H

#include "nn/gpt.h"

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

/* Lanes [i, n) of a 16-lane chunk starting at i. */
static inline __mmask16 lanes_to(int i, int n) {
  return n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1u);
}

#endif
#endif
