/* Setting up a simulation's state (sim/state.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sim/state.h"

kt_status kt__sim_check_actions(const kt_schedule *s, sim_state *st, int *reads, kt_error *err) {
  int S = st->S;
  st->lowered = st->i_ops = 0;
  for (int r = 0; r < s->p; r++)
    for (size_t i = 0; i < s->ranks[r].n; i++) {
      const kt_action *a = &s->ranks[r].actions[i];
      int from;
      int per_stage = a->op >= KT_OP_COUNT && !kt_op_has_mb(a->op);
      if (a->op >= KT_OP_ANY_COUNT || a->stage < 0 || a->stage >= S ||
          (!per_stage && (a->mb < 0 || a->mb >= s->m))) {
        char at[32];
        kt_action_format(a, at, sizeof at);
        return kt_fail(err, KT_EINVALID_SCHEDULE,
                       "rank %d runs %s, outside the schedule's %d stages and %d micro-batches", r,
                       at, S, s->m);
      }
      st->lowered |= kt_op_is_p2p(a->op);
      st->i_ops |= a->op == KT_OP_I || a->op == KT_OP_W;
      if (kt_action_needs(a->op, a->stage, S, &from) != KT_OUT_NONE) reads[a->mb]++;
    }
  return KT_OK;
}

void kt__sim_state_free(sim_state *st) {
  free(st->cost);
  free(st->cost_ix);
  free(st->first_action);
  kt__pairs_free(&st->done);
  free(st->owner);
  free(st->rk);
  kt_rank_queue_free(&st->work);
  free(st->sent_at);
  free(st->posted_at);
  free(st->recv_event);
}

/* kt_costs.action_time: where each rank's entries start, every duration
 * checked. */
static kt_status action_times_init(sim_state *st, kt_error *err) {
  const kt_schedule *s = st->s;
  if (!(st->first_action = kt_calloc((size_t)s->p, sizeof *st->first_action)))
    return kt_fail(err, KT_ENOMEM, "out of memory");
  size_t n = 0;
  for (int r = 0; r < s->p; r++) {
    st->first_action[r] = n;
    for (size_t i = 0; i < s->ranks[r].n; i++, n++) {
      double d = st->c->action_time[n];
      if (s->ranks[r].actions[i].op < KT_OP_COUNT && !(d >= 0 && isfinite(d)))
        return kt_fail(err, KT_EINVAL, "rank %d's action %zu: duration %g must be finite and >= 0",
                       r, i, d);
    }
  }
  return KT_OK;
}

/* Twice the stages, a power of two (1F1B holds up to P micro-batches). */
int kt__sim_window_rows(int S) {
  int rows = 8;
  while (rows < 2 * S && rows < KT_MAX_MICROBATCHES) rows *= 2;
  return rows;
}

/* Stages with the same costs read one stage's entries (bit for bit the
 * same numbers): with 1024 stages alike, a visit found its stage's own
 * line out of the cache. Each stage is compared with the last few
 * distinct entries only (S can be 262144). */
static void share_costs(sim_state *st) {
  enum { KEEP = 8 };
  int seen[KEEP], n_seen = 0;
  for (int stage = 0; stage < st->S; stage++) {
    st->cost_ix[stage] = stage;
    if (st->cost_mbs > 1) continue;
    for (int k = 0; k < n_seen; k++)
      if (!memcmp(&st->cost[seen[k]], &st->cost[stage], sizeof *st->cost)) {
        st->cost_ix[stage] = seen[k];
        break;
      }
    if (st->cost_ix[stage] == stage) seen[n_seen < KEEP ? n_seen++ : stage % KEEP] = stage;
  }
}

kt_status kt__sim_state_init(sim_state *st, kt_error *err) {
  const kt_schedule *s = st->s;
  st->owner = kt_calloc((size_t)st->S, sizeof *st->owner);
  st->rk = aligned_alloc(_Alignof(rank_run), (size_t)s->p * sizeof *st->rk);
  int queue_failed = kt_rank_queue_init(&st->work, s->p);
  st->cost_mbs = kt_costs_per_mb(st->c) ? s->m : 1;
  st->cost = malloc((size_t)st->S * (size_t)st->cost_mbs * sizeof *st->cost);
  st->cost_ix = malloc((size_t)st->S * sizeof *st->cost_ix);
  if (!st->owner || !st->rk || queue_failed || !st->cost || !st->cost_ix)
    return kt_fail(err, KT_ENOMEM, "out of memory simulating %d ranks", s->p);
  for (int stage = 0; stage < st->S; stage++) {
    st->owner[stage] = kt_stage_rank(s, stage);
    for (int j = 0; j < st->cost_mbs; j++) {
      stage_costs *sc = &st->cost[(size_t)stage * (size_t)st->cost_mbs + (size_t)j];
      double act = kt_cost_mem_act_mb(st->c, stage, j),
             wgrad = kt_cost_mem_wgrad_mb(st->c, stage, j);
      for (int op = 0; op < KT_OP_COUNT; op++) {
        sc->dur[op] = kt_cost_op_mb(st->c, stage, j, (kt_op)op);
        sc->mem[op] = kt_action_memory(op, act, wgrad);
      }
      sc->transient = kt_cost_mem_transient(st->c, stage);
    }
  }
  share_costs(st);
  return st->c->action_time ? action_times_init(st, err) : KT_OK;
}

kt_status kt__sim_tables_init(sim_state *st, int *reads, kt_error *err) {
  const kt_schedule *s = st->s;
  int pairs_failed = kt__pairs_init(&st->done, st->S, s->m, st->i_ops ? 3 : 2,
                                    st->lowered ? 0 : kt__sim_window_rows(st->S), reads);
  size_t msgs = 2 * (size_t)s->m * (size_t)st->done.row;
  if (st->lowered && !pairs_failed) {
    st->sent_at = malloc(msgs * sizeof *st->sent_at);
    st->posted_at = malloc(msgs * sizeof *st->posted_at);
    st->recv_event = kt_calloc(msgs, sizeof *st->recv_event);
  }
  if (pairs_failed || (st->lowered && (!st->sent_at || !st->posted_at || !st->recv_event)))
    return kt_fail(err, KT_ENOMEM, "out of memory simulating %zu stage-micro-batch pairs",
                   (size_t)st->S * (size_t)s->m);
  for (size_t i = 0; st->lowered && i < msgs; i++) st->sent_at[i] = st->posted_at[i] = NAN;
  return KT_OK;
}
