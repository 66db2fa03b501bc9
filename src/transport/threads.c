/* Threads transport: one process, one thread per rank, one bounded mailbox
 * per rank. A send copies the tensor into a message and queues it at the
 * receiver (it only waits when that mailbox is full); a receive takes the
 * matching (src, tag) message whenever it arrived, so every receive is in
 * effect posted before it is needed and communication overlaps compute.
 *
 * A receiver that finds nothing registers itself as the mailbox's waiter
 * (source, tag, destination buffer) and sleeps on the mailbox's doorbell. A
 * matching send then hands the tensor over directly: it copies straight into
 * the waiting buffer and rings that one receiver's bell, which is the whole
 * wake-up on the critical path (no queued message, no second copy, no
 * broadcast, no mutex to re-take after waking).
 *
 * Without copies: a sender may fill a pooled message itself (buffer, then
 * send_buffer), and a receiver may take a message as it is (recv_lend,
 * release), so a tensor computed into a message reaches a receiver that
 * lends without being copied at all.
 *
 * Collectives meet in shared memory: an allreduce publishes each member's
 * buffer, and every member sums its own slice of all of them and writes the
 * sum back into each, so the work is split between the members and nothing
 * is copied through a message. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kaiten/transport_impl.h"
#include "transport/doorbell.h"

typedef struct msg {
  struct msg *next;
  int src;
  uint64_t tag;
  size_t bytes, cap;
  _Alignas(16) unsigned char data
      []; /* as aligned as malloc's buffers (a lent message is read as floats) */
} msg;

/* The state of a mailbox's receiver: who waits and how the hand-off went. */
enum { W_IDLE, W_WAITING, W_CLAIMED, W_DONE, W_ABORTED };

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t drained; /* a message was taken (room for waiting senders) */
  msg *head, *tail;
  size_t count;
  /* The receiver waiting in this mailbox (state W_WAITING, set under mu):
   * the message it wants and where it goes. A sender that matches claims it
   * under mu (W_CLAIMED), copies without the lock, then publishes W_DONE. */
  _Atomic int state;
  int want_src;
  uint64_t want_tag;
  void *want_buf;
  size_t want_bytes, got_bytes;
  int want_lend;       /* the receiver takes a message itself (recv_lend) ... */
  struct msg *got_msg; /* ... and this one was handed over, or NULL: copied into want_buf */
  kt_doorbell bell;    /* rung when state leaves W_WAITING / W_CLAIMED */
} mailbox;

typedef struct msg_pool {
  pthread_mutex_t mu;
  msg *free; /* released messages, reused by later sends (no page faults) */
  int count;
} msg_pool;

#define POOL_MAX 256

/* Where the members of one group meet for a collective: one per group kind
 * and leader (groups of a kind are disjoint). The last to arrive resets the
 * count and bumps the generation; the others wait for the bump. */
typedef struct {
  _Atomic uint32_t arrived, gen;
  kt_doorbell bell;
} meeting;

typedef struct {
  int world;
  size_t cap;
  mailbox *boxes;
  msg_pool pool;
  meeting *meet;         /* KT_GROUP_COUNT x world, by group kind and leader */
  _Atomic uint32_t *met; /* KT_GROUP_COUNT x world: meetings of a kind each rank came to */
  float **shared;        /* each rank's buffer in the allreduce it is in */
  size_t *shared_n;
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

/* Finishes a hand-off claimed under the mailbox lock: the message m itself
 * when the receiver takes messages and there is one (returns 1: m is the
 * receiver's now), else a copy of buf into the waiting buffer; then the
 * release of W_DONE and the receiver's bell. */
static int deliver(mailbox *box, const void *buf, size_t bytes, msg *m) {
  int passed = m && box->want_lend && bytes == box->want_bytes;
  box->got_msg = passed ? m : NULL;
  if (!passed && bytes == box->want_bytes && bytes) memcpy(box->want_buf, buf, bytes);
  box->got_bytes = bytes;
  atomic_store_explicit(&box->state, W_DONE, memory_order_release);
  kt_doorbell_ring(&box->bell);
  return passed;
}

/* Hands the message (buf, or the message m holding it) straight to the
 * receiver when it already waits for exactly (src, tag): 1, and *passed
 * says whether m went with it; 0 when it does not wait (the caller queues). */
static int hand_over(fabric *f, mailbox *box, int src, uint64_t tag, const void *buf, size_t bytes,
                     msg *m, int *passed) {
  *passed = 0;
  if (atomic_load_explicit(&box->state, memory_order_relaxed) != W_WAITING) return 0;
  pthread_mutex_lock(&box->mu);
  int match = atomic_load(&box->state) == W_WAITING && box->want_src == src &&
              box->want_tag == tag && !atomic_load(&f->aborted);
  if (match) atomic_store(&box->state, W_CLAIMED);
  pthread_mutex_unlock(&box->mu);
  if (match) *passed = deliver(box, buf, bytes, m);
  return match;
}

static msg *msg_of(void *data) { return (msg *)((unsigned char *)data - offsetof(msg, data)); }

static kt_status queue_msg(kt_transport *t, int dst, uint64_t tag, msg *m, size_t bytes, double t0,
                           kt_error *err);

static kt_status th_send(kt_transport *t, int dst, uint64_t tag, const void *buf, size_t bytes,
                         kt_error *err) {
  fabric *f = t->ctx;
  if (dst < 0 || dst >= f->world)
    return kt_fail(err, KT_EINVAL, "rank %d sends to rank %d outside 0..%d", t->rank, dst,
                   f->world - 1);
  double t0 = kt_now();
  mailbox *box = &f->boxes[dst];
  int passed;
  if (hand_over(f, box, t->rank, tag, buf, bytes, NULL, &passed)) {
    t->bytes_sent += (int64_t)bytes;
    t->send_seconds += kt_now() - t0;
    return KT_OK;
  }
  msg *m = msg_get(f, bytes);
  if (!m)
    return kt_fail(err, KT_ENOMEM, "rank %d: out of memory sending %zu bytes", t->rank, bytes);
  if (bytes) memcpy(m->data, buf, bytes);
  return queue_msg(t, dst, tag, m, bytes, t0, err);
}

/* A pooled message the caller fills, then sends with th_send_buffer. */
static void *th_buffer(kt_transport *t, int dst, size_t bytes) {
  (void)dst;
  msg *m = msg_get(t->ctx, bytes);
  return m ? m->data : NULL;
}

static void th_drop_buffer(kt_transport *t, void *buf) { msg_put(t->ctx, msg_of(buf)); }

/* Sends a filled th_buffer: the message itself goes to a receiver that
 * takes messages (or into the queue), without a copy. */
static kt_status th_send_buffer(kt_transport *t, int dst, uint64_t tag, void *buf, size_t bytes,
                                kt_error *err) {
  fabric *f = t->ctx;
  msg *m = msg_of(buf);
  if (dst < 0 || dst >= f->world) {
    msg_put(f, m);
    return kt_fail(err, KT_EINVAL, "rank %d sends to rank %d outside 0..%d", t->rank, dst,
                   f->world - 1);
  }
  double t0 = kt_now();
  int passed;
  if (hand_over(f, &f->boxes[dst], t->rank, tag, buf, bytes, m, &passed)) {
    if (!passed) msg_put(f, m);
    t->bytes_sent += (int64_t)bytes;
    t->send_seconds += kt_now() - t0;
    return KT_OK;
  }
  return queue_msg(t, dst, tag, m, bytes, t0, err);
}

/* Queues the filled message m at dst's mailbox (waiting while it is full),
 * or hands it to the receiver that started waiting for it meanwhile. */
static kt_status queue_msg(kt_transport *t, int dst, uint64_t tag, msg *m, size_t bytes, double t0,
                           kt_error *err) {
  fabric *f = t->ctx;
  mailbox *box = &f->boxes[dst];
  m->next = NULL;
  m->src = t->rank;
  m->tag = tag;
  m->bytes = bytes;
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
  if (atomic_load(&box->state) == W_WAITING && box->want_src == t->rank && box->want_tag == tag) {
    /* the receiver started waiting for it while this send copied: give it */
    atomic_store(&box->state, W_CLAIMED);
    pthread_mutex_unlock(&box->mu);
    if (!deliver(box, m->data, bytes, m)) msg_put(f, m);
    t->bytes_sent += (int64_t)bytes;
    t->send_seconds += kt_now() - t0;
    return KT_OK;
  }
  if (box->tail) box->tail->next = m;
  else box->head = m;
  box->tail = m;
  box->count++;
  pthread_mutex_unlock(&box->mu);
  t->bytes_sent += (int64_t)bytes;
  t->send_seconds += kt_now() - t0;
  return KT_OK;
}

/* Takes the queued message (src, tag) out of the box (under its lock). */
static msg *take_queued(mailbox *box, int src, uint64_t tag) {
  msg *prev = NULL;
  for (msg *m = box->head; m; prev = m, m = m->next) {
    if (m->src != src || m->tag != tag) continue;
    if (prev) prev->next = m->next;
    else box->head = m->next;
    if (box->tail == m) box->tail = prev;
    box->count--;
    pthread_cond_broadcast(&box->drained);
    return m;
  }
  return NULL;
}

static kt_status size_mismatch(kt_transport *t, int src, size_t want, size_t got, kt_error *err) {
  return kt_fail(err, KT_ERUNTIME, "rank %d expected %zu bytes from rank %d, got %zu", t->rank,
                 want, src, got);
}

/* Sleeps on the box's bell until a sender finished the hand-off (W_DONE),
 * the run aborted (W_ABORTED) or the deadline passed. A claimed hand-off is
 * always waited out: the sender is writing into buf. */
static int wait_handoff(mailbox *box, double deadline) {
  for (;;) {
    uint32_t seen = kt_doorbell_read(&box->bell);
    int s = atomic_load_explicit(&box->state, memory_order_acquire);
    if (s == W_DONE || s == W_ABORTED) return s;
    double left = deadline - kt_now();
    if (left <= 0 && s == W_WAITING) {
      pthread_mutex_lock(&box->mu);
      int idle = atomic_load(&box->state) == W_WAITING;
      if (idle) atomic_store(&box->state, W_IDLE); /* withdrawn: no sender may claim it now */
      pthread_mutex_unlock(&box->mu);
      if (idle) return W_IDLE;
      continue;
    }
    kt_doorbell_wait(&box->bell, seen, left > 0 ? left : 1e-3);
  }
}

/* A receive: a message already queued is copied into buf, or lent as it
 * is when loan is given (*loan = the message, *data = its bytes); otherwise
 * the receiver waits for the sender to hand the tensor straight into buf,
 * or (lending, from send_buffer) to hand over its message itself. */
static kt_status receive(kt_transport *t, int src, uint64_t tag, void *buf, size_t bytes,
                         const void **data, void **loan, kt_error *err) {
  fabric *f = t->ctx;
  mailbox *box = &f->boxes[t->rank];
  double t0 = kt_now();
  pthread_mutex_lock(&box->mu);
  if (atomic_load(&f->aborted)) {
    pthread_mutex_unlock(&box->mu);
    return aborted_status(f, err);
  }
  msg *m = take_queued(box, src, tag);
  if (m) {
    pthread_mutex_unlock(&box->mu);
    kt_status st = KT_OK;
    if (m->bytes != bytes) {
      st = size_mismatch(t, src, bytes, m->bytes, err);
    } else if (loan) {
      *data = m->data, *loan = m;
      m = NULL;
    } else if (bytes) {
      memcpy(buf, m->data, bytes);
    }
    if (m) msg_put(f, m);
    t->recv_wait_seconds += kt_now() - t0;
    return st;
  }
  box->want_src = src;
  box->want_tag = tag;
  box->want_buf = buf;
  box->want_bytes = bytes;
  box->want_lend = loan != NULL;
  box->got_msg = NULL;
  atomic_store(&box->state, W_WAITING);
  pthread_mutex_unlock(&box->mu);
  int s = wait_handoff(box, t0 + t->timeout);
  atomic_store(&box->state, W_IDLE);
  t->recv_wait_seconds += kt_now() - t0;
  if (s == W_ABORTED) return aborted_status(f, err);
  if (s == W_IDLE)
    return kt_fail(err, KT_ETIMEOUT, "rank %d waited %g s for rank %d", t->rank, t->timeout, src);
  if (box->got_bytes != bytes) return size_mismatch(t, src, bytes, box->got_bytes, err);
  if (box->got_msg) *data = box->got_msg->data, *loan = box->got_msg; /* handed over whole */
  return KT_OK;
}

static kt_status th_recv(kt_transport *t, int src, uint64_t tag, void *buf, size_t bytes,
                         kt_error *err) {
  return receive(t, src, tag, buf, bytes, NULL, NULL, err);
}

static kt_status th_recv_lend(kt_transport *t, int src, uint64_t tag, void *buf, size_t bytes,
                              const void **data, void **loan, kt_error *err) {
  return receive(t, src, tag, buf, bytes, data, loan, err);
}

static void th_release(kt_transport *t, void *loan) { msg_put(t->ctx, loan); }

/* The first member of the group that has not come to as many meetings of
 * its kind as this rank (the one a timed-out rank waits for), or -1. */
static int missing_member(kt_transport *t, kt_group g) {
  fabric *f = t->ctx;
  int *members = malloc(sizeof(int) * (size_t)f->world), late = -1;
  int count = members ? kt_group_members(t, g, members) : 0;
  _Atomic uint32_t *met = f->met + (size_t)g * (size_t)f->world;
  uint32_t mine = atomic_load(&met[t->rank]);
  for (int j = 0; j < count && late < 0; j++)
    if (atomic_load(&met[members[j]]) < mine) late = members[j];
  free(members);
  return late;
}

/* Waits until all `count` members of group g arrived at m (or the run
 * aborted, or the transport's timeout passed: the error names a member
 * that did not come). */
static kt_status meet(kt_transport *t, kt_group g, meeting *m, int count, kt_error *err) {
  fabric *f = t->ctx;
  atomic_fetch_add(&f->met[(size_t)g * (size_t)f->world + (size_t)t->rank], 1);
  uint32_t gen = atomic_load_explicit(&m->gen, memory_order_acquire);
  if (atomic_fetch_add_explicit(&m->arrived, 1, memory_order_acq_rel) + 1 == (uint32_t)count) {
    atomic_store_explicit(&m->arrived, 0, memory_order_relaxed);
    atomic_store_explicit(&m->gen, gen + 1, memory_order_release);
    kt_doorbell_ring(&m->bell);
    return KT_OK;
  }
  double deadline = kt_now() + t->timeout;
  for (;;) {
    uint32_t seen = kt_doorbell_read(&m->bell);
    if (atomic_load_explicit(&m->gen, memory_order_acquire) != gen) return KT_OK;
    if (atomic_load(&f->aborted)) return aborted_status(f, err);
    double left = deadline - kt_now();
    if (left <= 0) {
      int late = missing_member(t, g);
      if (late < 0)
        return kt_fail(err, KT_ETIMEOUT, "rank %d waited %g s in a collective", t->rank,
                       t->timeout);
      return kt_fail(err, KT_ETIMEOUT, "rank %d waited %g s in a collective for rank %d", t->rank,
                     t->timeout, late);
    }
    kt_doorbell_wait(&m->bell, seen, left);
  }
}

static kt_status th_barrier(kt_transport *t, kt_error *err) {
  fabric *f = t->ctx;
  return meet(t, KT_GROUP_WORLD, &f->meet[KT_GROUP_WORLD * f->world], f->world, err);
}

/* This member's slice [lo, hi) of every member's buffer: the sum in member
 * order (the generic allreduce's order, so the same bits), written back
 * into each buffer. In blocks, so that the copies read the sum from cache. */
static void sum_slice(float *const *bufs, int count, size_t lo, size_t hi) {
  enum { BLOCK = 4096 };
  for (size_t b = lo; b < hi; b += BLOCK) {
    size_t e = hi - b < BLOCK ? hi : b + BLOCK;
    float *acc = bufs[0];
    for (int j = 1; j < count; j++)
      for (size_t k = b; k < e; k++) acc[k] += bufs[j][k];
    for (int j = 1; j < count; j++) memcpy(bufs[j] + b, acc + b, (e - b) * sizeof(float));
  }
}

static kt_status th_allreduce(kt_transport *t, kt_group g, float *buf, size_t n, kt_error *err) {
  fabric *f = t->ctx;
  int *members = malloc(sizeof(int) * (size_t)f->world);
  float **bufs = malloc(sizeof(float *) * (size_t)f->world);
  if (!members || !bufs) {
    free(members);
    free(bufs);
    return kt_fail(err, KT_ENOMEM, "out of memory in allreduce");
  }
  int count = kt_group_members(t, g, members), me = 0;
  kt_status st = KT_OK;
  if (count > 1) {
    meeting *m = &f->meet[(int)g * f->world + members[0]];
    f->shared[t->rank] = buf;
    f->shared_n[t->rank] = n;
    st = meet(t, g, m, count, err); /* every buffer published */
    for (int j = 0; j < count && !st; j++) {
      if (members[j] == t->rank) me = j;
      bufs[j] = f->shared[members[j]];
      if (f->shared_n[members[j]] != n)
        st = kt_fail(err, KT_ERUNTIME, "rank %d allreduces %zu floats, rank %d %zu", t->rank, n,
                     members[j], f->shared_n[members[j]]);
    }
    if (!st) {
      size_t per = ((n + (size_t)count - 1) / (size_t)count + 15) & ~(size_t)15;
      size_t lo = per * (size_t)me < n ? per * (size_t)me : n;
      sum_slice(bufs, count, lo, n - lo < per ? n : lo + per);
      st = meet(t, g, m, count, err); /* every slice summed: the buffers are the callers' again */
    }
  }
  free(members);
  free(bufs);
  return st;
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
    mailbox *b = &f->boxes[r];
    pthread_mutex_lock(&b->mu);
    int waiting = atomic_load(&b->state) == W_WAITING; /* a claimed hand-off completes */
    if (waiting) atomic_store(&b->state, W_ABORTED);
    pthread_cond_broadcast(&b->drained);
    pthread_mutex_unlock(&b->mu);
    if (waiting) kt_doorbell_ring(&b->bell);
  }
  for (int i = 0; i < KT_GROUP_COUNT * f->world; i++) kt_doorbell_ring(&f->meet[i].bell);
}

static int th_aborted(kt_transport *t) { return atomic_load(&((fabric *)t->ctx)->aborted); }

static void th_destroy(kt_transport *t) { (void)t; }

static const kt_transport_ops threads_ops = {.send = th_send,
                                             .recv = th_recv,
                                             .allreduce = th_allreduce,
                                             .barrier = th_barrier,
                                             .abort = th_abort,
                                             .aborted = th_aborted,
                                             .destroy = th_destroy,
                                             .recv_lend = th_recv_lend,
                                             .release = th_release,
                                             .buffer = th_buffer,
                                             .send_buffer = th_send_buffer,
                                             .drop_buffer = th_drop_buffer};

static void free_fabric_arrays(fabric *f) {
  free(f->boxes);
  free(f->meet);
  free((void *)f->met);
  free(f->shared);
  free(f->shared_n);
}

kt_status kt_transport_threads_create(int p, int d, double timeout, size_t mailbox_cap,
                                      kt_transport **handles, kt_error *err) {
  *handles = NULL;
  if (p < 1 || d < 1 || p > 4096 || d > 4096 || (long)p * d > 65536)
    return kt_fail(err, KT_EINVAL, "threads transport: bad layout P=%d D=%d", p, d);
  int world = p * d;
  fabric *f = calloc(1, sizeof *f);
  kt_transport *h = kt_calloc((size_t)world, sizeof *h);
  if (f) {
    f->boxes = kt_calloc((size_t)world, sizeof *f->boxes);
    f->meet = kt_calloc((size_t)world * KT_GROUP_COUNT, sizeof *f->meet);
    f->met = kt_calloc((size_t)world * KT_GROUP_COUNT, sizeof *f->met);
    f->shared = kt_calloc((size_t)world, sizeof *f->shared);
    f->shared_n = kt_calloc((size_t)world, sizeof *f->shared_n);
  }
  if (!f || !h || !f->boxes || !f->meet || !f->met || !f->shared || !f->shared_n) {
    if (f) free_fabric_arrays(f);
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
    atomic_init(&f->boxes[r].state, W_IDLE);
    kt_doorbell_init(&f->boxes[r].bell, 0);
    pthread_cond_init(&f->boxes[r].drained, &ca);
    h[r] = (kt_transport){.ops = &threads_ops,
                          .ctx = f,
                          .rank = r,
                          .world = world,
                          .p = p,
                          .d = d,
                          .timeout = timeout > 0 ? timeout : 60};
  }
  for (int i = 0; i < world * KT_GROUP_COUNT; i++) kt_doorbell_init(&f->meet[i].bell, 0);
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
    pthread_cond_destroy(&b->drained);
  }
  pthread_mutex_destroy(&f->abort_mu);
  for (msg *m = f->pool.free, *n; m; m = n) {
    n = m->next;
    free(m);
  }
  pthread_mutex_destroy(&f->pool.mu);
  free_fabric_arrays(f);
  free(f);
  free(handles);
}
