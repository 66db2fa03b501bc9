/* Simulator semantics against hand-computed timelines. */
#include "check.h"
#include "kaiten/generators.h"
#include "kaiten/schedule.h"
#include "kaiten/sim.h"

static kt_schedule gen(kt_gen_kind kind, int p, int m) {
  kt_schedule s;
  kt_error err;
  kt_gen_params params = {.p = p, .m = m};
  if (kt_generate(kind, &params, &s, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    exit(1);
  }
  return s;
}

static kt_schedule parse(const char *text) {
  kt_schedule s;
  kt_error err;
  if (kt_schedule_parse(text, &s, &err)) {
    fprintf(stderr, "parse: %s\n", err.msg);
    exit(1);
  }
  return s;
}

static const kt_event *find(const kt_timeline *t, int stage, kt_op op, int mb) {
  for (size_t i = 0; i < t->n_events; i++)
    if (t->events[i].stage == stage && t->events[i].op == op && t->events[i].mb == mb)
      return &t->events[i];
  return NULL;
}

int main(void) {
  kt_costs c;
  kt_timeline t;
  kt_metrics m;
  kt_error err;

  /* 1f1b P=2 M=2, T_F=1, T_B=2, T_W=0, T_comm=0.5 (worked by hand) */
  kt_schedule s = gen(KT_SCHED_1F1B, 2, 2);
  kt_costs_default(&c);
  c.tf = 1, c.tb = 2, c.tw = 0, c.comm = 0.5;
  REQUIRE(kt_simulate(&s, &c, &t, &err) == KT_OK);
  CHECK_NEAR(find(&t, 1, KT_OP_F, 0)->start, 1.5, 1e-12);
  CHECK_NEAR(find(&t, 1, KT_OP_F, 1)->start, 4.5, 1e-12);
  CHECK_NEAR(find(&t, 0, KT_OP_B, 0)->start, 5.0, 1e-12);
  CHECK_NEAR(find(&t, 0, KT_OP_B, 1)->start, 8.0, 1e-12);
  REQUIRE(kt_timeline_metrics(&t, &m, &err) == KT_OK);
  CHECK_NEAR(m.makespan, 10.0, 1e-12);
  CHECK_NEAR(m.ranks[0].busy, 6.0, 1e-12);
  CHECK_NEAR(m.ranks[1].idle, 4.0, 1e-12);
  CHECK_NEAR(m.bubble_ratio, 0.4, 1e-12);
  kt_metrics_free(&m);
  kt_timeline_free(&t);
  kt_schedule_free(&s);

  /* the same with a send overhead of 0.25: each rank is held that long by
   * every message it sends (rank 0 after F0 and F1, rank 1 after B0 and
   * B1); compute-only and lowered alike */
  s = gen(KT_SCHED_1F1B, 2, 2);
  c.send_overhead = 0.25;
  kt_schedule lowered;
  REQUIRE(kt_schedule_lower(&s, &lowered, &err) == KT_OK);
  for (int low = 0; low < 2; low++) {
    REQUIRE(kt_simulate(low ? &lowered : &s, &c, &t, &err) == KT_OK);
    CHECK_NEAR(find(&t, 0, KT_OP_F, 1)->start, 1.25, 1e-12);
    CHECK_NEAR(find(&t, 1, KT_OP_F, 1)->start, 4.75, 1e-12);
    CHECK_NEAR(find(&t, 0, KT_OP_B, 0)->start, 5.0, 1e-12);
    CHECK_NEAR(find(&t, 0, KT_OP_B, 1)->start, 8.25, 1e-12);
    REQUIRE(kt_timeline_metrics(&t, &m, &err) == KT_OK);
    CHECK_NEAR(m.makespan, 10.25, 1e-12);
    CHECK_NEAR(m.ranks[0].busy, 6.0, 1e-12); /* posting a send is not compute */
    kt_metrics_free(&m);
    REQUIRE(kt_simulate_metrics(low ? &lowered : &s, &c, &m, &err) == KT_OK);
    CHECK_NEAR(m.makespan, 10.25, 1e-12);
    kt_metrics_free(&m);
    kt_timeline_free(&t);
  }
  c.send_overhead = 0;
  kt_schedule_free(&lowered);
  kt_schedule_free(&s);

  /* an op overhead of 0.5 on every action (F 1.5, B 2.5; by hand): rank 1
   * runs F0 2-3.5, B0 3.5-6, F1 6-7.5, B1 7.5-10; rank 0's B1 waits for
   * rank 1's B1 + 0.5 and ends at 13; kt_gen_period leaves its fast path
   * for it and agrees */
  s = gen(KT_SCHED_1F1B, 2, 2);
  c.op_overhead = 0.5;
  REQUIRE(kt_simulate(&s, &c, &t, &err) == KT_OK);
  CHECK_NEAR(find(&t, 1, KT_OP_F, 1)->start, 6.0, 1e-12);
  CHECK_NEAR(find(&t, 0, KT_OP_B, 1)->start, 10.5, 1e-12);
  CHECK_NEAR(kt_cost_op(&c, 0, KT_OP_B), 2.5, 1e-12);
  REQUIRE(kt_timeline_metrics(&t, &m, &err) == KT_OK);
  CHECK_NEAR(m.makespan, 13.0, 1e-12);
  CHECK_NEAR(m.ranks[0].busy, 8.0, 1e-12);
  double span, total;
  REQUIRE(kt_gen_period(&s, &c, &span, &total, &err) == KT_OK);
  CHECK_NEAR(span, 13.0, 1e-12);
  CHECK_NEAR(total, 16.0, 1e-12);
  kt_metrics_free(&m);
  kt_timeline_free(&t);
  c.op_overhead = 0;
  kt_schedule_free(&s);

  /* gpipe P=3 M=2, T_F=2, T_B=1, T_W=1, T_comm=1 */
  s = gen(KT_SCHED_GPIPE, 3, 2);
  c.tf = 2, c.tb = 1, c.tw = 1, c.comm = 1;
  REQUIRE(kt_simulate_metrics(&s, &c, &m, &err) == KT_OK);
  CHECK_NEAR(m.makespan, 20.0, 1e-12);
  CHECK_NEAR(m.bubble_ratio, 0.6, 1e-12);
  CHECK_NEAR(m.ranks[2].start, 6.0, 1e-12);
  CHECK_NEAR(m.ranks[2].end, 14.0, 1e-12);
  kt_metrics_free(&m);
  /* the same hop time from latency + bytes / bandwidth */
  c.comm = 0, c.comm_latency = 0.25, c.comm_bytes = 3000, c.comm_bandwidth = 4000;
  REQUIRE(kt_simulate_metrics(&s, &c, &m, &err) == KT_OK);
  CHECK_NEAR(m.makespan, 20.0, 1e-12);
  kt_metrics_free(&m);
  kt_schedule_free(&s);

  /* per-stage costs: P=2 M=1, T_F = [1, 3] */
  s = gen(KT_SCHED_1F1B, 2, 1);
  kt_costs_default(&c);
  REQUIRE(kt_costs_set(&c, "tf", "1,3", &err) == KT_OK);
  REQUIRE(kt_simulate_metrics(&s, &c, &m, &err) == KT_OK);
  CHECK_NEAR(m.makespan, 8.0, 1e-12);
  kt_metrics_free(&m);
  /* per-stage list of the wrong length is rejected */
  REQUIRE(kt_costs_set(&c, "tb", "1,2,3", &err) == KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "3 stages");
  kt_costs_free(&c);
  kt_costs_default(&c);
  REQUIRE(kt_costs_set(&c, "tf", "1,2,3", &err) == KT_OK);
  CHECK(kt_simulate_metrics(&s, &c, &m, &err) == KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "S=2");
  CHECK(kt_costs_set(&c, "tf", "1,x", &err) == KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "'x'");
  CHECK(kt_costs_set(&c, "tw", "-1", &err) == KT_EINVAL);
  kt_costs_free(&c);
  kt_schedule_free(&s);

  /* memory: F adds M_B, I turns it into M_W, W frees M_W */
  s = parse("0F0 0F1 0I0 0W0 0I1 0W1\n");
  kt_costs_default(&c);
  c.mem_act = 10, c.mem_wgrad = 1;
  REQUIRE(kt_simulate(&s, &c, &t, &err) == KT_OK);
  REQUIRE(kt_timeline_metrics(&t, &m, &err) == KT_OK);
  CHECK_NEAR(m.ranks[0].peak_memory, 20, 1e-12);
  CHECK_EQ_INT(m.ranks[0].peak_inflight, 2);
  CHECK_NEAR(t.mem[t.n_mem - 1].value, 0, 1e-12); /* all freed at the end */
  CHECK_NEAR(find(&t, 0, KT_OP_W, 1)->end, 6, 1e-12);
  kt_metrics_free(&m);
  kt_timeline_free(&t);
  kt_schedule_free(&s);

  /* deadlock: rank 0 waits for rank 1's backward, rank 1 for rank 0's forward */
  s = parse("0F0 0B0 0F1 0B1\n1F0 1F1 1B0 1B1\n");
  CHECK(kt_simulate(&s, NULL, &t, &err) == KT_EDEADLOCK);
  CHECK_STR_CONTAINS(err.msg, "rank 0 waits at 0B0 for 1B0");
  CHECK_STR_CONTAINS(err.msg, "rank 1 waits at 1F1 for 0F1 (rank 0)");
  kt_schedule_free(&s);

  /* bubble ratio definition on a rank that starts late */
  s = gen(KT_SCHED_1F1B, 4, 8);
  REQUIRE(kt_simulate_metrics(&s, NULL, &m, &err) == KT_OK);
  CHECK_NEAR(m.makespan, 33, 1e-12);
  double busy = 0;
  for (int r = 0; r < 4; r++) busy += m.ranks[r].busy;
  CHECK_NEAR(m.bubble_ratio, 1 - busy / (4 * m.makespan), 1e-12);
  kt_metrics_free(&m);
  kt_schedule_free(&s);
  return kt_test_done(__FILE__);
}
