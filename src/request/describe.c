/* What every front end states about a result beyond its own numbers
 * (kt_sim_info): its shape and costs, the closed forms where exact, the
 * memory limit it kept, the lower bound its order is stated with, the
 * exact search's figures. Only reads the result. */
#include <string.h>

#include "request/internal.h"

/* Schedule "optimal": the search's figures, its bound, no formula. */
static void optimal_info(kt_sim_info *info, const kt_result *res) {
  const kt_optimal_result *sr = &res->search;
  info->searched = 1;
  info->proven = sr->proven;
  info->search_seconds = sr->seconds;
  info->search_time_limit = res->time_limit > 0 ? res->time_limit : 10;
  info->search_nodes = sr->nodes;
  info->search_start_period = sr->start_period;
  info->has_lower_bound = 1;
  info->lower_bound = sr->lower_bound;
  info->lower_bound_memory = res->mem_limit;
  info->lower_bound_exact = sr->proven;
  info->lower_bound_from = "search";
  info->search_sequences = sr->sequences, info->search_sequences_all = sr->sequences_all;
  info->search_proven_in_sequences = sr->proven_in_sequences;
  if (sr->sequences) info->lower_bound_from = "analytic"; /* the search proves its sequences only */
  info->closed_form = info->closed_form_peak_memory = -1;
  info->closed_form_why = "the exact search's order has no formula";
}

void kt__result_describe(kt_result *res) {
  const kt_schedule *s = &res->order;
  kt_sim_info *info = &res->info;
  *info = (kt_sim_info){
      .schedule = s->name,
      .p = s->p,
      .v = s->v,
      .m = s->m,
      .placement = kt_schedule_placement_text(s, res->placement_text, sizeof res->placement_text),
      /* the renderer reads P*V entries: an uneven table has fewer */
      .stage_ranks = kt_schedule_even(s) ? s->stage_rank : NULL,
      .costs = &res->costs,
      .cost_basis = res->cost_basis,
      .messages = kt_schedule_messages_valid(s), /* built orders are valid */
      .mem_limit = res->mem_limit > 0 ? res->mem_limit : 0,
      .stages = res->outcome.stages[0] ? res->outcome.stages : NULL,
      .pack = res->packed ? &res->pack : NULL,
      .packing = res->packed ? kt_packing_name(res->pack.how) : NULL,
      .step_tokens = res->step_tokens};
  if (res->kind == KT_SIM_OPTIMAL) {
    optimal_info(info, res);
    return;
  }
  kt_closed_forms f;
  kt_gen_closed_forms(res->kind, s, &res->costs, res->simulated ? res->met.bubble_ratio : -1, &f);
  info->closed_form = f.bubble, info->closed_form_expr = f.bubble_expr,
  info->closed_form_why = f.why;
  info->closed_form_peak_memory = f.peak_memory;
  info->closed_form_peak_memory_expr = f.peak_memory_expr;
  if (!res->simulated) return;
  const kt_gen_bound *b = &res->bound;
  info->has_lower_bound = b->has, info->lower_bound_exact = b->exact;
  info->lower_bound = b->value, info->lower_bound_memory = b->memory;
  info->lower_bound_from = b->from, info->lower_bound_why = b->why;
}
