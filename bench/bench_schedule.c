/* Schedule benchmark: build + validate + simulate at scale.
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

#define TARGET_MS 100.0 /* P=64, M=1024: build + validate + simulate */

/* Seconds of each build + validate + simulate in t[0..reps); *actions set. */
static void run(kt_schedule_kind kind, int p, int v, int m, int reps, double *t, size_t *actions) {
  for (int i = 0; i < reps; i++) {
    double t0 = kt_now();
    kt_schedule s;
    kt_error err;
    kt_schedule_params params = {.p = p, .m = m, .v = v};
    if (kt_schedule_generate(kind, &params, &s, &err)) {
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

int main(int argc, char **argv) {
  bench_opts o = bench_args(argc, argv, 7, 3, 1, 32);
  int reps = o.reps, max_m = o.quick ? 1024 : 4096;
  double t[32];
  char what[160], id[64];
  size_t n;
  printf("# build + validate + simulate, median of %d runs\n", reps);
  printf("%-12s %4s %2s %6s %10s %10s %14s\n", "schedule", "P", "V", "M", "actions", "ms",
         "actions/s");
  struct { kt_schedule_kind k; int p, v, m; } cases[] = {
      {KT_SCHED_1F1B, 64, 1, 1024}, {KT_SCHED_INTERLEAVED, 64, 4, 1024},
      {KT_SCHED_ZB_H1, 64, 1, 1024}, {KT_SCHED_ZBV, 64, 2, 1024}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const char *name = kt_schedule_kind_name(cases[i].k);
    run(cases[i].k, cases[i].p, cases[i].v, cases[i].m, reps, t, &n);
    bench_stat st = bench_stats(t, (size_t)reps, 1e3);
    printf("%-12s %4d %2d %6d %10zu %10.2f %14.3g\n", name, cases[i].p, cases[i].v, cases[i].m, n,
           st.med, n / (st.med / 1e3));
    snprintf(id, sizeof id, "schedule.%s", name);
    snprintf(what, sizeof what, "build + validate + simulate %s, P=%d V=%d M=%d (%zu actions)",
             name, cases[i].p, cases[i].v, cases[i].m, n);
    bench_row(&o, id, what, "ms", st, "target 100 ms", TARGET_MS);
  }
  printf("\n# scaling over M (1f1b P=64, interleaved P=64 V=4)\n");
  printf("%6s %12s %12s %12s %12s\n", "M", "1f1b ms", "ns/action", "interl. ms", "ns/action");
  bench_stat first[2] = {{0, 0, 0}, {0, 0, 0}}, last[2] = {{0, 0, 0}, {0, 0, 0}};
  for (int m = 128; m <= max_m; m *= 2) {
    size_t n1, n2;
    double t2[32];
    run(KT_SCHED_1F1B, 64, 1, m, reps, t, &n1);
    run(KT_SCHED_INTERLEAVED, 64, 4, m, reps, t2, &n2);
    bench_stat a = bench_stats(t, (size_t)reps, 1e9 / n1);
    bench_stat b = bench_stats(t2, (size_t)reps, 1e9 / n2);
    printf("%6d %12.2f %12.1f %12.2f %12.1f\n", m, 1e-6 * a.med * n1, a.med, 1e-6 * b.med * n2,
           b.med);
    if (m == 128) first[0] = a, first[1] = b;
    last[0] = a, last[1] = b;
  }
  const char *names[2] = {"1f1b", "interleaved"};
  for (int k = 0; k < 2; k++) {
    char ref[64];
    snprintf(id, sizeof id, "schedule.scaling.%s", names[k]);
    snprintf(what, sizeof what, "time per action, %s P=64%s, M=%d", names[k], k ? " V=4" : "",
             max_m);
    snprintf(ref, sizeof ref, "M=128 (%.1f ns)", first[k].med);
    bench_row(&o, id, what, "ns", last[k], ref, first[k].med);
  }
  bench_close(&o);
  return 0;
}
