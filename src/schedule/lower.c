/* The lowered form: a compute schedule plus explicit SEND/RECV actions, as
 * PyTorch's runtime executes it, and the checks that make it safe to run.
 *
 * A message is one hand-over between ranks: the output of F(s, j) to stage
 * s+1, or the input gradient of B/I(s, j) to stage s-1. It is identified by
 * its kind (forward/backward), its producing stage and its micro-batch. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/schedule.h"

enum { MSG_F, MSG_B };

typedef struct {
  int S, M;
} dims;

static size_t msg_id(const dims *d, int kind, int stage, int mb) {
  return ((size_t)kind * (size_t)d->S + (size_t)stage) * (size_t)d->M + (size_t)mb;
}

/* The message a compute action produces for another rank, or -1. */
static long produced(const kt_schedule *s, const dims *d, int rank, const kt_action *a) {
  if (a->op == KT_OP_F && a->stage + 1 < d->S && kt_stage_rank(s, a->stage + 1) != rank)
    return (long)msg_id(d, MSG_F, a->stage, a->mb);
  if ((a->op == KT_OP_B || a->op == KT_OP_I) && a->stage > 0 &&
      kt_stage_rank(s, a->stage - 1) != rank)
    return (long)msg_id(d, MSG_B, a->stage, a->mb);
  return -1;
}

/* The message a compute action needs from another rank, or -1. */
static long consumed(const kt_schedule *s, const dims *d, int rank, const kt_action *a) {
  if (a->op == KT_OP_F && a->stage > 0 && kt_stage_rank(s, a->stage - 1) != rank)
    return (long)msg_id(d, MSG_F, a->stage - 1, a->mb);
  if ((a->op == KT_OP_B || a->op == KT_OP_I) && a->stage + 1 < d->S &&
      kt_stage_rank(s, a->stage + 1) != rank)
    return (long)msg_id(d, MSG_B, a->stage + 1, a->mb);
  return -1;
}

/* The message a communication action moves, or -1 when it names a hand-over
 * that does not cross ranks here (or does not exist). */
static long comm_msg(const kt_schedule *s, const dims *d, int rank, const kt_action *a) {
  int st = a->stage, mb = a->mb;
  if (mb < 0 || mb >= d->M || st < 0 || st >= d->S || kt_stage_rank(s, st) != rank) return -1;
  switch (a->op) {
    case KT_OP_SEND_F:
      return st + 1 < d->S && kt_stage_rank(s, st + 1) != rank ? (long)msg_id(d, MSG_F, st, mb) : -1;
    case KT_OP_RECV_F:
      return st > 0 && kt_stage_rank(s, st - 1) != rank ? (long)msg_id(d, MSG_F, st - 1, mb) : -1;
    case KT_OP_SEND_B:
      return st > 0 && kt_stage_rank(s, st - 1) != rank ? (long)msg_id(d, MSG_B, st, mb) : -1;
    case KT_OP_RECV_B:
      return st + 1 < d->S && kt_stage_rank(s, st + 1) != rank ? (long)msg_id(d, MSG_B, st + 1, mb)
                                                               : -1;
    default: return -1;
  }
}

static kt_action send_of(const dims *d, size_t id) {
  int kind = (int)(id / ((size_t)d->S * d->M)), stage = (int)(id / d->M % d->S), mb = (int)(id % d->M);
  return (kt_action){.stage = stage, .mb = mb, .op = kind == MSG_F ? KT_OP_SEND_F : KT_OP_SEND_B};
}

static kt_action recv_of(const dims *d, size_t id) {
  kt_action a = send_of(d, id);
  if (a.op == KT_OP_SEND_F) a.stage++, a.op = KT_OP_RECV_F;
  else a.stage--, a.op = KT_OP_RECV_B;
  return a;
}

/* One entry per message: who sends it, to whom, and where the send sits.
 * stream: while lowering, the index of the first message of its (from, to)
 * stream in the sorted list. */
typedef struct {
  size_t id;
  int from, to;
  size_t from_pos, stream;
} message;

static int cmp_message(const void *x, const void *y) {
  const message *a = x, *b = y;
  if (a->from != b->from) return a->from < b->from ? -1 : 1;
  if (a->to != b->to) return a->to < b->to ? -1 : 1;
  return (a->from_pos > b->from_pos) - (a->from_pos < b->from_pos);
}

static kt_status push(kt_schedule *out, int rank, kt_action a, kt_error *err) {
  kt_rank_actions *ra = &out->ranks[rank];
  if (kt_grow((void **)&ra->actions, &ra->cap, ra->n + 1, sizeof a) != 0)
    return kt_fail(err, KT_ENOMEM, "out of memory");
  a.idle_before = 0;
  ra->actions[ra->n++] = a;
  return KT_OK;
}

kt_status kt_schedule_lower(const kt_schedule *s, kt_schedule *out, kt_error *err) {
  dims d = {kt_schedule_stages(s), s->m};
  kt_status st = kt_schedule_init_like(out, s, s->m, err);
  if (st) return st;
  size_t n_msg = 0;
  for (int r = 0; r < s->p; r++)
    for (size_t i = 0; i < s->ranks[r].n; i++) n_msg += produced(s, &d, r, &s->ranks[r].actions[i]) >= 0;
  message *msgs = kt_calloc(n_msg ? n_msg : 1, sizeof *msgs);
  size_t n_ids = 2 * (size_t)d.S * (size_t)d.M;
  long *index = malloc(n_ids * sizeof *index);     /* id -> position in msgs */
  size_t *next_recv = kt_calloc(n_msg ? n_msg : 1, sizeof *next_recv); /* per stream head */
  if (!msgs || !index || !next_recv) {
    st = kt_fail(err, KT_ENOMEM, "out of memory");
    goto done;
  }
  size_t k = 0;
  for (int r = 0; r < s->p; r++)
    for (size_t i = 0; i < s->ranks[r].n; i++) {
      const kt_action *a = &s->ranks[r].actions[i];
      long id = produced(s, &d, r, a);
      if (id < 0) continue;
      int to = kt_stage_rank(s, a->op == KT_OP_F ? a->stage + 1 : a->stage - 1);
      msgs[k++] = (message){.id = (size_t)id, .from = r, .to = to, .from_pos = i};
    }
  /* streams: messages grouped by (from, to), in the sender's order */
  qsort(msgs, n_msg, sizeof *msgs, cmp_message);
  for (size_t i = 0; i < n_ids; i++) index[i] = -1;
  for (size_t i = 0; i < n_msg; i++) {
    index[msgs[i].id] = (long)i;
    msgs[i].stream = i > 0 && msgs[i - 1].from == msgs[i].from && msgs[i - 1].to == msgs[i].to
                         ? msgs[i - 1].stream
                         : i;
    next_recv[msgs[i].stream] = msgs[i].stream;
  }
  for (int r = 0; r < s->p && !st; r++) {
    const kt_rank_actions *ra = &s->ranks[r];
    for (size_t i = 0; i < ra->n && !st;) {
      size_t g = i; /* the group: i .. g */
      while ((ra->actions[g].flags & KT_ACTION_OVERLAP_NEXT) && g + 1 < ra->n) g++;
      for (size_t j = i; j <= g && !st; j++) {
        long id = consumed(s, &d, r, &ra->actions[j]);
        if (id < 0 || index[id] < 0) continue; /* a missing producer: the validator says so */
        size_t want = (size_t)index[id], head = msgs[want].stream;
        while (next_recv[head] <= want && !st)
          st = push(out, r, recv_of(&d, msgs[next_recv[head]++].id), err);
      }
      for (size_t j = i; j <= g && !st; j++) st = push(out, r, ra->actions[j], err);
      for (size_t j = i; j <= g && !st; j++) {
        long id = produced(s, &d, r, &ra->actions[j]);
        if (id >= 0) st = push(out, r, send_of(&d, (size_t)id), err);
      }
      i = g + 1;
    }
  }
done:
  free(msgs);
  free(index);
  free(next_recv);
  if (st) kt_schedule_free(out);
  return st;
}

/* ---- checking a lowered schedule ---------------------------------------- */

static const char *fmt(const kt_action *a, char *buf) {
  kt_action_format(a, buf, 40);
  return buf;
}

typedef struct {
  const kt_schedule *s;
  dims d;
  long *send_pos, *recv_pos; /* per message id: position in its rank's list, -1 = none */
  message *msgs;
  size_t n_msg;
} checker;

/* Every comm action names a real cross-rank hand-over, once, on the right
 * side of the compute action it belongs to. */
static kt_status check_comm_actions(checker *c, kt_error *err) {
  const kt_schedule *s = c->s;
  char b1[40], b2[40];
  for (int r = 0; r < s->p; r++) {
    const kt_rank_actions *ra = &s->ranks[r];
    for (size_t i = 0; i < ra->n; i++) {
      const kt_action *a = &ra->actions[i];
      if (a->op < KT_OP_COUNT) continue;
      long id = comm_msg(s, &c->d, r, a);
      if (id < 0)
        return kt_fail(err, KT_EINVALID_SCHEDULE,
                       "rank %d runs %s, but no hand-over between ranks goes with it", r, fmt(a, b1));
      long *pos = a->op == KT_OP_SEND_F || a->op == KT_OP_SEND_B ? c->send_pos : c->recv_pos;
      if (pos[id] >= 0)
        return kt_fail(err, KT_EINVALID_SCHEDULE, "duplicate action: rank %d runs %s twice", r,
                       fmt(a, b1));
      pos[id] = (long)i;
    }
  }
  for (int r = 0; r < s->p; r++) {
    const kt_rank_actions *ra = &s->ranks[r];
    for (size_t i = 0; i < ra->n; i++) {
      const kt_action *a = &ra->actions[i];
      if (a->op >= KT_OP_COUNT) continue;
      long out = produced(s, &c->d, r, a), in = consumed(s, &c->d, r, a);
      if (out >= 0) {
        kt_action snd = send_of(&c->d, (size_t)out);
        if (c->send_pos[out] < 0)
          return kt_fail(err, KT_EINVALID_SCHEDULE, "missing %s: rank %d runs %s but never sends it",
                         fmt(&snd, b1), r, fmt(a, b2));
        if (c->send_pos[out] < (long)i)
          return kt_fail(err, KT_EINVALID_SCHEDULE, "bad order: rank %d runs %s before %s",
                         r, fmt(&snd, b1), fmt(a, b2));
        int to = kt_stage_rank(s, a->op == KT_OP_F ? a->stage + 1 : a->stage - 1);
        c->msgs[c->n_msg++] = (message){.id = (size_t)out, .from = r, .to = to,
                                        .from_pos = (size_t)c->send_pos[out]};
      }
      if (in >= 0) {
        kt_action rcv = recv_of(&c->d, (size_t)in);
        if (c->recv_pos[in] < 0)
          return kt_fail(err, KT_EINVALID_SCHEDULE,
                         "missing %s: rank %d runs %s without receiving its input", fmt(&rcv, b1), r,
                         fmt(a, b2));
        if (c->recv_pos[in] > (long)i)
          return kt_fail(err, KT_EINVALID_SCHEDULE, "bad order: rank %d runs %s before %s", r,
                         fmt(a, b2), fmt(&rcv, b1));
      }
    }
  }
  /* a SEND/RECV whose compute action is missing was caught by the compute
   * validation; one without its partner is caught here */
  for (size_t id = 0; id < 2 * (size_t)c->d.S * c->d.M; id++)
    if ((c->send_pos[id] < 0) != (c->recv_pos[id] < 0)) {
      kt_action x = c->send_pos[id] < 0 ? recv_of(&c->d, id) : send_of(&c->d, id);
      kt_action y = c->send_pos[id] < 0 ? send_of(&c->d, id) : recv_of(&c->d, id);
      return kt_fail(err, KT_EINVALID_SCHEDULE, "%s has no matching %s", fmt(&x, b1), fmt(&y, b2));
    }
  return KT_OK;
}

/* Each pair of ranks must receive in the order it sends. */
static kt_status check_pair_order(checker *c, kt_error *err) {
  qsort(c->msgs, c->n_msg, sizeof *c->msgs, cmp_message);
  char b1[40], b2[40];
  for (size_t i = 1; i < c->n_msg; i++) {
    const message *x = &c->msgs[i - 1], *y = &c->msgs[i];
    if (x->from != y->from || x->to != y->to) continue;
    if (c->recv_pos[x->id] > c->recv_pos[y->id]) {
      kt_action sx = send_of(&c->d, x->id), sy = send_of(&c->d, y->id);
      return kt_fail(err, KT_EINVALID_SCHEDULE,
                     "message order: rank %d sends %s before %s to rank %d, which receives them in "
                     "the opposite order (transports match messages between two ranks in order)",
                     x->from, fmt(&sx, b1), fmt(&sy, b2), x->to);
    }
  }
  return KT_OK;
}

/* Whether the compute action at a can start: its inputs are done or sent. */
static int ready(const checker *c, const uint8_t *done_f, const uint8_t *done_bi,
                 const uint8_t *done_i, const uint8_t *sent, int rank, const kt_action *a,
                 kt_action *wait) {
  const dims *d = &c->d;
  size_t k = (size_t)a->stage * d->M + (size_t)a->mb;
  long in = consumed(c->s, d, rank, a);
  if (in >= 0) {
    *wait = send_of(d, (size_t)in);
    return sent[in];
  }
  switch (a->op) {
    case KT_OP_F:
      *wait = (kt_action){.stage = a->stage - 1, .mb = a->mb, .op = KT_OP_F};
      return a->stage == 0 || done_f[k - d->M];
    case KT_OP_B:
    case KT_OP_I:
      if (a->stage == d->S - 1) {
        *wait = (kt_action){.stage = a->stage, .mb = a->mb, .op = KT_OP_F};
        return done_f[k];
      }
      *wait = (kt_action){.stage = a->stage + 1, .mb = a->mb, .op = KT_OP_B};
      return done_bi[k + d->M];
    default:
      *wait = (kt_action){.stage = a->stage, .mb = a->mb, .op = KT_OP_I};
      return done_i[k];
  }
}

/* Runs the lowered lists with non-blocking SEND/RECV until nothing moves. */
static kt_status check_progress(checker *c, kt_error *err) {
  const kt_schedule *s = c->s;
  const dims *d = &c->d;
  size_t cells = (size_t)d->S * d->M;
  uint8_t *flags = kt_calloc(cells * 3 + 2 * cells, 1);
  size_t *pos = kt_calloc((size_t)s->p, sizeof *pos);
  if (!flags || !pos) {
    free(flags);
    free(pos);
    return kt_fail(err, KT_ENOMEM, "out of memory");
  }
  uint8_t *done_f = flags, *done_bi = flags + cells, *done_i = flags + 2 * cells;
  uint8_t *sent = flags + 3 * cells;
  for (int moved = 1; moved;) {
    moved = 0;
    for (int r = 0; r < s->p; r++) {
      const kt_rank_actions *ra = &s->ranks[r];
      while (pos[r] < ra->n) {
        const kt_action *a = &ra->actions[pos[r]];
        if (a->op >= KT_OP_COUNT) {
          if (a->op == KT_OP_SEND_F || a->op == KT_OP_SEND_B) sent[comm_msg(s, d, r, a)] = 1;
          pos[r]++;
          moved = 1;
          continue;
        }
        size_t g = pos[r];
        while ((ra->actions[g].flags & KT_ACTION_OVERLAP_NEXT) && g + 1 < ra->n) g++;
        kt_action wait;
        int go = 1;
        for (size_t j = pos[r]; j <= g && go; j++)
          go = ready(c, done_f, done_bi, done_i, sent, r, &ra->actions[j], &wait);
        if (!go) break;
        for (size_t j = pos[r]; j <= g; j++) {
          const kt_action *x = &ra->actions[j];
          size_t k = (size_t)x->stage * d->M + (size_t)x->mb;
          if (x->op == KT_OP_F) done_f[k] = 1;
          if (x->op == KT_OP_B || x->op == KT_OP_I) done_bi[k] = 1;
          if (x->op == KT_OP_I) done_i[k] = 1;
        }
        pos[r] = g + 1;
        moved = 1;
      }
    }
  }
  char msg[KT_ERROR_LEN], b1[40], b2[40];
  size_t n = (size_t)snprintf(msg, sizeof msg, "deadlock:");
  int blocked = 0;
  for (int r = 0; r < s->p; r++) {
    if (pos[r] >= s->ranks[r].n) continue;
    const kt_action *a = &s->ranks[r].actions[pos[r]];
    kt_action wait = *a;
    ready(c, done_f, done_bi, done_i, sent, r, a, &wait);
    if (blocked++ < 6 && n < sizeof msg - 80)
      n += (size_t)snprintf(msg + n, sizeof msg - n, "%s rank %d waits at %s for %s",
                            blocked > 1 ? ";" : "", r, fmt(a, b1), fmt(&wait, b2));
  }
  free(flags);
  free(pos);
  if (!blocked) return KT_OK;
  return kt_fail(err, KT_EDEADLOCK, "%s", msg);
}

kt_status kt_lowered_validate(const kt_schedule *lowered, kt_error *err) {
  kt_schedule compute;
  kt_status st = kt_schedule_init_like(&compute, lowered, lowered->m, err);
  if (st) return st;
  for (int r = 0; r < lowered->p && !st; r++)
    for (size_t i = 0; i < lowered->ranks[r].n && !st; i++) {
      const kt_action *a = &lowered->ranks[r].actions[i];
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
  checker c = {.s = lowered, .d = {kt_schedule_stages(lowered), lowered->m}};
  size_t n_ids = 2 * (size_t)c.d.S * c.d.M;
  c.send_pos = malloc(n_ids * sizeof *c.send_pos);
  c.recv_pos = malloc(n_ids * sizeof *c.recv_pos);
  c.msgs = kt_calloc(n_ids, sizeof *c.msgs);
  if (!c.send_pos || !c.recv_pos || !c.msgs) st = kt_fail(err, KT_ENOMEM, "out of memory");
  else {
    for (size_t i = 0; i < n_ids; i++) c.send_pos[i] = c.recv_pos[i] = -1;
    st = check_comm_actions(&c, err);
    if (!st) st = check_pair_order(&c, err);
    if (!st) st = check_progress(&c, err);
  }
  free(c.send_pos);
  free(c.recv_pos);
  free(c.msgs);
  return st;
}
