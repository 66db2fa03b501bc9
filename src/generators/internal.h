/* Internal: one function per schedule generator (src/generators/). */
#ifndef KAITEN_GENERATORS_INTERNAL_H
#define KAITEN_GENERATORS_INTERNAL_H

#include "kaiten/generators.h"

/* Each generator receives a schedule already initialised with the right
 * p, v, m and placement and fills the per-rank lists. EINVAL with a reason
 * when the parameters are impossible, ENOMEM on allocation failure. */
typedef kt_status (*kt__generator_fn)(kt_schedule *s, const kt_gen_params *params, kt_error *err);

kt_status kt__gen_gpipe(kt_schedule *s, const kt_gen_params *params, kt_error *err);
kt_status kt__gen_1f1b(kt_schedule *s, const kt_gen_params *params, kt_error *err);
kt_status kt__gen_interleaved(kt_schedule *s, const kt_gen_params *params, kt_error *err);
kt_status kt__gen_looped_bfs(kt_schedule *s, const kt_gen_params *params, kt_error *err);
kt_status kt__gen_zb_h1(kt_schedule *s, const kt_gen_params *params, kt_error *err);
kt_status kt__gen_zb_h2(kt_schedule *s, const kt_gen_params *params, kt_error *err);
kt_status kt__gen_zbv(kt_schedule *s, const kt_gen_params *params, kt_error *err);
kt_status kt__gen_dualpipev(kt_schedule *s, const kt_gen_params *params, kt_error *err);
kt_status kt__gen_zb_auto(kt_schedule *s, const kt_gen_params *params, kt_error *err);
kt_status kt__gen_zbv_auto(kt_schedule *s, const kt_gen_params *params, kt_error *err);
kt_status kt__gen_interleaved_zb(kt_schedule *s, const kt_gen_params *params, kt_error *err);
kt_status kt__gen_v_half(kt_schedule *s, const kt_gen_params *params, kt_error *err);
kt_status kt__gen_v_min(kt_schedule *s, const kt_gen_params *params, kt_error *err);

/* v-half (half 1) and v-min (0) built slot by slot for every micro-batch
 * (the generators stretch a shorter run's steady state; tests compare). */
kt_status kt__v_shape_direct(kt_schedule *s, int half, kt_error *err);

/* Makes room for per_rank actions on every rank's list. ENOMEM. */
kt_status kt__reserve_actions(kt_schedule *s, size_t per_rank, kt_error *err);

/* Appends to rank r's list where room was made (kt__reserve_actions). */
static inline void kt__append(kt_schedule *s, int r, int stage, kt_op op, int mb) {
  kt_rank_actions *ra = &s->ranks[r];
  ra->actions[ra->n++] = (kt_action){.stage = stage, .mb = mb, .op = (uint8_t)op};
}

/* Push helper that turns ENOMEM into a message. Appends in place while the
 * rank's list has room (kt_generate reserves 2*V*M actions a
 * rank); kt_schedule_push grows it otherwise. */
#define KT__PUSH(sched, rank, stage_, op_, mb_) \
  do { \
    if ((sched)->ranks[rank].n < (sched)->ranks[rank].cap) \
      kt__append((sched), (rank), (stage_), (op_), (mb_)); \
    else if (kt_schedule_push((sched), (rank), (stage_), (op_), (mb_)) != KT_OK) \
      return kt_fail(err, KT_ENOMEM, "out of memory building schedule"); \
  } while (0)

#endif
