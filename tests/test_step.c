/* What a step is (docs/schedules.md): the makespan of one step alone and
 * the period of a run.
 *
 * - every schedule (the 13 generators and optimal) on P in {2, 4, 8}, M in
 *   {P, 2P, 3P}: makespan = the events' last end - first start; the period
 *   without a barrier and step-end costs is the largest per-rank span (the
 *   zero-bubble paper's cost), and with a barrier the makespan;
 * - a barrier's period is the makespan plus the step's end (tie, data-parallel
 *   all-reduce, norm all-reduce, the slowest update);
 * - without a barrier the period equals the slope of steps simulated back to
 *   back (each rank released when its own update is done, the tie's
 *   exchange waited for), many more than the period's own iteration runs,
 *   on random orders, costs and step-end costs: the one-step bound where it
 *   is exact, and the iteration where it is not. */
#include "check.h"
#include "kaiten/generators.h"
#include "kaiten/sim.h"

static double urand(double lo, double hi) { return lo + (hi - lo) * (rand() / (RAND_MAX + 1.0)); }

static void events_span(const kt_timeline *t, double *lo, double *hi, double *span) {
  *lo = INFINITY, *hi = -INFINITY, *span = 0;
  double first[64], last[64];
  for (int r = 0; r < t->p; r++) first[r] = INFINITY, last[r] = -INFINITY;
  for (size_t i = 0; i < t->n_events; i++) {
    const kt_event *e = &t->events[i];
    *lo = fmin(*lo, e->start), *hi = fmax(*hi, e->end);
    first[e->rank] = fmin(first[e->rank], e->start), last[e->rank] = fmax(last[e->rank], e->end);
  }
  for (int r = 0; r < t->p; r++)
    if (last[r] > first[r]) *span = fmax(*span, last[r] - first[r]);
}

static int generate(int k, int p, int m, kt_schedule *s) {
  kt_error err = {{0}};
  if (k == KT_SCHED_COUNT) { /* optimal: a bounded search on the larger sizes */
    kt_gen_params params = {.p = p, .m = m, .v = 1};
    kt_optimal_opts o = {.time_limit = 5, .max_nodes = p * m > 16 ? 2000 : 0};
    kt_optimal_result res;
    return kt_gen_optimal(&params, KT_PLACEMENT_LOOP, &o, s, &res, &err) == KT_OK;
  }
  int v = kt_gen_default_chunks((kt_gen_kind)k);
  kt_gen_params params = {.p = p, .m = m, .v = v < 1 ? 1 : v};
  return kt_generate((kt_gen_kind)k, &params, s, &err) == KT_OK;
}

static void grid(void) {
  int ran = 0;
  for (int k = 0; k <= KT_SCHED_COUNT; k++)
    for (int p = 2; p <= 8; p *= 2)
      for (int f = 1; f <= 3; f++) {
        int m = f * p;
        kt_schedule s;
        if (!generate(k, p, m, &s)) continue; /* e.g. interleaved at M < P */
        const char *name = k == KT_SCHED_COUNT ? "optimal" : kt_gen_kind_name((kt_gen_kind)k);
        kt_timeline tl;
        kt_metrics met, bar;
        kt_error err = {{0}};
        kt_costs c;
        kt_costs_default(&c);
        CHECK_MSG(!kt_simulate_both(&s, &c, &tl, &met, &err), "%s: %s", name, err.msg);
        double lo, hi, span;
        events_span(&tl, &lo, &hi, &span);
        CHECK_MSG(fabs(met.makespan - (hi - lo)) <= 1e-9 * (1 + hi),
                  "%s P=%d M=%d: makespan %g, events %g..%g", name, p, m, met.makespan, lo, hi);
        CHECK_MSG(fabs(met.period - span) <= 1e-9 * (1 + span) && met.step_sync == KT_STEP_OVERLAP,
                  "%s P=%d M=%d: period %g, largest rank span %g", name, p, m, met.period, span);
        CHECK_NEAR(met.span, span, 1e-9 * (1 + span));
        c.step_sync = KT_STEP_BARRIER;
        CHECK(!kt_simulate_metrics(&s, &c, &bar, &err));
        CHECK_MSG(fabs(bar.period - (hi - lo)) <= 1e-9 * (1 + hi),
                  "%s P=%d M=%d: barrier period %g", name, p, m, bar.period);
        CHECK_NEAR(bar.bubble_ratio, 1 - bar.total_busy / (p * bar.period), 1e-12);
        kt_metrics_free(&bar);
        kt_metrics_free(&met);
        kt_timeline_free(&tl);
        kt_schedule_free(&s);
        ran++;
      }
  CHECK_MSG(ran >= 14 * 9 - 12, "only %d grid cases ran", ran);
}

/* Random step-end costs on c (S stages). */
static void step_costs(kt_costs *c, int S, double *tu) {
  c->n_stages = S;
  for (int i = 0; i < S; i++) tu[i] = urand(0, 1) < 0.5 ? 0 : urand(0, 2);
  c->stage_tu = tu;
  c->t_dp = urand(0, 1) < 0.5 ? 0 : urand(0, 1);
  c->t_norm = urand(0, 1);
  c->tied = urand(0, 1) < 0.5, c->t_tie = urand(0, 1.5);
}

/* The barrier's period by hand. */
static double barrier_period(const kt_schedule *s, const kt_costs *c, const kt_metrics *m) {
  int S = kt_schedule_stages(s), a = kt_stage_rank(s, 0), b = kt_stage_rank(s, S - 1);
  double upd[64] = {0}, lo = INFINITY, top = -INFINITY, most = 0;
  for (int st = 0; st < S; st++) upd[kt_stage_rank(s, st)] += c->stage_tu[st];
  for (int r = 0; r < s->p; r++) {
    double end = m->ranks[r].end;
    if (c->tied && a != b && (r == a || r == b))
      end = fmax(m->ranks[a].end, m->ranks[b].end) + c->t_tie;
    lo = fmin(lo, m->ranks[r].start), top = fmax(top, end + c->t_dp), most = fmax(most, upd[r]);
  }
  return top + c->t_norm + most - lo;
}

/* Steps back to back without a barrier, `steps` of them: the slope of the
 * last half. */
static double slope(const kt_schedule *s, const kt_costs *c, int steps) {
  kt_step_model m;
  kt_error err = {{0}};
  if (kt_step_model_init(&m, s, c, &err)) return NAN;
  double rel[64] = {0}, end[64], mid[64] = {0};
  kt_costs run = *c;
  run.step_sync = KT_STEP_OVERLAP;
  for (int k = 0; k < steps; k++) {
    run.rank_release = rel;
    kt_metrics met;
    if (kt_simulate_metrics(s, &run, &met, &err)) return NAN;
    for (int r = 0; r < s->p; r++) end[r] = met.ranks[r].end;
    kt_metrics_free(&met);
    kt_step_model_ready(&m, end, rel);
    if (k == steps / 2 - 1) memcpy(mid, rel, sizeof mid);
  }
  kt_step_model_free(&m);
  return (rel[0] - mid[0]) / (steps - steps / 2);
}

static void random_steps(void) {
  static const kt_gen_kind kinds[] = {KT_SCHED_1F1B,        KT_SCHED_ZB_H1,     KT_SCHED_ZB_H2,
                                      KT_SCHED_ZBV,         KT_SCHED_ZB_AUTO,   KT_SCHED_V_HALF,
                                      KT_SCHED_INTERLEAVED, KT_SCHED_DUALPIPEV, KT_SCHED_GPIPE};
  int n = 0, iterated = 0;
  for (int trial = 0; trial < 240; trial++) {
    int k = kinds[trial % (sizeof kinds / sizeof *kinds)];
    int p = 2 + rand() % 4, m = p + rand() % (2 * p + 1), v = kt_gen_default_chunks(k);
    if (v < 1) v = 1;
    int S = p * v;
    double tf[64], tb[64], tw[64], tu[64];
    kt_costs c;
    kt_costs_default(&c);
    c.n_stages = S, c.stage_tf = tf, c.stage_tb = tb, c.stage_tw = tw;
    for (int i = 0; i < S; i++) tf[i] = urand(0.2, 2), tb[i] = urand(0.2, 2), tw[i] = urand(0.1, 2);
    c.comm = urand(0, 1) < 0.5 ? 0 : urand(0, 0.5);
    kt_gen_params params = {.p = p, .m = m, .v = v, .costs = &c};
    kt_schedule s;
    kt_error err = {{0}};
    step_costs(&c, S, tu); /* the generators search the period these describe */
    if (kt_generate(k, &params, &s, &err)) continue;
    kt_metrics met;
    CHECK_MSG(!kt_simulate_metrics(&s, &c, &met, &err), "%s", err.msg);
    kt_step_model model;
    CHECK(!kt_step_model_init(&model, &s, &c, &err));
    int exact;
    double bound = kt_step_model_bound(&model, &met, &exact);
    iterated += !exact;
    kt_step_model_free(&model);
    double want = slope(&s, &c, 400);
    CHECK_MSG(fabs(met.period - want) <= 1e-7 * (1 + want) && met.period <= bound + 1e-9 * bound,
              "%s P=%d M=%d: period %.12g, %d steps' slope %.12g, one-step bound %.12g%s",
              kt_gen_kind_name(k), p, m, met.period, 400, want, bound, exact ? " (exact)" : "");
    c.step_sync = KT_STEP_BARRIER;
    kt_metrics bar;
    CHECK(!kt_simulate_metrics(&s, &c, &bar, &err));
    double by_hand = barrier_period(&s, &c, &bar);
    CHECK_MSG(fabs(bar.period - by_hand) <= 1e-9 * (1 + by_hand),
              "%s: barrier period %g, by hand %g", kt_gen_kind_name(k), bar.period, by_hand);
    CHECK(bar.period >= met.period - 1e-9 * (1 + bar.period)); /* a barrier never helps */
    kt_metrics_free(&bar);
    kt_metrics_free(&met);
    kt_schedule_free(&s);
    n++;
  }
  CHECK_MSG(n >= 200, "only %d random cases ran", n);
  printf("random step cases: %d, of which %d needed steps back to back\n", n, iterated);
}

int main(void) {
  srand(44);
  grid();
  random_steps();
  return kt_test_done(__FILE__);
}
