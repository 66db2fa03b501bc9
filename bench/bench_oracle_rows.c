/* kaiten in-process on each row of an oracle table (tests/data/oracles):
 * the schedule the row's authors' scheduler is compared with (zb-auto for
 * the heuristic table; v-min, v-half or zbv-auto for the V table) generated
 * and simulated, the median of REPS runs after a first one left out (it
 * warms the caches); one line per row, "index seconds bubble", or only row
 * ROW when given. bench/oracle_speed.py sets them beside the authors' times.
 * Usage: bench_oracle_rows TABLE.tsv [REPS] [ROW] */
#include <stdio.h>
#include <string.h>

#include "oracle.h"
#include "kaiten/generators.h"
#include "kaiten/sim.h"

/* Whether the table has a column named col. */
static int has_col(const oracle_table *t, const char *col) {
  for (int k = 0; k < t->n_cols; k++)
    if (!strcmp(t->header[k], col)) return 1;
  return 0;
}

/* One row's schedule and costs. */
static int row_setup(const oracle_table *t, int i, kt_gen_kind *kind, kt_gen_params *pp,
                     kt_costs *c) {
  kt_costs_default(c);
  c->tf = oracle_num(t, i, "F"), c->tb = oracle_num(t, i, "B"), c->tw = oracle_num(t, i, "W");
  c->comm = oracle_num(t, i, "comm");
  *pp =
      (kt_gen_params){.p = (int)oracle_num(t, i, "P"), .m = (int)oracle_num(t, i, "M"), .costs = c};
  const char *setup = has_col(t, "setup") ? oracle_cell(t, i, "setup") : NULL;
  if (!setup) { /* the heuristic table: M_B = 2, M_W = 1, its limit */
    c->mem_act = 2, c->mem_wgrad = 1;
    pp->mem_limit = oracle_num(t, i, "max_mem");
    *kind = KT_SCHED_ZB_AUTO;
    return 0;
  }
  c->mem_act = 1, c->mem_wgrad = strcmp(setup, "zb") ? 1 : 0.5;
  *kind = !strcmp(setup, "min")    ? KT_SCHED_V_MIN
          : !strcmp(setup, "half") ? KT_SCHED_V_HALF
                                   : KT_SCHED_ZBV_AUTO;
  if (*kind == KT_SCHED_ZBV_AUTO) pp->mem_limit = oracle_num(t, i, "mem_limit_chunks");
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: bench_oracle_rows TABLE.tsv [REPS] [ROW]\n");
    return 2;
  }
  int reps = argc > 2 ? atoi(argv[2]) : 5, only = argc > 3 ? atoi(argv[3]) : -1;
  if (reps < 1 || reps > 63) reps = 5;
  oracle_table t;
  if (oracle_load(argv[1], &t)) {
    fprintf(stderr, "bench_oracle_rows: cannot read %s\n", argv[1]);
    return 1;
  }
  for (int i = 0; i < t.n_rows; i++) {
    if (only >= 0 && i != only) continue;
    kt_gen_kind kind;
    kt_gen_params params;
    kt_costs c;
    row_setup(&t, i, &kind, &params, &c);
    double times[64], bubble = -1;
    for (int k = 0; k <= reps; k++) { /* k = 0: the warm-up, not counted */
      kt_schedule s;
      kt_metrics met;
      kt_error err;
      double t0 = kt_now();
      if (kt_generate(kind, &params, &s, &err) || kt_simulate_metrics(&s, &c, &met, &err)) {
        fprintf(stderr, "row %d: %s\n", i, err.msg);
        return 1;
      }
      if (k) times[k - 1] = kt_now() - t0;
      bubble = met.bubble_ratio;
      kt_metrics_free(&met);
      kt_schedule_free(&s);
    }
    printf("%d %.9g %.9g\n", i, kt_median(times, (size_t)reps), bubble);
  }
  oracle_free(&t);
  return 0;
}
