/* Internal: one function per schedule generator (src/generators/). */
#ifndef KAITEN_GENERATORS_INTERNAL_H
#define KAITEN_GENERATORS_INTERNAL_H

#include "kaiten/generators.h"

/* Each generator receives a schedule already initialised with the right
 * p, v, m and placement and fills the per-rank lists. EINVAL with a reason
 * when the parameters are impossible, ENOMEM on allocation failure. */
typedef kt_status (*kt__generator_fn)(kt_schedule *s, const kt_schedule_params *params,
                                      kt_error *err);

kt_status kt__gen_gpipe(kt_schedule *s, const kt_schedule_params *params, kt_error *err);
kt_status kt__gen_1f1b(kt_schedule *s, const kt_schedule_params *params, kt_error *err);
kt_status kt__gen_interleaved(kt_schedule *s, const kt_schedule_params *params, kt_error *err);
kt_status kt__gen_looped_bfs(kt_schedule *s, const kt_schedule_params *params, kt_error *err);
kt_status kt__gen_zb_h1(kt_schedule *s, const kt_schedule_params *params, kt_error *err);
kt_status kt__gen_zb_h2(kt_schedule *s, const kt_schedule_params *params, kt_error *err);
kt_status kt__gen_zbv(kt_schedule *s, const kt_schedule_params *params, kt_error *err);
kt_status kt__gen_dualpipev(kt_schedule *s, const kt_schedule_params *params, kt_error *err);
kt_status kt__gen_zb_auto(kt_schedule *s, const kt_schedule_params *params, kt_error *err);
kt_status kt__gen_zbv_auto(kt_schedule *s, const kt_schedule_params *params, kt_error *err);
kt_status kt__gen_interleaved_zb(kt_schedule *s, const kt_schedule_params *params, kt_error *err);
kt_status kt__gen_v_half(kt_schedule *s, const kt_schedule_params *params, kt_error *err);
kt_status kt__gen_v_min(kt_schedule *s, const kt_schedule_params *params, kt_error *err);

/* v-half (half 1) and v-min (0) built slot by slot for every micro-batch
 * (the generators stretch a shorter run's steady state; tests compare). */
kt_status kt__v_shape_direct(kt_schedule *s, int half, kt_error *err);

/* Push helper that turns ENOMEM into a message. Stores in place while the
 * rank's list has room (kt_schedule_generate reserves 2*V*M actions a
 * rank); kt_schedule_push grows it otherwise. */
#define KT__PUSH(sched, rank, stage_, op_, mb_)                                    \
  do {                                                                             \
    kt_rank_actions *ra_ = &(sched)->ranks[rank];                                  \
    if (ra_->n < ra_->cap)                                                         \
      ra_->actions[ra_->n++] = (kt_action){.stage = (stage_), .mb = (mb_), .op = (uint8_t)(op_)}; \
    else if (kt_schedule_push((sched), (rank), (stage_), (op_), (mb_)) != KT_OK)   \
      return kt_fail(err, KT_ENOMEM, "out of memory building schedule");           \
  } while (0)

#endif
