/* Runtime benchmarks.
 * 1. Overhead in synthetic mode: measured makespan / simulated makespan with
 *    the nominal costs (1f1b, P = 4, 8, 16, M = 4P, T_F = T_B = 2 ms).
 * 2. Real compute: an MLP at P = 2 versus P = 1 on the same work, against the
 *    ideal speed-up 2M/(M+1) of a balanced two-stage pipeline.
 * Usage: bench_runtime [REPS] [--quick] [--tsv FILE] (--quick: P <= 8, M <= 8). */
#include <stdio.h>
#include <stdlib.h>

#include "bench_rows.h"
#include "kaiten/generators.h"
#include "kaiten/runtime.h"
#include "kaiten/sim.h"

static void die(const kt_error *e) {
  fprintf(stderr, "bench_runtime: %s\n", e->msg);
  exit(1);
}

int main(int argc, char **argv) {
  bench_opts o = bench_args(argc, argv, 5, 3, 1, 50);
  int reps = o.reps;
  char id[64], what[160], ref[96];
  kt_error err;
  printf("# synthetic 1f1b, T_F = T_B = 2 ms, 64 KiB tensors, median of %d steps\n", reps);
  printf("%4s %4s %14s %14s %8s %10s %10s\n", "P", "M", "measured ms", "simulated ms", "ratio",
         "bubble", "sim bubble");
  int ps[] = {4, 8, 16};
  for (int i = 0; i < (o.quick ? 2 : 3); i++) {
    int P = ps[i], M = 4 * P;
    kt_schedule s;
    kt_gen_params sp = {.p = P, .m = M};
    if (kt_generate(KT_SCHED_1F1B, &sp, &s, &err)) die(&err);
    kt_runtime_config cfg;
    kt_runtime_config_default(&cfg);
    cfg.schedule = &s;
    cfg.synthetic = 1;
    cfg.syn_tf_ms = 2;
    cfg.syn_tb_ms = 2;
    cfg.syn_tw_ms = 0;
    cfg.syn_act_bytes = 65536;
    kt_runtime *rt;
    if (kt_runtime_create_threads(&cfg, &rt, &err)) die(&err);
    double ms[50], bub[50];
    for (int r = 0; r < reps; r++) {
      kt_step_result res;
      if (kt_runtime_step(rt, r, NULL, 1, &res, &err)) die(&err);
      kt_metrics m;
      if (kt_timeline_metrics(kt_runtime_timeline(rt), &m, &err)) die(&err);
      ms[r] = 1e3 * m.makespan;
      bub[r] = m.bubble_ratio;
      kt_metrics_free(&m);
    }
    kt_costs c;
    kt_costs_default(&c);
    c.tf = 2, c.tb = 2, c.tw = 0;
    kt_metrics sim;
    if (kt_simulate_metrics(&s, &c, &sim, &err)) die(&err);
    bench_stat meas = bench_stats(ms, (size_t)reps, 1);
    printf("%4d %4d %14.2f %14.2f %8.4f %9.1f%% %9.1f%%\n", P, M, meas.med, sim.makespan,
           meas.med / sim.makespan, 100 * kt_median(bub, (size_t)reps), 100 * sim.bubble_ratio);
    snprintf(id, sizeof id, "runtime.synthetic.P%d", P);
    snprintf(what, sizeof what, "synthetic 1f1b makespan, P=%d M=%d, T_F=T_B=2 ms, 64 KiB tensors",
             P, M);
    snprintf(ref, sizeof ref, "simulated makespan %.1f ms (target ratio <= 1.03)", sim.makespan);
    bench_row(&o, id, what, "ms", meas, ref, sim.makespan);
    kt_metrics_free(&sim);
    kt_runtime_destroy(rt);
    kt_schedule_free(&s);
  }

  printf("\n# real compute: MLP L=8 H=512, 256 samples per step, 1f1b, median of %d steps\n", reps);
  printf("%4s %4s %12s %10s %14s\n", "P", "M", "step ms", "speed-up", "ideal 2M/(M+1)");
  double base = 0;
  int cases[][2] = {{1, 1}, {2, 2}, {2, 4}, {2, 8}, {2, 16}};
  for (int i = 0; i < (o.quick ? 4 : 5); i++) {
    int P = cases[i][0], M = cases[i][1], b = 256 / M;
    kt_schedule s;
    kt_gen_params sp = {.p = P, .m = M};
    if (kt_generate(KT_SCHED_1F1B, &sp, &s, &err)) die(&err);
    kt_runtime_config cfg;
    kt_runtime_config_default(&cfg);
    cfg.schedule = &s;
    cfg.micro_batch = b;
    cfg.model.layers = 8;
    cfg.model.hidden = 512;
    kt_blas_set_threads(1); /* one core per stage: P=1 uses one core, P=2 two */
    kt_runtime *rt;
    if (kt_runtime_create_threads(&cfg, &rt, &err)) die(&err);
    float *x = calloc(256 * 512, sizeof(float)), *y = calloc(256 * 512, sizeof(float));
    for (int k = 0; k < 256 * 512; k++) x[k] = (float)((k * 37) % 101) / 101.0f, y[k] = 0.1f;
    kt_microbatch mbs[256];
    for (int j = 0; j < M; j++)
      mbs[j] = (kt_microbatch){.b = b, .x = x + (size_t)j * b * 512, .y = y + (size_t)j * b * 512};
    double t[50];
    kt_step_result res;
    if (kt_runtime_step(rt, 0, mbs, 1, &res, &err)) die(&err); /* warm-up */
    for (int r = 0; r < reps; r++) {
      if (kt_runtime_step(rt, r + 1, mbs, 1, &res, &err)) die(&err);
      t[r] = 1e3 * res.seconds;
    }
    bench_stat st = bench_stats(t, (size_t)reps, 1);
    double med = st.med;
    if (P == 1) base = med;
    printf("%4d %4d %12.2f %10.2f %14.2f\n", P, M, med, base / med,
           P == 1 ? 1.0 : 2.0 * M / (M + 1));
    snprintf(id, sizeof id, "runtime.mlp.P%d.M%d", P, M);
    snprintf(what, sizeof what, "MLP L=8 H=512 step, 256 samples, 1f1b P=%d M=%d", P, M);
    snprintf(ref, sizeof ref, "P=1 (%.1f ms; ideal ratio %.3g)", base, (M + 1) / (2.0 * M));
    bench_row(&o, id, what, "ms", st, P == 1 ? NULL : ref, base);
    free(x);
    free(y);
    kt_runtime_destroy(rt);
    kt_schedule_free(&s);
  }
  bench_close(&o);
  return 0;
}
