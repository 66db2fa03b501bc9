/* Helpers shared by the planner tests (tests/test_plan*.c). */
#ifndef KAITEN_TEST_PLAN_CHECK_H
#define KAITEN_TEST_PLAN_CHECK_H

#include "check.h"
#include "kaiten/generators.h"
#include "kaiten/plan.h"
#include "kaiten/sim.h"

/* Like REQUIRE, for void helpers: counts a failure and returns; evaluates once. */
#define NEED(cond) \
  do { \
    kt_test_checks++; \
    if (!(cond)) { \
      kt_test_failures++; \
      fprintf(stderr, "%s:%d: NEED failed: %s\n", __FILE__, __LINE__, #cond); \
      return; \
    } \
  } while (0)

/* Recomputes a result's per-rank memory independently of the planner: layer
 * costs summed over its partition, the schedule simulated with those bytes
 * per stage (peak_memory), plus the model states of the rank's stages.
 * mem[p] and inflight[p] receive the figures. 0 on success. */
static inline int plan_recheck_memory(const kt_plan_model *m, const kt_plan_cluster *c,
                                      const kt_plan_options *o, const kt_plan_result *r,
                                      double *mem, int *inflight) {
  const kt_plan_config *g = &r->cfg;
  int S = g->p * g->v, n = m->n_layers, rc = -1;
  kt_layer_cost *lc = calloc((size_t)n, sizeof *lc);
  double *act = calloc((size_t)S, sizeof *act), *wg = calloc((size_t)S, sizeof *wg);
  double *params = calloc((size_t)S, sizeof *params);
  kt_error err;
  kt_plan_shape sh = {.t = g->t, .b = g->b, .recompute = g->recompute};
  kt_schedule s = {0};
  kt_gen_params sp = {.p = g->p, .v = g->v, .m = g->m};
  if (!lc || !act || !wg || !params || kt_plan_layer_costs(m, c, o, &sh, lc, &err)) goto done;
  for (int j = 0, i = 0; j < S; j++)
    for (int q = 0; q < r->partition[j] && i < n; q++, i++)
      act[j] += lc[i].act, wg[j] += lc[i].wgrad, params[j] += lc[i].params;
  kt_costs sc;
  kt_costs_default(&sc);
  sc.n_stages = S, sc.stage_mem_act = act, sc.stage_mem_wgrad = wg;
  if (g->schedule == KT_SCHED_ZB_AUTO || g->schedule == KT_SCHED_ZBV_AUTO) {
    /* generated for the configuration: its stage times, activations and the
     * budget beside the largest model states (the planner's inputs) */
    double state = 0;
    for (int k = 0; k < g->p; k++) state = state > r->mem_state[k] ? state : r->mem_state[k];
    sc.stage_tf = r->stage_f, sc.stage_tb = r->stage_i, sc.stage_tw = r->stage_w;
    sc.comm = r->p2p_time;
    sp.costs = &sc, sp.quick = 1, sp.mem_limit = kt_plan_cluster_budget(c) - state;
  }
  if (kt_generate(g->schedule, &sp, &s, &err)) goto done;
  kt_metrics met;
  if (kt_simulate_metrics(&s, &sc, &met, &err)) goto done;
  for (int k = 0; k < g->p; k++) {
    double p = 0;
    int first = 0, last = 0;
    for (int ch = 0; ch < g->v; ch++) {
      int j = kt_rank_chunk_stage(&s, k, ch);
      p += params[j];
      first |= j == 0, last |= j == S - 1;
    }
    if (m->transformer && m->tie_embeddings && first && last) /* one table for both */
      p -= (double)m->vocab * m->hidden / g->t;
    mem[k] = kt_plan_state_bytes(p, o, 1, g->d) + met.ranks[k].peak_memory;
    inflight[k] = met.ranks[k].peak_inflight;
  }
  kt_metrics_free(&met);
  rc = 0;
done:
  if (s.ranks) kt_schedule_free(&s);
  free(lc), free(act), free(wg), free(params);
  return rc;
}

#endif
