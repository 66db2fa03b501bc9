/* Classic generators: gpipe, 1f1b, interleaved 1F1B, looped BFS. */
#include "kaiten/sim.h"
#include "generators/internal.h"

/* GPipe (fill-drain): all forwards, then all backwards in micro-batch order. */
kt_status kt__gen_gpipe(kt_schedule *s, const kt_schedule_params *params, kt_error *err) {
  (void)params;
  for (int r = 0; r < s->p; r++) {
    for (int j = 0; j < s->m; j++) KT__PUSH(s, r, r, KT_OP_F, j);
    for (int j = 0; j < s->m; j++) KT__PUSH(s, r, r, KT_OP_B, j);
  }
  return KT_OK;
}

/* 1F1B (PipeDream-Flush): rank r runs min(P-1-r, M) warm-up forwards, then
 * alternates one forward and one backward, then drains the backwards. */
kt_status kt__gen_1f1b(kt_schedule *s, const kt_schedule_params *params, kt_error *err) {
  (void)params;
  for (int r = 0; r < s->p; r++) {
    int warm = s->p - 1 - r < s->m ? s->p - 1 - r : s->m;
    for (int j = 0; j < warm; j++) KT__PUSH(s, r, r, KT_OP_F, j);
    for (int j = 0; j < s->m - warm; j++) {
      KT__PUSH(s, r, r, KT_OP_F, warm + j);
      KT__PUSH(s, r, r, KT_OP_B, j);
    }
    for (int j = s->m - warm; j < s->m; j++) KT__PUSH(s, r, r, KT_OP_B, j);
  }
  return KT_OK;
}

/* The k-th forward (or backward) a rank runs in interleaved order: micro-batches
 * are taken in groups of P; within a group every chunk runs the whole group
 * before the next chunk starts (forward: chunks ascending, backward: descending).
 * The last group may be smaller than P when M is not a multiple of P. */
static void interleaved_slot(int p, int v, int m, int k, int backward, int *chunk, int *mb) {
  int group_start = (k / (p * v)) * p;
  int group_size = m - group_start < p ? m - group_start : p;
  int within = k - group_start * v;
  int c = within / group_size;
  *chunk = backward ? v - 1 - c : c;
  *mb = group_start + within % group_size;
}

/* Interleaved 1F1B (Megatron virtual pipeline): V chunks per rank, loop
 * placement. Warm-up (V-1)P + 2(P-1-r) forwards, capped at V*M (all forwards
 * first when M == P), then one forward / one backward, then the drain.
 * Accepted M: any M >= P. Multiples of P give the closed-form bubble
 * (P-1)/(V*M+P-1); other M >= P run correctly with a slightly larger bubble
 * because the last group of micro-batches is short. M < P is rejected: a
 * chunk would have to wait for micro-batches that do not exist. */
static kt_status build_interleaved(kt_schedule *s, int extra_warmup, kt_error *err) {
  int p = s->p, v = s->v, m = s->m, total = v * m;
  for (int r = 0; r < p; r++) {
    s->ranks[r].n = 0;
    int warm = m == p ? total : (v - 1) * p + 2 * (p - 1 - r) + extra_warmup;
    if (warm > total) warm = total;
    int chunk, mb, nf = 0, nb = 0;
    for (; nf < warm; nf++) {
      interleaved_slot(p, v, m, nf, 0, &chunk, &mb);
      KT__PUSH(s, r, kt_rank_chunk_stage(s, r, chunk), KT_OP_F, mb);
    }
    while (nf < total) {
      interleaved_slot(p, v, m, nf++, 0, &chunk, &mb);
      KT__PUSH(s, r, kt_rank_chunk_stage(s, r, chunk), KT_OP_F, mb);
      interleaved_slot(p, v, m, nb++, 1, &chunk, &mb);
      KT__PUSH(s, r, kt_rank_chunk_stage(s, r, chunk), KT_OP_B, mb);
    }
    while (nb < total) {
      interleaved_slot(p, v, m, nb++, 1, &chunk, &mb);
      KT__PUSH(s, r, kt_rank_chunk_stage(s, r, chunk), KT_OP_B, mb);
    }
  }
  return KT_OK;
}

/* Interleaved 1F1B (Megatron virtual pipeline): V chunks per rank, loop
 * placement. Warm-up (V-1)P + 2(P-1-r) forwards, capped at V*M (all forwards
 * first when M == P), then one forward / one backward, then the drain.
 *
 * Accepted M: any M >= P. When M is a multiple of P the schedule is exactly
 * Megatron's and its bubble is (P-1)/(V*M+P-1). Otherwise the last group of
 * micro-batches is short and the standard warm-up can deadlock (a chunk waits
 * for a forward its upstream rank has queued behind a backward), so every
 * rank's warm-up grows by the smallest common amount that makes the schedule
 * deadlock-free, checked by dependency simulation; the bubble is then somewhat
 * above the formula. M < P is rejected: chunks would starve. */
kt_status kt__gen_interleaved(kt_schedule *s, const kt_schedule_params *params, kt_error *err) {
  (void)params;
  int p = s->p, v = s->v, m = s->m;
  if (v < 2)
    return kt_fail(err, KT_EINVAL, "interleaved needs V >= 2 chunks per rank (got V=%d)", v);
  if (m < p)
    return kt_fail(err, KT_EINVAL,
                   "interleaved needs M >= P (got M=%d, P=%d): with fewer micro-batches than "
                   "ranks the chunks starve; use 1f1b or looped-bfs",
                   m, p);
  for (int extra = 0; extra <= v * m; extra++) {
    kt_status st = build_interleaved(s, extra, err);
    if (st || m % p == 0) return st;
    kt_error ignored;
    st = kt_simulate(s, NULL, NULL, &ignored);
    if (st == KT_OK) return KT_OK;
    if (st != KT_EDEADLOCK) return kt_fail(err, st, "interleaved: %s", ignored.msg);
  }
  return kt_fail(err, KT_EINVAL, "interleaved: no deadlock-free warm-up for P=%d V=%d M=%d", p, v, m);
}

/* Looped BFS (breadth-first): each rank runs every micro-batch through its
 * first chunk, then its second, ...; backwards in reverse chunk order. */
kt_status kt__gen_looped_bfs(kt_schedule *s, const kt_schedule_params *params, kt_error *err) {
  (void)params;
  for (int r = 0; r < s->p; r++) {
    for (int c = 0; c < s->v; c++)
      for (int j = 0; j < s->m; j++) KT__PUSH(s, r, kt_rank_chunk_stage(s, r, c), KT_OP_F, j);
    for (int c = s->v - 1; c >= 0; c--)
      for (int j = 0; j < s->m; j++) KT__PUSH(s, r, kt_rank_chunk_stage(s, r, c), KT_OP_B, j);
  }
  return KT_OK;
}
