/* Doorbell: a futex word that a waiting rank sleeps on and a sender rings,
 * so a blocked receive is woken by the send itself instead of polling.
 *
 * Protocol (no lost wake-ups): the waiter reads the bell (kt_doorbell_read),
 * then checks its condition (a message arrived), and only if the condition
 * is false sleeps with kt_doorbell_wait(bell, seen, ...): the sleep returns
 * at once when the bell was rung after the read. The ringer makes the
 * condition true first, then calls kt_doorbell_ring. The word may live in
 * memory shared between processes (shared = 1: a process-shared futex) or in
 * one process (shared = 0: a private futex, cheaper). */
#ifndef KAITEN_TRANSPORT_DOORBELL_H
#define KAITEN_TRANSPORT_DOORBELL_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct {
  _Atomic uint32_t seq;     /* bumped by every ring */
  _Atomic uint32_t waiters; /* sleepers: a ring with none skips the system call */
  uint32_t shared;          /* 1: the word is shared between processes */
  uint32_t pad[13];         /* one cache line per bell */
} kt_doorbell;

void kt_doorbell_init(kt_doorbell *b, int shared);
/* The bell's value now: pass it to kt_doorbell_wait after checking the
 * condition the bell announces. */
uint32_t kt_doorbell_read(kt_doorbell *b);
/* Sleeps until the bell is rung after `seen` was read, or `seconds` pass
 * (<= 0: returns at once). Returns 1 when the bell's value differs from
 * `seen` on return, 0 otherwise (timeout, signal or a spurious wake-up: the
 * caller re-checks its condition either way). */
int kt_doorbell_wait(kt_doorbell *b, uint32_t seen, double seconds);
/* Rings: wakes every sleeper on the bell. */
void kt_doorbell_ring(kt_doorbell *b);

#endif
