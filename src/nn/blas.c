/* OpenBLAS, loaded when the process first needs a matrix product.
 *
 * Loading OpenBLAS starts its thread pool and reads the CPU's features (its
 * constructor): milliseconds of every process that links it, and threads in
 * programs that never multiply a matrix (kaiten sim, compare, plan, report).
 * So nothing links it: the library is opened by name (KT_BLAS_SONAME, what
 * CMake found) on first use, from here alone, and its few entry points are
 * looked up once. kt_chunk_create loads it and fails with the loader's
 * reason when it cannot, so every product runs on a loaded library.
 *
 * OpenBLAS runs one thread per call, as BLIS and oneDNN do (gemm.c): a
 * rank's compute threads are kaiten's own (pool.c), kt_blas_set_threads
 * sets how many, and they split a large product between them. It is
 * loaded with OPENBLAS_NUM_THREADS=1 (unless the user set it), so it never
 * starts a pool thread of its own. Under a tight address-space limit
 * (ulimit -v) OpenBLAS retries a failed allocation of a thread's buffer
 * forever (a pool thread once spun at exit, where the pool is joined): the
 * room is checked before it loads, by a training run for all its threads
 * (kt_blas_check_room), and in each thread before its first product, which
 * is computed by the definition where OpenBLAS could not have its buffer. */
#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "core/internal.h"
#include "kaiten/model.h"
#include "nn/nn.h"

#ifndef KT_BLAS_SONAME
#define KT_BLAS_SONAME "libopenblas.so.0"
#endif

static struct {
  __typeof__(&cblas_sgemm) sgemm;
  void (*set_num_threads)(int);
  char *(*get_corename)(void);
  void (*dynamic_init)(void); /* DYNAMIC_ARCH builds only */
  void (*dynamic_quit)(void);
  char *(*get_config)(void);
} blas;
static pthread_once_t blas_once = PTHREAD_ONCE_INIT;
static kt_error blas_failure; /* why it could not be loaded */

/* Address space OpenBLAS takes: the library, and per thread that runs a
 * matrix product (each caller and each pool thread) its buffer (128 MiB in
 * OpenBLAS 0.3 on x86-64), the malloc arena the buffer's allocation opens
 * in a new thread (64 MiB reserved, in a 128 MiB mapping) and a stack. */
#define LOAD_BYTES (32.0 * 1048576)
#define THREAD_BYTES (264.0 * 1048576)

/* Address space the process may still map under RLIMIT_AS; -1: no limit. */
static double address_space_left(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_AS, &rl) || rl.rlim_cur == RLIM_INFINITY) return -1;
  long pages = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f) {
    if (fscanf(f, "%ld", &pages) != 1) pages = 0;
    fclose(f);
  }
  return (double)rl.rlim_cur - (double)pages * (double)sysconf(_SC_PAGE_SIZE);
}

/* KT_OK when the address space holds the library (base) and the buffers
 * of `threads` threads that run matrix products; ENOMEM with the reason. */
static kt_status room_for(int threads, double base, kt_error *err) {
  double left = address_space_left(), need = base + threads * THREAD_BYTES;
  if (left < 0 || left >= need) return KT_OK;
  return kt_fail(err, KT_ENOMEM,
                 "OpenBLAS on %d thread%s needs about %.0f MiB of address space "
                 "for its buffers; the address-space limit (ulimit -v) leaves %.0f MiB: raise it, "
                 "or run fewer ranks or threads (--threads-per-rank 1)",
                 threads, threads == 1 ? "" : "s", need / 1048576, left > 0 ? left / 1048576 : 0);
}

static void load(void) {
  static const char *const names[] = {"cblas_sgemm",           "openblas_set_num_threads",
                                      "openblas_get_corename", "gotoblas_dynamic_init",
                                      "gotoblas_dynamic_quit", "openblas_get_config"};
  void *fn[sizeof names / sizeof *names];
  if (room_for(0, LOAD_BYTES, &blas_failure)) return;
  const char *user = getenv("OPENBLAS_NUM_THREADS");
  if (!user) setenv("OPENBLAS_NUM_THREADS", "1", 1); /* no pool thread */
  kt_status st =
      kt__dl_open(KT_BLAS_SONAME, names, sizeof names / sizeof *names, 3, fn, &blas_failure);
  if (!user) unsetenv("OPENBLAS_NUM_THREADS");
  if (st) return;
  blas.set_num_threads = (void (*)(int))fn[1];
  blas.get_corename = (char *(*)(void))fn[2];
  blas.dynamic_init = (void (*)(void))fn[3];
  blas.dynamic_quit = (void (*)(void))fn[4];
  blas.get_config = (char *(*)(void))fn[5];
  blas.set_num_threads(1);                      /* its own threads: never (see above) */
  blas.sgemm = (__typeof__(&cblas_sgemm))fn[0]; /* the sign that it loaded */
}

kt_status kt__blas_load(kt_error *err) {
  pthread_once(&blas_once, load);
  if (!blas.sgemm) return kt_fail(err, KT_EIO, "%s", blas_failure.msg);
  return KT_OK;
}

/* C = A B + beta C by the definition, for a thread OpenBLAS cannot serve. */
static void sgemm_by_definition(int trans_a, int trans_b, int m, int n, int k, const float *a,
                                int lda, const float *b, int ldb, float beta, float *c, int ldc) {
  for (int i = 0; i < m; i++)
    for (int j = 0; j < n; j++) {
      double acc = 0;
      for (int q = 0; q < k; q++)
        acc += (double)(trans_a ? a[(size_t)q * lda + i] : a[(size_t)i * lda + q]) *
               (trans_b ? b[(size_t)j * ldb + q] : b[(size_t)q * ldb + j]);
      float *o = &c[(size_t)i * ldc + j];
      *o = (float)acc + (beta != 0.0f ? beta * *o : 0.0f);
    }
}

void kt__sgemm(int trans_a, int trans_b, int m, int n, int k, const float *a, int lda,
               const float *b, int ldb, float beta, float *c, int ldc) {
  if (kt__blas_load(NULL)) { /* unreachable through a chunk (see above): NaN, never stale data */
    for (int i = 0; i < m; i++)
      for (int j = 0; j < n; j++) c[(size_t)i * ldc + j] = NAN;
    return;
  }
  /* this thread's first product: is there room for the buffer OpenBLAS
   * would take for it? (A training run checks first and stops with the
   * reason, kt_blas_check_room; this is for what runs before, such as
   * the forward that measures activations.) */
  static _Thread_local int served = -1;
  if (served < 0) served = room_for(1, 0, NULL) == KT_OK;
  if (!served) {
    sgemm_by_definition(trans_a, trans_b, m, n, k, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  blas.sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
             trans_b ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
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
 * pick again when the program asks (kt_blas_choose_core), which a program
 * that multiplies matrices does at the start, before any thread or matmul
 * exists (setenv is not thread-safe). The environment is left as it was.
 * Elsewhere (another architecture, a single-target OpenBLAS without the
 * dynamic entry points) nothing changes. */
static const char *chosen; /* the core kaiten asked for, or NULL */

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
/* Cores with neither AVX2 nor AVX-512 kernels: what an unknown CPU gets. */
static int is_pre_avx2(const char *core) {
  static const char *const old[] = {
      "Unknown", "Katmai",       "Coppermine", "Northwood",  "Prescott",    "Banias",
      "Atom",    "Core2",        "Penryn",     "Dunnington", "Nehalem",     "Athlon",
      "Opteron", "Opteron_SSE3", "Barcelona",  "Nano",       "Sandybridge", "Bobcat"};
  for (size_t i = 0; i < sizeof old / sizeof old[0]; i++)
    if (!strcmp(core, old[i])) return 1;
  return 0;
}

static void choose_blas_core(void) {
  if (!blas.dynamic_init || !blas.dynamic_quit || getenv("OPENBLAS_CORETYPE")) return;
  const char *core = blas.get_corename();
  if (!core || !is_pre_avx2(core)) return;
  __builtin_cpu_init();
  const char *want = NULL;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    want = "SkylakeX";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) want = "Haswell";
  if (!want || setenv("OPENBLAS_CORETYPE", want, 1)) return;
  blas.dynamic_quit();
  blas.dynamic_init();
  unsetenv("OPENBLAS_CORETYPE");
  chosen = want;
}
#endif

const char *kt_blas_core(const char **chosen_by_kaiten) {
  if (chosen_by_kaiten) *chosen_by_kaiten = chosen;
  return kt__blas_load(NULL) ? "unavailable" : blas.get_corename();
}

const char *kt_blas_choose_core(void) {
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
  static int done;
  if (!done && !kt__blas_load(NULL)) done = 1, choose_blas_core();
#endif
  return kt_blas_core(NULL);
}

const char *kt__blas_config(void) {
  if (kt__blas_load(NULL)) return NULL;
  return blas.get_config ? blas.get_config() : "OpenBLAS";
}

/* Threads per rank for the chunks created from now on (pool.c). */
static atomic_int rank_threads = 1;

void kt_blas_set_threads(int n) { atomic_store(&rank_threads, n > 0 ? n : 1); }

int kt_blas_threads(void) { return atomic_load(&rank_threads); }

kt_status kt_blas_check_room(int threads, kt_error *err) {
  return room_for(threads > 0 ? threads : 1, 0, err);
}
