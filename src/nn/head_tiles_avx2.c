/* Attention's per-head products (head_tiles.c's functions, same contract)
 * where the CPU has AVX2 + FMA but not AVX-512: every tile is 6 rows by
 * 16 columns (12 accumulators; whole 16s, so a tile's causal bound and the
 * callers' 16-float row strides are the AVX-512 kernel's), computed straight
 * from the head's strided slices with no call into a GEMM library. On the
 * library the head's products were small calls at a third of the large
 * products' speed, each over the whole T x T block. */
#include "nn/avx2.h"

#ifdef KT__HEAD_TILES
#include <math.h>
#include <stdint.h>

#define MR 6      /* rows of a tile */
#define NR 16     /* columns of a tile: two vectors */
#define PF 8      /* rows of b ahead to prefetch: its rows are head slices, kilobytes apart */
#define PF_ROWS 4 /* rows of probabilities ahead to prefetch in the softmax backward */

static inline int round_up(int x, int to) { return (x + to - 1) / to * to; }

/* c (mr, 16) = sum over kk in [k0, k1) of A(i, kk) * b row kk, where
 * A(i, kk) = a[i * ars + kk * aks]; overwritten. */
AVX2 static inline __attribute__((always_inline)) void tile(float *c, size_t ldc, const float *a,
                                                            size_t ars, size_t aks, const float *b,
                                                            size_t ldb, int k0, int k1,
                                                            const int mr) {
  __m256 acc[MR][2];
#pragma GCC unroll 6
  for (int i = 0; i < mr; i++) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (int kk = k0; kk < k1; kk++) {
    const float *bk = b + (size_t)kk * ldb, *ak = a + (size_t)kk * aks;
    _mm_prefetch((const char *)(bk + PF * ldb), _MM_HINT_T0); /* may pass b's end: a hint */
    if (aks > 1) { /* a's column kk is a row of its own too */
      _mm_prefetch((const char *)(ak + PF * aks), _MM_HINT_T0);
      _mm_prefetch((const char *)(ak + PF * aks + (size_t)(mr - 1) * ars), _MM_HINT_T0);
    }
    __m256 b0 = _mm256_loadu_ps(bk), b1 = _mm256_loadu_ps(bk + VW);
#pragma GCC unroll 6
    for (int i = 0; i < mr; i++) {
      __m256 x = _mm256_broadcast_ss(ak + (size_t)i * ars);
      acc[i][0] = _mm256_fmadd_ps(x, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(x, b1, acc[i][1]);
    }
  }
#pragma GCC unroll 6
  for (int i = 0; i < mr; i++) {
    _mm256_storeu_ps(c + (size_t)i * ldc, acc[i][0]);
    _mm256_storeu_ps(c + (size_t)i * ldc + VW, acc[i][1]);
  }
}

typedef void (*tile_fn)(float *c, size_t ldc, const float *a, size_t ars, size_t aks,
                        const float *b, size_t ldb, int k0, int k1);
#define TILE(R) \
  AVX2 static void tile_##R(float *c, size_t ldc, const float *a, size_t ars, size_t aks, \
                            const float *b, size_t ldb, int k0, int k1) { \
    tile(c, ldc, a, ars, aks, b, ldb, k0, k1, R); \
  }
// clang-format off
TILE(1) TILE(2) TILE(3) TILE(4) TILE(5) TILE(6)
static const tile_fn tiles[MR] = {tile_1, tile_2, tile_3, tile_4, tile_5, tile_6};
// clang-format on

/* c rows [i, i + mr) x columns [col, col + 16) of a product, summing kk
 * over [k0, k1) (each caller's causal bound for the tile). */
typedef struct {
  float *c;
  size_t ldc, ars, aks, ldb;
  const float *a, *b;
} tile_op;

AVX2 static void run_tile(const tile_op *o, int i, int mr, int col, int k0, int k1) {
  tiles[mr - 1](o->c + (size_t)i * o->ldc + col, o->ldc, o->a + (size_t)i * o->ars, o->ars, o->aks,
                o->b + col, o->ldb, k0, k1);
}

AVX2 void kt__head_transpose_avx2(float *xt, int Tp, const float *x, int ld, int T, int hs) {
  __m256i all = first_lanes(VW);
  for (int j0 = 0; j0 < Tp; j0 += VW) /* rows of x past T give xt's zero columns */
    for (int d = 0; d < hs; d += VW) {
      float *to = xt + (size_t)d * Tp + j0;
      const float *from = x + (size_t)j0 * ld + d;
      if (T - j0 >= VW) transpose8_full(to, (size_t)Tp, from, (size_t)ld);
      else transpose8(to, (size_t)Tp, from, (size_t)ld, T - j0, all, VW);
    }
}

AVX2 void kt__head_pack_avx2(float *xp, const float *x, int ld, int T, int hs) {
  for (int t = 0; t < T; t++)
    for (int d = 0; d < hs; d += NR) {
      const float *from = x + (size_t)t * ld + d;
      float *to = xp + (size_t)t * hs + d;
      _mm256_storeu_ps(to, _mm256_loadu_ps(from));
      _mm256_storeu_ps(to + VW, _mm256_loadu_ps(from + VW));
    }
}

AVX2 void kt__head_scores_avx2(float *s, int lds, const float *a, int lda, const float *kt, int Tp,
                               int m, int r0, int hs) {
  tile_op o = {s, (size_t)lds, (size_t)lda, 1, (size_t)Tp, a, kt};
  for (int col = 0; col < Tp; col += NR) /* a 16-column slice of kt stays in L1 */
    for (int i = 0; i < m; i += MR) {
      int mr = m - i < MR ? m - i : MR, need = round_up(r0 + i + mr, NR);
      if ((need < Tp ? need : Tp) <= col) continue; /* the keys after its rows */
      run_tile(&o, i, mr, col, 0, hs);
    }
}

AVX2 void kt__head_rows_avx2(float *out, int ldo, const float *p, int ldp, const float *b, int ldb,
                             int m, int r0, int n, int hs) {
  tile_op o = {out, (size_t)ldo, (size_t)ldp, 1, (size_t)ldb, p, b};
  for (int col = 0; col < hs; col += NR)
    for (int i = 0; i < m; i += MR) {
      int mr = m - i < MR ? m - i : MR, k1 = r0 + i + mr < n ? r0 + i + mr : n;
      run_tile(&o, i, mr, col, 0, k1);
    }
}

AVX2 void kt__head_keys_avx2(float *out, int ldo, const float *p, int ldp, const float *b, int ldb,
                             int T, int hs) {
  tile_op o = {out, (size_t)ldo, 1, (size_t)ldp, (size_t)ldb, p, b};
  for (int col = 0; col < hs; col += NR)
    for (int j = 0; j < T; j += MR) {
      int mr = T - j < MR ? T - j : MR;
      run_tile(&o, j, mr, col, j, T);
    }
}

/* Each pass of a softmax runs over a group of rows before the next pass
 * starts. A row's reduction (its maximum, its sum, its dot product) waits
 * on its whole row, and the pass after it waits on the reduction: a row of
 * a few vectors alone left the core idle through that chain, where the
 * next rows' loads and exponentials now fill it. */
#define SOFTMAX_ROWS 64

/* Row t's vectors past the diagonal are written whole with zero lanes (s's
 * and d's rows are Tp long, whole 16s, written by the scores' tiles up to
 * the 16s past the diagonal), and p's row from its exponentials in s,
 * which is in cache. */
AVX2 void kt__head_softmax_avx2(float *p, int ldp, float *s, int lds, int m, int r0, int T,
                                float scale) {
  const __m256 ninf = _mm256_set1_ps(-INFINITY), vscale = _mm256_set1_ps(scale);
  float shift[SOFTMAX_ROWS], inv[SOFTMAX_ROWS];
  for (int g0 = 0; g0 < m; g0 += SOFTMAX_ROWS) {
    int g1 = m - g0 < SOFTMAX_ROWS ? m : g0 + SOFTMAX_ROWS, t, i;
    for (t = g0; t < g1; t++) { /* the row's maximum */
      const float *x = s + (size_t)t * lds;
      int n = r0 + t + 1;
      __m256 vm = ninf;
      for (i = 0; i < n; i += VW) {
        __m256 v = _mm256_loadu_ps(x + i);
        if (i + VW > n) v = _mm256_blendv_ps(ninf, v, _mm256_castsi256_ps(first_lanes(n - i)));
        vm = _mm256_max_ps(vm, v);
      }
      shift[t - g0] = max8(vm) * scale;
    }
    for (t = g0; t < g1; t++) { /* the exponentials, back into s, and their sum */
      float *x = s + (size_t)t * lds;
      int n = r0 + t + 1;
      __m256 sh = _mm256_set1_ps(shift[t - g0]), vs = _mm256_setzero_ps();
      for (i = 0; i < n; i += VW) {
        __m256 e = exp8(_mm256_fmsub_ps(_mm256_loadu_ps(x + i), vscale, sh));
        if (i + VW > n) /* the lanes past the diagonal: 0, whatever their score */
          e = _mm256_and_ps(e, _mm256_castsi256_ps(first_lanes(n - i)));
        vs = _mm256_add_ps(vs, e);
        _mm256_storeu_ps(x + i, e);
      }
      inv[t - g0] = 1.0f / sum8(vs);
    }
    for (t = g0; t < g1; t++) { /* p's row: normalised, then zeros */
      float *row = p + (size_t)t * ldp;
      const float *x = s + (size_t)t * lds;
      int n = r0 + t + 1;
      __m256 norm = _mm256_set1_ps(inv[t - g0]);
      for (i = 0; i < n; i += VW) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), norm);
        if (i + VW <= T) _mm256_storeu_ps(row + i, v);
        else _mm256_maskstore_ps(row + i, first_lanes(T - i), v);
      }
      for (; i + VW <= T; i += VW) _mm256_storeu_ps(row + i, _mm256_setzero_ps());
      for (; i < T; i++) row[i] = 0.0f;
    }
  }
}

AVX2 void kt__head_softmax_backward_avx2(float *d, int ldd, const float *a, int lda, int m, int r0,
                                         int T, float scale) {
  const __m256 vscale = _mm256_set1_ps(scale);
  float dots[SOFTMAX_ROWS];
  for (int g0 = 0; g0 < m; g0 += SOFTMAX_ROWS) {
    int g1 = m - g0 < SOFTMAX_ROWS ? m : g0 + SOFTMAX_ROWS, t, i;
    for (t = g0; t < g1; t++) { /* the row's sum of p * g */
      const float *g = d + (size_t)t * ldd, *p = a + (size_t)t * lda;
      int n = r0 + t + 1;
      if (t + PF_ROWS < m) /* the probabilities come from memory, a row at a time */
        for (i = 0; i < n + PF_ROWS; i += 2 * VW)
          _mm_prefetch((const char *)(p + PF_ROWS * (size_t)lda + i), _MM_HINT_T0);
      __m256 vd = _mm256_setzero_ps();
      for (i = 0; i + VW <= n; i += VW)
        vd = _mm256_fmadd_ps(_mm256_loadu_ps(p + i), _mm256_loadu_ps(g + i), vd);
      if (i < n) { /* p's row may end here: masked loads */
        __m256i k = first_lanes(n - i);
        vd = _mm256_fmadd_ps(_mm256_maskload_ps(p + i, k), _mm256_maskload_ps(g + i, k), vd);
      }
      dots[t - g0] = sum8(vd);
    }
    for (t = g0; t < g1; t++) { /* lanes past the diagonal: 0, whatever g held there */
      float *g = d + (size_t)t * ldd;
      const float *p = a + (size_t)t * lda;
      int n = r0 + t + 1;
      __m256 dot = _mm256_set1_ps(dots[t - g0]);
      for (i = 0; i + VW <= n; i += VW) {
        __m256 x = _mm256_mul_ps(_mm256_mul_ps(vscale, _mm256_loadu_ps(p + i)),
                                 _mm256_sub_ps(_mm256_loadu_ps(g + i), dot));
        _mm256_storeu_ps(g + i, x);
      }
      if (i < n) {
        __m256i k = first_lanes(n - i);
        __m256 x = _mm256_mul_ps(_mm256_mul_ps(vscale, _mm256_maskload_ps(p + i, k)),
                                 _mm256_sub_ps(_mm256_maskload_ps(g + i, k), dot));
        _mm256_storeu_ps(g + i, _mm256_and_ps(x, _mm256_castsi256_ps(k)));
        i += VW;
      }
      for (; i < T; i++) g[i] = 0.0f;
    }
  }
}

#else
typedef int kt__no_head_tiles_avx2; /* ISO C: a translation unit declares something */
#endif
