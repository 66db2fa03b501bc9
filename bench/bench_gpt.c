/* GPT training throughput on the runtime, for two model sizes (default:
 * L=4, C=64, 4 heads, T=64; larger: L=8, C=256, 8 heads, T=128; byte
 * vocabulary; M=8 micro-batches of b=4 per step, 1f1b), one OpenBLAS thread
 * per rank, P=1 on one core and P=2 on two.
 *
 * Everything is measured side by side, round by round, so that the load of a
 * shared machine hits every column alike: each round replays the step's
 * exact matmul shapes and strides on bare sgemm (one core) twice, on one
 * set of operands that stays in cache (the reference) and cycling through
 * COLD_SETS sets that do not, then runs two P=1 steps and two P=2 steps of
 * 1f1b and of zb-h1 and times the second of each (in training a step
 * follows one of its own). Reported: the P=1 step's achieved GFLOP/s
 * against both replays (median of the per-round ratios), the share of rank
 * time inside sgemm, and the P=2 speed-ups over P=1 against the ideal
 * 2M/(M+1) of a balanced two-stage 1F1B pipeline (median of the per-round
 * speed-ups). zb-h1 has the same peak activation memory as 1f1b; the
 * stage with less work runs its W's in the time it would wait, so an
 * uneven partition costs it less than it costs 1f1b. Each round also
 * replays the shapes on both cores at once (a thread on each, own operands): its time
 * against the replay on one core alone is what this machine gives two
 * concurrent ranks, so ideal x that ratio is the speed-up it allows; and
 * it runs two P=1 pipelines at once, one on each core, whose step against
 * the P=1 step alone is the same for the whole step, memory traffic and
 * element-wise kernels included (the bound that binds on a machine whose
 * two cores share a cache or memory bandwidth with each other or another
 * tenant).
 * Also one core's FMA peak (independent chains in the widest vectors the
 * CPU has): how far from the machine's own ceiling the step and the
 * libraries' replays run.
 * Before the rounds, each model's products by class: the library the step
 * ran the class on (auto may take another than its main one per class),
 * their time in a step against the same calls, epilogues included, on that
 * library in cache (where the step loses to its operands coming from
 * memory), and the same products in the step's order with nothing between.
 * With --libraries, only the larger model's P=1 step on auto's choices
 * against the same step on each installed library alone, alternating.
 * Usage: bench_gpt [ROUNDS] [--quick] [--tsv FILE] [--gemm NAME] [--libraries]
 * (NAME as train's --gemm; default auto). */
#define _GNU_SOURCE
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "bench_rows.h"

#include "kaiten/generators.h"
#include "kaiten/train.h"
#include "nn/nn.h"

#define M_MB 8 /* micro-batches per step */
#define B_MB 4 /* samples per micro-batch */
#define MAX_ROUNDS 200
#define COLD_SETS 8 /* operand sets the cold replay cycles through (> L2) */

static void die(const kt_error *e) {
  fprintf(stderr, "bench_gpt: %s\n", e->msg);
  exit(1);
}

typedef struct {
  const char *name, *flags; /* the model, as kaiten train's flags */
  int layers, hidden, heads, seq_len;
  double target; /* P=1 step over bare sgemm */
} gpt_size;

/* Operands big enough for every recorded shape and its row strides (d: the
 * GELU' a product's epilogue writes). */
typedef struct {
  float *a, *b, *c, *d;
} replay_buf;

static size_t extent(int rows, int ld) { return (size_t)rows * (size_t)ld; }

static replay_buf replay_alloc(const kt__matmul_shape *sh, size_t n) {
  size_t big = 1;
  for (size_t i = 0; i < n; i++) {
    const kt__matmul_shape *s = &sh[i];
    size_t a = extent(s->trans_a ? s->k : s->m, s->lda),
           b = extent(s->trans_b ? s->n : s->k, s->ldb);
    size_t c = extent(s->m, s->ldo);
    big = a > big ? a : big, big = b > big ? b : big, big = c > big ? c : big;
  }
  /* allocated as the step's tensors are (huge-page aligned when large) */
  replay_buf r = {kt__alloc_floats(big), kt__alloc_floats(big), kt__alloc_floats(big),
                  kt__alloc_floats(big)};
  if (!r.a || !r.b || !r.c || !r.d) {
    fprintf(stderr, "bench_gpt: out of memory\n");
    exit(1);
  }
  for (size_t i = 0; i < big; i++) r.a[i] = r.b[i] = r.c[i] = r.d[i] = 0.01f * (float)(i % 97);
  return r;
}

/* The epilogue a recorded product ran with (its bias, residual, GELU), on
 * r's operands: the step times each product with its epilogue (fused on
 * kaiten's kernel, a pass after a library's), so its replays on the step's
 * library do too; the bare OpenBLAS reference runs none. */
static kt__epilogue replay_epilogue(const kt__matmul_shape *s, const replay_buf *r) {
  return kt__epilogue_of_kind(s->epi, r->a, r->b, s->ldo, r->d);
}

/* Seconds bare sgemm takes for the recorded shapes and strides, once; call
 * i uses operand set i mod n_sets. */
static double replay(const kt__matmul_shape *sh, size_t n, replay_buf *sets, int n_sets) {
  double t0 = kt_now();
  for (size_t i = 0; i < n; i++) {
    const kt__matmul_shape *s = &sh[i];
    replay_buf *r = &sets[i % (size_t)n_sets];
    kt__sgemm(s->trans_a, s->trans_b, s->m, s->n, s->k, r->a, s->lda, r->b, s->ldb,
              s->accumulate ? 1.0f : 0.0f, r->c, s->ldo);
  }
  return kt_now() - t0;
}

/* The same on the GEMM library the step runs on (one thread), in cache. */
static double replay_lib(kt_gemm_kind lib, const kt__matmul_shape *sh, size_t n, replay_buf *r) {
  double t0 = kt_now();
  for (size_t i = 0; i < n; i++) {
    const kt__matmul_shape *s = &sh[i];
    kt__gemm_call(lib, s->trans_a, s->trans_b, s->m, s->n, s->k, r->a, s->lda, r->b, s->ldb,
                  s->accumulate ? 1.0f : 0.0f, r->c, s->ldo);
  }
  return kt_now() - t0;
}

/* ---- where the step's matmuls lose time: each class of products -------------- */

#define MAX_CLASSES 64

typedef struct {
  kt__matmul_shape s; /* one call's (seconds: the class's in the step) */
  int calls;
} shape_class;

static int same_shape(const kt__matmul_shape *a, const kt__matmul_shape *b) {
  return a->m == b->m && a->n == b->n && a->k == b->k && a->trans_a == b->trans_a &&
         a->trans_b == b->trans_b && a->accumulate == b->accumulate && a->lda == b->lda &&
         a->ldb == b->ldb && a->ldo == b->ldo;
}

/* Seconds of calls calls of s on library lib, operands in cache (best of
 * 5), with s's epilogue where epilogue is set. */
static double class_in_cache(kt_gemm_kind lib, const kt__matmul_shape *s, int calls, replay_buf *r,
                             int epilogue) {
  double best = INFINITY;
  kt__epilogue ep = replay_epilogue(s, r);
  for (int t = 0; t < 5; t++) {
    double t0 = kt_now();
    for (int i = 0; i < calls; i++)
      kt__gemm_call_ep(lib, s->trans_a, s->trans_b, s->m, s->n, s->k, r->a, s->lda, r->b, s->ldb,
                       s->accumulate ? 1.0f : 0.0f, r->c, s->ldo, epilogue && s->epi ? &ep : NULL);
    best = fmin(best, kt_now() - t0);
  }
  return best;
}

/* One step's products through the GEMM library, by class (shape, strides,
 * accumulate), largest first: their time inside the step against the same
 * calls on the library the step ran the class on (auto's choice for it,
 * plan) and on bare OpenBLAS with one operand set in cache; what the step
 * loses to operands that come from memory. */
static void class_table(const gpt_size *g, const kt__matmul_shape *sh, size_t n, kt_gemm_kind lib,
                        const kt_gemm_choice *plan, replay_buf *r) {
  static shape_class cls[MAX_CLASSES];
  int nc = 0, elsewhere = 0;
  for (size_t i = 0; i < n; i++) {
    if (!(sh[i].seconds > 0)) {
      elsewhere++;
      continue;
    }
    int c = 0;
    while (c < nc && !same_shape(&cls[c].s, &sh[i])) c++;
    if (c == MAX_CLASSES) continue;
    if (c == nc) cls[nc++] = (shape_class){sh[i], 0}, cls[c].s.seconds = 0;
    cls[c].s.seconds += sh[i].seconds, cls[c].calls++;
  }
  for (int i = 1; i < nc; i++) /* largest time in the step first */
    for (int j = i; j > 0 && cls[j].s.seconds > cls[j - 1].s.seconds; j--) {
      shape_class t = cls[j];
      cls[j] = cls[j - 1], cls[j - 1] = t;
    }
  printf("%-8s the step's products by class (%d more computed by kaiten's own kernels): the "
         "library the step ran it on (its main one: %s), GF/s in the step, on that library "
         "(with the class's epilogue, as in the step) and bare OpenBLAS (none) in cache, and the "
         "ms the step loses\n",
         g->name, elsewhere, kt_gemm_name(lib));
  kt__exec e = {.gemm = lib, .plan = plan};
  double in_step = 0, in_cache = 0;
  for (int c = 0; c < nc; c++) {
    const kt__matmul_shape *s = &cls[c].s;
    kt_gemm_kind on = kt__gemm_for(&e, s->m, s->n, s->k, s->trans_a, s->trans_b);
    double f = 2.0 * s->m * s->n * s->k * cls[c].calls;
    double tl = class_in_cache(on, s, cls[c].calls, r, 1);
    double to = class_in_cache(KT_GEMM_OPENBLAS, s, cls[c].calls, r, 0);
    in_step += s->seconds, in_cache += tl;
    printf("%-8s   %4d x %4d x %4d %s%s%s %4d calls %-8s %8.2f ms  %6.1f | %6.1f %6.1f | %+7.2f\n",
           g->name, s->m, s->n, s->k, s->trans_a ? "T" : "N", s->trans_b ? "T" : "N",
           s->accumulate ? "+" : " ", cls[c].calls, kt_gemm_name(on), 1e3 * s->seconds,
           f / s->seconds / 1e9, f / tl / 1e9, f / to / 1e9, 1e3 * (s->seconds - tl));
  }
  printf("%-8s   all: %.1f ms in the step, %.1f ms in cache on their libraries (%.3f)\n", g->name,
         1e3 * in_step, 1e3 * in_cache, in_cache > 0 ? in_step / in_cache : 0);
}

/* The step's library products again, in the step's order on the step's own
 * operands (stash, weights, gradients), nothing between them: as they come,
 * and each run twice with the second timed (its operands then in cache);
 * best of 3. Each with its epilogue, as in the step (its bias, residual and
 * GELU' on scratch operands from r). Against their time in the step, the first is what the work
 * between the products costs them, the second what their operands coming
 * from memory costs. Accumulating products add into their outputs again
 * (gradients, and activations laid down with a bias or residual), the
 * others rewrite theirs: the next step zeroes the gradients and computes
 * every activation afresh. */
static void in_order_row(const gpt_size *g, const kt__matmul_shape *sh, size_t n, kt_gemm_kind lib,
                         const replay_buf *r) {
  double in_step = 0, first = INFINITY, warm = INFINITY;
  for (size_t i = 0; i < n; i++) in_step += sh[i].out ? sh[i].seconds : 0;
  for (int t = 0; t < 3; t++) {
    double once = 0, second = 0;
    for (int pass = 0; pass < 2; pass++)
      for (size_t i = 0; i < n; i++) {
        const kt__matmul_shape *s = &sh[i];
        if (!s->out) continue;
        kt__epilogue ep = replay_epilogue(s, r);
        for (int rep = 0; rep <= pass; rep++) {
          double t0 = kt_now();
          kt__gemm_call_ep(lib, s->trans_a, s->trans_b, s->m, s->n, s->k, s->a, s->lda, s->b,
                           s->ldb, s->accumulate ? 1.0f : 0.0f, s->out, s->ldo,
                           s->epi ? &ep : NULL);
          if (rep == pass) *(pass ? &second : &once) += kt_now() - t0;
        }
      }
    first = fmin(first, once), warm = fmin(warm, second);
  }
  printf("%-8s the same products in the step's order on the step's own operands, nothing between "
         "them: %.1f ms as they come, %.1f ms each run twice (the second timed); %.1f ms in the "
         "step\n",
         g->name, 1e3 * first, 1e3 * warm, 1e3 * in_step);
}

/* ---- one core's FMA peak ---------------------------------------------------- *
 * CHAINS independent multiply-adds in flight, more than the FMA units'
 * latency times their count, so the loop runs at the units' throughput. */
#define CHAINS 12

#if defined(__x86_64__)
__attribute__((target("avx512f"))) static double fma_run_512(long iters, float *sink) {
  __m512 acc[CHAINS], mul = _mm512_set1_ps(0.999999f), add = _mm512_set1_ps(1e-7f);
  for (int c = 0; c < CHAINS; c++) acc[c] = _mm512_set1_ps((float)c);
  double t0 = kt_now();
  for (long i = 0; i < iters; i++)
    for (int c = 0; c < CHAINS; c++) acc[c] = _mm512_fmadd_ps(acc[c], mul, add);
  double t = kt_now() - t0;
  for (int c = 0; c < CHAINS; c++) *sink += _mm512_reduce_add_ps(acc[c]);
  return 2.0 * 16 * CHAINS * (double)iters / t / 1e9;
}

__attribute__((target("avx2,fma"))) static double fma_run_256(long iters, float *sink) {
  __m256 acc[CHAINS], mul = _mm256_set1_ps(0.999999f), add = _mm256_set1_ps(1e-7f);
  for (int c = 0; c < CHAINS; c++) acc[c] = _mm256_set1_ps((float)c);
  double t0 = kt_now();
  for (long i = 0; i < iters; i++)
    for (int c = 0; c < CHAINS; c++) acc[c] = _mm256_fmadd_ps(acc[c], mul, add);
  double t = kt_now() - t0;
  float lanes[8];
  for (int c = 0; c < CHAINS; c++) {
    _mm256_storeu_ps(lanes, acc[c]);
    for (int l = 0; l < 8; l++) *sink += lanes[l];
  }
  return 2.0 * 8 * CHAINS * (double)iters / t / 1e9;
}
#endif

/* GFLOP/s of one core at its widest FMA, best of 5 runs of ~0.1 s (0: no
 * AVX2/AVX-512 FMA, or not x86-64). */
static double fma_peak(void) {
  double best = 0;
  float sink = 0;
#if defined(__x86_64__)
  int wide = __builtin_cpu_supports("avx512f"), fma = __builtin_cpu_supports("fma");
  for (int r = 0; r < 5 && (wide || fma); r++) {
    double g = wide ? fma_run_512(20000000, &sink) : fma_run_256(20000000, &sink);
    best = g > best ? g : best;
  }
#endif
  return sink == sink ? best : 0; /* sink read: the chains are not optimised away */
}

/* fn(arg) on one of the first two cores, for on_two_cores. */
typedef struct {
  double (*fn)(void *);
  void *arg;
  int cpu;
  double seconds;
} core_job;

static void *core_thread(void *arg) {
  core_job *j = arg;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(j->cpu, &set);
  (void)pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  j->seconds = j->fn(j->arg);
  return NULL;
}

/* fn(a) and fn(b) at once, each on a thread pinned to one of the first two
 * cores (threads they start inherit it; the calling thread keeps its own
 * affinity): the mean of the seconds they return, 0 when there are not two
 * cores or a thread does not start. */
static double on_two_cores(double (*fn)(void *), void *a, void *b) {
  cpu_set_t allowed;
  int cpu[2], found = 0;
  if (sched_getaffinity(0, sizeof allowed, &allowed)) return 0;
  for (int c = 0; c < CPU_SETSIZE && found < 2; c++)
    if (CPU_ISSET(c, &allowed)) cpu[found++] = c;
  if (found < 2) return 0;
  core_job job[2] = {{fn, a, cpu[0], 0}, {fn, b, cpu[1], 0}};
  pthread_t th[2];
  if (pthread_create(&th[0], NULL, core_thread, &job[0])) return 0;
  if (pthread_create(&th[1], NULL, core_thread, &job[1])) {
    pthread_join(th[0], NULL);
    return 0;
  }
  pthread_join(th[0], NULL);
  pthread_join(th[1], NULL);
  return (job[0].seconds + job[1].seconds) / 2;
}

typedef struct {
  const kt__matmul_shape *sh;
  size_t n;
  replay_buf *buf;
} replay_job;

static double replay_one(void *arg) {
  replay_job *j = arg;
  return replay(j->sh, j->n, j->buf, 1);
}

/* The replay on the first two cores at once, one operand set each: the mean
 * of the two threads' seconds (0 when there are not two cores). */
static double replay_pair(const kt__matmul_shape *sh, size_t n, replay_buf *sets) {
  replay_job a = {sh, n, &sets[0]}, b = {sh, n, &sets[1]};
  return on_two_cores(replay_one, &a, &b);
}

typedef struct {
  kt_schedule sched;
  kt_runtime *rt;
  kt_data_source *data;
} pipeline;

static void pipeline_destroy(pipeline *p) {
  p->data->destroy(p->data);
  kt_runtime_destroy(p->rt);
  kt_schedule_free(&p->sched);
}

/* One step; returns its seconds and, through share, sgemm's share of the
 * ranks' busy time, through balance the mean rank's busy time over the
 * busiest rank's (1 = an even partition; each may be NULL). */
static double pipeline_step(pipeline *p, int step, double *share, double *balance) {
  kt_error err;
  kt_microbatch mbs[M_MB];
  if (p->data->fill(p->data, 0, step, 1, 1, M_MB, B_MB, mbs, &err)) die(&err);
  kt__matmul_reset_counters();
  kt_step_result res;
  if (kt_runtime_step(p->rt, step, mbs, 1, &res, &err)) die(&err);
  kt_metrics m;
  if (kt_timeline_metrics(kt_runtime_timeline(p->rt), &m, &err)) die(&err);
  if (share) *share = kt__matmul_seconds() / m.total_busy;
  if (balance) {
    double most = 0, sum = 0;
    for (int r = 0; r < m.p; r++) {
      sum += m.ranks[r].busy;
      if (m.ranks[r].busy > most) most = m.ranks[r].busy;
    }
    *balance = most > 0 ? sum / m.p / most : 0;
  }
  kt_metrics_free(&m);
  return res.seconds;
}

static kt_gemm_kind gemm_asked = KT_GEMM_AUTO; /* --gemm */

static void pipeline_create(pipeline *p, const gpt_size *g, int P, kt_gen_kind kind) {
  kt_error err;
  kt_gen_params sp = {.p = P, .m = M_MB};
  if (kt_generate(kind, &sp, &p->sched, &err)) die(&err);
  kt_runtime_config rc;
  kt_runtime_config_default(&rc);
  rc.schedule = &p->sched;
  rc.micro_batch = B_MB;
  kt_blas_set_threads(1); /* one core per rank: the replay runs on one core too */
  kt_model_config_default(&rc.model, KT_MODEL_GPT);
  rc.model.layers = g->layers;
  rc.model.hidden = g->hidden;
  rc.model.heads = g->heads;
  rc.model.seq_len = g->seq_len;
  rc.model.gemm = gemm_asked;
  if (kt_runtime_create_threads(&rc, &p->rt, &err)) die(&err);
  if (kt_data_text_source_create(NULL, g->seq_len, B_MB, 1, &p->data, &err)) die(&err);
  pipeline_step(p, 0, NULL, NULL); /* warm-up: stash buffers, OpenBLAS buffers */
}

/* Two steps of one P=1 pipeline (its rank thread, created by the step,
 * inherits the caller's core): the second's seconds, for step_pair. */
typedef struct {
  pipeline *p;
  int step;
} step_job;

static double step_twice(void *arg) {
  step_job *j = arg;
  pipeline_step(j->p, j->step, NULL, NULL); /* as in training: after a step of its own */
  return pipeline_step(j->p, j->step + 1, NULL, NULL);
}

/* Two P=1 pipelines of the same model stepping at once, one on each of the
 * first two cores: the mean of their second steps' seconds (0 when there
 * are not two cores). Against the P=1 step alone this is what the machine
 * gives two ranks running this very step at once, its memory traffic
 * included, where the sgemm replay pair measures the matmuls only. */
static double step_pair(pipeline *a, pipeline *b, int step) {
  step_job ja = {a, step}, jb = {b, step};
  return on_two_cores(step_twice, &ja, &jb);
}

/* A row of a ratio that bounds the P=2 speed-up at ideal x ratio: what
 * the machine allows (the sgemm replay on both cores at once, against one
 * core alone) or what the partition allows (the ranks' mean busy time over
 * the busiest's). */
static void bound_row(const bench_opts *o, const gpt_size *g, const char *key, const char *what_is,
                      const char *one_is, double *per_round, int rounds, double ideal) {
  bench_stat s = bench_stats(per_round, (size_t)rounds, 1);
  if (!(s.med > 0)) return; /* not measured (one core only) */
  char id[64], what[200], ref[160];
  printf("%-8s %s: %.3f (P=2 bound %.3f x, %.3f of ideal)\n", g->name, what_is, s.med,
         ideal * s.med, s.med);
  snprintf(id, sizeof id, "gpt.%s.%s", g->name, key);
  snprintf(what, sizeof what, "%s GPT, %s (median of per-round ratios)", g->name, what_is);
  snprintf(ref, sizeof ref, "%s (1.0): P=2 bound %.3f x = %.3f of ideal", one_is, ideal * s.med,
           s.med);
  bench_row(o, id, what, "ratio", s, ref, 1);
}

/* The three bounds on the P=2 speed-up: the sgemm replay and the P=1 step
 * on two cores at once, and the partition's balance. */
static void bound_rows(const bench_opts *o, const gpt_size *g, double *pair, double *steps_pair,
                       double *balance, int rounds, double ideal) {
  bound_row(o, g, "sgemm_two_cores", "sgemm replay on both cores at once, each core's rate",
            "one core alone", pair, rounds, ideal);
  bound_row(o, g, "steps_two_cores", "two P=1 steps at once, one a core, each one's rate",
            "the P=1 step alone", steps_pair, rounds, ideal);
  bound_row(o, g, "balance.P2", "P=2 ranks' busy time, mean over the busiest", "an even partition",
            balance, rounds, ideal);
}

/* The P=2 speed-up row of one schedule: per-round P=1 step over P=2 step,
 * against the ideal 2M/(M+1) of a balanced two-stage pipeline. */
static void speedup_row(const bench_opts *o, const gpt_size *g, const char *sched, const char *key,
                        double *speedup, double *t2, int rounds, double ideal) {
  int tokens = M_MB * B_MB * g->seq_len;
  bench_stat s_speed = bench_stats(speedup, (size_t)rounds, 1);
  bench_stat s_tok2 = bench_rate(t2, (size_t)rounds, tokens);
  char id[64], what[200], ref[160];
  snprintf(id, sizeof id, "gpt.%s.%s", g->name, key);
  snprintf(what, sizeof what,
           "%s GPT P=2 speed-up over P=1, %s (2 cores; %.0f tokens/s; median of per-round ratios)",
           g->name, sched, s_tok2.med);
  snprintf(ref, sizeof ref, "ideal 2M/(M+1) = %.3f, M=%d (target 0.9)", ideal, M_MB);
  bench_row(o, id, what, "x", s_speed, ref, ideal);
}

/* The P=1 rows: the step's GFLOP/s against the in-cache and out-of-cache
 * replays, and its tokens/s. */
static void step_rows(const bench_opts *o, const gpt_size *g, double flops, double *bare,
                      double *cold, double *t1, double *frac, double *frac_cold, double *share,
                      int rounds) {
  int tokens = M_MB * B_MB * g->seq_len;
  bench_stat s_bare = bench_rate(bare, (size_t)rounds, flops / 1e9);
  bench_stat s_cold = bench_rate(cold, (size_t)rounds, flops / 1e9);
  bench_stat s_step = bench_rate(t1, (size_t)rounds, flops / 1e9);
  bench_stat s_frac = bench_stats(frac, (size_t)rounds, 1);
  bench_stat s_frac_cold = bench_stats(frac_cold, (size_t)rounds, 1);
  bench_stat s_share = bench_stats(share, (size_t)rounds, 1);
  bench_stat s_tok1 = bench_rate(t1, (size_t)rounds, tokens);
  char id[64], what[200], ref[160];
  snprintf(id, sizeof id, "gpt.%s.gflops.P1", g->name);
  snprintf(what, sizeof what,
           "%s GPT (%s) step GFLOP/s, P=1, one core (sgemm %.0f%% of busy time; ratio: median "
           "of per-round ratios)",
           g->name, g->flags, 100 * s_share.med);
  snprintf(ref, sizeof ref, "bare sgemm, same shapes, same rounds (%.1f GFLOP/s; target %.2f)",
           s_bare.med, g->target);
  bench_row(o, id, what, "GFLOP/s", s_step, ref, s_step.med / s_frac.med);
  snprintf(id, sizeof id, "gpt.%s.gflops_cold.P1", g->name);
  snprintf(what, sizeof what, "%s GPT step GFLOP/s, P=1, against sgemm on operands out of cache",
           g->name);
  snprintf(ref, sizeof ref, "bare sgemm, same shapes, %d operand sets in turn (%.1f GFLOP/s)",
           COLD_SETS, s_cold.med);
  bench_row(o, id, what, "GFLOP/s", s_step, ref, s_step.med / s_frac_cold.med);
  snprintf(id, sizeof id, "gpt.%s.tokens.P1", g->name);
  snprintf(what, sizeof what, "%s GPT training tokens/s, P=1 (1 core)", g->name);
  bench_row(o, id, what, "tokens/s", s_tok1, NULL, 0);
}

/* The P=1 step against the same shapes on its own GEMM library (what the
 * work around the matmuls costs, the library's speed aside). */
static void lib_row(const bench_opts *o, const gpt_size *g, kt_gemm_kind lib, double flops,
                    double *bare, double *t1, double *frac, int rounds) {
  bench_stat s_lib = bench_rate(bare, (size_t)rounds, flops / 1e9);
  bench_stat s_step = bench_rate(t1, (size_t)rounds, flops / 1e9);
  bench_stat s_frac = bench_stats(frac, (size_t)rounds, 1);
  char id[64], what[200], ref[160];
  snprintf(id, sizeof id, "gpt.%s.gflops_lib.P1", g->name);
  snprintf(what, sizeof what, "%s GPT step GFLOP/s, P=1, against its own GEMM library (%s)",
           g->name, kt_gemm_name(lib));
  snprintf(ref, sizeof ref, "bare %s, same shapes, in cache (%.1f GFLOP/s)", kt_gemm_name(lib),
           s_lib.med);
  bench_row(o, id, what, "GFLOP/s", s_step, ref, s_step.med / s_frac.med);
}

/* The per-round series of one model. */
typedef struct {
  double bare[MAX_ROUNDS], cold[MAX_ROUNDS], t1[MAX_ROUNDS], t2[MAX_ROUNDS], share[MAX_ROUNDS];
  double frac[MAX_ROUNDS], frac_cold[MAX_ROUNDS], speedup[MAX_ROUNDS], speedup_zb[MAX_ROUNDS];
  double lib[MAX_ROUNDS], frac_lib[MAX_ROUNDS]; /* the replay on the step's own library */
  /* the step's matmuls' GFLOP/s inside it, and what they would need for the
   * step to take the bare OpenBLAS replay's time with the rest unchanged */
  double inside[MAX_ROUNDS], need[MAX_ROUNDS];
} rounds_of;

/* The printed line of one model: P=1 step, GFLOP/s, replays, sgemm share,
 * ratios, tokens/s at P=1 and P=2, speed-ups (1f1b, zb-h1) over the ideal. */
static void summary_line(const gpt_size *g, double flops, rounds_of *x, int rounds, double ideal) {
  int tokens = M_MB * B_MB * g->seq_len;
  size_t n = (size_t)rounds;
  double *t1 = x->t1; /* the series are sorted in place by their statistics */
  double tok1 = bench_rate(t1, n, tokens).med;
  printf("%-8s %9.2f %9.2f %9.2f %9.2f %8.0f%% %8.3f %8.3f %9.0f %9.0f %8.3f %8.3f %8.3f\n",
         g->name, 1e3 * tokens / tok1, bench_rate(t1, n, flops / 1e9).med,
         bench_rate(x->bare, n, flops / 1e9).med, bench_rate(x->cold, n, flops / 1e9).med,
         100 * bench_stats(x->share, n, 1).med, bench_stats(x->frac, n, 1).med,
         bench_stats(x->frac_cold, n, 1).med, tok1, bench_rate(x->t2, n, tokens).med,
         bench_stats(x->speedup, n, 1).med / ideal, bench_stats(x->speedup_zb, n, 1).med / ideal,
         bench_stats(x->speedup, n, 1).med);
}

/* One measured step of p (after a step of its own, as in training: a step
 * right after the replays, or after another pipeline's step, finds its
 * weights, optimizer state and stash evicted). */
static double warm_step(pipeline *p, int round, double *share, double *balance) {
  pipeline_step(p, 2 + 2 * round, NULL, NULL);
  return pipeline_step(p, 3 + 2 * round, share, balance);
}

/* The P=1 step's, the bare OpenBLAS replay's and the step's own library's
 * GFLOP/s as shares of one core's FMA peak. */
static void peak_line(const gpt_size *g, double flops, rounds_of *x, int rounds, double peak) {
  if (!(peak > 0)) return;
  size_t n = (size_t)rounds;
  double lib = bench_rate(x->lib, n, flops / 1e9).med;
  printf("%-8s of one core's FMA peak (%.1f GF/s): P=1 step %.0f%%, bare OpenBLAS %.0f%%, its own "
         "library %.0f%% (in cache)\n",
         g->name, peak, 100 * bench_rate(x->t1, n, flops / 1e9).med / peak,
         100 * bench_rate(x->bare, n, flops / 1e9).med / peak, 100 * lib / peak);
  double inside = bench_stats(x->inside, n, 1).med, need = bench_stats(x->need, n, 1).med;
  printf("%-8s the step's matmuls run at %.1f GF/s (%.0f%% of peak); for the step to take bare "
         "OpenBLAS's time with the rest as it is they would need %.1f GF/s (%.0f%% of peak; its "
         "own library in cache: %.1f)\n",
         g->name, inside, 100 * inside / peak, need, 100 * need / peak, lib);
}

static void bench_size(const bench_opts *o, const gpt_size *g, int rounds, double peak) {
  pipeline p1, p1b, p2, p2z;
  pipeline_create(&p1, g, 1, KT_SCHED_1F1B);
  pipeline_create(&p1b, g, 1, KT_SCHED_1F1B);
  pipeline_create(&p2, g, 2, KT_SCHED_1F1B);
  pipeline_create(&p2z, g, 2, KT_SCHED_ZB_H1);
  /* all warmed up by pipeline_create; record one step's shapes */
  kt__matmul_record(1);
  pipeline_step(&p1, 1, NULL, NULL);
  kt__matmul_record(0);
  double flops = kt__matmul_flops(), balance[MAX_ROUNDS], steps_pair[MAX_ROUNDS];
  size_t n;
  const kt__matmul_shape *sh = kt__matmul_recorded(&n);
  replay_buf bufs[COLD_SETS];
  for (int i = 0; i < COLD_SETS; i++) bufs[i] = replay_alloc(sh, n);
  replay(sh, n, bufs, 1);
  replay(sh, n, bufs, COLD_SETS);
  kt_gemm_choice plan;
  kt_gemm_kind lib = kt_chunk_gemm(kt_runtime_chunk(p1.rt, 0, 0), &plan);
  replay_lib(lib, sh, n, bufs);
  class_table(g, sh, n, lib, &plan, &bufs[0]);
  in_order_row(g, sh, n, lib, &bufs[0]);
  static rounds_of x; /* 9 series of MAX_ROUNDS: off the stack */
  double t2z[MAX_ROUNDS], pair[MAX_ROUNDS];
  for (int r = 0; r < rounds; r++) {
    x.bare[r] = replay(sh, n, bufs, 1);
    double both = replay_pair(sh, n, bufs);
    pair[r] = both > 0 ? x.bare[r] / both : 0;
    x.cold[r] = replay(sh, n, bufs, COLD_SETS);
    x.lib[r] = replay_lib(lib, sh, n, bufs);
    x.t1[r] = warm_step(&p1, r, &x.share[r], NULL);
    double rest = (1 - x.share[r]) * x.t1[r]; /* the step's time outside its matmuls */
    x.inside[r] = flops / 1e9 / (x.share[r] * x.t1[r]);
    x.need[r] = x.bare[r] > rest ? flops / 1e9 / (x.bare[r] - rest) : INFINITY;
    x.frac_lib[r] = x.lib[r] / x.t1[r];
    x.t2[r] = warm_step(&p2, r, NULL, &balance[r]);
    t2z[r] = warm_step(&p2z, r, NULL, NULL);
    x.frac[r] = x.bare[r] / x.t1[r], x.frac_cold[r] = x.cold[r] / x.t1[r];
    x.speedup[r] = x.t1[r] / x.t2[r], x.speedup_zb[r] = x.t1[r] / t2z[r];
    double both_steps = step_pair(&p1, &p1b, 1000 + 2 * r);
    steps_pair[r] = both_steps > 0 ? x.t1[r] / both_steps : 0;
  }
  double ideal = 2.0 * M_MB / (M_MB + 1);
  summary_line(g, flops, &x, rounds, ideal);
  peak_line(g, flops, &x, rounds, peak);
  step_rows(o, g, flops, x.bare, x.cold, x.t1, x.frac, x.frac_cold, x.share, rounds);
  lib_row(o, g, lib, flops, x.lib, x.t1, x.frac_lib, rounds);
  speedup_row(o, g, "1f1b", "speedup.P2", x.speedup, x.t2, rounds, ideal);
  speedup_row(o, g, "zb-h1", "speedup_zbh1.P2", x.speedup_zb, t2z, rounds, ideal);
  bound_rows(o, g, pair, steps_pair, balance, rounds, ideal);
  for (int i = 0; i < COLD_SETS; i++)
    free(bufs[i].a), free(bufs[i].b), free(bufs[i].c), free(bufs[i].d);
  pipeline_destroy(&p2z);
  pipeline_destroy(&p2);
  pipeline_destroy(&p1b);
  pipeline_destroy(&p1);
}

/* The P=1 step on auto's choices against the same step on each installed
 * library alone: a pipeline each, their steps alternating round by round
 * (the second of two timed), the median of the per-round ratios. What
 * auto's probe is for: the choice that runs the step fastest. */
static void library_steps(const bench_opts *o, const gpt_size *g, int rounds) {
  kt_gemm_kind kinds[KT_GEMM_COUNT] = {KT_GEMM_AUTO}, asked = gemm_asked;
  int n = 1;
  for (int k = 1; k < KT_GEMM_COUNT; k++)
    if (kt_gemm_available((kt_gemm_kind)k, NULL)) kinds[n++] = (kt_gemm_kind)k;
  static pipeline p[KT_GEMM_COUNT];
  static double t[KT_GEMM_COUNT][MAX_ROUNDS];
  for (int i = 0; i < n; i++) gemm_asked = kinds[i], pipeline_create(&p[i], g, 1, KT_SCHED_1F1B);
  gemm_asked = asked;
  kt_gemm_choice plan;
  kt_gemm_kind main_lib = kt_chunk_gemm(kt_runtime_chunk(p[0].rt, 0, 0), &plan);
  printf("%-8s auto's choice: %s", g->name, kt_gemm_name(main_lib));
  for (int i = 0; i < plan.n_shapes; i++) /* the classes it moved: transpositions, fixed dims */
    printf("%s %s%s [%d, %d] on %s (%.3fx)", i ? "," : ";", plan.shapes[i].trans_a ? "T" : "N",
           plan.shapes[i].trans_b ? "T" : "N", plan.shapes[i].dims[0], plan.shapes[i].dims[1],
           kt_gemm_name(plan.shapes[i].kind), plan.shapes[i].speedup);
  printf("\n");
  for (int r = 0; r < rounds; r++) {
    printf("%-8s round %d, P=1 step ms:", g->name, r + 1);
    for (int i = 0; i < n; i++) {
      t[i][r] = warm_step(&p[i], r, NULL, NULL);
      printf(" %s %.0f", kt_gemm_name(kinds[i]), 1e3 * t[i][r]);
    }
    printf("\n");
    fflush(stdout);
  }
  for (int i = 1; i < n; i++) {
    double q[MAX_ROUNDS];
    for (int r = 0; r < rounds; r++) q[r] = t[i][r] / t[0][r];
    bench_stat s = bench_stats(q, (size_t)rounds, 1);
    printf("%-8s the step on %s alone over auto's: median %.3f (%.3f-%.3f)\n", g->name,
           kt_gemm_name(kinds[i]), s.med, s.min, s.max);
    char id[64], what[160];
    snprintf(id, sizeof id, "gpt.%s.alone_over_auto.%s.P1", g->name, kt_gemm_name(kinds[i]));
    snprintf(what, sizeof what,
             "%s GPT, P=1 step on %s alone over auto's (median of per-round ratios)", g->name,
             kt_gemm_name(kinds[i]));
    bench_row(o, id, what, "ratio", s, "the step on auto's choices (1.0)", 1);
  }
  for (int i = 0; i < n; i++) pipeline_destroy(&p[i]);
}

int main(int argc, char **argv) {
  kt_blas_choose_core();
  kt_blas_set_threads(1);
  int kept = 1, libraries = 0; /* --gemm NAME and --libraries, taken out before bench_args */
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--libraries")) {
      libraries = 1;
    } else if (!strcmp(argv[i], "--gemm") && i + 1 < argc) {
      int k = kt_gemm_from_name(argv[++i]);
      if (k < 0) {
        fprintf(stderr, "bench_gpt: --gemm '%s': unknown library\n", argv[i]);
        return 2;
      }
      gemm_asked = (kt_gemm_kind)k;
    } else {
      argv[kept++] = argv[i];
    }
  }
  bench_opts o = bench_args(kept, argv, 9, 3, 3, MAX_ROUNDS);
  const gpt_size sizes[] = {
      {"default", "kaiten train defaults: L=4 C=64 NH=4 T=64", 4, 64, 4, 64, 0.70},
      {"larger", "--layers 8 --hidden 256 --heads 8 --seq-len 128", 8, 256, 8, 128, 1.00},
  };
  if (libraries) { /* the larger model only: the default's steps are too short to tell */
    printf("# GPT, M=%d b=%d, 1f1b, P=1, one thread: auto's choices against each library alone, "
           "%d rounds\n",
           M_MB, B_MB, o.reps);
    library_steps(&o, &sizes[1], o.reps);
    bench_close(&o);
    return 0;
  }
  const char *chosen, *core = kt_blas_core(&chosen);
  printf("# GPT, M=%d b=%d, 1f1b, one thread per rank (GEMM library: train's --gemm auto; "
         "OpenBLAS core: %s%s; kaiten's element-wise kernels: %s); median of %d rounds (bare "
         "OpenBLAS sgemm replays in and out of cache, P=1 step, P=2 step)\n",
         M_MB, B_MB, core, chosen ? ", chosen by kaiten" : "", kt_kernel_isa(), o.reps);
  printf("%-8s %9s %9s %9s %9s %9s %8s %8s %9s %9s %8s %8s %8s\n", "model", "P1 ms", "P1 GF/s",
         "bare GF/s", "cold GF/s", "sgemm", "P1/bare", "P1/cold", "P1 tok/s", "P2 tok/s", "/ideal",
         "zb/ideal", "speedup");
  double peak = fma_peak();
  if (peak > 0) {
    double runs[1] = {peak};
    bench_row(&o, "gpt.fma_peak", "one core's FMA peak (widest vectors, independent chains)",
              "GFLOP/s", bench_stats(runs, 1, 1), NULL, 0);
  }
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    bench_size(&o, &sizes[i], o.reps, peak);
  bench_close(&o);
  return 0;
}
