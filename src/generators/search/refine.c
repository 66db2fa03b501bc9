/* Critical-path refinement of an order.
 *
 * The makespan is the span of one rank (the critical one). Its span grows
 * wherever it idles: an action that waits for its input from a neighbour.
 * For each such gap, in time order, three moves are tried:
 *
 *   1. the producer runs one slot earlier on its rank (it swaps with the
 *      action before it, when that is not its own predecessor in the
 *      stage's micro-batch order);
 *   2. the producer runs before the whole run of W's just before it;
 *   3. the critical rank fills the gap with its next W whose I came before
 *      the gap (a W moved earlier never needs more memory).
 *
 * A move is kept when the evaluated makespan drops, or stays and the sum
 * of the ranks' spans drops (progress when several ranks share the
 * maximum), and every rank stays within its budget; otherwise it is undone.
 * The loop stops when no move helps or the evaluation budget is spent. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "generators/search/search.h"

#define EPS 1e-9

typedef struct {
  const kt__search_problem *pb;
  kt__search_eval *ev;
  kt_schedule *s;
  double makespan, spans;
  long evals, max_evals;
  size_t *idx; /* per (stage, mb): index of its F, then of its I or B, in its rank's list */
} refiner;

/* Moves rank r's action at `from` to index `to` (the others shift). */
static double span_sum(const refiner *rf) {
  double sum = 0;
  for (int r = 0; r < rf->pb->p; r++) sum += rf->ev->stop[r] - rf->ev->start[r];
  return sum;
}

/* Applies move (r, from, to); keeps it when it helps, else undoes it.
 * Returns 1 when kept. */
static int attempt(refiner *rf, int r, size_t from, size_t to) {
  if (from == to || rf->evals >= rf->max_evals) return 0;
  kt__search_move(rf->s->ranks[r].actions, from, to);
  if (kt__search_rank_fits(rf->pb, &rf->s->ranks[r], r)) {
    rf->evals++;
    double ms = kt__search_evaluate(rf->pb, rf->ev, rf->s);
    double tol = 1e-12 * (1 + rf->makespan);
    if (ms >= 0) {
      double sum = span_sum(rf);
      if (ms < rf->makespan - tol || (ms < rf->makespan + tol && sum < rf->spans - tol)) {
        rf->makespan = ms, rf->spans = sum;
        return 1;
      }
    }
  }
  kt__search_move(rf->s->ranks[r].actions, to, from);
  return 0;
}

/* Whether b may run before a on one rank (a directly precedes b): not
 * when they are two ops of one stage in micro-batch order, or the ops of
 * one (stage, micro-batch) in F, I, W order. */
static int may_swap(const kt_action *a, const kt_action *b) {
  return a->stage != b->stage || (a->op != b->op && a->mb != b->mb);
}

typedef struct {
  int r;
  size_t from, to;
} move_t;

#define MAX_MOVES 128

/* Where the input of x comes from: rank and index of its producer, found
 * through idx (per (stage, mb): the index of F and of I/B in its rank). */
static int producer(const refiner *rf, const kt_action *x, int *q, size_t *k) {
  const kt__search_problem *pb = rf->pb;
  int st = x->stage;
  if (x->op == KT_OP_F) {
    if (st == 0) return 0;
    *q = pb->srank[st - 1], *k = rf->idx[2 * KT__PAIR(pb, st - 1, x->mb)];
  } else if (x->op == KT_OP_I || x->op == KT_OP_B) {
    if (st == pb->S - 1) *q = pb->srank[st], *k = rf->idx[2 * KT__PAIR(pb, st, x->mb)];
    else *q = pb->srank[st + 1], *k = rf->idx[2 * KT__PAIR(pb, st + 1, x->mb) + 1];
  } else {
    return 0;
  }
  return 1;
}

static void index_order(refiner *rf) {
  const kt__search_problem *pb = rf->pb;
  for (int r = 0; r < pb->p; r++)
    for (size_t i = 0; i < rf->s->ranks[r].n; i++) {
      const kt_action *a = &rf->s->ranks[r].actions[i];
      if (a->op != KT_OP_W) rf->idx[2 * KT__PAIR(pb, a->stage, a->mb) + (a->op != KT_OP_F)] = i;
    }
}

/* Moves that let producer (q, k) run earlier: one slot, or before the run
 * of W's just before it. */
static int producer_moves(const refiner *rf, int q, size_t k, move_t *mv, int n) {
  const kt_action *qa = rf->s->ranks[q].actions;
  if (k == 0 || n + 2 > MAX_MOVES) return n;
  if (may_swap(&qa[k - 1], &qa[k])) mv[n++] = (move_t){q, k, k - 1};
  size_t j = k;
  while (j > 0 && qa[j - 1].op == KT_OP_W && may_swap(&qa[j - 1], &qa[k])) j--;
  if (j + 1 < k) mv[n++] = (move_t){q, k, j};
  return n;
}

/* Rank r fills the gap before its action i with a later action of its own
 * whose input is there when the gap opens (the first of the next FILL_WINDOW
 * that may move past the actions in between). */
#define FILL_WINDOW 12

static int fill_move(const refiner *rf, int r, size_t i, move_t *mv, int n) {
  const kt__search_problem *pb = rf->pb;
  const kt_rank_actions *ra = &rf->s->ranks[r];
  if (n + 1 > MAX_MOVES || i == 0) return n;
  const kt_action *prev = &ra->actions[i - 1];
  double opens = rf->ev->at[r][i - 1] + kt__search_cost(pb, prev->stage, (kt_op)prev->op, prev->mb);
  for (size_t y = i + 1; y < ra->n && y <= i + FILL_WINDOW; y++) {
    const kt_action *a = &ra->actions[y];
    int movable = 1;
    for (size_t k = i; k < y && movable; k++) movable = may_swap(&ra->actions[k], a);
    if (!movable) continue;
    kt_op op = a->op == KT_OP_B ? KT_OP_I : (kt_op)a->op;
    double ready = kt__search_input_ready(pb, rf->ev->end, a->stage, op, a->mb);
    if (!isnan(ready) && ready <= opens + EPS) {
      mv[n++] = (move_t){r, y, i};
      break;
    }
  }
  return n;
}

/* Walks the critical path back from the end of the rank with the longest
 * span and collects the moves that could shorten it. */
static int gather_moves(refiner *rf, move_t *mv) {
  const kt__search_problem *pb = rf->pb;
  const kt__search_eval *ev = rf->ev;
  const kt_schedule *s = rf->s;
  int crit = 0, n = 0;
  for (int r = 1; r < pb->p; r++)
    if (kt__search_rank_cost(pb, ev->start[r], ev->stop[r], r) >
        kt__search_rank_cost(pb, ev->start[crit], ev->stop[crit], crit) + EPS)
      crit = r;
  index_order(rf);
  int r = crit;
  size_t i = s->ranks[crit].n - 1;
  for (long steps = 0; n < MAX_MOVES && steps < 4L * (long)pb->S * pb->m; steps++) {
    const kt_action *a = s->ranks[r].actions, *x = &a[i];
    double start = ev->at[r][i];
    if (i > 0 && start <= ev->at[r][i - 1] +
                              kt__search_cost(pb, a[i - 1].stage, (kt_op)a[i - 1].op, a[i - 1].mb) +
                              EPS) {
      if (may_swap(&a[i - 1], x) && n < MAX_MOVES) mv[n++] = (move_t){r, i, i - 1};
      i--;
      continue;
    }
    int q;
    size_t k;
    if (!producer(rf, x, &q, &k)) break; /* the first forward: the path starts here */
    if (i > 0) n = fill_move(rf, r, i, mv, n);
    if (q != r) n = producer_moves(rf, q, k, mv, n);
    r = q, i = k;
  }
  return n;
}

/* Tries the moves of the current order; 1 when one was kept. */
static int improve_once(refiner *rf) {
  move_t mv[MAX_MOVES];
  int n = gather_moves(rf, mv);
  for (int k = 0; k < n && rf->evals < rf->max_evals; k++)
    if (attempt(rf, mv[k].r, mv[k].from, mv[k].to)) return 1;
  return 0;
}

double kt__search_refine(const kt__search_problem *pb, kt__search_eval *ev, kt_schedule *s,
                         double makespan, long max_evals) {
  if (max_evals <= 0) return makespan;
  double **at = kt_calloc((size_t)pb->p, sizeof *at);
  int ok = at != NULL;
  for (int r = 0; ok && r < pb->p; r++)
    ok = (at[r] = malloc((s->ranks[r].n + 1) * sizeof **at)) != NULL;
  refiner rf = {pb, ev, s, makespan, 0, 0, max_evals, NULL};
  if (ok) ok = (rf.idx = malloc(2 * (size_t)pb->S * (size_t)pb->m * sizeof *rf.idx)) != NULL;
  if (ok) {
    ev->at = at;
    double ms = kt__search_evaluate(pb, ev, s);
    if (ms >= 0) {
      rf.makespan = ms, rf.spans = span_sum(&rf);
      /* a kept move was the last one evaluated: ev holds the times of the order */
      while (rf.evals < rf.max_evals && improve_once(&rf)) {
      }
      makespan = rf.makespan;
    }
    ev->at = NULL;
  }
  for (int r = 0; at && r < pb->p; r++) free(at[r]);
  free(at);
  free(rf.idx);
  return makespan;
}
