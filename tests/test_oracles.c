/* kaiten's schedules against the zero-bubble authors' own schedulers
 * (tests/data/oracles, described in their README): every row of their
 * automatic heuristic and of their V-shape schedules (V-Min, V-Half, V-ZB).
 * Their orders simulate to their makespans under kaiten's simulator; kaiten's
 * zb-auto, v-min, v-half and zbv-auto are never worse (bubble within 1e-4
 * or lower) at equal or lower peak memory, and strictly better (lower by
 * more than 1e-4) on some: v-min and v-half on most unequal-cost rows,
 * zb-auto's thorough search on at least 9 rows; zbv, tuned to the row's
 * costs within its own memory, is never worse than V-ZB either, and
 * zbv-auto under tuned zbv's peak never slower than zbv.
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
  tally tl[2] = {{0}, {0}}; /* the default search, the thorough one */
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
      CHECK_MSG(fabs(mt.period - their_makespan) < 1e-6,
                "row %d: their order simulates to %g, "
                "table says %g",
                i, mt.period, their_makespan);
      CHECK_NEAR(max_peak(&mt), oracle_num(&t, i, "peak_mem_max"), 1e-9);
      kt_metrics_free(&mt);
    } else CHECK(0);
    kt_schedule_free(&theirs);
    for (int thorough = 0; thorough < 2; thorough++) {
      kt_error err;
      kt_gen_params params = {
          .p = p, .m = m, .costs = &c, .mem_limit = limit, .thorough = thorough};
      if (kt_generate(KT_SCHED_ZB_AUTO, &params, &ours, &err)) {
        CHECK_MSG(0, "zb-auto P=%d M=%d: %s", p, m, err.msg);
        continue;
      }
      if (!simulate(&ours, &c, &mo)) {
        double peak = max_peak(&mo);
        CHECK_MSG(mo.bubble_ratio <= their_bubble + 1e-4 && peak <= limit + 1e-9,
                  "zb-auto%s P=%d M=%d costs %s limit %g: bubble %.6f (authors %.6f), peak %g",
                  thorough ? " --thorough" : "", p, m, oracle_cell(&t, i, "cost_set"), limit,
                  mo.bubble_ratio, their_bubble, peak);
        count(&tl[thorough], mo.bubble_ratio, their_bubble);
        if (verbose)
          printf("P=%2d M=%3d %s limit %3g: zb-auto%s %.6f (makespan %g, peak %g)  authors %.6f "
                 "(%g)\n",
                 p, m, oracle_cell(&t, i, "cost_set"), limit, thorough ? " --thorough" : "",
                 mo.bubble_ratio, mo.period, peak, their_bubble, their_makespan);
        kt_metrics_free(&mo);
      } else CHECK(0);
      kt_schedule_free(&ours);
    }
  }
  report("zb-auto vs the authors' heuristic", &tl[0]);
  report("zb-auto --thorough vs the same", &tl[1]);
  /* never worse; the thorough search strictly better (by more than 1e-4 of
   * bubble) on 9 rows today, all at the 2P*M_B limit with unequal costs */
  CHECK(tl[0].rows == 84 && tl[0].worse == 0);
  CHECK(tl[1].rows == 84 && tl[1].worse == 0 && tl[1].better >= 9);
  oracle_free(&t);
}

/* Costs of one V row: F, B, W per chunk; memory in chunk units with
 * M_W = wgrad (0.5: the authors' peak_act; 1: their peak_pending_w). */
static void v_costs(const oracle_table *t, int i, double wgrad, kt_costs *c) {
  kt_costs_default(c);
  c->tf = oracle_num(t, i, "F"), c->tb = oracle_num(t, i, "B"), c->tw = oracle_num(t, i, "W");
  c->comm = oracle_num(t, i, "comm");
  c->mem_act = 1, c->mem_wgrad = wgrad;
}

/* Generates kind for row i with M_W = wgrad; bubble and peak under both
 * memory models. */
static int v_run(kt_gen_kind kind, const oracle_table *t, int i, double wgrad, double limit,
                 double *bubble, double peak[2]) {
  int p = (int)oracle_num(t, i, "P"), m = (int)oracle_num(t, i, "M");
  kt_costs c;
  v_costs(t, i, wgrad, &c);
  kt_schedule s;
  kt_error err;
  kt_gen_params params = {.p = p, .m = m, .costs = &c, .mem_limit = limit};
  if (kt_generate(kind, &params, &s, &err)) {
    fprintf(stderr, "%s P=%d M=%d: %s\n", kt_gen_kind_name(kind), p, m, err.msg);
    return -1;
  }
  int rc = 0;
  for (int k = 0; k < 2 && !rc; k++) {
    kt_metrics met;
    v_costs(t, i, k ? 1 : 0.5, &c);
    if ((rc = simulate(&s, &c, &met))) break;
    if (!k) *bubble = met.bubble_ratio;
    peak[k] = max_peak(&met);
    kt_metrics_free(&met);
  }
  kt_schedule_free(&s);
  return rc;
}

/* zbv-auto under the peak of zbv tuned to the same costs, in both memory
 * models (M_W = M_B / 2 and M_W = M_B): never slower, never above it. */
static void zbv_auto_at_zbv_peak(const oracle_table *t, int i, int *settings) {
  for (int k = 0; k < 2; k++) {
    double wgrad = k ? 1 : 0.5, fixed, fixed_peak[2], bubble, peak[2];
    if (v_run(KT_SCHED_ZBV, t, i, wgrad, 0, &fixed, fixed_peak) ||
        v_run(KT_SCHED_ZBV_AUTO, t, i, wgrad, fixed_peak[k], &bubble, peak)) {
      CHECK(0);
      continue;
    }
    /* the same work per rank: the bubbles order the makespans */
    CHECK_MSG(bubble <= fixed + 1e-9 && peak[k] <= fixed_peak[k] + 1e-9,
              "row %d, M_W = %g: zbv-auto at zbv's peak %g: bubble %.9f (zbv %.9f), peak %g", i,
              wgrad, fixed_peak[k], bubble, fixed, peak[k]);
    (*settings)++;
  }
}

/* A V-ZB row: zbv-auto under the authors' limit, and with M >= 2P zbv tuned
 * to the row's costs, then zbv-auto under tuned zbv's peak. */
static void zb_row(const oracle_table *t, int i, tally *zbv_auto, tally *zbv, int *at_zbv_peak,
                   double *bubble, double peak[2]) {
  int p = (int)oracle_num(t, i, "P"), m = (int)oracle_num(t, i, "M");
  const char *cs = oracle_cell(t, i, "cost_set");
  double their_bubble = oracle_num(t, i, "bubble_ratio"),
         their_peak = oracle_num(t, i, "peak_act_max");
  double limit = oracle_num(t, i, "mem_limit_chunks");
  if (!v_run(KT_SCHED_ZBV_AUTO, t, i, 0.5, limit, bubble, peak)) {
    CHECK_MSG(*bubble <= their_bubble + 1e-4 && peak[0] <= their_peak + 1e-9,
              "zbv-auto P=%d M=%d %s: bubble %.6f (authors %.6f), peak %g (authors %g)", p, m, cs,
              *bubble, their_bubble, peak[0], their_peak);
    count(zbv_auto, *bubble, their_bubble);
  } else CHECK(0);
  if (m < 2 * p) return; /* zbv takes M >= 2P */
  double fixed, fixed_peak[2];
  if (!v_run(KT_SCHED_ZBV, t, i, 0.5, 0, &fixed, fixed_peak)) {
    CHECK_MSG(fixed <= their_bubble + 1e-4 && fixed_peak[0] <= their_peak + 1e-9,
              "zbv P=%d M=%d %s: bubble %.6f (authors %.6f), peak %g (authors %g)", p, m, cs, fixed,
              their_bubble, fixed_peak[0], their_peak);
    count(zbv, fixed, their_bubble);
    if (verbose) printf("zb P=%2d M=%3d %s: zbv %.6f peak %g\n", p, m, cs, fixed, fixed_peak[0]);
  } else CHECK(0);
  zbv_auto_at_zbv_peak(t, i, at_zbv_peak);
}

/* The V table: V-Min, V-Half and V-ZB, two chunks per rank in v placement. */
static void test_v_schedules(void) {
  oracle_table t;
  REQUIRE_VOID(oracle_load(kt_test_data_path("oracles/v_schedules.tsv"), &t) == 0);
  CHECK_EQ_INT(t.n_rows, 81);
  tally zbv = {0}, zbv_auto = {0}, vmin = {0}, vhalf = {0}, vmin_u = {0}, vhalf_u = {0};
  int at_zbv_peak = 0; /* settings where zbv-auto ran at tuned zbv's peak */
  for (int i = 0; i < t.n_rows; i++) {
    int p = (int)oracle_num(&t, i, "P"), m = (int)oracle_num(&t, i, "M");
    const char *setup = oracle_cell(&t, i, "setup"), *cs = oracle_cell(&t, i, "cost_set");
    double their_bubble = oracle_num(&t, i, "bubble_ratio");
    double their_peak[2] = {oracle_num(&t, i, "peak_act_max"),
                            oracle_num(&t, i, "peak_pending_w_max")};
    kt_schedule theirs;
    kt_costs c;
    kt_metrics mt;
    v_costs(&t, i, 0.5, &c);
    REQUIRE_VOID(oracle_order(oracle_cell(&t, i, "order"), p, m, 1, &theirs) == 0);
    if (!simulate(&theirs, &c, &mt)) {
      CHECK_MSG(fabs(mt.period - oracle_num(&t, i, "makespan")) < 1e-6,
                "V row %d: their order simulates to %g", i, mt.period);
      CHECK_NEAR(max_peak(&mt), their_peak[0], 1e-9);
      kt_metrics_free(&mt);
    } else CHECK(0);
    kt_schedule_free(&theirs);
    double bubble, peak[2];
    int zb = !strcmp(setup, "zb"), balanced = !strcmp(cs, "a");
    if (zb) {
      zb_row(&t, i, &zbv_auto, &zbv, &at_zbv_peak, &bubble, peak);
    } else {
      kt_gen_kind kind = !strcmp(setup, "min") ? KT_SCHED_V_MIN : KT_SCHED_V_HALF;
      /* their model for these: a W frees the whole activation (M_W = M_B) */
      if (!v_run(kind, &t, i, 1, 0, &bubble, peak)) {
        int ok = peak[0] <= their_peak[0] + 1e-9 && peak[1] <= their_peak[1] + 1e-9 &&
                 bubble <= their_bubble + 1e-4;
        CHECK_MSG(ok, "%s P=%d M=%d %s: bubble %.6f (authors %.6f), peaks %g/%g (authors %g/%g)",
                  kt_gen_kind_name(kind), p, m, cs, bubble, their_bubble, peak[0], peak[1],
                  their_peak[0], their_peak[1]);
        count(
            kind == KT_SCHED_V_MIN ? (balanced ? &vmin : &vmin_u) : (balanced ? &vhalf : &vhalf_u),
            bubble, their_bubble);
      } else CHECK(0);
    }
    if (verbose && !zb)
      printf("%s P=%2d M=%3d %s: kaiten %.6f peaks %g/%g  authors %.6f peaks %g/%g\n", setup, p, m,
             cs, bubble, peak[0], peak[1], their_bubble, their_peak[0], their_peak[1]);
    else if (verbose)
      printf("zb P=%2d M=%3d %s: zbv-auto %.6f peak %g  authors %.6f\n", p, m, cs, bubble, peak[0],
             their_bubble);
  }
  report("zbv-auto vs V-ZB (zbv.py)", &zbv_auto);
  report("zbv vs V-ZB, M >= 2P", &zbv);
  report("v-min vs V-Min, balanced costs", &vmin);
  report("v-min vs V-Min, unequal costs", &vmin_u);
  report("v-half vs V-Half, balanced costs", &vhalf);
  report("v-half vs V-Half, unequal costs", &vhalf_u);
  CHECK(zbv_auto.rows == 27 && zbv_auto.worse == 0);
  CHECK(zbv.rows == 18 && zbv.worse == 0);
  CHECK_EQ_INT(at_zbv_peak, 36);
  CHECK(vmin.rows + vmin_u.rows == 27 && vhalf.rows + vhalf_u.rows == 27);
  /* with unequal costs the cost-aware search is strictly better on most
   * rows (14 and 13 of 18 today; its effort is capped at some sixty
   * evaluations so that it takes a tenth of the authors' time or less:
   * src/generators/zb_tune.c) */
  CHECK(vmin_u.rows == 18 && vhalf_u.rows == 18);
  CHECK(vmin_u.better >= 12 && vhalf_u.better >= 12);
  oracle_free(&t);
}

int main(void) {
  verbose = getenv("KT_ORACLE_VERBOSE") != NULL;
  test_zb_heuristic();
  test_v_schedules();
  return kt_test_done(__FILE__);
}
