/* Rules of a lowered schedule beyond its messages: the per-stage actions
 * (gradient reduction, FSDP unshard/reshard) and whether the whole program
 * runs to the end when sends and receives do not block. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/schedule.h"
#include "schedule/messages.h"

/* REDUCE_GRAD/WAIT_REDUCE_GRAD on one rank: torch's pairing (one reduction
 * pending at a time, each wait for the pending stage, none left open) and a
 * stage reduces once, after all its M backwards. */
static kt_status check_reduce_rank(const kt_schedule *s, int r, int *backwards, uint8_t *reduced,
                                   kt_error *err) {
  const kt_rank_actions *ra = &s->ranks[r];
  int pending = -1;
  char b1[KT_ACTION_TEXT];
  for (size_t i = 0; i < ra->n; i++) {
    const kt_action *a = &ra->actions[i];
    if (a->op == KT_OP_B || a->op == KT_OP_W) backwards[a->stage]++;
    if (a->op == KT_OP_REDUCE_GRAD) {
      if (pending >= 0)
        return kt_fail(err, KT_EINVALID_SCHEDULE,
                       "rank %d runs %s while stage %d's reduction is pending (no "
                       "%dWAIT_REDUCE_GRAD before it)",
                       r, kt_action_text(a, b1), pending, pending);
      if (reduced[a->stage])
        return kt_fail(err, KT_EINVALID_SCHEDULE, "duplicate action: rank %d runs %s twice", r,
                       kt_action_text(a, b1));
      if (backwards[a->stage] < s->m)
        return kt_fail(err, KT_EINVALID_SCHEDULE,
                       "rank %d runs %s after %d of stage %d's %d backwards: the reduction must "
                       "follow the last one",
                       r, kt_action_text(a, b1), backwards[a->stage], a->stage, s->m);
      pending = a->stage;
      reduced[a->stage] = 1;
    } else if (a->op == KT_OP_WAIT_REDUCE_GRAD) {
      if (pending < 0)
        return kt_fail(err, KT_EINVALID_SCHEDULE, "rank %d runs %s without a pending reduction", r,
                       kt_action_text(a, b1));
      if (pending != a->stage)
        return kt_fail(err, KT_EINVALID_SCHEDULE,
                       "rank %d runs %s, but stage %d has the pending reduction", r,
                       kt_action_text(a, b1), pending);
      pending = -1;
    }
  }
  if (pending >= 0)
    return kt_fail(err, KT_EINVALID_SCHEDULE,
                   "rank %d runs %dREDUCE_GRAD without %dWAIT_REDUCE_GRAD after it", r, pending,
                   pending);
  return KT_OK;
}

/* UNSHARD/RESHARD on one rank: they alternate per stage starting with
 * UNSHARD and end resharded, and a stage that uses them computes only while
 * unsharded. state: per stage, bit 1 = uses them, bit 2 = unsharded now. */
static kt_status check_shard_rank(const kt_schedule *s, int r, uint8_t *state, kt_error *err) {
  const kt_rank_actions *ra = &s->ranks[r];
  char b1[KT_ACTION_TEXT];
  for (size_t i = 0; i < ra->n; i++)
    if (ra->actions[i].op == KT_OP_UNSHARD || ra->actions[i].op == KT_OP_RESHARD)
      state[ra->actions[i].stage] |= 1;
  for (size_t i = 0; i < ra->n; i++) {
    const kt_action *a = &ra->actions[i];
    uint8_t *x = &state[a->stage];
    if (a->op == KT_OP_UNSHARD) {
      if (*x & 2)
        return kt_fail(err, KT_EINVALID_SCHEDULE,
                       "rank %d runs %s while stage %d is unsharded already", r,
                       kt_action_text(a, b1), a->stage);
      *x |= 2;
    } else if (a->op == KT_OP_RESHARD) {
      if (!(*x & 2))
        return kt_fail(err, KT_EINVALID_SCHEDULE, "rank %d runs %s but stage %d is not unsharded",
                       r, kt_action_text(a, b1), a->stage);
      *x &= (uint8_t)~2;
    } else if (a->op < KT_OP_COUNT && *x == 1) {
      return kt_fail(err, KT_EINVALID_SCHEDULE,
                     "rank %d runs %s while stage %d is sharded (no %dUNSHARD before it)", r,
                     kt_action_text(a, b1), a->stage, a->stage);
    }
  }
  for (int st = 0; st < kt_schedule_stages(s); st++)
    if (kt_stage_rank(s, st) == r && (state[st] & 2))
      return kt_fail(err, KT_EINVALID_SCHEDULE,
                     "stage %d is still unsharded at the end of rank %d's list (no %dRESHARD)", st,
                     r, st);
  return KT_OK;
}

kt_status kt__check_stage_ops(const kt_schedule *s, kt_error *err) {
  int S = kt_schedule_stages(s);
  int *backwards = kt_calloc((size_t)S, sizeof *backwards);
  uint8_t *reduced = kt_calloc((size_t)S, 1), *state = kt_calloc((size_t)S, 1);
  kt_status st = KT_OK;
  if (!backwards || !reduced || !state) st = kt_fail(err, KT_ENOMEM, "out of memory");
  for (int r = 0; r < s->p && !st; r++) {
    st = check_reduce_rank(s, r, backwards, reduced, err);
    if (!st) st = check_shard_rank(s, r, state, err);
  }
  int any = 0;
  for (int i = 0; i < S && !st; i++) any |= reduced[i];
  for (int i = 0; i < S && !st && any; i++)
    if (!reduced[i])
      st = kt_fail(err, KT_EINVALID_SCHEDULE,
                   "stage %d never runs %dREDUCE_GRAD while other stages do (rank %d); its "
                   "gradients would not be scaled like theirs",
                   i, i, kt_stage_rank(s, i));
  free(backwards);
  free(reduced);
  free(state);
  return st;
}

/* ---- progress ------------------------------------------------------------ */

enum { SENT = 1, POSTED = 2 };

typedef struct {
  const kt_schedule *s;
  kt__dims d;
  uint8_t *done; /* per (stage, mb): bit 1 << kt_output when that result is made */
  uint8_t *msg;  /* per message id: SENT, POSTED */
  size_t *pos;   /* per rank */
} runner;

/* Whether the action at a can run; *wait receives what it waits for and
 * *peer that action's rank. */
static int can_run(const runner *u, int rank, const kt_action *a, kt_action *wait, int *peer) {
  const kt__dims *d = &u->d;
  *peer = rank;
  if (a->op == KT_OP_WAIT_SEND_F || a->op == KT_OP_WAIT_SEND_B) {
    long id = kt__msg_of_p2p(u->s, d, rank, a);
    *wait = kt__msg_recv(d, (size_t)id);
    *peer = kt_stage_rank(u->s, wait->stage);
    return (u->msg[id] & POSTED) != 0;
  }
  if (a->op >= KT_OP_COUNT) return 1;
  long in = kt__msg_consumed(u->s, d, rank, a);
  if (in >= 0) {
    *wait = kt__msg_send(d, (size_t)in);
    *peer = kt_stage_rank(u->s, wait->stage);
    return (u->msg[in] & SENT) != 0;
  }
  int from;
  kt_output need = kt_action_needs(a->op, a->stage, d->S, &from);
  if (need == KT_OUT_NONE) return 1;
  static const uint8_t producer_op[KT_OUT_COUNT] = {KT_OP_F, KT_OP_B, KT_OP_I};
  *wait = (kt_action){.stage = from, .mb = a->mb, .op = producer_op[need]};
  return (u->done[(size_t)from * (size_t)d->M + (size_t)a->mb] >> need) & 1;
}

static void run_action(runner *u, int rank, const kt_action *a) {
  if (kt_op_is_p2p(a->op)) {
    long id = kt__msg_of_p2p(u->s, &u->d, rank, a);
    if (a->op == KT_OP_SEND_F || a->op == KT_OP_SEND_B) u->msg[id] |= SENT;
    else if (a->op == KT_OP_RECV_F || a->op == KT_OP_RECV_B) u->msg[id] |= POSTED;
    return;
  }
  if (a->op >= KT_OP_COUNT) return;
  u->done[(size_t)a->stage * (size_t)u->d.M + (size_t)a->mb] |= (uint8_t)kt_action_publishes(a->op);
}

/* Advances rank r as far as it goes; 1 when it moved. */
static int advance(runner *u, int r) {
  const kt_rank_actions *ra = &u->s->ranks[r];
  int moved = 0;
  while (u->pos[r] < ra->n) {
    size_t g = u->pos[r];
    while ((ra->actions[g].flags & KT_ACTION_OVERLAP_NEXT) && g + 1 < ra->n) g++;
    kt_action wait;
    int peer, go = 1;
    for (size_t j = u->pos[r]; j <= g && go; j++) go = can_run(u, r, &ra->actions[j], &wait, &peer);
    if (!go) break;
    for (size_t j = u->pos[r]; j <= g; j++) run_action(u, r, &ra->actions[j]);
    u->pos[r] = g + 1;
    moved = 1;
  }
  return moved;
}

kt_status kt__check_progress(const kt_schedule *s, kt_error *err) {
  runner u = {.s = s, .d = {kt_schedule_stages(s), s->m}};
  u.done = kt_calloc((size_t)u.d.S * (size_t)u.d.M, 1);
  u.msg = kt_calloc(kt__msg_count(&u.d), 1);
  u.pos = kt_calloc((size_t)s->p, sizeof *u.pos);
  kt_status st = KT_OK;
  if (!u.done || !u.msg || !u.pos) {
    st = kt_fail(err, KT_ENOMEM, "out of memory");
    goto out;
  }
  for (int moved = 1; moved;) {
    moved = 0;
    for (int r = 0; r < s->p; r++) moved |= advance(&u, r);
  }
  kt_blocked b[8];
  int blocked = 0;
  for (int r = 0; r < s->p; r++) {
    if (u.pos[r] >= s->ranks[r].n) continue;
    if (blocked < 8) {
      kt_blocked *x = &b[blocked];
      x->rank = r;
      x->at = x->on = s->ranks[r].actions[u.pos[r]];
      x->on_rank = r;
      can_run(&u, r, &x->at, &x->on, &x->on_rank);
    }
    blocked++;
  }
  if (blocked) st = kt_deadlock_fail(b, blocked, err);
out:
  free(u.done);
  free(u.msg);
  free(u.pos);
  return st;
}
