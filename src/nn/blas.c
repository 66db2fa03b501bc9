/* OpenBLAS, loaded when a matrix product first needs it (dlopen), with one
 * thread until the program asks for more.
 *
 * OpenBLAS starts its thread pool in the constructor it runs when it is
 * loaded: linked into the program, every command (sim, plan, --version)
 * started it, and under a tight address-space limit (ulimit -v) a pool
 * thread retried a failed mmap forever and the program spun at exit, where
 * the pool is joined. Loaded here, a command that does no linear algebra
 * never loads it; loaded with OPENBLAS_NUM_THREADS=1 (unless the user set
 * it), it starts no pool thread until kt_blas_use_threads asks for them,
 * after checking that the address space holds their buffers: a run that
 * cannot have them ends with that reason, not in a spin. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "kaiten/model.h"
#include "nn/blas.h"
#include "nn/nn.h"

#ifndef KT_BLAS_SONAME
#define KT_BLAS_SONAME "libopenblas.so.0"
#endif
/* Address space OpenBLAS takes: the library, and per thread that runs a
 * matrix product (each caller and each pool thread) its buffer (128 MiB in
 * OpenBLAS 0.3 on x86-64), the malloc arena the buffer's allocation opens
 * in a new thread (64 MiB reserved, in a 128 MiB mapping) and a stack. */
#define LOAD_BYTES (32.0 * 1048576)
#define THREAD_BYTES (264.0 * 1048576)

kt__blas_api kt__blas;

static pthread_mutex_t load_mu = PTHREAD_MUTEX_INITIALIZER;
static int tried;
static kt_status load_status;
static char load_error[KT_ERROR_LEN];
static const char *chosen; /* the core kaiten asked for, or NULL */

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
  return kt_fail(err, KT_ENOMEM, "OpenBLAS on %d thread%s needs about %.0f MiB of address space "
                 "for its buffers; the address-space limit (ulimit -v) leaves %.0f MiB: raise it, "
                 "or run fewer ranks or threads (--threads-per-rank 1)", threads,
                 threads == 1 ? "" : "s", need / 1048576, left > 0 ? left / 1048576 : 0);
}

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
/* ---- which OpenBLAS kernels run the matmuls ------------------------------- *
 * A DYNAMIC_ARCH OpenBLAS picks its kernels from the CPU's family and model
 * when it loads. A release older than the CPU does not know the model and
 * falls back to its oldest x86-64 kernels: Debian 12's OpenBLAS 0.3.21 runs
 * an Intel family 6 model 207 (Emerald Rapids) on "Prescott" (SSE3), 3-5x
 * slower than the AVX-512 kernels the CPU runs. OpenBLAS reads
 * OPENBLAS_CORETYPE when it picks; when the user has not set it and the
 * library picked a core older than the CPU's vector units warrant, kaiten
 * sets it (SkylakeX for AVX-512, Haswell for AVX2 + FMA) and has OpenBLAS
 * pick again (its dynamic entry points, in DYNAMIC_ARCH builds only). The
 * program loads OpenBLAS at the start of main, before any thread exists
 * (setenv is not thread-safe). The environment is left as it was. */
static int is_pre_avx2(const char *core) {
  static const char *const old[] = {"Unknown", "Katmai",  "Coppermine", "Northwood", "Prescott",
                                    "Banias",  "Atom",    "Core2",      "Penryn",    "Dunnington",
                                    "Nehalem", "Athlon",  "Opteron",    "Opteron_SSE3",
                                    "Barcelona", "Nano", "Sandybridge", "Bobcat"};
  for (size_t i = 0; i < sizeof old / sizeof old[0]; i++)
    if (!strcmp(core, old[i])) return 1;
  return 0;
}

static void choose_core(void *lib) {
  void (*dyn_init)(void) = (void (*)(void))dlsym(lib, "gotoblas_dynamic_init");
  void (*dyn_quit)(void) = (void (*)(void))dlsym(lib, "gotoblas_dynamic_quit");
  if (!dyn_init || !dyn_quit || getenv("OPENBLAS_CORETYPE")) return;
  const char *core = kt__blas.corename();
  if (!core || !is_pre_avx2(core)) return;
  __builtin_cpu_init();
  const char *want = NULL;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
    want = "SkylakeX";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    want = "Haswell";
  if (!want || setenv("OPENBLAS_CORETYPE", want, 1)) return;
  dyn_quit();
  dyn_init();
  unsetenv("OPENBLAS_CORETYPE");
  chosen = want;
}
#else
static void choose_core(void *lib) { (void)lib; }
#endif

static kt_status load(kt_error *err) {
  const char *user = getenv("OPENBLAS_NUM_THREADS");
  kt_status st = room_for(0, LOAD_BYTES, err);
  if (st) return st;
  if (!user) setenv("OPENBLAS_NUM_THREADS", "1", 1); /* no pool threads yet */
  void *lib = dlopen(KT_BLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (!user) unsetenv("OPENBLAS_NUM_THREADS");
  if (!lib) return kt_fail(err, KT_ERUNTIME, "cannot load OpenBLAS: %s", dlerror());
  kt__blas_api api;
  *(void **)&api.sgemm = dlsym(lib, "cblas_sgemm");
  *(void **)&api.set_threads = dlsym(lib, "openblas_set_num_threads");
  *(void **)&api.get_threads = dlsym(lib, "openblas_get_num_threads");
  *(void **)&api.corename = dlsym(lib, "openblas_get_corename");
  if (!api.sgemm || !api.set_threads || !api.get_threads || !api.corename)
    return kt_fail(err, KT_ERUNTIME, "%s is not an OpenBLAS: it lacks %s", KT_BLAS_SONAME,
                   !api.sgemm ? "cblas_sgemm" : "openblas_set_num_threads and its kin");
  kt__blas = api;
  choose_core(lib);
  return KT_OK;
}

int kt__blas_room(int threads) { return room_for(threads, 0, NULL) == KT_OK; }

kt_status kt_blas_load(kt_error *err) {
  pthread_mutex_lock(&load_mu);
  if (!tried) {
    kt_error e = {{0}};
    tried = 1;
    load_status = load(&e);
    snprintf(load_error, sizeof load_error, "%s", e.msg);
  }
  kt_status st = load_status;
  pthread_mutex_unlock(&load_mu);
  return st ? kt_fail(err, st, "%s", load_error) : KT_OK;
}

kt_status kt_blas_use_threads(int n, int callers, kt_error *err) {
  kt_status st = kt_blas_load(err);
  if (st) return st;
  if (n < 1) n = 1;
  if ((st = room_for((callers > 0 ? callers : 1) + n - 1, 0, err))) return st;
  kt__blas.set_threads(n);
  return KT_OK;
}

void kt_blas_set_threads(int n) {
  if (!kt_blas_load(NULL)) kt__blas.set_threads(n > 0 ? n : 1);
}

int kt_blas_threads(void) { return kt_blas_load(NULL) ? 1 : kt__blas.get_threads(); }

const char *kt_blas_core(const char **chosen_by_kaiten) {
  const char *core = kt_blas_load(NULL) ? "none (OpenBLAS did not load)" : kt__blas.corename();
  if (chosen_by_kaiten) *chosen_by_kaiten = chosen;
  return core;
}

const char *kt_blas_choose_core(void) { return kt_blas_core(NULL); }
