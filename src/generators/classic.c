/* Classic generators: gpipe, 1f1b, interleaved 1F1B, looped BFS. */
#include <math.h>
#include <stdlib.h>
#ifndef __wasi__
#include <pthread.h>
#endif

#include "kaiten/sim.h"
#include "generators/internal.h"

/* GPipe (fill-drain): all forwards, then all backwards in micro-batch order. */
kt_status kt__gen_gpipe(kt_schedule *s, const kt_gen_params *params, kt_error *err) {
  (void)params;
  for (int r = 0; r < s->p; r++) {
    for (int j = 0; j < s->m; j++) KT__PUSH(s, r, r, KT_OP_F, j);
    for (int j = 0; j < s->m; j++) KT__PUSH(s, r, r, KT_OP_B, j);
  }
  return KT_OK;
}

/* 1F1B (PipeDream-Flush): rank r runs min(P-1-r, M) warm-up forwards, then
 * alternates one forward and one backward, then drains the backwards.
 * Ranks [lo, hi), their room made (2M actions each). */
static void one_f_one_b(kt_schedule *s, int lo, int hi) {
  for (int r = lo; r < hi; r++) {
    int warm = s->p - 1 - r < s->m ? s->p - 1 - r : s->m;
    for (int j = 0; j < warm; j++) kt__append(s, r, r, KT_OP_F, j);
    for (int j = 0; j < s->m - warm; j++) {
      kt__append(s, r, r, KT_OP_F, warm + j);
      kt__append(s, r, r, KT_OP_B, j);
    }
    for (int j = s->m - warm; j < s->m; j++) kt__append(s, r, r, KT_OP_B, j);
  }
}

#ifndef __wasi__
typedef struct {
  kt_schedule *s;
  int lo, hi;
} rank_range;

static void *one_f_one_b_main(void *arg) {
  rank_range *rr = arg;
  one_f_one_b(rr->s, rr->lo, rr->hi);
  return NULL;
}
#endif

/* Actions from which a second thread writes half of the ranks (their
 * pages first touched there too: 1F1B P=1024 M=16384 is 0.4 GB). */
#define TWO_THREADS_ACTIONS ((size_t)1 << 20)

kt_status kt__gen_1f1b(kt_schedule *s, const kt_gen_params *params, kt_error *err) {
  (void)params;
  for (int r = 0; r < s->p; r++)
    if (kt_schedule_room(s, r, s->ranks[r].n + 2 * (size_t)s->m))
      return kt_fail(err, KT_ENOMEM, "out of memory building schedule");
  int mid = 0;
#ifndef __wasi__
  pthread_t second;
  rank_range upper = {s, s->p / 2, s->p};
  if (2 * (size_t)s->p * (size_t)s->m >= TWO_THREADS_ACTIONS && s->p > 1 &&
      !pthread_create(&second, NULL, one_f_one_b_main, &upper))
    mid = upper.lo;
#endif
  one_f_one_b(s, 0, mid ? mid : s->p);
#ifndef __wasi__
  if (mid) pthread_join(second, NULL);
#endif
  return KT_OK;
}

/* Interleaved order: micro-batches are taken in groups; within a group
 * every chunk runs the whole group before the next chunk starts (forward:
 * chunks ascending, backward: descending). A group of at least P keeps
 * every rank busy when it moves to its next chunk (rank 0's chunk c+1 needs
 * what rank P-1's chunk c made from the same micro-batch), so M is split
 * into floor(M/P) groups as even as possible, larger ones first or last.
 * first[g] is group g's first micro-batch (first[n_groups] = M). */
typedef struct {
  int n_groups;
  int *first;
} groups;

/* The chunk and micro-batch of a rank's k-th forward (or backward); *g is
 * a cursor into the groups that only moves forward, as k does (a search
 * from the first group would make long schedules quadratic). */
static void group_slot(const groups *gr, int v, int k, int backward, int *g_cursor, int *chunk,
                       int *mb) {
  int g = *g_cursor;
  while (g + 1 < gr->n_groups && k >= v * gr->first[g + 1]) g++;
  *g_cursor = g;
  int size = gr->first[g + 1] - gr->first[g], within = k - v * gr->first[g];
  int c = within / size;
  *chunk = backward ? v - 1 - c : c;
  *mb = gr->first[g] + within % size;
}

/* One interleaved order: warm-up (V-1)*(first group) + 2(P-1-r) + extra
 * forwards (capped at V*M), one forward / one backward, then the drain. */
static kt_status build_interleaved(kt_schedule *s, const groups *gr, int extra, kt_error *err) {
  int p = s->p, v = s->v, m = s->m, total = v * m, g0 = gr->first[1];
  for (int r = 0; r < p; r++) {
    s->ranks[r].n = 0;
    int warm = (v - 1) * g0 + 2 * (p - 1 - r) + extra;
    if (warm > total) warm = total;
    int chunk, mb, nf = 0, nb = 0, gf = 0, gb = 0;
    for (; nf < warm; nf++) {
      group_slot(gr, v, nf, 0, &gf, &chunk, &mb);
      KT__PUSH(s, r, kt_rank_chunk_stage(s, r, chunk), KT_OP_F, mb);
    }
    while (nf < total) {
      group_slot(gr, v, nf++, 0, &gf, &chunk, &mb);
      KT__PUSH(s, r, kt_rank_chunk_stage(s, r, chunk), KT_OP_F, mb);
      group_slot(gr, v, nb++, 1, &gb, &chunk, &mb);
      KT__PUSH(s, r, kt_rank_chunk_stage(s, r, chunk), KT_OP_B, mb);
    }
    while (nb < total) {
      group_slot(gr, v, nb++, 1, &gb, &chunk, &mb);
      KT__PUSH(s, r, kt_rank_chunk_stage(s, r, chunk), KT_OP_B, mb);
    }
  }
  return KT_OK;
}

/* M split into floor(M/P) groups whose sizes differ by at most one, the
 * larger ones first (larger_first) or last. */
static void split_groups(groups *gr, int p, int m, int larger_first) {
  int n = m / p, base = m / n, rem = m % n;
  gr->n_groups = n;
  gr->first[0] = 0;
  for (int g = 0; g < n; g++) {
    int larger = larger_first ? g < rem : g >= n - rem;
    gr->first[g + 1] = gr->first[g] + base + larger;
  }
}

/* Interleaved 1F1B (Megatron virtual pipeline): V chunks per rank, loop
 * placement. When M is a multiple of P this is exactly Megatron's order
 * (warm-up (V-1)P + 2(P-1-r), groups of P) and its bubble is
 * (P-1)/(V*M+P-1). Any other M >= P: the groups grow instead of leaving a
 * short last one, and of a few such orders (larger groups first or last,
 * warm-up as given or longer where a longer one removes a stall) the one
 * with the shortest unit-cost makespan is kept. M < P is rejected: chunks
 * would starve. */
kt_status kt__gen_interleaved(kt_schedule *s, const kt_gen_params *params, kt_error *err) {
  (void)params;
  int p = s->p, v = s->v, m = s->m;
  if (v < 2)
    return kt_fail(err, KT_EINVAL, "interleaved needs V >= 2 chunks per rank (got V=%d)", v);
  if (m < p)
    return kt_fail(err, KT_EINVAL,
                   "interleaved needs M >= P (got M=%d, P=%d): with fewer micro-batches than "
                   "ranks the chunks starve; use 1f1b or looped-bfs",
                   m, p);
  groups gr = {.first = kt_calloc((size_t)m / (size_t)p + 1, sizeof(int))};
  if (!gr.first) return kt_fail(err, KT_ENOMEM, "out of memory");
  kt_status st = KT_OK;
  if (m % p == 0) { /* Megatron's order: nothing to search */
    split_groups(&gr, p, m, 1);
    st = build_interleaved(s, &gr, 0, err);
    free(gr.first);
    return st;
  }
  double best = INFINITY;
  int best_order = 0, best_extra = 0;
  /* the shortest warm-up that runs, and a longer one while it still helps */
  for (int order = 0; order < 2 && !st; order++) {
    int since_better = -1;
    for (int extra = 0; extra <= 2 * p && !st && since_better < 2; extra++) {
      split_groups(&gr, p, m, order == 0);
      st = build_interleaved(s, &gr, extra, err);
      kt_metrics met;
      kt_error ignored;
      if (st || kt_simulate_metrics(s, NULL, &met, &ignored) != KT_OK) continue; /* a deadlock */
      since_better++;
      if (met.makespan < best - 1e-9)
        best = met.makespan, best_order = order, best_extra = extra, since_better = 0;
      kt_metrics_free(&met);
    }
  }
  if (!st && !isfinite(best))
    st = kt_fail(err, KT_EINVAL, "interleaved: no deadlock-free order for P=%d V=%d M=%d", p, v, m);
  if (!st) {
    split_groups(&gr, p, m, best_order == 0);
    st = build_interleaved(s, &gr, best_extra, err);
  }
  free(gr.first);
  return st;
}

/* Looped BFS (breadth-first): each rank runs every micro-batch through its
 * first chunk, then its second, ...; backwards in reverse chunk order. */
kt_status kt__gen_looped_bfs(kt_schedule *s, const kt_gen_params *params, kt_error *err) {
  (void)params;
  for (int r = 0; r < s->p; r++) {
    for (int c = 0; c < s->v; c++)
      for (int j = 0; j < s->m; j++) KT__PUSH(s, r, kt_rank_chunk_stage(s, r, c), KT_OP_F, j);
    for (int c = s->v - 1; c >= 0; c--)
      for (int j = 0; j < s->m; j++) KT__PUSH(s, r, kt_rank_chunk_stage(s, r, c), KT_OP_B, j);
  }
  return KT_OK;
}
