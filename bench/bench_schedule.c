/* Schedule benchmark: build + validate + simulate at scale.
 * Reports the median of several repetitions and actions per second, and the
 * scaling over M (it should be linear in the number of actions). */
#include <stdio.h>
#include <stdlib.h>

#include "kaiten/schedule.h"
#include "kaiten/sim.h"

/* Returns the median seconds of one build + validate + simulate; *actions set. */
static double run(kt_schedule_kind kind, int p, int v, int m, int reps, size_t *actions) {
  double t[32];
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
  return kt_median(t, (size_t)reps);
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 7;
  if (reps < 1 || reps > 32) reps = 7;
  size_t n;
  printf("# build + validate + simulate, median of %d runs\n", reps);
  printf("%-12s %4s %2s %6s %10s %10s %14s\n", "schedule", "P", "V", "M", "actions", "ms",
         "actions/s");
  struct { kt_schedule_kind k; int p, v, m; } cases[] = {
      {KT_SCHED_1F1B, 64, 1, 1024}, {KT_SCHED_INTERLEAVED, 64, 4, 1024},
      {KT_SCHED_ZB_H1, 64, 1, 1024}, {KT_SCHED_ZBV, 64, 2, 1024}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    double s = run(cases[i].k, cases[i].p, cases[i].v, cases[i].m, reps, &n);
    printf("%-12s %4d %2d %6d %10zu %10.2f %14.3g\n", kt_schedule_kind_name(cases[i].k),
           cases[i].p, cases[i].v, cases[i].m, n, 1e3 * s, n / s);
  }
  printf("\n# scaling over M (1f1b P=64, interleaved P=64 V=4)\n");
  printf("%6s %12s %12s %12s %12s\n", "M", "1f1b ms", "ns/action", "interl. ms", "ns/action");
  for (int m = 128; m <= 4096; m *= 2) {
    size_t n1, n2;
    double a = run(KT_SCHED_1F1B, 64, 1, m, reps, &n1);
    double b = run(KT_SCHED_INTERLEAVED, 64, 4, m, reps, &n2);
    printf("%6d %12.2f %12.1f %12.2f %12.1f\n", m, 1e3 * a, 1e9 * a / n1, 1e3 * b, 1e9 * b / n2);
  }
  return 0;
}
