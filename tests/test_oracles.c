/* kaiten's schedules against the zero-bubble authors' own schedulers
 * (tests/data/oracles, described in their README): every row of their
 * automatic heuristic and of their V-shape schedules (V-Min, V-Half, V-ZB).
 * Their orders simulate to their makespans under kaiten's simulator; kaiten's
 * zb-auto, v-min, v-half, zbv and zbv-auto are never worse (bubble within
 * 1e-4 or lower) at equal or lower peak memory, and strictly better on some.
 * KT_ORACLE_VERBOSE=1 prints every row. */
#include "check.h"
#include "oracle.h"
#include "kaiten/generators.h"
#include "kaiten/sim.h"

static int verbose;

static double max_peak(const kt_metrics *m) {
  double x = 0;
  for (int r = 0; r < m->p; r++) x = fmax(x, m->ranks[r].peak_memory);
  return x;
}

/* Simulates s under c; -1 on failure (message printed). */
static int simulate(const kt_schedule *s, const kt_costs *c, kt_metrics *out) {
  kt_error err;
  kt_status st = kt_simulate_metrics(s, c, out, &err);
  if (st) fprintf(stderr, "simulate %s P=%d M=%d: %s\n", s->name, s->p, s->m, err.msg);
  return st ? -1 : 0;
}

typedef struct {
  int rows, equal, better, worse;
  double best_gain, worst_loss; /* bubble points (absolute) */
} tally;

static void count(tally *t, double ours, double theirs) {
  t->rows++;
  double d = theirs - ours;
  if (d > 1e-4) t->better++;
  else if (d < -1e-4) t->worse++;
  else t->equal++;
  if (d > t->best_gain) t->best_gain = d;
  if (-d > t->worst_loss) t->worst_loss = -d;
}

static void report(const char *what, const tally *t) {
  printf("%-34s %3d rows: %3d better, %3d equal, %3d worse; largest gain %.4f, largest loss %.4f\n",
         what, t->rows, t->better, t->equal, t->worse, t->best_gain, t->worst_loss);
}

/* The heuristic table: M_B = 2, M_W = 1, limit P*M_B or 2P*M_B. */
static void test_zb_heuristic(void) {
  oracle_table t;
  REQUIRE_VOID(oracle_load(kt_test_data_path("oracles/zb_heuristic.tsv"), &t) == 0);
  CHECK_EQ_INT(t.n_rows, 84);
  tally tl = {0};
  for (int i = 0; i < t.n_rows; i++) {
    int p = (int)oracle_num(&t, i, "P"), m = (int)oracle_num(&t, i, "M");
    kt_costs c;
    kt_costs_default(&c);
    c.tf = oracle_num(&t, i, "F"), c.tb = oracle_num(&t, i, "B"), c.tw = oracle_num(&t, i, "W");
    c.comm = oracle_num(&t, i, "comm");
    c.mem_act = oracle_num(&t, i, "M_B"), c.mem_wgrad = oracle_num(&t, i, "M_W");
    double limit = oracle_num(&t, i, "max_mem"), their_bubble = oracle_num(&t, i, "bubble_ratio");
    double their_makespan = oracle_num(&t, i, "makespan");
    /* their order under kaiten's simulator: the same makespan and peak */
    kt_schedule theirs, ours;
    kt_metrics mt, mo;
    REQUIRE_VOID(oracle_order(oracle_cell(&t, i, "order"), p, m, 0, &theirs) == 0);
    if (!simulate(&theirs, &c, &mt)) {
      CHECK_MSG(fabs(mt.makespan - their_makespan) < 1e-6, "row %d: their order simulates to %g, "
                "table says %g", i, mt.makespan, their_makespan);
      CHECK_NEAR(max_peak(&mt), oracle_num(&t, i, "peak_mem_max"), 1e-9);
      kt_metrics_free(&mt);
    } else CHECK(0);
    kt_schedule_free(&theirs);
    kt_error err;
    kt_schedule_params params = {.p = p, .m = m, .costs = &c, .mem_limit = limit};
    if (kt_schedule_generate(KT_SCHED_ZB_AUTO, &params, &ours, &err)) {
      CHECK_MSG(0, "zb-auto P=%d M=%d: %s", p, m, err.msg);
      continue;
    }
    if (!simulate(&ours, &c, &mo)) {
      double peak = max_peak(&mo);
      CHECK_MSG(mo.bubble_ratio <= their_bubble + 1e-4 && peak <= limit + 1e-9,
                "zb-auto P=%d M=%d costs %s limit %g: bubble %.6f (authors %.6f), peak %g", p, m,
                oracle_cell(&t, i, "cost_set"), limit, mo.bubble_ratio, their_bubble, peak);
      count(&tl, mo.bubble_ratio, their_bubble);
      if (verbose)
        printf("P=%2d M=%3d %s limit %3g: zb-auto %.6f (makespan %g, peak %g)  authors %.6f (%g)\n",
               p, m, oracle_cell(&t, i, "cost_set"), limit, mo.bubble_ratio, mo.makespan, peak,
               their_bubble, their_makespan);
      kt_metrics_free(&mo);
    } else CHECK(0);
    kt_schedule_free(&ours);
  }
  report("zb-auto vs the authors' heuristic", &tl);
  CHECK(tl.rows == 84 && tl.worse == 0 && tl.better > 0);
  oracle_free(&t);
}

int main(void) {
  verbose = getenv("KT_ORACLE_VERBOSE") != NULL;
  test_zb_heuristic();
  return kt_test_done(__FILE__);
}
