/* Inbox slots in shared memory (see inbox.h). A slot's state goes free ->
 * writing (one sender's compare-and-swap) -> full (a release store after
 * the header and data) -> free (the receiver's release store after its
 * copy), so neither side reads what the other is still writing. */
#include "transport/mpi/inbox.h"

#include <stdatomic.h>
#include <string.h>

enum { SLOT_FREE, SLOT_WRITING, SLOT_FULL };

typedef struct {
  _Atomic uint32_t state;
  int32_t src;
  uint64_t tag, seq, len;
  unsigned char pad[32]; /* the header fills a cache line; the data starts aligned */
} slot_header;

_Static_assert(sizeof(slot_header) == 64, "an inbox slot header is one cache line");

#define SLOT_STRIDE (sizeof(slot_header) + KT_INBOX_SLOT_BYTES)

static slot_header *slot_at(void *inbox, int i) {
  return (slot_header *)((unsigned char *)inbox + (size_t)i * SLOT_STRIDE);
}

size_t kt_inbox_bytes(void) { return KT_INBOX_SLOTS * SLOT_STRIDE; }

void kt_inbox_init(void *inbox) {
  for (int i = 0; i < KT_INBOX_SLOTS; i++) atomic_init(&slot_at(inbox, i)->state, SLOT_FREE);
}

void *kt_inbox_claim(void *inbox, size_t len) {
  if (len > KT_INBOX_SLOT_BYTES) return NULL;
  for (int i = 0; i < KT_INBOX_SLOTS; i++) {
    slot_header *h = slot_at(inbox, i);
    uint32_t want = SLOT_FREE;
    if (atomic_load_explicit(&h->state, memory_order_relaxed) != SLOT_FREE ||
        !atomic_compare_exchange_strong_explicit(&h->state, &want, SLOT_WRITING,
                                                 memory_order_acquire, memory_order_relaxed))
      continue;
    return h + 1;
  }
  return NULL;
}

void kt_inbox_publish(void *data, int src, uint64_t tag, uint64_t seq, size_t len) {
  slot_header *h = (slot_header *)data - 1;
  h->src = src, h->tag = tag, h->seq = seq, h->len = len;
  atomic_store_explicit(&h->state, SLOT_FULL, memory_order_release);
}

void kt_inbox_unclaim(void *data) {
  atomic_store_explicit(&((slot_header *)data - 1)->state, SLOT_FREE, memory_order_release);
}

int kt_inbox_put(void *inbox, int src, uint64_t tag, uint64_t seq, const void *buf, size_t len) {
  void *data = kt_inbox_claim(inbox, len);
  if (!data) return 0;
  if (len) memcpy(data, buf, len);
  kt_inbox_publish(data, src, tag, seq, len);
  return 1;
}

/* The oldest full slot holding (src, tag), or NULL. */
static slot_header *oldest(void *inbox, int src, uint64_t tag) {
  slot_header *best = NULL;
  for (int i = 0; i < KT_INBOX_SLOTS; i++) {
    slot_header *h = slot_at(inbox, i);
    if (atomic_load_explicit(&h->state, memory_order_acquire) != SLOT_FULL) continue;
    if (h->src == src && h->tag == tag && (!best || h->seq < best->seq)) best = h;
  }
  return best;
}

/* A lent slot is marked WRITING: no sender claims it (they look for FREE)
 * and the receiver does not find it again (it looks for FULL). */
int kt_inbox_lend(void *inbox, int src, uint64_t tag, const void **data, size_t *len, void **slot) {
  slot_header *h = oldest(inbox, src, tag);
  if (!h) return 0;
  atomic_store_explicit(&h->state, SLOT_WRITING, memory_order_relaxed);
  *data = h + 1, *len = h->len, *slot = h;
  return 1;
}

void kt_inbox_release(void *slot) {
  atomic_store_explicit(&((slot_header *)slot)->state, SLOT_FREE, memory_order_release);
}

int kt_inbox_holds(const void *inbox, const void *p) {
  const unsigned char *base = inbox, *q = p;
  return inbox && q >= base && q < base + kt_inbox_bytes();
}

int kt_inbox_take(void *inbox, int src, uint64_t tag, void *buf, size_t cap, size_t *len) {
  slot_header *best = oldest(inbox, src, tag);
  if (!best) return 0;
  *len = best->len;
  size_t n = best->len < cap ? best->len : cap;
  if (n) memcpy(buf, best + 1, n);
  atomic_store_explicit(&best->state, SLOT_FREE, memory_order_release);
  return 1;
}
