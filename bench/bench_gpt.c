/* GPT training throughput on the runtime (default model: L=4, C=64, 4 heads,
 * T=64, byte vocabulary; M=8 micro-batches of b=4 per step, 1f1b), at P=1 and
 * P=2 on this machine's cores: tokens/s, the share of rank time inside sgemm,
 * and the step's achieved GFLOP/s against OpenBLAS's own sgemm replaying the
 * step's exact matmul shapes, one core per rank (one OpenBLAS thread).
 * Median of repeated steps. Usage: bench_gpt [REPS] [--quick] [--tsv FILE], REPS
 * being the number of measured steps. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_rows.h"

#include "kaiten/generators.h"
#include "kaiten/train.h"
#include "nn/nn.h"

static void die(const kt_error *e) {
  fprintf(stderr, "bench_gpt: %s\n", e->msg);
  exit(1);
}

/* Seconds bare sgemm takes for the recorded shapes (median of 5 replays). */
static double replay(const kt__matmul_shape *sh, size_t n) {
  size_t big = 0;
  for (size_t i = 0; i < n; i++) {
    size_t a = (size_t)sh[i].m * sh[i].k, b = (size_t)sh[i].k * sh[i].n, c = (size_t)sh[i].m * sh[i].n;
    if (a > big) big = a;
    if (b > big) big = b;
    if (c > big) big = c;
  }
  float *A = calloc(big, sizeof(float)), *B = calloc(big, sizeof(float)), *C = calloc(big, sizeof(float));
  for (size_t i = 0; i < big; i++) A[i] = B[i] = 0.01f * (float)(i % 97);
  double t[5];
  for (int r = 0; r < 5; r++) {
    double t0 = kt_now();
    for (size_t i = 0; i < n; i++) {
      const kt__matmul_shape *s = &sh[i];
      cblas_sgemm(CblasRowMajor, s->trans_a ? CblasTrans : CblasNoTrans,
                  s->trans_b ? CblasTrans : CblasNoTrans, s->m, s->n, s->k, 1.0f, A,
                  s->trans_a ? s->m : s->k, B, s->trans_b ? s->k : s->n, s->accumulate ? 1.0f : 0.0f,
                  C, s->n);
    }
    t[r] = kt_now() - t0;
  }
  free(A);
  free(B);
  free(C);
  return kt_median(t, 5);
}

int main(int argc, char **argv) {
  openblas_set_num_threads(1);
  bench_opts o = bench_args(argc, argv, 9, 3, 3, 200);
  int steps = o.reps;
  double base_tokens = 0;
  char id[64], what[160], ref[96];
  kt_error err;
  printf("# default GPT, M=8, b=4, T=64 (2048 tokens per step), 1f1b, median of %d steps\n", steps);
  printf("%3s %10s %10s %12s %14s %14s %8s\n", "P", "step ms", "tokens/s", "sgemm share",
         "step GFLOP/s", "sgemm GFLOP/s", "ratio");
  for (int P = 1; P <= 2; P++) {
    kt_schedule s;
    kt_schedule_params sp = {.p = P, .m = 8};
    if (kt_schedule_generate(KT_SCHED_1F1B, &sp, &s, &err)) die(&err);
    kt_runtime_config rc;
    kt_runtime_config_default(&rc);
    rc.schedule = &s;
    rc.micro_batch = 4;
    rc.blas_threads = 1; /* one core per rank: the replay below runs on one core too */
    kt_model_config_default(&rc.model, KT_MODEL_GPT);
    kt_runtime *rt;
    if (kt_runtime_create_threads(&rc, &rt, &err)) die(&err);
    kt_data_source *data;
    if (kt_data_text_source_create(NULL, 64, 4, 1, &data, &err)) die(&err);
    kt_microbatch mbs[8];
    double t[200], share[200], flops = 0;
    for (int i = 0; i < steps + 1; i++) {
      if (data->fill(data, 0, i, 1, 1, 8, 4, mbs, &err)) die(&err);
      kt__matmul_reset_counters();
      if (i == 1) kt__matmul_record(1);
      kt_step_result res;
      if (kt_runtime_step(rt, i, mbs, 1, &res, &err)) die(&err);
      if (i == 1) kt__matmul_record(0);
      if (i == 0) continue; /* warm-up */
      kt_metrics m;
      if (kt_timeline_metrics(kt_runtime_timeline(rt), &m, &err)) die(&err);
      t[i - 1] = res.seconds;
      share[i - 1] = kt__matmul_seconds() / m.total_busy;
      flops = kt__matmul_flops();
      kt_metrics_free(&m);
    }
    size_t n;
    const kt__matmul_shape *sh = kt__matmul_recorded(&n);
    double pure = replay(sh, n);
    bench_stat tokens = bench_rate(t, (size_t)steps, 2048), gflops = bench_rate(t, (size_t)steps, flops / 1e9);
    double step = 2048 / tokens.med, median_share = kt_median(share, (size_t)steps);
    /* P ranks run concurrently: bare sgemm on P cores would take pure / P */
    double bare = flops / pure / 1e9 * P, ratio = (pure / P) / step;
    printf("%3d %10.2f %10.0f %11.0f%% %14.2f %14.2f %7.0f%%\n", P, 1e3 * step, 2048 / step,
           100 * median_share, flops / step / 1e9, bare, 100 * ratio);
    if (P == 1) base_tokens = tokens.med;
    snprintf(id, sizeof id, "gpt.tokens.P%d", P);
    snprintf(what, sizeof what, "GPT training tokens/s, P=%d (%d core%s)", P, P, P > 1 ? "s" : "");
    snprintf(ref, sizeof ref, "P=1 (%.0f tokens/s)", base_tokens);
    bench_row(&o, id, what, "tokens/s", tokens, P > 1 ? ref : NULL, base_tokens);
    snprintf(id, sizeof id, "gpt.gflops.P%d", P);
    snprintf(what, sizeof what, "GPT step GFLOP/s, P=%d (sgemm %.0f%% of busy time)", P,
             100 * median_share);
    snprintf(ref, sizeof ref, "bare sgemm, same shapes, %d core%s (%.1f GFLOP/s%s)", P,
             P > 1 ? "s" : "", bare, P == 1 ? "; target 0.6" : "");
    bench_row(&o, id, what, "GFLOP/s", gflops, ref, bare);
    data->destroy(data);
    kt_runtime_destroy(rt);
    kt_schedule_free(&s);
  }
  bench_close(&o);
  return 0;
}
