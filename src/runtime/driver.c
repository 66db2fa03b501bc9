/* The step driver: orders (a step, or a flush that validates the step
 * still pending) go to the local workers, one persistent thread each when
 * there are several, in the calling thread when there is one; a step's
 * result is taken once every local worker validated it. Under MPI world
 * rank 0 gathers replica 0's timelines of each step (the others send
 * theirs at the end of their step, so no rank waits for rank 0). */
#define _GNU_SOURCE /* pthread_setaffinity_np */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <time.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/internal.h"

/* ---- timelines: each step's, from every local rank and, under MPI, rank 0
 * gathering the others' ---- */

static uint64_t gather_tag(int seq, int part) {
  return KT_TAG_COLLECTIVE | 0x8000u | (((unsigned)seq & 0x3FFu) << 2) | (unsigned)part;
}

static int multi_process(const kt_runtime *rt) { return rt->n_local < rt->P * rt->D; }

/* A replica-0 rank of another process sends its step's timeline to world
 * rank 0 (the transports copy a message out when it is posted). */
static kt_status send_timeline(kt__worker *w, int step, kt_error *err) {
  const kt_timeline *ev = &w->ev[step % KT__RING]; /* step: the order's seq */
  int64_t counts[3] = {(int64_t)ev->n_events, (int64_t)ev->n_mem, (int64_t)ev->n_comm};
  kt_status st = kt_transport_send(w->t, 0, gather_tag(step, 0), counts, sizeof counts, err);
  if (!st)
    st = kt_transport_send(w->t, 0, gather_tag(step, 1), ev->events,
                           ev->n_events * sizeof(kt_event), err);
  if (!st)
    st = kt_transport_send(w->t, 0, gather_tag(step, 2), ev->mem, ev->n_mem * sizeof(kt_mem_sample),
                           err);
  if (!st)
    st = kt_transport_send(w->t, 0, gather_tag(step, 3), ev->comm, ev->n_comm * sizeof(kt_event),
                           err);
  return st;
}

static kt_status append(kt_timeline *t, const kt_event *ev, size_t n_ev, const kt_mem_sample *mem,
                        size_t n_mem, const kt_event *comm, size_t n_comm, kt_error *err) {
  for (size_t i = 0; i < n_ev; i++)
    if (kt_timeline_add_event(t, &ev[i])) return kt_fail(err, KT_ENOMEM, "out of memory");
  for (size_t i = 0; i < n_mem; i++)
    if (kt_timeline_add_mem(t, mem[i].rank, mem[i].t, mem[i].value))
      return kt_fail(err, KT_ENOMEM, "out of memory");
  for (size_t i = 0; i < n_comm; i++)
    if (kt_timeline_add_comm(t, &comm[i])) return kt_fail(err, KT_ENOMEM, "out of memory");
  return KT_OK;
}

/* World rank 0: the order's timeline of every other pipeline rank (step:
 * the order's seq). */
static kt_status receive_timelines(kt_runtime *rt, int step, kt_error *err) {
  kt_transport *t = rt->workers[0].t;
  for (int r = 1; r < rt->P; r++) {
    int src = kt_world_rank(r, 0, rt->D);
    int64_t counts[3];
    kt_status st = kt_transport_recv(t, src, gather_tag(step, 0), counts, sizeof counts, err);
    if (st) return st;
    for (int k = 0; k < 3; k++)
      if (counts[k] < 0 || counts[k] > (1 << 26))
        return kt_fail(err, KT_ERUNTIME, "bad timeline from rank %d", src);
    kt_event *ev = kt_calloc((size_t)counts[0] + 1, sizeof *ev);
    kt_mem_sample *mem = kt_calloc((size_t)counts[1] + 1, sizeof *mem);
    kt_event *comm = kt_calloc((size_t)counts[2] + 1, sizeof *comm);
    if (!ev || !mem || !comm) st = kt_fail(err, KT_ENOMEM, "out of memory");
    if (!st)
      st = kt_transport_recv(t, src, gather_tag(step, 1), ev, (size_t)counts[0] * sizeof *ev, err);
    if (!st)
      st =
          kt_transport_recv(t, src, gather_tag(step, 2), mem, (size_t)counts[1] * sizeof *mem, err);
    if (!st)
      st = kt_transport_recv(t, src, gather_tag(step, 3), comm, (size_t)counts[2] * sizeof *comm,
                             err);
    if (!st)
      st = append(&rt->timeline, ev, (size_t)counts[0], mem, (size_t)counts[1], comm,
                  (size_t)counts[2], err);
    free(ev);
    free(mem);
    free(comm);
    if (st) return st;
  }
  return KT_OK;
}

/* The order's timeline: replica 0's ranks, times from the step's start
 * (the earliest local start of its order, or its earliest event). */
static kt_status step_timeline(kt_runtime *rt, int seq, kt_error *err) {
  int slot = seq % KT__RING;
  kt_timeline *t = &rt->timeline;
  t->n_events = t->n_mem = t->n_comm = 0;
  double origin = INFINITY;
  kt_status st = KT_OK;
  for (int i = 0; i < rt->n_local && !st; i++) {
    const kt__worker *w = &rt->workers[i];
    origin = fmin(origin, w->out[slot].begin - rt->t_origin);
    if (w->replica != 0) continue;
    const kt_timeline *ev = &w->ev[slot];
    st = append(t, ev->events, ev->n_events, ev->mem, ev->n_mem, ev->comm, ev->n_comm, err);
  }
  if (!st && multi_process(rt) && rt->workers[0].world_rank == 0)
    st = receive_timelines(rt, seq, err);
  if (st) return st;
  for (size_t i = 0; i < t->n_events; i++) origin = fmin(origin, t->events[i].start);
  if (!isfinite(origin)) origin = 0;
  for (size_t i = 0; i < t->n_events; i++) t->events[i].start -= origin, t->events[i].end -= origin;
  for (size_t i = 0; i < t->n_mem; i++) t->mem[i].t -= origin;
  for (size_t i = 0; i < t->n_comm; i++) t->comm[i].start -= origin, t->comm[i].end -= origin;
  kt_timeline_sort(t);
  return KT_OK;
}

/* ---- the workers ---- */

static void order_done(kt__worker *w, const kt__order *o, kt_status st) {
  kt_runtime *rt = w->rt;
  if (!st && !o->flush && multi_process(rt) && w->replica == 0 && w->world_rank != 0)
    st = send_timeline(w, o->seq, &w->err);
  if (st && st != KT_EPEER) {
    char reason[KT_ERROR_LEN + 64];
    snprintf(reason, sizeof reason, "stopped because rank %d failed: %s", w->world_rank,
             w->err.msg);
    kt_transport_abort(w->t, reason);
  }
  pthread_mutex_lock(&rt->lock);
  if (st && !w->status) w->status = st;
  w->next_order++;
  w->began = 0;
  pthread_cond_broadcast(&rt->done);
  pthread_mutex_unlock(&rt->lock);
}

void kt__step_out_begin(kt__worker *w, const kt__order *o) {
  if (!o->flush)
    w->out[o->seq % KT__RING] = (kt__step_out){.seq = o->seq, .step = o->step, .begin = kt_now()};
}

void kt__worker_validated(kt__worker *w, kt__step_out *out) {
  pthread_mutex_lock(&w->rt->lock);
  out->valid = 1;
  pthread_cond_broadcast(&w->rt->done);
  pthread_mutex_unlock(&w->rt->lock);
}

static void *worker_loop(void *arg) {
  kt__worker *w = arg;
  kt_runtime *rt = w->rt;
  if (w->cpu >= 0) { /* best effort: a refusal leaves the thread where the kernel put it */
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(w->cpu, &set);
    (void)pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  }
  if (rt->cfg.synthetic) kt__synthetic_thread_setup();
  pthread_mutex_lock(&rt->lock);
  for (;;) {
    while (!rt->shutdown && w->next_order == rt->submitted) pthread_cond_wait(&rt->wake, &rt->lock);
    if (rt->shutdown) break;
    kt__order o = rt->orders[w->next_order % KT__RING];
    int failed = w->status != KT_OK;
    w->began = 1;
    kt__step_out_begin(w, &o);
    pthread_mutex_unlock(&rt->lock);
    kt_status st = failed ? w->status : kt__worker_order(w, &o, &w->err);
    order_done(w, &o, failed ? KT_OK : st);
    pthread_mutex_lock(&rt->lock);
  }
  pthread_mutex_unlock(&rt->lock);
  return NULL;
}

static kt_status start_threads(kt_runtime *rt, kt_error *err) {
  if (rt->threads || rt->n_local < 2) return KT_OK;
  if (!(rt->threads = kt_calloc((size_t)rt->n_local, sizeof *rt->threads)))
    return kt_fail(err, KT_ENOMEM, "out of memory");
  for (; rt->n_threads < rt->n_local; rt->n_threads++)
    if (pthread_create(&rt->threads[rt->n_threads], NULL, worker_loop, &rt->workers[rt->n_threads]))
      break;
  if (rt->n_threads == rt->n_local) return KT_OK;
  kt_transport_abort(rt->workers[0].t, "cannot start threads");
  return kt_fail(err, KT_ERUNTIME, "cannot start %d worker threads", rt->n_local);
}

void kt__driver_stop(kt_runtime *rt) {
  if (!rt->threads) return;
  pthread_mutex_lock(&rt->lock);
  rt->shutdown = 1;
  pthread_cond_broadcast(&rt->wake);
  pthread_mutex_unlock(&rt->lock);
  for (int i = 0; i < rt->n_threads; i++) pthread_join(rt->threads[i], NULL);
  free(rt->threads);
  rt->threads = NULL;
  rt->n_threads = 0;
}

/* The root cause is the first failure that is not a consequence of another
 * (KT_EPEER: stopped because a peer failed); NULL when none failed. Called
 * with the lock held or no thread running. */
static const kt__worker *root_failure(const kt_runtime *rt) {
  const kt__worker *failed = NULL;
  for (int i = 0; i < rt->n_local; i++) {
    const kt__worker *w = &rt->workers[i];
    if (w->status && (!failed || (failed->status == KT_EPEER && w->status != KT_EPEER))) failed = w;
  }
  return failed;
}

/* ---- orders ---- */

static int idle(const kt_runtime *rt) {
  for (int i = 0; i < rt->n_local; i++)
    if (rt->workers[i].next_order != rt->submitted) return 0;
  return 1;
}

/* The order the slowest worker runs next (lock held). */
static int slowest(const kt_runtime *rt) {
  int least = rt->submitted;
  for (int i = 0; i < rt->n_local; i++)
    if (rt->workers[i].next_order < least) least = rt->workers[i].next_order;
  return least;
}

/* Whether the order just before the last submitted was a step followed
 * without a barrier. */
static int chained(const kt_runtime *rt) {
  if (rt->submitted == 0) return 0;
  const kt__order *last = &rt->orders[(rt->submitted - 1) % KT__RING];
  return !last->flush && last->speculate;
}

static kt_status post(kt_runtime *rt, const kt__order *o, kt_error *err) {
  /* a flush whose step was taken has no result to take: its slot counts
   * no more (a worker that has yet to read it holds it: see below) */
  while (rt->completed < rt->submitted && rt->orders[rt->completed % KT__RING].flush)
    rt->completed++;
  int steps = 0;
  for (int i = rt->completed; i < rt->submitted; i++) steps += !rt->orders[i % KT__RING].flush;
  if (rt->submitted - rt->completed >= KT__RING - 1 || (!o->flush && steps >= KT__STEPS_IN_FLIGHT))
    return kt_fail(err, KT_EINVAL, "too many steps in flight: take a result first");
  kt_status st = start_threads(rt, err);
  if (st) return st;
  if (!o->flush && !chained(rt)) { /* a step after a barrier: a new clock origin */
    if (multi_process(rt) && (st = kt_transport_barrier(rt->workers[0].t, err))) return st;
    pthread_mutex_lock(&rt->lock);
    if (idle(rt)) rt->t_origin = kt_now();
    pthread_mutex_unlock(&rt->lock);
  }
  pthread_mutex_lock(&rt->lock);
  /* a slow worker may still have to read the order this one replaces */
  while (rt->threads && !root_failure(rt) && rt->submitted - slowest(rt) >= KT__RING)
    pthread_cond_wait(&rt->done, &rt->lock);
  rt->orders[rt->submitted % KT__RING] = *o;
  rt->orders[rt->submitted % KT__RING].seq = rt->submitted;
  rt->orders[rt->submitted % KT__RING].submitted = kt_now();
  rt->submitted++;
  pthread_cond_broadcast(&rt->wake);
  pthread_mutex_unlock(&rt->lock);
  if (rt->threads) return KT_OK;
  kt__worker *w = &rt->workers[0]; /* one local rank: it runs here */
  const kt__order *mine = &rt->orders[w->next_order % KT__RING];
  kt__step_out_begin(w, mine);
  st = w->status ? w->status : kt__worker_order(w, mine, &w->err);
  order_done(w, mine, st);
  return st ? kt_fail(err, st, "%s", w->err.msg) : KT_OK;
}

kt_status kt_runtime_submit(kt_runtime *rt, int step, const kt_microbatch *data, int update,
                            int speculate, int stop_on_nonfinite, int vote, kt_error *err) {
  if (step < 0) return kt_fail(err, KT_EINVAL, "step %d: expected >= 0", step);
  kt__order o = {.step = step,
                 .update = update,
                 .speculate = speculate && update,
                 .stop_on_nonfinite = stop_on_nonfinite,
                 .vote = vote,
                 .data = data};
  const kt_faults *f = rt->cfg.faults;
  if (f && f->n_points > 0 && step >= f->trace_onset && rt->fault_origin == 0)
    rt->fault_origin = kt_now(); /* a trace's clock starts (read once the order is posted) */
  return post(rt, &o, err);
}

kt_status kt_runtime_flush(kt_runtime *rt, kt_error *err) {
  if (!chained(rt)) return KT_OK; /* nothing pending */
  kt__order o = {.flush = 1};
  return post(rt, &o, err);
}

/* A stop asked for while steps are queued (lock held): the orders no
 * worker began are taken back, and when the last one left is a step that
 * runs ahead a flush follows it (its check). Only with worker threads:
 * every worker reads the orders under the lock, so all of them see the
 * same ones. */
static void retract(kt_runtime *rt) {
  int first = rt->completed; /* the first order some worker has not finished */
  for (int i = 0; i < rt->n_local; i++) {
    int at = rt->workers[i].next_order + rt->workers[i].began;
    if (at > first) first = at;
  }
  int n = 0;
  for (int q = first; q < rt->submitted; q++)
    if (!rt->orders[q % KT__RING].flush) {
      if (!n++) rt->retract_step = rt->orders[q % KT__RING].step;
    }
  if (!n) return;
  rt->submitted = first;
  rt->retracted += n;
  if (chained(rt)) { /* the step left last ran ahead: its check */
    kt__order f = {.flush = 1, .seq = rt->submitted, .submitted = kt_now()};
    rt->orders[rt->submitted % KT__RING] = f;
    rt->submitted++;
  }
  pthread_cond_broadcast(&rt->wake);
}

void kt_runtime_settle(kt_runtime *rt) {
  if (!rt->threads) return;
  pthread_mutex_lock(&rt->lock);
  while (!idle(rt)) pthread_cond_wait(&rt->done, &rt->lock);
  pthread_mutex_unlock(&rt->lock);
}

void kt_runtime_set_poll(kt_runtime *rt, int (*poll)(void *ctx), void *ctx) {
  rt->poll = poll, rt->poll_ctx = ctx;
}

int kt_runtime_retracted(kt_runtime *rt, int *first_step) {
  pthread_mutex_lock(&rt->lock);
  int n = rt->retracted;
  if (first_step) *first_step = rt->retract_step;
  rt->retracted = 0;
  pthread_mutex_unlock(&rt->lock);
  return n;
}

/* Waits for the workers (lock held); with a poll, wakes every 50 ms to ask
 * it whether to stop, and takes back the steps no worker began. */
static void wait_or_poll(kt_runtime *rt) {
  if (!rt->poll) {
    pthread_cond_wait(&rt->done, &rt->lock);
    return;
  }
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_nsec += 50 * 1000 * 1000;
  if (until.tv_nsec >= 1000000000) until.tv_sec++, until.tv_nsec -= 1000000000;
  if (pthread_cond_timedwait(&rt->done, &rt->lock, &until) != ETIMEDOUT) return;
  pthread_mutex_unlock(&rt->lock);
  int stop = rt->poll(rt->poll_ctx);
  pthread_mutex_lock(&rt->lock);
  if (stop) retract(rt);
}

/* Waits until every local worker validated the order's step, or one failed. */
static kt_status wait_valid(kt_runtime *rt, const kt__order *o, kt_error *err) {
  int slot = o->seq % KT__RING, step = o->step;
  pthread_mutex_lock(&rt->lock);
  for (;;) {
    int valid = 1, stuck = 0;
    for (int i = 0; i < rt->n_local; i++) {
      const kt__worker *w = &rt->workers[i];
      int ok = w->out[slot].valid && w->out[slot].seq == o->seq;
      valid &= ok;
      stuck |= !ok && w->next_order == rt->submitted; /* nothing left that would validate it */
    }
    const kt__worker *failed = root_failure(rt);
    if (failed && idle(rt)) { /* every worker is out of its orders (the transport fails fast) */
      pthread_mutex_unlock(&rt->lock);
      return kt_fail(err, failed->status, "%s", failed->err.msg);
    }
    if (failed) {
      pthread_cond_wait(&rt->done, &rt->lock);
      continue;
    }
    if (valid) break;
    if (o->seq >= rt->submitted) { /* taken back while it waited: never ran */
      pthread_mutex_unlock(&rt->lock);
      return kt_fail(err, KT_EINVAL, "step %d was taken back (a stop)", step + 1);
    }
    if (stuck) {
      pthread_mutex_unlock(&rt->lock);
      return kt_fail(err, KT_EINVAL,
                     "step %d ran ahead of its check and nothing followed it: "
                     "submit the next step or flush first",
                     step + 1);
    }
    wait_or_poll(rt);
  }
  pthread_mutex_unlock(&rt->lock);
  return KT_OK;
}

/* Pinned ranks keep a core each while nothing else wants it: once one
 * waited for its core over 5% of a step (another program busy there),
 * the kernel balances them for the rest of the run. Pinned beside one
 * busy loop, P=2 ran at about half the speed of unpinned MPI ranks. The
 * threads read their core when they start: only before they run. */
static void unpin_when_crowded(kt_runtime *rt, int slot, double step_seconds) {
  for (int i = 0; i < rt->n_local && !rt->cfg.keep_pinned; i++) {
    double waited = 0;
    const kt_timeline *ev = &rt->workers[i].ev[slot];
    for (size_t e = 0; e < ev->n_events; e++) waited += ev->events[e].ready_wait;
    if (rt->workers[i].cpu >= 0 && waited > 0.05 * step_seconds && waited > 1e-3)
      for (int k = 0; k < rt->n_local; k++) {
        rt->workers[k].cpu = -1;
        if (rt->threads) { /* a pinned thread goes back to every core */
          cpu_set_t all;
          CPU_ZERO(&all);
          if (!sched_getaffinity(0, sizeof all, &all))
            (void)pthread_setaffinity_np(rt->threads[k], sizeof all, &all);
        }
      }
  }
}

static void fill_result(kt_runtime *rt, const kt__order *o, kt_step_result *res) {
  int slot = o->seq % KT__RING;
  const kt__step_out *out = &rt->workers[0].out[slot];
  double done = 0;
  int rollbacks = 0, waited = 0;
  for (int i = 0; i < rt->n_local; i++) {
    done = fmax(done, rt->workers[i].out[slot].done);
    if (rt->workers[i].out[slot].rollbacks > rollbacks)
      rollbacks = rt->workers[i].out[slot].rollbacks;
    waited |= rt->workers[i].out[slot].waited;
  }
  *res = (kt_step_result){.loss = out->loss,
                          .grad_norm = out->grad_norm,
                          .lr = out->lr,
                          .sync_seconds = out->sync_seconds,
                          .tail_seconds = out->tail_seconds,
                          .nonfinite = out->nonfinite,
                          .nonfinite_stage = out->nonfinite_stage,
                          .nonfinite_what = out->nonfinite_what,
                          .step = o->step,
                          .rollbacks = rollbacks,
                          .cancelled = out->cancelled,
                          .vote = out->vote,
                          .waited = waited};
  /* from the end of the step before when they overlapped, else from this
   * one's submission: a run's period in steady state */
  double from = rt->last_speculated ? rt->last_done : o->submitted;
  res->seconds = done - from;
  rt->last_done = done;
  rt->last_speculated = o->speculate;
  /* the local transports' counters at the step's end, less the last step's */
  int64_t bytes = 0;
  double comm = 0;
  for (int i = 0; i < rt->n_local; i++)
    bytes += rt->workers[i].out[slot].bytes_sent, comm += rt->workers[i].out[slot].comm_seconds;
  res->bytes_sent = bytes - rt->bytes_mark, res->comm_seconds = comm - rt->comm_mark;
  rt->bytes_mark = bytes, rt->comm_mark = comm;
}

kt_status kt_runtime_complete(kt_runtime *rt, kt_step_result *res, kt_error *err) {
  memset(res, 0, sizeof *res);
  while (rt->completed < rt->submitted && rt->orders[rt->completed % KT__RING].flush)
    rt->completed++;
  if (rt->completed == rt->submitted) return kt_fail(err, KT_EINVAL, "no step is running");
  const kt__order *o = &rt->orders[rt->completed % KT__RING];
  kt_status st = wait_valid(rt, o, err);
  if (st) return st;
  fill_result(rt, o, res);
  if (!res->cancelled) st = step_timeline(rt, o->seq, err);
  if (!st && !res->cancelled) unpin_when_crowded(rt, o->seq % KT__RING, res->seconds);
  rt->completed++;
  return st;
}

kt_status kt_runtime_step(kt_runtime *rt, int step, const kt_microbatch *data, int update,
                          kt_step_result *res, kt_error *err) {
  memset(res, 0, sizeof *res);
  for (int i = rt->completed; i < rt->submitted; i++)
    if (!rt->orders[i % KT__RING].flush)
      return kt_fail(err, KT_EINVAL, "step %d is still in flight: take its result first",
                     rt->orders[i % KT__RING].step + 1);
  kt_status st = kt_runtime_flush(rt, err);
  if (!st) st = kt_runtime_submit(rt, step, data, update, 0, 0, 0, err);
  return st ? st : kt_runtime_complete(rt, res, err);
}

const kt_timeline *kt_runtime_timeline(const kt_runtime *rt) { return &rt->timeline; }
