/* Internal: the messages of a lowered schedule. A message is one hand-over
 * between ranks: the output of F(s, j) to stage s+1, or the input gradient
 * of B/I(s, j) to stage s-1, identified by its kind, its producing stage and
 * its micro-batch. lower.c writes the communication actions for them,
 * lowered_check.c checks a file's. */
#ifndef KAITEN_SCHEDULE_MESSAGES_H
#define KAITEN_SCHEDULE_MESSAGES_H

#include "kaiten/schedule.h"

/* a message carries a result of kt_action_publishes across ranks */
enum { KT__MSG_F = KT_OUT_F, KT__MSG_B = KT_OUT_BI };

typedef struct {
  int S, M;
} kt__dims;

static inline size_t kt__msg_id(const kt__dims *d, int kind, int stage, int mb) {
  return ((size_t)kind * (size_t)d->S + (size_t)stage) * (size_t)d->M + (size_t)mb;
}
static inline size_t kt__msg_count(const kt__dims *d) { return 2 * (size_t)d->S * (size_t)d->M; }

/* The message a compute action on rank produces for another rank, or -1. */
long kt__msg_produced(const kt_schedule *s, const kt__dims *d, int rank, const kt_action *a);
/* The message a compute action on rank needs from another rank, or -1. */
long kt__msg_consumed(const kt_schedule *s, const kt__dims *d, int rank, const kt_action *a);
/* The message a SEND, RECV or WAIT_SEND on rank moves or retires, or -1 when
 * it names a hand-over that does not cross ranks here (or does not exist). */
long kt__msg_of_p2p(const kt_schedule *s, const kt__dims *d, int rank, const kt_action *a);
/* The SEND, RECV and WAIT_SEND actions of a message. */
kt_action kt__msg_send(const kt__dims *d, size_t id);
kt_action kt__msg_recv(const kt__dims *d, size_t id);
kt_action kt__msg_wait(const kt__dims *d, size_t id);
/* The rank a message goes to. */
int kt__msg_to(const kt_schedule *s, const kt__dims *d, size_t id);

/* One message: who sends it, to whom, and where the send sits. stream:
 * while lowering, the index of the first message of its (from, to) stream
 * in the sorted list. */
typedef struct {
  size_t id;
  int from, to;
  size_t from_pos, stream;
} kt__message;

/* Orders messages by (from, to, position of the send). */
int kt__message_cmp(const void *x, const void *y);

/* REDUCE_GRAD/WAIT_REDUCE_GRAD and UNSHARD/RESHARD rules (lowered_rules.c);
 * the actions' owners were checked. EINVALID_SCHEDULE naming the action. */
kt_status kt__check_stage_ops(const kt_schedule *s, kt_error *err);
/* Runs the lowered lists with non-blocking SEND/RECV (a compute action waits
 * until its input was sent, a WAIT_SEND until the peer posted the RECV) until
 * nothing moves; EDEADLOCK naming each blocked rank and what it waits for. */
kt_status kt__check_progress(const kt_schedule *s, kt_error *err);

#endif
