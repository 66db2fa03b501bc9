/* zb-auto and zbv-auto: a pipeline of stages over a layout's budget, after
 * checking that the budget holds one micro-batch: the lower bound, the
 * quick search (kept when the bound proves it near-optimal), the search
 * (search/search.c), on problems the exact search proves in well under a
 * second a bounded run of it from the search's order (exact_step.c), and
 * annealing where the order is still far from the bound. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/sim.h"
#include "generators/optimal_internal.h"
#include "generators/search/search.h"

/* The pipeline (kt__zb_auto_build): stages run in this order while they
 * apply, each on the incumbent order the last one left in z->s and the
 * best bound known, with its own budget. */
typedef struct {
  kt_schedule *s;
  const kt_costs *costs;
  double mem_limit;
  kt__search_problem pb;
  kt__search_opts so; /* so.lower: the best bound known */
  int improve;        /* the exact step and the annealing may run */
  double period;      /* the incumbent's (< 0: none yet) */
  int near;           /* the quick search's order is near-optimal: the search stops */
  kt_gen_outcome *out;
} zb_run;

typedef struct {
  const char *name;
  int (*applies)(const zb_run *z);
  long budget; /* evaluations or nodes (0: the stage's own) */
  kt_status (*run)(zb_run *z, long budget, kt_error *err);
} zb_stage;

/* The incumbent run to completion under the simulator (a cheap safety net):
 * the search's objective for it, the period its ranks imply. */
static kt_status measure(zb_run *z, kt_error *err) {
  kt_metrics m;
  kt_status st = kt_simulate_metrics(z->s, z->costs, &m, err);
  if (st) return st;
  z->period = kt_step_model_bound(&z->pb.step, &m, NULL);
  kt_metrics_free(&m);
  return KT_OK;
}

static int always(const zb_run *z) { return (void)z, 1; }

/* The bound: the full one where the exact step may run (cheap there, and an
 * order that meets it needs no exact step), else the plain one (the
 * searches stop early on it). None when it fails: the search runs in full. */
static kt_status stage_bound(zb_run *z, long budget, kt_error *err) {
  (void)budget, (void)err;
  kt_error e2;
  int full = z->improve && kt__optimal_reach(z->s);
  if (kt__lower_bound(z->s, z->costs, z->pb.limit[0], full, &z->so.lower, &e2)) z->so.lower = 0;
  return KT_OK;
}

static int near_applies(const zb_run *z) { return z->so.near_first && z->so.lower > 0; }

/* The quick search first: its order is kept, with no further search and
 * no exact step, when the bound proves it within KT_NEAR_OPTIMAL. */
static kt_status stage_near(zb_run *z, long budget, kt_error *err) {
  (void)budget;
  kt__search_opts q = kt__search_quick;
  q.lower = z->so.lower;
  kt_status st = kt__search_run(&z->pb, &q, NULL, 0, z->s, err);
  if (!st) st = measure(z, err);
  z->near = !st && z->period <= z->so.lower * (1 + KT_NEAR_OPTIMAL);
  if (z->near) z->improve = 0;
  return st;
}

static int search_applies(const zb_run *z) { return !z->near; }

static kt_status stage_search(zb_run *z, long budget, kt_error *err) {
  (void)budget;
  kt_status st = kt__search_run(&z->pb, &z->so, NULL, 0, z->s, err);
  return st ? st : measure(z, err);
}

/* small problems: a bounded exact search from the incumbent (not in the
 * quick search a moving slider asks for) */
static int exact_applies(const zb_run *z) {
  return z->improve && z->period >= 0 && !z->pb.mtf; /* its slots assume micro-batches alike */
}

static kt_status stage_exact(zb_run *z, long budget, kt_error *err) {
  kt__exact_outcome io = {.period = z->period, .lower = z->so.lower};
  kt_status st = kt__exact_step(z->s, z->costs, z->mem_limit, budget, &io, err);
  if (st) return st;
  z->period = io.period, z->so.lower = io.lower;
  if (z->out && io.ran) z->out->proven = io.proven, z->out->nodes = io.nodes;
  return KT_OK;
}

/* After the exact step: annealing when the order is still more than KT__FAR
 * above the bound. Its budget: restarts of evaluations each (about 0.2 s at
 * P=4, V=2, M=6); on the corpus's tight-memory V rows it takes zbv-auto
 * from 7.6% above the optimum to within 3%; it runs on 3 rows of 216 there
 * and on none of the oracle grids' rows. */
#define ANNEAL_RESTARTS 4
static int anneal_applies(const zb_run *z) {
  return z->improve && z->so.anneal && z->so.lower > 0 && z->period > z->so.lower * (1 + KT__FAR);
}

static kt_status stage_anneal(zb_run *z, long budget, kt_error *err) {
  kt__search_eval ev;
  kt_status st = kt__search_eval_init(&ev, &z->pb, err);
  if (st) return st;
  kt__search_anneal(&z->pb, &ev, z->s, z->period, budget, ANNEAL_RESTARTS);
  kt__search_eval_free(&ev);
  return measure(z, err); /* the simulator's check */
}

static const zb_stage stages[] = {
    {"bound", always, 0, stage_bound},
    {"quick", near_applies, 0, stage_near},
    {"search", search_applies, 0, stage_search},
    {"exact", exact_applies, KT__EXACT_NODES, stage_exact},
    {"anneal", anneal_applies, 30000, stage_anneal},
};

/* The budget a stage's limit leaves: one micro-batch must fit. */
static kt_status check_limit(const kt_schedule *s, const kt__search_problem *pb, kt_error *err) {
  int at;
  double need = kt__search_min_limit(pb, &at);
  if (pb->limit[0] + 1e-9 * (1 + need) >= need) return KT_OK;
  return kt_fail(err, KT_EMEMLIMIT,
                 "%s: memory limit %g is below what one micro-batch needs on rank %d (%g = "
                 "max(mem-act, mem-wgrad)%s): the limit must be at least %g",
                 s->name, pb->limit[0], at, need,
                 s->v == 2  ? " of its first chunk plus room for a later one"
                 : s->v > 2 ? " of all its chunks"
                            : "",
                 need);
}

static void note_stage(kt_gen_outcome *out, const char *name) {
  if (!out) return;
  size_t len = strlen(out->stages);
  snprintf(out->stages + len, sizeof out->stages - len, "%s%s", len ? "," : "", name);
}

kt_status kt__zb_auto_build(kt_schedule *s, const struct kt_costs *costs, double mem_limit,
                            const kt__search_opts *o, int improve, kt_gen_outcome *out,
                            kt_error *err) {
  if (isnan(mem_limit) || isinf(mem_limit))
    return kt_fail(err, KT_EINVAL, "%s: memory limit %g is not a finite number", s->name,
                   mem_limit);
  kt_costs unit;
  if (!costs) {
    kt_costs_default(&unit);
    costs = &unit;
  }
  if (out) memset(out, 0, sizeof *out);
  kt_status st = kt_costs_check(costs, kt_schedule_stages(s), err);
  if (st) return st;
  zb_run z = {.s = s,
              .costs = costs,
              .mem_limit = mem_limit,
              .so = *o,
              .improve = improve,
              .period = -1,
              .out = out};
  if ((st = kt__search_problem_init(&z.pb, s, costs, mem_limit, err))) return st;
  st = check_limit(s, &z.pb, err);
  for (size_t i = 0; !st && i < sizeof stages / sizeof *stages; i++) {
    if (!stages[i].applies(&z)) continue;
    st = stages[i].run(&z, stages[i].budget, err);
    note_stage(out, stages[i].name);
  }
  if (!st && out) out->lower_bound = z.so.lower;
  kt__search_problem_free(&z.pb);
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
const kt__search_opts kt__search_default = {
    .lists = 1, .rounds = 1, .handcrafted = 1, .refine_evals = 100, .quick = 1, .refine_one = 1};
const kt__search_opts kt__search_thorough = {
    .lists = 1, .rounds = 1, .handcrafted = 1, .refine_evals = -1, .walk = 1};

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
  if (s->v == 1 && !(params->costs && kt_costs_mb_differ(params->costs))) o.refine_evals = 0;
  return o;
}

static kt_status build(kt_schedule *s, const kt_gen_params *params, kt_error *err) {
  kt__search_opts o = effort(s, params);
  return kt__zb_auto_build(s, params->costs, params->mem_limit, &o, !params->quick, params->outcome,
                           err);
}

kt_status kt__gen_zb_auto(kt_schedule *s, const kt_gen_params *params, kt_error *err) {
  return build(s, params, err);
}

kt_status kt__gen_zbv_auto(kt_schedule *s, const kt_gen_params *params, kt_error *err) {
  return build(s, params, err);
}
