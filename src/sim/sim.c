/* Discrete-event simulation of a schedule under a cost model.
 *
 * A schedule is either compute-only or a lowered program (SEND/RECV/WAIT
 * actions among the compute ones, kt_schedule_lower). Both run under the
 * same rules (kaiten/schedule.h: kt_action_needs and friends). A compute-only
 * schedule behaves as its lowering does: each result another rank needs is
 * sent when it is made and arrives one hop later. In a lowered program the
 * SEND says when: the result arrives one hop after its SEND runs; a RECV
 * only posts (it takes no time); a WAIT_SEND holds its rank until the peer
 * has posted the matching RECV and the message has arrived.
 *
 * Ranks are advanced from a work queue: a rank runs actions while their
 * inputs are known, then parks; making a result wakes the rank that
 * consumes it. Start times only depend on finished results, so the
 * processing order never changes the answer, and the work is linear in the
 * number of actions. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/state.h"
/* When a message sent at t from one rank arrives at another without links:
 * one hop later (the costs' hop, or their link's). */
static inline double hop_arrival(const sim_state *st, int from, int to, double t) {
  return t + (st->c->n_links ? kt_cost_link(st->c, from, to) : st->comm);
}

/* The same with the links of a topology, when the costs have one. */
static double arrive_at(const sim_state *st, int from, int to, double t) {
  if (st->links) return kt_links_transfer(st->links, from, to, st->c->comm_bytes, t);
  return hop_arrival(st, from, to, t);
}

/* When result need of (from, mb) is available to its consumer, NAN while it
 * is not: from the other half's channel in a two-thread run when made
 * there (an empty slot is left in pending, for the rank to park on), else
 * from the pairs table (*table set). */
static inline __attribute__((always_inline)) double input_time(sim_state *st, kt_output need,
                                                               int from, int mb, int *table) {
  if (st->half) { /* two threads: made on the other half? */
    int ch = st->half->chan_of[(size_t)need * (size_t)st->S + (size_t)from];
    if (ch >= 0) {
      const _Atomic uint64_t *slot = &st->half->chan[(size_t)ch * (size_t)st->half->m + mb];
      double t = kt__sim_slot_time(slot);
      if (isnan(t)) st->half->pending = slot;
      return t;
    }
  }
  *table = 1;
  return kt__pairs_get(&st->done, need, from - st->stage0, mb);
}

/* Time a compute action's input is ready (0 when it needs none), or NAN
 * while it is not; *dep receives what it waits for (for deadlock reports),
 * *key that result (RESULT_KEY; 0 when it needs none). Inlined: two calls
 * a visit, in the loop every action goes through. */
static inline __attribute__((always_inline)) double ready_time(sim_state *st, const kt_action *a,
                                                               kt_action *dep, size_t *key) {
  int from, table = 0;
  kt_output need = kt_action_needs(a->op, a->stage, st->S, &from);
  if (need == KT_OUT_NONE) return *key = 0, 0.0;
  static const uint8_t producer_op[KT_OUT_COUNT] = {KT_OP_F, KT_OP_B, KT_OP_I};
  *dep = (kt_action){.stage = from, .mb = a->mb, .op = producer_op[need]};
  *key = RESULT_KEY(st, need, from, a->mb);
  return input_time(st, need, from, a->mb, &table);
}

/* Whether action a reads its input from the pairs table (not a channel
 * from the other half of a two-thread run). */
static inline int reads_pairs(const sim_state *st, const kt_action *a) {
  int from;
  kt_output need = kt_action_needs(a->op, a->stage, st->S, &from);
  if (need == KT_OUT_NONE) return 0;
  return !st->half || st->half->chan_of[(size_t)need * (size_t)st->S + (size_t)from] < 0;
}

/* Two threads: publishes result r of (stage, mb) to the other half (release: its
 * reader reads only the time). */
static void half_put(sim_state *st, int r, int stage, int mb, double t) {
  kt__sim_half *h = st->half;
  uint64_t bits;
  memcpy(&bits, &t, sizeof bits);
  int ch = h->chan_of[(size_t)r * (size_t)st->S + (size_t)stage];
  atomic_store_explicit(&h->chan[(size_t)ch * (size_t)h->m + mb], bits, memory_order_release);
  atomic_fetch_add(&h->out, 1);
  kt__sim_par_notify(h);
}

/* Wakes rank r for the result key just made. Without links only when r
 * waits for that very result: a rank woken for another one would be
 * visited only to find its action still waiting (1F1B: every second
 * visit; a visit misses the cache for the rank's actions). With links the
 * ranks go first-woken-first, as the link model was measured. */
static void wake_for(sim_state *st, int r, size_t key) {
  if (st->links || st->rk[r].waits == key) kt_rank_queue_wake(&st->work, r);
}

/* Publishes result r of a finished compute action (stage, mb): to a
 * consumer on the same rank at once, to another rank one hop later
 * (compute-only) or when its SEND runs (lowered). Returns the messages
 * sent to other ranks (compute-only: 0 or 1), -1 out of memory. */
static inline __attribute__((always_inline)) int publish_result(sim_state *st, int rank, int r,
                                                                int stage, int mb, double end,
                                                                int plain) {
  /* plain (a constant where inlined): st->plain holds, no links, not lowered */
  int to = kt_output_consumer((kt_output)r, stage, st->S), sent = 0;
  if (st->half && r == KT_OUT_BI && stage == 0) {
    return 0; /* two threads: nobody reads it (in a half that reads nothing its row would stay held) */
  } else if (st->half && st->half->chan_of[(size_t)r * (size_t)st->S + (size_t)stage] >= 0) {
    int dest = st->owner[to];
    half_put(st, r, stage, mb,
             plain ? hop_arrival(st, rank, dest, end) : arrive_at(st, rank, dest, end)),
        sent++;
  } else if (to < 0 || st->owner[to] == rank) {
    double *slot = kt__pairs_put(&st->done, (kt_output)r, stage - st->stage0, mb);
    if (!slot) return -1;
    *slot = end;
  } else if (plain || !st->lowered) {
    double *slot = kt__pairs_put(&st->done, (kt_output)r, stage - st->stage0, mb);
    if (!slot) return -1;
    int dest = st->owner[to];
    *slot = plain ? hop_arrival(st, rank, dest, end) : arrive_at(st, rank, dest, end);
    wake_for(st, dest, RESULT_KEY(st, r, stage, mb));
    sent++;
  }
  /* the rank itself runs on while its actions are ready */
  if (!plain && st->links && to >= 0 && st->owner[to] == rank) kt_rank_queue_wake(&st->work, rank);
  return sent;
}

/* Publishes every result of a finished compute action: the messages sent
 * to other ranks, -1 out of memory. */
static int publish(sim_state *st, int rank, const kt_action *a, double end) {
  unsigned made = kt_action_publishes(a->op);
  int sent = 0;
  for (int r = 0; r < KT_OUT_COUNT; r++) {
    if (!(made & (1u << r))) continue;
    int n = publish_result(st, rank, r, a->stage, a->mb, end, 0);
    if (n < 0) return -1;
    sent += n;
  }
  return sent;
}

/* Bytes of one message as the costs model it (--comm-bytes; 0: not given). */
static int64_t message_bytes(const sim_state *st) {
  return st->c->comm_bytes > 0 ? (int64_t)st->c->comm_bytes : 0;
}

static inline const stage_costs *cost_of(const sim_state *st, int stage, int mb) {
  size_t at = (size_t)st->cost_ix[stage] * (size_t)st->cost_mbs;
  return &st->cost[at + (size_t)(st->cost_mbs > 1 ? mb : 0)];
}

/* A finished compute action into its rank's metrics: its span, the bytes
 * it sent, the pairs in flight, and high, the highest memory level it
 * leaves (-INFINITY: none). */
static inline void account(rank_run *rm, int op, double start, double end, double high,
                           int64_t bytes) {
  if (rm->actions_run == 0) rm->start = start, rm->end = end;
  if (start < rm->start) rm->start = start;
  if (end > rm->end) rm->end = end;
  rm->busy += end - start;
  rm->actions_run++;
  rm->bytes_sent += bytes;
  /* without branches: the ops alternate, which no predictor follows */
  rm->inflight += op == KT_OP_F;
  rm->peak_inflight = rm->inflight > rm->peak_inflight ? rm->inflight : rm->peak_inflight;
  rm->inflight -= op == KT_OP_B || op == KT_OP_W;
  if (high > rm->peak_memory) rm->peak_memory = high;
}

static kt_status record(sim_state *st, kt_timeline *tl, int rank, const kt_action *a, double start,
                        double end, double publish_at) {
  int sent = publish(st, rank, a, publish_at);
  if (sent < 0) return KT_ENOMEM;
  st->sent += sent;
  /* compute-only: the messages it sends leave with it (lowered: on SENDs) */
  int64_t bytes = sent * message_bytes(st);
  const stage_costs *sc = cost_of(st, a->stage, a->mb);
  double delta = sc->mem[a->op], extra = sc->transient, before = st->rk[rank].mem;
  double after = before + delta;
  st->rk[rank].mem = after;
  /* the memory levels it leaves: the scratch an op holds while it runs,
   * then what stays; else an F holds its activation from its start and a
   * backward frees at its end. The timeline samples them, and the metrics
   * take their peak (as kt_timeline_metrics reads it from the samples). */
  kt_mem_sample ms[2];
  int n_ms = 0;
  if (extra > 0) {
    ms[n_ms++] = (kt_mem_sample){rank, start, fmax(before, after) + extra};
    ms[n_ms++] = (kt_mem_sample){rank, end, after};
  } else if (delta != 0) {
    ms[n_ms++] = (kt_mem_sample){rank, a->op == KT_OP_F ? start : end, after};
  }
  if (st->met) {
    double high = -INFINITY;
    for (int i = 0; i < n_ms; i++) high = ms[i].value > high ? ms[i].value : high;
    account(&st->rk[rank], a->op, start, end, high, bytes);
  }
  if (!tl && !st->sink) return KT_OK;
  kt_event e = {.rank = rank,
                .stage = a->stage,
                .mb = a->mb,
                .op = a->op,
                .flags = a->flags,
                .start = start,
                .end = end,
                .bytes = bytes};
  if (st->sink) {
    st->sink->event(st->sink->ctx, &e);
    for (int i = 0; i < n_ms; i++) st->sink->mem(st->sink->ctx, rank, ms[i].t, ms[i].value);
  }
  if (!tl) return KT_OK;
  if (kt_timeline_add_event(tl, &e)) return KT_ENOMEM;
  for (int i = 0; i < n_ms; i++)
    if (kt_timeline_add_mem(tl, rank, ms[i].t, ms[i].value)) return KT_ENOMEM;
  return KT_OK;
}

/* The duration of rank's action g places after its next one: its stage's
 * cost, or its own (kt_costs.action_time). */
static double action_cost(const sim_state *st, int rank, size_t g) {
  size_t at = st->rk[rank].pos + g;
  if (st->first_action) return st->c->action_time[st->first_action[rank] + at];
  const kt_action *a = &st->rk[rank].actions[at];
  return cost_of(st, a->stage, a->mb)->dur[a->op];
}

/* Runs one compute action, or an overlapped group as a whole, when ready:
 * 1 when it ran, 0 when it waits, -1 when out of memory. */
static int run_compute(sim_state *st, kt_timeline *tl, int rank) {
  rank_run *rr = &st->rk[rank];
  const kt_action *a = &rr->actions[rr->pos];
  kt_action dep;
  double ready = ready_time(st, a, &dep, &rr->waits);
  if (isnan(ready)) return 0;
  int reads_first = rr->waits != 0 && (!st->half || reads_pairs(st, a));
  size_t group = 1;
  while ((a[group - 1].flags & KT_ACTION_OVERLAP_NEXT) && rr->pos + group < rr->n) {
    double r2 = ready_time(st, &a[group], &dep, &rr->waits);
    if (isnan(r2)) return 0;
    if (r2 > ready) ready = r2;
    group++;
  }
  double start = ready > rr->free_at ? ready : rr->free_at;
  /* the first op's cost is looked up once: a lone action (the common case) needs no more */
  double first = action_cost(st, rank, 0), total = first, longest = first;
  for (size_t g = 1; g < group; g++) {
    double d = action_cost(st, rank, g);
    total += d;
    if (d > longest) longest = d;
  }
  /* overlap credit: the group shrinks and its ops are drawn proportionally */
  double scale = 1;
  if (group > 1 && st->c->overlap > 0 && total > 0) {
    double shrunk = total - st->c->overlap * (total - longest);
    scale = shrunk / total;
    total = shrunk;
  }
  double t = start;
  st->sent = 0;
  for (size_t g = 0; g < group; g++) {
    double d = (g == 0 ? first : action_cost(st, rank, g)) * scale;
    /* a lone action publishes at its end; an overlapped group when it all ends */
    if (record(st, tl, rank, &a[g], t, t + d, start + total)) return -1;
    t += d;
  }
  /* its inputs read (after its own results went into their rows) */
  if (reads_first) kt__pairs_read(&st->done, a->mb);
  for (size_t g = 1; g < group; g++)
    if (reads_pairs(st, &a[g])) kt__pairs_read(&st->done, a[g].mb);
  rr->free_at = start + total + st->sent * st->c->send_overhead; /* posting the sends */
  rr->pos += group;
  return 1;
}

/* run_compute for a lone action of a plain run (st->plain): the same
 * times, memory and metrics without the general path's lookups and loops
 * (1F1B P=1024: 415 instructions an action on that path). 1 ran, 0 waits,
 * -1 out of memory. */
static inline int run_plain(sim_state *st, int rank, const kt_action *a) {
  rank_run *rr = &st->rk[rank];
  int op = a->op, stage = a->stage, mb = a->mb, from, reads = 0;
  kt_output need = kt_action_needs(op, stage, st->S, &from);
  double ready = 0;
  if (need != KT_OUT_NONE) { /* (what it waits for: set when it must wait) */
    ready = input_time(st, need, from, mb, &reads);
    if (isnan(ready)) return rr->waits = RESULT_KEY(st, need, from, mb), 0;
  }
  double start = ready > rr->free_at ? ready : rr->free_at;
  const stage_costs *sc = &st->cost[st->cost_ix[stage]];
  double end = start + sc->dur[op];
  int sent = 0; /* F publishes F, B BI, I BI then I (kt_action_publishes) */
  if (op == KT_OP_F) sent = publish_result(st, rank, KT_OUT_F, stage, mb, end, 1);
  else if (op != KT_OP_W) sent = publish_result(st, rank, KT_OUT_BI, stage, mb, end, 1);
  if (op == KT_OP_I && sent >= 0) {
    int n = publish_result(st, rank, KT_OUT_I, stage, mb, end, 1);
    sent = n < 0 ? -1 : sent + n;
  }
  if (sent < 0) return -1;
  double delta = sc->mem[op], extra = sc->transient, before = rr->mem, after = before + delta;
  rr->mem = after;
  if (st->met) /* the highest of the levels record() samples */
    account(rr, op, start, end,
            extra > 0    ? fmax(before, after) + extra
            : delta != 0 ? after
                         : -INFINITY,
            sent * message_bytes(st));
  if (reads) kt__pairs_read(&st->done, mb);
  rr->free_at = end + sent * st->c->send_overhead;
  rr->pos++;
  return 1;
}

/* The message a SEND/RECV/WAIT_SEND names (kaiten/schedule.h). */
static size_t comm_msg(const sim_state *st, const kt_action *a) {
  int from;
  kt_output r = kt_comm_message(a->op, a->stage, &from);
  return MSG(st, r, from, a->mb);
}

static int add_comm(kt_timeline *tl, int rank, const kt_action *a, double start, double end,
                    size_t *index, int64_t bytes) {
  if (!tl) return 1;
  if (index) *index = tl->n_comm;
  kt_event e = {.rank = rank,
                .stage = a->stage,
                .mb = a->mb,
                .op = a->op,
                .start = start,
                .end = end,
                .bytes = bytes};
  return kt_timeline_add_comm(tl, &e) ? -1 : 1;
}

/* Runs one communication action of a lowered program: 1 ran, 0 waits, -1 ENOMEM. */
static int run_comm(sim_state *st, kt_timeline *tl, int rank) {
  const kt_action *a = &st->rk[rank].actions[st->rk[rank].pos];
  double now = st->rk[rank].free_at;
  int rc = 1;
  if (a->op == KT_OP_SEND_F || a->op == KT_OP_SEND_B) {
    size_t m = comm_msg(st, a);
    kt_output r = a->op == KT_OP_SEND_F ? KT_OUT_F : KT_OUT_BI;
    double arrive = arrive_at(st, rank, st->owner[kt_output_consumer(r, a->stage, st->S)], now);
    double *slot = kt__pairs_put(&st->done, r, a->stage, a->mb);
    if (!slot) return -1;
    st->sent_at[m] = now;
    st->rk[rank].free_at = now + st->c->send_overhead;
    *slot = arrive;
    kt_rank_queue_wake(&st->work, st->owner[kt_output_consumer(r, a->stage, st->S)]);
    int64_t bytes = message_bytes(st);
    if (st->met) st->rk[rank].bytes_sent += bytes;
    rc = add_comm(tl, rank, a, now, arrive, NULL, bytes);
  } else if (a->op == KT_OP_RECV_F || a->op == KT_OP_RECV_B) {
    int from;
    kt_comm_message(a->op, a->stage, &from);
    size_t m = comm_msg(st, a);
    st->posted_at[m] = now;
    kt_rank_queue_wake(&st->work, st->owner[from]); /* its sender may wait in a WAIT_SEND */
    rc = add_comm(tl, rank, a, now, now, &st->recv_event[m], 0);
  } else if (a->op == KT_OP_WAIT_SEND_F || a->op == KT_OP_WAIT_SEND_B) {
    size_t m = comm_msg(st, a);
    if (isnan(st->posted_at[m]) || isnan(st->sent_at[m])) return 0;
    double arrived = kt__pairs_get(&st->done, a->op == KT_OP_WAIT_SEND_F ? KT_OUT_F : KT_OUT_BI,
                                   a->stage, a->mb);
    double done = fmax(now, fmax(st->posted_at[m], arrived));
    st->rk[rank].free_at = done;
    rc = add_comm(tl, rank, a, now, done, NULL, 0);
  } else { /* REDUCE_GRAD, UNSHARD, ...: no cost in the simulation */
    rc = add_comm(tl, rank, a, now, now, NULL, 0);
  }
  if (rc >= 0) st->rk[rank].pos++;
  return rc;
}

/* (sim/state.h) */
kt_status kt__sim_advance(sim_state *st, kt_timeline *tl, int rank) {
  const rank_run *ra = &st->rk[rank];
  /* Ranks take turns, a few actions a visit: fetch this rank's next actions
   * now, for its next visit (many ranks' lists are more streams than the
   * hardware prefetcher follows). */
  if (st->rk[rank].pos + PREFETCH_AHEAD < ra->n)
    __builtin_prefetch(&ra->actions[st->rk[rank].pos + PREFETCH_AHEAD]);
  /* and the completion times the action after this visit reads and writes
   * (its line came with the prefetch above on an earlier visit): with
   * S*M pairs past the cache these are the visit's misses */
  if (st->rk[rank].pos + PREFETCH_PAIRS < ra->n) {
    const kt_action *x = &ra->actions[st->rk[rank].pos + PREFETCH_PAIRS];
    int from;
    /* (unsigned: a half's table holds its own stages only) */
    unsigned cells = (unsigned)st->done.row;
    int row = x->op < KT_OP_COUNT ? kt__pairs_row(&st->done, x->mb) : -1;
    if (row >= 0 && (unsigned)(x->stage - st->stage0) < cells) {
      __builtin_prefetch(kt__pairs_cell_in(&st->done, row, x->stage - st->stage0), 1);
      if (kt_action_needs(x->op, x->stage, st->S, &from) != KT_OUT_NONE &&
          (unsigned)(from - st->stage0) < cells)
        __builtin_prefetch(kt__pairs_cell_in(&st->done, row, from - st->stage0));
    }
  }
  while (st->rk[rank].pos < ra->n) {
    const kt_action *a = &ra->actions[st->rk[rank].pos];
    int ran = st->plain && a->op < KT_OP_COUNT && !(a->flags & KT_ACTION_OVERLAP_NEXT)
                  ? run_plain(st, rank, a)
              : a->op < KT_OP_COUNT ? run_compute(st, tl, rank)
                                    : run_comm(st, tl, rank);
    if (ran < 0) return KT_ENOMEM;
    if (!ran && st->half && st->half->pending) { /* parked on the other half */
      kt__sim_half *h = st->half;
      if (h->n_wait == h->cap_wait) return KT_ENOMEM; /* (one entry a rank) */
      h->wait_rank[h->n_wait] = rank, h->wait_slot[h->n_wait++] = h->pending;
      h->pending = NULL;
    }
    if (!ran) return KT_OK;
  }
  return KT_OK;
}

/* The RECV events end when their data arrived (known once everything ran). */
static void close_recv_events(sim_state *st, kt_timeline *tl) {
  if (!tl || !st->lowered) return;
  for (size_t i = 0; i < tl->n_comm; i++) {
    kt_event *e = &tl->comm[i];
    if (e->op != KT_OP_RECV_F && e->op != KT_OP_RECV_B) continue;
    int from;
    kt_output r = kt_comm_message(e->op, e->stage, &from);
    double arrive = kt__pairs_get(&st->done, r, from, e->mb);
    if (arrive > e->end) e->end = arrive;
  }
}

/* What the next action of a blocked rank waits for. */
static kt_blocked blocked_on(sim_state *st, int r) {
  const rank_run *ra = &st->rk[r];
  size_t g = st->rk[r].pos;
  const kt_action *a = &ra->actions[g];
  kt_blocked b = {.rank = r, .at = *a, .on = *a};
  if (a->op >= KT_OP_COUNT) { /* a WAIT_SEND waits for the peer's RECV */
    int from;
    int peer_stage = kt_output_consumer(kt_comm_message(a->op, a->stage, &from), a->stage, st->S);
    b.on = (kt_action){.stage = peer_stage,
                       .mb = a->mb,
                       .op = a->op == KT_OP_WAIT_SEND_F ? KT_OP_RECV_F : KT_OP_RECV_B};
    b.on_rank = st->owner[peer_stage];
    return b;
  }
  size_t key;
  ready_time(st, a, &b.on, &key);
  /* a blocked group may wait on its second member */
  while ((ra->actions[g].flags & KT_ACTION_OVERLAP_NEXT) && g + 1 < ra->n) {
    kt_action d2;
    if (!isnan(ready_time(st, &ra->actions[g], &d2, &key))) {
      ready_time(st, &ra->actions[g + 1], &b.on, &key);
      b.at = ra->actions[g + 1];
    }
    g++;
  }
  b.on_rank = b.on.stage >= 0 && b.on.stage < st->S ? st->owner[b.on.stage] : -1;
  if (st->lowered && b.on_rank != r) /* it waits for the SEND of its input */
    b.on.op = b.on.op == KT_OP_F ? KT_OP_SEND_F : KT_OP_SEND_B;
  return b;
}

static kt_status report_deadlock(sim_state *st, kt_error *err) {
  kt_blocked b[8];
  int n = 0;
  for (int r = 0; r < st->s->p; r++) {
    if (st->rk[r].pos >= st->s->ranks[r].n) continue;
    if (n < 8) b[n] = blocked_on(st, r);
    n++;
  }
  return kt_deadlock_fail(b, n, err);
}
/* Every rank at its first action, released; the metrics zeroed. */
static void ranks_start(sim_state *st) {
  const kt_schedule *s = st->s;
  for (int r = 0; r < s->p; r++) {
    st->rk[r] = (rank_run){.actions = s->ranks[r].actions, .n = s->ranks[r].n};
    if (st->c->rank_release) st->rk[r].free_at = st->c->rank_release[r];
    if (st->met) st->met->ranks[r] = (kt_rank_metrics){.rank = r};
  }
}

/* The metrics the ranks accumulated, into st->met. */
static void ranks_finish(sim_state *st) {
  for (int r = 0; st->met && r < st->s->p; r++) {
    const rank_run *rr = &st->rk[r];
    kt_rank_metrics *rm = &st->met->ranks[r];
    rm->start = rr->start, rm->end = rr->end, rm->busy = rr->busy;
    rm->peak_memory = rr->peak_memory, rm->peak_inflight = rr->peak_inflight;
    rm->actions = rr->actions_run, rm->bytes_sent = rr->bytes_sent;
  }
}

/* Runs st: on two threads when it may (two), else (or when they did not
 * end) on one, the actions checked and its tables made first (reads taken
 * over). */
static kt_status run(sim_state *st, kt_timeline *out, int two, int *reads, kt_error *err) {
  ranks_start(st);
  /* (two threads: compute-only, or the halves give up at a SEND) */
  st->plain = !st->links && !out && !st->sink && !st->first_action && st->cost_mbs == 1;
  if (two && kt__sim_par_run(st)) return free(reads), ranks_finish(st), KT_OK;
  kt_status status = two ? kt__sim_check_actions(st->s, st, reads, err) : KT_OK;
  if (status) return free(reads), status;
  st->plain &= !st->lowered;
  if ((status = kt__sim_tables_init(st, reads, err))) return status;
  ranks_start(st);
  kt_rank_queue_fill(&st->work);
  for (int r; (r = st->links ? kt_rank_queue_next(&st->work) : kt__sim_latest(&st->work)) >= 0;)
    if (kt__sim_advance(st, out, r))
      return kt_fail(err, KT_ENOMEM, "out of memory %s",
                     out ? "recording the timeline or growing the per-pair table"
                         : "growing the per-pair table");
  for (int r = 0; r < st->s->p; r++)
    if (st->rk[r].pos < st->s->ranks[r].n) return report_deadlock(st, err);
  ranks_finish(st);
  return KT_OK;
}

/* One run (sim/internal.h). */
kt_status kt__simulate_run(const kt_schedule *s, const kt_costs *c, kt_links *links,
                           kt_timeline *out, kt_metrics *met, const kt_sim_sink *sink,
                           int reset_links, kt_error *err) {
  kt_costs unit;
  if (!c) {
    kt_costs_default(&unit);
    c = &unit;
  }
  int S = kt_schedule_stages(s);
  kt_status rc = kt_costs_check(c, S, err);
  if (!rc) rc = kt_costs_check_m(c, s->m, err);
  sim_state st = {
      .s = s, .c = c, .links = links, .S = S, .comm = kt_cost_comm(c), .met = met, .sink = sink};
  /* compute-only without links, a timeline or a sink: two threads when large */
  int two = !links && !out && !sink && kt__sim_par_wanted(s);
  int *reads = kt_calloc((size_t)s->m + 1, sizeof *reads);
  if (!rc && !reads) rc = kt_fail(err, KT_ENOMEM, "out of memory for %d micro-batches", s->m);
  if (!rc && !two) rc = kt__sim_check_actions(s, &st, reads, err);
  if (!rc && c->n_links && c->n_links != s->p && c->n_links != s->p - 1)
    rc = kt_fail(err, KT_EINVAL,
                 "the costs list %d links; %d ranks have %d (or %d with the wrap "
                 "from the last rank to the first)",
                 c->n_links, s->p, s->p - 1, s->p);
  if (rc) {
    free(reads);
    return rc;
  }
  if (links && reset_links) kt_links_reset(links);
  if (out) kt_timeline_init(out, s->p, "unit", "unit"); /* freed on every failure below */
  if (met) {
    memset(met, 0, sizeof *met);
    met->p = s->p;
    if (!(met->ranks = kt_calloc((size_t)s->p, sizeof *met->ranks))) {
      free(reads);
      return kt_fail(err, KT_ENOMEM, "out of memory for the metrics of %d ranks", s->p);
    }
    for (int r = 0; r < s->p; r++) met->ranks[r].rank = r;
  }
  kt_status status = kt__sim_state_init(&st, err);
  if (!status && out) { /* every compute action is one event and one or two memory samples */
    size_t n = kt_schedule_total_actions(s);
    if (kt_timeline_reserve(out, n, n + (size_t)s->p))
      status = kt_fail(err, KT_ENOMEM, "out of memory for a timeline of %zu actions", n);
  }
  if (status) free(reads);
  else status = run(&st, out, two, reads, err);
  if (!status) close_recv_events(&st, out);
  for (int r = 0; !status && links && r < s->p; r++) kt_links_note_end(links, r, st.rk[r].free_at);
  if (!status && met) kt_metrics_finish(met);
  if (status && out) kt_timeline_free(out);
  if (status && met) kt_metrics_free(met);
  kt__sim_state_free(&st);
  return status;
}
