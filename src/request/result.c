/* A request's answer (kaiten/request.h): the order built (a generator's,
 * the exact search's, or one the caller holds), its stage costs and the
 * memory limit it keeps, its simulation, and what is stated about it. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifndef __wasi__
#include <pthread.h>
#endif

#include "kaiten/request.h"
#include "request/internal.h"

/* The size guard of actions at bytes_per_action (KT_SIM_BYTES_*): this
 * machine's memory (kt_sim_memory_check), or in the page one tab's. */
static kt_status size_guard(double actions, double bytes_per_action, kt_error *err) {
#ifdef __wasi__
  (void)bytes_per_action;
  if (actions > 4e6)
    return kt_fail(err, KT_EINVAL,
                   "up to %.3g actions: too many to simulate in the page (use "
                   "kaiten sim)",
                   actions);
  return KT_OK;
#else
  return kt_sim_memory_check(actions, bytes_per_action, err);
#endif
}

/* Refuses a layout too large to simulate here before building it: up to
 * three actions (F, I, W) per stage and micro-batch, at bytes_per_action
 * on the path that will run. */
kt_status kt__request_size_check(int p, int v, int m, double bytes_per_action, kt_error *err) {
  kt_error why;
  if (!size_guard(3.0 * p * (double)v * m, bytes_per_action, &why)) return KT_OK;
  return kt_fail(err, KT_EINVAL, "P=%d V=%d M=%d: %s", p, v, m, why.msg);
}

/* The stage costs of a schedule shaped like shape (its P, V, placement)
 * from the costs as given: divided by V on the rank basis; with the faults
 * (slow-rank, slow-link) as they are once begun: a slow rank's stages'
 * compute F times as long, a slow link's hops D longer. */
static kt_status stage_costs(const kt_request *rq, const kt_schedule *shape, kt_costs *out,
                             kt_error *err) {
  kt_status st = kt_costs_for_chunks(&rq->costs, rq->per_stage ? 1 : shape->v, out, err);
  if (st || !kt_faults_any(&rq->faults)) return st;
  int S = kt_schedule_stages(shape);
  int *stage_rank = kt_calloc((size_t)S, sizeof *stage_rank);
  if (!stage_rank) return kt_fail(err, KT_ENOMEM, "out of memory");
  for (int s = 0; s < S; s++) stage_rank[s] = kt_stage_rank(shape, s);
  st = kt_faults_apply(&rq->faults, INT_MAX, 0, shape->p, stage_rank, S, out, err);
  free(stage_rank);
  return st;
}

/* The stage costs of a layout not built yet. */
kt_status kt__request_layout_costs(const kt_request *rq, int p, int v, kt_placement pl,
                                   kt_costs *out, kt_error *err) {
  kt_schedule shape;
  kt_status st = kt_schedule_init(&shape, p, v, 1, pl, err);
  if (st) return st;
  st = stage_costs(rq, &shape, out, err);
  kt_schedule_free(&shape);
  return st;
}

/* A limit no order meets, said in the user's words: the limit as written
 * and, for a fraction, the smallest one that works. */
static kt_status infeasible(const kt_request *rq, kt_gen_kind like, int p, int m, int v,
                            const kt_costs *c, kt_status st, kt_error *err) {
  if (st != KT_EMEMLIMIT || !kt_mem_limit_given(&rq->mem_limit) || !err) return st;
  kt_error why = *err;
  char text[40];
  kt_mem_limit_format(&rq->mem_limit, text, sizeof text);
  kt_gen_params pp = {.p = p, .m = m, .v = v, .costs = c};
  double need = kt_gen_min_mem_limit(like, &pp);
  if (rq->mem_limit.kind == KT_MEM_FRACTION && need > 0) {
    /* the fraction printed is one that works when read back */
    double f = kt_mem_limit_fraction(need, like, p, m, v, c);
    double shown = ceil(f * 1e4 - 1e-9) / 1e4;
    return kt_fail(err, st, "mem-limit %s: %s; the smallest fraction that works is %gx", text,
                   why.msg, shown);
  }
  return kt_fail(err, st, "mem-limit %s: %s", text, why.msg);
}

/* The generator a request names in the placement it asks for: zb-auto in
 * v placement is zbv-auto (and back); any other schedule has one placement. */
static kt_status resolve_kind(const kt_request *rq, kt_gen_kind *out, kt_error *err) {
  int k = kt_gen_kind_from_name(rq->schedule);
  if (k < 0)
    return kt_fail(err, KT_EINVAL, "unknown schedule '%s' (known: %s, %s)", rq->schedule,
                   kt_gen_kind_list(), KT_OPTIMAL_NAME);
  if (rq->placement >= 0 && (k == KT_SCHED_ZB_AUTO || k == KT_SCHED_ZBV_AUTO))
    k = rq->placement == KT_PLACEMENT_V ? KT_SCHED_ZBV_AUTO : KT_SCHED_ZB_AUTO;
  else if (rq->placement >= 0 &&
           kt_gen_kind_placement((kt_gen_kind)k) != (kt_placement)rq->placement) {
    char same[256] = "";
    size_t at = 0;
    for (int o = 0; o < KT_SCHED_COUNT && at < sizeof same; o++)
      if (kt_gen_kind_placement((kt_gen_kind)o) == (kt_placement)rq->placement)
        at += (size_t)snprintf(same + at, sizeof same - at, "%s%s", at ? ", " : "",
                               kt_gen_kind_name((kt_gen_kind)o));
    return kt_fail(err, KT_EINVAL,
                   "%s places its stages in %s placement, not %s (schedules in %s "
                   "placement: %s)",
                   rq->schedule, kt_placement_name(kt_gen_kind_placement((kt_gen_kind)k)),
                   kt_placement_name(rq->placement), kt_placement_name(rq->placement), same);
  }
  *out = (kt_gen_kind)k;
  return KT_OK;
}

static kt_status build_generated(const kt_request *rq, kt_result *res, kt_error *err) {
  kt_gen_kind k = KT_SCHED_1F1B;
  kt_status st = resolve_kind(rq, &k, err);
  if (st) return st;
  if (kt_mem_limit_given(&rq->mem_limit) && kt_gen_check_mem_limit(k, 1, NULL)) {
    /* one rule for every door: a limit is for the kinds that keep to one */
    char text[40];
    kt_error why;
    kt_mem_limit_format(&rq->mem_limit, text, sizeof text);
    kt_gen_check_mem_limit(k, 1, &why);
    return kt_fail(err, KT_EINVAL, "%smem-limit %s: %s", rq->key_prefix, text, why.msg);
  }
  int v = rq->v > 0 ? rq->v : kt_gen_default_chunks(k);
  if ((st = kt__request_size_check(rq->p, v, rq->m, KT_SIM_BYTES_METRICS, err))) return st;
  if ((st = kt__request_layout_costs(rq, rq->p, v, kt_gen_kind_placement(k), &res->costs, err)))
    return st;
  double limit = kt_mem_limit_units(&rq->mem_limit, k, rq->p, rq->m, rq->v, &res->costs);
  kt_gen_params pp = {.p = rq->p,
                      .m = rq->m,
                      .v = rq->v,
                      .costs = &res->costs,
                      .mem_limit = limit > 0 ? limit : 0,
                      .quick = rq->effort == KT_EFFORT_QUICK,
                      .thorough = rq->effort == KT_EFFORT_THOROUGH,
                      .on_long_search = rq->on_long_search,
                      .ctx = rq->ctx,
                      .outcome = &res->outcome};
  /* quick: zbv, v-half and v-min as constructed, not tuned to the costs
   * (their tuning takes a second at P=8, M=64 even when quick) */
  if (rq->effort == KT_EFFORT_QUICK &&
      (k == KT_SCHED_ZBV || k == KT_SCHED_V_HALF || k == KT_SCHED_V_MIN))
    pp.costs = NULL;
  res->kind = (int)k;
  if ((st = kt__request_pack(rq, k, rq->p * v, &pp, res, err))) return st;
  if ((st = kt_generate(k, &pp, &res->order, err)))
    return infeasible(rq, k, rq->p, rq->m, v, &res->costs, st, err);
  if (k == KT_SCHED_ZB_AUTO || k == KT_SCHED_ZBV_AUTO) {
    pp.costs = &res->costs, pp.v = res->order.v;
    res->mem_limit = kt_gen_mem_limit(&pp);
  }
  return KT_OK;
}

/* The exact search's order, V = 1 (loop) or 2 (v placement). */
static kt_status build_optimal(const kt_request *rq, kt_result *res, kt_error *err) {
  int v = rq->v > 0 ? rq->v : rq->placement == KT_PLACEMENT_V ? 2 : 1;
  if (rq->placement >= 0 && (v == 2) != (rq->placement == KT_PLACEMENT_V))
    return kt_fail(err, KT_EINVAL,
                   "optimal with %d chunks per rank places its stages in %s "
                   "placement, not %s",
                   v, v == 2 ? "v" : "loop", kt_placement_name(rq->placement));
  kt_placement pl = v == 2 ? KT_PLACEMENT_V : KT_PLACEMENT_LOOP;
  kt_gen_kind like = v == 2 ? KT_SCHED_ZBV_AUTO : KT_SCHED_ZB_AUTO;
  kt_status st = kt__request_layout_costs(rq, rq->p, v, pl, &res->costs, err);
  if (st) return st;
  double limit = kt_mem_limit_units(&rq->mem_limit, like, rq->p, rq->m, v, &res->costs);
  kt_gen_params pp = {
      .p = rq->p, .m = rq->m, .v = v, .costs = &res->costs, .mem_limit = limit > 0 ? limit : 0};
  kt_optimal_opts o = {.time_limit = rq->time_limit};
  res->kind = KT_SIM_OPTIMAL;
  /* documents packed (balanced: ordered for zb-auto), each micro-batch its
   * own costs; the search then tries every sequence of them (M <= 6) */
  if ((st = kt__request_pack(rq, like, rq->p * v, &pp, res, err))) return st;
  if ((st = kt_gen_optimal(&pp, pl, &o, &res->order, &res->search, err)))
    return infeasible(rq, like, rq->p, rq->m, v, &res->costs, st, err);
  res->mem_limit = kt_gen_mem_limit(&pp);
  return KT_OK;
}

/* What the order's non-compute actions were, for the line on what was read. */
static void describe_comms(const kt_parse_opts *po, kt_torch_ir ir, char *buf, size_t n) {
  buf[0] = 0;
  if (!po->comm_actions) return;
  if (po->p2p_actions)
    snprintf(buf, n, "; lowered (torch %s IR): %zu communication actions, run in the file's order",
             kt_torch_ir_name(ir), po->comm_actions);
  else
    snprintf(buf, n,
             "; %zu REDUCE_GRAD/UNSHARD-style actions checked and set aside (kaiten "
             "reduces gradients itself and does not shard)",
             po->comm_actions);
}

static void read_info(const kt_request *rq, const kt_parse_opts *po, kt_result *res) {
  const kt_schedule *s = &res->order;
  char pl[512], comms[200], vtext[64];
  describe_comms(po, rq->ir, comms, sizeof comms);
  if (!kt_schedule_even(s)) snprintf(vtext, sizeof vtext, "up to %d per rank", s->v);
  else snprintf(vtext, sizeof vtext, "V=%d", s->v);
  snprintf(res->read_info, sizeof res->read_info,
           "%s: %d ranks, %d stages (%s), %d micro-batches; placement %s%s; notation %s (%s)%s",
           rq->order_origin ? rq->order_origin : s->name, s->p, kt_schedule_stages(s), vtext, s->m,
           kt_schedule_placement_text(s, pl, sizeof pl),
           po->placement_inferred ? " (inferred)" : "", kt_notation_name(po->detected),
           po->detected_why, comms);
}

/* The order the caller holds: parsed, validated with its lowered form (run
 * as written when it has sends and receives), its sizes as given. */
static kt_status build_held(const kt_request *rq, kt_result *res, kt_error *err) {
  kt_parse_opts po = {.notation = rq->notation};
  kt_schedule lowered = {0};
  po.lowered = &lowered;
  const char *origin = rq->order_origin;
  kt_status st = kt_schedule_parse_opts(rq->order, &po, &res->order, err);
  if (!st) st = kt_schedule_validate(&res->order, err);
  if (!st && lowered.ranks) st = kt_lowered_validate_ir(&lowered, rq->ir, err);
  if (!st && po.p2p_actions) res->program = lowered; /* handed over */
  else kt_schedule_free(&lowered);
  res->kind = -1;
  if (st) {
    if (origin && err) {
      kt_error why = *err;
      kt_fail(err, st, "%s: invalid: %s", origin, why.msg);
    }
    return st;
  }
  kt_schedule *s = &res->order;
  const int have[3] = {s->p, s->m, s->v}, want[3] = {rq->p, rq->m, rq->v};
  for (int i = 0; i < 3; i++)
    if ((rq->given & (1u << i)) && want[i] != have[i])
      return kt_fail(err, KT_EINVAL,
                     "%s disagrees with %s: it has P=%d M=%d V=%d (you gave %d); "
                     "leave it out",
                     rq->size_key[i], origin ? origin : "the order", s->p, s->m, s->v, want[i]);
  if (!s->name[0])
    snprintf(s->name, sizeof s->name, "%.*s", (int)sizeof s->name - 1,
             rq->order_name[0] ? rq->order_name : "schedule");
  res->comm_actions = po.comm_actions, res->p2p_actions = po.p2p_actions;
  read_info(rq, &po, res);
  const kt_schedule *runs = kt_result_runs(res);
  if ((st = size_guard((double)kt_schedule_total_actions(runs), KT_SIM_BYTES_METRICS, err))) {
    kt_error why = *err;
    return kt_fail(err, st, "%s: %s", origin ? origin : s->name, why.msg);
  }
  if ((st = stage_costs(rq, s, &res->costs, err))) return st;
  /* not kept to (the order sets its memory): checked against (the page's
   * over_limit) and the bound stated within it */
  kt_gen_kind like = s->placement == KT_PLACEMENT_V ? KT_SCHED_ZBV_AUTO : KT_SCHED_ZB_AUTO;
  res->mem_limit = kt_mem_limit_units(&rq->mem_limit, like, s->p, s->m, s->v, &res->costs);
  return KT_OK;
}

kt_status kt_request_build(const kt_request *rq, kt_result *res, kt_error *err) {
  memset(res, 0, sizeof *res);
  res->kind = -1;
  res->mem_limit = -1;
  res->time_limit = rq->time_limit;
  res->cost_basis = rq->per_stage ? "stage" : "rank";
  kt_status st = kt_request_check(rq, err);
  if (!st && rq->doc_lengths.max > 0 && rq->order)
    st = kt_fail(err, KT_EINVAL,
                 "doc-lengths: documents are packed for a generated schedule "
                 "(not a schedule file)");
  if (!st)
    st = rq->order                                ? build_held(rq, res, err)
         : !strcmp(rq->schedule, KT_OPTIMAL_NAME) ? build_optimal(rq, res, err)
                                                  : build_generated(rq, res, err);
  if (st) kt_result_free(res);
  return st;
}

const kt_schedule *kt_result_runs(const kt_result *res) {
  return res->program.ranks ? &res->program : &res->order;
}

/* The lower bound (kt_gen_bound_of) is computed beside the simulation on
 * a large order: both only read the order and its costs (1F1B P=1024,
 * M=16384: 0.55 s of the bound on one core beside 0.75 s of simulation on
 * two, which slows the simulation by about its share of the cores). Small
 * orders, and the page (wasm32-wasi has no threads), compute it after. */
#define BOUND_BESIDE_ACTIONS 65536

typedef struct {
  kt_result *res;
  int beside; /* a thread computes it */
#ifndef __wasi__
  pthread_t thread;
#endif
} bound_job;

/* The bound without the order's period (not known yet: kt_gen_bound_meets). */
static void bound_run(kt_result *res) {
  kt_gen_bound_of(&res->order, &res->costs, res->mem_limit, NAN, &res->outcome, &res->bound);
}

#ifndef __wasi__
static void *bound_beside(void *arg) {
  bound_job *j = arg;
  bound_run(j->res);
  return NULL;
}
#endif

static void bound_start(bound_job *j, kt_result *res) {
  j->res = res, j->beside = 0;
#ifndef __wasi__
  if (kt_schedule_total_actions(&res->order) >= BOUND_BESIDE_ACTIONS)
    j->beside = !pthread_create(&j->thread, NULL, bound_beside, j);
#endif
}

/* The bound, once the simulation has ended (ok: it gave the period). */
static void bound_finish(bound_job *j, int ok) {
#ifndef __wasi__
  if (j->beside) pthread_join(j->thread, NULL);
#endif
  if (!ok) {
    memset(&j->res->bound, 0, sizeof j->res->bound);
    return;
  }
  if (!j->beside) bound_run(j->res);
  kt_gen_bound_meets(&j->res->bound, j->res->met.period);
}

kt_status kt_result_simulate(kt_result *res, kt_result_detail detail, kt_error *err) {
  const kt_schedule *s = kt_result_runs(res);
  kt_status st;
  /* the timeline's events and memory samples: the size guard of that path */
  if (detail == KT_RESULT_TIMELINE &&
      (st = size_guard((double)kt_schedule_total_actions(s), KT_SIM_BYTES_TIMELINE, err)))
    return st;
  bound_job bound;
  bound_start(&bound, res);
  if (detail == KT_RESULT_TIMELINE) {
    st = kt_simulate_both(s, &res->costs, &res->tl, &res->met, err);
    res->has_timeline = !st;
    if (!st) kt_timeline_sort(&res->tl); /* one order of events for every door */
  } else {
    st = kt_simulate_metrics(s, &res->costs, &res->met, err);
  }
  bound_finish(&bound, !st);
  if (st) return st;
  res->simulated = 1;
  kt__result_describe(res);
  return KT_OK;
}

kt_status kt_request_run(const kt_request *rq, kt_result *res, kt_result_detail detail,
                         kt_error *err) {
  kt_status st = kt_request_build(rq, res, err);
  if (st || detail == KT_RESULT_ORDER) {
    if (!st) kt__result_describe(res);
    return st;
  }
  if ((st = kt_result_simulate(res, detail, err))) kt_result_free(res);
  return st;
}

void kt_result_free(kt_result *res) {
  kt_schedule_free(&res->order);
  kt_schedule_free(&res->program);
  kt_costs_free(&res->costs);
  if (res->packed) kt_pack_free(&res->pack), kt_costs_free(&res->stage_costs);
  res->packed = 0;
  if (res->has_timeline) kt_timeline_free(&res->tl);
  if (res->simulated) kt_metrics_free(&res->met);
  res->has_timeline = res->simulated = 0;
}
