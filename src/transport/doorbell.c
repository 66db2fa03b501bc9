/* Doorbell on a Linux futex (see doorbell.h for the protocol). */
#include "transport/doorbell.h"

#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static long futex(_Atomic uint32_t *word, int op, uint32_t val, const struct timespec *ts) {
  return syscall(SYS_futex, (uint32_t *)word, op, val, ts, NULL, 0);
}

void kt_doorbell_init(kt_doorbell *b, int shared) {
  atomic_init(&b->seq, 0);
  atomic_init(&b->waiters, 0);
  b->shared = shared != 0;
}

uint32_t kt_doorbell_read(kt_doorbell *b) { return atomic_load(&b->seq); }

int kt_doorbell_wait(kt_doorbell *b, uint32_t seen, double seconds) {
  if (atomic_load(&b->seq) != seen) return 1;
  if (seconds <= 0) return 0;
  struct timespec ts;
  ts.tv_sec = (time_t)seconds;
  ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
  if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
  int op = b->shared ? FUTEX_WAIT : FUTEX_WAIT_PRIVATE;
  /* Sequentially consistent: either the ringer sees this waiter and wakes
   * it, or the kernel sees the new seq and does not sleep. */
  atomic_fetch_add(&b->waiters, 1);
  futex(&b->seq, op, seen, &ts); /* EAGAIN (already rung), ETIMEDOUT, EINTR: all fine */
  atomic_fetch_sub(&b->waiters, 1);
  return atomic_load(&b->seq) != seen;
}

void kt_doorbell_ring(kt_doorbell *b) {
  atomic_fetch_add(&b->seq, 1);
  if (atomic_load(&b->waiters))
    futex(&b->seq, b->shared ? FUTEX_WAKE : FUTEX_WAKE_PRIVATE, INT_MAX, NULL);
}
