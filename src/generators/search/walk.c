/* A random walk over no-slower orders.
 *
 * The critical-path refinement (search/refine.c) keeps a move only when the
 * makespan or the sum of the spans drops. Under a tight memory budget that
 * often stops early: the rank with the longest span waits for memory, which
 * a chain of other micro-batches on other ranks frees, and no single move
 * along the critical path helps. Orders of the same makespan are plenty,
 * though, and some of them are one move away from a faster one.
 *
 * The walk moves one action of the critical rank, or of a rank next to it,
 * or (half the time) of any rank, up to WINDOW slots earlier or later (never
 * past an op of its own stage that must stay in order, nor its own F, I, W
 * order), and keeps the move when that rank stays within its budget and the
 * evaluated makespan does not grow. Three times in four the action is one
 * of the first or last ENDS*P of its rank: the steady state of these orders
 * repeats one pattern and is tight, the slack is in the warm-up and the
 * cool-down, where the ranks wait on each other (on the oracle's V-Min rows
 * at P=16 this finds the gains several times more often than a uniform
 * pick). The makespan never grows, so the order
 * in hand is always the best seen; when it is no faster than the order the
 * walk started from, that one is returned (a walk on a plateau only
 * scrambles it). The random numbers come from a fixed seed: the same inputs
 * give the same order. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "generators/search/search.h"

#define WINDOW 5
#define ENDS 3

static uint64_t next(uint64_t *x) { /* xorshift64 */
  *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
  return *x >> 11;
}

/* Whether b may run before a on one rank (a is earlier in the list): not
 * two ops of one stage of the same kind (micro-batch order) nor two ops of
 * one (stage, micro-batch) (F, I, W order). */
static int may_pass(const kt_action *a, const kt_action *b) {
  return a->stage != b->stage || (a->op != b->op && a->mb != b->mb);
}

/* Whether rank list ra's action at i may move to slot j: j is another slot
 * of the list, and the action passes no op it must stay behind or ahead
 * of. */
static int movable(const kt_rank_actions *ra, size_t i, long j) {
  if (j < 0 || j >= (long)ra->n || j == (long)i) return 0;
  for (long q = j < (long)i ? j : (long)i + 1; q <= (j < (long)i ? (long)i - 1 : j); q++)
    if (j < (long)i ? !may_pass(&ra->actions[q], &ra->actions[i])
                    : !may_pass(&ra->actions[i], &ra->actions[q]))
      return 0;
  return 1;
}

static int critical(const kt__search_problem *pb, const kt__search_eval *ev) {
  int crit = 0;
  for (int r = 1; r < pb->p; r++)
    if (kt__search_rank_cost(pb, ev->start[r], ev->stop[r], r) >
        kt__search_rank_cost(pb, ev->start[crit], ev->stop[crit], crit))
      crit = r;
  return crit;
}

double kt__search_walk(const kt__search_problem *pb, kt__search_eval *ev, kt_schedule *s,
                       double makespan, long max_evals, unsigned round) {
  if (max_evals <= 0 || pb->p < 1) return makespan;
  double cur = kt__search_evaluate(pb, ev, s), start = cur;
  if (cur < 0) return makespan;
  kt_schedule keep; /* the order as given: kept unless the walk ends faster */
  kt_error err;
  if (kt_schedule_copy(&keep, s, &err)) return makespan;
  int crit = critical(pb, ev);
  uint64_t seed = 0x9e3779b97f4a7c15ull ^ (0xbf58476d1ce4e5b9ull * (round + 1));
  long evals = 0, tries = 0;
  while (evals < max_evals && tries < 50 * max_evals) {
    tries++;
    int r = (int)(next(&seed) % (uint64_t)pb->p);
    if (next(&seed) & 1) { /* the critical rank or a neighbour */
      r = crit + (int)(next(&seed) % 3) - 1;
      r = r < 0 ? 0 : r >= pb->p ? pb->p - 1 : r;
    }
    kt_rank_actions *ra = &s->ranks[r];
    if (ra->n < 2) continue;
    /* three times in four an action within ENDS*P of either end of the list */
    uint64_t x = next(&seed);
    size_t k = ENDS * (size_t)pb->p < ra->n ? ENDS * (size_t)pb->p : ra->n;
    size_t i = x % 4 == 0     ? (size_t)((x >> 3) % ra->n)
               : (x >> 2) & 1 ? (size_t)((x >> 3) % k)
                              : ra->n - 1 - (size_t)((x >> 3) % k);
    long j = (long)i + (long)(next(&seed) % (2 * WINDOW + 1)) - WINDOW;
    if (!movable(ra, i, j)) continue;
    kt__search_move(ra->actions, i, (size_t)j);
    double ms = -1;
    if (kt__search_rank_fits(pb, ra, r)) {
      evals++;
      ev->cutoff = kt_tolerance(cur);
      ms = kt__search_evaluate(pb, ev, s);
      ev->cutoff = INFINITY;
    }
    if (ms >= 0 && ms <= kt_tolerance(cur)) {
      cur = ms < cur ? ms : cur;
      crit = critical(pb, ev);
    } else {
      kt__search_move(ra->actions, (size_t)j, i);
    }
  }
  if (!(cur < start - 1e-9 * (1 + start))) { /* no gain: the tidier order as given */
    kt_schedule_swap_lists(s, &keep);
    cur = start;
  }
  kt_schedule_free(&keep);
  return cur < makespan ? cur : makespan;
}

long kt__search_walk_budget(const kt__search_problem *pb, double work) {
  double most = work / (3.0 * pb->S * (double)pb->m);
  return most < 20000 ? (long)most : 20000;
}

/* ---- annealing ---------------------------------------------------------- *
 *
 * Where the walk above stays on a plateau far from the bound (small
 * problems under a tight budget, whose fast orders differ from the
 * search's everywhere), simulated annealing: the walk's move, of any
 * action of any rank, kept when the makespan grows by less than T times
 * an exponential draw (the evaluation stops at that cutoff), T falling
 * linearly from ANNEAL_T of the starting makespan to 0. Each restart sets
 * out from the order given, with a seed of its own; the fastest order seen
 * wins. */

#define ANNEAL_T 0.006

/* dst's lists := src's (copies of one order: the moves keep each rank's
 * count, so dst has the room). */
static void copy_lists(kt_schedule *dst, const kt_schedule *src) {
  for (int r = 0; r < src->p; r++) {
    memcpy(dst->ranks[r].actions, src->ranks[r].actions,
           src->ranks[r].n * sizeof *src->ranks[r].actions);
    dst->ranks[r].n = src->ranks[r].n;
  }
}

/* One annealing run from s's order in w; the fastest order seen goes to
 * best when faster than *best_ms. */
static void anneal_run(const kt__search_problem *pb, kt__search_eval *ev, kt_schedule *w,
                       kt_schedule *best, double *best_ms, double start, long evals,
                       uint64_t seed) {
  double cur = start;
  long e = 0, tries = 0;
  while (e < evals && tries++ < 50 * evals) {
    kt_rank_actions *ra = &w->ranks[next(&seed) % (uint64_t)pb->p];
    if (ra->n < 2) continue;
    size_t i = (size_t)(next(&seed) % ra->n);
    long j = (long)i + (long)(next(&seed) % (2 * WINDOW + 1)) - WINDOW;
    if (!movable(ra, i, j)) continue;
    kt__search_move(ra->actions, i, (size_t)j);
    double temp = ANNEAL_T * start * (1 - (double)e / (double)evals);
    double u = ((double)(next(&seed) % 1000000) + 0.5) / 1e6, accept = cur - temp * log(u);
    double ms = -1;
    if (kt__search_rank_fits(pb, ra, (int)(ra - w->ranks))) {
      e++;
      ev->cutoff = kt_tolerance(accept);
      ms = kt__search_evaluate(pb, ev, w);
      ev->cutoff = INFINITY;
    }
    if (ms >= 0 && ms <= kt_tolerance(accept)) {
      cur = ms;
      if (ms < *best_ms * (1 - 1e-12)) *best_ms = ms, copy_lists(best, w);
    } else {
      kt__search_move(ra->actions, (size_t)j, i);
    }
  }
}

double kt__search_anneal(const kt__search_problem *pb, kt__search_eval *ev, kt_schedule *s,
                         double makespan, long evals, int restarts) {
  double start = kt__search_evaluate(pb, ev, s);
  if (!(start >= 0) || evals <= 0) return makespan;
  kt_schedule w, best; /* the order annealed, the fastest seen: copies of s */
  kt_error err;
  if (kt_schedule_copy(&w, s, &err)) return makespan;
  if (kt_schedule_copy(&best, s, &err)) {
    kt_schedule_free(&w);
    return makespan;
  }
  double best_ms = start;
  for (int k = 0; k < restarts; k++) {
    copy_lists(&w, s);
    anneal_run(pb, ev, &w, &best, &best_ms, start, evals,
               0x2545f4914f6cdd1dull * (uint64_t)(k + 1) ^ 0x9e3779b97f4a7c15ull);
  }
  if (best_ms < start * (1 - 1e-12)) {
    copy_lists(s, &best);
    start = best_ms;
  }
  kt_schedule_free(&best);
  kt_schedule_free(&w);
  return start < makespan ? start : makespan;
}
