/* One simulator: kt_gen_period (the planner's and the searches' timing)
 * gives kt_simulate's figures on random orders and costs, through its fast
 * path and through the simulator alike, and reports a deadlock as the
 * simulator does. */
#include "check.h"
#include "kaiten/generators.h"
#include "kaiten/schedule.h"
#include "kaiten/sim.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static uint64_t rnext(void) { /* xorshift64*, deterministic */
  rng_state ^= rng_state >> 12, rng_state ^= rng_state << 25, rng_state ^= rng_state >> 27;
  return rng_state * 2685821657736338717ull;
}
static double urand(double lo, double hi) {
  return lo + (hi - lo) * (double)(rnext() >> 11) / 9007199254740992.0;
}

/* Random per-stage costs for S stages (some W free), a random hop. */
static void random_costs(kt_costs *c, int S, double *buf) {
  kt_costs_default(c);
  c->n_stages = S;
  c->stage_tf = buf, c->stage_tb = buf + S, c->stage_tw = buf + 2 * S;
  for (int i = 0; i < S; i++) {
    buf[i] = urand(0.2, 2);
    buf[S + i] = urand(0.2, 2.5);
    buf[2 * S + i] = urand(0, 1) < 0.2 ? 0 : urand(0.1, 2);
  }
  c->comm = urand(0, 1) < 0.3 ? 0 : urand(0, 0.8);
  /* the step's end: its sync, an update, the norm's all-reduce */
  c->step_sync = urand(0, 1) < 0.3 ? KT_STEP_BARRIER : KT_STEP_OVERLAP;
  c->tu = urand(0, 1) < 0.5 ? 0 : urand(0, 1);
  c->t_norm = urand(0, 0.5);
}

/* The simulator's period and busy time (the events' own). */
static kt_status simulated(const kt_schedule *s, const kt_costs *c, double *period, double *busy,
                           kt_error *err) {
  kt_timeline tl;
  kt_metrics m;
  kt_status st = kt_simulate_both(s, c, &tl, &m, err);
  if (st) return st;
  double total = 0;
  for (size_t i = 0; i < tl.n_events; i++) total += tl.events[i].end - tl.events[i].start;
  *period = m.period;
  *busy = total;
  kt_metrics_free(&m);
  kt_timeline_free(&tl);
  return KT_OK;
}

static int compared, deadlocks;

/* Both agree: the same status and, when it ran, the same figures. */
static void agree(const kt_schedule *s, const kt_costs *c, const char *what) {
  kt_error e1, e2;
  double span = -1, busy = -1, sspan = -1, sbusy = -1;
  kt_status a = kt_gen_period(s, c, &span, &busy, &e1);
  kt_status b = simulated(s, c, &sspan, &sbusy, &e2);
  compared++;
  CHECK_MSG(a == b, "%s: period status %d (%s), simulator %d (%s)", what, a, a ? e1.msg : "", b,
            b ? e2.msg : "");
  if (a == KT_EDEADLOCK && b == KT_EDEADLOCK) {
    deadlocks++;
    CHECK_MSG(!strcmp(e1.msg, e2.msg), "%s: deadlock reports differ: '%s' vs '%s'", what, e1.msg,
              e2.msg);
  }
  if (a || b) return;
  CHECK_MSG(fabs(span - sspan) <= 1e-9 * fmax(1, sspan), "%s: period %.12g, simulator %.12g", what,
            span, sspan);
  CHECK_MSG(fabs(busy - sbusy) <= 1e-9 * fmax(1, sbusy), "%s: busy %.12g, simulator %.12g", what,
            busy, sbusy);
}

/* Swaps two random actions of one rank (the order may then deadlock). */
static void shuffle_one_rank(kt_schedule *s) {
  int r = (int)(rnext() % (uint64_t)s->p);
  size_t n = s->ranks[r].n;
  if (n < 2) return;
  size_t i = rnext() % n, j = rnext() % n;
  kt_action t = s->ranks[r].actions[i];
  s->ranks[r].actions[i] = s->ranks[r].actions[j];
  s->ranks[r].actions[j] = t;
}

static void random_orders(void) {
  const kt_gen_kind kinds[] = {KT_SCHED_GPIPE,     KT_SCHED_1F1B,    KT_SCHED_INTERLEAVED,
                               KT_SCHED_ZB_H1,     KT_SCHED_ZB_H2,   KT_SCHED_ZBV,
                               KT_SCHED_DUALPIPEV, KT_SCHED_ZB_AUTO, KT_SCHED_V_HALF};
  double buf[3 * 64];
  for (int trial = 0; trial < 60; trial++) {
    kt_gen_kind kind = kinds[trial % (int)(sizeof kinds / sizeof *kinds)];
    int p = 2 + (int)(rnext() % 3), m = 2 * p + (int)(rnext() % 4);
    kt_gen_params params = {.p = p, .m = m};
    kt_schedule s;
    kt_error err;
    if (kt_generate(kind, &params, &s, &err)) {
      CHECK_MSG(0, "generate %s P=%d M=%d: %s", kt_gen_kind_name(kind), p, m, err.msg);
      continue;
    }
    kt_costs c;
    random_costs(&c, kt_schedule_stages(&s), buf);
    char what[96];
    snprintf(what, sizeof what, "%s P=%d M=%d", s.name, p, m);
    agree(&s, &c, what); /* the fast path (the simulator for dualpipev's pairs) */
    c.send_overhead = urand(0.01, 0.2);
    snprintf(what, sizeof what, "%s P=%d M=%d send overhead", s.name, p, m);
    agree(&s, &c, what); /* the simulator */
    c.send_overhead = 0;
    for (int k = 0; k < 3; k++) {
      shuffle_one_rank(&s);
      snprintf(what, sizeof what, "%s P=%d M=%d shuffled %d", s.name, p, m, k + 1);
      agree(&s, &c, what);
    }
    kt_schedule_free(&s);
  }
  CHECK(compared >= 300);
  CHECK_MSG(deadlocks >= 10, "only %d shuffled orders deadlocked: the check above is weak",
            deadlocks);
}

/* On links the fast path does not apply: the span is the simulator's. */
static void on_links(void) {
  kt_error err;
  kt_schedule s;
  kt_gen_params params = {.p = 2, .m = 4};
  REQUIRE_VOID(kt_generate(KT_SCHED_1F1B, &params, &s, &err) == KT_OK);
  kt_link_classes lc = {.intra_latency = 0, .intra_bw = 1e9, .inter_latency = 0, .inter_bw = 1};
  kt_links *l;
  REQUIRE_VOID(kt_links_create(&lc, 2, 1, NULL, 1, &l, &err) == KT_OK);
  kt_costs c;
  kt_costs_default(&c);
  c.links = l;
  c.comm_bytes = 2;
  double span, busy, plain, plain_busy;
  CHECK(kt_gen_period(&s, &c, &span, &busy, &err) == KT_OK);
  agree(&s, &c, "1f1b on links");
  /* two ranks, one link each way that never carries two messages at once:
   * every hop takes its 2 s, as a plain 2 s hop does */
  c.links = NULL;
  c.comm = 2;
  CHECK(kt_gen_period(&s, &c, &plain, &plain_busy, &err) == KT_OK);
  CHECK_NEAR(span, plain, 1e-9);
  CHECK(span > 12 + 2); /* more than the compute and one hop */
  kt_links_destroy(l);
  kt_schedule_free(&s);
}

int main(void) {
  random_orders();
  on_links();
  return kt_test_done(__FILE__);
}
