/* The autopilot's detector on steps made by the simulator (P=4, 1F1B,
 * M=4; each op jittered by up to 0.5% so the calibration has noise): a
 * rank whose own ops grow 1.3x from step 8 is named one step later with
 * since 8; the same growth made of time its thread waited for a core
 * (ready_wait), more than the other ranks waited, is named only once it
 * lasts KT__CONFIRM_WAIT steps; when every rank waits alike, or the rank
 * is over for a single step, nothing is named; a link 0.6 op slower is
 * named one step after its onset, while hand-overs as much slower made of
 * the consumer's wait for a core name nothing; with more compute threads
 * than cores, own time that grows only as the rank's waits shrink (its
 * ops' wall time the same) names nothing, nor do two ranks slower at
 * once (threads placed anew on the cores), while a rank's own fault after
 * that is named. A real model's rank (its own
 * time is CPU time) is named after KT__CONFIRM_CPU steps, and a run with
 * more compute threads than cores names no rank for its waits. */
#include "check.h"
#include "kaiten/generators.h"
#include "kaiten/sim.h"
#include "train/autopilot.h"

#define P 4
#define STEPS 20
#define ONSET 8
#define LATER 14 /* PAIRED's second onset: rank 2's own fault */
#define OP 1.0

typedef enum { CLEAN, OWN, WAITED, ALL_WAIT, ONE_STEP, LINK, LINK_WAIT, SHIFT, PAIRED } scenario;

static kt_schedule sched;

/* A deterministic jitter in [-0.005, 0.005]. */
static double jitter(unsigned *state) {
  *state = *state * 1103515245u + 12345u;
  return ((*state >> 8) % 1001) / 1000.0 * 0.01 - 0.005;
}

/* One step of the scenario into t (simulated, then its ops changed). */
static int make_step(scenario sc, int step, unsigned *seed, kt_timeline *t) {
  kt_costs c;
  kt_error err;
  kt_costs_default(&c);
  c.tf = c.tb = c.tw = OP, c.comm = 0.01;
  int on = step >= ONSET && (sc != ONE_STEP || step == ONSET);
  if (kt_costs_links_for(&c, P, &err)) return -1;
  if (on && (sc == LINK || sc == LINK_WAIT)) c.link_delay[1] = 0.6 * OP;
  int bad = kt_simulate(&sched, &c, t, &err) != KT_OK;
  kt_costs_free(&c);
  if (bad) return fprintf(stderr, "%s\n", err.msg), -1;
  for (size_t i = 0; i < t->n_events; i++) {
    kt_event *e = &t->events[i];
    double d = (e->end - e->start) * (1 + jitter(seed)), extra = 0;
    e->cpu_time = d;
    if (on && e->rank == 2 && sc >= OWN && sc <= ONE_STEP) extra = 0.3 * d;
    if (sc == OWN || sc == ONE_STEP) e->cpu_time += extra; /* its own time grew */
    else e->ready_wait = extra;                            /* it waited for a core while it ran */
    if (on && sc == ALL_WAIT && e->rank != 2) e->ready_wait = 0.3 * d;
    if (sc == SHIFT) { /* every op waits 0.4 d; rank 2's own time takes 0.3 d of it */
      int moved = on && e->rank == 2;
      e->cpu_time = d + (moved ? 0.3 * d : 0), e->ready_wait = moved ? 0.1 * d : 0.4 * d;
      extra = 0.4 * d;
    }
    if (sc == PAIRED) { /* ranks 0 and 1 share a core from ONSET: own and wall time 1.4x;
                         * rank 2's own fault (1.3x) from LATER */
      extra = (on && e->rank < 2 ? 0.4 * d : 0) + (step >= LATER && e->rank == 2 ? 0.3 * d : 0);
      e->cpu_time = d + extra, e->ready_wait = 0;
    }
    e->end = e->start + d + extra;
  }
  /* the hand-overs across link 1-2 made of the consumer's wait for a core:
   * each consumer on the far side waited the delay before it started */
  for (size_t i = 0; on && sc == LINK_WAIT && i < t->n_events; i++)
    if (t->events[i].rank == 2 && t->events[i].op == KT_OP_F) t->events[i].ready_wait = 0.6 * OP;
    else if (t->events[i].rank == 1 && t->events[i].op != KT_OP_F)
      t->events[i].ready_wait = 0.6 * OP;
  return 0;
}

/* Runs the scenario; named[s] the fault named at step s (kind NONE: none).
 * confirm_own, name_waits: the detector's (0: its defaults). */
static int run_as(scenario sc, int confirm_own, int name_waits, kt_run_fault *named) {
  kt__detector d;
  kt_error err;
  unsigned seed = 7u + (unsigned)sc;
  if (kt__detector_init(&d, &sched, &err)) return -1;
  if (confirm_own) d.confirm_own = confirm_own;
  if (name_waits < 0) d.name_waits = 0;
  for (int step = 1; step <= STEPS; step++) {
    kt_timeline t;
    if (kt_timeline_init(&t, P, "s", "B") || make_step(sc, step, &seed, &t))
      return kt__detector_free(&d), -1;
    kt__detector_step(&d, &t, &sched, step);
    named[step] = d.fault;
    kt_timeline_free(&t);
  }
  kt__detector_free(&d);
  return 0;
}

static int run(scenario sc, kt_run_fault *named) { return run_as(sc, 0, 0, named); }

static int count_named(const kt_run_fault *named) {
  int n = 0;
  for (int s = 1; s <= STEPS; s++) n += named[s].kind != KT_FAULT_NONE;
  return n;
}

int main(void) {
  kt_error err;
  kt_gen_params gp = {.p = P, .m = 4};
  REQUIRE(kt_generate(KT_SCHED_1F1B, &gp, &sched, &err) == KT_OK);
  kt_run_fault f[STEPS + 1];

  REQUIRE(run(CLEAN, f) == 0);
  CHECK_EQ_INT(count_named(f), 0);

  REQUIRE(run(OWN, f) == 0); /* named one step after the onset */
  CHECK_EQ_INT(f[ONSET].kind, KT_FAULT_NONE);
  CHECK_EQ_INT(f[ONSET + 1].kind, KT_FAULT_RANK);
  CHECK_EQ_INT(f[ONSET + 1].rank, 2);
  CHECK_EQ_INT(f[ONSET + 1].since, ONSET);
  CHECK_NEAR(f[ONSET + 1].factor, 1.3, 0.03);
  CHECK_EQ_INT(f[STEPS].rank, 2);

  REQUIRE(run(WAITED, f) == 0); /* a core shared: named once it lasted KT__CONFIRM_WAIT steps */
  for (int s = 1; s < ONSET + KT__CONFIRM_WAIT - 1; s++) CHECK_EQ_INT(f[s].kind, KT_FAULT_NONE);
  CHECK_EQ_INT(f[ONSET + KT__CONFIRM_WAIT - 1].kind, KT_FAULT_RANK);
  CHECK_EQ_INT(f[ONSET + KT__CONFIRM_WAIT - 1].rank, 2);
  CHECK_EQ_INT(f[ONSET + KT__CONFIRM_WAIT - 1].since, ONSET);

  /* a real model's own (CPU) time: KT__CONFIRM_CPU steps; a run whose
   * compute threads outnumber its cores: waits name nothing */
  REQUIRE(run_as(OWN, KT__CONFIRM_CPU, 0, f) == 0);
  CHECK_EQ_INT(f[ONSET + KT__CONFIRM_CPU - 2].kind, KT_FAULT_NONE);
  CHECK_EQ_INT(f[ONSET + KT__CONFIRM_CPU - 1].kind, KT_FAULT_RANK);
  CHECK_EQ_INT(f[ONSET + KT__CONFIRM_CPU - 1].since, ONSET);
  REQUIRE(run_as(WAITED, 0, -1, f) == 0);
  CHECK_EQ_INT(count_named(f), 0);

  REQUIRE(run(ALL_WAIT, f) == 0); /* every rank waited alike: the machine, not a rank */
  CHECK_EQ_INT(count_named(f), 0);

  REQUIRE(run(ONE_STEP, f) == 0); /* a rank's ops over for one step only */
  CHECK_EQ_INT(count_named(f), 0);

  /* more compute threads than cores: own time up 1.3x as its waits
   * shrink, its ops' wall time the same (the scheduler's split of the
   * rank's time) is not slow; own time up with the wall time is */
  REQUIRE(run_as(SHIFT, KT__CONFIRM_CPU, -1, f) == 0);
  CHECK_EQ_INT(count_named(f), 0);
  REQUIRE(run_as(OWN, KT__CONFIRM_CPU, -1, f) == 0);
  CHECK_EQ_INT(f[ONSET + KT__CONFIRM_CPU - 2].kind, KT_FAULT_NONE);
  CHECK_EQ_INT(f[ONSET + KT__CONFIRM_CPU - 1].kind, KT_FAULT_RANK);
  CHECK_EQ_INT(f[ONSET + KT__CONFIRM_CPU - 1].rank, 2);

  /* more compute threads than cores: two ranks slower at once, own and
   * wall time, are threads the scheduler placed anew (nothing named, and
   * the new placement calibrated in), a rank's own fault after it is
   * named; with a core a rank, both ranks are named */
  REQUIRE(run_as(PAIRED, KT__CONFIRM_CPU, -1, f) == 0);
  for (int s = 1; s < LATER + KT__CONFIRM_CPU - 1; s++) CHECK_EQ_INT(f[s].kind, KT_FAULT_NONE);
  CHECK_EQ_INT(f[LATER + KT__CONFIRM_CPU - 1].kind, KT_FAULT_RANK);
  CHECK_EQ_INT(f[LATER + KT__CONFIRM_CPU - 1].rank, 2);
  CHECK_EQ_INT(f[LATER + KT__CONFIRM_CPU - 1].since, LATER);
  REQUIRE(run_as(PAIRED, KT__CONFIRM_CPU, 0, f) == 0);
  CHECK(f[ONSET + KT__CONFIRM_CPU - 1].kind == KT_FAULT_RANK &&
        f[ONSET + KT__CONFIRM_CPU - 1].rank < 2);

  REQUIRE(run(LINK, f) == 0);
  CHECK_EQ_INT(f[ONSET].kind, KT_FAULT_NONE);
  CHECK_EQ_INT(f[ONSET + 1].kind, KT_FAULT_LINK);
  CHECK_EQ_INT(f[ONSET + 1].a, 1);
  CHECK_EQ_INT(f[ONSET + 1].b, 2);
  CHECK_EQ_INT(f[ONSET + 1].since, ONSET);
  CHECK_NEAR(f[ONSET + 1].delay, 0.6 * OP, 0.05);

  REQUIRE(run(LINK_WAIT, f) == 0); /* the consumers' waits for a core: no link named */
  int links = 0;
  for (int s = 1; s <= STEPS; s++) links += f[s].kind == KT_FAULT_LINK;
  CHECK_EQ_INT(links, 0);

  kt_schedule_free(&sched);
  return kt_test_done(__FILE__);
}
