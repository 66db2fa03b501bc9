/* Threads transport: one process, one thread per rank, one bounded mailbox
 * per rank. A send copies the tensor into a message and queues it at the
 * receiver (it only waits when that mailbox is full); a receive takes the
 * matching (src, tag) message whenever it arrived, so every receive is in
 * effect posted before it is needed and communication overlaps compute. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kaiten/transport_impl.h"

typedef struct msg {
  struct msg *next;
  int src;
  uint64_t tag;
  size_t bytes, cap;
  unsigned char data[];
} msg;

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t arrived; /* a message was queued, or the run aborted */
  pthread_cond_t drained; /* a message was taken (room for waiting senders) */
  msg *head, *tail;
  size_t count;
} mailbox;

typedef struct msg_pool {
  pthread_mutex_t mu;
  msg *free; /* released messages, reused by later sends (no page faults) */
  int count;
} msg_pool;

#define POOL_MAX 256

typedef struct {
  int world;
  size_t cap;
  mailbox *boxes;
  msg_pool pool;
  atomic_int aborted;
  pthread_mutex_t abort_mu;
  char abort_reason[KT_ERROR_LEN];
} fabric;

static void deadline_after(struct timespec *ts, double seconds) {
  clock_gettime(CLOCK_MONOTONIC, ts);
  double whole = (double)(long)seconds;
  ts->tv_sec += (time_t)whole;
  ts->tv_nsec += (long)((seconds - whole) * 1e9);
  if (ts->tv_nsec >= 1000000000L) {
    ts->tv_sec++;
    ts->tv_nsec -= 1000000000L;
  }
}

static kt_status aborted_status(fabric *f, kt_error *err) {
  pthread_mutex_lock(&f->abort_mu);
  kt_status st = kt_fail(err, KT_EPEER, "%s", f->abort_reason);
  pthread_mutex_unlock(&f->abort_mu);
  return st;
}

static msg *msg_get(fabric *f, size_t bytes) {
  pthread_mutex_lock(&f->pool.mu);
  msg **best = NULL;
  for (msg **pp = &f->pool.free; *pp; pp = &(*pp)->next)
    if ((*pp)->cap >= bytes && (!best || (*pp)->cap < (*best)->cap)) best = pp;
  msg *m = NULL;
  if (best) {
    m = *best;
    *best = m->next;
    f->pool.count--;
  }
  pthread_mutex_unlock(&f->pool.mu);
  if (!m) {
    m = malloc(sizeof *m + bytes);
    if (m) m->cap = bytes;
  }
  return m;
}

static void msg_put(fabric *f, msg *m) {
  pthread_mutex_lock(&f->pool.mu);
  if (f->pool.count < POOL_MAX) {
    m->next = f->pool.free;
    f->pool.free = m;
    f->pool.count++;
    m = NULL;
  }
  pthread_mutex_unlock(&f->pool.mu);
  free(m);
}

static kt_status th_send(kt_transport *t, int dst, uint64_t tag, const void *buf, size_t bytes,
                         kt_error *err) {
  fabric *f = t->ctx;
  if (dst < 0 || dst >= f->world)
    return kt_fail(err, KT_EINVAL, "rank %d sends to rank %d outside 0..%d", t->rank, dst,
                   f->world - 1);
  double t0 = kt_now();
  msg *m = msg_get(f, bytes);
  if (!m) return kt_fail(err, KT_ENOMEM, "rank %d: out of memory sending %zu bytes", t->rank, bytes);
  m->next = NULL;
  m->src = t->rank;
  m->tag = tag;
  m->bytes = bytes;
  if (bytes) memcpy(m->data, buf, bytes);
  mailbox *box = &f->boxes[dst];
  struct timespec dl;
  deadline_after(&dl, t->timeout);
  pthread_mutex_lock(&box->mu);
  while (box->count >= f->cap && !atomic_load(&f->aborted)) {
    if (pthread_cond_timedwait(&box->drained, &box->mu, &dl) == ETIMEDOUT) {
      pthread_mutex_unlock(&box->mu);
      msg_put(f, m);
      return kt_fail(err, KT_ETIMEOUT, "rank %d waited %g s to send to rank %d (mailbox full)",
                     t->rank, t->timeout, dst);
    }
  }
  if (atomic_load(&f->aborted)) {
    pthread_mutex_unlock(&box->mu);
    msg_put(f, m);
    return aborted_status(f, err);
  }
  if (box->tail) box->tail->next = m;
  else box->head = m;
  box->tail = m;
  box->count++;
  pthread_cond_broadcast(&box->arrived);
  pthread_mutex_unlock(&box->mu);
  t->bytes_sent += (int64_t)bytes;
  t->send_seconds += kt_now() - t0;
  return KT_OK;
}

static kt_status th_recv(kt_transport *t, int src, uint64_t tag, void *buf, size_t bytes,
                         kt_error *err) {
  fabric *f = t->ctx;
  mailbox *box = &f->boxes[t->rank];
  double t0 = kt_now();
  struct timespec dl;
  deadline_after(&dl, t->timeout);
  pthread_mutex_lock(&box->mu);
  for (;;) {
    if (atomic_load(&f->aborted)) {
      pthread_mutex_unlock(&box->mu);
      return aborted_status(f, err);
    }
    msg *prev = NULL;
    for (msg *m = box->head; m; prev = m, m = m->next) {
      if (m->src != src || m->tag != tag) continue;
      if (prev) prev->next = m->next;
      else box->head = m->next;
      if (box->tail == m) box->tail = prev;
      box->count--;
      pthread_cond_broadcast(&box->drained);
      pthread_mutex_unlock(&box->mu);
      kt_status st = KT_OK;
      if (m->bytes != bytes)
        st = kt_fail(err, KT_ERUNTIME, "rank %d expected %zu bytes from rank %d, got %zu", t->rank,
                     bytes, src, m->bytes);
      else if (bytes)
        memcpy(buf, m->data, bytes);
      msg_put(f, m);
      t->recv_wait_seconds += kt_now() - t0;
      return st;
    }
    if (pthread_cond_timedwait(&box->arrived, &box->mu, &dl) == ETIMEDOUT) {
      pthread_mutex_unlock(&box->mu);
      t->recv_wait_seconds += kt_now() - t0;
      return kt_fail(err, KT_ETIMEOUT, "rank %d waited %g s for rank %d", t->rank, t->timeout, src);
    }
  }
}

static kt_status th_barrier(kt_transport *t, kt_error *err) {
  float zero = 0;
  return kt_allreduce_generic(t, KT_GROUP_WORLD, &zero, 1, err);
}

static void th_abort(kt_transport *t, const char *reason) {
  fabric *f = t->ctx;
  pthread_mutex_lock(&f->abort_mu);
  if (!atomic_load(&f->aborted)) {
    snprintf(f->abort_reason, sizeof f->abort_reason, "%s", reason ? reason : "run aborted");
    atomic_store(&f->aborted, 1);
  }
  pthread_mutex_unlock(&f->abort_mu);
  for (int r = 0; r < f->world; r++) {
    pthread_mutex_lock(&f->boxes[r].mu);
    pthread_cond_broadcast(&f->boxes[r].arrived);
    pthread_cond_broadcast(&f->boxes[r].drained);
    pthread_mutex_unlock(&f->boxes[r].mu);
  }
}

static int th_aborted(kt_transport *t) { return atomic_load(&((fabric *)t->ctx)->aborted); }

static void th_destroy(kt_transport *t) { (void)t; }

static const kt_transport_ops threads_ops = {th_send,  th_recv,    NULL,      NULL,
                                             th_barrier, th_abort, th_aborted, th_destroy};

kt_status kt_transport_threads_create(int p, int d, double timeout, size_t mailbox_cap,
                                      kt_transport **handles, kt_error *err) {
  *handles = NULL;
  if (p < 1 || d < 1 || p > 4096 || d > 4096 || (long)p * d > 65536)
    return kt_fail(err, KT_EINVAL, "threads transport: bad layout P=%d D=%d", p, d);
  int world = p * d;
  fabric *f = calloc(1, sizeof *f);
  kt_transport *h = kt_calloc((size_t)world, sizeof *h);
  if (f) f->boxes = kt_calloc((size_t)world, sizeof *f->boxes);
  if (!f || !h || !f->boxes) {
    if (f) free(f->boxes);
    free(f);
    free(h);
    return kt_fail(err, KT_ENOMEM, "out of memory creating the threads transport");
  }
  f->world = world;
  f->cap = mailbox_cap ? mailbox_cap : 1024;
  atomic_init(&f->aborted, 0);
  pthread_mutex_init(&f->abort_mu, NULL);
  pthread_mutex_init(&f->pool.mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  for (int r = 0; r < world; r++) {
    pthread_mutex_init(&f->boxes[r].mu, NULL);
    pthread_cond_init(&f->boxes[r].arrived, &ca);
    pthread_cond_init(&f->boxes[r].drained, &ca);
    h[r] = (kt_transport){.ops = &threads_ops, .ctx = f, .rank = r, .world = world, .p = p,
                          .d = d, .timeout = timeout > 0 ? timeout : 60};
  }
  pthread_condattr_destroy(&ca);
  *handles = h;
  return KT_OK;
}

void kt_transport_threads_destroy(kt_transport *handles, int world) {
  if (!handles) return;
  fabric *f = handles[0].ctx;
  for (int r = 0; r < world; r++) {
    mailbox *b = &f->boxes[r];
    for (msg *m = b->head, *n; m; m = n) {
      n = m->next;
      free(m);
    }
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->arrived);
    pthread_cond_destroy(&b->drained);
  }
  pthread_mutex_destroy(&f->abort_mu);
  for (msg *m = f->pool.free, *n; m; m = n) {
    n = m->next;
    free(m);
  }
  pthread_mutex_destroy(&f->pool.mu);
  free(f->boxes);
  free(f);
  free(handles);
}
