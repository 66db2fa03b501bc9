/* Schedule validator: structure (every pair computed once, on its owner, in a
 * valid order), then deadlock detection by dependency simulation. */
#include <stdlib.h>
#include <string.h>

#include "kaiten/schedule.h"
#include "kaiten/sim.h"

typedef struct {
  int count[KT_OP_COUNT];
  size_t pos[KT_OP_COUNT]; /* index in the rank's list of the (first) occurrence */
} pair_info;

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
      if (pi->count[a->op]++ == 0) pi->pos[a->op] = i;
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
  return kt_simulate(s, NULL, NULL, err);
}
