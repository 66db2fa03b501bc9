/* DualPipeV (DeepSeek, the "cut-in-half" V-shaped variant of DualPipe).
 *
 * Two chunks per rank in v placement: rank r holds chunk0 = stage r (the
 * "phase 0" pass, going down the ranks) and chunk1 = stage 2P-1-r (phase 1,
 * coming back up). Needs M >= 2P. Rank r runs eight phases:
 *
 *   1. 2(P-1-r) x F(chunk0)
 *   2. (r+1) x (F(chunk0), F(chunk1))
 *   3. (P-1-r) x (I(chunk1), W oldest, F(chunk1))           zero-bubble warm-up
 *   4. (M-2P+1+r) x ([F(chunk0) & B(chunk1)], [F(chunk1) & B(chunk0)])
 *      the first pair of the last rank runs as F(chunk0) then B(chunk1)
 *   5. (P-1-r) x (B(chunk1), [F(chunk1) & B(chunk0)])
 *   6. (r+1) x (X(chunk1), X(chunk0)), X = B for the first half and I for the
 *      second: the switch happens at step (r+1)/2, before X(chunk1) on odd
 *      ranks and between the two on even ranks
 *   7. (P-1-r) x (W oldest, I(chunk0))
 *   8. (r+1) x W oldest
 *
 * [x & y] is an overlapped pair (x carries KT_ACTION_OVERLAP_NEXT). W ops
 * are taken first-in first-out over both chunks. This is the order of
 * DeepSeek's reference implementation and of PyTorch's ScheduleDualPipeV
 * (tests/data/dualpipev_4rank_10mb.csv is reproduced action for action). */
#include <stdlib.h>

#include "generators/internal.h"

typedef struct {
  kt_schedule *s;
  int rank;
  int stage[2];             /* chunk -> stage */
  int f[2], bwd[2];         /* next forward / backward micro-batch per chunk */
  int *wq, wq_head, wq_len; /* FIFO of pending W: stage * M + mb */
  kt_error *err;
} dpv_rank;

static kt_status dpv_push(dpv_rank *d, int chunk, kt_op op, int mb) {
  kt_error *err = d->err;
  KT__PUSH(d->s, d->rank, d->stage[chunk], op, mb);
  return KT_OK;
}

static kt_status dpv_f(dpv_rank *d, int chunk) {
  if (d->f[chunk] >= d->s->m) return KT_OK; /* cannot happen for M >= 2P */
  return dpv_push(d, chunk, KT_OP_F, d->f[chunk]++);
}

/* A full backward (B) or, with split set, its input half I (W queued). */
static kt_status dpv_b(dpv_rank *d, int chunk, int split) {
  if (d->bwd[chunk] >= d->s->m) return KT_OK;
  int mb = d->bwd[chunk]++;
  if (split) d->wq[(d->wq_head + d->wq_len++) % (2 * d->s->m)] = d->stage[chunk] * d->s->m + mb;
  return dpv_push(d, chunk, split ? KT_OP_I : KT_OP_B, mb);
}

static kt_status dpv_w(dpv_rank *d) {
  if (d->wq_len == 0) return KT_OK;
  int id = d->wq[d->wq_head];
  d->wq_head = (d->wq_head + 1) % (2 * d->s->m);
  d->wq_len--;
  kt_error *err = d->err;
  KT__PUSH(d->s, d->rank, id / d->s->m, KT_OP_W, id % d->s->m);
  return KT_OK;
}

/* Forward of chunk fc overlapped with the full backward of chunk bc. */
static kt_status dpv_pair(dpv_rank *d, int fc, int bc) {
  kt_status st = dpv_f(d, fc);
  if (st) return st;
  kt_rank_actions *ra = &d->s->ranks[d->rank];
  size_t before = ra->n;
  if ((st = dpv_b(d, bc, 0))) return st;
  if (ra->n == before + 1 && before > 0) ra->actions[before - 1].flags |= KT_ACTION_OVERLAP_NEXT;
  return KT_OK;
}

#define TRY(x) \
  do { \
    kt_status st_ = (x); \
    if (st_) return st_; \
  } while (0)

static kt_status dpv_build_rank(dpv_rank *d) {
  int p = d->s->p, r = d->rank, m = d->s->m;
  for (int k = 0; k < 2 * (p - 1 - r); k++) TRY(dpv_f(d, 0));
  for (int k = 0; k < r + 1; k++) {
    TRY(dpv_f(d, 0));
    TRY(dpv_f(d, 1));
  }
  for (int k = 0; k < p - 1 - r; k++) {
    TRY(dpv_b(d, 1, 1));
    TRY(dpv_w(d));
    TRY(dpv_f(d, 1));
  }
  for (int k = 0; k < m - 2 * p + 1 + r; k++) {
    if (k == 0 && r == p - 1) {
      TRY(dpv_f(d, 0));
      TRY(dpv_b(d, 1, 0));
    } else TRY(dpv_pair(d, 0, 1));
    TRY(dpv_pair(d, 1, 0));
  }
  for (int k = 0; k < p - 1 - r; k++) {
    TRY(dpv_b(d, 1, 0));
    TRY(dpv_pair(d, 1, 0));
  }
  int split = 0;
  for (int k = 0; k < r + 1; k++) {
    if (k == (r + 1) / 2 && r % 2 == 1) split = 1;
    TRY(dpv_b(d, 1, split));
    if (k == (r + 1) / 2 && r % 2 == 0) split = 1;
    TRY(dpv_b(d, 0, split));
  }
  for (int k = 0; k < p - 1 - r; k++) {
    TRY(dpv_w(d));
    TRY(dpv_b(d, 0, 1));
  }
  for (int k = 0; k < r + 1; k++) TRY(dpv_w(d));
  return KT_OK;
}

kt_status kt__gen_dualpipev(kt_schedule *s, const kt_gen_params *params, kt_error *err) {
  (void)params;
  int p = s->p, m = s->m;
  if (m < 2 * p)
    return kt_fail(err, KT_EINVAL,
                   "dualpipev needs M >= 2P micro-batches (got M=%d, P=%d): its warm-up sends "
                   "2P micro-batches into the V before the first backward",
                   m, p);
  int *wq = kt_calloc((size_t)2 * (size_t)m, sizeof *wq);
  if (!wq) return kt_fail(err, KT_ENOMEM, "out of memory building dualpipev");
  kt_status st = KT_OK;
  for (int r = 0; r < p && !st; r++) {
    dpv_rank d = {.s = s, .rank = r, .wq = wq, .err = err};
    d.stage[0] = kt_rank_chunk_stage(s, r, 0);
    d.stage[1] = kt_rank_chunk_stage(s, r, 1);
    st = dpv_build_rank(&d);
    if (!st && (d.f[0] != m || d.f[1] != m || d.bwd[0] != m || d.bwd[1] != m || d.wq_len))
      st = kt_fail(err, KT_EINVAL, "dualpipev: incomplete order on rank %d (P=%d, M=%d)", r, p, m);
  }
  free(wq);
  return st;
}
