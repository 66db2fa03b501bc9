/* The threads transport's allreduce (members meet in shared memory and sum
 * a slice each): every member ends with the same bits as the generic
 * allreduce's sum in member order, for data groups of 2 and 3 replicas
 * allreducing at once on several pipeline ranks, then the world group, over
 * sizes that leave slices empty or uneven; the barrier holds every rank
 * back until the last arrives; a size mismatch fails on every member; an
 * abort wakes members waiting for a missing one, and a timeout names it
 * (run under TSan with `make tsan`, label threads). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "kaiten/transport_impl.h"

#define MAX_WORLD 12
#define ROUNDS 20

static const size_t sizes[] = {0, 1, 3, 17, 4096, 4097, 100003};
#define N_SIZES (sizeof sizes / sizeof *sizes)

/* A value that differs per rank, round and index, with bits past float's
 * exact sums: a wrong order of additions shows in the result. */
static float value(int rank, int round, size_t k) {
  unsigned x = (unsigned)(rank * 2654435761u) ^ (unsigned)(round * 40503u) ^ (unsigned)(k * 97u);
  x ^= x >> 13;
  x *= 0x5bd1e995u;
  x ^= x >> 15;
  return ((float)(x & 0xffffff) / 16777216.0f - 0.5f) * (float)(1 + (int)(k % 7) * 1000);
}

typedef struct {
  kt_transport *h;
  int p, d, rank;
  int bad;
  kt_status barrier_st;
} member;

/* The sum the generic allreduce forms: the leader's value plus each other
 * member's, in member order. */
static float expected(const kt_transport *t, kt_group g, int round, size_t k) {
  int m[MAX_WORLD];
  int c = kt_group_members(t, g, m);
  float s = value(m[0], round, k);
  for (int j = 1; j < c; j++) s += value(m[j], round, k);
  return s;
}

static void *run_member(void *arg) {
  member *me = arg;
  kt_transport *t = &me->h[me->rank];
  kt_error err;
  float *buf = malloc(sizeof(float) * sizes[N_SIZES - 1]);
  if (!buf) {
    me->bad++;
    return NULL;
  }
  for (int round = 0; round < ROUNDS; round++) {
    kt_group g = round % 4 == 3 ? KT_GROUP_WORLD : KT_GROUP_DATA;
    size_t n = sizes[(size_t)round % N_SIZES];
    for (size_t k = 0; k < n; k++) buf[k] = value(t->rank, round, k);
    if (kt_allreduce(t, g, buf, n, &err) != KT_OK) {
      me->bad++;
      continue;
    }
    for (size_t k = 0; k < n; k++)
      if (buf[k] != expected(t, g, round, k)) {
        me->bad++;
        break;
      }
  }
  free(buf);
  return NULL;
}

static void test_sums(int p, int d) {
  kt_transport *h;
  kt_error err;
  REQUIRE_VOID(kt_transport_threads_create(p, d, 30, 16, &h, &err) == KT_OK);
  member m[MAX_WORLD];
  pthread_t th[MAX_WORLD];
  for (int r = 0; r < p * d; r++) {
    m[r] = (member){.h = h, .p = p, .d = d, .rank = r};
    CHECK(!pthread_create(&th[r], NULL, run_member, &m[r]));
  }
  int bad = 0;
  for (int r = 0; r < p * d; r++) {
    pthread_join(th[r], NULL);
    bad += m[r].bad;
  }
  CHECK_MSG(bad == 0, "P=%d D=%d: %d wrong or failed allreduces", p, d, bad);
  kt_transport_threads_destroy(h, p * d);
}

/* The barrier: no rank leaves before the last one arrived. */
static atomic_int arrived;
static atomic_int early;

static void *barrier_member(void *arg) {
  member *me = arg;
  kt_error err;
  if (me->rank == 0) usleep(50000);
  atomic_fetch_add(&arrived, 1);
  me->barrier_st = kt_transport_barrier(&me->h[me->rank], &err);
  if (atomic_load(&arrived) < me->p * me->d) atomic_fetch_add(&early, 1);
  return NULL;
}

static void test_barrier(void) {
  kt_transport *h;
  kt_error err;
  REQUIRE_VOID(kt_transport_threads_create(2, 2, 30, 16, &h, &err) == KT_OK);
  member m[4];
  pthread_t th[4];
  for (int r = 0; r < 4; r++) {
    m[r] = (member){.h = h, .p = 2, .d = 2, .rank = r};
    CHECK(!pthread_create(&th[r], NULL, barrier_member, &m[r]));
  }
  for (int r = 0; r < 4; r++) {
    pthread_join(th[r], NULL);
    CHECK_EQ_INT(m[r].barrier_st, KT_OK);
  }
  CHECK_EQ_INT(atomic_load(&early), 0);
  kt_transport_threads_destroy(h, 4);
}

typedef struct {
  kt_transport *t;
  size_t n;
  kt_status st;
  double done_at;
  char msg[KT_ERROR_LEN];
} lone;

static void *lone_allreduce(void *arg) {
  lone *l = arg;
  float buf[8] = {0};
  kt_error err;
  l->st = kt_allreduce(l->t, KT_GROUP_DATA, buf, l->n, &err);
  l->done_at = kt_now();
  if (l->st) snprintf(l->msg, sizeof l->msg, "%s", err.msg);
  return NULL;
}

/* a and b allreduce at once, each on its thread. */
static void two_at_once(lone *a, lone *b) {
  pthread_t ta, tb;
  REQUIRE_VOID(!pthread_create(&ta, NULL, lone_allreduce, a));
  REQUIRE_VOID(!pthread_create(&tb, NULL, lone_allreduce, b));
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
}

/* Members that disagree on the size fail, both of them; a member waiting
 * for one that never comes is woken by abort with EPEER. */
static void test_mismatch_and_abort(void) {
  kt_transport *h;
  kt_error err;
  REQUIRE_VOID(kt_transport_threads_create(1, 2, 30, 16, &h, &err) == KT_OK);
  lone a = {.t = &h[0], .n = 8}, b = {.t = &h[1], .n = 4};
  two_at_once(&a, &b);
  CHECK_EQ_INT(a.st, KT_ERUNTIME);
  CHECK_EQ_INT(b.st, KT_ERUNTIME);

  lone c = {.t = &h[0], .n = 8};
  pthread_t tc;
  REQUIRE_VOID(!pthread_create(&tc, NULL, lone_allreduce, &c));
  usleep(30000);
  double t0 = kt_now();
  h[1].ops->abort(&h[1], "stopped by the test");
  pthread_join(tc, NULL);
  CHECK_EQ_INT(c.st, KT_EPEER);
  CHECK_MSG(c.done_at - t0 < 0.5, "abort woke the member after %g s", c.done_at - t0);
  kt_transport_threads_destroy(h, 2);
}

/* Two of three replicas come, the third never does: both time out and
 * name it. */
static void test_timeout_names_missing(void) {
  kt_transport *h;
  kt_error err;
  REQUIRE_VOID(kt_transport_threads_create(1, 3, 0.3, 16, &h, &err) == KT_OK);
  lone a = {.t = &h[0], .n = 8}, b = {.t = &h[1], .n = 8};
  two_at_once(&a, &b);
  CHECK_EQ_INT(a.st, KT_ETIMEOUT);
  CHECK_EQ_INT(b.st, KT_ETIMEOUT);
  CHECK_MSG(strstr(a.msg, "for rank 2") && strstr(b.msg, "for rank 2"), "%s / %s", a.msg, b.msg);
  kt_transport_threads_destroy(h, 3);
}

int main(void) {
  test_sums(1, 2);
  test_sums(3, 2);
  test_sums(2, 3);
  test_sums(4, 3);
  test_barrier();
  test_mismatch_and_abort();
  test_timeout_names_missing();
  return kt_test_done(__FILE__);
}
