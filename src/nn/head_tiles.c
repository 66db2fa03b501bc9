/* Attention's per-head products on AVX-512 register tiles: a head's
 * scores, its probabilities times the values, and the key-side transposed
 * products, each computed tile by tile straight from the head's strided
 * slices, with the causal bound of each tile (not of a whole block of
 * rows) and no call into a GEMM library. The library's small products were
 * the slowest of the step: a call per 64-row block, each packing its
 * operands again. */
#include "nn/gpt.h"

#ifdef KT__HEAD_TILES
#include <math.h>
#include <stdint.h>

#include "nn/avx512.h"
#define TILE_TARGET KT__AVX512

#define MR 6         /* rows of a tile of 3 or 4 16-float columns (at most 24 accumulators) */
#define MR_NARROW 12 /* rows of a tile of 1 or 2 columns: fewer broadcasts a product */
#define NV 4         /* columns of a tile at most */
#define VW 16
#define PF 8      /* rows of b ahead to prefetch: its rows are head slices, kilobytes apart */
#define PF_ROWS 4 /* rows of probabilities ahead to prefetch in the softmax backward */

static inline int round_up(int x, int to) { return (x + to - 1) / to * to; }

/* AVX-512 where the CPU has it, else AVX2 + FMA (head_tiles_avx2.c); the
 * same 16-float multiples on both. */
int kt__head_tiles_ok(int hs) {
  return hs > 0 && hs % VW == 0 && (kt__avx512_ok() || kt__avx2_ok());
}

/* c (mr, 16 nv) = sum over kk in [k0, k1) of A(i, kk) * b row kk, where
 * A(i, kk) = a[i * ars + kk * aks]; overwritten. */
TILE_TARGET static inline __attribute__((always_inline)) void tile(float *c, size_t ldc,
                                                                   const float *a, size_t ars,
                                                                   size_t aks, const float *b,
                                                                   size_t ldb, int k0, int k1,
                                                                   const int mr, const int nv) {
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
    if (aks > 1) { /* a's column kk is a row of its own too */
      _mm_prefetch((const char *)(ak + PF * aks), _MM_HINT_T0);
      _mm_prefetch((const char *)(ak + PF * aks + (size_t)(mr - 1) * ars), _MM_HINT_T0);
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

#define TILE(R, V) \
  TILE_TARGET static void tile_##R##_##V(float *c, size_t ldc, const float *a, size_t ars, \
                                         size_t aks, const float *b, size_t ldb, int k0, int k1) { \
    tile(c, ldc, a, ars, aks, b, ldb, k0, k1, R, V); \
  }
// clang-format off
/* one instantiation a line */
#define TILE_ROW(R) TILE(R, 1) TILE(R, 2) TILE(R, 3) TILE(R, 4)
#define TILE_ROW_NARROW(R) TILE(R, 1) TILE(R, 2)
TILE_ROW(1)
TILE_ROW(2)
TILE_ROW(3)
TILE_ROW(4)
TILE_ROW(5)
TILE_ROW(6)
TILE_ROW_NARROW(7)
TILE_ROW_NARROW(8)
TILE_ROW_NARROW(9)
TILE_ROW_NARROW(10)
TILE_ROW_NARROW(11)
TILE_ROW_NARROW(12)
#define TILE_PTRS(R) {tile_##R##_1, tile_##R##_2, tile_##R##_3, tile_##R##_4}
#define TILE_PTRS_NARROW(R) {tile_##R##_1, tile_##R##_2, NULL, NULL}
static const tile_fn tiles[MR_NARROW][NV] = {
    TILE_PTRS(1), TILE_PTRS(2), TILE_PTRS(3), TILE_PTRS(4), TILE_PTRS(5), TILE_PTRS(6),
    TILE_PTRS_NARROW(7), TILE_PTRS_NARROW(8), TILE_PTRS_NARROW(9), TILE_PTRS_NARROW(10),
    TILE_PTRS_NARROW(11), TILE_PTRS_NARROW(12)};
// clang-format on

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
  tiles[mr - 1][nv - 1](o->c + (size_t)i * o->ldc + col, o->ldc, o->a + (size_t)i * o->ars, o->ars,
                        o->aks, o->b + col, o->ldb, k0, k1);
}

/* The 16 x 16 block of x at rows [0, n) (the rest taken as zeros) into
 * xt's 16 rows: unpack pairs of rows, then 4-float shuffles, then two
 * rounds of 128-bit lane shuffles. */
TILE_TARGET static void transpose_block(float *xt, size_t ldt, const float *x, size_t ld, int n) {
  __m512 r[VW], t[VW], u[VW], w[VW];
  for (int i = 0; i < VW; i++)
    r[i] = i < n ? _mm512_loadu_ps(x + (size_t)i * ld) : _mm512_setzero_ps();
  for (int k = 0; k < VW; k += 2) {
    t[k] = _mm512_unpacklo_ps(r[k], r[k + 1]);
    t[k + 1] = _mm512_unpackhi_ps(r[k], r[k + 1]);
  }
  /* u[4g + m], 128-bit lane L: column 4L + m of rows [4g, 4g + 4) */
  for (int g = 0; g < 4; g++) {
    const __m512 *tg = t + 4 * g;
    u[4 * g] = _mm512_shuffle_ps(tg[0], tg[2], 0x44);
    u[4 * g + 1] = _mm512_shuffle_ps(tg[0], tg[2], 0xEE);
    u[4 * g + 2] = _mm512_shuffle_ps(tg[1], tg[3], 0x44);
    u[4 * g + 3] = _mm512_shuffle_ps(tg[1], tg[3], 0xEE);
  }
  /* w[8h + m] (even lanes) and w[8h + 4 + m] (odd lanes) of rows [8h, 8h + 8) */
  for (int h = 0; h < 2; h++)
    for (int m = 0; m < 4; m++) {
      w[8 * h + m] = _mm512_shuffle_f32x4(u[8 * h + m], u[8 * h + 4 + m], 0x88);
      w[8 * h + 4 + m] = _mm512_shuffle_f32x4(u[8 * h + m], u[8 * h + 4 + m], 0xDD);
    }
  for (int m = 0; m < 4; m++) {
    _mm512_storeu_ps(xt + (size_t)m * ldt, _mm512_shuffle_f32x4(w[m], w[8 + m], 0x88));
    _mm512_storeu_ps(xt + (size_t)(8 + m) * ldt, _mm512_shuffle_f32x4(w[m], w[8 + m], 0xDD));
    _mm512_storeu_ps(xt + (size_t)(4 + m) * ldt, _mm512_shuffle_f32x4(w[4 + m], w[12 + m], 0x88));
    _mm512_storeu_ps(xt + (size_t)(12 + m) * ldt, _mm512_shuffle_f32x4(w[4 + m], w[12 + m], 0xDD));
  }
}

static void head_transpose_512(float *xt, int Tp, const float *x, int ld, int T, int hs) {
  for (int j0 = 0; j0 < T; j0 += VW) { /* rows of x past T give xt's zero columns */
    int n = T - j0 < VW ? T - j0 : VW;
    for (int d = 0; d < hs; d += VW)
      transpose_block(xt + (size_t)d * Tp + j0, (size_t)Tp, x + (size_t)j0 * ld + d, (size_t)ld, n);
  }
}

static void head_scores_512(float *s, int lds, const float *a, int lda, const float *kt, int Tp,
                            int m, int r0, int hs) {
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

static void head_rows_512(float *out, int ldo, const float *p, int ldp, const float *b, int ldb,
                          int m, int r0, int n, int hs) {
  tile_op o = {out, (size_t)ldo, (size_t)ldp, 1, (size_t)ldb, p, b};
  for (int col = 0; col < hs; col += VW * NV) {
    int nv = (hs - col) / VW < NV ? (hs - col) / VW : NV, rows = tile_rows(nv);
    for (int i = 0; i < m; i += rows) {
      int mr = m - i < rows ? m - i : rows, k1 = r0 + i + mr < n ? r0 + i + mr : n;
      run_tile(&o, i, mr, col, nv, 0, k1);
    }
  }
}

static void head_keys_512(float *out, int ldo, const float *p, int ldp, const float *b, int ldb,
                          int T, int hs) {
  tile_op o = {out, (size_t)ldo, 1, (size_t)ldp, (size_t)ldb, p, b};
  for (int col = 0; col < hs; col += VW * NV) {
    int nv = (hs - col) / VW < NV ? (hs - col) / VW : NV, rows = tile_rows(nv);
    for (int j = 0; j < T; j += rows) {
      int mr = T - j < rows ? T - j : rows;
      run_tile(&o, j, mr, col, nv, j, T);
    }
  }
}

/* The exponentials go back into s's row, which is in L1, and are read
 * from there. Read back from p's row, the masked loads waited on the
 * masked stores just before them (a masked store does not forward to a
 * load), and so on p's lines coming from memory: nearly half the
 * softmax's samples sat on that load. */
TILE_TARGET static void head_softmax_512(float *p, int ldp, float *s, int lds, int m, int r0, int T,
                                         float scale) {
  for (int t = 0; t < m; t++) {
    float *row = p + (size_t)t * ldp, *x = s + (size_t)t * lds;
    int n = r0 + t + 1, i;
    __m512 vm = _mm512_set1_ps(-INFINITY), vs = _mm512_setzero_ps();
    for (i = 0; i < n; i += VW)
      vm = _mm512_max_ps(vm, _mm512_mask_loadu_ps(vm, lanes_to(i, n), x + i));
    __m512 shift = _mm512_set1_ps(_mm512_reduce_max_ps(vm) * scale), vscale = _mm512_set1_ps(scale);
    for (i = 0; i < n; i += VW) {
      __mmask16 k = lanes_to(i, n);
      __m512 e = _mm512_maskz_mov_ps(
          k, exp16(_mm512_fmsub_ps(_mm512_maskz_loadu_ps(k, x + i), vscale, shift)));
      vs = _mm512_add_ps(vs, e);
      _mm512_storeu_ps(x + i, e); /* whole vectors: s's rows are 16-float multiples */
    }
    __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(vs));
    for (i = 0; i < n; i += VW)
      _mm512_mask_storeu_ps(row + i, lanes_to(i, n), _mm512_mul_ps(_mm512_loadu_ps(x + i), inv));
    for (i = n; i < T; i++) row[i] = 0.0f;
  }
}

TILE_TARGET static void head_softmax_backward_512(float *d, int ldd, const float *a, int lda, int m,
                                                  int r0, int T, float scale) {
  for (int t = 0; t < m; t++) {
    float *g = d + (size_t)t * ldd;
    const float *p = a + (size_t)t * lda;
    int n = r0 + t + 1, i;
    if (t + PF_ROWS < m) /* the probabilities come from memory, a row at a time */
      for (i = 0; i < n + PF_ROWS; i += VW)
        _mm_prefetch((const char *)(p + PF_ROWS * (size_t)lda + i), _MM_HINT_T0);
    __m512 vd = _mm512_setzero_ps();
    for (i = 0; i < n; i += VW) {
      __mmask16 k = lanes_to(i, n);
      vd = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, p + i), _mm512_maskz_loadu_ps(k, g + i), vd);
    }
    __m512 dot = _mm512_set1_ps(_mm512_reduce_add_ps(vd)), vscale = _mm512_set1_ps(scale);
    for (i = 0; i < n; i += VW) {
      __mmask16 k = lanes_to(i, n);
      __m512 pa = _mm512_maskz_loadu_ps(k, p + i);
      __m512 x = _mm512_mul_ps(_mm512_mul_ps(vscale, pa),
                               _mm512_sub_ps(_mm512_maskz_loadu_ps(k, g + i), dot));
      _mm512_mask_storeu_ps(g + i, k, x);
    }
    for (i = n; i < T; i++) g[i] = 0.0f;
  }
}

/* The public functions: the AVX-512 kernels above, else the AVX2 ones. */
void kt__head_transpose(float *xt, int Tp, const float *x, int ld, int T, int hs) {
  if (kt__avx512_ok()) head_transpose_512(xt, Tp, x, ld, T, hs);
  else kt__head_transpose_avx2(xt, Tp, x, ld, T, hs);
}
void kt__head_pack(float *xp, const float *x, int ld, int T, int hs) {
  kt__head_pack_avx2(xp, x, ld, T, hs); /* a copy: AVX2's width is enough */
}
void kt__head_scores(float *s, int lds, const float *a, int lda, const float *kt, int Tp, int m,
                     int r0, int hs) {
  if (kt__avx512_ok()) head_scores_512(s, lds, a, lda, kt, Tp, m, r0, hs);
  else kt__head_scores_avx2(s, lds, a, lda, kt, Tp, m, r0, hs);
}
void kt__head_rows(float *out, int ldo, const float *p, int ldp, const float *b, int ldb, int m,
                   int r0, int n, int hs) {
  if (kt__avx512_ok()) head_rows_512(out, ldo, p, ldp, b, ldb, m, r0, n, hs);
  else kt__head_rows_avx2(out, ldo, p, ldp, b, ldb, m, r0, n, hs);
}
void kt__head_keys(float *out, int ldo, const float *p, int ldp, const float *b, int ldb, int T,
                   int hs) {
  if (kt__avx512_ok()) head_keys_512(out, ldo, p, ldp, b, ldb, T, hs);
  else kt__head_keys_avx2(out, ldo, p, ldp, b, ldb, T, hs);
}
void kt__head_softmax(float *p, int ldp, float *s, int lds, int m, int r0, int T, float scale) {
  if (kt__avx512_ok()) head_softmax_512(p, ldp, s, lds, m, r0, T, scale);
  else kt__head_softmax_avx2(p, ldp, s, lds, m, r0, T, scale);
}
void kt__head_softmax_backward(float *d, int ldd, const float *a, int lda, int m, int r0, int T,
                               float scale) {
  if (kt__avx512_ok()) head_softmax_backward_512(d, ldd, a, lda, m, r0, T, scale);
  else kt__head_softmax_backward_avx2(d, ldd, a, lda, m, r0, T, scale);
}

#else
typedef int kt__no_head_tiles; /* ISO C: a translation unit declares something */
#endif
