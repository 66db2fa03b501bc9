/* Checking a schedule that carries communication actions: a lowered file
 * (SEND/RECV/WAIT_SEND), or a compute-only file with REDUCE_GRAD or
 * UNSHARD/RESHARD actions. The rules follow torch 2.15's own checks
 * (_validate_send_waits, the REDUCE_GRAD pairing of its runtime) and add
 * those whose breach torch only finds by hanging or by training wrong. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/schedule.h"
#include "schedule/messages.h"

typedef struct {
  const kt_schedule *s;
  kt__dims d;
  kt_torch_ir ir;
  long *send_pos, *recv_pos, *wait_pos; /* per message id: position in its rank's list, -1 = none */
  kt__message *msgs;
  size_t n_msg;
} checker;

/* Every non-compute action names a stage (and micro-batch) that exists, on
 * the rank that owns the stage. */
static kt_status check_owners(const checker *c, kt_error *err) {
  const kt_schedule *s = c->s;
  char b1[KT_ACTION_TEXT];
  for (int r = 0; r < s->p; r++)
    for (size_t i = 0; i < s->ranks[r].n; i++) {
      const kt_action *a = &s->ranks[r].actions[i];
      if (a->op < KT_OP_COUNT) continue;
      if (a->stage < 0 || a->stage >= c->d.S || (kt_op_has_mb(a->op) && a->mb >= c->d.M))
        return kt_fail(err, KT_EINVALID_SCHEDULE,
                       "rank %d runs %s, outside the schedule's %d stages and %d micro-batches", r,
                       kt_action_text(a, b1), c->d.S, c->d.M);
      int owner = kt_stage_rank(s, a->stage);
      if (owner != r)
        return kt_fail(err, KT_EINVALID_SCHEDULE,
                       "action on the wrong rank: rank %d runs %s but stage %d belongs to rank %d",
                       r, kt_action_text(a, b1), a->stage, owner);
    }
  return KT_OK;
}

/* Every SEND/RECV/WAIT_SEND names a real cross-rank hand-over, once. */
static kt_status index_p2p(checker *c, kt_error *err) {
  const kt_schedule *s = c->s;
  char b1[KT_ACTION_TEXT], b2[KT_ACTION_TEXT];
  for (int r = 0; r < s->p; r++) {
    const kt_rank_actions *ra = &s->ranks[r];
    for (size_t i = 0; i < ra->n; i++) {
      const kt_action *a = &ra->actions[i];
      if (!kt_op_is_p2p(a->op)) continue;
      long id = kt__msg_of_p2p(s, &c->d, r, a);
      if (id < 0)
        return kt_fail(err, KT_EINVALID_SCHEDULE,
                       "rank %d runs %s, but no hand-over between ranks goes with it", r,
                       kt_action_text(a, b1));
      int is_wait = a->op == KT_OP_WAIT_SEND_F || a->op == KT_OP_WAIT_SEND_B;
      long *pos = is_wait                                          ? c->wait_pos
                  : a->op == KT_OP_SEND_F || a->op == KT_OP_SEND_B ? c->send_pos
                                                                   : c->recv_pos;
      if (is_wait && (c->send_pos[id] < 0 || pos[id] >= 0)) { /* as torch: no pending send */
        kt_action snd = kt__msg_send(&c->d, (size_t)id);
        return kt_fail(err, KT_EINVALID_SCHEDULE, "rank %d runs %s with no pending send (%s %s)", r,
                       kt_action_text(a, b1), kt_action_text(&snd, b2),
                       c->send_pos[id] < 0 ? "has not run before it" : "was retired already");
      }
      if (pos[id] >= 0)
        return kt_fail(err, KT_EINVALID_SCHEDULE, "duplicate action: rank %d runs %s twice", r,
                       kt_action_text(a, b1));
      pos[id] = (long)i;
    }
  }
  return KT_OK;
}

/* Each compute action that produces or consumes a hand-over has its SEND
 * after it / its RECV before it; each SEND its RECV; under torch 2.15 each
 * SEND its WAIT_SEND. */
static kt_status check_pairs(checker *c, kt_error *err) {
  const kt_schedule *s = c->s;
  char b1[KT_ACTION_TEXT], b2[KT_ACTION_TEXT];
  for (int r = 0; r < s->p; r++) {
    const kt_rank_actions *ra = &s->ranks[r];
    for (size_t i = 0; i < ra->n; i++) {
      const kt_action *a = &ra->actions[i];
      if (a->op >= KT_OP_COUNT) continue;
      long out = kt__msg_produced(s, &c->d, r, a), in = kt__msg_consumed(s, &c->d, r, a);
      if (out >= 0) {
        kt_action snd = kt__msg_send(&c->d, (size_t)out);
        if (c->send_pos[out] < 0)
          return kt_fail(err, KT_EINVALID_SCHEDULE,
                         "missing %s: rank %d runs %s but never sends it", kt_action_text(&snd, b1),
                         r, kt_action_text(a, b2));
        if (c->send_pos[out] < (long)i)
          return kt_fail(err, KT_EINVALID_SCHEDULE, "bad order: rank %d runs %s before %s", r,
                         kt_action_text(&snd, b1), kt_action_text(a, b2));
        c->msgs[c->n_msg++] = (kt__message){.id = (size_t)out,
                                            .from = r,
                                            .to = kt__msg_to(s, &c->d, (size_t)out),
                                            .from_pos = (size_t)c->send_pos[out]};
      }
      if (in >= 0) {
        kt_action rcv = kt__msg_recv(&c->d, (size_t)in);
        if (c->recv_pos[in] < 0)
          return kt_fail(err, KT_EINVALID_SCHEDULE,
                         "missing %s: rank %d runs %s without receiving its input",
                         kt_action_text(&rcv, b1), r, kt_action_text(a, b2));
        if (c->recv_pos[in] > (long)i)
          return kt_fail(err, KT_EINVALID_SCHEDULE, "bad order: rank %d runs %s before %s", r,
                         kt_action_text(a, b2), kt_action_text(&rcv, b1));
      }
    }
  }
  /* a SEND/RECV whose compute action is missing was caught by the compute
   * validation; one without its partner is caught here */
  for (size_t id = 0; id < kt__msg_count(&c->d); id++) {
    if ((c->send_pos[id] < 0) != (c->recv_pos[id] < 0)) {
      kt_action x = c->send_pos[id] < 0 ? kt__msg_recv(&c->d, id) : kt__msg_send(&c->d, id);
      kt_action y = c->send_pos[id] < 0 ? kt__msg_send(&c->d, id) : kt__msg_recv(&c->d, id);
      return kt_fail(err, KT_EINVALID_SCHEDULE, "%s has no matching %s", kt_action_text(&x, b1),
                     kt_action_text(&y, b2));
    }
    if (c->ir == KT_TORCH_IR_2_15 && c->send_pos[id] >= 0 && c->wait_pos[id] < 0) {
      kt_action x = kt__msg_send(&c->d, id), w = kt__msg_wait(&c->d, id);
      return kt_fail(err, KT_EINVALID_SCHEDULE,
                     "send never retired: rank %d runs %s but no %s after it (torch 2.15 retires "
                     "every send with a wait)",
                     kt_stage_rank(c->s, x.stage), kt_action_text(&x, b1), kt_action_text(&w, b2));
    }
  }
  return KT_OK;
}

/* Each pair of ranks must receive in the order it sends. */
static kt_status check_pair_order(checker *c, kt_error *err) {
  qsort(c->msgs, c->n_msg, sizeof *c->msgs, kt__message_cmp);
  char b1[KT_ACTION_TEXT], b2[KT_ACTION_TEXT];
  for (size_t i = 1; i < c->n_msg; i++) {
    const kt__message *x = &c->msgs[i - 1], *y = &c->msgs[i];
    if (x->from != y->from || x->to != y->to) continue;
    if (c->recv_pos[x->id] > c->recv_pos[y->id]) {
      kt_action sx = kt__msg_send(&c->d, x->id), sy = kt__msg_send(&c->d, y->id);
      return kt_fail(err, KT_EINVALID_SCHEDULE,
                     "message order: rank %d sends %s before %s to rank %d, which receives them in "
                     "the opposite order (transports match messages between two ranks in order)",
                     x->from, kt_action_text(&sx, b1), kt_action_text(&sy, b2), x->to);
    }
  }
  return KT_OK;
}

kt_status kt_lowered_validate_ir(const kt_schedule *lowered, kt_torch_ir ir, kt_error *err) {
  kt_schedule compute;
  kt_status st = kt_schedule_init_like(&compute, lowered, lowered->m, err);
  if (st) return st;
  int p2p = 0;
  for (int r = 0; r < lowered->p && !st; r++)
    for (size_t i = 0; i < lowered->ranks[r].n && !st; i++) {
      const kt_action *a = &lowered->ranks[r].actions[i];
      p2p |= kt_op_is_p2p(a->op);
      if (a->op >= KT_OP_COUNT) continue;
      if (kt_schedule_push(&compute, r, a->stage, (kt_op)a->op, a->mb))
        st = kt_fail(err, KT_ENOMEM, "out of memory");
      else compute.ranks[r].actions[compute.ranks[r].n - 1].flags = a->flags;
    }
  kt_error sub;
  if (!st && (st = kt_schedule_validate(&compute, &sub)))
    kt_fail(err, st, "compute actions: %s", sub.msg);
  kt_schedule_free(&compute);
  if (st) return st;
  checker c = {.s = lowered, .d = {kt_schedule_stages(lowered), lowered->m}, .ir = ir};
  if ((st = check_owners(&c, err)) || (st = kt__check_stage_ops(lowered, err))) return st;
  if (!p2p) return KT_OK; /* per-stage actions never block: the compute check covers progress */
  size_t n_ids = kt__msg_count(&c.d);
  c.send_pos = malloc(n_ids * sizeof *c.send_pos);
  c.recv_pos = malloc(n_ids * sizeof *c.recv_pos);
  c.wait_pos = malloc(n_ids * sizeof *c.wait_pos);
  c.msgs = kt_calloc(n_ids, sizeof *c.msgs);
  if (!c.send_pos || !c.recv_pos || !c.wait_pos || !c.msgs)
    st = kt_fail(err, KT_ENOMEM, "out of memory");
  else {
    for (size_t i = 0; i < n_ids; i++) c.send_pos[i] = c.recv_pos[i] = c.wait_pos[i] = -1;
    st = index_p2p(&c, err);
    if (!st) st = check_pairs(&c, err);
    if (!st) st = check_pair_order(&c, err);
    if (!st) st = kt__check_progress(lowered, err);
  }
  free(c.send_pos);
  free(c.recv_pos);
  free(c.wait_pos);
  free(c.msgs);
  return st;
}

kt_status kt_lowered_validate(const kt_schedule *lowered, kt_error *err) {
  return kt_lowered_validate_ir(lowered, KT_TORCH_IR_2_15, err);
}
