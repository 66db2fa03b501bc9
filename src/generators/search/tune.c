/* Tuning a constructed order to the caller's costs without more memory:
 * the construction's own peak (the largest over ranks, counted with the
 * caller's M_B and M_W) becomes every rank's budget, the construction is
 * one candidate of the search (kt__search_run: the list scheduler's rules,
 * the round-based builders, the construction's F/I order with its W's
 * timed again), and the fastest candidate is refined along its critical
 * path. v-half, v-min and zbv use it when costs are given. */
#include <math.h>
#include <stdlib.h>

#include "generators/optimal_internal.h"
#include "generators/search/search.h"

/* The tuning's effort: the list scheduler's core rules, the V round
 * builder, the construction's F/I order with its W's timed again (the six
 * variants that ever won), and a short refinement of the best: some
 * sixty evaluations of an order, whatever the size (refining the best three,
 * as before, found the same orders on all 54 V-Min and V-Half rows and 18
 * zbv rows of the authors' grid at 1.4x the time). The random walk and a
 * longer refinement found 1-2% more at balanced costs, but took 10-20x the
 * time the zero-bubble authors' greedy takes to build the V-Min and V-Half
 * orders (bench/README.md, "Against the authors' schedulers"). */
#define TUNE_REFINE_EVALS 100
/* ... on problems up to this many actions (zb-auto's small problems):
 * above, one evaluation costs what the whole tuning may */
#define TUNE_REFINE_ACTIONS 12000

/* Peak of rank r's memory prefix sums under pb's M_B and M_W. */
static double rank_peak(const kt__search_problem *pb, const kt_rank_actions *ra) {
  double mem = 0, peak = 0;
  for (size_t i = 0; i < ra->n; i++) {
    const kt_action *a = &ra->actions[i];
    mem += kt_action_memory(a->op, pb->act[a->stage], pb->wg[a->stage]);
    peak = fmax(peak, mem);
  }
  return peak;
}

/* The costs the constructions are built for: T_F = T_B = T_W, the same on
 * every stage, no hop time, no links or send overhead. The tuning found
 * 1-2% there at small sizes (v-half, v-min) and nothing at P >= 16, for
 * seconds at P=64, M=1024: the construction stays. */
static int balanced(const kt_costs *c, int S) {
  if (kt_cost_comm(c) > 0 || c->n_links || c->links || c->send_overhead > 0) return 0;
  double t = kt_cost_tf(c, 0);
  for (int st = 0; st < S; st++)
    if (kt_cost_tf(c, st) != t || kt_cost_tb(c, st) != t || kt_cost_tw(c, st) != t) return 0;
  return 1;
}

/* Whether the construction already meets the lower bound (the costs are
 * uniform, say): no order within its memory is faster. */
static int construction_optimal(const kt__search_problem *pb, const kt_schedule *base,
                                double lower) {
  if (!(lower > 0)) return 0;
  kt__search_eval ev;
  kt_error err;
  if (kt__search_eval_init(&ev, pb, &err)) return 0;
  double ms = kt__search_evaluate(pb, &ev, base);
  kt__search_eval_free(&ev);
  return ms >= 0 && ms <= lower * (1 + 1e-12);
}

/* Above this many actions the caller hears of the search before it starts. */
#define LONG_SEARCH_ACTIONS 1000000

kt_status kt__search_tune(kt_schedule *s, const kt_gen_params *params, int strict, kt_error *err) {
  const kt_costs *c = params->costs;
  kt_status st = kt_costs_check(c, kt_schedule_stages(s), err);
  if (st || balanced(c, kt_schedule_stages(s))) return st;
  kt__search_problem pb;
  if ((st = kt__search_problem_init(&pb, s, c, 0, err))) return st;
  kt_schedule base;
  if ((st = kt_schedule_init_like(&base, s, s->m, err))) {
    kt__search_problem_free(&pb);
    return st;
  }
  kt_schedule_swap_lists(&base, s); /* base: the construction; s: empty, receives the winner */
  double top = 0;
  for (int r = 0; r < s->p; r++) top = fmax(top, rank_peak(&pb, &base.ranks[r]));
  for (int r = 0; r < s->p; r++) pb.limit[r] = top;
  size_t actions = 3 * (size_t)pb.S * (size_t)pb.m;
  kt__search_opts opts = {.lists = 1,
                          .rounds = 1,
                          .quick = 1,
                          .refine_one = 1,
                          .refine_evals = actions <= TUNE_REFINE_ACTIONS ? TUNE_REFINE_EVALS : 0};
  kt_error e2; /* no bound: tuned in full */
  if (kt__lower_bound(s, c, top, 1, &opts.lower, &e2)) opts.lower = 0;
  if (construction_optimal(&pb, &base, opts.lower)) { /* nothing to tune */
    kt_schedule_swap_lists(&base, s);
    kt_schedule_free(&base);
    kt__search_problem_free(&pb);
    return KT_OK;
  }
  const kt_schedule *extra[1] = {&base};
  if (params->on_long_search && actions > LONG_SEARCH_ACTIONS)
    params->on_long_search(s->name, actions, params->ctx);
  st = kt__search_run(&pb, &opts, extra, 1, s, err);
  if (!st && strict) { /* the construction stays unless the search is strictly faster */
    kt__search_eval ev;
    if (!(st = kt__search_eval_init(&ev, &pb, err))) {
      double tuned = kt__search_evaluate(&pb, &ev, s), own = kt__search_evaluate(&pb, &ev, &base);
      if (!(tuned >= 0 && tuned < own - 1e-9 * (1 + own))) kt_schedule_swap_lists(&base, s);
      kt__search_eval_free(&ev);
    }
  }
  kt_schedule_free(&base);
  kt__search_problem_free(&pb);
  return st;
}
