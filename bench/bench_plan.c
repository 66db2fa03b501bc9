/* Planner benchmark: candidates per second of the search (branch and bound,
 * and exhaustive), the cost of one full evaluation, and the partitioner.
 * Medians of repeated runs; usage: bench_plan [REPS]. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kaiten/plan.h"

/* Process CPU seconds: the machine is shared, wall clock is noisier. */
static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *t, int n) {
  qsort(t, (size_t)n, sizeof *t, cmp);
  return t[n / 2];
}

static void die(const char *what, const kt_error *err) {
  fprintf(stderr, "bench_plan: %s: %s\n", what, err->msg);
  exit(1);
}

typedef struct {
  const char *model;
  int devices;
  long batch;
  int top;
} scenario;

static void run_search(const scenario *sc, int reps) {
  kt_plan_model m;
  kt_plan_cluster c;
  kt_plan_options o;
  kt_error err;
  if (kt_plan_model_preset(sc->model, &m, &err)) die(sc->model, &err);
  kt_plan_cluster_default(&c);
  c.devices = sc->devices;
  kt_plan_options_default(&o);
  kt_plan_search_params sp;
  kt_plan_search_params_default(&sp);
  sp.global_batch = sc->batch;
  sp.top = sc->top;
  double t[64];
  kt_plan_report rep = {0};
  for (int i = 0; i < reps; i++) {
    kt_plan_report_free(&rep);
    double t0 = cpu_now();
    if (kt_plan_search(&m, &c, &o, &sp, &rep, &err)) die("search", &err);
    t[i] = cpu_now() - t0;
  }
  double s = median(t, reps);
  printf("%-10s %4d %6ld %4d %8zu %7zu %7zu %6zu %5d %9.1f %12.3g %10.3g\n", sc->model,
         sc->devices, sc->batch, sc->top, rep.enumerated, rep.evaluated, rep.no_fit,
         rep.simulations, rep.n, 1e3 * s, rep.enumerated / s, rep.evaluated / s);
  kt_plan_report_free(&rep);
  kt_plan_model_free(&m);
}

static void run_evaluate(int reps) {
  kt_plan_model m;
  kt_plan_cluster c;
  kt_plan_options o;
  kt_error err;
  if (kt_plan_model_preset("llama-70b", &m, &err)) die("llama-70b", &err);
  kt_plan_cluster_default(&c);
  c.devices = 64;
  kt_plan_options_default(&o);
  printf("\n# one cold evaluation (schedule, partition, memory, simulation; no cache)\n");
  printf("%-12s %3s %2s %5s %10s\n", "schedule", "P", "V", "M", "ms");
  struct {
    kt_schedule_kind k;
    int v, m;
  } cases[] = {{KT_SCHED_1F1B, 1, 64}, {KT_SCHED_ZB_H1, 1, 256}, {KT_SCHED_INTERLEAVED, 2, 64},
               {KT_SCHED_ZBV, 2, 256}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    kt_plan_config cfg = {.p = 8, .d = 2, .t = 4, .v = cases[i].v, .m = cases[i].m, .b = 1,
                          .k = 1, .schedule = cases[i].k, .recompute = KT_RECOMPUTE_SELECTIVE};
    double t[64];
    for (int r = 0; r < reps; r++) {
      kt_plan_result res;
      double t0 = cpu_now();
      if (kt_plan_evaluate(&m, &c, &o, &cfg, &res, &err)) die("evaluate", &err);
      t[r] = cpu_now() - t0;
      kt_plan_result_free(&res);
    }
    printf("%-12s %3d %2d %5d %10.3f\n", kt_schedule_kind_name(cfg.schedule), cfg.p, cfg.v, cfg.m,
           1e3 * median(t, reps));
  }
  kt_plan_model_free(&m);
}

static void run_partition(int reps) {
  printf("\n# partitioner: n layers into S stages (random loads), microseconds per call\n");
  printf("%5s %4s %12s %12s\n", "n", "S", "no cap", "memory cap");
  static const int sizes[][2] = {{34, 4}, {82, 16}, {82, 64}, {1000, 64}, {4000, 512}};
  unsigned long long rng = 12345;
  for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
    int n = sizes[k][0], S = sizes[k][1];
    double *load = malloc(sizeof(double) * (size_t)n * 3), *mult = malloc(sizeof(double) * (size_t)S);
    int *counts = malloc(sizeof(int) * (size_t)S);
    if (!load || !mult || !counts) exit(1);
    double *fixed = load + n, *act = load + 2 * n, total = 0;
    for (int i = 0; i < 3 * n; i++) {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      load[i] = 1 + (double)(rng >> 40) / (1 << 24);
    }
    for (int i = 0; i < n; i++) total += fixed[i] + S * act[i];
    for (int j = 0; j < S; j++) mult[j] = S - j;
    double t[2][64];
    for (int capped = 0; capped < 2; capped++)
      for (int r = 0; r < reps; r++) {
        kt_partition_problem pb = {.n = n, .load = load};
        if (capped) pb.fixed = fixed, pb.act = act, pb.mult = mult, pb.mem_cap = 2.5 * total / S;
        kt_error err;
        double b, t0 = cpu_now();
        if (kt_partition_minmax(&pb, S, counts, &b, &err)) die("partition", &err);
        t[capped][r] = cpu_now() - t0;
      }
    printf("%5d %4d %12.1f %12.1f\n", n, S, 1e6 * median(t[0], reps), 1e6 * median(t[1], reps));
    free(load), free(mult), free(counts);
  }
}

int main(int argc, char **argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 7;
  if (reps < 1 || reps > 64) reps = 7;
  printf("# kaiten plan search, CPU time, median of %d runs (default cluster: 8/node, 80 GB, 156 TFLOP/s)\n",
         reps);
  printf("%-10s %4s %6s %4s %8s %7s %7s %6s %5s %9s %12s %10s\n", "model", "N", "B", "top",
         "cands", "evals", "no-fit", "sims", "kept", "ms", "cands/s", "evals/s");
  static const scenario sc[] = {
      {"gpt2-1.5b", 16, 512, 10}, {"llama-7b", 8, 1024, 10},  {"llama-7b", 64, 2048, 10},
      {"zb-28.3b", 32, 768, 10},  {"llama-70b", 64, 512, 10}, {"llama-7b", 8, 1024, 0},
      {"gpt2-1.5b", 16, 512, 0},
  };
  for (size_t i = 0; i < sizeof sc / sizeof *sc; i++) run_search(&sc[i], reps);
  run_evaluate(reps);
  run_partition(reps);
  return 0;
}
