/* Discrete-event simulation of a schedule under a cost model.
 *
 * Ranks are advanced from a work queue: a rank runs actions while their
 * inputs are known, then parks; finishing an action wakes the rank that
 * consumes its result. Start times only depend on finished results, so the
 * processing order never changes the answer, and the work is linear in the
 * number of actions. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/sim.h"

/* When the ops of one (stage, micro-batch) finished; NAN = not yet. Kept
 * together so a dependency check touches one cache line. */
typedef struct {
  double f, bi, i; /* F; B or I; I */
} pair_times;

typedef struct {
  const kt_schedule *s;
  const kt_costs *c;
  int S, M;
  double comm;
  pair_times *done;               /* per (stage, mb) */
  int *owner;                     /* stage -> rank (no division in the hot loop) */
  size_t *pos;                    /* next action per rank */
  double *free_at;                /* end of the previous action per rank */
  double *mem;                    /* running memory per rank */
  int *queue, *queued, qhead, qlen;
} sim_state;

#define IDX(st, stage, mb) ((size_t)(stage) * (size_t)(st)->M + (size_t)(mb))

static void wake(sim_state *st, int rank) {
  if (rank < 0 || st->queued[rank]) return;
  st->queued[rank] = 1;
  st->queue[(st->qhead + st->qlen) % st->s->p] = rank;
  st->qlen++;
}

/* Time the action's input is ready, or NAN while it is not. For deadlock
 * reports, *dep receives the action it waits for. */
static double ready_time(const sim_state *st, int rank, const kt_action *a, kt_action *dep) {
  int s = a->stage, j = a->mb;
  switch (a->op) {
    case KT_OP_F: {
      if (s == 0) return 0.0;
      *dep = (kt_action){.stage = s - 1, .mb = j, .op = KT_OP_F};
      double t = st->done[IDX(st, s - 1, j)].f;
      return st->owner[s - 1] != rank ? t + st->comm : t;
    }
    case KT_OP_B:
    case KT_OP_I: {
      if (s == st->S - 1) {
        *dep = (kt_action){.stage = s, .mb = j, .op = KT_OP_F};
        return st->done[IDX(st, s, j)].f;
      }
      *dep = (kt_action){.stage = s + 1, .mb = j, .op = KT_OP_B};
      double t = st->done[IDX(st, s + 1, j)].bi;
      return st->owner[s + 1] != rank ? t + st->comm : t;
    }
    case KT_OP_W:
      *dep = (kt_action){.stage = s, .mb = j, .op = KT_OP_I};
      return st->done[IDX(st, s, j)].i;
    default: return NAN;
  }
}

static kt_status record(sim_state *st, kt_timeline *tl, int rank, const kt_action *a, double start,
                        double end, double publish) {
  size_t k = IDX(st, a->stage, a->mb);
  double delta = 0;
  switch (a->op) {
    case KT_OP_F:
      st->done[k].f = publish;
      break;
    case KT_OP_B:
      st->done[k].bi = publish;
      delta = -kt_cost_mem_act(st->c, a->stage);
      break;
    case KT_OP_I:
      st->done[k].bi = publish;
      st->done[k].i = publish;
      delta = kt_cost_mem_wgrad(st->c, a->stage) - kt_cost_mem_act(st->c, a->stage);
      break;
    case KT_OP_W:
      delta = -kt_cost_mem_wgrad(st->c, a->stage);
      break;
  }
  if (!tl) goto wake_consumer;
  kt_event e = {.rank = rank, .stage = a->stage, .mb = a->mb, .op = a->op, .flags = a->flags,
                .start = start, .end = end, .bytes = 0, .comm_time = 0};
  if (kt_timeline_add_event(tl, &e)) return KT_ENOMEM;
  if (a->op == KT_OP_F) {
    st->mem[rank] += kt_cost_mem_act(st->c, a->stage);
    if (kt_timeline_add_mem(tl, rank, start, st->mem[rank])) return KT_ENOMEM;
  } else if (delta != 0) {
    st->mem[rank] += delta;
    if (kt_timeline_add_mem(tl, rank, end, st->mem[rank])) return KT_ENOMEM;
  }
wake_consumer:
  /* wake the consumer of this result */
  if (a->op == KT_OP_F && a->stage + 1 < st->S) wake(st, st->owner[a->stage + 1]);
  if ((a->op == KT_OP_B || a->op == KT_OP_I) && a->stage > 0)
    wake(st, st->owner[a->stage - 1]);
  return KT_OK;
}

/* Runs rank's actions until one is not ready. */
static kt_status advance(sim_state *st, kt_timeline *tl, int rank) {
  const kt_rank_actions *ra = &st->s->ranks[rank];
  while (st->pos[rank] < ra->n) {
    const kt_action *a = &ra->actions[st->pos[rank]];
    kt_action dep;
    double ready = ready_time(st, rank, a, &dep);
    if (isnan(ready)) return KT_OK;
    size_t group = 1;
    while ((ra->actions[st->pos[rank] + group - 1].flags & KT_ACTION_OVERLAP_NEXT) &&
           st->pos[rank] + group < ra->n) {
      double r2 = ready_time(st, rank, &ra->actions[st->pos[rank] + group], &dep);
      if (isnan(r2)) return KT_OK;
      if (r2 > ready) ready = r2;
      group++;
    }
    double start = ready > st->free_at[rank] ? ready : st->free_at[rank];
    /* the first op's cost is looked up once: a lone action (the common case) needs no more */
    double first = kt_cost_op(st->c, a->stage, (kt_op)a->op), total = first, longest = first;
    for (size_t g = 1; g < group; g++) {
      double d = kt_cost_op(st->c, a[g].stage, (kt_op)a[g].op);
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
    for (size_t g = 0; g < group; g++) {
      double d = (g == 0 ? first : kt_cost_op(st->c, a[g].stage, (kt_op)a[g].op)) * scale;
      /* a lone action publishes at its end; an overlapped group when it all ends */
      kt_status rs = record(st, tl, rank, &a[g], t, t + d, start + total);
      if (rs) return rs;
      t += d;
    }
    st->free_at[rank] = start + total;
    st->pos[rank] += group;
  }
  return KT_OK;
}

static kt_status report_deadlock(const sim_state *st, kt_error *err) {
  char msg[KT_ERROR_LEN];
  size_t n = (size_t)snprintf(msg, sizeof msg, "deadlock:");
  int shown = 0, blocked = 0;
  for (int r = 0; r < st->s->p; r++) {
    const kt_rank_actions *ra = &st->s->ranks[r];
    if (st->pos[r] >= ra->n) continue;
    blocked++;
    if (shown >= 6 || n >= sizeof msg - 80) continue;
    const kt_action *a = &ra->actions[st->pos[r]];
    kt_action dep = *a;
    ready_time(st, r, a, &dep);
    /* a blocked group may wait on its second member */
    size_t g = st->pos[r];
    while ((ra->actions[g].flags & KT_ACTION_OVERLAP_NEXT) && g + 1 < ra->n) {
      kt_action d2;
      if (!isnan(ready_time(st, r, &ra->actions[g], &d2))) {
        ready_time(st, r, &ra->actions[g + 1], &dep);
        a = &ra->actions[g + 1];
      }
      g++;
    }
    char at[32], on[32];
    kt_action_format(a, at, sizeof at);
    kt_action_format(&dep, on, sizeof on);
    if (dep.op == KT_OP_B) /* the backward it needs is written B or I upstream */
      snprintf(on, sizeof on, "%dB%d/%dI%d", dep.stage, dep.mb, dep.stage, dep.mb);
    n += (size_t)snprintf(msg + n, sizeof msg - n, "%s rank %d waits at %s for %s (rank %d)",
                          shown ? ";" : "", r, at, on,
                          dep.stage >= 0 && dep.stage < st->S ? kt_stage_rank(st->s, dep.stage) : -1);
    shown++;
  }
  if (blocked > shown && n < sizeof msg - 32)
    snprintf(msg + n, sizeof msg - n, "; and %d more blocked ranks", blocked - shown);
  return kt_fail(err, KT_EDEADLOCK, "%s", msg);
}

kt_status kt_simulate(const kt_schedule *s, const kt_costs *c, kt_timeline *out, kt_error *err) {
  kt_costs unit;
  if (!c) {
    kt_costs_default(&unit);
    c = &unit;
  }
  int S = kt_schedule_stages(s);
  kt_status rc = kt_costs_check(c, S, err);
  if (rc) return rc;
  for (int r = 0; r < s->p; r++)
    for (size_t i = 0; i < s->ranks[r].n; i++) {
      const kt_action *a = &s->ranks[r].actions[i];
      if (a->stage < 0 || a->stage >= S || a->mb < 0 || a->mb >= s->m || a->op >= KT_OP_COUNT) {
        char at[32];
        kt_action_format(a, at, sizeof at);
        return kt_fail(err, KT_EINVALID_SCHEDULE,
                       "rank %d runs %s, outside the schedule's %d stages and %d micro-batches",
                       r, at, S, s->m);
      }
    }
  if (out) kt_timeline_init(out, s->p, "unit", "unit"); /* freed on every failure below */
  sim_state st = {.s = s, .c = c, .S = S, .M = s->m, .comm = kt_cost_comm(c)};
  size_t cells = (size_t)S * (size_t)s->m;
  st.done = malloc(cells * sizeof *st.done);
  st.owner = kt_calloc((size_t)S, sizeof *st.owner);
  st.pos = kt_calloc((size_t)s->p, sizeof *st.pos);
  st.free_at = kt_calloc((size_t)s->p, sizeof *st.free_at);
  st.mem = kt_calloc((size_t)s->p, sizeof *st.mem);
  st.queue = kt_calloc((size_t)s->p, sizeof *st.queue);
  st.queued = kt_calloc((size_t)s->p, sizeof *st.queued);
  kt_status status = KT_OK;
  if (!st.done || !st.owner || !st.pos || !st.free_at || !st.mem || !st.queue ||
      !st.queued) {
    status = kt_fail(err, KT_ENOMEM, "out of memory simulating %zu stage-micro-batch pairs", cells);
    goto done;
  }
  for (size_t i = 0; i < cells; i++) st.done[i] = (pair_times){NAN, NAN, NAN};
  for (int stage = 0; stage < S; stage++) st.owner[stage] = kt_stage_rank(s, stage);
  if (out) { /* every action is one event and at most one memory sample */
    size_t n = kt_schedule_total_actions(s);
    if (kt_timeline_reserve(out, n, n + (size_t)s->p)) {
      status = kt_fail(err, KT_ENOMEM, "out of memory for a timeline of %zu actions", n);
      goto done;
    }
  }
  for (int r = 0; r < s->p; r++) {
    st.free_at[r] = 0;
    wake(&st, r);
  }
  while (st.qlen > 0) {
    int r = st.queue[st.qhead];
    st.qhead = (st.qhead + 1) % s->p;
    st.qlen--;
    st.queued[r] = 0;
    if ((status = advance(&st, out, r))) {
      status = kt_fail(err, status, "out of memory recording the timeline");
      goto done;
    }
  }
  for (int r = 0; r < s->p; r++)
    if (st.pos[r] < s->ranks[r].n) {
      status = report_deadlock(&st, err);
      break;
    }
done:
  if (status && out) kt_timeline_free(out);
  free(st.done);
  free(st.owner);
  free(st.pos);
  free(st.free_at);
  free(st.mem);
  free(st.queue);
  free(st.queued);
  return status;
}

double kt_cost_op(const kt_costs *c, int stage, kt_op op) {
  switch (op) {
    case KT_OP_F: return kt_cost_tf(c, stage);
    case KT_OP_B: return kt_cost_tb(c, stage) + kt_cost_tw(c, stage);
    case KT_OP_I: return kt_cost_tb(c, stage);
    case KT_OP_W: return kt_cost_tw(c, stage);
    default: return 0;
  }
}

kt_status kt_simulate_metrics(const kt_schedule *s, const kt_costs *c, kt_metrics *out,
                              kt_error *err) {
  kt_timeline tl;
  kt_status st = kt_simulate(s, c, &tl, err);
  if (st) return st;
  st = kt_timeline_metrics(&tl, out, err);
  kt_timeline_free(&tl);
  return st;
}
