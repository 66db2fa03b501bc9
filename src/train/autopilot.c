/* The autopilot's planner: the costs as the detector measured them, the
 * plans that could beat the one running on them, and whether one does by
 * more than the switch costs.
 *
 * The costs: each stage's calibrated (clean) ops times its rank's factor
 * where the rank is named, each hop the calibrated hand-over plus a named
 * link's mean excess over its last steps over (a delay that changes
 * within steps is planned for at its expected value). In order of what a
 * switch costs: (a) a new order of the same stages (zb-auto, or zbv-auto
 * for the v placement) under the run's memory limit; (b) a new
 * partition: the exact partitioner on per-unit costs (each stage's
 * calibrated cost shared over its units by their weight) with every
 * stage's load times its rank's factor, then its order as in (a). The
 * simulator predicts each; the fastest is adopted when its gain over the
 * steps left, KT__PAYBACK_STEPS at most, exceeds its cost:
 * the overlap lost at the switch's barrier (the plan now's makespan less
 * its period) and, for a partition, the units' weights and optimizer
 * state moved (at 1 GB/s). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/autopilot.h"

#define OPS KT_OP_COUNT
#define MOVE_BYTES_PER_S 1e9 /* units moved between ranks, priced low: a copy or a hop */
#define MIN_GAIN 0.01        /* a plan must win by this much (noise in the costs) */

void kt__plan_free(kt__plan *p) {
  kt_schedule_free(&p->sched);
  free(p->partition);
  memset(p, 0, sizeof *p);
}

/* A stage's calibrated F, I and W (s): a full backward's split by the
 * planner's share when only B was seen. */
static void stage_ops(const kt__planner *pl, const double *expected, int st, double *f, double *i,
                      double *w) {
  const double *e = expected + (size_t)st * OPS;
  *f = isfinite(e[KT_OP_F]) ? e[KT_OP_F] : 0;
  if (isfinite(e[KT_OP_I]) || isfinite(e[KT_OP_W])) {
    *i = isfinite(e[KT_OP_I]) ? e[KT_OP_I] : 0;
    *w = isfinite(e[KT_OP_W]) ? e[KT_OP_W] : 0;
  } else {
    double b = isfinite(e[KT_OP_B]) ? e[KT_OP_B] : 0;
    *i = b * pl->tb_share, *w = b - *i;
  }
}

/* The factor the costs give rank r: its measured one where it is named. */
static double rank_factor(const kt__detector *d, int r) {
  return kt__detector_rank_named(d, r) ? d->factor[r] : 1;
}

/* The costs as measured for stage costs ops (S x 3: F, I, W, clean):
 * each stage's times its rank's factor, each link's delay where it is
 * named, the memory the run's orders are made with, into c (free with
 * kt_costs_free). ENOMEM. */
static kt_status measured_costs(const kt__planner *pl, const kt__detector *d, const int *srank,
                                const double *ops, kt_costs *c, kt_error *err) {
  int S = pl->p * pl->v, n = 0;
  if (kt_costs_copy(c, &pl->mem)) return kt_fail(err, KT_ENOMEM, "out of memory");
  double **arr[3] = {&c->stage_tf, &c->stage_tb, &c->stage_tw}, hops[KT_MAX_RANKS];
  int fail = 0;
  for (int k = 0; k < 3; k++) {
    free(*arr[k]);
    if (!(*arr[k] = kt_calloc((size_t)S, sizeof(double)))) fail = 1;
    for (int s = 0; *arr[k] && s < S; s++) (*arr[k])[s] = ops[3 * s + k] * rank_factor(d, srank[s]);
  }
  c->n_stages = S;
  if (fail) return kt_fail(err, KT_ENOMEM, "out of memory");
  c->tf = c->stage_tf[0], c->tb = c->stage_tb[0], c->tw = c->stage_tw[0];
  for (int l = 0; l < pl->p; l++)
    if (isfinite(d->base[l])) hops[n++] = d->base[l];
  c->comm = n ? kt_median(hops, (size_t)n) : 0;
  c->step_sync = pl->sync, c->tu = pl->tu / pl->v;
  kt_status st = pl->p > 1 ? kt_costs_links_for(c, pl->p, err) : KT_OK;
  for (int l = 0; !st && l < c->n_links; l++) c->link_delay[l] = kt__detector_link_delay(d, l);
  return st;
}

/* The stage costs (S x 3) of the detector's calibration. */
static void calibrated_ops(const kt__planner *pl, const double *expected, double *ops) {
  for (int s = 0; s < pl->p * pl->v; s++)
    stage_ops(pl, expected, s, &ops[3 * s], &ops[3 * s + 1], &ops[3 * s + 2]);
}

/* A step of s (K rounds) under c: its period and makespan. */
static kt_status predict(const kt__planner *pl, const kt_schedule *s, const kt_costs *c,
                         double *period, double *makespan, kt_error *err) {
  kt_schedule rounds;
  kt_status st = kt_schedule_repeat(s, pl->k > 0 ? pl->k : 1, &rounds, err);
  kt_metrics m;
  if (!st && !(st = kt_simulate_metrics(&rounds, c, &m, err))) {
    *period = m.period, *makespan = m.makespan;
    kt_metrics_free(&m);
  }
  kt_schedule_free(&rounds);
  return st;
}

/* The searched order on c (zb-auto, or zbv-auto in the v placement): the
 * default search, then the thorough one when the default's order is more
 * than KT_NEAR_OPTIMAL above the lower bound and 200 times the default's
 * time fits the planner's budget (the thorough search takes 10-1000 times
 * as long); the faster of the two. */
static kt_status reorder(const kt__planner *pl, const kt_costs *c, kt_schedule *out,
                         kt_error *err) {
  kt_gen_kind kind = pl->placement == KT_PLACEMENT_V ? KT_SCHED_ZBV_AUTO : KT_SCHED_ZB_AUTO;
  kt_gen_params gp = {.p = pl->p, .v = pl->v, .m = pl->m, .costs = c, .mem_limit = pl->mem_limit};
  double t0 = kt_now(), period, lb, busy;
  kt_status st = kt_generate(kind, &gp, out, err);
  if (st || !(pl->budget > 0) || 200 * (kt_now() - t0) > pl->budget) return st;
  kt_error e2;
  if (kt_gen_period(out, c, &period, &busy, &e2) ||
      kt_gen_lower_bound(out, c, pl->mem_limit, 0, &lb, NULL, &e2) ||
      period <= lb * (1 + KT_NEAR_OPTIMAL))
    return KT_OK;
  kt_schedule t;
  double better;
  gp.thorough = 1;
  if (kt_generate(kind, &gp, &t, &e2)) return KT_OK;
  if (!kt_gen_period(&t, c, &better, &busy, &e2) && better < period) {
    kt_schedule_free(out);
    *out = t;
  } else {
    kt_schedule_free(&t);
  }
  return KT_OK;
}

/* The exact partition of the units on per-unit costs (each stage's
 * calibrated cost shared by weight) with each stage's load times its
 * rank's factor: counts[S], and the new stage costs into ops (S x 3). */
static kt_status repartition(const kt__planner *pl, const kt__detector *d, const int *srank,
                             const double *clean, int *counts, double *ops, kt_error *err) {
  int S = pl->p * pl->v, U = pl->units;
  double *unit = kt_calloc(3 * (size_t)U, sizeof *unit), *load = kt_calloc((size_t)U, sizeof *load);
  double *scale = kt_calloc((size_t)S, sizeof *scale);
  kt_status st = unit && load && scale ? KT_OK : kt_fail(err, KT_ENOMEM, "out of memory");
  for (int s = 0; !st && s < S; s++) {
    double w = 0;
    for (int u = pl->offset[s]; u < pl->offset[s + 1]; u++) w += pl->unit_w[u];
    for (int u = pl->offset[s]; u < pl->offset[s + 1]; u++)
      for (int k = 0; k < 3; k++)
        unit[3 * u + k] = w > 0 ? clean[3 * s + k] * pl->unit_w[u] / w : 0;
    scale[s] = rank_factor(d, srank[s]);
  }
  for (int u = 0; !st && u < U; u++) load[u] = unit[3 * u] + unit[3 * u + 1] + unit[3 * u + 2];
  kt_partition_problem pb = {.n = U, .load = load, .scale = scale};
  if (!st) st = kt_partition_minmax(&pb, S, counts, NULL, err);
  for (int s = 0, u = 0; !st && s < S; s++)
    for (int k = 0, first = u; k < 3; k++) {
      ops[3 * s + k] = 0;
      for (u = first; u < first + counts[s]; u++) ops[3 * s + k] += unit[3 * u + k];
    }
  free(unit), free(load), free(scale);
  return st;
}

/* Bytes the units that change stage take with them (weights and state). */
static double moved_bytes(const kt__planner *pl, const int *counts) {
  double bytes = 0;
  for (int s = 0, at = 0; s < pl->p * pl->v; at += counts[s], s++)
    for (int u = 0; u < pl->units; u++) {
      int was = u >= pl->offset[s] && u < pl->offset[s + 1], now = u >= at && u < at + counts[s];
      if (now && !was) bytes += pl->unit_bytes[u];
    }
  return bytes;
}

/* A candidate: its order on c, predicted; kept in out when faster. */
static kt_status candidate(const kt__planner *pl, const kt_costs *c, kt__switch_kind kind,
                           const int *counts, kt__plan *out, kt_costs *best_costs, kt_error *err) {
  kt_schedule s;
  double period, makespan;
  kt_status st = reorder(pl, c, &s, err);
  if (!st) st = predict(pl, &s, c, &period, &makespan, err);
  if (st || period >= out->after) {
    if (!st) kt_schedule_free(&s);
    return st;
  }
  kt_schedule_free(&out->sched);
  free(out->partition);
  out->partition = NULL;
  out->sched = s, out->after = period, out->kind = kind;
  int S = pl->p * pl->v;
  if (counts && !(out->partition = kt_calloc((size_t)S, sizeof *counts)))
    return kt_fail(err, KT_ENOMEM, "out of memory");
  if (counts) memcpy(out->partition, counts, sizeof *counts * (size_t)S);
  kt_costs_free(best_costs);
  return kt_costs_copy(best_costs, c) ? kt_fail(err, KT_ENOMEM, "out of memory") : KT_OK;
}

/* The new partition's candidate, when the units can move and it moves some. */
static kt_status partition_candidate(const kt__planner *pl, const kt__detector *d, const int *srank,
                                     const double *clean, kt__plan *out, kt_costs *best,
                                     kt_error *err) {
  int S = pl->p * pl->v, moves = 0;
  if (pl->units <= S) return KT_OK;
  int *counts = kt_calloc((size_t)S, sizeof *counts);
  double *ops = kt_calloc(3 * (size_t)S, sizeof *ops);
  kt_costs c = {0};
  kt_status st = counts && ops ? repartition(pl, d, srank, clean, counts, ops, err)
                               : kt_fail(err, KT_ENOMEM, "out of memory");
  for (int s = 0; !st && s < S; s++) moves |= counts[s] != pl->offset[s + 1] - pl->offset[s];
  if (!st && moves) st = measured_costs(pl, d, srank, ops, &c, err);
  /* costlier than a new order: it must beat that one too by MIN_GAIN */
  double keep = out->after;
  if (out->kind != KT__SWITCH_NONE) out->after *= 1 - MIN_GAIN;
  if (!st && moves) st = candidate(pl, &c, KT__SWITCH_REPARTITION, counts, out, best, err);
  if (out->kind != KT__SWITCH_REPARTITION) out->after = keep;
  kt_costs_free(&c);
  free(counts), free(ops);
  return st;
}

kt_status kt__autopilot_plan(const kt__planner *pl, const kt__detector *d, const kt_schedule *cur,
                             int steps_left, kt__plan *out, kt_error *err) {
  memset(out, 0, sizeof *out);
  if (!d->calibrated) return KT_OK;
  double t0 = kt_now(), cpu0 = kt_thread_cpu_now(), makespan;
  int S = pl->p * pl->v;
  int *srank = kt_calloc((size_t)S, sizeof *srank);
  double *clean = kt_calloc(3 * (size_t)S, sizeof *clean);
  kt_costs now = {0}, best = {0};
  kt_status st = srank && clean ? KT_OK : kt_fail(err, KT_ENOMEM, "out of memory");
  for (int s = 0; !st && s < S; s++) srank[s] = kt_stage_rank(cur, s);
  if (!st) calibrated_ops(pl, d->expected, clean);
  if (!st) st = measured_costs(pl, d, srank, clean, &now, err);
  if (!st) st = predict(pl, cur, &now, &out->before, &makespan, err);
  out->after = out->before * (1 - MIN_GAIN); /* what a plan must beat */
  if (!st) st = candidate(pl, &now, KT__SWITCH_REORDER, NULL, out, &best, err);
  if (!st) st = partition_candidate(pl, d, srank, clean, out, &best, err);
  out->replan_seconds = kt_now() - t0, out->replan_cpu = kt_thread_cpu_now() - cpu0;
  if (!st && out->kind != KT__SWITCH_NONE) {
    out->cost = fmax(0, makespan - out->before) +
                (out->partition ? moved_bytes(pl, out->partition) / MOVE_BYTES_PER_S : 0);
    int horizon = steps_left < KT__PAYBACK_STEPS ? steps_left : KT__PAYBACK_STEPS;
    out->adopted = (out->before - out->after) * horizon > out->cost;
    kt_schedule rounds;
    out->lower_bound = NAN;
    kt_error e2;
    if (!kt_schedule_repeat(&out->sched, pl->k > 0 ? pl->k : 1, &rounds, &e2)) {
      if (kt_gen_lower_bound(&rounds, &best, pl->mem_limit, 0, &out->lower_bound, NULL, &e2))
        out->lower_bound = NAN;
      kt_schedule_free(&rounds);
    }
  }
  if (out->kind == KT__SWITCH_NONE) out->after = out->before;
  kt_costs_free(&now), kt_costs_free(&best);
  free(srank), free(clean);
  if (st) kt__plan_free(out);
  return st;
}
