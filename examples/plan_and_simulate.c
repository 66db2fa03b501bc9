/* Plan and simulate with the core library alone (libkaiten_core: libc and
 * libm, no BLAS, MPI or HTTP server).
 *
 * 1. The planner picks a layout for GPT-2 124M on 8 devices with a global
 *    batch of 64 samples and 4 pipeline stages, and prints its best three.
 * 2. The schedule of the best one is generated and simulated with the
 *    planner's per-stage costs, and the planner prices 1F1B and zb-auto on
 *    the same layout for comparison.
 *
 *   cc plan_and_simulate.c $(pkg-config --cflags --libs kaiten-core)
 */
#include <stdio.h>

#include <kaiten/generators.h>
#include <kaiten/plan.h>
#include <kaiten/sim.h>

static int fail(const char *what, const kt_error *err) {
  fprintf(stderr, "plan_and_simulate: %s: %s\n", what, err->msg);
  return 1;
}

/* Per-stage costs of the planner's result: F, I, W seconds per micro-batch. */
static void stage_costs(const kt_plan_result *r, kt_costs *c) {
  kt_costs_default(c);
  c->n_stages = r->cfg.p * r->cfg.v;
  c->stage_tf = r->stage_f;
  c->stage_tb = r->stage_i;
  c->stage_tw = r->stage_w;
  c->comm = r->p2p_time;
}

/* The best layout's schedule generated and simulated on its own stage costs. */
static int simulate(const kt_plan_result *best) {
  kt_costs c;
  stage_costs(best, &c);
  kt_gen_params params = {.p = best->cfg.p, .v = best->cfg.v, .m = best->cfg.m, .costs = &c};
  kt_schedule s;
  kt_metrics mt;
  kt_error err;
  if (kt_generate(best->cfg.schedule, &params, &s, &err)) return fail("generate", &err);
  kt_status st = kt_simulate_metrics(&s, &c, &mt, &err);
  kt_schedule_free(&s);
  if (st) return fail("simulate", &err);
  printf("one round of %s, simulated: makespan %.2f ms, bubble %.1f%%\n",
         kt_gen_kind_name(best->cfg.schedule), mt.makespan * 1e3, mt.bubble_ratio * 100);
  for (int r = 0; r < mt.p; r++)
    printf("  rank %d busy %7.2f ms  idle %7.2f ms  in flight %d\n", r, mt.ranks[r].busy * 1e3,
           mt.ranks[r].idle * 1e3, mt.ranks[r].peak_inflight);
  kt_metrics_free(&mt);
  return 0;
}

/* Another schedule on the same layout (V = 1), as the planner prices it. */
static int compare(const kt_plan_model *m, const kt_plan_cluster *c, const kt_plan_options *o,
                   const kt_plan_result *best, kt_gen_kind kind) {
  kt_plan_config cfg = best->cfg;
  cfg.schedule = kind;
  cfg.v = 1;
  kt_plan_result r;
  kt_error err;
  if (kt_plan_evaluate(m, c, o, &cfg, &r, &err)) return fail(kt_gen_kind_name(kind), &err);
  printf("  the same layout with %-8s step %.2f ms  bubble %.1f%%  peak %.2f GB%s\n",
         kt_gen_kind_name(kind), r.step_time * 1e3, r.bubble_ratio * 100, r.mem_peak / 1e9,
         r.fits ? "" : " (does not fit)");
  kt_plan_result_free(&r);
  return 0;
}

int main(void) {
  kt_plan_model model;
  kt_plan_cluster cluster;
  kt_plan_options opts;
  kt_plan_search_params sp;
  kt_plan_report rep;
  kt_error err;
  if (kt_plan_model_preset("gpt2-124m", &model, &err)) return fail("model", &err);
  kt_plan_cluster_default(&cluster); /* 8 devices of 80 GB */
  kt_plan_options_default(&opts);
  kt_plan_search_params_default(&sp);
  sp.global_batch = 64;
  sp.pin.p = 4; /* a pipeline of 4 stages (the planner alone would choose P=1 here) */
  sp.top = 3;
  if (kt_plan_search(&model, &cluster, &opts, &sp, &rep, &err)) {
    kt_plan_model_free(&model);
    return fail("plan", &err);
  }
  int rc = rep.n == 0;
  if (rc) fprintf(stderr, "plan_and_simulate: no configuration fits\n");
  printf("best of %zu configurations for %s on %d devices (global batch %ld, P=4):\n", rep.enumerated,
         model.name, cluster.devices, sp.global_batch);
  for (int i = 0; i < rep.n; i++) {
    const kt_plan_config *c = &rep.configs[i].cfg;
    printf("  %d. %-12s P=%d D=%d t=%d V=%d M=%d b=%d K=%d recompute %-9s  step %.2f ms  "
           "bubble %.1f%%\n", i + 1, kt_gen_kind_name(c->schedule), c->p, c->d, c->t, c->v,
           c->m, c->b, c->k, kt_recompute_name(c->recompute),
           rep.configs[i].step_time * 1e3, rep.configs[i].bubble_ratio * 100);
  }
  if (!rc) rc = simulate(&rep.configs[0]);
  const kt_gen_kind others[] = {KT_SCHED_1F1B, KT_SCHED_ZB_AUTO};
  for (int i = 0; !rc && i < 2; i++) rc = compare(&model, &cluster, &opts, &rep.configs[0], others[i]);
  kt_plan_report_free(&rep);
  kt_plan_model_free(&model);
  return rc;
}
