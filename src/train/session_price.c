/* What the schedule costs in time against 1F1B on the same model: 1F1B's
 * predicted period on the costs calibrated on the last step, so that a
 * memory limit's saving (kt_session_result.peak_vs_1f1b) is said next to
 * its price (kt_session_result.period_1f1b). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/session_internal.h"

/* The calibrated stage costs as P stages, one per rank: a rank's stages
 * (its V chunks) summed; the step's end and the links as they are. */
static kt_status rank_costs(const kt_schedule *s, const kt_costs *c, kt_costs *out, kt_error *err) {
  if (kt_costs_copy(out, c)) return kt_fail(err, KT_ENOMEM, "out of memory");
  int S = kt_schedule_stages(s), P = s->p;
  if (S == P || c->n_stages != S) return KT_OK; /* one stage a rank already, or uniform */
  double *const from[] = {c->stage_tf,      c->stage_tb,        c->stage_tw,           c->stage_tu,
                          c->stage_mem_act, c->stage_mem_wgrad, c->stage_mem_transient};
  double **to[] = {&out->stage_tf,           &out->stage_tb,      &out->stage_tw,
                   &out->stage_tu,           &out->stage_mem_act, &out->stage_mem_wgrad,
                   &out->stage_mem_transient};
  for (size_t k = 0; k < sizeof to / sizeof *to; k++) {
    free(*to[k]);
    *to[k] = NULL;
    if (!from[k]) continue;
    if (!(*to[k] = kt_calloc((size_t)P, sizeof(double))))
      return kt_fail(err, KT_ENOMEM, "out of memory");
    for (int st = 0; st < S; st++) (*to[k])[kt_stage_rank(s, st)] += from[k][st];
  }
  out->n_stages = P;
  return KT_OK;
}

kt_status kt__session_price(kt_session *s, kt_error *err) {
  kt_train_result *res = &s->result.train;
  s->result.period_1f1b = NAN;
  if (res->n_losses == 0 || !(res->predicted.period > 0) || !s->sched.ranks) return KT_OK;
  const kt_schedule *sc = &s->sched;
  kt_costs c;
  kt_schedule one = {0}, rounds = {0};
  kt_metrics m = {0};
  kt_gen_params gp = {.p = sc->p, .m = sc->m};
  int K = s->p.grad_accum > 0 ? s->p.grad_accum : 1;
  kt_status st = rank_costs(sc, &res->calibrated, &c, err);
  if (!st) st = kt_generate(KT_SCHED_1F1B, &gp, &one, err);
  if (!st) st = kt_schedule_repeat(&one, K, &rounds, err);
  if (!st) st = kt_simulate_metrics(&rounds, &c, &m, err);
  if (!st) st = kt_sim_period(&rounds, &c, &m, err);
  if (!st) s->result.period_1f1b = m.period;
  kt_metrics_free(&m);
  if (rounds.ranks) kt_schedule_free(&rounds);
  if (one.ranks) kt_schedule_free(&one);
  kt_costs_free(&c);
  return st;
}
