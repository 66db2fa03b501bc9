/* The lower bound `sim` and `compare` print for a schedule, and the
 * schedule `optimal` (the exact search), shared by both commands. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

/* The peak of the memory prefix sums of s's compute actions under the stage
 * costs c (what zb-auto's limit counts); *has_b: s runs a full backward. */
static double order_peak(const kt_schedule *s, const kt_costs *c, int *has_b, int *overlapped) {
  double top = 0;
  *has_b = *overlapped = 0;
  for (int r = 0; r < s->p; r++) {
    double mem = 0;
    for (size_t i = 0; i < s->ranks[r].n; i++) {
      const kt_action *a = &s->ranks[r].actions[i];
      if (a->op >= KT_OP_COUNT) continue;
      *has_b |= a->op == KT_OP_B;
      *overlapped |= (a->flags & KT_ACTION_OVERLAP_NEXT) != 0;
      mem += kt_action_memory(a->op, kt_cost_mem_act(c, a->stage), kt_cost_mem_wgrad(c, a->stage));
      if (mem > top) top = mem;
    }
  }
  return top;
}

/* Some stage's I holds more than its F (M_W > M_B). */
static int wgrad_above_act(const kt_schedule *s, const kt_costs *c) {
  for (int st = 0; st < kt_schedule_stages(s); st++)
    if (kt_cost_mem_wgrad(c, st) > kt_cost_mem_act(c, st)) return 1;
  return 0;
}

void cli_lower_bound(const kt_schedule *s, const kt_costs *c, double limit, double makespan,
                     long search_nodes, kt_sim_info *info) {
  int has_b, overlapped;
  double peak = order_peak(s, c, &has_b, &overlapped);
  info->has_lower_bound = info->lower_bound_exact = 0;
  if (overlapped && c->overlap > 0) {
    info->lower_bound_why = "--overlap makes an overlapped F&B cell shorter than its two ops";
    return;
  }
  /* a full B frees all at once: with M_W > M_B its split I then W holds
   * more, so the bound counts no memory limit */
  if (has_b && wgrad_above_act(s, c)) limit = INFINITY;
  if (!(limit > 0)) limit = peak > 0 ? peak : INFINITY;
  double lb;
  int exact;
  kt_error err;
  if (kt_makespan_lower_bound(s, c, limit, 0, &lb, &exact, &err)) {
    info->lower_bound_why = "no bound for this layout and memory";
    return;
  }
  /* below the schedule's makespan: the exact search may close the gap */
  info->lower_bound_from = "analytic";
  if (lb < makespan * (1 - 1e-12) && search_nodes > 0) {
    double lb2;
    if (!kt_makespan_lower_bound(s, c, limit, search_nodes, &lb2, &exact, &err) && lb2 > lb)
      lb = lb2, info->lower_bound_from = "search";
  }
  info->has_lower_bound = 1;
  info->lower_bound = lb;
  info->lower_bound_memory = limit;
  /* a bound the schedule meets is its optimum */
  info->lower_bound_exact = exact || fabs(lb - makespan) <= 1e-9 * (1 + makespan);
}

int cli_generate_optimal(int p, int m, int v, const kt_costs *c, double mem_limit,
                         double time_limit, kt_schedule *out, kt_optimal_result *res,
                         kt_error *err) {
  kt_schedule_params params = {.p = p, .m = m, .v = v, .costs = c, .mem_limit = mem_limit};
  kt_optimal_opts o = {.time_limit = time_limit};
  kt_placement pl = v == 2 ? KT_PLACEMENT_V : KT_PLACEMENT_LOOP;
  kt_status st = kt_schedule_optimal(&params, pl, &o, out, res, err);
  return st ? kt_status_exit_code(st) : 0;
}

void cli_optimal_info(const kt_optimal_result *res, double time_limit, kt_sim_info *info) {
  info->searched = 1;
  info->proven = res->proven;
  info->search_seconds = res->seconds;
  info->search_time_limit = time_limit > 0 ? time_limit : 10;
  info->search_nodes = res->nodes;
  info->search_start_makespan = res->start_makespan;
  info->has_lower_bound = 1;
  info->lower_bound = res->lower_bound;
  info->lower_bound_exact = res->proven;
  info->lower_bound_from = "search";
  info->closed_form = -1;
  info->closed_form_expr = NULL;
  info->closed_form_why = "the exact search's order has no formula";
}
