/* kaiten's own GEMM where the CPU has AVX2 + FMA but not AVX-512 (AMD's
 * Zen 2 and 3, Intel's client cores): gemm_tiles.c's loops on 6 x 16
 * register tiles, with the same fused epilogue (bias, residual, GELU and
 * its derivative applied to each tile as it is stored).
 *
 * A tile keeps 12 accumulators (6 rows by 2 vectors of 8) and per step of
 * the inner dimension loads 2 vectors of its panel and broadcasts 6 floats
 * of op(a): 15 of the 16 vector registers, 8 loads for 12 FMAs.
 * For each 256-deep slice of the inner dimension, op(b) is packed a block
 * of NC columns at a time (panels of 16 columns, each panel's rows 64
 * bytes, one cache line) and every row of tiles walks the block before the
 * next is packed: a block is 256 KiB, which stays in a 512 KiB L2 (Zen 3)
 * while op(a)'s rows and c stream past it. A whole slice, as the AVX-512
 * kernel packs it, is 1 MiB at 1024 columns: twice that L2. */
#include "nn/avx2.h"
#include "nn/nn.h"

#ifdef KT__HEAD_TILES

#define NR 16  /* columns of a tile and of a packed panel */
#define KC 256 /* depth of a packed slice */
#define NC 256 /* columns of a packed block */
#define MR 6   /* rows of a tile */
#define PF_B 8 /* steps of the inner dimension ahead that a tile prefetches its panel */

/* One row's vector `half` of a tile, v, stored at c with its epilogue
 * (ep's pointers at the row's start; NULL: none) on the lanes k. */
AVX2 static inline __attribute__((always_inline)) void store_row(float *c, __m256 v,
                                                                 const kt__tile_epi *ep, int half,
                                                                 __m256i k, int full) {
  int col = VW * half;
  if (ep && ep->bias) v = _mm256_add_ps(v, load_lanes(ep->bias + col, k, full));
  if (ep && ep->res) v = _mm256_add_ps(v, load_lanes(ep->res + col, k, full));
  if (ep && ep->gelu) {
    __m256 g;
    v = gelu8(v, &g);
    store_lanes(ep->grad + col, g, k, full);
  }
  store_lanes(c + col, v, k, full);
}

/* c (mr, 16) = (load_c ? c : 0) + A (mr, kc) b (kc, 16), A(i, kk) =
 * a[i * ars + kk], b a packed panel; the lanes of k0 and k1 of each row's
 * two vectors are stored (all of them where full), with ep where given. */
AVX2 static inline __attribute__((always_inline)) void tile(float *c, size_t ldc, const float *a,
                                                            size_t ars, const float *b, int kc,
                                                            const int mr, int load_c, __m256i k0,
                                                            __m256i k1, const int full,
                                                            const kt__tile_epi *ep) {
  __m256 acc[MR][2];
#pragma GCC unroll 6
  for (int i = 0; i < mr; i++) {
    acc[i][0] = load_c ? load_lanes(c + i * ldc, k0, full) : _mm256_setzero_ps();
    acc[i][1] = load_c ? load_lanes(c + i * ldc + VW, k1, full) : _mm256_setzero_ps();
  }
  for (int kk = 0; kk < kc; kk++) {
    _mm_prefetch((const char *)(b + (kk + PF_B) * NR), _MM_HINT_T0); /* may pass the end: a hint */
    __m256 b0 = _mm256_load_ps(b + kk * NR), b1 = _mm256_load_ps(b + kk * NR + VW);
    const float *ak = a + kk;
#pragma GCC unroll 6
    for (int i = 0; i < mr; i++) {
      __m256 x = _mm256_broadcast_ss(ak + i * ars);
      acc[i][0] = _mm256_fmadd_ps(x, b0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(x, b1, acc[i][1]);
    }
  }
#pragma GCC unroll 6 /* acc stays in registers only if every index is a constant */
  for (int i = 0; i < mr; i++) {
    kt__tile_epi row = kt__tile_epi_row(ep, i, ldc);
    store_row(c + i * ldc, acc[i][0], ep ? &row : NULL, 0, k0, full);
    store_row(c + i * ldc, acc[i][1], ep ? &row : NULL, 1, k1, full);
  }
}

typedef void (*tile_fn)(float *c, size_t ldc, const float *a, size_t ars, const float *b, int kc,
                        int load_c, __m256i k0, __m256i k1, const kt__tile_epi *ep);
#define TILE(R, FULL) \
  AVX2 static void tile_##R##_##FULL(float *c, size_t ldc, const float *a, size_t ars, \
                                     const float *b, int kc, int load_c, __m256i k0, __m256i k1, \
                                     const kt__tile_epi *ep) { \
    tile(c, ldc, a, ars, b, kc, R, load_c, k0, k1, FULL, ep); \
  }
// clang-format off
TILE(1, 0) TILE(2, 0) TILE(3, 0) TILE(4, 0) TILE(5, 0) TILE(6, 0)
TILE(1, 1) TILE(2, 1) TILE(3, 1) TILE(4, 1) TILE(5, 1) TILE(6, 1)
static const tile_fn tiles[2][MR + 1] = {
    {NULL, tile_1_0, tile_2_0, tile_3_0, tile_4_0, tile_5_0, tile_6_0},
    {NULL, tile_1_1, tile_2_1, tile_3_1, tile_4_1, tile_5_1, tile_6_1}};
// clang-format on

/* Columns [j0, j0 + nc) of the slice of op(b) at rows [k0, k0 + kc) as
 * panels of 16 columns (the last one's columns from n on zero), panel
 * (j - j0) / 16 at p + (j - j0) * kc. */
AVX2 static void pack_block(float *p, const float *b, size_t ldb, int trans_b, int k0, int kc,
                            int j0, int nc) {
  if (!trans_b) {
    for (int kk = 0; kk < kc; kk++) {
      const float *row = b + (size_t)(k0 + kk) * ldb + j0;
      for (int j = 0; j < nc; j += NR) {
        float *to = p + (size_t)j * kc + kk * NR;
        int full = nc - j >= NR;
        _mm256_store_ps(to, load_lanes(row + j, first_lanes(nc - j), full));
        _mm256_store_ps(to + VW, load_lanes(row + j + VW, first_lanes(nc - j - VW), full));
      }
    }
    return;
  }
  for (int j = 0; j < nc; j += NR) /* op(b) (kk, j) = b[j * ldb + kk]: 8 x 8 transposes */
    for (int kk = 0; kk < kc; kk += VW) {
      int depth = kc - kk < VW ? kc - kk : VW;
      for (int h = 0; h < 2; h++)
        transpose8(p + (size_t)j * kc + kk * NR + VW * h, NR,
                   b + (size_t)(j0 + j + VW * h) * ldb + k0 + kk, ldb, nc - j - VW * h,
                   first_lanes(depth), depth);
    }
}

/* The tiles of rows [i0, i0 + mr) over the block's panels (columns [j0, j0
 * + nc)), and prefetches of the next row of tiles' rows of a and c. */
AVX2 static void row_of_tiles(float *c, int ldc, const float *a, int lda, int trans_a,
                              float *a_tile, const float *panels, int m, int j0, int nc, int k0,
                              int kc, int i0, int load_c, const kt__epilogue *ep) {
  int mr = m - i0 < MR ? m - i0 : MR, next = m - i0 - mr < MR ? m - i0 - mr : MR;
  const float *at = a_tile;
  size_t ars = KC;
  if (trans_a) { /* op(a) (i, kk) = a[kk * lda + i]: 8 x 8 transposes into mr rows */
    for (int kk = 0; kk < kc; kk += VW) { /* a row of a_tile is KC long: room for the last 8 */
      int depth = kc - kk < VW ? kc - kk : VW;
      transpose8(a_tile + kk, KC, a + (size_t)(k0 + kk) * lda + i0, (size_t)lda, depth,
                 first_lanes(mr), mr);
    }
  } else {
    at = a + (size_t)i0 * lda + k0, ars = (size_t)lda;
  }
  int parts = (nc + NR - 1) / NR;
  for (int j = 0, part = 0; j < nc; j += NR, part++) {
    int w = nc - j < NR ? nc - j : NR, jc = j0 + j;
    if (next > 0 && !trans_a)
      kt__tiles_prefetch_part((const char *)(at + (size_t)mr * lda), (size_t)lda * sizeof(float),
                              next, (size_t)kc * sizeof(float), part, parts);
    if (next > 0 && load_c)
      kt__tiles_prefetch_part((const char *)(c + (size_t)(i0 + mr) * ldc + j0),
                              (size_t)ldc * sizeof(float), next, (size_t)nc * sizeof(float), part,
                              parts);
    kt__tile_epi te = kt__tile_epi_at(ep, i0, ldc, jc);
    tiles[w == NR][mr](c + (size_t)i0 * ldc + jc, (size_t)ldc, at, ars, panels + (size_t)j * kc, kc,
                       load_c, first_lanes(w), first_lanes(w - VW), ep ? &te : NULL);
  }
}

AVX2 void kt__tiles_avx2_sgemm(int trans_a, int trans_b, int m, int n, int k, const float *a,
                               int lda, const float *b, int ldb, float beta, float *c, int ldc,
                               const kt__epilogue *ep) {
  int depth = k < KC ? k : KC, width = n < NC ? (n + NR - 1) / NR * NR : NC;
  float *panels = k > 0 && m > 0 ? kt__tiles_panels((size_t)width * depth) : NULL;
  if (!panels || (beta != 0.0f && beta != 1.0f)) { /* nothing to multiply, or a rare beta */
    kt__sgemm(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc);
    kt__epilogue_apply(c, ldc, m, n, ep);
    return;
  }
  _Alignas(32) float a_tile[KC * MR];
  for (int k0 = 0; k0 < k; k0 += KC) {
    int kc = k - k0 < KC ? k - k0 : KC, load_c = k0 > 0 || beta != 0.0f;
    const kt__epilogue *last = k0 + kc == k ? ep : NULL;
    for (int j0 = 0; j0 < n; j0 += NC) {
      int nc = n - j0 < NC ? n - j0 : NC;
      pack_block(panels, b, (size_t)ldb, trans_b, k0, kc, j0, nc);
      for (int i0 = 0; i0 < m; i0 += MR)
        row_of_tiles(c, ldc, a, lda, trans_a, a_tile, panels, m, j0, nc, k0, kc, i0, load_c, last);
    }
  }
}

#endif
