/* The futex doorbell (src/transport/doorbell.h): a ring after the read
 * always ends the wait, no wake-up is lost under a ping-pong of many rounds
 * between threads, one ring wakes every sleeper, and a bell in memory shared
 * between processes works across fork(). */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "kaiten/core.h"
#include "transport/doorbell.h"

static void test_basic(void) {
  kt_doorbell b;
  kt_doorbell_init(&b, 0);
  uint32_t seen = kt_doorbell_read(&b);
  double t0 = kt_now();
  CHECK_EQ_INT(kt_doorbell_wait(&b, seen, 0.05), 0); /* nobody rang: times out */
  double waited = kt_now() - t0;
  CHECK_MSG(waited >= 0.04 && waited < 1.0, "waited %g s for a 0.05 s timeout", waited);
  kt_doorbell_ring(&b);
  t0 = kt_now();
  CHECK_EQ_INT(kt_doorbell_wait(&b, seen, 5), 1); /* rung after the read: no sleep */
  CHECK(kt_now() - t0 < 0.5);
  CHECK(kt_doorbell_read(&b) != seen);
  CHECK_EQ_INT(kt_doorbell_wait(&b, kt_doorbell_read(&b), 0), 0);
}

/* Ping-pong: each side waits for the other's counter to move, with the
 * read-check-wait protocol; a lost wake-up would stall a wait for its whole
 * timeout (0.5 s, far above a wake-up) and count as a stall. */
#define ROUNDS 20000
typedef struct {
  kt_doorbell bell[2];
  _Atomic int turn; /* whose move it is: round * 2 + side */
  _Atomic int stalls;
  int data[2]; /* written by the side whose move it is, read by the other */
  int bad[2];  /* per side */
} pingpong;

static void *side(void *arg, int me) {
  pingpong *p = arg;
  for (int r = 0; r < ROUNDS; r++) {
    int want = 2 * r + me;
    for (;;) {
      uint32_t seen = kt_doorbell_read(&p->bell[me]);
      if (atomic_load(&p->turn) == want) break;
      if (atomic_load(&p->stalls) >= 3) return NULL; /* broken: give up, the check reports it */
      double t0 = kt_now(); /* 0 may also mean a signal or a spurious wake-up: time it */
      if (!kt_doorbell_wait(&p->bell[me], seen, 0.5) && atomic_load(&p->turn) != want &&
          kt_now() - t0 >= 0.4)
        atomic_fetch_add(&p->stalls, 1);
    }
    if (r > 0 || me == 1)
      if (p->data[1 - me] != want - 1) p->bad[me]++; /* the other's write is visible */
    p->data[me] = want;
    atomic_store(&p->turn, want + 1);
    kt_doorbell_ring(&p->bell[1 - me]);
  }
  return NULL;
}
static void *side0(void *arg) { return side(arg, 0); }
static void *side1(void *arg) { return side(arg, 1); }

static void test_no_lost_wakeups(void) {
  static pingpong p;
  kt_doorbell_init(&p.bell[0], 0);
  kt_doorbell_init(&p.bell[1], 0);
  atomic_init(&p.turn, 0);
  atomic_init(&p.stalls, 0);
  pthread_t a, b;
  double t0 = kt_now();
  CHECK(!pthread_create(&a, NULL, side0, &p));
  CHECK(!pthread_create(&b, NULL, side1, &p));
  pthread_join(a, NULL);
  pthread_join(b, NULL);
  CHECK_EQ_INT(atomic_load(&p.turn), 2 * ROUNDS);
  CHECK_EQ_INT(atomic_load(&p.stalls), 0);
  CHECK_EQ_INT(p.bad[0] + p.bad[1], 0);
  printf("doorbell ping-pong: %d rounds in %.3f s\n", ROUNDS, kt_now() - t0);
}

/* One ring wakes every thread sleeping on the bell. */
typedef struct {
  kt_doorbell bell;
  _Atomic int go, woken, ready;
} crowd;

static void *sleeper(void *arg) {
  crowd *c = arg;
  uint32_t seen = kt_doorbell_read(&c->bell);
  atomic_fetch_add(&c->ready, 1);
  double t0 = kt_now();
  while (!atomic_load(&c->go) && kt_now() - t0 < 10) kt_doorbell_wait(&c->bell, seen, 10);
  if (atomic_load(&c->go)) atomic_fetch_add(&c->woken, 1);
  return NULL;
}

static void test_ring_wakes_all(void) {
  static crowd c;
  kt_doorbell_init(&c.bell, 0);
  pthread_t th[4];
  for (int i = 0; i < 4; i++) CHECK(!pthread_create(&th[i], NULL, sleeper, &c));
  while (atomic_load(&c.ready) < 4) usleep(1000);
  usleep(20000); /* let them fall asleep */
  double t0 = kt_now();
  atomic_store(&c.go, 1);
  kt_doorbell_ring(&c.bell);
  for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
  CHECK_EQ_INT(atomic_load(&c.woken), 4);
  CHECK_MSG(kt_now() - t0 < 2.0, "waking 4 sleepers took %g s", kt_now() - t0);
}

/* A process-shared bell: the child sleeps, the parent rings. */
static void test_shared_across_fork(void) {
  struct shm {
    kt_doorbell bell;
    _Atomic int flag;
  } *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  CHECK(s != MAP_FAILED);
  if (s == MAP_FAILED) return;
  kt_doorbell_init(&s->bell, 1);
  atomic_init(&s->flag, 0);
  uint32_t seen = kt_doorbell_read(&s->bell);
  fflush(stdout);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    double t0 = kt_now();
    while (!atomic_load(&s->flag) && kt_now() - t0 < 10) {
      kt_doorbell_wait(&s->bell, seen, 10);
      seen = kt_doorbell_read(&s->bell);
    }
    _exit(atomic_load(&s->flag) && kt_now() - t0 < 5 ? 0 : 1);
  }
  usleep(20000);
  atomic_store(&s->flag, 1);
  kt_doorbell_ring(&s->bell);
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  munmap(s, sizeof *s);
}

int main(void) {
  test_basic();
  test_no_lost_wakeups();
  test_ring_wakes_all();
  test_shared_across_fork();
  return kt_test_done(__FILE__);
}
