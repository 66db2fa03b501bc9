/* Schedule benchmark: build + validate + simulate at scale, and zb-auto's
 * search time (process CPU) beside the zero-bubble authors' heuristic.
 * Reports the median of several repetitions and actions per second, and the
 * scaling over M (it should be linear in the number of actions).
 * Usage: bench_schedule [REPS] [--quick] [--tsv FILE] (--quick: M <= 1024
 * in the scaling table). */
#include <stdio.h>
#include <stdlib.h>

#include "bench_rows.h"
#include "kaiten/generators.h"
#include "kaiten/schedule.h"
#include "kaiten/sim.h"

#define TARGET_ACTIONS_PER_S 1e7 /* build + validate + simulate, P=64, M=1024 */

/* Seconds of each build + validate + simulate in t[0..reps); *actions set. */
static void run(kt_gen_kind kind, int p, int v, int m, int reps, double *t, size_t *actions) {
  for (int i = 0; i < reps; i++) {
    double t0 = kt_now();
    kt_schedule s;
    kt_error err;
    kt_gen_params params = {.p = p, .m = m, .v = v};
    if (kt_generate(kind, &params, &s, &err)) {
      fprintf(stderr, "%s\n", err.msg);
      exit(1);
    }
    if (kt_schedule_validate(&s, &err)) {
      fprintf(stderr, "%s\n", err.msg);
      exit(1);
    }
    kt_metrics met;
    if (kt_simulate_metrics(&s, NULL, &met, &err)) {
      fprintf(stderr, "%s\n", err.msg);
      exit(1);
    }
    t[i] = kt_now() - t0;
    *actions = kt_schedule_total_actions(&s);
    kt_metrics_free(&met);
    kt_schedule_free(&s);
  }
}

/* zb-auto on the costs of the oracle README's timing table (F=18.5 B=18.1
 * W=9.3 comm=0.6, M_B=2 M_W=1): process CPU seconds of each generation in
 * t[0..reps); *bubble of the result. */
static void run_auto(int p, int m, double limit, int reps, double *t, double *bubble) {
  kt_costs c;
  kt_costs_default(&c);
  c.tf = 18.5, c.tb = 18.1, c.tw = 9.3, c.comm = 0.6, c.mem_act = 2, c.mem_wgrad = 1;
  for (int i = 0; i < reps; i++) {
    kt_schedule s;
    kt_error err;
    kt_gen_params params = {.p = p, .m = m, .costs = &c, .mem_limit = limit};
    double t0 = bench_cpu_now();
    if (kt_generate(KT_SCHED_ZB_AUTO, &params, &s, &err)) {
      fprintf(stderr, "%s\n", err.msg);
      exit(1);
    }
    t[i] = bench_cpu_now() - t0;
    kt_metrics met;
    if (kt_simulate_metrics(&s, &c, &met, &err)) {
      fprintf(stderr, "%s\n", err.msg);
      exit(1);
    }
    *bubble = met.bubble_ratio;
    kt_metrics_free(&met);
    kt_schedule_free(&s);
  }
}

/* zb-auto's speed targets, and P=32 M=256 beside the authors' heuristic
 * (tests/data/oracles: 0.726 s at 2P*M_B and 0.744 s at 4P*M_B, best of 3,
 * CPython on this kind of machine; bubbles 0.001563 and 0). */
static void auto_rows(const bench_opts *o, int reps, double *t) {
  struct {
    int p, m, mult;
    double target, authors_s, authors_bubble;
  } cases[] = {
      {32, 256, 2, 8, 0.726, 0.001563}, {32, 256, 4, 8, 0.744, 0}, {64, 1024, 2, 100, 0, -1}};
  /* mult: the limit in units of P*M_B (M_B = 2) */
  printf(
      "\n# zb-auto search, process CPU ms, median of %d (authors' heuristic: CPython, best of 3)\n",
      reps);
  printf("%4s %6s %7s %10s %10s %12s %12s\n", "P", "M", "limit", "ms CPU", "bubble", "authors ms",
         "authors bub");
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    double bubble = 0, limit = cases[i].mult * 2.0 * cases[i].p;
    run_auto(cases[i].p, cases[i].m, limit, reps, t, &bubble);
    bench_stat st = bench_stats(t, (size_t)reps, 1e3);
    printf("%4d %6d %4dPMB %10.2f %10.6f", cases[i].p, cases[i].m, cases[i].mult, st.med, bubble);
    if (cases[i].authors_s > 0)
      printf(" %12.0f %12.6f\n", 1e3 * cases[i].authors_s, cases[i].authors_bubble);
    else printf(" %12s %12s\n", "-", "-");
    char id[64], what[200], ref[96];
    snprintf(id, sizeof id, "schedule.zb_auto.p%dm%d.%dpmb", cases[i].p, cases[i].m, cases[i].mult);
    snprintf(what, sizeof what, "zb-auto search, P=%d M=%d, limit %d*P*M_B (bubble %.6f)",
             cases[i].p, cases[i].m, cases[i].mult, bubble);
    snprintf(ref, sizeof ref, "target %g ms", cases[i].target);
    bench_row(o, id, what, "ms CPU", st, ref, cases[i].target);
    if (cases[i].authors_s > 0) {
      snprintf(id, sizeof id, "schedule.zb_auto.p%dm%d.%dpmb.authors", cases[i].p, cases[i].m,
               cases[i].mult);
      snprintf(what, sizeof what, "the same against the authors' heuristic (bubble %.6f)",
               cases[i].authors_bubble);
      snprintf(ref, sizeof ref, "authors' heuristic, CPython (%.0f ms)", 1e3 * cases[i].authors_s);
      bench_row(o, id, what, "ms CPU", st, ref, 1e3 * cases[i].authors_s);
    }
  }
}

int main(int argc, char **argv) {
  bench_opts o = bench_args(argc, argv, 7, 3, 1, 32);
  int reps = o.reps, max_m = o.quick ? 1024 : 4096;
  double t[32];
  char what[160], id[64];
  size_t n;
  printf("# build + validate + simulate, median of %d runs\n", reps);
  printf("%-12s %4s %2s %6s %10s %10s %14s\n", "schedule", "P", "V", "M", "actions", "ms",
         "actions/s");
  /* every built-in schedule but the searches (zb-auto, zbv-auto: below) */
  struct {
    kt_gen_kind k;
    int p, v, m;
  } cases[] = {{KT_SCHED_GPIPE, 64, 1, 1024},
               {KT_SCHED_1F1B, 64, 1, 1024},
               {KT_SCHED_INTERLEAVED, 64, 4, 1024},
               {KT_SCHED_LOOPED_BFS, 64, 4, 1024},
               {KT_SCHED_ZB_H1, 64, 1, 1024},
               {KT_SCHED_ZB_H2, 64, 1, 1024},
               {KT_SCHED_ZBV, 64, 2, 1024},
               {KT_SCHED_DUALPIPEV, 64, 2, 1024},
               {KT_SCHED_INTERLEAVED_ZB, 64, 2, 1024},
               {KT_SCHED_V_HALF, 64, 2, 1024},
               {KT_SCHED_V_MIN, 64, 2, 1024}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const char *name = kt_gen_kind_name(cases[i].k);
    run(cases[i].k, cases[i].p, cases[i].v, cases[i].m, reps, t, &n);
    bench_stat st = bench_stats(t, (size_t)reps, 1e3);
    printf("%-12s %4d %2d %6d %10zu %10.2f %14.3g\n", name, cases[i].p, cases[i].v, cases[i].m, n,
           st.med, n / (st.med / 1e3));
    snprintf(id, sizeof id, "schedule.%s", name);
    snprintf(what, sizeof what,
             "build + validate + simulate %s, P=%d V=%d M=%d (%zu actions, %.3g/s)", name,
             cases[i].p, cases[i].v, cases[i].m, n, n / (st.med / 1e3));
    /* the target: 10 M actions per second */
    double target_ms = (double)n / TARGET_ACTIONS_PER_S * 1e3;
    char ref[64];
    snprintf(ref, sizeof ref, "10 M actions/s (%.1f ms)", target_ms);
    bench_row(&o, id, what, "ms", st, ref, target_ms);
  }
  /* Scaling: every M of a repetition runs back to back, each repeated until
   * it has done as many actions as the largest M (32 runs of M=128 against
   * one of M=4096), so a minute of load on the shared machine hits every M
   * alike; the ratio is the median of the per-repetition ratios. */
  printf("\n# scaling over M (1f1b P=64, interleaved P=64 V=4), median of %d; each M repeated to "
         "the actions of M=%d\n",
         reps, max_m);
  printf("%6s %12s %12s %12s %12s\n", "M", "1f1b ms", "ns/action", "interl. ms", "ns/action");
  enum { MAX_MS = 8 };
  static double ns[2][MAX_MS][32];
  int ms[MAX_MS], n_m = 0;
  size_t acts[2][MAX_MS];
  for (int m = 128; m <= max_m && n_m < MAX_MS; m *= 2) ms[n_m++] = m;
  const kt_gen_kind kinds[2] = {KT_SCHED_1F1B, KT_SCHED_INTERLEAVED};
  for (int r = 0; r < reps; r++)
    for (int i = 0; i < n_m; i++)
      for (int k = 0; k < 2; k++) {
        int batch = max_m / ms[i];
        run(kinds[k], 64, k ? 4 : 1, ms[i], batch, t, &acts[k][i]);
        double sum = 0;
        for (int j = 0; j < batch; j++) sum += t[j];
        ns[k][i][r] = 1e9 * sum / ((double)batch * (double)acts[k][i]);
      }
  bench_stat first[2], last[2], ratio[2];
  for (int i = 0; i < n_m; i++) {
    bench_stat st[2];
    for (int k = 0; k < 2; k++) {
      double v[32];
      for (int r = 0; r < reps; r++) v[r] = ns[k][i][r];
      st[k] = bench_stats(v, (size_t)reps, 1);
      if (i == 0) first[k] = st[k];
      if (i == n_m - 1) {
        last[k] = st[k];
        for (int r = 0; r < reps; r++) v[r] = ns[k][i][r] / ns[k][0][r];
        ratio[k] = bench_stats(v, (size_t)reps, 1);
      }
    }
    printf("%6d %12.2f %12.1f %12.2f %12.1f\n", ms[i], 1e-6 * st[0].med * acts[0][i], st[0].med,
           1e-6 * st[1].med * acts[1][i], st[1].med);
  }
  printf("time per action at M=%d over M=128 (median of per-repetition ratios): 1f1b %.3f, "
         "interleaved %.3f (target: at most 1.3)\n",
         max_m, ratio[0].med, ratio[1].med);
  auto_rows(&o, reps, t);
  const char *names[2] = {"1f1b", "interleaved"};
  for (int k = 0; k < 2; k++) {
    char ref[96];
    snprintf(id, sizeof id, "schedule.scaling.%s", names[k]);
    snprintf(what, sizeof what,
             "time per action, %s P=64%s, M=%d (ratio: median of per-repetition ratios)", names[k],
             k ? " V=4" : "", max_m);
    snprintf(ref, sizeof ref, "M=128 (%.1f ns; target 1.3x)", first[k].med);
    bench_row(&o, id, what, "ns", last[k], ref, last[k].med / ratio[k].med);
  }
  bench_close(&o);
  return 0;
}
