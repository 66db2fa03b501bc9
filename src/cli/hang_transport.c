/* Fault injection for tests (docs/testing.md): KAITEN_TEST_HANG=RANK,N
 * makes world rank RANK stop at its N-th send (counted from 0) of the run,
 * sleeping well past the watchdog (it wakes when the run is aborted), so
 * its peers' watchdog fires and names what they waited for. The hook wraps
 * that rank's transport handle in place; nothing of it is in the library. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cli/train_cli.h"
#include "kaiten/transport_impl.h"

typedef struct {
  kt_transport inner; /* the handle as it was */
  int sends, at;
} hang_ctx;

/* Copies the inner handle's counters out, so the runtime sees them. */
static void sync_stats(kt_transport *t) {
  hang_ctx *h = t->ctx;
  t->bytes_sent = h->inner.bytes_sent;
  t->send_seconds = h->inner.send_seconds;
  t->recv_wait_seconds = h->inner.recv_wait_seconds;
}

static kt_status hang_send(kt_transport *t, int dst, uint64_t tag, const void *buf, size_t bytes,
                           kt_error *err) {
  hang_ctx *h = t->ctx;
  if (h->sends++ == h->at) {
    double until = kt_now() + 3 * t->timeout + 1;
    while (kt_now() < until && !h->inner.ops->aborted(&h->inner)) {
      struct timespec ts = {0, 20 * 1000 * 1000};
      nanosleep(&ts, NULL);
    }
  }
  kt_status st = h->inner.ops->send(&h->inner, dst, tag, buf, bytes, err);
  sync_stats(t);
  return st;
}

static kt_status hang_recv(kt_transport *t, int src, uint64_t tag, void *buf, size_t bytes,
                           kt_error *err) {
  hang_ctx *h = t->ctx;
  kt_status st = h->inner.ops->recv(&h->inner, src, tag, buf, bytes, err);
  sync_stats(t);
  return st;
}

static kt_status hang_post(kt_transport *t, int src, uint64_t tag, size_t bytes, kt_error *err) {
  hang_ctx *h = t->ctx;
  return h->inner.ops->post ? h->inner.ops->post(&h->inner, src, tag, bytes, err) : KT_OK;
}

static kt_status hang_allreduce(kt_transport *t, kt_group g, float *buf, size_t n, kt_error *err) {
  hang_ctx *h = t->ctx;
  return kt_allreduce(&h->inner, g, buf, n, err);
}

static kt_status hang_barrier(kt_transport *t, kt_error *err) {
  hang_ctx *h = t->ctx;
  return h->inner.ops->barrier(&h->inner, err);
}

static void hang_abort(kt_transport *t, const char *reason) {
  hang_ctx *h = t->ctx;
  h->inner.ops->abort(&h->inner, reason);
}

static int hang_aborted(kt_transport *t) {
  hang_ctx *h = t->ctx;
  return h->inner.ops->aborted(&h->inner);
}

static const kt_transport_ops hang_ops = {.send = hang_send,
                                          .recv = hang_recv,
                                          .post = hang_post,
                                          .allreduce = hang_allreduce,
                                          .barrier = hang_barrier,
                                          .abort = hang_abort,
                                          .aborted = hang_aborted};

void *cli_hang_install(kt_runtime *rt) {
  const char *spec = getenv("KAITEN_TEST_HANG");
  int rank, at;
  if (!spec || sscanf(spec, "%d,%d", &rank, &at) != 2) return NULL;
  kt_transport *t = kt_runtime_handle(rt, rank);
  hang_ctx *h = t ? calloc(1, sizeof *h) : NULL;
  if (!h) return NULL;
  h->inner = *t, h->at = at;
  t->ops = &hang_ops, t->ctx = h;
  t->bytes_sent = h->inner.bytes_sent; /* the rest of *t is the inner handle's */
  return h;
}

void cli_hang_remove(kt_runtime *rt, void *installed) {
  hang_ctx *h = installed;
  if (!h) return;
  kt_transport *t = kt_runtime_handle(rt, h->inner.rank);
  if (t) *t = h->inner; /* the handle as the transport made it */
  free(h);
}
