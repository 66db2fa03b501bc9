/* The simulation on two threads (src/sim/par.c) gives the one-thread
 * run's answer bit for bit: every rank's start, end, busy time, peak
 * memory and in-flight pairs, the makespan, period and bubble, over
 * generators, per-micro-batch costs, comm latency per link, overlapped
 * groups and per-action times; and a schedule that deadlocks is reported
 * as the one-thread run reports it. Run under ThreadSanitizer by `make
 * tsan` (label threads). */
#include "check.h"
#include "kaiten/generators.h"
#include "kaiten/sim.h"
#include "sim/state.h"

/* The metrics of s under c, on one thread or (when the schedule allows) two. */
static kt_status metrics(const kt_schedule *s, const kt_costs *c, int two, kt_metrics *m,
                         kt_error *err) {
  kt__sim_par_min_actions = two ? 0 : SIZE_MAX;
  kt__sim_par_min_ranks = 2;
  size_t before = atomic_load(&kt__sim_par_runs);
  kt_status st = kt_simulate_metrics(s, c, m, err);
  int lowered = 0;
  for (int r = 0; r < s->p; r++)
    for (size_t i = 0; i < s->ranks[r].n; i++) lowered |= kt_op_is_p2p(s->ranks[r].actions[i].op);
  if (two && !st) /* a lowered program runs on one thread */
    CHECK_MSG((atomic_load(&kt__sim_par_runs) > before) == !lowered, "two threads %s",
              lowered ? "used on a lowered program" : "not used");
  return st;
}

static int same_rank(const kt_rank_metrics *a, const kt_rank_metrics *b) {
  return a->rank == b->rank && a->start == b->start && a->end == b->end && a->busy == b->busy &&
         a->idle == b->idle && a->peak_memory == b->peak_memory &&
         a->peak_inflight == b->peak_inflight && a->actions == b->actions &&
         a->bytes_sent == b->bytes_sent && a->comm_time == b->comm_time;
}

static void compare(const kt_schedule *s, const kt_costs *c, const char *what) {
  kt_metrics one, two;
  kt_error err = {{0}};
  CHECK_MSG(!metrics(s, c, 0, &one, &err), "%s: %s", what, err.msg);
  CHECK_MSG(!metrics(s, c, 1, &two, &err), "%s (two threads): %s", what, err.msg);
  CHECK_MSG(one.makespan == two.makespan && one.period == two.period &&
                one.bubble_ratio == two.bubble_ratio && one.span == two.span &&
                one.total_busy == two.total_busy && one.p == two.p,
            "%s: makespan %.17g/%.17g period %.17g/%.17g bubble %.17g/%.17g", what, one.makespan,
            two.makespan, one.period, two.period, one.bubble_ratio, two.bubble_ratio);
  int differ = 0;
  for (int r = 0; r < one.p && r < two.p; r++) differ += !same_rank(&one.ranks[r], &two.ranks[r]);
  CHECK_MSG(differ == 0, "%s: %d of %d ranks differ", what, differ, one.p);
  CHECK_MSG(one.makespan > 0, "%s: nothing ran", what);
  kt_metrics_free(&one);
  kt_metrics_free(&two);
}

static void generated(kt_gen_kind kind, int p, int m, const kt_costs *c, const char *costs) {
  int v = kt_gen_default_chunks(kind);
  kt_gen_params gp = {.p = p, .m = m, .v = v < 1 ? 1 : v, .costs = c};
  kt_schedule s;
  kt_error err = {{0}};
  CHECK_MSG(!kt_generate(kind, &gp, &s, &err), "%s: %s", kt_gen_kind_name(kind), err.msg);
  char what[128];
  snprintf(what, sizeof what, "%s P=%d M=%d %s", kt_gen_kind_name(kind), p, m, costs);
  compare(&s, c, what);
  kt_schedule_free(&s);
}

/* Every generator under costs c, at sizes that split unevenly too. */
static void every_kind(const kt_costs *c, const char *costs) {
  const kt_gen_kind kinds[] = {KT_SCHED_1F1B,  KT_SCHED_GPIPE, KT_SCHED_INTERLEAVED, KT_SCHED_ZB_H1,
                               KT_SCHED_ZB_H2, KT_SCHED_ZBV,   KT_SCHED_DUALPIPEV};
  for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) generated(kinds[k], 8, 48, c, costs);
  generated(KT_SCHED_1F1B, 2, 64, c, costs);
  generated(KT_SCHED_1F1B, 5, 40, c, costs);
}

/* Per-micro-batch costs, a latency per link, per-action times. */
static void varied(const kt_costs *base) {
  enum { P = 8, M = 48 };
  kt_costs c;
  kt_error err = {{0}};
  CHECK(!kt_costs_copy(&c, base));
  double tf[P * M], tb[P * M];
  for (int i = 0; i < P * M; i++)
    tf[i] = 0.5 + (i * 7 % 11) * 0.13, tb[i] = 1 + (i * 5 % 13) * 0.11;
  CHECK_MSG(!kt_costs_set_mb(&c, "tf", tf, P, M, &err), "%s", err.msg);
  CHECK_MSG(!kt_costs_set_mb(&c, "tb", tb, P, M, &err), "%s", err.msg);
  generated(KT_SCHED_1F1B, P, M, &c, "per micro-batch");
  generated(KT_SCHED_ZB_H1, P, M, &c, "per micro-batch");
  kt_costs_free(&c);
  CHECK(!kt_costs_copy(&c, base));
  CHECK_MSG(!kt_costs_links_for(&c, P, &err), "%s", err.msg);
  for (int l = 0; l < c.n_links; l++) c.link_comm[l] = 0.05 + 0.3 * (l % 3);
  generated(KT_SCHED_1F1B, P, M, &c, "per link");
  generated(KT_SCHED_INTERLEAVED, P, M, &c, "per link");
  kt_costs_free(&c);
  /* each action its own duration */
  kt_gen_params gp = {.p = P, .m = M, .v = 1, .costs = base};
  kt_schedule s;
  CHECK(!kt_generate(KT_SCHED_1F1B, &gp, &s, &err));
  size_t n = kt_schedule_total_actions(&s);
  double *t = malloc(n * sizeof *t);
  CHECK(t != NULL);
  for (size_t i = 0; t && i < n; i++) t[i] = 0.25 + (double)(i * 37 % 101) / 50;
  CHECK(!kt_costs_copy(&c, base));
  c.action_time = t;
  compare(&s, &c, "1F1B per-action times");
  kt_costs_free(&c);
  free(t);
  kt_schedule_free(&s);
}

/* 1F1B on 4 ranks (two a half) where rank `at` runs B(8) before F(8),
 * which B(8) waits for through the ranks after it: a deadlock across the
 * halves (at 1) or within the second (at 2). Reported with the one-thread
 * run's words. */
static void deadlock(int at) {
  kt_gen_params gp = {.p = 4, .m = 32, .v = 1};
  kt_schedule s;
  kt_error err = {{0}}, err2 = {{0}};
  CHECK(!kt_generate(KT_SCHED_1F1B, &gp, &s, &err));
  kt_action *a = s.ranks[at].actions;
  size_t f = 0, b = 0;
  while (f < s.ranks[at].n && !(a[f].op == KT_OP_F && a[f].mb == 8)) f++;
  while (b < s.ranks[at].n && !(a[b].op == KT_OP_B && a[b].mb == 8)) b++;
  CHECK(f < b && b < s.ranks[at].n);
  for (size_t i = b; i > f && b < s.ranks[at].n; i--) { /* B(8) moved before F(8) */
    kt_action x = a[i];
    a[i] = a[i - 1], a[i - 1] = x;
  }
  kt_metrics m;
  kt__sim_par_min_actions = SIZE_MAX;
  CHECK(kt_simulate_metrics(&s, NULL, &m, &err) == KT_EDEADLOCK);
  kt__sim_par_min_actions = 0, kt__sim_par_min_ranks = 2;
  size_t before = atomic_load(&kt__sim_par_runs);
  CHECK(kt_simulate_metrics(&s, NULL, &m, &err2) == KT_EDEADLOCK);
  CHECK(atomic_load(&kt__sim_par_runs) == before); /* none ran to the end */
  CHECK_STR_EQ(err2.msg, err.msg);
  CHECK_STR_CONTAINS(err.msg, "waits");
  kt_schedule_free(&s);
}

/* What the two-thread attempt hands to the one-thread run: an action
 * outside the schedule (the same error) and a lowered program (its
 * answer, which two threads do not run). */
static void handed_over(void) {
  kt_gen_params gp = {.p = 4, .m = 32, .v = 1};
  kt_schedule s, low;
  kt_error err = {{0}}, err2 = {{0}};
  CHECK(!kt_generate(KT_SCHED_1F1B, &gp, &s, &err));
  CHECK(!kt_schedule_lower(&s, &low, &err));
  compare(&low, NULL, "1F1B lowered");
  kt_schedule_free(&low);
  s.ranks[3].actions[40].mb = 99; /* in the second half */
  kt_metrics m;
  kt__sim_par_min_actions = SIZE_MAX;
  CHECK(kt_simulate_metrics(&s, NULL, &m, &err) == KT_EINVALID_SCHEDULE);
  kt__sim_par_min_actions = 0, kt__sim_par_min_ranks = 2;
  CHECK(kt_simulate_metrics(&s, NULL, &m, &err2) == KT_EINVALID_SCHEDULE);
  CHECK_STR_EQ(err2.msg, err.msg);
  CHECK_STR_CONTAINS(err.msg, "rank 3 runs");
  kt_schedule_free(&s);
}

/* 1F1B's order at a size its second thread writes half of (2^20
 * actions): every rank's list as the rule says. */
static void order_two_threads(void) {
  kt_gen_params gp = {.p = 64, .m = 8192, .v = 1};
  kt_schedule s;
  kt_error err = {{0}};
  CHECK(!kt_generate(KT_SCHED_1F1B, &gp, &s, &err));
  size_t wrong = 0;
  for (int r = 0; r < s.p; r++) {
    int warm = s.p - 1 - r;
    size_t k = 0;
    const kt_action *a = s.ranks[r].actions;
    wrong += s.ranks[r].n != 2 * (size_t)s.m;
    for (int i = 0; i < 2 * s.m && k < s.ranks[r].n; i++, k++) {
      /* warm-up forwards, then forward and backward in turn, then the last backwards */
      int f = i < warm ? 1 : i >= 2 * s.m - warm ? 0 : (i - warm) % 2 == 0;
      int mb = i < warm              ? i
               : i >= 2 * s.m - warm ? s.m - (2 * s.m - i)
               : f                   ? warm + (i - warm) / 2
                                     : (i - warm) / 2;
      wrong += a[k].stage != r || a[k].op != (f ? KT_OP_F : KT_OP_B) || a[k].mb != mb;
    }
  }
  CHECK_MSG(wrong == 0, "%zu actions of 1F1B P=64 M=8192 out of place", wrong);
  kt_schedule_free(&s);
}

/* Two threads by default only where each half has enough ranks to run
 * between exchanges. */
static void by_default(void) {
  const struct { int p, m, two; } cases[] = {{8, 16384, 0}, {512, 4096, 1}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    kt_gen_params gp = {.p = cases[i].p, .m = cases[i].m, .v = 1};
    kt_schedule s;
    kt_error err = {{0}};
    CHECK(!kt_generate(KT_SCHED_1F1B, &gp, &s, &err));
    CHECK_MSG(kt__sim_par_wanted(&s) == cases[i].two, "P=%d M=%d", cases[i].p, cases[i].m);
    kt_schedule_free(&s);
  }
}

int main(void) {
  by_default(); /* (before the tests below lower the thresholds) */
  kt_costs c;
  kt_costs_default(&c);
  every_kind(&c, "unit costs");
  c.comm = 0.25, c.tf = 1.1, c.tb = 1.7, c.tw = 0.6, c.mem_wgrad = 0.5, c.mem_transient = 0.3;
  c.send_overhead = 0.01, c.op_overhead = 0.02, c.overlap = 0.5;
  every_kind(&c, "comm 0.25");
  c.step_sync = KT_STEP_OVERLAP, c.t_dp = 0.7, c.tu = 0.4; /* the period from steps back to back */
  generated(KT_SCHED_ZB_H1, 8, 48, &c, "overlapped steps");
  varied(&c);
  deadlock(1);
  deadlock(2);
  handed_over();
  order_two_threads();
  return kt_test_done(__FILE__);
}
