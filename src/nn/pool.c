/* A chunk's compute threads: the rank's own thread plus threads - 1
 * workers, started with the chunk (so they take the creating thread's
 * cores, not a rank thread's pinned one) and asleep between steps.
 *
 * kt__pool_run hands out task indices from one counter; the caller runs
 * tasks too and returns once every task has ended. A worker that finds no
 * job spins for a short while (the next kernel of a step comes within
 * microseconds) and then sleeps on a condition variable. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "kaiten/core.h"
#include "nn/nn.h"

#define SPIN_SECONDS 100e-6 /* how long an idle worker waits awake */

struct kt__pool {
  int n;              /* threads, the caller's included */
  pthread_t *threads; /* n - 1 workers */
  int started;        /* workers running */
  pthread_mutex_t mu;
  pthread_cond_t wake;
  int sleepers; /* under mu */
  atomic_int stop;
  atomic_uint gen; /* one more per job */
  atomic_int next; /* the next task index */
  atomic_int busy; /* workers not yet done with the current job */
  int n_tasks;     /* the current job (written before gen moves) */
  kt__task_fn fn;
  void *ctx;
  kt_gemm_kind gemm;
  const kt_gemm_choice *plan;
};

static _Thread_local kt__exec tls_exec = {NULL, KT_GEMM_OPENBLAS, 0, NULL};

const kt__exec *kt__exec_current(void) { return &tls_exec; }

kt__exec kt__exec_enter(kt__pool *pool, kt_gemm_kind gemm, const kt_gemm_choice *plan) {
  kt__exec old = tls_exec;
  tls_exec = (kt__exec){pool, gemm, 0, plan};
  return old;
}

void kt__exec_leave(kt__exec saved) { tls_exec = saved; }

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static void run_tasks(kt__pool *p, int thread) {
  int i;
  while ((i = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed)) < p->n_tasks)
    p->fn(p->ctx, i, thread);
}

/* Waits for a generation other than seen; returns it (or 0 with stop). */
static unsigned await_job(kt__pool *p, unsigned seen) {
  double t0 = kt_now();
  for (int spins = 0;; spins++) {
    unsigned g = atomic_load_explicit(&p->gen, memory_order_acquire);
    if (g != seen) return g;
    cpu_relax();
    if ((spins & 255) == 255 && kt_now() - t0 > SPIN_SECONDS) break;
  }
  pthread_mutex_lock(&p->mu);
  p->sleepers++;
  unsigned g;
  while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen &&
         !atomic_load(&p->stop))
    pthread_cond_wait(&p->wake, &p->mu);
  p->sleepers--;
  pthread_mutex_unlock(&p->mu);
  return g;
}

typedef struct {
  kt__pool *p;
  int index;
} worker_arg;

static void *worker_main(void *arg) {
  worker_arg w = *(worker_arg *)arg;
  free(arg);
  kt__pool *p = w.p;
  unsigned seen = 0;
  for (;;) {
    seen = await_job(p, seen);
    if (atomic_load(&p->stop)) return NULL;
    /* inside a task matmuls run whole, on the job's library */
    kt__exec saved = kt__exec_enter(NULL, p->gemm, p->plan);
    tls_exec.in_task = 1;
    run_tasks(p, w.index);
    kt__exec_leave(saved);
    atomic_fetch_sub_explicit(&p->busy, 1, memory_order_release);
  }
}

kt__pool *kt__pool_create(int threads) {
  if (threads < 2) return NULL;
  kt__pool *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->threads = calloc((size_t)threads - 1, sizeof *p->threads);
  if (!p->threads || pthread_mutex_init(&p->mu, NULL)) {
    free(p->threads);
    free(p);
    return NULL;
  }
  pthread_cond_init(&p->wake, NULL);
  p->n = 1;
  for (int i = 1; i < threads; i++) {
    worker_arg *w = malloc(sizeof *w);
    if (!w) break;
    *w = (worker_arg){p, i};
    if (pthread_create(&p->threads[i - 1], NULL, worker_main, w)) {
      free(w);
      break;
    }
    p->n++;
  }
  p->started = p->n - 1;
  if (p->n < 2) { /* no worker started: run serially */
    kt__pool_destroy(p);
    return NULL;
  }
  return p;
}

void kt__pool_destroy(kt__pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  atomic_store(&p->stop, 1);
  atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->started; i++) pthread_join(p->threads[i], NULL);
  pthread_cond_destroy(&p->wake);
  pthread_mutex_destroy(&p->mu);
  free(p->threads);
  free(p);
}

int kt__pool_threads(const kt__pool *p) { return p ? p->n : 1; }

void kt__pool_run(kt__pool *p, int n_tasks, kt__task_fn fn, void *ctx) {
  if (n_tasks <= 0) return;
  if (!p || n_tasks == 1) {
    for (int i = 0; i < n_tasks; i++) fn(ctx, i, 0);
    return;
  }
  p->n_tasks = n_tasks, p->fn = fn, p->ctx = ctx, p->gemm = tls_exec.gemm;
  p->plan = tls_exec.plan;
  atomic_store_explicit(&p->next, 0, memory_order_relaxed);
  atomic_store_explicit(&p->busy, p->n - 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
  pthread_mutex_lock(&p->mu);
  if (p->sleepers) pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  kt__exec saved = tls_exec;
  tls_exec.in_task = 1;
  run_tasks(p, 0);
  tls_exec = saved;
  /* workers finish within a task's time; yield now and then in case one
   * waits for this very core (more threads than cores) */
  for (int spins = 1; atomic_load_explicit(&p->busy, memory_order_acquire) > 0; spins++)
    if (spins % 4096) cpu_relax();
    else sched_yield();
}

/* ---- row ranges ----------------------------------------------------------- */

typedef struct {
  kt__range_fn fn;
  void *ctx;
  int n, block;
} range_job;

static void range_task(void *arg, int task, int thread) {
  const range_job *j = arg;
  int lo = task * j->block, hi = lo + j->block < j->n ? lo + j->block : j->n;
  j->fn(j->ctx, lo, hi, task, thread);
}

int kt__blocks(int n, int block) { return n <= 0 ? 0 : (n + block - 1) / block; }

void kt__parallel_range(int n, int block, kt__range_fn fn, void *ctx) {
  const kt__exec *e = kt__exec_current();
  range_job j = {fn, ctx, n, block};
  kt__pool_run(e->in_task ? NULL : e->pool, kt__blocks(n, block), range_task, &j);
}
