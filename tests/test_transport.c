/* The threads transport's hand-off: a send to a receiver already waiting
 * goes straight into its buffer and wakes it; messages of one (source, tag)
 * arrive in order whether handed over or queued; other tags wait their turn;
 * a size mismatch fails on both paths; a receive that timed out is withdrawn
 * (the message then queues for a later receive); abort wakes a waiting
 * receiver at once; a queued message is lent without a copy (recv_lend),
 * and one filled in place (buffer, send_buffer) is never copied;
 * and a many-rank exchange stays intact (run under TSan
 * with `make tsan`, label threads). */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "check.h"
#include "kaiten/transport_impl.h"

#define N 2000
#define BYTES 4096

static kt_transport *h;

typedef struct {
  kt_transport *t;
  int src, n;
  uint64_t tag;
  size_t bytes;
  kt_status st[N];
  unsigned char (*got)[BYTES];
  double done_at;
} receiver;

static void *recv_many(void *arg) {
  receiver *r = arg;
  kt_error err;
  for (int i = 0; i < r->n; i++)
    r->st[i] = r->t->ops->recv(r->t, r->src, r->tag, r->got[i], r->bytes, &err);
  r->done_at = kt_now();
  return NULL;
}

static void fill(unsigned char *b, int seed) {
  for (int k = 0; k < BYTES; k++) b[k] = (unsigned char)(seed * 31 + k * 7);
}

/* The receiver waits first: the send hands the tensor over and wakes it. */
static void test_handoff_to_waiter(void) {
  static unsigned char got[1][BYTES];
  receiver r = {.t = &h[1], .src = 0, .n = 1, .tag = 5, .bytes = BYTES, .got = got};
  pthread_t th;
  REQUIRE_VOID(!pthread_create(&th, NULL, recv_many, &r));
  usleep(30000); /* the receiver is asleep in recv by now */
  unsigned char msg[BYTES];
  fill(msg, 1);
  kt_error err;
  double t0 = kt_now();
  CHECK_EQ_INT(h[0].ops->send(&h[0], 1, 5, msg, BYTES, &err), KT_OK);
  pthread_join(th, NULL);
  CHECK_EQ_INT(r.st[0], KT_OK);
  CHECK(!memcmp(got[0], msg, BYTES));
  CHECK_MSG(r.done_at - t0 < 0.5, "the waiting receiver woke %g s after the send", r.done_at - t0);
}

/* Messages of one (source, tag) keep their order, however sender and
 * receiver interleave (some handed over, some queued). */
typedef struct {
  unsigned char *buf;
  uint64_t tag;
  const void *data;
  void *loan;
  kt_status st;
} lend_arg;

static void *lend_one(void *arg) {
  lend_arg *a = arg;
  kt_error err;
  a->st = kt_transport_recv_lend(&h[1], 0, a->tag, a->buf, BYTES, &a->data, &a->loan, &err);
  return NULL;
}

static void test_order(void) {
  static unsigned char got[N][BYTES];
  receiver r = {.t = &h[1], .src = 0, .n = N, .tag = 9, .bytes = BYTES, .got = got};
  pthread_t th;
  REQUIRE_VOID(!pthread_create(&th, NULL, recv_many, &r));
  unsigned char msg[BYTES];
  kt_error err;
  int sent_ok = 1;
  for (int i = 0; i < N; i++) {
    fill(msg, i);
    sent_ok &= h[0].ops->send(&h[0], 1, 9, msg, BYTES, &err) == KT_OK;
    if (i % 7 == 0) usleep(50); /* let the receiver catch up and wait sometimes */
  }
  pthread_join(th, NULL);
  CHECK(sent_ok);
  int in_order = 1;
  for (int i = 0; i < N; i++) {
    fill(msg, i);
    if (r.st[i] != KT_OK || memcmp(got[i], msg, BYTES)) in_order = 0;
  }
  CHECK(in_order);
}

/* A receive for tag A while tag B is queued gets A when it comes; B waits. */
static void test_other_tags_wait(void) {
  unsigned char a[BYTES], b[BYTES], got[BYTES];
  fill(a, 100);
  fill(b, 200);
  kt_error err;
  CHECK_EQ_INT(h[0].ops->send(&h[0], 1, 2, b, BYTES, &err), KT_OK); /* queued */
  static unsigned char gotv[1][BYTES];
  receiver r = {.t = &h[1], .src = 0, .n = 1, .tag = 1, .bytes = BYTES, .got = gotv};
  pthread_t th;
  REQUIRE_VOID(!pthread_create(&th, NULL, recv_many, &r));
  usleep(20000);
  CHECK_EQ_INT(h[0].ops->send(&h[0], 1, 1, a, BYTES, &err), KT_OK); /* handed over */
  pthread_join(th, NULL);
  CHECK_EQ_INT(r.st[0], KT_OK);
  CHECK(!memcmp(gotv[0], a, BYTES));
  CHECK_EQ_INT(h[1].ops->recv(&h[1], 0, 2, got, BYTES, &err), KT_OK);
  CHECK(!memcmp(got, b, BYTES));
}

/* A wrong size is an error on the queued path and on the hand-off. */
static void test_size_mismatch(void) {
  unsigned char msg[BYTES], got[BYTES];
  fill(msg, 3);
  kt_error err;
  CHECK_EQ_INT(h[0].ops->send(&h[0], 1, 3, msg, BYTES, &err), KT_OK);
  CHECK_EQ_INT(h[1].ops->recv(&h[1], 0, 3, got, BYTES / 2, &err), KT_ERUNTIME);
  CHECK_STR_CONTAINS(err.msg, "expected 2048 bytes");
  static unsigned char gotv[1][BYTES];
  receiver r = {.t = &h[1], .src = 0, .n = 1, .tag = 4, .bytes = BYTES / 2, .got = gotv};
  pthread_t th;
  REQUIRE_VOID(!pthread_create(&th, NULL, recv_many, &r));
  usleep(20000);
  CHECK_EQ_INT(h[0].ops->send(&h[0], 1, 4, msg, BYTES, &err), KT_OK);
  pthread_join(th, NULL);
  CHECK_EQ_INT(r.st[0], KT_ERUNTIME);
}

/* A receive that timed out is withdrawn: the later send queues its message
 * (it must not write into the abandoned buffer) and the next receive gets it. */
static void test_timeout_withdraws(void) {
  unsigned char msg[BYTES], got[BYTES], stale[BYTES];
  kt_error err;
  double saved = h[1].timeout;
  h[1].timeout = 0.05;
  memset(stale, 0xAB, BYTES);
  double t0 = kt_now();
  CHECK_EQ_INT(h[1].ops->recv(&h[1], 0, 6, stale, BYTES, &err), KT_ETIMEOUT);
  double waited = kt_now() - t0;
  CHECK_MSG(waited >= 0.04 && waited < 2, "a 0.05 s receive timeout took %g s", waited);
  h[1].timeout = saved;
  fill(msg, 6);
  CHECK_EQ_INT(h[0].ops->send(&h[0], 1, 6, msg, BYTES, &err), KT_OK);
  int untouched = 1;
  for (int k = 0; k < BYTES; k++) untouched &= stale[k] == 0xAB;
  CHECK(untouched);
  CHECK_EQ_INT(h[1].ops->recv(&h[1], 0, 6, got, BYTES, &err), KT_OK);
  CHECK(!memcmp(got, msg, BYTES));
}

/* Many ranks: each sends to the next for many rounds, each receives from
 * the previous; contents checked. */
#define RING 8
#define RING_ROUNDS 300
static kt_transport *ring;
static int ring_bad[RING];

static void *ring_rank(void *arg) {
  int r = (int)(intptr_t)arg;
  kt_transport *t = &ring[r];
  unsigned char out[512], in[512];
  kt_error err;
  for (int k = 0; k < RING_ROUNDS; k++) {
    for (int i = 0; i < 512; i++) out[i] = (unsigned char)(r + k + i);
    if (t->ops->send(t, (r + 1) % RING, (uint64_t)k, out, sizeof out, &err)) ring_bad[r]++;
    int from = (r + RING - 1) % RING;
    if (t->ops->recv(t, from, (uint64_t)k, in, sizeof in, &err)) ring_bad[r]++;
    for (int i = 0; i < 512; i++)
      if (in[i] != (unsigned char)(from + k + i)) {
        ring_bad[r]++;
        break;
      }
  }
  return NULL;
}

static void test_ring(void) {
  kt_error err;
  REQUIRE_VOID(kt_transport_threads_create(RING, 1, 30, 16, &ring, &err) == KT_OK);
  pthread_t th[RING];
  for (int r = 0; r < RING; r++)
    CHECK(!pthread_create(&th[r], NULL, ring_rank, (void *)(intptr_t)r));
  int bad = 0;
  for (int r = 0; r < RING; r++) {
    pthread_join(th[r], NULL);
    bad += ring_bad[r];
  }
  CHECK_EQ_INT(bad, 0);
  kt_transport_threads_destroy(ring, RING);
}

/* abort() wakes a receiver asleep in recv with EPEER and the reason. */
static void test_abort_wakes(void) {
  static unsigned char got[1][BYTES];
  receiver r = {.t = &h[1], .src = 0, .n = 1, .tag = 77, .bytes = BYTES, .got = got};
  pthread_t th;
  REQUIRE_VOID(!pthread_create(&th, NULL, recv_many, &r));
  usleep(30000);
  double t0 = kt_now();
  h[0].ops->abort(&h[0], "stopped by the test");
  pthread_join(th, NULL);
  CHECK_EQ_INT(r.st[0], KT_EPEER);
  CHECK_MSG(r.done_at - t0 < 0.5, "abort woke the receiver after %g s", r.done_at - t0);
  kt_error err;
  unsigned char msg[8] = {0};
  CHECK_EQ_INT(h[0].ops->send(&h[0], 1, 1, msg, sizeof msg, &err), KT_EPEER);
}

/* recv_lend: a queued message is lent where it lies (no copy into buf) and
 * its storage is reused once released; a receiver that waits gets the
 * tensor handed into its own buffer (nothing lent). */
static void test_lend(void) {
  kt_error err;
  unsigned char msg[BYTES], got[BYTES];
  fill(msg, 11);
  memset(got, 0, sizeof got);
  CHECK_EQ_INT(kt_transport_send(&h[0], 1, 21, msg, BYTES, &err), KT_OK); /* queued */
  const void *data = NULL;
  void *loan = NULL;
  CHECK_EQ_INT(kt_transport_recv_lend(&h[1], 0, 21, got, BYTES, &data, &loan, &err), KT_OK);
  CHECK(loan != NULL && data != got && !memcmp(data, msg, BYTES));
  CHECK_EQ_INT((int)((uintptr_t)data % 16), 0);
  CHECK(got[0] == 0 && got[BYTES - 1] == 0); /* lent, not copied */
  kt_transport_release(&h[1], loan);
  /* the released message is the next send's storage */
  CHECK_EQ_INT(kt_transport_send(&h[0], 1, 22, msg, BYTES, &err), KT_OK);
  const void *again = NULL;
  CHECK_EQ_INT(kt_transport_recv_lend(&h[1], 0, 22, got, BYTES, &again, &loan, &err), KT_OK);
  CHECK(again == data);
  kt_transport_release(&h[1], loan);
  /* a size mismatch lends nothing */
  CHECK_EQ_INT(kt_transport_send(&h[0], 1, 23, msg, BYTES, &err), KT_OK);
  loan = &err;
  CHECK_EQ_INT(kt_transport_recv_lend(&h[1], 0, 23, got, BYTES / 2, &data, &loan, &err),
               KT_ERUNTIME);
  CHECK(loan == NULL);
  /* waiting: handed straight into got */
  pthread_t th;
  lend_arg la = {.buf = got, .tag = 24};
  CHECK(!pthread_create(&th, NULL, lend_one, &la));
  usleep(20000);
  fill(msg, 12);
  CHECK_EQ_INT(kt_transport_send(&h[0], 1, 24, msg, BYTES, &err), KT_OK);
  pthread_join(th, NULL);
  CHECK_EQ_INT(la.st, KT_OK);
  CHECK(la.loan == NULL && la.data == got && !memcmp(got, msg, BYTES));
}

/* buffer + send_buffer: a message filled in place reaches a receiver that
 * lends as that very storage (queued or handed over while it waits), a
 * receiver that copies gets a copy, and a dropped buffer is pooled again. */
static void test_send_buffer(void) {
  kt_error err;
  unsigned char msg[BYTES], got[BYTES];
  fill(msg, 13);
  unsigned char *buf = kt_transport_buffer(&h[0], 1, BYTES);
  REQUIRE_VOID(buf);
  memcpy(buf, msg, BYTES);
  CHECK_EQ_INT(kt_transport_send_buffer(&h[0], 1, 31, buf, BYTES, &err), KT_OK); /* queued */
  const void *data = NULL;
  void *loan = NULL;
  CHECK_EQ_INT(kt_transport_recv_lend(&h[1], 0, 31, got, BYTES, &data, &loan, &err), KT_OK);
  CHECK(data == buf && loan != NULL && !memcmp(data, msg, BYTES)); /* no copy anywhere */
  kt_transport_release(&h[1], loan);
  /* a lending receiver already waiting gets the message itself */
  lend_arg la = {.buf = got, .tag = 32};
  pthread_t th;
  CHECK(!pthread_create(&th, NULL, lend_one, &la));
  usleep(20000);
  buf = kt_transport_buffer(&h[0], 1, BYTES);
  REQUIRE_VOID(buf);
  fill(buf, 14);
  fill(msg, 14);
  CHECK_EQ_INT(kt_transport_send_buffer(&h[0], 1, 32, buf, BYTES, &err), KT_OK);
  pthread_join(th, NULL);
  CHECK_EQ_INT(la.st, KT_OK);
  CHECK(la.data == buf && la.loan != NULL && !memcmp(la.data, msg, BYTES));
  kt_transport_release(&h[1], la.loan);
  /* a copying receiver (plain recv) gets a copy; the buffer goes back to the pool */
  buf = kt_transport_buffer(&h[0], 1, BYTES);
  REQUIRE_VOID(buf);
  fill(buf, 15);
  fill(msg, 15);
  memset(got, 0, sizeof got);
  CHECK_EQ_INT(kt_transport_send_buffer(&h[0], 1, 33, buf, BYTES, &err), KT_OK);
  CHECK_EQ_INT(kt_transport_recv(&h[1], 0, 33, got, BYTES, &err), KT_OK);
  CHECK(!memcmp(got, msg, BYTES));
  /* dropped: the next buffer of that size is the same storage */
  buf = kt_transport_buffer(&h[0], 1, BYTES);
  REQUIRE_VOID(buf);
  kt_transport_drop_buffer(&h[0], buf);
  unsigned char *again = kt_transport_buffer(&h[0], 1, BYTES);
  CHECK(again == buf);
  kt_transport_drop_buffer(&h[0], again);
}

int main(void) {
  kt_error err;
  if (kt_transport_threads_create(2, 1, 30, 4 * N, &h, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    return 1;
  }
  test_handoff_to_waiter();
  test_order();
  test_other_tags_wait();
  test_size_mismatch();
  test_timeout_withdraws();
  test_lend();
  test_send_buffer();
  test_ring();
  test_abort_wakes(); /* last: the fabric stays aborted */
  kt_transport_threads_destroy(h, 2);
  return kt_test_done(__FILE__);
}
