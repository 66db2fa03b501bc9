/* Schedule validator: structure (every pair computed once, on its owner, in a
 * valid order), then deadlock detection by dependency simulation. */
#include <stdlib.h>
#include <string.h>

#include "kaiten/schedule.h"
#include "kaiten/sim.h"

/* Kept small (20 bytes): one per (stage, micro-batch), walked in cache. */
typedef struct {
  uint8_t count[KT_OP_COUNT]; /* the second occurrence is reported at once */
  uint32_t pos[KT_OP_COUNT];  /* index in the rank's list of the (first) occurrence */
} pair_info;

/* Whether every rank runs to the end under the simulator's rules (a rank
 * runs its list in order; an action, or an overlapped group as a whole,
 * starts once its inputs are done), tracked with one flag byte per (stage,
 * micro-batch) instead of the simulator's times: the same answer for a
 * fraction of the memory traffic. -1 when out of memory. */
enum { DONE_F = 1, DONE_BI = 2, DONE_I = 4 };

static int input_done(const uint8_t *done, int S, int M, const kt_action *a) {
  size_t k = (size_t)a->stage * (size_t)M + (size_t)a->mb;
  switch (a->op) {
    case KT_OP_F: return a->stage == 0 || (done[k - (size_t)M] & DONE_F);
    case KT_OP_B:
    case KT_OP_I:
      return a->stage == S - 1 ? (done[k] & DONE_F) : (done[k + (size_t)M] & DONE_BI);
    default: return done[k] & DONE_I;
  }
}

static int runs_to_completion(const kt_schedule *s) {
  int S = kt_schedule_stages(s), M = s->m, P = s->p;
  uint8_t *done = kt_calloc((size_t)S * (size_t)M, 1);
  size_t *pos = kt_calloc((size_t)P, sizeof *pos);
  int *owner = kt_calloc((size_t)S, sizeof *owner), *queue = kt_calloc((size_t)P, sizeof *queue);
  uint8_t *queued = kt_calloc((size_t)P, 1);
  int result = -1;
  if (!done || !pos || !owner || !queue || !queued) goto out;
  for (int st = 0; st < S; st++) owner[st] = kt_stage_rank(s, st);
  int head = 0, len = 0;
#define WAKE(r) do { if (!queued[r]) { queued[r] = 1; queue[(head + len++) % P] = (r); } } while (0)
  for (int r = 0; r < P; r++) WAKE(r);
  while (len > 0) {
    int r = queue[head];
    head = (head + 1) % P, len--, queued[r] = 0;
    const kt_rank_actions *ra = &s->ranks[r];
    while (pos[r] < ra->n) {
      size_t g = pos[r];
      int ready = input_done(done, S, M, &ra->actions[g]);
      while (ready && (ra->actions[g].flags & KT_ACTION_OVERLAP_NEXT) && g + 1 < ra->n)
        ready = input_done(done, S, M, &ra->actions[++g]);
      if (!ready) break;
      for (size_t i = pos[r]; i <= g; i++) {
        const kt_action *a = &ra->actions[i];
        size_t k = (size_t)a->stage * (size_t)M + (size_t)a->mb;
        if (a->op == KT_OP_F) {
          done[k] |= DONE_F;
          if (a->stage + 1 < S) WAKE(owner[a->stage + 1]);
        } else if (a->op == KT_OP_B || a->op == KT_OP_I) {
          done[k] |= a->op == KT_OP_I ? DONE_BI | DONE_I : DONE_BI;
          if (a->stage > 0) WAKE(owner[a->stage - 1]);
        }
      }
      pos[r] = g + 1;
    }
  }
#undef WAKE
  result = 1;
  for (int r = 0; r < P; r++)
    if (pos[r] < s->ranks[r].n) result = 0;
out:
  free(done);
  free(pos);
  free(owner);
  free(queue);
  free(queued);
  return result;
}

static const char *fmt(const kt_action *a, char *buf) {
  kt_action_format(a, buf, 32);
  return buf;
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
  if (!info) return kt_fail(err, KT_ENOMEM, "out of memory validating");
  char b1[32], b2[32];
  kt_status st = KT_OK;
  for (int r = 0; r < s->p && !st; r++) {
    const kt_rank_actions *ra = &s->ranks[r];
    for (size_t i = 0; i < ra->n; i++) {
      const kt_action *a = &ra->actions[i];
      if (a->stage < 0 || a->stage >= S || a->mb < 0 || a->mb >= s->m || a->op >= KT_OP_COUNT) {
        st = kt_fail(err, KT_EINVALID_SCHEDULE,
                     "rank %d runs %s, outside the schedule's %d stages and %d micro-batches", r,
                     fmt(a, b1), S, s->m);
        break;
      }
      int owner = kt_stage_rank(s, a->stage);
      if (owner != r) {
        st = kt_fail(err, KT_EINVALID_SCHEDULE,
                     "action on the wrong rank: rank %d runs %s but stage %d belongs to rank %d "
                     "(%s placement, P=%d, V=%d)",
                     r, fmt(a, b1), a->stage, owner, kt_placement_name(s->placement), s->p, s->v);
        break;
      }
      pair_info *pi = &info[(size_t)a->stage * s->m + a->mb];
      if (pi->count[a->op]++ == 0) pi->pos[a->op] = (uint32_t)i;
      else {
        st = kt_fail(err, KT_EINVALID_SCHEDULE, "duplicate action: rank %d runs %s twice", r,
                     fmt(a, b1));
        break;
      }
    }
  }
  for (size_t k = 0; k < cells && !st; k++) {
    const pair_info *pi = &info[k];
    kt_action a = {.stage = (int32_t)(k / s->m), .mb = (int32_t)(k % s->m)};
    int owner = kt_stage_rank(s, a.stage);
#define AS(op_) (a.op = (op_), fmt(&a, b1))
    if (!pi->count[KT_OP_F])
      st = kt_fail(err, KT_EINVALID_SCHEDULE, "missing forward: %s never runs (rank %d)",
                   AS(KT_OP_F), owner);
    else if (!pi->count[KT_OP_B] && !pi->count[KT_OP_I])
      st = kt_fail(err, KT_EINVALID_SCHEDULE,
                   "missing backward: %s never runs, nor its split form I then W (rank %d)",
                   AS(KT_OP_B), owner);
    else if (pi->count[KT_OP_B] && (pi->count[KT_OP_I] || pi->count[KT_OP_W]))
      st = kt_fail(err, KT_EINVALID_SCHEDULE,
                   "two backwards: %s and its split form I/W both run (rank %d)", AS(KT_OP_B),
                   owner);
    else if (pi->count[KT_OP_I] && !pi->count[KT_OP_W])
      st = kt_fail(err, KT_EINVALID_SCHEDULE,
                   "incomplete backward: %s runs but its weight gradient W never does (rank %d)",
                   AS(KT_OP_I), owner);
    else if (pi->count[KT_OP_W] && !pi->count[KT_OP_I])
      st = kt_fail(err, KT_EINVALID_SCHEDULE,
                   "incomplete backward: %s runs without its input gradient I (rank %d)",
                   AS(KT_OP_W), owner);
    else {
      int bop = pi->count[KT_OP_B] ? KT_OP_B : KT_OP_I;
      if (pi->pos[bop] < pi->pos[KT_OP_F]) {
        a.op = (uint8_t)bop;
        fmt(&a, b1);
        a.op = KT_OP_F;
        st = kt_fail(err, KT_EINVALID_SCHEDULE, "bad order: rank %d runs %s before %s", owner, b1,
                     fmt(&a, b2));
      } else if (bop == KT_OP_I && pi->pos[KT_OP_W] < pi->pos[KT_OP_I]) {
        a.op = KT_OP_W;
        fmt(&a, b1);
        a.op = KT_OP_I;
        st = kt_fail(err, KT_EINVALID_SCHEDULE, "bad order: rank %d runs %s before %s", owner, b1,
                     fmt(&a, b2));
      }
    }
#undef AS
  }
  free(info);
  if (st) return st;
  int completes = runs_to_completion(s);
  if (completes < 0) return kt_fail(err, KT_ENOMEM, "out of memory validating");
  /* a deadlock is rare: the simulator then names every blocked rank */
  return completes ? KT_OK : kt_simulate(s, NULL, NULL, err);
}
