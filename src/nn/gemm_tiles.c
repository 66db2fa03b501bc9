/* kaiten's own GEMM (the `kaiten` library of --gemm): c = beta c +
 * op(a) op(b) on AVX-512 register tiles, with the product's epilogue (bias,
 * residual, GELU and its derivative) applied to each tile as it is stored,
 * so the step's passes that laid the bias down before a product or ran
 * GELU after it read and write nothing of their own.
 *
 * The loops, for each 256-deep slice of the inner dimension:
 *   op(b)'s slice is packed once, in panels of 32 columns, each panel's rows
 *   contiguous (128 bytes a row), so a tile reads it as a stream from L2;
 *   a tile of 12 rows of the result walks every panel left to right, its
 *   12 rows of op(a) staying in L1 (when a is transposed, its 12 columns
 *   are first transposed 16 x 16 into 12 rows of the slice: in place they
 *   are rows kilobytes apart, which all fall in one L1 set; packed as 12
 *   floats a step of the inner dimension, the tiles ran about 5% slower
 *   than on rows);
 *   a tile keeps 24 accumulators (12 rows by 2 vectors of 16) and per step
 *   of the inner dimension loads 2 vectors of the panel and broadcasts 12
 *   floats of op(a): 14 loads (and 2 prefetches of the panel) for 24 FMAs.
 * On the larger GPT's shapes in cache (one core, bench/README.md) it runs
 * level with oneDNN's sgemm on the forward's products (b transposed), about
 * 5% behind on the input gradients' (neither transposed) and on the weight
 * gradients' (a transposed);
 * auto takes it per class of products where it measures faster, epilogue
 * included. */
#include <pthread.h>
#include <stdlib.h>

#include "nn/avx512.h"
#include "nn/nn.h"

#ifdef KT__HEAD_TILES

#define NR 32  /* columns of a tile and of a packed panel */
#define KC 256 /* depth of a packed slice */
#define MR 12  /* rows of a tile */
#define VW 16
/* steps of the inner dimension ahead that a tile prefetches its panel (it
 * comes from L2: the tiles run 1% faster in cache, 2-3% on operands from
 * memory, than on the hardware's prefetch alone) */
#define PF_B 16

/* AVX-512 where the CPU has it, else AVX2 + FMA (gemm_tiles_avx2.c). */
int kt__tiles_ok(void) { return kt__avx512_ok() || kt__avx2_ok(); }
/* r: bumped by a change to a kernel that moves its speed (auto's cached
 * choices name it) */
const char *kt__tiles_version(void) {
  return kt__avx512_ok() ? "avx512 12x32 r3" : kt__avx2_ok() ? "avx2 6x16 r3" : NULL;
}

/* Each thread's packed panels, kept from call to call (a product's are up
 * to a few MiB: malloc maps such blocks afresh, and zeroing the new pages
 * cost more than the packing); freed when the thread ends. */
typedef struct {
  float *p;
  size_t cap; /* floats */
} panel_buffer;
static pthread_key_t panel_key;
static int panel_key_ok; /* 0: no key to be had (every one taken): no buffer, the library runs */
static pthread_once_t panel_once = PTHREAD_ONCE_INIT;

static void panel_free(void *v) {
  panel_buffer *b = v;
  free(b->p), free(b);
}
static void panel_key_init(void) { panel_key_ok = !pthread_key_create(&panel_key, panel_free); }

float *kt__tiles_panels(size_t floats) {
  pthread_once(&panel_once, panel_key_init);
  if (!panel_key_ok) return NULL;
  panel_buffer *b = pthread_getspecific(panel_key);
  if (!b && (b = calloc(1, sizeof *b)) && pthread_setspecific(panel_key, b)) free(b), b = NULL;
  if (!b) return NULL;
  if (b->cap < floats) {
    free(b->p);
    b->cap = 0;
    b->p = aligned_alloc(64, (floats * sizeof(float) + 63) / 64 * 64);
    if (b->p) b->cap = floats;
  }
  return b->p;
}

/* One row's vector `half` of a tile, v, stored at c with its epilogue
 * (ep's pointers at the row's start; NULL: none) on the lanes k. */
KT__AVX512 static inline __attribute__((always_inline)) void store_row(float *c, __m512 v,
                                                                       const kt__tile_epi *ep,
                                                                       int half, __mmask16 k) {
  int col = VW * half;
  if (ep && ep->bias) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, ep->bias + col));
  if (ep && ep->res) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(k, ep->res + col));
  if (ep && ep->gelu) {
    __m512 g;
    v = gelu16(v, &g);
    _mm512_mask_storeu_ps(ep->grad + col, k, g);
  }
  _mm512_mask_storeu_ps(c + col, k, v);
}

/* c (mr, 32) = (load_c ? c : 0) + A (mr, kc) b (kc, 32), A(i, kk) =
 * a[i * ars + kk] (rows ars apart), b a packed panel; the lanes of m0 and m1 of each
 * row's two vectors are stored, with ep where given. */
KT__AVX512 static inline __attribute__((always_inline)) void tile(
    float *c, size_t ldc, const float *a, size_t ars, const float *b, int kc, const int mr,
    int load_c, __mmask16 m0, __mmask16 m1, const kt__tile_epi *ep) {
  __m512 acc[MR][2];
#pragma GCC unroll 12
  for (int i = 0; i < mr; i++) {
    acc[i][0] = load_c ? _mm512_maskz_loadu_ps(m0, c + i * ldc) : _mm512_setzero_ps();
    acc[i][1] = load_c ? _mm512_maskz_loadu_ps(m1, c + i * ldc + VW) : _mm512_setzero_ps();
  }
  for (int kk = 0; kk < kc; kk++) {
    const char *ahead = (const char *)(b + (kk + PF_B) * NR); /* may pass the panels' end: a hint */
    _mm_prefetch(ahead, _MM_HINT_T0);
    _mm_prefetch(ahead + 64, _MM_HINT_T0);
    __m512 b0 = _mm512_load_ps(b + kk * NR), b1 = _mm512_load_ps(b + kk * NR + VW);
    const float *ak = a + kk;
#pragma GCC unroll 12
    for (int i = 0; i < mr; i++) {
      __m512 x = _mm512_set1_ps(ak[i * ars]);
      acc[i][0] = _mm512_fmadd_ps(x, b0, acc[i][0]);
      acc[i][1] = _mm512_fmadd_ps(x, b1, acc[i][1]);
    }
  }
  for (int i = 0; i < mr; i++) {
    kt__tile_epi row = kt__tile_epi_row(ep, i, ldc);
    store_row(c + i * ldc, acc[i][0], ep ? &row : NULL, 0, m0);
    store_row(c + i * ldc, acc[i][1], ep ? &row : NULL, 1, m1);
  }
}

typedef void (*tile_fn)(float *c, size_t ldc, const float *a, size_t ars, const float *b, int kc,
                        int load_c, __mmask16 m0, __mmask16 m1, const kt__tile_epi *ep);
#define TILE(R) \
  KT__AVX512 static void tile_##R(float *c, size_t ldc, const float *a, size_t ars, \
                                  const float *b, int kc, int load_c, __mmask16 m0, __mmask16 m1, \
                                  const kt__tile_epi *ep) { \
    tile(c, ldc, a, ars, b, kc, R, load_c, m0, m1, ep); \
  }
// clang-format off
TILE(1) TILE(2) TILE(3) TILE(4) TILE(5) TILE(6) TILE(7) TILE(8) TILE(9) TILE(10) TILE(11) TILE(12)
static const tile_fn tiles[MR + 1] = {NULL, tile_1, tile_2, tile_3, tile_4, tile_5, tile_6,
                                      tile_7, tile_8, tile_9, tile_10, tile_11, tile_12};
// clang-format on

/* The first w lanes (of 16). */
static inline __mmask16 first_lanes(int w) {
  return w >= VW ? (__mmask16)0xFFFF : w <= 0 ? (__mmask16)0 : (__mmask16)((1u << w) - 1u);
}

/* d row i (16 floats, i < out_rows) = column i of the 16 x 16 block at s
 * (rows lds apart; rows from `rows` on and the columns outside `cols` read
 * as zero, and never touched). */
KT__AVX512 static void transpose16(float *d, size_t ldd, const float *s, size_t lds, int rows,
                                   __mmask16 cols, int out_rows) {
  __m512 r[VW], t[VW];
  for (int i = 0; i < VW; i++)
    r[i] = i < rows ? _mm512_maskz_loadu_ps(cols, s + i * lds) : _mm512_setzero_ps();
  for (int i = 0; i < 8; i++) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; i++) {
    r[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    r[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    r[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    r[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 4; j++) {
      t[8 * i + j] = _mm512_shuffle_f32x4(r[8 * i + j], r[8 * i + j + 4], 0x88);
      t[8 * i + j + 4] = _mm512_shuffle_f32x4(r[8 * i + j], r[8 * i + j + 4], 0xDD);
    }
  for (int j = 0; j < 8; j++) {
    r[j] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88);
    r[j + 8] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0xDD);
  }
  for (int i = 0; i < out_rows; i++) _mm512_storeu_ps(d + i * ldd, r[i]);
}

/* The slice of op(b) at rows [k0, k0 + kc) as panels of 32 columns (the
 * last one's columns from n on zero), panel j0 / 32 at p + j0 * kc. Where
 * b is not transposed its rows are read whole, one after the other (in a
 * step they come from memory, and the prefetchers follow a row, not 32
 * columns of each). */
KT__AVX512 static void pack_slice(float *p, const float *b, size_t ldb, int trans_b, int k0, int kc,
                                  int n) {
  if (!trans_b) {
    for (int kk = 0; kk < kc; kk++) {
      const float *row = b + (size_t)(k0 + kk) * ldb;
      for (int j0 = 0; j0 < n; j0 += NR) {
        float *to = p + (size_t)j0 * kc + kk * NR;
        _mm512_store_ps(to, _mm512_maskz_loadu_ps(first_lanes(n - j0), row + j0));
        _mm512_store_ps(to + VW, _mm512_maskz_loadu_ps(first_lanes(n - j0 - VW), row + j0 + VW));
      }
    }
    return;
  }
  for (int j0 = 0; j0 < n; j0 += NR) { /* op(b) (kk, j) = b[j * ldb + kk]: 16 x 16 transposes */
    float *panel = p + (size_t)j0 * kc;
    int w = n - j0 < NR ? n - j0 : NR, kk = 0;
    for (; kk + VW <= kc; kk += VW)
      for (int h = 0; h < 2; h++)
        transpose16(panel + kk * NR + VW * h, NR, b + (size_t)(j0 + VW * h) * ldb + k0 + kk, ldb,
                    w - VW * h, 0xFFFF, VW);
    for (; kk < kc; kk++)
      for (int j = 0; j < NR; j++)
        panel[kk * NR + j] = j < w ? b[(size_t)(j0 + j) * ldb + k0 + kk] : 0;
  }
}

/* Part `part` of `parts` of the lines of rows x bytes at p (rows ld bytes
 * apart) into L1: the next row of tiles' operands, a part per panel. */
static void tiles_prefetch_part(const char *p, size_t ld, int rows, size_t bytes, int part,
                                int parts) {
  size_t per_row = (bytes + 63) / 64, total = per_row * (size_t)rows;
  size_t lo = total * part / parts, hi = total * (part + 1) / parts;
  size_t row = lo / per_row, line = lo % per_row;
  for (size_t l = lo; l < hi; l++) {
    _mm_prefetch(p + row * ld + line * 64, _MM_HINT_T0);
    if (++line == per_row) line = 0, row++;
  }
}

/* The tiles of rows [i0, i0 + mr) over every panel of the slice, and
 * prefetches of the next row of tiles' rows of a and c (in a step, a
 * product's operands mostly come from memory). */
KT__AVX512 static void row_of_tiles(float *c, int ldc, const float *a, int lda, int trans_a,
                                    float *a_tile, const float *panels, int m, int n, int k0,
                                    int kc, int i0, int load_c, const kt__epilogue *ep) {
  int mr = m - i0 < MR ? m - i0 : MR, next = m - i0 - mr < MR ? m - i0 - mr : MR;
  const float *at = a_tile;
  size_t ars = KC;
  if (trans_a) { /* op(a) (i, kk) = a[kk * lda + i]: 16 x 16 transposes into mr rows */
    for (int kk = 0; kk < kc; kk += VW) { /* a row of a_tile is KC long: room for the last 16 */
      const float *rows = a + (size_t)(k0 + kk) * lda + i0;
      int depth = kc - kk < VW ? kc - kk : VW;
      if (next > 0) /* a hint: the lines ahead in these rows */
        for (int r = 0; r < depth; r++)
          _mm_prefetch((const char *)(rows + (size_t)r * lda + 2 * MR), _MM_HINT_T0);
      transpose16(a_tile + kk, KC, rows, (size_t)lda, depth, first_lanes(mr), mr);
    }
  } else {
    at = a + (size_t)i0 * lda + k0, ars = (size_t)lda;
  }
  int parts = (n + NR - 1) / NR;
  for (int j0 = 0, part = 0; j0 < n; j0 += NR, part++) {
    int w = n - j0 < NR ? n - j0 : NR;
    if (next > 0 && !trans_a)
      tiles_prefetch_part((const char *)(at + (size_t)mr * lda), (size_t)lda * sizeof(float), next,
                          (size_t)kc * sizeof(float), part, parts);
    if (next > 0 && load_c)
      tiles_prefetch_part((const char *)(c + (size_t)(i0 + mr) * ldc), (size_t)ldc * sizeof(float),
                          next, (size_t)n * sizeof(float), part, parts);
    kt__tile_epi te = kt__tile_epi_at(ep, i0, ldc, j0);
    tiles[mr](c + (size_t)i0 * ldc + j0, (size_t)ldc, at, ars, panels + (size_t)j0 * kc, kc, load_c,
              first_lanes(w), first_lanes(w - VW), ep ? &te : NULL);
  }
}

KT__AVX512 static void tiles512_sgemm(int trans_a, int trans_b, int m, int n, int k, const float *a,
                                      int lda, const float *b, int ldb, float beta, float *c,
                                      int ldc, const kt__epilogue *ep) {
  int depth = k < KC ? k : KC, padded = (n + NR - 1) / NR * NR;
  float *panels = k > 0 && m > 0 ? kt__tiles_panels((size_t)padded * depth) : NULL;
  if (!panels || (beta != 0.0f && beta != 1.0f)) { /* nothing to multiply, or a rare beta */
    kt__sgemm(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc);
    kt__epilogue_apply(c, ldc, m, n, ep);
    return;
  }
  _Alignas(64) float a_tile[KC * MR];
  for (int k0 = 0; k0 < k; k0 += KC) {
    int kc = k - k0 < KC ? k - k0 : KC, load_c = k0 > 0 || beta != 0.0f;
    pack_slice(panels, b, (size_t)ldb, trans_b, k0, kc, n);
    const kt__epilogue *last = k0 + kc == k ? ep : NULL;
    for (int i0 = 0; i0 < m; i0 += MR)
      row_of_tiles(c, ldc, a, lda, trans_a, a_tile, panels, m, n, k0, kc, i0, load_c, last);
  }
}

void kt__tiles_sgemm(int trans_a, int trans_b, int m, int n, int k, const float *a, int lda,
                     const float *b, int ldb, float beta, float *c, int ldc,
                     const kt__epilogue *ep) {
  if (kt__avx512_ok()) tiles512_sgemm(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc, ep);
  else kt__tiles_avx2_sgemm(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc, ep);
}

#else

int kt__tiles_ok(void) { return 0; }
const char *kt__tiles_version(void) { return "-"; }

void kt__tiles_sgemm(int trans_a, int trans_b, int m, int n, int k, const float *a, int lda,
                     const float *b, int ldb, float beta, float *c, int ldc,
                     const kt__epilogue *ep) {
  kt__sgemm(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc);
  kt__epilogue_apply(c, ldc, m, n, ep);
}

#endif
