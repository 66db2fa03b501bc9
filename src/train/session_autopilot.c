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
  if (!st && !p->synthetic) s->det.confirm_own = KT__CONFIRM_CPU;
  if (!st) s->det.name_waits = s->compute_threads <= s->cores; /* else its ops wait for cores */
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
    long x = kt__detector_link_named(d, l) ? lround(kt__detector_link_delay(d, l) / unit) + 1 : 0;
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
  s->pl.budget = 0.05 * p->seconds; /* a plan takes at most 5% of a step */
  if (kt__autopilot_plan(&s->pl, &s->det, &s->sched, left > 0 ? left : 0, &plan, &err)) return;
  s->last_step_seconds = p->seconds;
  if (plan.kind != KT__SWITCH_NONE && plan.adopted) s->plan = plan;
  else kt__plan_free(&plan);
}

/* Under MPI world rank 0 plans: whether it wants a switch, told to every
 * rank after each step (a small all-reduce; every rank takes the step's
 * result at the same point of the same loop). */
static void tell_ranks(kt_session *s) {
  if (!s->p.use_mpi || !s->mpi_t || !s->p.autopilot) return;
  float want = s->plan.kind != KT__SWITCH_NONE;
  kt_error err;
  if (kt_allreduce(s->mpi_t, KT_GROUP_WORLD, &want, 1, &err) == KT_OK) s->remote_plan = want > 0;
}

void kt__session_autopilot_step(kt_session *s, const kt_train_progress *p, kt_run_step *rec) {
  rec->fault = (kt_run_fault){0};
  rec->sw = s->switched;
  s->switched.made = 0;
  const kt_timeline *t = p->timeline;
  if (s->det.p && t && t->n_events == kt_schedule_total_actions(&s->rounds)) {
    kt__detector_step(&s->det, t, &s->sched, p->step + 1);
    rec->fault = s->det.fault;
    if (s->p.autopilot && !p->skipped) maybe_plan(s, p);
  }
  tell_ranks(s);
}

int kt__session_autopilot_due(const kt_session *s) {
  return s->plan.kind != KT__SWITCH_NONE || s->remote_plan;
}

/* ---- the plan sent from world rank 0 to every rank (MPI) ---------------------- */

/* The plan as floats (exact: small integers): its generator, whether it
 * moves units, the partition (S), then each rank's actions (count, then
 * stage, op, micro-batch, flags each). NULL on ENOMEM; *n its length. */
static float *encode_plan(const kt__plan *pl, int S, size_t *n) {
  const kt_schedule *s = &pl->sched;
  size_t len = 2 + (size_t)S + (size_t)s->p + 4 * kt_schedule_total_actions(s);
  float *v = kt_calloc(len, sizeof *v), *x = v;
  if (!v) return NULL;
  *x++ = (float)kt_gen_kind_from_name(s->name), *x++ = pl->partition != NULL;
  for (int i = 0; i < S; i++) *x++ = pl->partition ? (float)pl->partition[i] : 0;
  for (int r = 0; r < s->p; r++) {
    *x++ = (float)s->ranks[r].n;
    for (size_t i = 0; i < s->ranks[r].n; i++) {
      const kt_action *a = &s->ranks[r].actions[i];
      *x++ = (float)a->stage, *x++ = (float)a->op, *x++ = (float)a->mb, *x++ = (float)a->flags;
    }
  }
  *n = len;
  return v;
}

/* The plan from its floats, on the layout of like. EINVAL, ENOMEM. */
static kt_status decode_plan(const float *v, size_t n, const kt_schedule *like, kt__plan *pl,
                             kt_error *err) {
  int S = kt_schedule_stages(like);
  kt_status st = kt_schedule_init_like(&pl->sched, like, like->m, err);
  if (st) return st;
  snprintf(pl->sched.name, sizeof pl->sched.name, "%s", kt_gen_kind_name((kt_gen_kind)(int)v[0]));
  pl->kind = v[1] > 0 ? KT__SWITCH_REPARTITION : KT__SWITCH_REORDER;
  if (v[1] > 0 && !(pl->partition = kt_calloc((size_t)S, sizeof *pl->partition)))
    return kt_fail(err, KT_ENOMEM, "out of memory");
  for (int i = 0; pl->partition && i < S; i++) pl->partition[i] = (int)v[2 + i];
  size_t at = 2 + (size_t)S;
  for (int r = 0; r < like->p && !st; r++) {
    size_t count = at < n ? (size_t)v[at++] : 0;
    for (size_t i = 0; i < count && !st; i++, at += 4) {
      if (at + 4 > n) return kt_fail(err, KT_EINVAL, "a plan cut short");
      if (kt_schedule_push(&pl->sched, r, (int)v[at], (kt_op)(int)v[at + 1], (int)v[at + 2]))
        st = kt_fail(err, KT_ENOMEM, "out of memory");
      else pl->sched.ranks[r].actions[pl->sched.ranks[r].n - 1].flags = (uint8_t)v[at + 3];
    }
  }
  return st;
}

/* Every rank gets world rank 0's plan (collective): its length, then it. */
static kt_status share_plan(kt_session *s, kt_error *err) {
  int S = kt_schedule_stages(&s->sched), root = s->world_rank == 0;
  size_t n = 0;
  float *v = root ? encode_plan(&s->plan, S, &n) : NULL;
  if (root && !v) return kt_fail(err, KT_ENOMEM, "out of memory");
  /* the length in two floats, each exact (a float holds integers to 2^24) */
  float len[2] = {(float)(n >> 20), (float)(n & 0xFFFFF)};
  kt_status st = kt_allreduce(s->mpi_t, KT_GROUP_WORLD, len, 2, err);
  n = ((size_t)len[0] << 20) + (size_t)len[1];
  if (!st && !root && !(v = kt_calloc(n + 1, sizeof *v)))
    st = kt_fail(err, KT_ENOMEM, "out of memory");
  if (!st) st = kt_allreduce(s->mpi_t, KT_GROUP_WORLD, v, n, err); /* the others add zeros */
  if (!st && !root) st = decode_plan(v, n, &s->sched, &s->plan, err);
  free(v);
  s->remote_plan = 0;
  return st;
}

/* The switch's record for the next step's line. */
static void record_switch(kt_session *s, const char *from, double seconds) {
  kt_run_switch *w = &s->switched;
  const kt__plan *pl = &s->plan;
  *w = (kt_run_switch){.made = 1,
                       .predicted_before = pl->before,
                       .predicted_after = pl->after,
                       .lower_bound = pl->lower_bound,
                       .cost = pl->cost,
                       .replan_seconds = pl->replan_seconds,
                       .replan_cpu = pl->replan_cpu,
                       .switch_seconds = seconds};
  w->replan_fraction = s->last_step_seconds > 0 ? pl->replan_seconds / s->last_step_seconds : NAN;
  snprintf(w->kind, sizeof w->kind, "%s",
           pl->kind == KT__SWITCH_REPARTITION ? "repartition" : "reorder");
  snprintf(w->from, sizeof w->from, "%s", from);
  snprintf(w->to, sizeof w->to, "%s", pl->sched.name);
  partition_text(pl->partition, kt_schedule_stages(&s->sched), w->partition, sizeof w->partition);
  s->result.switches++;
  s->result.last_switch = *w;
}

/* The session's schedule, rounds and planner after the switch. Balanced
 * packing's order of micro-batches (session_docs.c) stays the one searched
 * for the starting schedule: searched again, the documents would land in
 * other micro-batches' slots and the gradients be summed in another order,
 * and a switch is to change no arithmetic (losses bitwise those of the run
 * without the fault). */
static kt_status adopt(kt_session *s, kt_error *err) {
  kt__plan *pl = &s->plan;
  int S = kt_schedule_stages(&s->sched), K = s->p.grad_accum > 0 ? s->p.grad_accum : 1;
  kt_schedule_free(&s->sched);
  kt_schedule_free(&s->rounds);
  kt_status st = kt_schedule_copy(&s->sched, &pl->sched, err);
  if (!st) st = kt_schedule_repeat(&s->sched, K, &s->rounds, err);
  if (st || !pl->partition) return st;
  kt__detector_repartition(&s->det);
  for (int i = 0; i < S; i++) s->pl.offset[i + 1] = s->pl.offset[i] + pl->partition[i];
  if (s->partition) memcpy(s->partition, pl->partition, sizeof *pl->partition * (size_t)S);
  return KT_OK;
}

kt_status kt__session_autopilot_switch(void *ctx, kt_runtime *rt, int next, kt_error *err) {
  kt_session *s = ctx;
  (void)next;
  if (!kt__session_autopilot_due(s)) return KT_OK;
  kt_status sh = s->p.use_mpi && s->mpi_t ? share_plan(s, err) : KT_OK;
  if (sh) return sh;
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
