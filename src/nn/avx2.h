/* AVX2 + FMA helpers shared by the kernels written with its intrinsics
 * (gemm_tiles_avx2.c, head_tiles_avx2.c): built for AVX2 + FMA whatever
 * the build's target, called only where the CPU has them
 * (kt__avx2_ok). Only with KT__HEAD_TILES (x86-64, GCC or Clang). */
#ifndef KT_NN_AVX2_H
#define KT_NN_AVX2_H

#include "nn/gpt.h"
#include "nn/gpt_simd.h" /* GELU_K, GELU_A */

#ifdef KT__HEAD_TILES
#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma")))
#define VW 8 /* floats in a vector */

/* The first w lanes (of 8) as a mask for maskload / maskstore. */
AVX2 static inline __attribute__((always_inline)) __m256i first_lanes(int w) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(w), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

AVX2 static inline __attribute__((always_inline)) __m256 load_lanes(const float *p, __m256i k,
                                                                    int full) {
  return full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, k);
}
AVX2 static inline __attribute__((always_inline)) void store_lanes(float *p, __m256 v, __m256i k,
                                                                   int full) {
  if (full) _mm256_storeu_ps(p, v);
  else _mm256_maskstore_ps(p, k, v);
}

/* exp(x), lane by lane, as exp16 (avx512.h) computes it; 2^n is built in
 * the exponent bits (n stays in [-126, 127] on the clamped range). */
AVX2 static inline __attribute__((always_inline)) __m256 exp8(__m256 x) {
  x = _mm256_max_ps(_mm256_set1_ps(-87.0f), _mm256_min_ps(_mm256_set1_ps(88.0f), x));
  __m256 big = _mm256_set1_ps(12582912.0f);
  __m256 nb = _mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504f), big), n = _mm256_sub_ps(nb, big);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187e-6f), r);
  __m256 p = _mm256_fmadd_ps(r, _mm256_set1_ps(0.0013888889f), _mm256_set1_ps(0.008333334f));
  p = _mm256_fmadd_ps(r, p, _mm256_set1_ps(0.041666668f));
  p = _mm256_fmadd_ps(r, p, _mm256_set1_ps(0.16666667f));
  p = _mm256_fmadd_ps(r, p, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(r, p, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(r, p, _mm256_set1_ps(1.0f));
  /* nb's bits are big's plus n; shifted left 23, all but n + 127 (in [1, 254])
   * falls off: 2^n's bits */
  __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_castps_si256(nb), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

/* gelu(v) and gelu'(v) in *grad, as gelu16 (avx512.h): the reciprocal is the
 * 12-bit estimate and one Newton step. */
AVX2 static inline __attribute__((always_inline)) __m256 gelu8(__m256 v, __m256 *grad) {
  const __m256 k2 = _mm256_set1_ps(2.0f * GELU_K), one = _mm256_set1_ps(1.0f);
  __m256 v2 = _mm256_mul_ps(v, v);
  __m256 z = _mm256_mul_ps(_mm256_mul_ps(k2, v), _mm256_fmadd_ps(_mm256_set1_ps(GELU_A), v2, one));
  __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 e = exp8(_mm256_or_ps(z, sign)); /* z = 2u; e = exp(-|z|) */
  __m256 d = _mm256_add_ps(one, e), r = _mm256_rcp_ps(d);
  r = _mm256_fmadd_ps(r, _mm256_fnmadd_ps(d, r, one), r); /* 1 / (1 + e) */
  __m256 er = _mm256_mul_ps(e, r);
  __m256 neg = _mm256_and_ps(z, sign); /* the sign bit selects, as blendv reads it */
  __m256 sig = _mm256_blendv_ps(r, er, neg), comp = _mm256_blendv_ps(er, r, neg);
  __m256 dz = _mm256_mul_ps(k2, _mm256_fmadd_ps(_mm256_set1_ps(3.0f * GELU_A), v2, one));
  *grad = _mm256_fmadd_ps(_mm256_mul_ps(v, _mm256_mul_ps(sig, comp)), dz, sig);
  return _mm256_mul_ps(v, sig);
}

/* The 8 x 8 block in r transposed: t[i] = column i of r's rows. */
AVX2 static inline __attribute__((always_inline)) void transpose8_regs(__m256 *r, __m256 *t) {
  for (int i = 0; i < 4; i++) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; i++) {
    r[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    r[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    r[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    r[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int j = 0; j < 4; j++) {
    t[j] = _mm256_permute2f128_ps(r[j], r[j + 4], 0x20);
    t[j + 4] = _mm256_permute2f128_ps(r[j], r[j + 4], 0x31);
  }
}

/* d row i (8 floats, i < out_rows) = column i of the 8 x 8 block at s (rows
 * lds apart; rows from `rows` on and the lanes outside `cols` read as zero,
 * and never touched). */
AVX2 static inline void transpose8(float *d, size_t ldd, const float *s, size_t lds, int rows,
                                   __m256i cols, int out_rows) {
  __m256 r[VW], t[VW];
  for (int i = 0; i < VW; i++)
    r[i] = i < rows ? _mm256_maskload_ps(s + i * lds, cols) : _mm256_setzero_ps();
  transpose8_regs(r, t);
  for (int i = 0; i < out_rows; i++) _mm256_storeu_ps(d + i * ldd, t[i]);
}

/* transpose8 on a whole 8 x 8 block: every row there (plain loads), every
 * lane stored. */
AVX2 static inline void transpose8_full(float *d, size_t ldd, const float *s, size_t lds) {
  __m256 r[VW], t[VW];
  for (int i = 0; i < VW; i++) r[i] = _mm256_loadu_ps(s + i * lds);
  transpose8_regs(r, t);
  for (int i = 0; i < VW; i++) _mm256_storeu_ps(d + i * ldd, t[i]);
}

/* The 6 floats at s to d (a 16-byte and an 8-byte move: nothing past either). */
AVX2 static inline __attribute__((always_inline)) void copy6(float *d, const float *s) {
  _mm_storeu_ps(d, _mm_loadu_ps(s));
  _mm_storel_epi64((__m128i *)(d + 4), _mm_loadl_epi64((const __m128i *)(s + 4)));
}

/* 6 rows of 8 floats (lds apart) at s, transposed into d: d[kk * 6 + i] =
 * s[i * lds + kk], 48 floats, nothing written past them. Rows 0-3 go as
 * 4 x 4 transposes in each 128-bit half, rows 4-5 as pairs. */
AVX2 static inline void transpose6x8(float *d, const float *s, size_t lds) {
  __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + lds), r2 = _mm256_loadu_ps(s + 2 * lds);
  __m256 r3 = _mm256_loadu_ps(s + 3 * lds), r4 = _mm256_loadu_ps(s + 4 * lds);
  __m256 r5 = _mm256_loadu_ps(s + 5 * lds);
  __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
  __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
  __m256 q[4] = {_mm256_shuffle_ps(t0, t2, 0x44), _mm256_shuffle_ps(t0, t2, 0xEE),
                 _mm256_shuffle_ps(t1, t3, 0x44), _mm256_shuffle_ps(t1, t3, 0xEE)};
  __m256 u0 = _mm256_unpacklo_ps(r4, r5), u1 = _mm256_unpackhi_ps(r4, r5);
  /* q[j]: rows 0-3 at depth j (low half) and j + 4 (high); u0: rows 4-5 at
   * depths 0, 1 (low) and 4, 5 (high), u1 at 2, 3 and 6, 7 */
  for (int h = 0; h < 2; h++) {
    __m128 p0 = h ? _mm256_extractf128_ps(u0, 1) : _mm256_castps256_ps128(u0);
    __m128 p1 = h ? _mm256_extractf128_ps(u1, 1) : _mm256_castps256_ps128(u1);
    float *o = d + 24 * h;
    for (int j = 0; j < 4; j++) {
      __m128 rows = h ? _mm256_extractf128_ps(q[j], 1) : _mm256_castps256_ps128(q[j]);
      __m128 pair = j < 2 ? p0 : p1;
      _mm_storeu_ps(o + 6 * j, rows);
      if (j % 2 == 0) _mm_storel_pi((__m64 *)(o + 6 * j + 4), pair);
      else _mm_storeh_pi((__m64 *)(o + 6 * j + 4), pair);
    }
  }
}

/* The sum and the largest of v's lanes. */
AVX2 static inline __attribute__((always_inline)) float sum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
AVX2 static inline __attribute__((always_inline)) float max8(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
}

#endif
#endif
