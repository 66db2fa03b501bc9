/* kaiten's own GEMM where the CPU has AVX2 + FMA but not AVX-512 (AMD's
 * Zen 2 and 3, Intel's client cores): 6 x 16 register tiles with the same
 * fused epilogue as gemm_tiles.c (bias, residual, GELU and its derivative
 * applied to each tile as it is stored).
 *
 * A tile keeps 12 accumulators (6 rows by 2 vectors of 8) and per step of
 * the inner dimension loads 2 vectors of its panel of op(b) and broadcasts
 * 6 floats of its panel of op(a): 15 of the 16 vector registers, 8 loads
 * for 12 FMAs. The loops are the ones BLIS and GotoBLAS use: for each
 * 256-deep slice of the inner dimension, op(b) is packed NC columns at a
 * time as panels of 16 columns (one 64-byte line a step) and op(a) MC rows
 * at a time as panels of 6 rows (6 floats a step, 96 KiB in all, which
 * stays in L2); each panel of op(b) (16 KiB) then meets every panel of
 * op(a) in turn, so it stays in L1 while op(a)'s panels stream from L2.
 * On a Zen 3, in cache, this runs the GPT's products 7% faster than the
 * earlier loops (op(a) read in place, a row of tiles at a time over 256 KiB
 * blocks of op(b) in L2), most of it on the weight gradients, whose op(a)
 * is transposed; in a step, where the packs are the first to read the
 * operands from memory, 1-1.5% (bench/README.md). */
#include "nn/avx2.h"
#include "nn/nn.h"

#ifdef KT__HEAD_TILES

#define NR 16   /* columns of a tile and of a packed panel of op(b) */
#define MR 6    /* rows of a tile and of a packed panel of op(a) */
#define KC 256  /* depth of a packed slice */
#define MC 96   /* rows of op(a) packed at a time: 96 KiB at KC */
#define NC 1024 /* columns of op(b) packed at a time: 1 MiB at KC */
#define PF_B 8  /* steps ahead that a tile prefetches its panel of op(b) */
#define PF_A 16 /* and its panel of op(a), which comes from L2 */

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

/* acc += column kk of A (6 rows) times row kk of b (16 columns), A and b
 * packed panels as tile's. */
AVX2 static inline __attribute__((always_inline)) void step(__m256 acc[MR][2], const float *a,
                                                            const float *b, int kk) {
  _mm_prefetch((const char *)(b + (kk + PF_B) * NR), _MM_HINT_T0); /* may pass the panels' */
  _mm_prefetch((const char *)(a + (kk + PF_A) * MR), _MM_HINT_T0); /* ends: hints */
  __m256 b0 = _mm256_load_ps(b + kk * NR), b1 = _mm256_load_ps(b + kk * NR + VW);
  const float *ak = a + kk * MR;
#pragma GCC unroll 6
  for (int i = 0; i < MR; i++) {
    __m256 x = _mm256_broadcast_ss(ak + i);
    acc[i][0] = _mm256_fmadd_ps(x, b0, acc[i][0]);
    acc[i][1] = _mm256_fmadd_ps(x, b1, acc[i][1]);
  }
}

/* c (mr, 16) = (load_c ? c : 0) + A (6, kc) b (kc, 16), A and b packed
 * panels (A (i, kk) at a[kk * 6 + i]); the lanes of k0 and k1 of each of
 * the first mr rows' two vectors are stored (all of them where full), with
 * ep where given. */
AVX2 static inline __attribute__((always_inline)) void tile(float *c, size_t ldc, const float *a,
                                                            const float *b, int kc, const int mr,
                                                            int load_c, __m256i k0, __m256i k1,
                                                            const int full,
                                                            const kt__tile_epi *ep) {
  __m256 acc[MR][2];
#pragma GCC unroll 6
  for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
#pragma GCC unroll 6 /* c's lines on their way while the products run */
  for (int i = 0; i < mr; i++) {
    _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch((const char *)(c + i * ldc + NR - 1), _MM_HINT_T0);
  }
  /* four steps a trip where four remain: the loop's own instructions (count,
   * compare, branch, pointer steps) stop competing with the loads and FMAs;
   * 4% faster on the larger GPT's products on a Zen 3 (bench/README.md) */
  int kk = 0;
  for (; kk + 4 <= kc; kk += 4) {
    step(acc, a, b, kk);
    step(acc, a, b, kk + 1);
    step(acc, a, b, kk + 2);
    step(acc, a, b, kk + 3);
  }
  for (; kk < kc; kk++) step(acc, a, b, kk);
#pragma GCC unroll 6 /* acc stays in registers only if every index is a constant */
  for (int i = 0; i < mr; i++) {
    if (load_c) {
      acc[i][0] = _mm256_add_ps(acc[i][0], load_lanes(c + i * ldc, k0, full));
      acc[i][1] = _mm256_add_ps(acc[i][1], load_lanes(c + i * ldc + VW, k1, full));
    }
    kt__tile_epi row = kt__tile_epi_row(ep, i, ldc);
    store_row(c + i * ldc, acc[i][0], ep ? &row : NULL, 0, k0, full);
    store_row(c + i * ldc, acc[i][1], ep ? &row : NULL, 1, k1, full);
  }
}

typedef void (*tile_fn)(float *c, size_t ldc, const float *a, const float *b, int kc, int load_c,
                        __m256i k0, __m256i k1, const kt__tile_epi *ep);
#define TILE(R, FULL) \
  AVX2 static void tile_##R##_##FULL(float *c, size_t ldc, const float *a, const float *b, int kc, \
                                     int load_c, __m256i k0, __m256i k1, const kt__tile_epi *ep) { \
    tile(c, ldc, a, b, kc, R, load_c, k0, k1, FULL, ep); \
  }
// clang-format off
TILE(1, 0) TILE(2, 0) TILE(3, 0) TILE(4, 0) TILE(5, 0) TILE(6, 0)
TILE(1, 1) TILE(2, 1) TILE(3, 1) TILE(4, 1) TILE(5, 1) TILE(6, 1)
static const tile_fn tiles[2][MR + 1] = {
    {NULL, tile_1_0, tile_2_0, tile_3_0, tile_4_0, tile_5_0, tile_6_0},
    {NULL, tile_1_1, tile_2_1, tile_3_1, tile_4_1, tile_5_1, tile_6_1}};
// clang-format on

/* Columns [j0, j0 + nc) of the slice of op(b) at rows [k0, k0 + kc) as
 * panels of 16 columns (the last one's columns from nc on zero), panel
 * (j - j0) / 16 at p + (j - j0) * kc. */
AVX2 static void pack_b(float *p, const float *b, size_t ldb, int trans_b, int k0, int kc, int j0,
                        int nc) {
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
      float *to = p + (size_t)j * kc + kk * NR;
      const float *from = b + (size_t)(j0 + j) * ldb + k0 + kk;
      for (int h = 0; h < 2; h++) {
        if (depth == VW && nc - j >= NR)
          transpose8_full(to + VW * h, NR, from + (size_t)VW * h * ldb, ldb);
        else
          transpose8(to + VW * h, NR, from + (size_t)VW * h * ldb, ldb, nc - j - VW * h,
                     first_lanes(depth), depth);
      }
    }
}

/* Rows [i0, i0 + mr) (mr <= 6) of op(a) at depths [k0, k0 + kc) as one
 * panel at d (row i, depth kk at d[kk * 6 + i]; rows from mr on zero), for
 * any mr and kc. Each store writes 8 floats where 6 are the panel's: the
 * stores run in ascending order, so the next one writes over the 2 extra,
 * and the buffer has room past its end for the last. */
AVX2 static void pack_a_panel(float *d, const float *a, size_t lda, int trans_a, int i0, int mr,
                              int k0, int kc) {
  if (trans_a) { /* op(a) (i, kk) = a[kk * lda + i] */
    __m256i rows = first_lanes(mr);
    const float *s = a + (size_t)k0 * lda + i0;
    for (int kk = 0; kk < kc; kk++)
      _mm256_storeu_ps(d + kk * MR, _mm256_maskload_ps(s + kk * lda, rows));
    return;
  }
  const float *s = a + (size_t)i0 * lda + k0;
  for (int kk = 0; kk < kc; kk += VW) {
    int depth = kc - kk < VW ? kc - kk : VW;
    transpose8(d + kk * MR, MR, s + kk, lda, mr, first_lanes(depth), depth);
  }
}

/* Rows [i0, i0 + mc) of op(a) at depths [k0, k0 + kc) as panels of 6 rows,
 * panel p / 6 at ap + p * kc: the full panels with plain loads and no
 * shuffles where op(a) is transposed (6 floats a depth are side by side)
 * and 6 x 8 transposes where it is not, the rest by pack_a_panel. */
AVX2 static void pack_a(float *ap, const float *a, size_t lda, int trans_a, int i0, int mc, int k0,
                        int kc) {
  int full = mc / MR * MR;
  if (trans_a) { /* a row of a at a time: one stream in, one out per panel */
    for (int kk = 0; kk < kc; kk++) {
      const float *s = a + (size_t)(k0 + kk) * lda + i0;
      for (int p = 0; p < full; p += MR) copy6(ap + (size_t)p * kc + kk * MR, s + p);
    }
  } else if (kc % VW == 0) {
    for (int p = 0; p < full; p += MR)
      for (int kk = 0; kk < kc; kk += VW)
        transpose6x8(ap + (size_t)p * kc + kk * MR, a + (size_t)(i0 + p) * lda + k0 + kk, lda);
  } else {
    full = 0;
  }
  for (int p = full; p < mc; p += MR)
    pack_a_panel(ap + (size_t)p * kc, a, lda, trans_a, i0 + p, mc - p < MR ? mc - p : MR, k0, kc);
}

/* Columns [j0, j0 + nc) of c over one packed slice (depth kc): each panel
 * of op(b) against every panel of op(a)'s rows [i0, i0 + mc). */
AVX2 static void macro_tile(float *c, int ldc, const float *ap, const float *bp, int i0, int mc,
                            int j0, int nc, int kc, int load_c, const kt__epilogue *ep) {
  for (int j = 0; j < nc; j += NR) {
    int w = nc - j < NR ? nc - j : NR;
    __m256i k0 = first_lanes(w), k1 = first_lanes(w - VW);
    for (int i = 0; i < mc; i += MR) {
      int mr = mc - i < MR ? mc - i : MR;
      kt__tile_epi te = kt__tile_epi_at(ep, i0 + i, ldc, j0 + j);
      tiles[w == NR][mr](c + (size_t)(i0 + i) * ldc + j0 + j, (size_t)ldc, ap + (size_t)i * kc,
                         bp + (size_t)j * kc, kc, load_c, k0, k1, ep ? &te : NULL);
    }
  }
}

AVX2 void kt__tiles_avx2_sgemm(int trans_a, int trans_b, int m, int n, int k, const float *a,
                               int lda, const float *b, int ldb, float beta, float *c, int ldc,
                               const kt__epilogue *ep) {
  int depth = k < KC ? k : KC, width = n < NC ? (n + NR - 1) / NR * NR : NC;
  int height = m < MC ? (m + MR - 1) / MR * MR : MC;
  size_t b_floats = (size_t)width * depth; /* a multiple of 16: op(a)'s panels stay aligned */
  float *bp = k > 0 && m > 0 ? kt__tiles_panels(b_floats + (size_t)height * depth + VW) : NULL;
  if (!bp || (beta != 0.0f && beta != 1.0f)) { /* nothing to multiply, or a rare beta */
    kt__sgemm(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc);
    kt__epilogue_apply(c, ldc, m, n, ep);
    return;
  }
  float *ap = bp + b_floats;
  for (int j0 = 0; j0 < n; j0 += NC) {
    int nc = n - j0 < NC ? n - j0 : NC;
    for (int k0 = 0; k0 < k; k0 += KC) {
      int kc = k - k0 < KC ? k - k0 : KC, load_c = k0 > 0 || beta != 0.0f;
      pack_b(bp, b, (size_t)ldb, trans_b, k0, kc, j0, nc);
      for (int i0 = 0; i0 < m; i0 += MC) {
        int mc = m - i0 < MC ? m - i0 : MC;
        pack_a(ap, a, (size_t)lda, trans_a, i0, mc, k0, kc);
        macro_tile(c, ldc, ap, bp, i0, mc, j0, nc, kc, load_c, k0 + kc == k ? ep : NULL);
      }
    }
  }
}

#endif
