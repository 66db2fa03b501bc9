/* When a schedule's closed forms are the simulation's: the conditions every
 * report (sim, compare, the what-if panel) states them under. */
#include "kaiten/generators.h"

void kt_gen_closed_forms(int kind, const kt_schedule *s, const kt_costs *c, double simulated_bubble,
                         kt_closed_forms *out) {
  *out = (kt_closed_forms){.bubble = -1, .peak_memory = -1};
  if (kind < 0 || kind >= KT_SCHED_COUNT) {
    out->why = "a schedule file has no formula";
    return;
  }
  kt_gen_kind k = (kt_gen_kind)kind;
  out->bubble =
      kt_gen_closed_form_bubble(k, s->p, s->v, s->m, c->tf, c->tb, c->tw, &out->bubble_expr);
  out->why = kt_gen_closed_form_why_not(k, s->p, s->v, s->m);
  const char *inexact =
      kt_cost_comm(c) > 0     ? "the forms assume T_comm = 0"
      : kt_costs_mb_differ(c) ? "the forms assume the same costs for every micro-batch"
      : c->stage_tf || c->stage_tb || c->stage_tw ? "the forms assume the same costs on every stage"
      : c->send_overhead > 0 || c->op_overhead > 0 ? "the forms assume no send or op overhead"
                                                   : NULL;
  if (inexact) out->bubble = -1, out->bubble_expr = NULL, out->why = inexact;
  out->peak_memory = kt_gen_closed_form_peak_memory(k, s->p, s->v, s->m, c->mem_act, c->mem_wgrad,
                                                    &out->peak_memory_expr);
  if (c->stage_mem_act || c->stage_mem_wgrad) out->peak_memory = -1, out->peak_memory_expr = NULL;
  /* zbv with unequal costs is tuned to them when that is faster: the forms
   * are those of its fixed order, no longer the schedule's */
  if (k == KT_SCHED_ZBV && out->bubble >= 0 && simulated_bubble >= 0 &&
      simulated_bubble < out->bubble - 1e-9) {
    *out = (kt_closed_forms){.bubble = -1, .peak_memory = -1};
    out->why = "zbv's order was tuned to these costs (faster than its fixed order's form)";
  }
}
