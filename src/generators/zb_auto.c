/* zb-auto and zbv-auto: the search (search/search.c) run over a layout's
 * budget, after checking that the budget holds one micro-batch; on
 * problems the exact search proves in well under a second, a bounded run
 * of it from the search's order (optimal.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/sim.h"
#include "generators/optimal_internal.h"
#include "generators/search/search.h"

/* The winner run to completion under the simulator (a cheap safety net):
 * the search's objective for it, the period its ranks imply. */
static kt_status final_makespan(const kt__search_problem *pb, const kt_schedule *s,
                                const struct kt_costs *costs, double *makespan, kt_error *err) {
  kt_metrics m;
  kt_status st = kt_simulate_metrics(s, costs, &m, err);
  if (st) return st;
  *makespan = kt_step_model_bound(&pb->step, &m, NULL);
  kt_metrics_free(&m);
  return KT_OK;
}

/* The annealing stage's budget: restarts of evaluations each (about
 * 0.2 s at P=4, V=2, M=6). On the corpus's tight-memory V rows it takes
 * zbv-auto from 7.6% above the optimum to within 3%; it runs only where
 * the order is more than KT__FAR above the best bound known, 3 rows of
 * 216 there and none of the oracle grids' rows. */
#define ANNEAL_EVALS 30000
#define ANNEAL_RESTARTS 4

/* After the exact step: annealing from s (of that makespan) when it is
 * more than KT__FAR above lower (the bound, raised by the step's proof). */
static kt_status anneal_if_far(const kt__search_problem *pb, kt_schedule *s,
                               const struct kt_costs *costs, double makespan, double lower,
                               kt_error *err) {
  if (!(lower > 0) || makespan <= lower * (1 + KT__FAR)) return KT_OK;
  kt__search_eval ev;
  kt_status st = kt__search_eval_init(&ev, pb, err);
  if (st) return st;
  kt__search_anneal(pb, &ev, s, makespan, ANNEAL_EVALS, ANNEAL_RESTARTS);
  kt__search_eval_free(&ev);
  return final_makespan(pb, s, costs, &makespan, err); /* the simulator's check */
}

kt_status kt__zb_auto_build(kt_schedule *s, const struct kt_costs *costs, double mem_limit,
                            const kt__search_opts *o, int improve, kt_error *err) {
  if (isnan(mem_limit) || isinf(mem_limit))
    return kt_fail(err, KT_EINVAL, "%s: memory limit %g is not a finite number", s->name,
                   mem_limit);
  kt_costs unit;
  if (!costs) {
    kt_costs_default(&unit);
    costs = &unit;
  }
  kt_status st = kt_costs_check(costs, kt_schedule_stages(s), err);
  if (st) return st;
  kt__search_problem pb;
  if ((st = kt__search_problem_init(&pb, s, costs, mem_limit, err))) return st;
  int at;
  double need = kt__search_min_limit(&pb, &at);
  if (pb.limit[0] + 1e-9 * (1 + need) < need) {
    st = kt_fail(err, KT_EINVAL,
                 "%s: memory limit %g is below what one micro-batch needs on rank %d (%g = "
                 "max(mem-act, mem-wgrad)%s): the limit must be at least %g",
                 s->name, pb.limit[0], at, need,
                 s->v == 2 ? " of its first chunk plus room for a later one"
                 : s->v > 2 ? " of all its chunks" : "", need);
    kt__search_problem_free(&pb);
    return st;
  }
  kt__search_opts so = *o;
  kt_error e2; /* no bound: the search runs in full */
  /* the plain bound, except where the exact step may run: there the full
   * one is cheap, and an order that meets it needs no exact step */
  kt_status bs = improve && kt__optimal_reach(s)
                     ? kt_makespan_lower_bound(s, costs, pb.limit[0], 0, &so.lower, NULL, &e2)
                     : kt__lower_bound_plain(s, costs, pb.limit[0], &so.lower, &e2);
  if (bs) so.lower = 0;
  double makespan = -1;
  if (so.near_first && so.lower > 0) { /* the quick search's order may be near-optimal already */
    kt__search_opts q = kt__search_quick;
    q.lower = so.lower;
    if (!(st = kt__search_run(&pb, &q, NULL, 0, s, err))) st = final_makespan(&pb, s, costs, &makespan, err);
    if (!st && makespan <= so.lower * (1 + KT_NEAR_OPTIMAL)) improve = 0;
    else makespan = -1;
  }
  if (!st && makespan < 0 && !(st = kt__search_run(&pb, &so, NULL, 0, s, err)))
    st = final_makespan(&pb, s, costs, &makespan, err);
  /* small problems: a bounded exact search from the winner (not in the
   * quick search a moving slider asks for), then annealing if still far */
  if (!st && improve) st = kt__optimal_improve(s, costs, mem_limit, &makespan, &so.lower, err);
  if (!st && improve && so.anneal) st = anneal_if_far(&pb, s, costs, makespan, so.lower, err);
  kt__search_problem_free(&pb);
  return st;
}

/* The search's three efforts. quick: the handcrafted and round-based orders
 * and the list scheduler's core rules, no refinement (the planner, the
 * what-if page's sliders). The default adds a short refinement of the
 * fastest of them (100 evaluations; with two or more chunks per rank) and,
 * on small problems, the bounded
 * exact step: on the oracle grids it is equal to or better than the
 * authors' schedulers on every row in a tenth of their time (all but the two
 * P=4, M=4 V-ZB rows, where the exact step runs), and never slower than zbv
 * tuned to the costs at zbv's peak memory. thorough: every rule of the list
 * scheduler, a longer refinement of the three fastest and the random walk
 * past their plateaus: better than the authors on 19 of the 111 rows
 * instead of 9, at 10-1000x the time (docs/schedules.md). */
const kt__search_opts kt__search_quick = {.lists = 1, .rounds = 1, .handcrafted = 1, .quick = 1};
const kt__search_opts kt__search_default = {.lists = 1, .rounds = 1, .handcrafted = 1,
                                            .refine_evals = 100, .quick = 1, .refine_one = 1};
const kt__search_opts kt__search_thorough = {.lists = 1, .rounds = 1, .handcrafted = 1,
                                             .refine_evals = -1, .walk = 1};

/* The options the caller's effort comes to on the layout of s. */
static kt__search_opts effort(const kt_schedule *s, const kt_gen_params *params) {
  if (params->quick) return kt__search_quick;
  kt__search_opts o = kt__search_thorough;
  if (params->thorough) return o.anneal = kt__optimal_reach(s), o;
  /* where the exact step runs (P <= 4, M <= 6) the default is the quick
   * search when the bound proves it near-optimal, else the thorough search
   * with a quarter of its walk (at most 5,200 evaluations, a few ms): from
   * its order the step reaches within 3% of the optimum on all but one
   * corpus row (from the quick one's on all but three), and the annealing
   * stage on that one */
  if (kt__optimal_reach(s)) return o.walk_work = 5e5, o.near_first = o.anneal = 1, o;
  /* one chunk per rank: the builders already equal the authors' heuristic
   * on all 84 of its rows, and the refinement there (half of the default's
   * time at P=8, M=32) made it better on 2 */
  o = kt__search_default;
  if (s->v == 1) o.refine_evals = 0;
  return o;
}

static kt_status build(kt_schedule *s, const kt_gen_params *params, kt_error *err) {
  kt__search_opts o = effort(s, params);
  return kt__zb_auto_build(s, params->costs, params->mem_limit, &o, !params->quick, err);
}

kt_status kt__gen_zb_auto(kt_schedule *s, const kt_gen_params *params, kt_error *err) {
  return build(s, params, err);
}

kt_status kt__gen_zbv_auto(kt_schedule *s, const kt_gen_params *params, kt_error *err) {
  return build(s, params, err);
}
