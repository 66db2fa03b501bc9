/* Attention's per-head products on AVX-512 register tiles: a head's
 * scores, its probabilities times the values, and the key-side transposed
 * products, each computed tile by tile straight from the head's strided
 * slices, with the causal bound of each tile (not of a whole block of
 * rows) and no call into a GEMM library. The library's small products were
 * the slowest of the step: a call per 64-row block, each packing its
 * operands again. */
#include "nn/gpt.h"

#ifdef KT__HEAD_TILES
#include <immintrin.h>
#include <stdint.h>
#define TILE_TARGET __attribute__((target("avx512f")))

#define MR 6 /* rows of a tile of 3 or 4 16-float columns (at most 24 accumulators) */
#define MR_NARROW 12 /* rows of a tile of 1 or 2 columns: fewer broadcasts a product */
#define NV 4         /* columns of a tile at most */
#define VW 16
#define PF 8 /* rows of b ahead to prefetch: its rows are head slices, kilobytes apart */

static inline int round_up(int x, int to) { return (x + to - 1) / to * to; }

int kt__head_tiles_ok(int hs) {
  return hs > 0 && hs % VW == 0 && __builtin_cpu_supports("avx512f");
}

/* c (mr, 16 nv) = sum over kk in [k0, k1) of A(i, kk) * b row kk, where
 * A(i, kk) = a[i * ars + kk * aks]; overwritten. */
TILE_TARGET static inline __attribute__((always_inline)) void tile(
    float *c, size_t ldc, const float *a, size_t ars, size_t aks, const float *b, size_t ldb,
    int k0, int k1, const int mr, const int nv) {
  __m512 acc[MR_NARROW][NV];
#pragma GCC unroll 16
  for (int i = 0; i < mr; i++)
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++) acc[i][v] = _mm512_setzero_ps();
  for (int kk = k0; kk < k1; kk++) {
    const float *bk = b + (size_t)kk * ldb, *ak = a + (size_t)kk * aks;
    uintptr_t ahead = (uintptr_t)(bk) + PF * ldb * sizeof(float); /* may pass b's end: a hint */
    __m512 bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++) {
      bv[v] = _mm512_loadu_ps(bk + VW * v);
      _mm_prefetch((const char *)(ahead + VW * v * sizeof(float)), _MM_HINT_T0);
    }
#pragma GCC unroll 16
    for (int i = 0; i < mr; i++) {
      __m512 x = _mm512_set1_ps(ak[(size_t)i * ars]);
#pragma GCC unroll 4
      for (int v = 0; v < nv; v++) acc[i][v] = _mm512_fmadd_ps(x, bv[v], acc[i][v]);
    }
  }
#pragma GCC unroll 16
  for (int i = 0; i < mr; i++)
#pragma GCC unroll 4
    for (int v = 0; v < nv; v++) _mm512_storeu_ps(c + (size_t)i * ldc + VW * v, acc[i][v]);
}

typedef void (*tile_fn)(float *c, size_t ldc, const float *a, size_t ars, size_t aks,
                        const float *b, size_t ldb, int k0, int k1);

#define TILE(R, V)                                                                              \
  TILE_TARGET static void tile_##R##_##V(float *c, size_t ldc, const float *a, size_t ars,      \
                                         size_t aks, const float *b, size_t ldb, int k0, int k1) { \
    tile(c, ldc, a, ars, aks, b, ldb, k0, k1, R, V);                                            \
  }
#define TILE_ROW(R) TILE(R, 1) TILE(R, 2) TILE(R, 3) TILE(R, 4)
#define TILE_ROW_NARROW(R) TILE(R, 1) TILE(R, 2)
TILE_ROW(1) TILE_ROW(2) TILE_ROW(3) TILE_ROW(4) TILE_ROW(5) TILE_ROW(6)
TILE_ROW_NARROW(7) TILE_ROW_NARROW(8) TILE_ROW_NARROW(9) TILE_ROW_NARROW(10)
TILE_ROW_NARROW(11) TILE_ROW_NARROW(12)
#define TILE_PTRS(R) {tile_##R##_1, tile_##R##_2, tile_##R##_3, tile_##R##_4}
#define TILE_PTRS_NARROW(R) {tile_##R##_1, tile_##R##_2, NULL, NULL}
static const tile_fn tiles[MR_NARROW][NV] = {
    TILE_PTRS(1),         TILE_PTRS(2),         TILE_PTRS(3),          TILE_PTRS(4),
    TILE_PTRS(5),         TILE_PTRS(6),         TILE_PTRS_NARROW(7),   TILE_PTRS_NARROW(8),
    TILE_PTRS_NARROW(9),  TILE_PTRS_NARROW(10), TILE_PTRS_NARROW(11),  TILE_PTRS_NARROW(12)};

/* Rows of a tile nv columns wide. */
static inline int tile_rows(int nv) { return nv <= 2 ? MR_NARROW : MR; }

/* c rows [i, i + mr) x columns [col, col + 16 nv) of a product, summing
 * kk over [k0, k1) (each caller's causal bound for the tile). */
typedef struct {
  float *c;
  size_t ldc, ars, aks, ldb;
  const float *a, *b;
} tile_op;

static void run_tile(const tile_op *o, int i, int mr, int col, int nv, int k0, int k1) {
  if (k1 <= k0) { /* nothing to sum: zeros */
    for (int r = 0; r < mr; r++)
      for (int x = 0; x < VW * nv; x++) o->c[(size_t)(i + r) * o->ldc + col + x] = 0.0f;
    return;
  }
  tiles[mr - 1][nv - 1](o->c + (size_t)i * o->ldc + col, o->ldc, o->a + (size_t)i * o->ars, o->ars,
                        o->aks, o->b + col, o->ldb, k0, k1);
}

void kt__head_transpose(float *xt, int Tp, const float *x, int ld, int T, int hs) {
  for (int j0 = 0; j0 < T; j0 += VW) { /* 16 rows of x at a time: each row of xt a stream */
    int n = T - j0 < VW ? T - j0 : VW;
    for (int d = 0; d < hs; d++) {
      float *o = xt + (size_t)d * Tp + j0;
      for (int j = 0; j < n; j++) o[j] = x[(size_t)(j0 + j) * ld + d];
    }
  }
  for (int d = 0; d < hs; d++)
    for (int j = T; j < Tp; j++) xt[(size_t)d * Tp + j] = 0.0f;
}

void kt__head_scores(float *s, int lds, const float *a, int lda, const float *kt, int Tp, int m,
                     int r0, int hs) {
  tile_op o = {s, (size_t)lds, (size_t)lda, 1, (size_t)Tp, a, kt};
  for (int col = 0; col < Tp; col += VW * NV) /* a chunk of kt's columns stays in L1 */
    for (int i = 0; i < m; i += MR) {
      int mr = m - i < MR ? m - i : MR, need = round_up(r0 + i + mr, VW);
      need = need < Tp ? need : Tp;
      if (need <= col) continue; /* the keys after its rows */
      int nv = (need - col) / VW < NV ? (need - col) / VW : NV;
      run_tile(&o, i, mr, col, nv, 0, hs);
    }
}

void kt__head_rows(float *out, int ldo, const float *p, int ldp, const float *b, int ldb, int m,
                   int r0, int n, int hs) {
  tile_op o = {out, (size_t)ldo, (size_t)ldp, 1, (size_t)ldb, p, b};
  for (int col = 0; col < hs; col += VW * NV) {
    int nv = (hs - col) / VW < NV ? (hs - col) / VW : NV, rows = tile_rows(nv);
    for (int i = 0; i < m; i += rows) {
      int mr = m - i < rows ? m - i : rows, k1 = r0 + i + mr < n ? r0 + i + mr : n;
      run_tile(&o, i, mr, col, nv, 0, k1);
    }
  }
}

void kt__head_keys(float *out, int ldo, const float *p, int ldp, const float *b, int ldb, int T,
                   int hs) {
  tile_op o = {out, (size_t)ldo, 1, (size_t)ldp, (size_t)ldb, p, b};
  for (int col = 0; col < hs; col += VW * NV) {
    int nv = (hs - col) / VW < NV ? (hs - col) / VW : NV, rows = tile_rows(nv);
    for (int j = 0; j < T; j += rows) {
      int mr = T - j < rows ? T - j : rows;
      run_tile(&o, j, mr, col, nv, j, T);
    }
  }
}

#else
typedef int kt__no_head_tiles; /* ISO C: a translation unit declares something */
#endif
