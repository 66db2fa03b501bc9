/* Inbox: the messages same-host ranks send one rank, in a slab of memory
 * shared between the processes (an MPI shared-memory window). A sender
 * claims a free slot, copies the message in and marks it full; the receiver
 * takes the oldest full slot that matches (source, tag) and frees it. No
 * MPI call, no rendezvous: a send that finds a slot is complete when it
 * returns, and the receiver copies the message out as soon as it wakes.
 * Without copies: a sender may claim the slot first and compute into it
 * (claim, publish), and the receiver may read it in place (lend, release).
 * A message larger than a slot, or one that finds every slot taken, goes
 * through MPI instead (the receiver looks in both). */
#ifndef KAITEN_TRANSPORT_MPI_INBOX_H
#define KAITEN_TRANSPORT_MPI_INBOX_H

#include <stddef.h>
#include <stdint.h>

#define KT_INBOX_SLOTS 16
#define KT_INBOX_SLOT_BYTES ((size_t)256 << 10)

/* Bytes of one inbox (every slot with its header). */
size_t kt_inbox_bytes(void);
/* Marks every slot of an inbox free (its owner, before anyone sends). */
void kt_inbox_init(void *inbox);
/* Copies a message into a free slot of inbox; seq orders a sender's
 * messages. 1 when it went in, 0 when it is too large or no slot is free. */
int kt_inbox_put(void *inbox, int src, uint64_t tag, uint64_t seq, const void *buf, size_t len);
/* Takes the oldest message from src with tag (the lowest seq) into buf
 * (at most cap bytes), its length into *len: 1, or 0 when none is there. */
int kt_inbox_take(void *inbox, int src, uint64_t tag, void *buf, size_t cap, size_t *len);

/* A free slot of inbox claimed for a message of len bytes the caller
 * writes in place: its data, or NULL (too large, or no slot free). Then
 * kt_inbox_publish makes it the receiver's, or kt_inbox_unclaim frees it. */
void *kt_inbox_claim(void *inbox, size_t len);
void kt_inbox_publish(void *data, int src, uint64_t tag, uint64_t seq, size_t len);
void kt_inbox_unclaim(void *data);
/* Like kt_inbox_take, but lends the message where it lies: *data is its
 * bytes and the slot stays taken until kt_inbox_release(*slot). */
int kt_inbox_lend(void *inbox, int src, uint64_t tag, const void **data, size_t *len, void **slot);
void kt_inbox_release(void *slot);
/* Whether p points into inbox (a slot kt_inbox_lend lent). */
int kt_inbox_holds(const void *inbox, const void *p);

#endif
