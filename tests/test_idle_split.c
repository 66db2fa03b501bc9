/* Why a measured step idled (kt_idle_split_step): on steps made up from
 * simulations, where the cause of every idle second is known, and on a
 * real threaded run with a straggler. The six parts always sum to the
 * step. */
#include "check.h"
#include "kaiten/generators.h"
#include "kaiten/runtime.h"
#include "kaiten/sim.h"

/* A "measured" step: the schedule simulated with costs c, each event's
 * own time `own` (its stage's cost under `base`), its wait for input as
 * comm_time. */
static void fake_step(const kt_schedule *s, const kt_costs *c, const kt_costs *base,
                      kt_timeline *tl) {
  kt_error err;
  REQUIRE_VOID(kt_simulate(s, c, tl, &err) == KT_OK);
  kt_timeline_sort(tl);
  double prev_end = 0;
  for (size_t i = 0; i < tl->n_events; i++) {
    kt_event *e = &tl->events[i];
    if (i == 0 || tl->events[i - 1].rank != e->rank) prev_end = 0;
    e->comm_time = e->start - prev_end;
    e->cpu_time = kt_cost_op(base, e->stage, (kt_op)e->op);
    e->ready_wait = e->end - e->start - e->cpu_time; /* the rest of its time it had no core */
    prev_end = e->end;
  }
}

static double sum(const kt_idle_split *o) {
  return o->busy + o->schedule + o->core_wait + o->comm + o->overhead + o->optimizer;
}

/* 1F1B P=4 M=8 with unit costs (a span of 33, 24 busy), its step of
 * `step` split into o[4]; 0 when it could not be. */
static int unit_1f1b_split(double step, kt_step_sync sync, kt_idle_split *o) {
  kt_error err;
  kt_schedule s;
  kt_gen_params sp = {.p = 4, .m = 8};
  kt_status st = kt_generate(KT_SCHED_1F1B, &sp, &s, &err);
  CHECK_MSG(st == KT_OK, "%s", err.msg);
  if (st) return 0;
  kt_costs c;
  kt_costs_default(&c);
  kt_timeline tl;
  fake_step(&s, &c, &c, &tl);
  st = kt_idle_split_step(&s, &tl, step, sync, o, &err);
  CHECK_MSG(st == KT_OK, "%s", err.msg);
  kt_timeline_free(&tl);
  kt_schedule_free(&s);
  return st == KT_OK;
}

/* With unit costs all idle is the structural bubble. */
static void only_the_schedule(void) {
  kt_idle_split o[4];
  if (!unit_1f1b_split(33 + 2, KT_STEP_BARRIER, o)) return; /* 2 of optimizer */
  for (int r = 0; r < 4; r++) {
    CHECK_NEAR(o[r].busy, 24, 1e-9);
    CHECK_NEAR(sum(&o[r]), 35, 1e-9);
    CHECK_NEAR(o[r].core_wait + o[r].comm + o[r].overhead, 0, 1e-9);
    /* a rank that ends early waits for the drain: the schedule's too */
    CHECK_NEAR(o[r].optimizer, 2, 1e-9);
    CHECK_NEAR(o[r].schedule, 33 - 24, 1e-9);
  }
}

/* Without a barrier a rank's span can outlast the step's period (the
 * step's first actions ran beside the last of the step before): the
 * split still sums to the step, with nothing left for the optimizer. */
static void period_shorter_than_a_span(void) {
  kt_idle_split o[4];
  if (!unit_1f1b_split(30, KT_STEP_OVERLAP, o)) return;
  for (int r = 0; r < 4; r++) {
    CHECK_NEAR(o[r].busy, 24, 1e-9);
    CHECK_NEAR(sum(&o[r]), 30, 1e-9);
    CHECK_NEAR(o[r].optimizer, 0, 1e-9);
    CHECK(o[r].schedule >= 0 && o[r].core_wait >= 0 && o[r].comm >= 0 && o[r].overhead >= 0);
  }
}

/* Rank 1 waits for a core half of every action: its own waits and what
 * they cost the others are core_wait; the schedule's share is unchanged. */
static void waiting_for_a_core(void) {
  kt_error err;
  kt_schedule s;
  kt_gen_params sp = {.p = 4, .m = 8};
  REQUIRE_VOID(kt_generate(KT_SCHED_1F1B, &sp, &s, &err) == KT_OK);
  kt_costs base, slow;
  kt_costs_default(&base);
  kt_costs_default(&slow);
  double tf[4] = {1, 2, 1, 1}, tb[4] = {1, 2, 1, 1}, tw[4] = {1, 2, 1, 1};
  slow.n_stages = 4, slow.stage_tf = tf, slow.stage_tb = tb, slow.stage_tw = tw;
  kt_timeline tl;
  fake_step(&s, &slow, &base, &tl); /* took 2 per op on rank 1, of which 1 its own */
  kt_metrics m;
  REQUIRE_VOID(kt_timeline_metrics(&tl, &m, &err) == KT_OK);
  double step = m.makespan;
  kt_metrics_free(&m);
  kt_idle_split o[4];
  REQUIRE_VOID(kt_idle_split_step(&s, &tl, step, KT_STEP_BARRIER, o, &err) == KT_OK);
  for (int r = 0; r < 4; r++) {
    CHECK_NEAR(sum(&o[r]), step, 1e-9);
    CHECK_NEAR(o[r].busy, 24, 1e-9);
    CHECK_NEAR(o[r].comm + o[r].overhead, 0, 1e-9);
    CHECK_MSG(o[r].core_wait > 5, "rank %d: core_wait %g", r, o[r].core_wait);
  }
  /* rank 1 waited 24 for a core; being the bottleneck, it idled less than
   * the schedule alone would have it */
  CHECK(o[1].core_wait + o[1].schedule >= 24 - 1e-9);
  kt_timeline_free(&tl);
  kt_schedule_free(&s);
}

/* Every hop takes 0.5: the rest beyond the replays is comm. */
static void transfers(void) {
  kt_error err;
  kt_schedule s;
  kt_gen_params sp = {.p = 2, .m = 4};
  REQUIRE_VOID(kt_generate(KT_SCHED_1F1B, &sp, &s, &err) == KT_OK);
  kt_costs base, hops;
  kt_costs_default(&base);
  kt_costs_default(&hops);
  hops.comm = 0.5;
  kt_timeline tl;
  fake_step(&s, &hops, &base, &tl);
  kt_metrics m;
  REQUIRE_VOID(kt_timeline_metrics(&tl, &m, &err) == KT_OK);
  double step = m.makespan;
  kt_metrics_free(&m);
  kt_idle_split o[2];
  REQUIRE_VOID(kt_idle_split_step(&s, &tl, step, KT_STEP_BARRIER, o, &err) == KT_OK);
  for (int r = 0; r < 2; r++) {
    CHECK_NEAR(sum(&o[r]), step, 1e-9);
    CHECK_NEAR(o[r].core_wait + o[r].overhead, 0, 1e-9);
    CHECK_MSG(o[r].comm >= 1 - 1e-9, "rank %d: comm %g", r, o[r].comm); /* >= two hops */
  }
  /* a timeline of another schedule is refused */
  kt_schedule other;
  kt_gen_params op = {.p = 2, .m = 4};
  REQUIRE_VOID(kt_generate(KT_SCHED_GPIPE, &op, &other, &err) == KT_OK);
  CHECK(kt_idle_split_step(&other, &tl, step, KT_STEP_BARRIER, o, &err) == KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "not the schedule's step");
  kt_schedule_free(&other);
  kt_timeline_free(&tl);
  kt_schedule_free(&s);
}

/* Rank r's idle before the pipeline's last action in a simulation of s
 * with stage 2 at factor times the others' 4 ms. */
static double predicted_idle(const kt_schedule *s, double factor, int r) {
  double t[4] = {4e-3, 4e-3, 4e-3 * factor, 4e-3};
  kt_costs c;
  kt_costs_default(&c);
  c.n_stages = 4, c.stage_tf = c.stage_tb = c.stage_tw = t;
  kt_metrics m;
  kt_error err;
  if (kt_simulate_metrics(s, &c, &m, &err)) return NAN;
  double idle = m.makespan - m.ranks[r].busy; /* the step starts at 0 */
  kt_metrics_free(&m);
  return idle;
}

/* A real threaded run (synthetic, 4 ms actions) with rank 2 at 1.5x: the
 * other ranks' extra idle is the schedule's, as much as the simulator
 * predicts for a stage that slow, and the six parts sum to the step. */
static void straggler_on_threads(void) {
  kt_error err;
  kt_schedule s;
  kt_gen_params sp = {.p = 4, .m = 8};
  REQUIRE_VOID(kt_generate(KT_SCHED_1F1B, &sp, &s, &err) == KT_OK);
  double sched_idle[2][4];
  for (int slow = 0; slow < 2; slow++) {
    kt_runtime_config cfg;
    kt_runtime_config_default(&cfg);
    cfg.schedule = &s;
    cfg.synthetic = 1;
    cfg.syn_tf_ms = cfg.syn_tb_ms = cfg.syn_tw_ms = 4;
    cfg.syn_act_bytes = 64;
    cfg.pin_threads = 0;
    cfg.slow_rank = slow ? 2 : -1;
    cfg.slow_factor = 1.5;
    kt_runtime *rt;
    REQUIRE_VOID(kt_runtime_create_threads(&cfg, &rt, &err) == KT_OK);
    kt_step_result res;
    for (int step = 0; step < 2; step++)
      REQUIRE_VOID(kt_runtime_step(rt, step, NULL, 1, &res, &err) == KT_OK);
    kt_idle_split o[4];
    REQUIRE_VOID(kt_idle_split_step(&s, kt_runtime_timeline(rt), res.seconds, KT_STEP_BARRIER, o,
                                    &err) == KT_OK);
    for (int r = 0; r < 4; r++) {
      CHECK_MSG(fabs(sum(&o[r]) - res.seconds) <= 0.01 * res.seconds, "rank %d: %g of %g s", r,
                sum(&o[r]), res.seconds);
      sched_idle[slow][r] = o[r].schedule;
    }
    kt_runtime_destroy(rt);
  }
  for (int r = 0; r < 4; r++) {
    if (r == 2) continue;
    double extra = sched_idle[1][r] - sched_idle[0][r];
    double want = predicted_idle(&s, 1.5, r) - predicted_idle(&s, 1, r);
    CHECK_MSG(want > 0.02 && fabs(extra - want) < 0.2 * want,
              "rank %d: the straggler added %.4g s of schedule idle, the simulator says %.4g", r,
              extra, want);
  }
  kt_schedule_free(&s);
}

/* Two rounds of accumulation: the measured step is the schedule repeated
 * (round k's micro-batch j is k*M + j in the events). */
static void accumulation_rounds(void) {
  kt_error err;
  kt_schedule s, rounds;
  kt_gen_params sp = {.p = 2, .m = 4};
  REQUIRE_VOID(kt_generate(KT_SCHED_1F1B, &sp, &s, &err) == KT_OK);
  REQUIRE_VOID(kt_schedule_repeat(&s, 2, &rounds, &err) == KT_OK);
  kt_runtime_config cfg;
  kt_runtime_config_default(&cfg);
  cfg.schedule = &s;
  cfg.grad_accum = 2;
  cfg.synthetic = 1;
  cfg.syn_tf_ms = cfg.syn_tb_ms = cfg.syn_tw_ms = 1;
  cfg.syn_act_bytes = 64;
  cfg.pin_threads = 0;
  kt_runtime *rt;
  REQUIRE_VOID(kt_runtime_create_threads(&cfg, &rt, &err) == KT_OK);
  kt_step_result res;
  REQUIRE_VOID(kt_runtime_step(rt, 0, NULL, 1, &res, &err) == KT_OK);
  kt_idle_split o[2];
  CHECK_MSG(kt_idle_split_step(&rounds, kt_runtime_timeline(rt), res.seconds, KT_STEP_BARRIER, o,
                               &err) == KT_OK,
            "%s", err.msg);
  /* 8 F of 1 ms, 8 B of 2 ms: a sleep that ends early (its wake-up
   * latency estimate high after a stall) counts what it took, one that
   * ends late likewise; one round's ops missing would be 12 ms short */
  CHECK_NEAR(o[0].busy, 2 * 4 * 3e-3, 1.5e-3);
  kt_runtime_destroy(rt);
  kt_schedule_free(&rounds);
  kt_schedule_free(&s);
}

int main(void) {
  accumulation_rounds();
  only_the_schedule();
  period_shorter_than_a_span();
  waiting_for_a_core();
  transfers();
  straggler_on_threads();
  return kt_test_done(__FILE__);
}
