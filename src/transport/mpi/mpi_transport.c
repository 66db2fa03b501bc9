/* MPI transport (OpenMPI): non-blocking point-to-point with receives posted
 * early, all-reduce on split communicators, a receive that honours the
 * watchdog timeout. One handle per process.
 *
 * Ranks on the same host share one doorbell each (kt_doorbell, in an MPI
 * shared-memory window): a sender rings the receiver's bell after posting
 * the message, so a rank blocked in a receive sleeps until its data is there
 * instead of polling MPI_Test with sleeps (whose period was the wake-up
 * latency of every hand-off). Send and receive buffers are reused.
 * Point-to-point messages between ranks on one host go through inboxes in
 * shared memory (inbox.h) and skip MPI's protocol when they fit; a result
 * computed straight into the receiver's inbox slot (mpi_buffer) and read
 * there (mpi_recv_lend) is never copied. */
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "transport/mpi/mpi_internal.h"

/* A pending with room for bytes: the smallest pooled one that fits. */
static pending *pend_get(mpi_ctx *c, size_t bytes) {
  pending **best = NULL;
  for (pending **pp = &c->pool; *pp; pp = &(*pp)->next)
    if ((*pp)->bytes >= bytes && (!best || (*pp)->bytes < (*best)->bytes)) best = pp;
  if (best) {
    pending *p = *best;
    *best = p->next;
    c->pooled--;
    return p;
  }
  pending *p = malloc(sizeof *p + bytes);
  if (p) p->bytes = bytes;
  return p;
}

static void pend_put(mpi_ctx *c, pending *p) {
  if (c->pooled >= POOL_MAX) {
    free(p);
    return;
  }
  p->next = c->pool;
  c->pool = p;
  c->pooled++;
}

/* 64-bit kaiten tag -> MPI tag: [30] other/collective, [29] gradient,
 * [28:20] stage, [19:0] micro-batch. Rounds need no bits: MPI does not let
 * messages with the same (source, tag) overtake each other. */
static int mpi_tag(uint64_t tag) {
  if ((tag & KT_TAG_COLLECTIVE) == KT_TAG_COLLECTIVE) return (int)((1u << 30) | (tag & 0xFFFFu));
  unsigned kind = (unsigned)(tag >> 60) & 1u, stage = (unsigned)(tag >> 24) & 0x1FFu;
  unsigned mb = (unsigned)tag & 0xFFFFFu;
  return (int)((kind << 29) | (stage << 20) | mb);
}

static void reclaim_sends(mpi_ctx *c) {
  pending **pp = &c->sends;
  while (*pp) {
    int flag = 0;
    MPI_Test(&(*pp)->req, &flag, MPI_STATUS_IGNORE);
    if (flag) {
      pending *done = *pp;
      *pp = done->next;
      pend_put(c, done);
    } else {
      pp = &(*pp)->next;
    }
  }
}

static kt_status mpi_send(kt_transport *t, int dst, uint64_t tag, const void *buf, size_t bytes,
                          kt_error *err) {
  mpi_ctx *c = t->ctx;
  double t0 = kt_now();
  if (c->inboxes && c->inboxes[dst] && dst != t->rank &&
      kt_inbox_put(c->inboxes[dst], t->rank, tag, ++c->sent_seq, buf, bytes)) {
    kt_doorbell_ring(c->bells[dst]);
    t->bytes_sent += (int64_t)bytes;
    t->send_seconds += kt_now() - t0;
    return KT_OK;
  }
  reclaim_sends(c);
  if (bytes > (size_t)INT32_MAX)
    return kt_fail(err, KT_EINVAL, "message of %zu bytes too large for MPI", bytes);
  pending *p = pend_get(c, bytes);
  if (!p) return kt_fail(err, KT_ENOMEM, "rank %d: out of memory sending", t->rank);
  if (bytes) memcpy(p->data, buf, bytes);
  p->len = bytes;
  if (MPI_Isend(p->data, (int)bytes, MPI_BYTE, dst, mpi_tag(tag), c->world, &p->req) !=
      MPI_SUCCESS) {
    pend_put(c, p);
    return kt_fail(err, KT_ERUNTIME, "rank %d: MPI_Isend to rank %d failed", t->rank, dst);
  }
  p->next = c->sends;
  c->sends = p;
  if (c->bells && c->bells[dst]) kt_doorbell_ring(c->bells[dst]); /* the message is posted */
  t->bytes_sent += (int64_t)bytes;
  t->send_seconds += kt_now() - t0;
  return KT_OK;
}

/* A message to a rank on this host can be written straight into a slot of
 * its inbox (then published by mpi_send_buffer: no copy at all). */
static void *mpi_buffer(kt_transport *t, int dst, size_t bytes) {
  mpi_ctx *c = t->ctx;
  if (!c->inboxes || dst < 0 || dst >= t->world || dst == t->rank || !c->inboxes[dst]) return NULL;
  return kt_inbox_claim(c->inboxes[dst], bytes);
}

static kt_status mpi_send_buffer(kt_transport *t, int dst, uint64_t tag, void *buf, size_t bytes,
                                 kt_error *err) {
  (void)err;
  mpi_ctx *c = t->ctx;
  double t0 = kt_now();
  kt_inbox_publish(buf, t->rank, tag, ++c->sent_seq, bytes);
  kt_doorbell_ring(c->bells[dst]);
  t->bytes_sent += (int64_t)bytes;
  t->send_seconds += kt_now() - t0;
  return KT_OK;
}

static void mpi_drop_buffer(kt_transport *t, void *buf) {
  (void)t;
  kt_inbox_unclaim(buf);
}

/* Whether a message of bytes from src may come through this rank's inbox
 * (src on this host, the message fits a slot); both sides decide alike. A
 * larger one keeps MPI's path: a receive posted early, MPI_Test. */
static int local_sized(const mpi_ctx *c, const kt_transport *t, int src, size_t bytes) {
  return c->inboxes && src >= 0 && src < t->world && c->inboxes[src] &&
         bytes <= KT_INBOX_SLOT_BYTES;
}

static kt_status mpi_post(kt_transport *t, int src, uint64_t tag, size_t bytes, kt_error *err) {
  mpi_ctx *c = t->ctx;
  if (local_sized(c, t, src, bytes))
    return KT_OK; /* recv_local looks in the inbox and probes MPI: nothing to post */
  if (bytes > (size_t)INT32_MAX)
    return kt_fail(err, KT_EINVAL, "message of %zu bytes too large for MPI", bytes);
  pending *p = pend_get(c, bytes);
  if (!p) return kt_fail(err, KT_ENOMEM, "rank %d: out of memory posting a receive", t->rank);
  p->src = src;
  p->tag = tag;
  p->len = bytes;
  p->done = 0;
  p->next = NULL;
  if (MPI_Irecv(p->data, (int)bytes, MPI_BYTE, src, mpi_tag(tag), c->world, &p->req) !=
      MPI_SUCCESS) {
    pend_put(c, p);
    return kt_fail(err, KT_ERUNTIME, "rank %d: MPI_Irecv from rank %d failed", t->rank, src);
  }
  pending **pp = &c->posted;
  while (*pp) pp = &(*pp)->next;
  *pp = p;
  return KT_OK;
}

/* The world rank this process waits for right now (-1: none), for a signal
 * handler to name when the job is ended under it. */
static volatile sig_atomic_t waiting_for = -1;
static volatile double waiting_since;

int kt_transport_mpi_waiting_for(double *since) {
  if (since) *since = waiting_since;
  return waiting_for;
}

/* Waits until ready() says done (a request completed, a message arrived)
 * so the watchdog can fire. With a doorbell it sleeps
 * between tests until someone rings (the bell is read before the test, so
 * a ring after the test cannot be missed). A receive (p2p) is rung by its
 * sender; its sleeps are cut into 1 ms slices that bound the wait should a
 * message become visible without a ring (a send that MPI queued at the
 * sender and delivered later). Nobody rings for a collective's inner
 * messages, so a collective's slices are short and grow (20 us to 1 ms)
 * while nothing rings, shrinking again when something does; a rank entering
 * a collective rings every bell on the host (ring_all), so the ranks waiting
 * in it resume progressing as soon as the last one arrives. Without a
 * doorbell, or when the sender (or a collective's member) is on another
 * host, where nobody can ring this host's bells, it polls. */
#define BELL_SLICE 1e-3

static kt_status wait_polled(kt_transport *t, int src, int p2p, kt__mpi_wait_ready ready, void *arg,
                             kt_error *err) {
  mpi_ctx *c = t->ctx;
  double start = kt_now(), deadline = start + t->timeout, slice = p2p ? BELL_SLICE : 20e-6;
  kt_doorbell *bell = NULL;
  if (c->my_bell && (p2p ? src >= 0 && src < t->world && c->bells[src] : c->all_local))
    bell = c->my_bell;
  for (long spins = 0;; spins++) {
    uint32_t seen = bell ? kt_doorbell_read(bell) : 0;
    kt_status st = KT_OK;
    if (ready(t, arg, &st, err)) return st;
    if (c->aborted) return kt_fail(err, KT_EPEER, "%s", c->reason);
    double left = deadline - kt_now();
    if (left < 0) {
      if (src < 0)
        return kt_fail(err, KT_ETIMEOUT, "rank %d waited %g s for the other ranks of a collective",
                       t->rank, t->timeout);
      return kt_fail(err, KT_ETIMEOUT, "rank %d waited %g s for rank %d", t->rank, t->timeout, src);
    }
    if (c->spin > 0 && kt_now() - start < c->spin) continue;
    if (bell) {
      int rung = kt_doorbell_wait(bell, seen, left < slice ? left : slice);
      if (!p2p) slice = rung ? 20e-6 : slice * 2 > BELL_SLICE ? BELL_SLICE : slice * 2;
    } else if (spins > 200) { /* after a short spin, poll every 20 us */
      struct timespec ts = {0, 20000};
      nanosleep(&ts, NULL);
    }
  }
}

static int request_done(kt_transport *t, void *req, kt_status *st, kt_error *err) {
  (void)t, (void)st, (void)err;
  int flag = 0;
  MPI_Test(req, &flag, MPI_STATUS_IGNORE);
  return flag;
}

kt_status kt__mpi_wait_named(kt_transport *t, kt__mpi_wait_ready ready, void *arg, int who, int p2p,
                             kt_error *err) {
  waiting_since = kt_now();
  waiting_for = who;
  kt_status st = wait_polled(t, who, p2p, ready, arg, err);
  waiting_for = -1;
  return st;
}

static kt_status wait_request_polled(kt_transport *t, MPI_Request *req, int src, int p2p,
                                     kt_error *err) {
  kt_status st = kt__mpi_wait_named(t, request_done, req, src, p2p, err);
  if (st == KT_ETIMEOUT &&
      p2p) { /* a collective's request cannot be cancelled; the job ends anyway */
    MPI_Cancel(req);
    MPI_Request_free(req);
  }
  return st;
}

static kt_status wait_request(kt_transport *t, MPI_Request *req, int src, kt_error *err) {
  return wait_request_polled(t, req, src, 1, err);
}

/* The same for a collective's request; peer is the other member of a
 * two-rank group (named when it is lost), else -1. */
static kt_status wait_collective(kt_transport *t, MPI_Request *req, int peer, kt_error *err) {
  return wait_request_polled(t, req, peer, 0, err);
}

static void ring_all(mpi_ctx *c, int world) {
  if (!c->bells) return;
  for (int r = 0; r < world; r++)
    if (c->bells[r] && c->bells[r] != c->my_bell) kt_doorbell_ring(c->bells[r]);
}

/* A receive from a rank on this host: its message is in this rank's inbox,
 * or (too large, or the inbox was full) on its way through MPI; the sender
 * rings the bell either way. */
typedef struct {
  int src;
  uint64_t tag;
  void *buf;
  size_t bytes;
  const void **data;
  void **loan; /* NULL: copy into buf; else an inbox message is lent (*data, *loan) */
} local_recv;

static int local_arrived(kt_transport *t, void *arg, kt_status *st, kt_error *err) {
  mpi_ctx *c = t->ctx;
  local_recv *r = arg;
  size_t len = 0;
  int in_inbox = r->loan
                     ? kt_inbox_lend(c->inboxes[t->rank], r->src, r->tag, r->data, &len, r->loan)
                     : kt_inbox_take(c->inboxes[t->rank], r->src, r->tag, r->buf, r->bytes, &len);
  if (in_inbox) {
    if (len != r->bytes) {
      *st = kt_fail(err, KT_ERUNTIME, "rank %d expected %zu bytes from rank %d, got %zu", t->rank,
                    r->bytes, r->src, len);
      if (r->loan) kt_inbox_release(*r->loan), *r->loan = NULL, *r->data = r->buf;
    }
    return 1;
  }
  int flag = 0, count = 0;
  MPI_Status status;
  MPI_Iprobe(r->src, mpi_tag(r->tag), c->world, &flag, &status);
  if (!flag) return 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  if ((size_t)count != r->bytes)
    *st = kt_fail(err, KT_ERUNTIME, "rank %d expected %zu bytes from rank %d, got %d", t->rank,
                  r->bytes, r->src, count);
  else if (MPI_Recv(r->buf, (int)r->bytes, MPI_BYTE, r->src, mpi_tag(r->tag), c->world,
                    MPI_STATUS_IGNORE) != MPI_SUCCESS)
    *st = kt_fail(err, KT_ERUNTIME, "rank %d: MPI_Recv from rank %d failed", t->rank, r->src);
  return 1;
}

/* A receive into buf, or (loan given) lending the inbox slot or the posted
 * receive's buffer the message already lies in. */
static kt_status receive(kt_transport *t, int src, uint64_t tag, void *buf, size_t bytes,
                         const void **data, void **loan, kt_error *err) {
  mpi_ctx *c = t->ctx;
  double t0 = kt_now();
  kt_status st;
  if (local_sized(c, t, src, bytes)) {
    local_recv r = {src, tag, buf, bytes, data, loan};
    st = kt__mpi_wait_named(t, local_arrived, &r, src, 1, err);
    t->recv_wait_seconds += kt_now() - t0;
    return st;
  }
  pending **pp = &c->posted;
  while (*pp && !((*pp)->src == src && (*pp)->tag == tag)) pp = &(*pp)->next;
  if (*pp) {
    pending *p = *pp;
    *pp = p->next;
    st = wait_request(t, &p->req, src, err);
    if (!st && p->len != bytes)
      st = kt_fail(err, KT_ERUNTIME, "rank %d expected %zu bytes from rank %d, posted %zu", t->rank,
                   bytes, src, p->len);
    if (!st && loan) {
      *data = p->data, *loan = p;
    } else if (!st) {
      if (bytes) memcpy(buf, p->data, bytes);
      pend_put(c, p);
    } else { /* MPI may still write into an unfinished receive's buffer: never reuse it */
      if (p->req != MPI_REQUEST_NULL) {
        MPI_Cancel(&p->req);
        MPI_Request_free(&p->req);
      }
      free(p);
    }
  } else {
    MPI_Request req;
    if (MPI_Irecv(buf, (int)bytes, MPI_BYTE, src, mpi_tag(tag), c->world, &req) != MPI_SUCCESS)
      return kt_fail(err, KT_ERUNTIME, "rank %d: MPI_Irecv from rank %d failed", t->rank, src);
    st = wait_request(t, &req, src, err);
  }
  t->recv_wait_seconds += kt_now() - t0;
  return st;
}

static kt_status mpi_recv(kt_transport *t, int src, uint64_t tag, void *buf, size_t bytes,
                          kt_error *err) {
  return receive(t, src, tag, buf, bytes, NULL, NULL, err);
}

static kt_status mpi_recv_lend(kt_transport *t, int src, uint64_t tag, void *buf, size_t bytes,
                               const void **data, void **loan, kt_error *err) {
  return receive(t, src, tag, buf, bytes, data, loan, err);
}

/* A loan is an inbox slot of this rank or a posted receive's pending. */
static void mpi_release(kt_transport *t, void *loan) {
  mpi_ctx *c = t->ctx;
  if (c->inboxes && kt_inbox_holds(c->inboxes[t->rank], loan)) kt_inbox_release(loan);
  else pend_put(c, loan);
}

const int *kt__mpi_members(mpi_ctx *c, MPI_Comm comm, int size) {
  int slot = comm == c->data ? 0 : comm == c->pipeline ? 1 : 2;
  if (c->members[slot]) return c->members[slot];
  int *in = malloc(sizeof(int) * (size_t)size), *out = malloc(sizeof(int) * (size_t)size);
  if (!in || !out) {
    free(in), free(out);
    return NULL;
  }
  MPI_Group g, wg;
  MPI_Comm_group(comm, &g);
  MPI_Comm_group(c->world, &wg);
  for (int i = 0; i < size; i++) in[i] = i;
  MPI_Group_translate_ranks(g, size, in, wg, out);
  MPI_Group_free(&g);
  MPI_Group_free(&wg);
  free(in);
  return c->members[slot] = out;
}

/* World rank of the other member of a two-rank communicator, else -1. */
static int other_member(mpi_ctx *c, MPI_Comm comm) {
  int size, me;
  MPI_Comm_size(comm, &size);
  if (size != 2) return -1;
  MPI_Comm_rank(comm, &me);
  const int *world_of = kt__mpi_members(c, comm, size);
  return world_of ? world_of[1 - me] : -1;
}

static kt_status mpi_allreduce(kt_transport *t, kt_group g, float *buf, size_t n, kt_error *err) {
  mpi_ctx *c = t->ctx;
  MPI_Comm comm = g == KT_GROUP_DATA ? c->data : g == KT_GROUP_PIPELINE ? c->pipeline : c->everyone;
  double t0 = kt_now();
  int size;
  MPI_Comm_size(comm, &size);
  kt_status st = KT_OK;
  int ring = n > 1024 && n <= (size_t)INT32_MAX;
  if (ring) {
    /* gradients: a ring of polled point-to-point messages (ring.c says why) */
    st = kt__mpi_ring_allreduce(t, comm, buf, n, err);
  } else if (n <= 1024) {
    /* A few numbers (norms, losses) go as one non-blocking all-reduce,
     * polled like a receive: a rank that arrives early sleeps between polls
     * instead of spinning on a core another rank still computes on, and the
     * last rank to arrive finds the others' parts there. */
    MPI_Request req;
    if (MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, comm, &req) != MPI_SUCCESS)
      return kt_fail(err, KT_ERUNTIME, "rank %d: MPI_Iallreduce failed", t->rank);
    ring_all(c, t->world);
    st = wait_collective(t, &req, other_member(c, comm), err);
  } else {
    for (size_t off = 0; off < n && !st; off += 1u << 28) { /* counts are ints */
      int chunk = n - off > (size_t)(1 << 28) ? 1 << 28 : (int)(n - off);
      if (MPI_Allreduce(MPI_IN_PLACE, buf + off, chunk, MPI_FLOAT, MPI_SUM, comm) != MPI_SUCCESS)
        st = kt_fail(err, KT_ERUNTIME, "rank %d: MPI_Allreduce failed", t->rank);
    }
  }
  if (!st &&
      !ring) /* MPI's own algorithm: count what a ring would send (the ring counts its own) */
    t->bytes_sent += (int64_t)(2.0 * (size - 1) / size * (double)n * sizeof(float));
  t->send_seconds += kt_now() - t0;
  return st;
}

/* Blocking on purpose: the step starts here, and spinning ranks leave it
 * together (one clock origin for the step's timeline). */
static kt_status mpi_barrier(kt_transport *t, kt_error *err) {
  mpi_ctx *c = t->ctx;
  waiting_since = kt_now(); /* a job ended in here names the other rank, if only one */
  waiting_for = other_member(c, c->world);
  int rc = MPI_Barrier(c->world);
  waiting_for = -1;
  if (rc != MPI_SUCCESS) return kt_fail(err, KT_ERUNTIME, "MPI_Barrier failed");
  return KT_OK;
}

static void mpi_abort_op(kt_transport *t, const char *reason) {
  mpi_ctx *c = t->ctx;
  if (!c->aborted) snprintf(c->reason, sizeof c->reason, "%s", reason ? reason : "aborted");
  c->aborted = 1;
}

static int mpi_aborted(kt_transport *t) { return ((mpi_ctx *)t->ctx)->aborted; }

static void mpi_destroy(kt_transport *t) { (void)t; }

static const kt_transport_ops mpi_ops = {.send = mpi_send,
                                         .recv = mpi_recv,
                                         .post = mpi_post,
                                         .allreduce = mpi_allreduce,
                                         .barrier = mpi_barrier,
                                         .abort = mpi_abort_op,
                                         .aborted = mpi_aborted,
                                         .destroy = mpi_destroy,
                                         .recv_lend = mpi_recv_lend,
                                         .release = mpi_release,
                                         .buffer = mpi_buffer,
                                         .send_buffer = mpi_send_buffer,
                                         .drop_buffer = mpi_drop_buffer};

int kt_transport_mpi_available(void) { return 1; }

kt_status kt_transport_mpi_create(int p, int d, double timeout, kt_transport **out, kt_error *err) {
  *out = NULL;
  int rank, size;
  kt_status st = kt_transport_mpi_init(&rank, &size, err);
  if (st) return st;
  if (p < 1 || d < 1 || p * d != size)
    return kt_fail(err, KT_EINVAL,
                   "MPI world has %d processes but %d pipeline ranks x %d replicas need %d", size,
                   p, d, p * d);
  mpi_ctx *c = calloc(1, sizeof *c);
  kt_transport *t = calloc(1, sizeof *t);
  int *node_of = malloc(sizeof(int) * (size_t)size);
  if (!c || !t || !node_of) {
    free(c);
    free(t);
    free(node_of);
    return kt_fail(err, KT_ENOMEM, "out of memory");
  }
  c->node_of = node_of;
  MPI_Comm_dup(MPI_COMM_WORLD, &c->world);
  MPI_Comm_set_errhandler(c->world, MPI_ERRORS_RETURN); /* the communicators below inherit it */
  /* world rank = stage_rank * d + replica: data group = same stage rank,
   * pipeline group = same replica; collectives over everyone get their own
   * communicator, so their messages never meet the pipeline's */
  MPI_Comm_split(c->world, rank / d, rank % d, &c->data);
  MPI_Comm_split(c->world, rank % d, rank / d, &c->pipeline);
  MPI_Comm_dup(c->world, &c->everyone);
  c->bell_win = c->inbox_win = MPI_WIN_NULL;
  kt__mpi_windows_create(c, size);
  *t = (kt_transport){.ops = &mpi_ops,
                      .ctx = c,
                      .rank = rank,
                      .world = size,
                      .p = p,
                      .d = d,
                      .timeout = timeout > 0 ? timeout : 60};
  kt_error ignored; /* the machines, for the all-reduce (collective: every rank takes part) */
  if (kt_transport_mpi_nodes(t, c->node_of, &ignored)) {
    free(c->node_of);
    c->node_of = NULL;
  }
  *out = t;
  return KT_OK;
}

void kt_transport_mpi_destroy(kt_transport *t) {
  if (!t) return;
  mpi_ctx *c = t->ctx;
  for (pending *p = c->sends, *n; p; p = n) { /* sends complete before we free them */
    n = p->next;
    MPI_Wait(&p->req, MPI_STATUS_IGNORE);
    free(p);
  }
  for (pending *p = c->posted, *n; p; p = n) {
    n = p->next;
    MPI_Cancel(&p->req);
    MPI_Request_free(&p->req);
    free(p);
  }
  for (pending *p = c->pool, *n; p; p = n) {
    n = p->next;
    free(p);
  }
  if (c->inbox_win != MPI_WIN_NULL)
    MPI_Win_free(&c->inbox_win); /* collective, like the frees below */
  free(c->inboxes);
  if (c->bell_win != MPI_WIN_NULL) MPI_Win_free(&c->bell_win);
  free(c->bells);
  for (int i = 0; i < 3; i++) free(c->members[i]);
  free(c->scratch);
  free(c->node_of);
  MPI_Comm_free(&c->data);
  MPI_Comm_free(&c->pipeline);
  MPI_Comm_free(&c->everyone);
  MPI_Comm_free(&c->world);
  free(c);
  free(t);
}

void kt_transport_mpi_set_spin(kt_transport *t, double seconds) {
  mpi_ctx *c = t->ctx;
  c->spin = seconds >= 0 ? seconds : c->spin_default;
}
