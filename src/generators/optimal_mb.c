/* The exact search when micro-batches have costs of their own.
 *
 * With micro-batches alike, relabelling makes every order one in slot form
 * (optimal_internal.h). With costs of their own it does not: which
 * micro-batch fills a slot decides its durations and memory. The search
 * then fixes a sequence of the micro-batches, runs every stage's F's, I's
 * and W's each in that sequence (slot j is micro-batch seq[j] everywhere),
 * searches those orders exactly (each slot with its micro-batch's own
 * costs; the bound with each stage's least, a relaxation), and repeats
 * over sequences: every distinct one (micro-batches of equal costs are
 * interchangeable) up to KT__OPT_SEQ_ALL_M micro-batches, else the given
 * one. What it proves is the optimum among orders that keep one of the
 * sequences tried on every stage, never more: an order whose stages run
 * the micro-batches in different sequences lies outside it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "generators/optimal_internal.h"

kt_status kt__opt_problem_sequence(kt__opt_problem *pb, const kt_costs *c, const int *seq,
                                   kt_error *err) {
  size_t m = (size_t)pb->m, cells = (size_t)pb->S * m;
  if (!pb->seq) {
    double **arr[] = {&pb->slot_t[0], &pb->slot_t[1], &pb->slot_t[2], &pb->slot_act, &pb->slot_wg};
    int ok = (pb->seq = kt_calloc(m, sizeof *pb->seq)) != NULL;
    for (size_t k = 0; k < sizeof arr / sizeof *arr; k++)
      ok &= (*arr[k] = kt_calloc(cells, sizeof(double))) != NULL;
    if (!ok) return kt_fail(err, KT_ENOMEM, "optimal: out of memory (P=%d, M=%d)", pb->p, pb->m);
  }
  memcpy(pb->seq, seq, m * sizeof *seq);
  for (int s = 0; s < pb->S; s++)
    for (size_t j = 0; j < m; j++) {
      size_t at = (size_t)s * m + j;
      int mb = seq[j];
      pb->slot_t[KT__OPT_F][at] = kt_cost_tf_mb(c, s, mb);
      pb->slot_t[KT__OPT_I][at] = kt_cost_tb_mb(c, s, mb);
      pb->slot_t[KT__OPT_W][at] = kt_cost_tw_mb(c, s, mb);
      pb->slot_act[at] = kt_cost_mem_act_mb(c, s, mb);
      pb->slot_wg[at] = kt_cost_mem_wgrad_mb(c, s, mb);
    }
  return KT_OK;
}

/* 1 when micro-batches a and b have the same costs on every stage. */
static int alike(const kt_costs *c, int S, int a, int b) {
  for (int s = 0; s < S; s++)
    if (kt_cost_tf_mb(c, s, a) != kt_cost_tf_mb(c, s, b) ||
        kt_cost_tb_mb(c, s, a) != kt_cost_tb_mb(c, s, b) ||
        kt_cost_tw_mb(c, s, a) != kt_cost_tw_mb(c, s, b) ||
        kt_cost_mem_act_mb(c, s, a) != kt_cost_mem_act_mb(c, s, b) ||
        kt_cost_mem_wgrad_mb(c, s, a) != kt_cost_mem_wgrad_mb(c, s, b))
      return 0;
  return 1;
}

/* The next arrangement of the multiset x[0..n-1] in lexicographic order;
 * 0 after the last. */
static int next_arrangement(int *x, int n) {
  int i = n - 2;
  while (i >= 0 && x[i] >= x[i + 1]) i--;
  if (i < 0) return 0;
  int k = n - 1;
  while (x[k] <= x[i]) k--;
  int t = x[i];
  x[i] = x[k], x[k] = t;
  for (int a = i + 1, b = n - 1; a < b; a++, b--) t = x[a], x[a] = x[b], x[b] = t;
  return 1;
}

typedef struct {
  kt__opt_problem *pb;
  const kt_costs *c;
  const kt__opt_search_opts *o;
  double deadline, upper;
  kt_schedule *out;
  kt__opt_search_result *res;
  kt__opt_seq_info *info;
} seq_run;

/* Searches the orders of one sequence for one faster than the best so far. */
static kt_status search_one(seq_run *q, const int *seq, kt_error *err) {
  double left = q->deadline - kt_now();
  long nodes_left = q->o->max_nodes > 0 ? q->o->max_nodes - q->res->nodes : 1;
  if (left <= 0 || nodes_left <= 0) { /* out of time: this sequence is not searched */
    q->res->complete = 0, q->res->lower = 0;
    return KT_OK;
  }
  kt_status st = kt__opt_problem_sequence(q->pb, q->c, seq, err);
  if (st) return st;
  kt__opt_search_opts so = *q->o;
  so.time_limit = left, so.upper = q->upper;
  so.max_nodes = q->o->max_nodes > 0 ? nodes_left : 0;
  kt__opt_search_result sr;
  if ((st = kt__opt_search(q->pb, &so, q->out, &sr, err))) return st;
  q->info->searched++;
  q->res->nodes += sr.nodes;
  q->res->complete &= sr.complete;
  q->res->lower = fmin(q->res->lower, sr.lower);
  q->res->memo_states += sr.memo_states;
  if (sr.makespan < q->upper) q->upper = q->res->makespan = sr.makespan;
  return KT_OK;
}

kt_status kt__opt_search_sequences(kt__opt_problem *pb, const kt_costs *c,
                                   const kt__opt_search_opts *o, kt_schedule *out,
                                   kt__opt_search_result *res, kt__opt_seq_info *info,
                                   kt_error *err) {
  int m = pb->m;
  double t0 = kt_now();
  memset(info, 0, sizeof *info);
  *res = (kt__opt_search_result){.makespan = INFINITY, .lower = INFINITY, .complete = 1};
  int *cls = kt_calloc((size_t)m, sizeof *cls), *cur = kt_calloc((size_t)m, sizeof *cur);
  int *seq = kt_calloc((size_t)m, sizeof *seq), *next = kt_calloc((size_t)m, sizeof *next);
  kt_status st = cls && cur && seq && next
                     ? KT_OK
                     : kt_fail(err, KT_ENOMEM, "optimal: out of memory (M=%d)", m);
  seq_run q = {pb, c, o, t0 + o->time_limit, o->upper, out, res, info};
  for (int j = 0; !st && j < m; j++) {
    cls[j] = cur[j] = seq[j] = j;
    for (int k = 0; k < j; k++)
      if (alike(c, pb->S, k, j)) {
        cls[j] = cur[j] = cls[k];
        break;
      }
  }
  if (!st) st = search_one(&q, seq, err); /* the given sequence first */
  info->all = m <= KT__OPT_SEQ_ALL_M;
  if (!st && info->all) {
    for (int a = 1; a < m; a++) /* cur: the classes sorted, the first arrangement */
      for (int b = a; b > 0 && cur[b - 1] > cur[b]; b--) {
        int t = cur[b];
        cur[b] = cur[b - 1], cur[b - 1] = t;
      }
    info->distinct = 0;
    do {
      info->distinct++;
      if (!memcmp(cur, cls, (size_t)m * sizeof *cur)) continue; /* the given one: done */
      memcpy(next, cls, (size_t)m * sizeof *next); /* each class's micro-batches in turn */
      for (int j = 0; j < m; j++) {
        int k = 0;
        while (next[k] != cur[j]) k++;
        seq[j] = k, next[k] = -1;
      }
      st = search_one(&q, seq, err);
    } while (!st && next_arrangement(cur, m));
  }
  res->seconds = kt_now() - t0;
  free(cls), free(cur), free(seq), free(next);
  return st;
}
