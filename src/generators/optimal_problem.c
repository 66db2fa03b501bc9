/* The exact search's ground: its problem (a layout and stage costs,
 * flattened, with each op's tail on its rank) and the slot-form state
 * (optimal_bound.c bounds its completions). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "generators/optimal_internal.h"
#include "kaiten/sim.h"

#define NONE (-INFINITY)

static inline double maxd(double a, double b) { return a > b ? a : b; } /* no NaN here */

static kt_status alloc_fail(kt_error *err, const kt__opt_problem *pb) {
  return kt_fail(err, KT_ENOMEM, "optimal: out of memory (P=%d, V=%d, M=%d)", pb->p, pb->v, pb->m);
}

/* Longest time from the end of (type, s) until an op it leads to on rank r
 * ends; NONE when it leads to none there. Micro-batches are alike, so one
 * chain: F(0) .. F(S-1), I(S-1) .. I(0), and W(s) after I(s). */
static double lead_to(const kt__opt_problem *pb, int r, int type, int s) {
  double best = NONE;
  if (type == KT__OPT_W) return NONE;
  if (type == KT__OPT_I) {
    if (pb->srank[s] == r) best = pb->tw[s];
    if (s > 0) {
      double down = maxd(pb->srank[s - 1] == r ? 0 : NONE, lead_to(pb, r, KT__OPT_I, s - 1));
      best = maxd(best, pb->hop_i[s] + pb->tb[s - 1] + down);
    }
    return best;
  }
  if (s < pb->S - 1) {
    double up = maxd(pb->srank[s + 1] == r ? 0 : NONE, lead_to(pb, r, KT__OPT_F, s + 1));
    return pb->hop_f[s] + pb->tf[s + 1] + up;
  }
  return pb->tb[s] + maxd(0, lead_to(pb, r, KT__OPT_I, s)); /* I(S-1) runs on this rank */
}

static kt_status problem_alloc(kt__opt_problem *pb, kt_error *err) {
  size_t S = (size_t)pb->S, p = (size_t)pb->p;
  pb->srank = kt_calloc(S, sizeof *pb->srank);
  pb->schunk = kt_calloc(S, sizeof *pb->schunk);
  pb->rstage = kt_calloc(p * (size_t)pb->v, sizeof *pb->rstage);
  pb->first = kt_calloc(p, sizeof *pb->first);
  double **per_stage[] = {&pb->tf,   &pb->tb,      &pb->tw,      &pb->act,
                          &pb->wg,   &pb->hop_f,   &pb->hop_i,   &pb->so_f,
                          &pb->so_i, &pb->tail[0], &pb->tail[1], &pb->tail[2]};
  int ok = pb->srank && pb->schunk && pb->rstage && pb->first;
  for (size_t k = 0; k < sizeof per_stage / sizeof *per_stage; k++)
    ok &= (*per_stage[k] = kt_calloc(S, sizeof(double))) != NULL;
  return ok ? KT_OK : alloc_fail(err, pb);
}

kt_status kt__opt_problem_init(kt__opt_problem *pb, const kt_schedule *s, const kt_costs *c,
                               double limit, int needs, kt_error *err) {
  kt_costs unit;
  if (!c) kt_costs_default(&unit), c = &unit;
  memset(pb, 0, sizeof *pb);
  if (c->links)
    return kt_fail(err, KT_EINVAL,
                   "optimal: the exact search has no model of shared links "
                   "(a cluster topology); a per-hop communication time it has");
  if (c->action_time) /* one schedule's measured durations: no model of other orders */
    return kt_fail(err, KT_EINVAL,
                   "optimal: per-action times (a measured step) describe one "
                   "order only; give per-stage costs");
  pb->p = s->p, pb->v = s->v, pb->m = s->m, pb->S = kt_schedule_stages(s);
  kt_status st = problem_alloc(pb, err);
  if (st) {
    kt__opt_problem_free(pb);
    return st;
  }
  for (int i = 0; i < pb->p * pb->v; i++) pb->rstage[i] = -1;
  for (int r = 0; r < pb->p; r++) pb->first[r] = -1;
  for (int x = 0; x < pb->S; x++) {
    int r = pb->srank[x] = kt_stage_rank(s, x);
    pb->schunk[x] = kt_stage_chunk(s, x);
    pb->rstage[r * pb->v + pb->schunk[x]] = x;
    if (pb->first[r] < 0) pb->first[r] = x;
    pb->tf[x] = kt_cost_tf(c, x), pb->tb[x] = kt_cost_tb(c, x), pb->tw[x] = kt_cost_tw(c, x);
    pb->act[x] = kt_cost_mem_act(c, x), pb->wg[x] = kt_cost_mem_wgrad(c, x);
  }
  for (int x = 0; x < pb->S; x++) {
    int fwd = x + 1 < pb->S && pb->srank[x + 1] != pb->srank[x];
    int bwd = x > 0 && pb->srank[x - 1] != pb->srank[x];
    pb->hop_f[x] = fwd ? kt_cost_link(c, pb->srank[x], pb->srank[x + 1]) : 0;
    pb->hop_i[x] = bwd ? kt_cost_link(c, pb->srank[x], pb->srank[x - 1]) : 0;
    pb->so_f[x] = fwd ? c->send_overhead : 0, pb->so_i[x] = bwd ? c->send_overhead : 0;
  }
  for (int x = 0; x < pb->S; x++)
    for (int t = 0; t < KT__OPT_TYPES; t++)
      pb->tail[t][x] = maxd(0, lead_to(pb, pb->srank[x], t, x));
  kt_gen_params lp = {.p = s->p, .v = s->v, .m = s->m, .costs = c, .mem_limit = limit};
  pb->limit = kt_gen_mem_limit(&lp);
  pb->nk = KT__OPT_TYPES * pb->v;
  if (!(st = kt_step_model_init(&pb->step, s, c, err)) && needs) st = kt__opt_needs_init(pb, err);
  if (st) kt__opt_problem_free(pb);
  return st;
}

void kt__opt_problem_free(kt__opt_problem *pb) {
  void *arrays[] = {pb->srank,     pb->schunk,   pb->need,   pb->rstage,    pb->first,
                    pb->tf,        pb->tb,       pb->tw,     pb->act,       pb->wg,
                    pb->hop_f,     pb->hop_i,    pb->so_f,   pb->so_i,      pb->tail[0],
                    pb->tail[1],   pb->tail[2],  pb->seq,    pb->slot_t[0], pb->slot_t[1],
                    pb->slot_t[2], pb->slot_act, pb->slot_wg};
  for (size_t k = 0; k < sizeof arrays / sizeof *arrays; k++) free(arrays[k]);
  kt_step_model_free(&pb->step);
  memset(pb, 0, sizeof *pb);
}

kt_status kt__opt_state_init(kt__opt_state *st, const kt__opt_problem *pb, kt_error *err) {
  memset(st, 0, sizeof *st);
  size_t S = (size_t)pb->S, cells = S * (size_t)pb->m, p = (size_t)pb->p;
  int ok = 1;
  for (int t = 0; t < KT__OPT_TYPES; t++) ok &= (st->n[t] = kt_calloc(S, sizeof(int))) != NULL;
  st->end_f = kt_calloc(cells, sizeof(double));
  st->end_i = kt_calloc(cells, sizeof(double));
  double **per_rank[] = {&st->free_at, &st->start, &st->last_end, &st->mem};
  for (size_t k = 0; k < sizeof per_rank / sizeof *per_rank; k++)
    ok &= (*per_rank[k] = kt_calloc(p, sizeof(double))) != NULL;
  st->started = kt_calloc(p, 1);
  if (!ok || !st->end_f || !st->end_i || !st->started) {
    kt__opt_state_free(st);
    return alloc_fail(err, pb);
  }
  kt__opt_state_reset(st, pb);
  return KT_OK;
}

void kt__opt_state_free(kt__opt_state *st) {
  for (int t = 0; t < KT__OPT_TYPES; t++) free(st->n[t]);
  void *arrays[] = {st->end_f,    st->end_i, st->free_at, st->start,
                    st->last_end, st->mem,   st->started};
  for (size_t k = 0; k < sizeof arrays / sizeof *arrays; k++) free(arrays[k]);
  memset(st, 0, sizeof *st);
}

void kt__opt_state_reset(kt__opt_state *st, const kt__opt_problem *pb) {
  for (int t = 0; t < KT__OPT_TYPES; t++) memset(st->n[t], 0, (size_t)pb->S * sizeof(int));
  for (int r = 0; r < pb->p; r++) {
    st->free_at[r] = st->start[r] = st->last_end[r] = st->mem[r] = 0;
    st->started[r] = 0;
  }
}
