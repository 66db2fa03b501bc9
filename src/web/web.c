/* The what-if panel's one call (kaiten/web.h): read the settings, build the
 * schedule (generate it, or read the order the page holds), simulate it,
 * and answer with kaiten sim's own JSON plus what the panel draws: every
 * action's slack and the critical path, memory levels, the closed forms,
 * the flags that reproduce it, and on request the exports. Every step is a
 * call into the library; this file only wires them.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/generators.h"
#include "kaiten/report.h"
#include "kaiten/web.h"
#include "web/web_internal.h"

/* A page runs in one tab's memory: keep a simulation well inside it. */
#define WEB_MAX_ACTIONS 4000000.0

void kt__web_run_free(kt__web_run *w) {
  kt_costs_free(&w->rq.given);
  kt_faults_free(&w->rq.links);
  kt_costs_free(&w->costs);
  kt_schedule_free(&w->sched);
  kt_schedule_free(&w->program);
  if (w->have_tl) kt_timeline_free(&w->tl);
  if (w->have_met) kt_metrics_free(&w->met);
  kt_critical_free(&w->cr);
}

/* The order the page holds: parsed and checked as kaiten sim --from reads
 * a file (a lowered one runs as written). */
static kt_status load_order(kt__web_run *w, const char *order, kt_error *err) {
  kt_parse_opts po = {.notation = KT_NOTATION_AUTO};
  kt_schedule lowered = {0};
  po.lowered = &lowered;
  kt_status st = kt_schedule_parse_opts(order, &po, &w->sched, err);
  if (st) return st;
  st = kt_schedule_validate(&w->sched, err);
  if (!st && lowered.ranks) st = kt_lowered_validate_ir(&lowered, KT_TORCH_IR_2_15, err);
  if (!st && po.p2p_actions) w->program = lowered; /* handed over */
  else kt_schedule_free(&lowered);
  w->kind = -1; /* a reordered schedule is no generator's: no formula */
  return st;
}

/* Every stage's costs (kaiten sim's basis), rank R's compute F times
 * dearer with slow-rank=R:F; shape gives the placement. */
static kt_status stage_costs(kt__web_run *w, const kt_schedule *shape, kt_error *err) {
  const kt__web_req *rq = &w->rq;
  kt_status st = kt_costs_for_chunks(&rq->given, rq->per_stage ? 1 : shape->v, &w->costs, err);
  if (!st && kt_faults_any(&rq->links)) st = kt_faults_apply(&rq->links, 0, -1, shape->p, NULL, 0,
                                                             &w->costs, err);
  if (st || rq->slow_rank < 0) return st;
  if (rq->slow_rank >= shape->p)
    return kt_fail(err, KT_EINVAL, "slow-rank %d: the schedule has ranks 0..%d", rq->slow_rank,
                   shape->p - 1);
  kt_costs *c = &w->costs;
  int S = kt_schedule_stages(shape);
  if (c->n_stages > 0 && c->n_stages != S)
    return kt_fail(err, KT_EINVAL, "per-stage costs list %d stages but the schedule has S=%d "
                                   "stages", c->n_stages, S);
  double **arrays[] = {&c->stage_tf, &c->stage_tb, &c->stage_tw};
  double uniform[] = {c->tf, c->tb, c->tw};
  for (int i = 0; i < 3; i++) {
    if (*arrays[i]) continue;
    if (!(*arrays[i] = kt_calloc((size_t)S, sizeof(double))))
      return kt_fail(err, KT_ENOMEM, "out of memory");
    for (int s = 0; s < S; s++) (*arrays[i])[s] = uniform[i];
  }
  c->n_stages = S;
  for (int s = 0; s < S; s++)
    if (kt_stage_rank(shape, s) == rq->slow_rank)
      for (int i = 0; i < 3; i++) (*arrays[i])[s] *= rq->slow_factor;
  return KT_OK;
}

/* The limit in mem-act units: as given, or a fraction of 1F1B's peak on
 * the same model (kaiten sim's 0.5x) in kind's placement; -1 when none is
 * given. */
static double limit_units(const kt__web_run *w, kt_gen_kind kind, int p, int m, int v) {
  const kt__web_req *rq = &w->rq;
  if (!rq->have_limit) return -1;
  if (!rq->limit_fraction) return rq->mem_limit;
  kt_gen_params pp = {.p = p, .m = m, .v = v, .costs = &w->costs};
  return rq->mem_limit * kt_gen_1f1b_peak(kind, &pp);
}

static kt_status generate(kt__web_run *w, kt_error *err) {
  const kt__web_req *rq = &w->rq;
  w->kind = kt_gen_kind_from_name(rq->schedule);
  if (w->kind < 0)
    return kt_fail(err, KT_EINVAL, "unknown schedule '%s' (known: %s)", rq->schedule,
                   kt_gen_kind_list());
  kt_gen_kind k = (kt_gen_kind)w->kind;
  int v = rq->v > 0 ? (int)rq->v : kt_gen_default_chunks(k);
  if (3.0 * (double)rq->p * v * (double)rq->m > WEB_MAX_ACTIONS)
    return kt_fail(err, KT_EINVAL, "P=%ld V=%d M=%ld: too many actions to simulate in the page "
                                   "(use kaiten sim)", rq->p, v, rq->m);
  kt_schedule shape;
  kt_status st = kt_schedule_init(&shape, (int)rq->p, v, 1, kt_gen_kind_placement(k), err);
  if (st) return st;
  st = stage_costs(w, &shape, err);
  kt_schedule_free(&shape);
  if (st) return st;
  w->limit = limit_units(w, k, (int)rq->p, (int)rq->m, (int)rq->v);
  kt_gen_params pp = {.p = (int)rq->p, .m = (int)rq->m, .v = (int)rq->v,
                           .costs = &w->costs, .mem_limit = w->limit > 0 ? w->limit : 0,
                           .quick = rq->quick};
  /* quick: zbv, v-half and v-min as constructed, not yet tuned to the costs
   * (their tuning takes a second at P=8, M=64 even when quick) */
  if (rq->quick && (k == KT_SCHED_ZBV || k == KT_SCHED_V_HALF || k == KT_SCHED_V_MIN)) pp.costs = NULL;
  if ((st = kt_generate(k, &pp, &w->sched, err))) return st;
  /* the limit zb-auto kept (its default when none was given) */
  if (k == KT_SCHED_ZB_AUTO || k == KT_SCHED_ZBV_AUTO) w->limit = kt_gen_mem_limit(&pp);
  return KT_OK;
}

static kt_status simulate(kt__web_run *w, kt_error *err) {
  const kt_schedule *s = w->program.ranks ? &w->program : &w->sched;
  kt_status st = kt_simulate_both(s, &w->costs, &w->tl, &w->met, err);
  w->have_tl = w->have_met = !st;
  if (st) return st;
  kt_timeline_sort(&w->tl); /* events, slack and memory in one order */
  return kt_timeline_critical(&w->tl, kt_cost_comm(&w->costs), w->costs.send_overhead, &w->cr,
                              err);
}

/* replan=1 with a fault set: the order without it, and the order zb-auto
 * (zbv-auto in the v placement) makes for the faulted costs. */
static kt_status replan(kt__web_run *w, kt_error *err) {
  const kt__web_req *rq = &w->rq;
  w->clean = w->replanned = w->bound = NAN;
  if (!rq->replan || (rq->slow_rank < 0 && !kt_faults_any(&rq->links))) return KT_OK;
  kt_costs clean;
  double busy;
  kt_status st = kt_costs_for_chunks(&rq->given, rq->per_stage ? 1 : w->sched.v, &clean, err);
  if (!st) st = kt_gen_period(&w->sched, &clean, &w->clean, &busy, err);
  kt_costs_free(&clean);
  kt_gen_kind k = w->sched.placement == KT_PLACEMENT_V ? KT_SCHED_ZBV_AUTO : KT_SCHED_ZB_AUTO;
  kt_gen_params gp = {.p = w->sched.p, .m = w->sched.m, .v = w->sched.v, .costs = &w->costs,
                      .mem_limit = w->limit > 0 ? w->limit : 0, .quick = rq->quick};
  kt_schedule re;
  if (!st) st = kt_generate(k, &gp, &re, err);
  if (st) return st;
  snprintf(w->replanned_name, sizeof w->replanned_name, "%s", re.name);
  kt_error e2;
  st = kt_gen_period(&re, &w->costs, &w->replanned, &busy, err);
  if (!st && kt_makespan_lower_bound(&re, &w->costs, gp.mem_limit, 0, &w->bound, NULL, &e2))
    w->bound = NAN;
  kt_schedule_free(&re);
  return st;
}

static void failure(kt_buf *out, kt_status st, const kt_error *err) {
  kt_buf_puts(out, "{\"ok\":false,\"status\":");
  kt_buf_json_string(out, kt_status_name(st));
  kt_buf_puts(out, ",\"error\":");
  kt_buf_json_string(out, err->msg[0] ? err->msg : kt_status_message(st));
  kt_buf_puts(out, "}\n");
}

kt_status kt_web_run(const char *args, const char *order, kt_buf *out) {
  kt__web_run w;
  memset(&w, 0, sizeof w);
  kt_error err = {{0}};
  kt_status st = kt__web_parse(args ? args : "", &w.rq, &err);
  if (!st && order && *order) {
    st = load_order(&w, order, &err);
    if (!st) st = stage_costs(&w, &w.sched, &err);
    kt_gen_kind like = w.sched.placement == KT_PLACEMENT_V ? KT_SCHED_ZBV_AUTO : KT_SCHED_ZB_AUTO;
    if (!st) w.limit = limit_units(&w, like, w.sched.p, w.sched.m, w.sched.v);
  } else if (!st) {
    st = generate(&w, &err);
  }
  if (!st && kt_costs_compute_free(&w.costs))
    st = kt_fail(&err, KT_EINVAL, "T_F, T_B and T_W are all 0 and there is no op overhead: no "
                                  "action takes time; give a cost above 0");
  if (!st) st = simulate(&w, &err);
  if (!st) st = replan(&w, &err);
  if (!st) st = kt__web_answer(&w, out, &err);
  if (st) failure(out, st, &err);
  kt__web_run_free(&w);
  return st;
}
