/* What a step is: from one simulated step to the period of a run.
 *
 * After its last action a rank finishes the step (the runtime's order,
 * src/runtime/optim.c): with tied embeddings the ranks of the first and
 * the last stage exchange the embedding's gradient (both wait for both);
 * then the rank's data-parallel all-reduce; then, under a barrier, the
 * global-norm all-reduce over the pipeline (everyone waits for everyone)
 * and the update, after which the next step starts on every rank at once.
 * Without a barrier (overlap) the update runs at once on what the rank
 * has and the norm is checked behind it, so rank r may start its next
 * step at ready_r = end_r (+ tie) + t_dp + u_r.
 *
 * Under a barrier every step is the last one shifted: the period is
 * max_r(end_r + tie + t_dp) + t_norm + max_r u_r - the step's start.
 * Without one, steps overlap and the times form a max-plus system: rank
 * r's first action of step k+1 waits for ready_r of step k, and everything
 * else within a step as the simulator says. Its period is the largest
 * cycle mean. U = max_r(ready_r - start_r) of one step is achievable
 * (release every rank U after its start in this step: the next step is
 * this one shifted), so the period is at most U; and every time in a step
 * simulated from zero is a longest path from the first action of the rank
 * that runs stage 0 (the only actions that need nothing are its forwards),
 * so when that rank attains U its own cycle has mean U and the period is
 * U exactly. Otherwise steps are simulated back to back, each rank
 * released at its ready time, until one step is the previous one shifted
 * (or repeats every few steps): that shift is the period. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/internal.h"

kt_status kt_step_model_init(kt_step_model *m, const kt_schedule *s, const kt_costs *c,
                             kt_error *err) {
  kt_costs unit;
  if (!c) kt_costs_default(&unit), c = &unit;
  memset(m, 0, sizeof *m);
  int S = kt_schedule_stages(s);
  m->p = s->p;
  m->sync = c->step_sync;
  m->first = kt_stage_rank(s, 0);
  m->last = kt_stage_rank(s, S - 1);
  m->tied = c->tied && m->first != m->last;
  m->t_tie = c->t_tie, m->t_dp = c->t_dp, m->t_norm = c->t_norm;
  if (!(m->update = kt_calloc((size_t)s->p, sizeof *m->update)))
    return kt_fail(err, KT_ENOMEM, "out of memory");
  for (int st = 0; st < S; st++) {
    int r = kt_stage_rank(s, st);
    if (r >= 0 && r < s->p) m->update[r] += kt_cost_tu(c, st);
  }
  for (int r = 0; r < s->p; r++) m->max_update = fmax(m->max_update, m->update[r]);
  return KT_OK;
}

void kt_step_model_free(kt_step_model *m) {
  free(m->update);
  m->update = NULL;
}

/* When rank r's gradients are final: its end, the tie, its all-reduce. */
static double reduced(const kt_step_model *m, const double *end, int r) {
  double x = end[r];
  if (m->tied && (r == m->first || r == m->last)) x = fmax(end[m->first], end[m->last]) + m->t_tie;
  return x + m->t_dp;
}

void kt_step_model_ready(const kt_step_model *m, const double *end, double *ready) {
  if (m->sync == KT_STEP_BARRIER) {
    double all = -INFINITY;
    for (int r = 0; r < m->p; r++) all = fmax(all, reduced(m, end, r));
    for (int r = 0; r < m->p; r++) ready[r] = all + m->t_norm + m->max_update;
    return;
  }
  for (int r = 0; r < m->p; r++) ready[r] = reduced(m, end, r) + m->update[r];
}

double kt_step_model_period(const kt_step_model *m, const double *start, const double *end,
                            int *exact) {
  double lo = INFINITY, best = -INFINITY;
  int arg = -1;
  for (int r = 0; r < m->p; r++) lo = fmin(lo, start[r]);
  if (m->sync == KT_STEP_BARRIER) {
    double all = -INFINITY;
    for (int r = 0; r < m->p; r++) all = fmax(all, reduced(m, end, r));
    if (exact) *exact = 1;
    return all + m->t_norm + m->max_update - lo;
  }
  for (int r = 0; r < m->p; r++) {
    double u = reduced(m, end, r) + m->update[r] - start[r];
    if (u > best || (u == best && r == m->first)) best = u, arg = r;
  }
  /* the stage-0 rank attains it (ties within rounding count) */
  if (exact)
    *exact = arg == m->first ||
             (m->first >= 0 && reduced(m, end, m->first) + m->update[m->first] - start[m->first] >=
                                   best - 1e-12 * (1 + fabs(best)));
  return best;
}

double kt_step_model_bound(const kt_step_model *m, const kt_metrics *met, int *exact) {
  enum { ON_STACK = 64 };
  double sbuf[ON_STACK] = {0}, ebuf[ON_STACK] = {0};
  double *start = sbuf, *end = ebuf;
  if (m->p > ON_STACK) {
    start = kt_calloc((size_t)m->p, sizeof *start), end = kt_calloc((size_t)m->p, sizeof *end);
    if (!start || !end) {
      free(start), free(end);
      if (exact) *exact = 0;
      return INFINITY;
    }
  }
  for (int r = 0; r < m->p && r < met->p; r++) {
    const kt_rank_metrics *rm = &met->ranks[r];
    start[r] = rm->actions ? rm->start : 0;
    end[r] = rm->actions ? rm->end : start[r];
  }
  double u = kt_step_model_period(m, start, end, exact);
  if (start != sbuf) free(start), free(end);
  return u;
}

/* Steps back to back: at most this many, and no more than this many
 * actions simulated in all. */
#define MAX_STEPS 64
#define MAX_WORK 2e8
/* A repetition every CYCLE steps or fewer is found. */
#define CYCLE 4

/* Whether b[k] - b[k-c] is the same on every rank; *shift receives it. */
static int shifted(const double *hist, int p, int k, int c, double *shift) {
  const double *now = hist + (size_t)(k % (CYCLE + 1)) * p;
  const double *then = hist + (size_t)((k - c) % (CYCLE + 1)) * p;
  double lo = INFINITY, hi = -INFINITY;
  for (int r = 0; r < p; r++) lo = fmin(lo, now[r] - then[r]), hi = fmax(hi, now[r] - then[r]);
  *shift = 0.5 * (lo + hi);
  return hi - lo <= 1e-9 * (1 + fabs(*shift)) && lo > -INFINITY;
}

/* The period of steps simulated back to back from release 0. */
static kt_status iterate(const kt_schedule *s, const kt_costs *c, const kt_step_model *m,
                         double *period, kt_error *err) {
  int p = s->p;
  double *hist = kt_calloc((size_t)(CYCLE + 1) * p, sizeof *hist); /* releases, by step */
  double *end = kt_calloc((size_t)p, sizeof *end);
  if (!hist || !end) {
    free(hist), free(end);
    return kt_fail(err, KT_ENOMEM, "out of memory");
  }
  double work = (double)kt_schedule_total_actions(s) + 1;
  int steps = (int)fmin(MAX_STEPS, fmax(2 * CYCLE + 2, MAX_WORK / work));
  kt_costs run = *c;
  kt_status st = KT_OK;
  int k = 0;
  for (; k < steps && !st; k++) {
    const double *rel = hist + (size_t)(k % (CYCLE + 1)) * p;
    double *next = hist + (size_t)((k + 1) % (CYCLE + 1)) * p;
    run.rank_release = rel;
    kt_metrics met;
    if ((st = kt__simulate(s, &run, NULL, &met, NULL, NULL, err))) break;
    for (int r = 0; r < p; r++) end[r] = met.ranks[r].actions ? met.ranks[r].end : rel[r];
    kt_metrics_free(&met);
    kt_step_model_ready(m, end, next);
    for (int cyc = 1; cyc <= CYCLE && cyc <= k + 1; cyc++)
      if (shifted(hist, p, k + 1, cyc, period)) {
        *period /= cyc;
        free(hist), free(end);
        return KT_OK;
      }
  }
  if (!st) { /* no repetition within the budget: the mean over the last CYCLE steps */
    const double *now = hist + (size_t)(k % (CYCLE + 1)) * p;
    const double *then = hist + (size_t)((k - CYCLE) % (CYCLE + 1)) * p;
    *period = (now[m->first >= 0 ? m->first : 0] - then[m->first >= 0 ? m->first : 0]) / CYCLE;
  }
  free(hist), free(end);
  return st;
}

kt_status kt_sim_period(const kt_schedule *s, const kt_costs *c, kt_metrics *met, kt_error *err) {
  kt_costs unit;
  if (!c) kt_costs_default(&unit), c = &unit;
  kt_step_model m;
  kt_status st = kt_step_model_init(&m, s, c, err);
  if (st) return st;
  int exact = 0;
  double period = kt_step_model_bound(&m, met, &exact);
  if (isinf(period)) st = kt_fail(err, KT_ENOMEM, "out of memory");
  if (!st && !exact && s->p > 1) st = iterate(s, c, &m, &period, err);
  if (!st) kt_metrics_set_period(met, period, (int)m.sync);
  kt_step_model_free(&m);
  return st;
}

/* ---- the public entry points: a simulation, then its period ---- */

kt_status kt_simulate(const kt_schedule *s, const kt_costs *c, kt_timeline *out, kt_error *err) {
  return kt__simulate(s, c, out, NULL, NULL, NULL, err);
}

kt_status kt_simulate_step(const kt_schedule *s, const kt_costs *c, kt_timeline *out,
                           double *sync_end, kt_error *err) {
  double end;
  kt_status st = kt__simulate(s, c, out, NULL, NULL, &end, err);
  if (st || !sync_end) return st;
  if (isnan(end)) { /* no links: the pipeline's end */
    end = 0;
    for (size_t i = 0; out && i < out->n_events; i++)
      if (out->events[i].end > end) end = out->events[i].end;
  }
  *sync_end = end;
  return KT_OK;
}

/* The metrics' period, once the simulation filled them. */
static kt_status with_period(const kt_schedule *s, const kt_costs *c, kt_timeline *out,
                             kt_metrics *met, kt_status st, kt_error *err) {
  if (st || !met) return st;
  if (!(st = kt_sim_period(s, c, met, err))) return KT_OK;
  kt_metrics_free(met);
  if (out) kt_timeline_free(out);
  return st;
}

kt_status kt_simulate_into(const kt_schedule *s, const kt_costs *c, const kt_sim_sink *sink,
                           kt_metrics *met, kt_error *err) {
  return with_period(s, c, NULL, met, kt__simulate(s, c, NULL, met, sink, NULL, err), err);
}

kt_status kt_simulate_both(const kt_schedule *s, const kt_costs *c, kt_timeline *out,
                           kt_metrics *met, kt_error *err) {
  return with_period(s, c, out, met, kt__simulate(s, c, out, met, NULL, NULL, err), err);
}

double kt_cost_op(const kt_costs *c, int stage, kt_op op) {
  return kt_cost_op_mb(c, stage, -1, op);
}

double kt_cost_op_mb(const kt_costs *c, int stage, int mb, kt_op op) {
  switch (op) {
    case KT_OP_F: return kt_cost_tf_mb(c, stage, mb) + c->op_overhead;
    case KT_OP_B: return kt_cost_tb_mb(c, stage, mb) + kt_cost_tw_mb(c, stage, mb) + c->op_overhead;
    case KT_OP_I: return kt_cost_tb_mb(c, stage, mb) + c->op_overhead;
    case KT_OP_W: return kt_cost_tw_mb(c, stage, mb) + c->op_overhead;
    default: return 0;
  }
}

kt_status kt_simulate_metrics(const kt_schedule *s, const kt_costs *c, kt_metrics *out,
                              kt_error *err) {
  return with_period(s, c, NULL, out, kt__simulate(s, c, NULL, out, NULL, NULL, err), err);
}
