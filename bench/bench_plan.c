/* Planner benchmark: candidates per second of the search (branch and bound,
 * and exhaustive), the cost of one full evaluation, and the partitioner.
 * Medians of repeated runs; usage: bench_plan [REPS] [--quick] [--tsv FILE]
 * (--quick: without the largest partitioner instance). */
#include <stdio.h>
#include <stdlib.h>

#include "bench_rows.h"
#include "kaiten/generators.h"
#include "kaiten/plan.h"

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

/* Prints one search line; returns the CPU-time statistics (ms). */
static bench_stat run_search(const scenario *sc, int reps, char *what, size_t what_len) {
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
    double t0 = bench_cpu_now();
    if (kt_plan_search(&m, &c, &o, &sp, &rep, &err)) die("search", &err);
    t[i] = bench_cpu_now() - t0;
  }
  bench_stat st = bench_stats(t, (size_t)reps, 1e3);
  double s = st.med / 1e3;
  printf("%-10s %4d %6ld %4d %8zu %7zu %7zu %6zu %5d %9.1f %12.3g %10.3g\n", sc->model, sc->devices,
         sc->batch, sc->top, rep.enumerated, rep.evaluated, rep.no_fit, rep.simulations, rep.n,
         st.med, rep.enumerated / s, rep.evaluated / s);
  snprintf(what, what_len, "plan search %s, N=%d B=%ld, %s (%zu candidates, %zu simulations)",
           sc->model, sc->devices, sc->batch, sc->top ? "top 10" : "exhaustive", rep.enumerated,
           rep.simulations);
  kt_plan_report_free(&rep);
  kt_plan_model_free(&m);
  return st;
}

static void run_evaluate(const bench_opts *bo) {
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
    kt_gen_kind k;
    int v, m;
  } cases[] = {{KT_SCHED_1F1B, 1, 64},
               {KT_SCHED_ZB_H1, 1, 256},
               {KT_SCHED_INTERLEAVED, 2, 64},
               {KT_SCHED_ZBV, 2, 256}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    kt_plan_config cfg = {.p = 8,
                          .d = 2,
                          .t = 4,
                          .v = cases[i].v,
                          .m = cases[i].m,
                          .b = 1,
                          .k = 1,
                          .schedule = cases[i].k,
                          .recompute = KT_RECOMPUTE_SELECTIVE};
    double t[64];
    for (int r = 0; r < bo->reps; r++) {
      kt_plan_result res;
      double t0 = bench_cpu_now();
      if (kt_plan_evaluate(&m, &c, &o, &cfg, &res, &err)) die("evaluate", &err);
      t[r] = bench_cpu_now() - t0;
      kt_plan_result_free(&res);
    }
    const char *name = kt_gen_kind_name(cfg.schedule);
    bench_stat st = bench_stats(t, (size_t)bo->reps, 1e3);
    printf("%-12s %3d %2d %5d %10.3f\n", name, cfg.p, cfg.v, cfg.m, st.med);
    char id[64], what[160];
    snprintf(id, sizeof id, "plan.evaluate.%s", name);
    snprintf(what, sizeof what, "one cold evaluation, llama-70b %s P=%d V=%d M=%d", name, cfg.p,
             cfg.v, cfg.m);
    bench_row(bo, id, what, "ms CPU", st, NULL, 0);
  }
  kt_plan_model_free(&m);
}

static void run_partition(const bench_opts *bo) {
  printf("\n# partitioner: n layers into S stages (random loads), microseconds per call\n");
  printf("%5s %4s %12s %12s\n", "n", "S", "no cap", "memory cap");
  static const int sizes[][2] = {{34, 4}, {82, 16}, {82, 64}, {1000, 64}, {4000, 512}};
  size_t cases = sizeof sizes / sizeof *sizes - (bo->quick ? 1 : 0);
  unsigned long long rng = 12345;
  for (size_t k = 0; k < cases; k++) {
    int n = sizes[k][0], S = sizes[k][1];
    double *load = malloc(sizeof(double) * (size_t)n * 3),
           *mult = malloc(sizeof(double) * (size_t)S);
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
      for (int r = 0; r < bo->reps; r++) {
        kt_partition_problem pb = {.n = n, .load = load};
        if (capped) pb.fixed = fixed, pb.act = act, pb.mult = mult, pb.mem_cap = 2.5 * total / S;
        kt_error err;
        double b, t0 = bench_cpu_now();
        if (kt_partition_minmax(&pb, S, counts, &b, &err)) die("partition", &err);
        t[capped][r] = bench_cpu_now() - t0;
      }
    bench_stat plain = bench_stats(t[0], (size_t)bo->reps, 1e6);
    bench_stat cap = bench_stats(t[1], (size_t)bo->reps, 1e6);
    printf("%5d %4d %12.1f %12.1f\n", n, S, plain.med, cap.med);
    char id[64], what[160], ref[64];
    snprintf(id, sizeof id, "plan.partition.n%d.S%d", n, S);
    snprintf(what, sizeof what, "partitioner with memory cap, n=%d layers, S=%d stages", n, S);
    snprintf(ref, sizeof ref, "no cap (%.1f µs)", plain.med);
    bench_row(bo, id, what, "µs CPU", cap, ref, plain.med);
    free(load), free(mult), free(counts);
  }
}

int main(int argc, char **argv) {
  bench_opts bo = bench_args(argc, argv, 7, 3, 1, 64);
  printf(
      "# kaiten plan search, CPU time, median of %d runs (default cluster: 8/node, 80 GB, 156 TFLOP/s)\n",
      bo.reps);
  printf("%-10s %4s %6s %4s %8s %7s %7s %6s %5s %9s %12s %10s\n", "model", "N", "B", "top", "cands",
         "evals", "no-fit", "sims", "kept", "ms", "cands/s", "evals/s");
  static const scenario sc[] = {
      {"gpt2-1.5b", 16, 512, 10},
      {"llama-7b", 8, 1024, 10},
      {"llama-7b", 64, 2048, 10},
      {"zb-28.3b", 32, 768, 10},
      {"llama-70b", 64, 512, 10},
      {"llama-7b", 8, 1024, 0},
      {"gpt2-1.5b", 16, 512, 0},
      /* awkward sizes: a prime device count, a batch with few power-of-two factors */
      {"llama-7b", 7, 1024, 10},
      {"llama-7b", 8, 1000, 10},
      {"llama-70b", 61, 4096, 10},
      {"llama-7b", 60, 4095, 10},
  };
  enum { NSC = sizeof sc / sizeof *sc };
  bench_stat st[NSC];
  char what[NSC][160];
  for (size_t i = 0; i < NSC; i++) st[i] = run_search(&sc[i], bo.reps, what[i], sizeof what[i]);
  /* rows: a top-10 search against the exhaustive ranking of the same problem */
  for (size_t i = 0; i < NSC; i++) {
    char id[64], ref[64];
    snprintf(id, sizeof id, "plan.search.%s.N%d.B%ld.top%d", sc[i].model, sc[i].devices,
             sc[i].batch, sc[i].top);
    size_t j = 0;
    while (j < NSC && !(sc[i].top && !sc[j].top && sc[j].devices == sc[i].devices &&
                        sc[j].batch == sc[i].batch && !strcmp(sc[j].model, sc[i].model)))
      j++;
    if (j < NSC) snprintf(ref, sizeof ref, "exhaustive ranking (%.1f ms)", st[j].med);
    else if (sc[i].top) snprintf(ref, sizeof ref, "target 500 ms");
    bench_row(&bo, id, what[i], "ms CPU", st[i], j < NSC || sc[i].top ? ref : NULL,
              j < NSC     ? st[j].med
              : sc[i].top ? 500
                          : 0);
  }
  run_evaluate(&bo);
  run_partition(&bo);
  bench_close(&bo);
  return 0;
}
