/* GPT causal self-attention: the per-head kernels (every matmul through
 * kt__matmul_ld) and their blocked, threaded forms (on AVX-512, heads of
 * whole 16s multiply on the register tiles of head_tiles.c instead).
 * Legend: B = batch, T = time, C = channels, NH = heads, hs = C / NH head
 * size. */
#include "nn/gpt_simd.h"

/* ---- causal self-attention -------------------------------------------------- *
 * Each head's q, k and v are column slices of the (B,T,3C) qkv rows; the
 * matmuls read them (and write the output and the input gradient) in place
 * through row strides, so no head is ever copied out; each head's slice of
 * the input gradient is written by exactly one matmul, so the backward
 * overwrites it (beta = 0) and nothing needs zeroing first. The softmax rows run
 * in whole vf (VL floats) up to the diagonal's, masking by index there (no
 * scalar tail unless T itself is not a multiple of VL). */

/* Blocks of row u < n cover [0, vend): n rounded up to VL, not past the
 * last whole block of the row; [vend, n) is the scalar tail. */
static inline int causal_vend(int n, int T) {
  int up = (n + VL - 1) / VL * VL, whole = T / VL * VL;
  return up < whole ? up : whole;
}

/* y[i] = exp(x[i] * scale - shift) */
ROW void row_exp_to(float *restrict y, const float *restrict x, int n, float scale, float shift) {
  int i = 0;
  for (; i + VL <= n; i += VL)
    for (int j = 0; j < VL; j++) y[i + j] = kt__fast_expf(x[i + j] * scale - shift);
  for (; i < n; i++) y[i] = kt__fast_expf(x[i] * scale - shift);
}

/* s (T): raw scores q.k in [0, n), n = t + 1; row (T) receives their
 * softmax (of scale * scores) there and 0 above the diagonal */
ROW void softmax_causal_row(float *restrict row, const float *restrict s, int n, int T,
                            float scale) {
  int vend = causal_vend(n, T), end = vend > n ? vend : n, i;
  vf vm = vsplat(-INFINITY), vs = {0};
  float m = -INFINITY, sum = 0.0f;
  for (i = 0; i < vend; i += VL) {
    vf v = VSELECT(lanes_before(i, n), vload(s + i), vsplat(-INFINITY));
    vmax_into(&vm, &v);
  }
  for (; i < n; i++) m = s[i] > m ? s[i] : m;
  float vmx = fold_max(&vm);
  m = vmx > m ? vmx : m;
  row_exp_to(row, s, end, scale, m * scale); /* lanes past n: finite scores, masked next */
  for (i = 0; i < vend; i += VL) {
    vf e = VSELECT(lanes_before(i, n), vload(row + i), vsplat(0.0f));
    vstore(row + i, &e);
    vs += e;
  }
  for (; i < n; i++) sum += row[i];
  row_scale(row, 1.0f / (sum + fold_sum(&vs)), end);
  row_zero(row + end, T - end);
}

/* d (T): gradient of the probabilities a (T) of row t (n = t + 1); on return
 * the gradient of the raw scores: scale * a * (d - sum(a * d)), 0 above the
 * diagonal (d there is never read as a number) */
ROW void softmax_causal_row_backward(float *restrict d, const float *restrict a, int n, int T,
                                     float scale) {
  int vend = causal_vend(n, T), end = vend > n ? vend : n, i;
  vf vd = {0};
  float dot = 0.0f;
  for (i = 0; i < vend; i += VL)
    vd += VSELECT(lanes_before(i, n), vload(a + i) * vload(d + i), vsplat(0.0f));
  for (; i < n; i++) dot += a[i] * d[i];
  dot += fold_sum(&vd);
  for (i = 0; i < vend; i += VL) {
    vf g = scale * vload(a + i) * (vload(d + i) - dot);
    g = VSELECT(lanes_before(i, n), g, vsplat(0.0f));
    vstore(d + i, &g);
  }
  for (; i < n; i++) d[i] = scale * a[i] * (d[i] - dot);
  row_zero(d + end, T - end);
}

/* T x T scores (Tp x Tp on the register tiles, whose rows are whole 16s),
 * then the transposed keys or values the tiles multiply by (hs x Tp), then
 * two of the head's slices packed (Tp x hs each). */
size_t kt__attention_scratch_floats(int T, int hs) {
  size_t Tp = (size_t)kt__head_tiles_width(T);
  return Tp * Tp + 3 * (size_t)hs * Tp;
}

/* The scores of a head go to scratch, which stays in cache, and only the
 * probabilities to att, row by row (sgemm writing att's cold lines itself
 * was the slowest matmul of the step). The backward reads each head's att
 * in the softmax first, so the matmul that reads it again finds it cached. */
SIMD_CLONES void kt__attention_forward(float *out, float *att, float *scratch, const float *inp,
                                       int B, int T, int C, int NH) {
  int hs = C / NH;
  float scale = 1.0f / sqrtf((float)hs);
  float *sc = scratch; /* (T,T) */
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++) {
      const float *q = inp + (size_t)b * T * 3 * C + (size_t)h * hs;  /* (T,hs), stride 3C */
      const float *k = q + C, *v = q + 2 * (size_t)C;                 /* (T,hs), stride 3C */
      float *a = att + ((size_t)b * NH + h) * (size_t)T * T;          /* (T,T) */
      float *y = out + (size_t)b * T * C + (size_t)h * hs;            /* (T,hs), stride C */
      kt__matmul_ld(sc, T, q, 3 * C, k, 3 * C, T, T, hs, 0, 1, 0.0f); /* q k^T */
      for (int t = 0; t < T; t++)
        softmax_causal_row(a + (size_t)t * T, sc + (size_t)t * T, t + 1, T, scale);
      kt__matmul_ld(y, C, a, T, v, 3 * C, T, hs, T, 0, 0, 0.0f); /* att v */
    }
}

SIMD_CLONES void kt__attention_backward(float *dinp, float *scratch, const float *dout,
                                        const float *inp, const float *att, int B, int T, int C,
                                        int NH) {
  int hs = C / NH;
  float scale = 1.0f / sqrtf((float)hs);
  float *datt = scratch; /* (T,T) */
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++) {
      size_t off = (size_t)b * T * 3 * C + (size_t)h * hs;
      const float *q = inp + off, *k = q + C, *v = q + 2 * (size_t)C; /* stride 3C */
      float *dq = dinp + off, *dk = dq + C, *dv = dq + 2 * (size_t)C; /* stride 3C */
      const float *a = att + ((size_t)b * NH + h) * (size_t)T * T;    /* (T,T) */
      const float *dy = dout + (size_t)b * T * C + (size_t)h * hs;    /* (T,hs), stride C */
      kt__matmul_ld(datt, T, dy, C, v, 3 * C, T, T, hs, 0, 1, 0.0f);  /* dy v^T */
      for (int t = 0; t < T; t++)
        softmax_causal_row_backward(datt + (size_t)t * T, a + (size_t)t * T, t + 1, T, scale);
      kt__matmul_ld(dv, 3 * C, a, T, dy, C, T, hs, T, 1, 0, 0.0f);       /* att^T dy */
      kt__matmul_ld(dq, 3 * C, datt, T, k, 3 * C, T, hs, T, 0, 0, 0.0f); /* dS k */
      kt__matmul_ld(dk, 3 * C, datt, T, q, 3 * C, T, hs, T, 1, 0, 0.0f); /* dS^T q */
    }
}

/* ---- blocked and threaded ------------------------------------------------------ *
 * The same attention with query rows in blocks of qb: a block's scores,
 * products and gradients cover the keys up to its last row only (rounded
 * up to whole vf, which the softmax rows read), so most of the masked
 * half above the diagonal is never computed; in the backward the key and
 * value gradients go by key block, each a product over the query rows at
 * and below it, so every element still has one writer. Heads run as tasks
 * on the current pool, each thread in its own T x T of scratch. */

/* Score columns a block ending at key n computes: n up to whole vf. */
static inline int block_cols(int n, int T) {
  int v = causal_vend(n, T);
  return v > n ? v : n;
}

typedef struct {
  float *out, *att, *scratch, *dinp;
  const float *inp, *dout;
  int B, T, C, NH, qb, tiles; /* tiles: kt__head_tiles_ok */
} attention_job;

#ifdef KT__HEAD_TILES
/* A head on the register tiles (kt__head_tiles_ok): scores at row stride
 * Tp in scratch, the keys transposed after them, then the queries and the
 * values packed; each product accounted as the kt__matmul_ld call of the
 * path below that it replaces. The tiles read their operands' rows from
 * the packed copies: in place, a slice's rows are 3C floats apart (3 KiB
 * at C = 256), so a head's rows fall into a few of L1's sets and evicted
 * each other between the tiles that read them again. */
static void head_forward_tiles(const attention_job *j, float *sc, const float *q, float *a,
                               float *y) {
  int T = j->T, C = j->C, hs = C / j->NH, Tp = kt__head_tiles_width(T);
  const float *k = q + C, *v = q + 2 * (size_t)C;
  float scale = 1.0f / sqrtf((float)hs), *kt = sc + (size_t)Tp * Tp;
  float *pq = kt + (size_t)hs * Tp, *pv = pq + (size_t)hs * Tp;
  double t0 = kt_now(), flops = 0;
  kt__head_transpose(kt, Tp, k, 3 * C, T, hs);
  kt__head_pack(pq, q, 3 * C, T, hs);
  kt__head_pack(pv, v, 3 * C, T, hs);
  for (int i0 = 0; i0 < T; i0 += j->qb) {
    int r = T - i0 < j->qb ? T - i0 : j->qb, n = i0 + r;
    kt__head_scores(sc, Tp, pq + (size_t)i0 * hs, hs, kt, Tp, r, i0, hs);
    kt__head_softmax(a + (size_t)i0 * T, T, sc, Tp, r, i0, T, scale);
    kt__head_rows(y + (size_t)i0 * C, C, a + (size_t)i0 * T, T, pv, hs, r, i0, T, hs);
    flops += kt__matmul_shape_of(r, block_cols(n, T), hs, 0, 1, 0.0f, 3 * C, 3 * C, T); /* q k^T */
    flops += kt__matmul_shape_of(r, hs, n, 0, 0, 0.0f, T, 3 * C, C);                    /* att v */
  }
  kt__matmul_add(flops, kt_now() - t0); /* the softmax's time included: it is fused in */
}

/* dS at row stride Tp in scratch, the values transposed after it, then
 * the output's gradient and the keys packed (the queries, once the keys
 * are done) */
static void head_backward_tiles(const attention_job *j, float *ds, const float *q, float *dq,
                                const float *a, const float *dy) {
  int T = j->T, C = j->C, hs = C / j->NH, Tp = kt__head_tiles_width(T);
  const float *k = q + C, *v = q + 2 * (size_t)C;
  float *dk = dq + C, *dv = dq + 2 * (size_t)C;
  float scale = 1.0f / sqrtf((float)hs), *vt = ds + (size_t)Tp * Tp;
  float *pdy = vt + (size_t)hs * Tp, *pk = pdy + (size_t)hs * Tp;
  double t0 = kt_now(), flops = 0;
  kt__head_transpose(vt, Tp, v, 3 * C, T, hs);
  kt__head_pack(pdy, dy, C, T, hs);
  kt__head_pack(pk, k, 3 * C, T, hs);
  for (int i0 = 0; i0 < T; i0 += j->qb) {
    int r = T - i0 < j->qb ? T - i0 : j->qb, n = i0 + r;
    float *d = ds + (size_t)i0 * Tp;
    kt__head_scores(d, Tp, pdy + (size_t)i0 * hs, hs, vt, Tp, r, i0, hs); /* dy v^T */
    kt__head_softmax_backward(d, Tp, a + (size_t)i0 * T, T, r, i0, T, scale);
    kt__head_rows(dq + (size_t)i0 * 3 * C, 3 * C, d, Tp, pk, hs, r, i0, T, hs); /* dS k */
    flops += kt__matmul_shape_of(r, block_cols(n, T), hs, 0, 1, 0.0f, C, 3 * C, T);
    flops += kt__matmul_shape_of(r, hs, n, 0, 0, 0.0f, T, 3 * C, 3 * C);
  }
  float *pq = pk; /* the keys are done with */
  kt__head_pack(pq, q, 3 * C, T, hs);
  kt__head_keys(dk, 3 * C, ds, Tp, pq, hs, T, hs); /* dS^T q */
  kt__head_keys(dv, 3 * C, a, T, pdy, hs, T, hs);  /* att^T dy */
  for (int j0 = 0; j0 < T; j0 += j->qb) {
    int r = T - j0 < j->qb ? T - j0 : j->qb, rows = T - j0;
    flops += kt__matmul_shape_of(r, hs, rows, 1, 0, 0.0f, T, 3 * C, 3 * C);
    flops += kt__matmul_shape_of(r, hs, rows, 1, 0, 0.0f, T, C, 3 * C);
  }
  kt__matmul_add(flops, kt_now() - t0);
}
#endif

SIMD_CLONES static void head_forward(void *arg, int task, int thread) {
  const attention_job *j = arg;
  int T = j->T, C = j->C, hs = C / j->NH, b = task / j->NH, h = task % j->NH;
  float scale = 1.0f / sqrtf((float)hs);
  float *sc = j->scratch + (size_t)thread * kt__attention_scratch_floats(T, hs); /* (qb,T) */
  const float *q = j->inp + (size_t)b * T * 3 * C + (size_t)h * hs; /* (T,hs), stride 3C */
  const float *k = q + C, *v = q + 2 * (size_t)C;
  float *a = j->att + ((size_t)b * j->NH + h) * (size_t)T * T; /* (T,T) */
  float *y = j->out + (size_t)b * T * C + (size_t)h * hs;      /* (T,hs), stride C */
#ifdef KT__HEAD_TILES
  if (j->tiles) {
    head_forward_tiles(j, sc, q, a, y);
    return;
  }
#endif
  for (int i0 = 0; i0 < T; i0 += j->qb) {
    int r = T - i0 < j->qb ? T - i0 : j->qb, n = i0 + r;
    kt__matmul_ld(sc, T, q + (size_t)i0 * 3 * C, 3 * C, k, 3 * C, r, block_cols(n, T), hs, 0, 1,
                  0.0f); /* q k^T */
    for (int t = 0; t < r; t++)
      softmax_causal_row(a + (size_t)(i0 + t) * T, sc + (size_t)t * T, i0 + t + 1, T, scale);
    kt__matmul_ld(y + (size_t)i0 * C, C, a + (size_t)i0 * T, T, v, 3 * C, r, hs, n, 0, 0,
                  0.0f); /* att v */
  }
}

SIMD_CLONES static void head_backward(void *arg, int task, int thread) {
  const attention_job *j = arg;
  int T = j->T, C = j->C, hs = C / j->NH, b = task / j->NH, h = task % j->NH;
  float scale = 1.0f / sqrtf((float)hs);
  float *ds = j->scratch + (size_t)thread * kt__attention_scratch_floats(T, hs); /* (T,T) */
  size_t off = (size_t)b * T * 3 * C + (size_t)h * hs;
  const float *q = j->inp + off, *k = q + C, *v = q + 2 * (size_t)C; /* stride 3C */
  float *dq = j->dinp + off, *dk = dq + C, *dv = dq + 2 * (size_t)C; /* stride 3C */
  const float *a = j->att + ((size_t)b * j->NH + h) * (size_t)T * T;
  const float *dy = j->dout + (size_t)b * T * C + (size_t)h * hs; /* stride C */
#ifdef KT__HEAD_TILES
  if (j->tiles) {
    head_backward_tiles(j, ds, q, dq, a, dy);
    return;
  }
#endif
  for (int i0 = 0; i0 < T; i0 += j->qb) { /* by query block: dS, then dq */
    int r = T - i0 < j->qb ? T - i0 : j->qb, n = i0 + r;
    float *d = ds + (size_t)i0 * T;
    kt__matmul_ld(d, T, dy + (size_t)i0 * C, C, v, 3 * C, r, block_cols(n, T), hs, 0, 1,
                  0.0f); /* dy v^T */
    for (int t = 0; t < r; t++)
      softmax_causal_row_backward(d + (size_t)t * T, a + (size_t)(i0 + t) * T, i0 + t + 1, T,
                                  scale);
    kt__matmul_ld(dq + (size_t)i0 * 3 * C, 3 * C, d, T, k, 3 * C, r, hs, n, 0, 0, 0.0f); /* dS k */
  }
  for (int j0 = 0; j0 < T; j0 += j->qb) { /* by key block: dk, dv over the rows at and below */
    int r = T - j0 < j->qb ? T - j0 : j->qb, rows = T - j0;
    size_t at = (size_t)j0 * T + (size_t)j0;
    kt__matmul_ld(dk + (size_t)j0 * 3 * C, 3 * C, ds + at, T, q + (size_t)j0 * 3 * C, 3 * C, r, hs,
                  rows, 1, 0, 0.0f); /* dS^T q */
    kt__matmul_ld(dv + (size_t)j0 * 3 * C, 3 * C, a + at, T, dy + (size_t)j0 * C, C, r, hs, rows, 1,
                  0, 0.0f); /* att^T dy */
  }
}

/* Runs FN on every (sequence, head) of J, on the chunk's threads unless
 * this already is one of its tasks. */
static void run_heads(attention_job *j, int qb, kt__task_fn fn) {
  j->qb = qb > 0 ? qb : j->T;
#ifdef KT__HEAD_TILES
  j->tiles = kt__head_tiles_ok(j->C / j->NH);
#endif
  const kt__exec *e = kt__exec_current();
  kt__pool_run(e->in_task ? NULL : e->pool, j->B * j->NH, fn, j);
}

void kt__attention_forward_blocked(float *out, float *att, float *scratch, const float *inp, int B,
                                   int T, int C, int NH, int qb) {
  attention_job j = {
      .out = out, .att = att, .scratch = scratch, .inp = inp, .B = B, .T = T, .C = C, .NH = NH};
  run_heads(&j, qb, head_forward);
}

void kt__attention_backward_blocked(float *dinp, float *scratch, const float *dout,
                                    const float *inp, const float *att, int B, int T, int C, int NH,
                                    int qb) {
  attention_job j = {.att = (float *)att,
                     .scratch = scratch,
                     .dinp = dinp,
                     .inp = inp,
                     .dout = dout,
                     .B = B,
                     .T = T,
                     .C = C,
                     .NH = NH};
  run_heads(&j, qb, head_backward);
}

/* ---- packed documents: one sequence per document ---------------------------- */

int kt__doc_length(const int *pos, const int *row, int i, int N) {
  int L = 1;
  while (i + L < N && pos[i + L] == pos[i + L - 1] + 1 &&
         (!row || row[i + L] == row[i + L - 1] + 1))
    L++;
  return L;
}

void kt__attention_forward_packed(float *out, float *att, float *scratch, const float *inp,
                                  const int *pos, int N, int C, int NH, int reference) {
  size_t a = 0;
  for (int i = 0; i < N;) {
    int L = kt__doc_length(pos, NULL, i, N);
    float *o = out + (size_t)i * C, *p = att + a;
    const float *x = inp + (size_t)i * 3 * C;
    if (reference) kt__attention_forward(o, p, scratch, x, 1, L, C, NH);
    else kt__attention_forward_blocked(o, p, scratch, x, 1, L, C, NH, KT__ATT_QB);
    a += (size_t)NH * L * L;
    i += L;
  }
}

void kt__attention_backward_packed(float *dinp, float *scratch, const float *dout, const float *inp,
                                   const float *att, const int *pos, int N, int C, int NH,
                                   int reference) {
  size_t a = 0;
  for (int i = 0; i < N;) {
    int L = kt__doc_length(pos, NULL, i, N);
    float *d = dinp + (size_t)i * 3 * C;
    const float *x = inp + (size_t)i * 3 * C, *dy = dout + (size_t)i * C, *p = att + a;
    if (reference) kt__attention_backward(d, scratch, dy, x, p, 1, L, C, NH);
    else kt__attention_backward_blocked(d, scratch, dy, x, p, 1, L, C, NH, KT__ATT_QB);
    a += (size_t)NH * L * L;
    i += L;
  }
}

/* ---- a micro-batch in chunks along the sequence ------------------------------ *
 * A piece: rows [i, i + l) of the chunk, a document's rows from its key n0 =
 * pos[i] on; its queries see the document's keys [s, s + n) of the whole
 * micro-batch, n = n0 + l, query t the first n0 + t + 1. */
typedef struct {
  float *out, *att, *scratch, *dinp, *gd;
  const float *inp, *g, *dout;
  int C, NH, T, i, l, n0, s;
} piece_job;

SIMD_CLONES static void piece_forward(void *arg, int h, int thread) {
  const piece_job *j = arg;
  int C = j->C, hs = C / j->NH, l = j->l, n = j->n0 + l;
  float scale = 1.0f / sqrtf((float)hs);
  float *sc =
      j->scratch + (size_t)thread * kt__attention_scratch_floats(j->T, C / j->NH); /* (qb,n) used */
  const float *q = j->inp + (size_t)j->i * 3 * C + (size_t)h * hs; /* (l,hs), stride 3C */
  const float *k = j->g + (size_t)j->s * 3 * C + C + (size_t)h * hs, *v = k + C; /* (n,hs) */
  float *a = j->att + (size_t)h * l * n;                                         /* (l,n) */
  float *y = j->out + (size_t)j->i * C + (size_t)h * hs; /* (l,hs), stride C */
  for (int t0 = 0; t0 < l; t0 += KT__ATT_QB) { /* query blocks: keys up to their last row */
    int r = l - t0 < KT__ATT_QB ? l - t0 : KT__ATT_QB, last = j->n0 + t0 + r;
    kt__matmul_ld(sc, n, q + (size_t)t0 * 3 * C, 3 * C, k, 3 * C, r, block_cols(last, n), hs, 0, 1,
                  0.0f); /* q k^T */
    for (int t = 0; t < r; t++)
      softmax_causal_row(a + (size_t)(t0 + t) * n, sc + (size_t)t * n, j->n0 + t0 + t + 1, n,
                         scale);
    kt__matmul_ld(y + (size_t)t0 * C, C, a + (size_t)t0 * n, n, v, 3 * C, r, hs, last, 0, 0,
                  0.0f); /* att v */
  }
}

SIMD_CLONES static void piece_backward(void *arg, int h, int thread) {
  const piece_job *j = arg;
  int C = j->C, hs = C / j->NH, l = j->l, n0 = j->n0, n = n0 + l;
  float scale = 1.0f / sqrtf((float)hs);
  float *ds =
      j->scratch + (size_t)thread * kt__attention_scratch_floats(j->T, C / j->NH); /* (l,n) */
  const float *q = j->g + (size_t)(j->s + n0) * 3 * C + (size_t)h * hs;            /* (l,hs) */
  size_t key = (size_t)j->s * 3 * C + C + (size_t)h * hs;
  const float *k = j->g + key, *v = k + C;
  float *dk = j->gd + key, *dv = dk + C; /* (n,hs), stride 3C: accumulated */
  const float *a = j->att + (size_t)h * l * n;
  const float *dy = j->dout + (size_t)j->i * C + (size_t)h * hs;
  float *dq = j->dinp + (size_t)j->i * 3 * C + (size_t)h * hs;
  for (int t0 = 0; t0 < l; t0 += KT__ATT_QB) { /* by query block: dS, then dq */
    int r = l - t0 < KT__ATT_QB ? l - t0 : KT__ATT_QB, last = n0 + t0 + r;
    float *d = ds + (size_t)t0 * n;
    kt__matmul_ld(d, n, dy + (size_t)t0 * C, C, v, 3 * C, r, block_cols(last, n), hs, 0, 1,
                  0.0f); /* dy v^T */
    for (int t = 0; t < r; t++)
      softmax_causal_row_backward(d + (size_t)t * n, a + (size_t)(t0 + t) * n, n0 + t0 + t + 1, n,
                                  scale);
    kt__matmul_ld(dq + (size_t)t0 * 3 * C, 3 * C, d, n, k, 3 * C, r, hs, last, 0, 0,
                  0.0f); /* dS k */
  }
  if (n0 > 0) { /* the earlier chunks' keys: every row saw them */
    kt__matmul_ld(dk, 3 * C, ds, n, q, 3 * C, n0, hs, l, 1, 0, 1.0f); /* += dS^T q */
    kt__matmul_ld(dv, 3 * C, a, n, dy, C, n0, hs, l, 1, 0, 1.0f);     /* += att^T dy */
  }
  /* this chunk's keys by block: the rows at and below */
  for (int j0 = 0; j0 < l; j0 += KT__ATT_QB) {
    int r = l - j0 < KT__ATT_QB ? l - j0 : KT__ATT_QB, rows = l - j0;
    size_t at = (size_t)j0 * n + (size_t)(n0 + j0), kr = (size_t)(n0 + j0) * 3 * C;
    kt__matmul_ld(dk + kr, 3 * C, ds + at, n, q + (size_t)j0 * 3 * C, 3 * C, r, hs, rows, 1, 0,
                  1.0f); /* += dS^T q */
    kt__matmul_ld(dv + kr, 3 * C, a + at, n, dy + (size_t)j0 * C, C, r, hs, rows, 1, 0,
                  1.0f); /* += att^T dy */
  }
}

/* Runs fn for every piece of the chunk, heads on the current pool. */
static void for_pieces(piece_job *j, const int *pos, const int *row, int N, kt__task_fn fn) {
  const kt__exec *e = kt__exec_current();
  float *att = j->att;
  for (int i = 0; i < N;) {
    int l = kt__doc_length(pos, row, i, N);
    j->i = i, j->l = l, j->n0 = pos[i], j->s = row[i] - pos[i];
    kt__pool_run(e->in_task ? NULL : e->pool, j->NH, fn, j);
    j->att += (size_t)j->NH * l * (j->n0 + l);
    i += l;
  }
  j->att = att;
}

void kt__attention_forward_chunked(float *out, float *att, float *scratch, float *gqkv,
                                   const float *inp, const int *pos, const int *row, int N, int T,
                                   int C, int NH) {
  for (int i = 0; i < N; i++) /* this chunk's q | k | v join the micro-batch's */
    memcpy(gqkv + (size_t)row[i] * 3 * C, inp + (size_t)i * 3 * C, 3 * (size_t)C * sizeof(float));
  piece_job j = {
      .out = out, .att = att, .scratch = scratch, .inp = inp, .g = gqkv, .C = C, .NH = NH, .T = T};
  for_pieces(&j, pos, row, N, piece_forward);
}

void kt__attention_backward_chunked(float *dinp, float *gdkv, float *scratch, const float *dout,
                                    const float *gqkv, const float *att, const int *pos,
                                    const int *row, int N, int T, int C, int NH) {
  piece_job j = {.att = (float *)att,
                 .scratch = scratch,
                 .dinp = dinp,
                 .gd = gdkv,
                 .g = gqkv,
                 .dout = dout,
                 .C = C,
                 .NH = NH,
                 .T = T};
  for_pieces(&j, pos, row, N, piece_backward);
  for (int i = 0; i < N; i++) /* this chunk's key and value gradients, complete now */
    memcpy(dinp + (size_t)i * 3 * C + C, gdkv + (size_t)row[i] * 3 * C + C,
           2 * (size_t)C * sizeof(float));
}
