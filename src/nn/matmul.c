/* The one OpenBLAS wrapper every matmul goes through, plus small kernels. */
#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/core.h"
#include "nn/nn.h"

/* Process-wide counters (every rank thread adds to them): FLOPs issued and
 * nanoseconds spent inside sgemm. */
static atomic_llong flops_issued, nanos_in;

/* Shape log for the benchmarks (off unless kt__matmul_record was called). */
static atomic_int recording;
static pthread_mutex_t shapes_mu = PTHREAD_MUTEX_INITIALIZER;
static kt__matmul_shape *shapes;
static size_t n_shapes, cap_shapes;

/* A product worth splitting between a pool's threads: each piece keeps at
 * least MIN_SPLIT rows or columns and the whole at least MIN_SPLIT_FLOPS. */
#define MIN_SPLIT 32
#define MIN_SPLIT_FLOPS 4e6

typedef struct {
  const float *a, *b;
  float *out;
  int m, n, k, lda, ldb, ldo, trans_a, trans_b, pieces, by_rows;
  float beta;
  kt_gemm_kind gemm;
} split_job;

/* Piece `task` of the product: a band of output rows (a's rows) or
 * columns (b's columns), each computed whole by the library. */
static void split_piece(void *arg, int task, int thread) {
  (void)thread;
  const split_job *j = arg;
  int len = j->by_rows ? j->m : j->n;
  int lo = (int)((long long)len * task / j->pieces), hi = (int)((long long)len * (task + 1) / j->pieces);
  if (j->by_rows) {
    const float *a = j->trans_a ? j->a + lo : j->a + (size_t)lo * j->lda;
    kt__gemm_call(j->gemm, j->trans_a, j->trans_b, hi - lo, j->n, j->k, a, j->lda, j->b, j->ldb,
                  j->beta, j->out + (size_t)lo * j->ldo, j->ldo);
  } else {
    const float *b = j->trans_b ? j->b + (size_t)lo * j->ldb : j->b + lo;
    kt__gemm_call(j->gemm, j->trans_a, j->trans_b, j->m, hi - lo, j->k, j->a, j->lda, b, j->ldb,
                  j->beta, j->out + lo, j->ldo);
  }
}

void kt__matmul_ld(float *out, int ldo, const float *a, int lda, const float *b, int ldb, int m,
                   int n, int k, int trans_a, int trans_b, float beta) {
  double t0 = kt_now();
  const kt__exec *e = kt__exec_current();
  int threads = e->in_task ? 1 : kt__pool_threads(e->pool), by_rows = m >= n;
  int len = by_rows ? m : n, pieces = len / MIN_SPLIT < threads ? len / MIN_SPLIT : threads;
  if (pieces > 1 && 2.0 * m * n * k >= MIN_SPLIT_FLOPS) {
    split_job j = {a, b, out, m, n, k, lda, ldb, ldo, trans_a, trans_b, pieces, by_rows, beta, e->gemm};
    kt__pool_run(e->pool, pieces, split_piece, &j);
  } else {
    kt__gemm_call(e->gemm, trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, out, ldo);
  }
  atomic_fetch_add_explicit(&nanos_in, (long long)((kt_now() - t0) * 1e9), memory_order_relaxed);
  atomic_fetch_add_explicit(&flops_issued, 2LL * m * n * k, memory_order_relaxed);
  if (atomic_load_explicit(&recording, memory_order_relaxed)) {
    pthread_mutex_lock(&shapes_mu);
    if (!kt_grow((void **)&shapes, &cap_shapes, n_shapes + 1, sizeof *shapes))
      shapes[n_shapes++] =
          (kt__matmul_shape){m, n, k, trans_a, trans_b, beta != 0.0f, lda, ldb, ldo};
    pthread_mutex_unlock(&shapes_mu);
  }
}

void kt__matmul(float *out, const float *a, const float *b, int m, int n, int k, int trans_a,
                int trans_b, float beta) {
  kt__matmul_ld(out, n, a, trans_a ? m : k, b, trans_b ? k : n, m, n, k, trans_a, trans_b, beta);
}

double kt__matmul_flops(void) { return (double)atomic_load(&flops_issued); }
double kt__matmul_seconds(void) { return 1e-9 * (double)atomic_load(&nanos_in); }
void kt__matmul_reset_counters(void) {
  atomic_store(&flops_issued, 0);
  atomic_store(&nanos_in, 0);
}

void kt__matmul_record(int on) {
  pthread_mutex_lock(&shapes_mu);
  if (on) n_shapes = 0;
  atomic_store(&recording, on);
  pthread_mutex_unlock(&shapes_mu);
}

const kt__matmul_shape *kt__matmul_recorded(size_t *n) {
  *n = n_shapes;
  return shapes;
}

/* The logged shapes on bare sgemm, packed operands (leading dimensions of
 * the shapes themselves) and beta 0: the fastest of reps (seconds; -1 out
 * of memory, 0 when nothing was logged). */
static double replay_log(int reps) {
  size_t big = 1;
  for (size_t i = 0; i < n_shapes; i++) {
    const kt__matmul_shape *s = &shapes[i];
    size_t need[3] = {(size_t)s->m * s->k, (size_t)s->k * s->n, (size_t)s->m * s->n};
    for (int j = 0; j < 3; j++) big = need[j] > big ? need[j] : big;
  }
  float *a = calloc(big, sizeof *a), *b = calloc(big, sizeof *b), *c = calloc(big, sizeof *c);
  double best = a && b && c ? 0 : -1;
  for (int r = 0; best >= 0 && n_shapes && r < reps; r++) {
    double t0 = kt_now();
    for (size_t i = 0; i < n_shapes; i++) {
      const kt__matmul_shape *s = &shapes[i];
      cblas_sgemm(CblasRowMajor, s->trans_a ? CblasTrans : CblasNoTrans,
                  s->trans_b ? CblasTrans : CblasNoTrans, s->m, s->n, s->k, 1.0f, a,
                  s->trans_a ? s->m : s->k, b, s->trans_b ? s->k : s->n, 0.0f, c, s->n);
    }
    double t = kt_now() - t0;
    best = r == 0 || t < best ? t : best;
  }
  free(a), free(b), free(c);
  return best;
}

kt_status kt_matmul_measure(kt_status (*work)(void *ctx, kt_error *err), void *ctx, int reps,
                            double *flops, double *sgemm_seconds, kt_error *err) {
  *flops = *sgemm_seconds = 0;
  double before = kt__matmul_flops();
  kt__matmul_record(1);
  kt_status st = work(ctx, err);
  kt__matmul_record(0);
  *flops = kt__matmul_flops() - before;
  if (st) return st;
  double t = replay_log(reps);
  if (t < 0) return kt_fail(err, KT_ENOMEM, "out of memory replaying the matmuls");
  *sgemm_seconds = t;
  return KT_OK;
}

void kt__rng_seed(kt__rng *r, uint64_t seed) { r->s = seed ^ 0x9E3779B97F4A7C15ull; }

uint64_t kt__rng_next(kt__rng *r) {
  uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

float kt__rng_uniform(kt__rng *r) { return (float)(kt__rng_next(r) >> 40) * (1.0f / 16777216.0f); }

float kt__rng_normal(kt__rng *r) {
  float u1 = kt__rng_uniform(r), u2 = kt__rng_uniform(r);
  if (u1 < 1e-7f) u1 = 1e-7f;
  return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}

uint64_t kt__unit_seed(uint64_t model_seed, int unit) {
  kt__rng r;
  kt__rng_seed(&r, model_seed * 0x100000001B3ull + (uint64_t)unit * 0x5851F42D4C957F2Dull + 1);
  return kt__rng_next(&r);
}

/* ---- which OpenBLAS kernels run the matmuls ------------------------------- *
 * A DYNAMIC_ARCH OpenBLAS picks its kernels from the CPU's family and model
 * when it loads. A release older than the CPU does not know the model and
 * falls back to its oldest x86-64 kernels: Debian 12's OpenBLAS 0.3.21 runs
 * an Intel family 6 model 207 (Emerald Rapids) on "Prescott" (SSE3), 3-5x
 * slower than the AVX-512 kernels the CPU runs. OpenBLAS reads
 * OPENBLAS_CORETYPE when it picks; when the user has not set it and the
 * library picked a core older than the CPU's vector units warrant, kaiten
 * sets it (SkylakeX for AVX-512, Haswell for AVX2 + FMA) and has OpenBLAS
 * pick again when the program asks (kt_blas_choose_core), which it does at
 * the start of main, before any thread or matmul exists (setenv is not
 * thread-safe). The environment is left as it was. Elsewhere (another architecture, a static
 * single-target OpenBLAS without the dynamic entry points) nothing changes. */
static const char *chosen; /* the core kaiten asked for, or NULL */

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
/* Exported by DYNAMIC_ARCH builds only: weak, so other builds still link. */
extern void gotoblas_dynamic_init(void) __attribute__((weak));
extern void gotoblas_dynamic_quit(void) __attribute__((weak));

/* Cores with neither AVX2 nor AVX-512 kernels: what an unknown CPU gets. */
static int is_pre_avx2(const char *core) {
  static const char *const old[] = {"Unknown", "Katmai",  "Coppermine", "Northwood", "Prescott",
                                    "Banias",  "Atom",    "Core2",      "Penryn",    "Dunnington",
                                    "Nehalem", "Athlon",  "Opteron",    "Opteron_SSE3",
                                    "Barcelona", "Nano", "Sandybridge", "Bobcat"};
  for (size_t i = 0; i < sizeof old / sizeof old[0]; i++)
    if (!strcmp(core, old[i])) return 1;
  return 0;
}

static void choose_blas_core(void) {
  if (!gotoblas_dynamic_init || !gotoblas_dynamic_quit || getenv("OPENBLAS_CORETYPE")) return;
  const char *core = openblas_get_corename();
  if (!core || !is_pre_avx2(core)) return;
  __builtin_cpu_init();
  const char *want = NULL;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    want = "SkylakeX";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    want = "Haswell";
  if (!want || setenv("OPENBLAS_CORETYPE", want, 1)) return;
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  unsetenv("OPENBLAS_CORETYPE");
  chosen = want;
}
#endif

const char *kt_blas_core(const char **chosen_by_kaiten) {
  if (chosen_by_kaiten) *chosen_by_kaiten = chosen;
  return openblas_get_corename();
}

const char *kt_blas_choose_core(void) {
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
  static int done;
  if (!done) done = 1, choose_blas_core();
#endif
  return openblas_get_corename();
}

/* Threads per rank for the chunks created from now on; the libraries
 * themselves always run one thread per call (gemm.c). */
static atomic_int rank_threads = 1;

void kt_blas_set_threads(int n) {
  atomic_store(&rank_threads, n > 0 ? n : 1);
  openblas_set_num_threads(1);
}

int kt_blas_threads(void) { return atomic_load(&rank_threads); }
