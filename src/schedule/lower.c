/* The lowered form: a compute schedule plus the communication actions
 * PyTorch's runtime executes (SEND/RECV, and in torch 2.15's IR WAIT_SEND
 * and REDUCE_GRAD/WAIT_REDUCE_GRAD). lowered_check.c checks such files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/schedule.h"
#include "schedule/messages.h"

long kt__msg_produced(const kt_schedule *s, const kt__dims *d, int rank, const kt_action *a) {
  unsigned made = kt_action_publishes(a->op);
  for (int r = KT_OUT_F; r <= KT_OUT_BI; r++) {
    int to = (made >> r) & 1 ? kt_output_consumer((kt_output)r, a->stage, d->S) : -1;
    if (to >= 0 && kt_stage_rank(s, to) != rank) return (long)kt__msg_id(d, r, a->stage, a->mb);
  }
  return -1;
}

long kt__msg_consumed(const kt_schedule *s, const kt__dims *d, int rank, const kt_action *a) {
  int from;
  kt_output need = kt_action_needs(a->op, a->stage, d->S, &from);
  if (need == KT_OUT_NONE || need == KT_OUT_I || from == a->stage || kt_stage_rank(s, from) == rank)
    return -1;
  return (long)kt__msg_id(d, need, from, a->mb);
}

long kt__msg_of_p2p(const kt_schedule *s, const kt__dims *d, int rank, const kt_action *a) {
  int st = a->stage, mb = a->mb;
  if (mb < 0 || mb >= d->M || st < 0 || st >= d->S || kt_stage_rank(s, st) != rank) return -1;
  int from;
  kt_output r = kt_comm_message(a->op, st, &from);
  if (r == KT_OUT_NONE) return -1;
  /* the other end: the producer for a RECV, the consumer for a send */
  int peer = from != st ? from : kt_output_consumer(r, st, d->S);
  if (peer < 0 || peer >= d->S || kt_stage_rank(s, peer) == rank) return -1; /* no hand-over */
  return (long)kt__msg_id(d, r == KT_OUT_F ? KT__MSG_F : KT__MSG_B, from, mb);
}

kt_action kt__msg_send(const kt__dims *d, size_t id) {
  size_t per_kind = (size_t)d->S * (size_t)d->M;
  int kind = (int)(id / per_kind), stage = (int)(id / (size_t)d->M % (size_t)d->S);
  return (kt_action){.stage = stage,
                     .mb = (int)(id % (size_t)d->M),
                     .op = kind == KT__MSG_F ? KT_OP_SEND_F : KT_OP_SEND_B};
}

kt_action kt__msg_recv(const kt__dims *d, size_t id) {
  kt_action a = kt__msg_send(d, id);
  if (a.op == KT_OP_SEND_F) a.stage++, a.op = KT_OP_RECV_F;
  else a.stage--, a.op = KT_OP_RECV_B;
  return a;
}

kt_action kt__msg_wait(const kt__dims *d, size_t id) {
  kt_action a = kt__msg_send(d, id);
  a.op = a.op == KT_OP_SEND_F ? KT_OP_WAIT_SEND_F : KT_OP_WAIT_SEND_B;
  return a;
}

int kt__msg_to(const kt_schedule *s, const kt__dims *d, size_t id) {
  return kt_stage_rank(s, kt__msg_recv(d, id).stage);
}

int kt__message_cmp(const void *x, const void *y) {
  const kt__message *a = x, *b = y;
  if (a->from != b->from) return a->from < b->from ? -1 : 1;
  if (a->to != b->to) return a->to < b->to ? -1 : 1;
  return (a->from_pos > b->from_pos) - (a->from_pos < b->from_pos);
}

/* ---- torch versions ----------------------------------------------------- */

const char *kt_torch_ir_name(kt_torch_ir ir) {
  return ir == KT_TORCH_IR_PRE_2_15 ? "pre-2.15" : "2.15";
}

kt_status kt_torch_ir_from_version(const char *text, kt_torch_ir *out, kt_error *err) {
  if (!strcmp(text, "latest") || !strcmp(text, "2.15+")) {
    *out = KT_TORCH_IR_2_15;
    return KT_OK;
  }
  int major, minor, used = 0;
  if (sscanf(text, "%d.%d%n", &major, &minor, &used) != 2 || major < 1 || minor < 0 ||
      (text[used] && text[used] != '.'))
    return kt_fail(err, KT_EINVAL, "torch version '%s': expected MAJOR.MINOR, e.g. 2.15", text);
  *out = major > 2 || (major == 2 && minor >= 15) ? KT_TORCH_IR_2_15 : KT_TORCH_IR_PRE_2_15;
  return KT_OK;
}

/* ---- lowering ------------------------------------------------------------ */

typedef struct {
  const kt_schedule *s;
  kt__dims d;
  kt_torch_ir ir;
  kt__message *msgs;
  long *index;        /* message id -> position in msgs */
  size_t *next_recv;  /* per stream head: the next message to receive */
  uint8_t *send_open; /* per message id: sent and not yet retired (2.15) */
  int *backwards;     /* per stage: B and W run so far (its rank's) */
  kt_schedule *out;
} lowering;

static kt_status push(kt_schedule *out, int rank, kt_action a, kt_error *err) {
  kt_rank_actions *ra = &out->ranks[rank];
  if (ra->n == ra->cap && kt_schedule_room(out, rank, ra->n + 1))
    return kt_fail(err, KT_ENOMEM, "out of memory");
  a.idle_before = 0;
  a.flags &= KT_ACTION_OVERLAP_NEXT;
  ra->actions[ra->n++] = a;
  return KT_OK;
}

/* One group (an action, or an overlapped group i..g) on rank r: its RECVs,
 * the group, the WAIT_SENDs its backwards make safe, its SENDs, and the
 * REDUCE_GRADs of stages whose last backward it ran. */
static kt_status lower_group(lowering *L, int r, size_t i, size_t g, kt_error *err) {
  const kt_action *acts = L->s->ranks[r].actions;
  kt_status st = KT_OK;
  for (size_t j = i; j <= g && !st; j++) {
    long id = kt__msg_consumed(L->s, &L->d, r, &acts[j]);
    if (id < 0 || L->index[id] < 0) continue; /* a missing producer: the validator says so */
    size_t want = (size_t)L->index[id], head = L->msgs[want].stream;
    while (L->next_recv[head] <= want && !st)
      st = push(L->out, r, kt__msg_recv(&L->d, L->msgs[L->next_recv[head]++].id), err);
  }
  for (size_t j = i; j <= g && !st; j++) st = push(L->out, r, acts[j], err);
  int v215 = L->ir == KT_TORCH_IR_2_15;
  for (size_t j = i; j <= g && !st && v215; j++) {
    /* the peer consumed F(s, j)'s output before this backward could run */
    if (acts[j].op != KT_OP_B && acts[j].op != KT_OP_I) continue;
    kt_action f = acts[j];
    f.op = KT_OP_F;
    long id = kt__msg_produced(L->s, &L->d, r, &f);
    if (id < 0 || !L->send_open[id]) continue;
    L->send_open[id] = 0;
    st = push(L->out, r, kt__msg_wait(&L->d, (size_t)id), err);
  }
  for (size_t j = i; j <= g && !st; j++) {
    long id = kt__msg_produced(L->s, &L->d, r, &acts[j]);
    if (id < 0) continue;
    L->send_open[id] = 1;
    st = push(L->out, r, kt__msg_send(&L->d, (size_t)id), err);
  }
  for (size_t j = i; j <= g && !st && v215; j++) {
    if (acts[j].op != KT_OP_B && acts[j].op != KT_OP_W) continue;
    if (++L->backwards[acts[j].stage] != L->d.M) continue;
    kt_action red = {.stage = acts[j].stage, .mb = -1, .op = KT_OP_REDUCE_GRAD};
    st = push(L->out, r, red, err);
    red.op = KT_OP_WAIT_REDUCE_GRAD;
    if (!st) st = push(L->out, r, red, err);
  }
  return st;
}

/* Sends no backward retired are retired at the end of the list, in the
 * order they were sent (torch 2.15 does the same). */
static kt_status retire_rest(lowering *L, int r, kt_error *err) {
  size_t n = L->out->ranks[r].n;
  kt_status st = KT_OK;
  for (size_t i = 0; i < n && !st; i++) {
    kt_action a = L->out->ranks[r].actions[i];
    if (a.op != KT_OP_SEND_F && a.op != KT_OP_SEND_B) continue;
    long id = kt__msg_of_p2p(L->s, &L->d, r, &a);
    if (id < 0 || !L->send_open[id]) continue;
    L->send_open[id] = 0;
    st = push(L->out, r, kt__msg_wait(&L->d, (size_t)id), err);
  }
  return st;
}

/* Groups messages into (from, to) streams in the sender's order. */
static size_t collect_messages(lowering *L) {
  const kt_schedule *s = L->s;
  size_t k = 0;
  for (int r = 0; r < s->p; r++)
    for (size_t i = 0; i < s->ranks[r].n; i++) {
      long id = kt__msg_produced(s, &L->d, r, &s->ranks[r].actions[i]);
      if (id >= 0)
        L->msgs[k++] = (kt__message){
            .id = (size_t)id, .from = r, .to = kt__msg_to(s, &L->d, (size_t)id), .from_pos = i};
    }
  qsort(L->msgs, k, sizeof *L->msgs, kt__message_cmp);
  for (size_t i = 0; i < kt__msg_count(&L->d); i++) L->index[i] = -1;
  for (size_t i = 0; i < k; i++) {
    L->index[L->msgs[i].id] = (long)i;
    L->msgs[i].stream =
        i > 0 && L->msgs[i - 1].from == L->msgs[i].from && L->msgs[i - 1].to == L->msgs[i].to
            ? L->msgs[i - 1].stream
            : i;
    L->next_recv[L->msgs[i].stream] = L->msgs[i].stream;
  }
  return k;
}

kt_status kt_schedule_lower_ir(const kt_schedule *s, kt_torch_ir ir, kt_schedule *out,
                               kt_error *err) {
  lowering L = {.s = s, .d = {kt_schedule_stages(s), s->m}, .ir = ir, .out = out};
  kt_status st = kt_schedule_init_like(out, s, s->m, err);
  if (st) return st;
  size_t n_msg = 0, n_ids = kt__msg_count(&L.d);
  for (int r = 0; r < s->p; r++)
    for (size_t i = 0; i < s->ranks[r].n; i++)
      n_msg += kt__msg_produced(s, &L.d, r, &s->ranks[r].actions[i]) >= 0;
  L.msgs = kt_calloc(n_msg ? n_msg : 1, sizeof *L.msgs);
  L.index = malloc(n_ids * sizeof *L.index);
  L.next_recv = kt_calloc(n_msg ? n_msg : 1, sizeof *L.next_recv);
  L.send_open = kt_calloc(n_ids, 1);
  L.backwards = kt_calloc((size_t)L.d.S, sizeof *L.backwards);
  if (!L.msgs || !L.index || !L.next_recv || !L.send_open || !L.backwards) {
    st = kt_fail(err, KT_ENOMEM, "out of memory");
    goto done;
  }
  collect_messages(&L);
  for (int r = 0; r < s->p && !st; r++) {
    const kt_rank_actions *ra = &s->ranks[r];
    for (size_t i = 0; i < ra->n && !st;) {
      size_t g = i;
      while ((ra->actions[g].flags & KT_ACTION_OVERLAP_NEXT) && g + 1 < ra->n) g++;
      st = lower_group(&L, r, i, g, err);
      i = g + 1;
    }
    if (!st && ir == KT_TORCH_IR_2_15) st = retire_rest(&L, r, err);
  }
done:
  free(L.msgs);
  free(L.index);
  free(L.next_recv);
  free(L.send_open);
  free(L.backwards);
  if (st) kt_schedule_free(out);
  return st;
}

kt_status kt_schedule_lower(const kt_schedule *s, kt_schedule *out, kt_error *err) {
  return kt_schedule_lower_ir(s, KT_TORCH_IR_2_15, out, err);
}
