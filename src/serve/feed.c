/* The live run's feed: the trainer hands each step to kt_server_push, which
 * copies it into a bounded single-producer, single-consumer ring and never
 * waits (a full ring drops the record and counts it). A pump thread drains
 * the ring into the stream's history and renders the latest step for the
 * page every render_every seconds: the prediction (costs calibrated on that
 * step, then simulated) and both Gantt charts are computed there, off the
 * trainer's thread, from that one step's record (never one step's
 * measurement with another's prediction).
 *
 * The pump runs at the trainer's priority: at nice 19 on cores the ranks
 * keep busy it got about 1% of a core, so a rendering of 10 ms took a
 * second of wall time, and spacing renderings by their wall time left the
 * page's step minutes behind. Renderings are spaced by the CPU time they
 * take instead: a costly one (thousands of actions) spaces the next one out
 * to keep rendering near 1% of a core (RENDER_SHARE), but never beyond
 * MAX_GAP, so the page's step stays within about a second of the run's.
 */
#define _GNU_SOURCE /* gettid */
#include <sys/resource.h>
#include <unistd.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve/serve_internal.h"

#define RENDER_SHARE 0.01
#define MAX_GAP 0.5 /* s: the longest spacing the CPU share may ask (render_every may be longer) */

/* CPU seconds this thread has used. */
static double thread_cpu(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void record_free(serve_record *r) {
  if (!r) return;
  free(r->ranks);
  if (r->timeline.p > 0) kt_timeline_free(&r->timeline);
  free(r);
}

static serve_record *record_copy(const kt_serve_step *in) {
  serve_record *r = kt_calloc(1, sizeof *r);
  if (!r) return NULL;
  r->step = in->step;
  r->skipped = in->skipped;
  int n = in->ranks && in->n_ranks > 0 ? in->n_ranks : 0;
  if (n && !(r->ranks = kt_calloc((size_t)n, sizeof *r->ranks))) goto fail;
  if (n) memcpy(r->ranks, in->ranks, (size_t)n * sizeof *r->ranks);
  r->n_ranks = n;
  const kt_timeline *t = in->timeline;
  if (t && t->p > 0 && t->n_events > 0) {
    if (kt_timeline_init(&r->timeline, t->p, t->time_unit, t->mem_unit)) goto fail;
    if (kt_timeline_reserve(&r->timeline, t->n_events, t->n_mem)) goto fail;
    memcpy(r->timeline.events, t->events, t->n_events * sizeof *t->events);
    if (t->n_mem) memcpy(r->timeline.mem, t->mem, t->n_mem * sizeof *t->mem);
    r->timeline.n_events = t->n_events;
    r->timeline.n_mem = t->n_mem;
  }
  return r;
fail:
  record_free(r);
  return NULL;
}

int kt_server_push(kt_server *s, const kt_serve_step *rec) {
  if (!s || s->live < 0 || !rec || atomic_load(&s->finishing)) return 1;
  size_t tail = atomic_load_explicit(&s->tail, memory_order_relaxed);
  size_t head = atomic_load_explicit(&s->head, memory_order_acquire);
  serve_record *r = tail - head < s->ring_cap ? record_copy(rec) : NULL;
  if (!r) {
    atomic_fetch_add(&s->dropped, 1);
    return 1;
  }
  s->ring[tail % s->ring_cap] = r;
  atomic_store_explicit(&s->tail, tail + 1, memory_order_release);
  sem_post(&s->wake);
  return 0;
}

/* The step shifted to start at 0, its prediction, and the message. */
static void render(kt_server *s, serve_record *r) {
  kt_timeline *m = &r->timeline;
  double t0 = INFINITY;
  for (size_t i = 0; i < m->n_events; i++)
    if (m->events[i].start < t0) t0 = m->events[i].start;
  for (size_t i = 0; i < m->n_events; i++) m->events[i].start -= t0, m->events[i].end -= t0;
  for (size_t i = 0; i < m->n_mem; i++) m->mem[i].t -= t0;
  kt_costs costs;
  kt_timeline pred;
  kt_error err;
  int have = 0;
  if (s->predict && s->predict(&s->sched, s->grad_accum, m, &costs, &pred, &err) == KT_OK) {
    have = 1;
  } else if (kt_timeline_init(&pred, m->p, "s", "B")) {
    return; /* out of memory: no rendering this time */
  }
  kt_buf msg;
  kt_buf_init(&msg);
  double periods[2] = {r->step.seconds, NAN}; /* the step as it ran */
  kt__serve_timeline_msg(&msg, s->live, r->step.step, m, &pred, have ? &costs : NULL, periods,
                         s->sched.v);
  if (have) kt_costs_free(&costs);
  kt__serve_publish_timeline(s, s->live, &msg);
  kt_buf_free(&msg);
  kt_timeline_free(&pred);
}

void kt__serve_idle_priority(void) {
  setpriority(PRIO_PROCESS, (id_t)gettid(), 19); /* this thread only (Linux); best effort */
}

static void *pump_main(void *arg) {
  kt_server *s = arg;
  serve_record *latest = NULL; /* newest step with a timeline, not yet rendered */
  double last_render = -INFINITY, gap = s->render_every;
  long long steps = s->steps_before; /* the end marker counts the run's steps */
  for (;;) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 100 * 1000 * 1000;
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    while (sem_timedwait(&s->wake, &ts) && errno == EINTR) {
    }
    /* read before draining: every record pushed before the finish is drained */
    int finishing = atomic_load(&s->finishing);
    kt_buf msg;
    kt_buf_init(&msg);
    size_t head = atomic_load_explicit(&s->head, memory_order_relaxed);
    size_t tail = atomic_load_explicit(&s->tail, memory_order_acquire);
    long long n = 0;
    for (; head != tail; head++, n++) {
      serve_record *r = s->ring[head % s->ring_cap];
      kt__serve_step_msg(&msg, s->live, &r->step, r->skipped, r->ranks, r->n_ranks);
      if (r->timeline.p > 0) {
        record_free(latest);
        latest = r;
      } else {
        record_free(r);
      }
      atomic_store_explicit(&s->head, head + 1, memory_order_release);
    }
    if (n) {
      pthread_mutex_lock(&s->lock);
      kt_buf_append(&s->history, msg.data ? msg.data : "", msg.len);
      s->steps += n;
      pthread_cond_broadcast(&s->changed);
      pthread_mutex_unlock(&s->lock);
      steps += n;
    }
    kt_buf_free(&msg);
    if (latest && (finishing || kt_now() - last_render >= gap)) {
      double cpu0 = thread_cpu();
      render(s, latest);
      record_free(latest);
      latest = NULL;
      last_render = kt_now(); /* the interval counts from the end of a rendering */
      double spaced = (thread_cpu() - cpu0) / RENDER_SHARE;
      if (spaced > MAX_GAP) spaced = MAX_GAP;
      gap = spaced > s->render_every ? spaced : s->render_every;
    }
    if (finishing) {
      kt_buf_init(&msg);
      kt__serve_end_msg(&msg, s->live, steps, s->end_reason);
      kt__serve_publish_end(s, s->live, &msg);
      kt_buf_free(&msg);
      return NULL;
    }
  }
}

kt_status kt__feed_start(kt_server *s, const kt_serve_live *live, int queue, kt_error *err) {
  const kt_schedule *src = live->schedule;
  if (!src) return kt_fail(err, KT_EINVAL, "the live run needs its schedule");
  /* a copy: the prediction of each rendered step simulates it */
  kt_status st = kt_schedule_copy(&s->sched, src, err);
  if (st) return st;
  s->grad_accum = live->grad_accum > 0 ? live->grad_accum : 1;
  s->predict = live->predict;
  s->ring_cap = queue > 0 ? (size_t)queue : 256;
  if (!st && !(s->ring = kt_calloc(s->ring_cap, sizeof *s->ring)))
    st = kt_fail(err, KT_ENOMEM, "out of memory");
  if (!st && sem_init(&s->wake, 0, 0)) st = kt_fail(err, KT_ERUNTIME, "cannot create a semaphore");
  if (!st && pthread_create(&s->pump, NULL, pump_main, s)) {
    sem_destroy(&s->wake);
    st = kt_fail(err, KT_ERUNTIME, "cannot start the server's feed thread");
  }
  if (st) return st;
  s->pump_started = 1;
  return KT_OK;
}

void kt__feed_finish(kt_server *s) {
  if (!s->pump_started) return;
  atomic_store(&s->finishing, 1);
  sem_post(&s->wake);
  pthread_join(s->pump, NULL);
  s->pump_started = 0;
  sem_destroy(&s->wake);
}

void kt__feed_free(kt_server *s) {
  if (s->ring) {
    size_t head = atomic_load(&s->head), tail = atomic_load(&s->tail);
    for (; head != tail; head++) record_free(s->ring[head % s->ring_cap]);
    free(s->ring);
    s->ring = NULL;
  }
  if (s->sched.ranks) kt_schedule_free(&s->sched);
}
