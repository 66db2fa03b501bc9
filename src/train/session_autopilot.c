/* The session's straggler autopilot (docs/runtime.md, "The autopilot"):
 * every step measured by the detector (where every rank's events are at
 * hand: threads, or world rank 0 under MPI), its culprit in the step's
 * record; with the autopilot a new plan made when what is named changes,
 * adopted when worth its switch, and switched to at the next barrier
 * (trainer's between_steps): every rank runs it from the same step. Under
 * MPI world rank 0 plans; a request to switch travels with the steps'
 * stop vote (KT_VOTE_REPLAN) and the plan itself is sent at the barrier. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/session_internal.h"

/* Optimizer state floats per parameter. */
static int state_per(const kt_optim_config *o) {
  return o->kind == KT_OPTIM_ADAMW ? 2 : o->momentum != 0 ? 1 : 0;
}

/* The units a partition moves and what each weighs and carries. */
static kt_status planner_units(kt_session *s, kt__planner *pl, kt_error *err) {
  const kt_session_params *p = &s->p;
  int S = kt_schedule_stages(&s->sched);
  const int *off = kt_runtime_unit_offsets(s->rt);
  pl->units = p->make_chunk ? 0 : p->synthetic ? p->syn_units : kt_model_units(&p->model);
  if (!(pl->offset = kt_calloc((size_t)S + 1, sizeof *pl->offset)))
    return kt_fail(err, KT_ENOMEM, "out of memory");
  memcpy(pl->offset, off, sizeof *off * ((size_t)S + 1));
  if (pl->units <= S) return pl->units = 0, KT_OK;
  pl->unit_w = kt_calloc((size_t)pl->units, sizeof *pl->unit_w);
  pl->unit_bytes = kt_calloc((size_t)pl->units, sizeof *pl->unit_bytes);
  if (!pl->unit_w || !pl->unit_bytes) return kt_fail(err, KT_ENOMEM, "out of memory");
  double per = 4.0 * (1 + state_per(&p->optim));
  for (int u = 0; u < pl->units; u++) {
    pl->unit_w[u] = p->synthetic ? 1 : kt_model_unit_flops(&p->model, u);
    pl->unit_bytes[u] = per * (p->synthetic ? (double)p->syn_grad_bytes / 4 * S / pl->units
                                            : (double)kt_model_unit_params(&p->model, u));
  }
  return KT_OK;
}

static void planner_free(kt__planner *pl) {
  kt_costs_free(&pl->mem);
  free(pl->unit_w);
  free(pl->unit_bytes);
  free(pl->offset);
  memset(pl, 0, sizeof *pl);
}

kt_status kt__session_autopilot_init(kt_session *s, kt_error *err) {
  const kt_session_params *p = &s->p;
  kt_status st = kt__detector_init(&s->det, &s->sched, err);
  if (st || !p->autopilot) return st;
  kt__planner *pl = &s->pl;
  pl->p = s->sched.p, pl->v = s->sched.v, pl->m = s->sched.m;
  pl->k = p->grad_accum > 0 ? p->grad_accum : 1;
  pl->placement = s->sched.placement == KT_PLACEMENT_V ? KT_PLACEMENT_V : KT_PLACEMENT_LOOP;
  pl->sync = p->step_sync, pl->mem_limit = s->gen_limit;
  double tb = p->syn_tb_ms, tw = p->syn_tw_ms;
  pl->tb_share = p->synthetic && tb + tw > 0 ? tb / (tb + tw) : 0.5;
  if (kt_costs_copy(&pl->mem, &s->mem)) return kt_fail(err, KT_ENOMEM, "out of memory");
  return planner_units(s, pl, err);
}

void kt__session_autopilot_free(kt_session *s) {
  kt__detector_free(&s->det);
  planner_free(&s->pl);
  kt__plan_free(&s->plan);
}

/* What the detector names now, in buckets (factors by 10%, delays by a
 * tenth of a mean op): a plan is made again when it changes. */
static unsigned long long signature(const kt__detector *d) {
  unsigned long long h = 1469598103934665603ull;
  for (int r = 0; r < d->p; r++) {
    long x = kt__detector_rank_named(d, r) ? lround(log(d->factor[r]) / log(1.1)) : 0;
    h = (h ^ (unsigned long long)(x + 1000 * r)) * 1099511628211ull;
  }
  double unit = d->op_mean > 0 ? 0.1 * d->op_mean : 1;
  for (int l = 0; l < d->p; l++) {
    long x = kt__detector_link_named(d, l) ? lround(d->excess[l] / unit) + 1 : 0;
    h = (h ^ (unsigned long long)(x + 1000 * (l + d->p))) * 1099511628211ull;
  }
  return h;
}

/* The partition now as "2,3,3", or "" without units. */
static void partition_text(const int *counts, int S, char *out, size_t n) {
  size_t len = 0;
  out[0] = 0;
  for (int i = 0; counts && i < S && len + 12 < n; i++)
    len += (size_t)snprintf(out + len, n - len, "%s%d", i ? "," : "", counts[i]);
}

/* A new plan when what is named changed; kept when adopted. */
static void maybe_plan(kt_session *s, const kt_train_progress *p) {
  unsigned long long sig = signature(&s->det);
  if (sig == s->planned_for || s->plan.kind != KT__SWITCH_NONE) return;
  s->planned_for = sig;
  int left = s->p.steps - (p->step + 1) - (s->p.step_sync == KT_STEP_OVERLAP ? 2 : 0);
  kt__plan plan;
  kt_error err;
  if (kt__autopilot_plan(&s->pl, &s->det, &s->sched, left > 0 ? left : 0, &plan, &err)) return;
  s->last_step_seconds = p->seconds;
  if (plan.kind != KT__SWITCH_NONE && plan.adopted) s->plan = plan;
  else kt__plan_free(&plan);
}

void kt__session_autopilot_step(kt_session *s, const kt_train_progress *p, kt_run_step *rec) {
  rec->fault = (kt_run_fault){0};
  rec->sw = s->switched;
  s->switched.made = 0;
  const kt_timeline *t = p->timeline;
  if (!s->det.p || !t || t->n_events != kt_schedule_total_actions(&s->rounds)) return;
  kt__detector_step(&s->det, t, &s->sched, p->step + 1);
  rec->fault = s->det.fault;
  if (s->p.autopilot && !p->skipped) maybe_plan(s, p);
}

int kt__session_autopilot_due(const kt_session *s) { return s->plan.kind != KT__SWITCH_NONE; }

/* The switch's record for the next step's line. */
static void record_switch(kt_session *s, const char *from, double seconds) {
  kt_run_switch *w = &s->switched;
  const kt__plan *pl = &s->plan;
  *w = (kt_run_switch){.made = 1, .predicted_before = pl->before, .predicted_after = pl->after,
                       .lower_bound = pl->lower_bound, .cost = pl->cost,
                       .replan_seconds = pl->replan_seconds, .switch_seconds = seconds};
  w->replan_fraction = s->last_step_seconds > 0 ? pl->replan_seconds / s->last_step_seconds : NAN;
  snprintf(w->kind, sizeof w->kind, "%s", pl->kind == KT__SWITCH_REPARTITION ? "repartition" : "reorder");
  snprintf(w->from, sizeof w->from, "%s", from);
  snprintf(w->to, sizeof w->to, "%s", pl->sched.name);
  partition_text(pl->partition, kt_schedule_stages(&s->sched), w->partition, sizeof w->partition);
  s->result.switches++;
  s->result.last_switch = *w;
}

/* Op durations per stage as the new partition makes them (kt__detector_repartition). */
static void remap(const void *ctx, double *expected) {
  const kt_session *s = ctx;
  kt__autopilot_expected_after(&s->pl, s->plan.partition, expected);
}

/* The session's schedule, rounds and planner after the switch. */
static kt_status adopt(kt_session *s, kt_error *err) {
  kt__plan *pl = &s->plan;
  int S = kt_schedule_stages(&s->sched), K = s->p.grad_accum > 0 ? s->p.grad_accum : 1;
  kt_schedule_free(&s->sched);
  kt_schedule_free(&s->rounds);
  kt_status st = kt_schedule_copy(&s->sched, &pl->sched, err);
  if (!st) st = kt_schedule_repeat(&s->sched, K, &s->rounds, err);
  if (st || !pl->partition) return st;
  kt__detector_repartition(&s->det, remap, s);
  for (int i = 0; i < S; i++) s->pl.offset[i + 1] = s->pl.offset[i] + pl->partition[i];
  if (s->partition) memcpy(s->partition, pl->partition, sizeof *pl->partition * (size_t)S);
  return KT_OK;
}

kt_status kt__session_autopilot_switch(void *ctx, kt_runtime *rt, int next, kt_error *err) {
  kt_session *s = ctx;
  (void)next;
  if (s->plan.kind == KT__SWITCH_NONE) return KT_OK;
  char from[32];
  snprintf(from, sizeof from, "%s", s->sched.name);
  double t0 = kt_now();
  kt_status st = kt_runtime_replan(rt, &s->plan.sched, s->plan.partition, err);
  double seconds = kt_now() - t0;
  if (!st) record_switch(s, from, seconds);
  if (!st) st = adopt(s, err);
  kt__plan_free(&s->plan);
  s->planned_for = signature(&s->det); /* planned for what is named now */
  return st;
}
