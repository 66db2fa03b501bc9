/* Schedule validator: structure (every pair computed once, on its owner, in a
 * valid order), then deadlock detection by dependency simulation. */
#include <stdlib.h>
#include <string.h>

#include <stdio.h>

#include "kaiten/schedule.h"

#define PREFETCH_AHEAD 16 /* actions: a little over two cache lines */

/* Kept small (5 bytes): one per (stage, micro-batch), walked in cache. A
 * pair's actions all run on one rank, so "the backward came before the
 * forward" is known when the backward is counted. */
typedef struct {
  uint8_t count[KT_OP_COUNT]; /* the second occurrence is reported at once */
  uint8_t early;              /* EARLY_BACKWARD: B or I before F; EARLY_W: W before I */
} pair_info;
enum { EARLY_BACKWARD = 1, EARLY_W = 2 };

kt_status kt_deadlock_fail(const kt_blocked *b, int n, kt_error *err) {
  char msg[KT_ERROR_LEN], at[32], on[32];
  size_t len = (size_t)snprintf(msg, sizeof msg, "deadlock:");
  int shown = 0;
  for (int i = 0; i < n && shown < 6 && len < sizeof msg - 96; i++, shown++) {
    kt_action_format(&b[i].at, at, sizeof at);
    if (b[i].on.op == KT_OP_B)
      snprintf(on, sizeof on, "%dB%d/%dI%d", b[i].on.stage, b[i].on.mb, b[i].on.stage, b[i].on.mb);
    else kt_action_format(&b[i].on, on, sizeof on);
    len += (size_t)snprintf(msg + len, sizeof msg - len, "%s rank %d waits at %s for %s (rank %d)",
                            shown ? ";" : "", b[i].rank, at, on, b[i].on_rank);
  }
  if (n > shown && len < sizeof msg - 40)
    snprintf(msg + len, sizeof msg - len, "; and %d more blocked ranks", n - shown);
  return kt_fail(err, KT_EDEADLOCK, "%s", msg);
}

/* Whether every rank runs to the end under the executors' rules (a rank
 * runs its list in order; an action, or an overlapped group as a whole,
 * starts once its inputs are done), tracked with one flag byte per (stage,
 * micro-batch): a result is done (bit 1 << kt_output) or not. */
static int input_done(const uint8_t *done, int S, int row, const kt_action *a, kt_blocked *why) {
  int from;
  kt_output need = kt_action_needs(a->op, a->stage, S, &from);
  if (need == KT_OUT_NONE) return 1;
  if (why) {
    static const uint8_t producer_op[KT_OUT_COUNT] = {KT_OP_F, KT_OP_B, KT_OP_I};
    why->on = (kt_action){.stage = from, .mb = a->mb, .op = producer_op[need]};
  }
  return (done[(size_t)from * (size_t)row + (size_t)a->mb] >> need) & 1;
}

typedef struct {
  const kt_schedule *s;
  int S, row; /* row: the done table's stride */
  uint8_t *done;
  size_t *pos;
  int *owner;
  kt_rank_queue work;
} walker;

static void walk_rank(walker *w, int r) {
  const kt_rank_actions *ra = &w->s->ranks[r];
  /* Ranks take turns, a few actions a visit: fetch this rank's next lines
   * now, for when the walk comes back to it (with many ranks their lists
   * are too many streams for the hardware prefetcher). */
  if (w->pos[r] + PREFETCH_AHEAD < ra->n)
    __builtin_prefetch(&ra->actions[w->pos[r] + PREFETCH_AHEAD]);
  while (w->pos[r] < ra->n) {
    size_t g = w->pos[r];
    int ready = input_done(w->done, w->S, w->row, &ra->actions[g], NULL);
    while (ready && (ra->actions[g].flags & KT_ACTION_OVERLAP_NEXT) && g + 1 < ra->n)
      ready = input_done(w->done, w->S, w->row, &ra->actions[++g], NULL);
    if (!ready) return;
    for (size_t i = w->pos[r]; i <= g; i++) {
      const kt_action *a = &ra->actions[i];
      unsigned made = kt_action_publishes(a->op);
      w->done[(size_t)a->stage * (size_t)w->row + (size_t)a->mb] |= (uint8_t)made;
      for (int res = 0; res < KT_OUT_COUNT; res++)
        if (made & (1u << res)) {
          int to = kt_output_consumer((kt_output)res, a->stage, w->S);
          if (to >= 0) kt_rank_queue_wake(&w->work, w->owner[to]);
        }
    }
    w->pos[r] = g + 1;
  }
}

/* The deadlock report of a walk that stopped short. */
static kt_status name_blocked(walker *w, kt_error *err) {
  kt_blocked b[8];
  int n = 0;
  for (int r = 0; r < w->s->p; r++) {
    const kt_rank_actions *ra = &w->s->ranks[r];
    if (w->pos[r] >= ra->n) continue;
    if (n < 8) {
      size_t g = w->pos[r];
      /* a blocked group may wait on a later member */
      while (input_done(w->done, w->S, w->row, &ra->actions[g], NULL) &&
             (ra->actions[g].flags & KT_ACTION_OVERLAP_NEXT) && g + 1 < ra->n)
        g++;
      b[n] = (kt_blocked){.rank = r, .at = ra->actions[g]};
      input_done(w->done, w->S, w->row, &ra->actions[g], &b[n]);
      b[n].on_rank = w->owner[b[n].on.stage];
    }
    n++;
  }
  return kt_deadlock_fail(b, n, err);
}

/* KT_OK when the schedule runs to the end, EDEADLOCK naming the blocked
 * ranks, ENOMEM. */
static kt_status runs_to_completion(const kt_schedule *s, kt_error *err) {
  /* one stage's flags a row, padded by a cache line: with M a power of two
   * the rows' current columns would all fall in the same cache sets */
  walker w = {.s = s, .S = kt_schedule_stages(s), .row = s->m + 64};
  int P = s->p;
  w.done = kt_calloc((size_t)w.S * (size_t)w.row, 1);
  w.pos = kt_calloc((size_t)P, sizeof *w.pos);
  w.owner = kt_calloc((size_t)w.S, sizeof *w.owner);
  int queue_failed = kt_rank_queue_init(&w.work, P);
  kt_status st = KT_OK;
  if (!w.done || !w.pos || !w.owner || queue_failed) {
    st = kt_fail(err, KT_ENOMEM, "out of memory validating");
    goto out;
  }
  for (int i = 0; i < w.S; i++) w.owner[i] = kt_stage_rank(s, i);
  kt_rank_queue_fill(&w.work);
  for (int r; (r = kt_rank_queue_next(&w.work)) >= 0;) walk_rank(&w, r);
  for (int r = 0; r < P && !st; r++)
    if (w.pos[r] < s->ranks[r].n) st = name_blocked(&w, err);
out:
  free(w.done);
  free(w.pos);
  free(w.owner);
  kt_rank_queue_free(&w.work);
  return st;
}

/* Counts every action per (stage, micro-batch) into info: each on its
 * owner, inside the schedule, at most once. */
static kt_status count_actions(const kt_schedule *s, int S, const int *owner_of, pair_info *info,
                               kt_error *err) {
  char b1[KT_ACTION_TEXT];
  for (int r = 0; r < s->p; r++) {
    const kt_rank_actions *ra = &s->ranks[r];
    for (size_t i = 0; i < ra->n; i++) {
      const kt_action *a = &ra->actions[i];
      if (a->stage < 0 || a->stage >= S || a->mb < 0 || a->mb >= s->m || a->op >= KT_OP_COUNT)
        return kt_fail(err, KT_EINVALID_SCHEDULE,
                       "rank %d runs %s, outside the schedule's %d stages and %d micro-batches", r,
                       kt_action_text(a, b1), S, s->m);
      int owner = owner_of[a->stage];
      if (owner != r)
        return kt_fail(err, KT_EINVALID_SCHEDULE,
                       "action on the wrong rank: rank %d runs %s but stage %d belongs to rank %d "
                       "(%s placement, P=%d, V=%d)",
                       r, kt_action_text(a, b1), a->stage, owner, kt_placement_name(s->placement),
                       s->p, s->v);
      pair_info *pi = &info[(size_t)a->stage * s->m + a->mb];
      if (pi->count[a->op]++)
        return kt_fail(err, KT_EINVALID_SCHEDULE, "duplicate action: rank %d runs %s twice", r,
                       kt_action_text(a, b1));
      if ((a->op == KT_OP_B || a->op == KT_OP_I) && !pi->count[KT_OP_F])
        pi->early |= EARLY_BACKWARD;
      if (a->op == KT_OP_W && !pi->count[KT_OP_I]) pi->early |= EARLY_W;
    }
  }
  return KT_OK;
}

/* One pair's actions: an F, one complete backward (B, or I then W), the
 * backward after the forward. */
static kt_status check_pair(const kt_schedule *s, size_t k, const int *owner_of,
                            const pair_info *pi, kt_error *err) {
  char b1[KT_ACTION_TEXT], b2[KT_ACTION_TEXT];
  kt_action a = {.stage = (int32_t)(k / s->m), .mb = (int32_t)(k % s->m)};
  int owner = owner_of[a.stage];
#define AS(op_) (a.op = (op_), kt_action_text(&a, b1))
  if (!pi->count[KT_OP_F])
    return kt_fail(err, KT_EINVALID_SCHEDULE, "missing forward: %s never runs (rank %d)",
                   AS(KT_OP_F), owner);
  if (!pi->count[KT_OP_B] && !pi->count[KT_OP_I])
    return kt_fail(err, KT_EINVALID_SCHEDULE,
                   "missing backward: %s never runs, nor its split form I then W (rank %d)",
                   AS(KT_OP_B), owner);
  if (pi->count[KT_OP_B] && (pi->count[KT_OP_I] || pi->count[KT_OP_W]))
    return kt_fail(err, KT_EINVALID_SCHEDULE,
                   "two backwards: %s and its split form I/W both run (rank %d)", AS(KT_OP_B),
                   owner);
  if (pi->count[KT_OP_I] && !pi->count[KT_OP_W])
    return kt_fail(err, KT_EINVALID_SCHEDULE,
                   "incomplete backward: %s runs but its weight gradient W never does (rank %d)",
                   AS(KT_OP_I), owner);
  if (pi->count[KT_OP_W] && !pi->count[KT_OP_I])
    return kt_fail(err, KT_EINVALID_SCHEDULE,
                   "incomplete backward: %s runs without its input gradient I (rank %d)",
                   AS(KT_OP_W), owner);
#undef AS
  int bop = pi->count[KT_OP_B] ? KT_OP_B : KT_OP_I, first = KT_OP_F, later = bop;
  if (!pi->early) return KT_OK;
  if (!(pi->early & EARLY_BACKWARD)) first = KT_OP_I, later = KT_OP_W;
  a.op = (uint8_t)later;
  kt_action_text(&a, b1);
  a.op = (uint8_t)first;
  return kt_fail(err, KT_EINVALID_SCHEDULE, "bad order: rank %d runs %s before %s", owner, b1,
                 kt_action_text(&a, b2));
}

kt_status kt_schedule_validate(const kt_schedule *s, kt_error *err) {
  int S = kt_schedule_stages(s);
  size_t cells = (size_t)S * (size_t)s->m;
  /* every pair needs at least an F and a backward: a file whose header claims
   * far more pairs than it has actions fails before the S*M table exists */
  size_t actions = kt_schedule_total_actions(s);
  if (cells > actions)
    return kt_fail(err, KT_EINVALID_SCHEDULE,
                   "%zu actions cannot cover %d stages x %d micro-batches (each needs F and a "
                   "backward)",
                   actions, S, s->m);
  pair_info *info = kt_calloc(cells, sizeof *info);
  int *owner_of = kt_calloc((size_t)S, sizeof *owner_of); /* looked up once, not per action */
  if (!info || !owner_of) {
    free(info), free(owner_of);
    return kt_fail(err, KT_ENOMEM, "out of memory validating");
  }
  for (int stage = 0; stage < S; stage++) owner_of[stage] = kt_stage_rank(s, stage);
  kt_status st = count_actions(s, S, owner_of, info, err);
  for (size_t k = 0; k < cells && !st; k++) st = check_pair(s, k, owner_of, &info[k], err);
  free(info), free(owner_of);
  if (st) return st;
  return runs_to_completion(s, err);
}
