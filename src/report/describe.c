/* What a simulation is stated with beyond its own numbers: the closed forms,
 * the lower bound on its layout's period (worked out by the caller:
 * kt_gen_bound_of; nothing here searches), the exact search's figures; and
 * a comparison's row made of them. `kaiten sim`, `kaiten compare` and the
 * foreign-function layer (python/kaiten) all call these, so every front end
 * prints the same bound for the same schedule. */
#include <math.h>
#include <string.h>

#include "kaiten/report.h"

/* The bound the caller worked out (kt_gen_bound_of), as every renderer
 * states it. */
static void lower_bound(kt_sim_info *info, const kt_gen_bound *b) {
  info->has_lower_bound = b->has, info->lower_bound_exact = b->exact;
  info->lower_bound = b->value, info->lower_bound_memory = b->memory;
  info->lower_bound_from = b->from, info->lower_bound_why = b->why;
}

/* Schedule "optimal": the search's figures, its bound, no formula. */
static void optimal_info(kt_sim_info *info, const kt_sim_origin *o) {
  const kt_optimal_result *res = o->optimal;
  static const kt_optimal_result none = {0};
  if (!res) res = &none;
  info->searched = 1;
  info->proven = res->proven;
  info->search_seconds = res->seconds;
  info->search_time_limit = o->time_limit > 0 ? o->time_limit : 10;
  info->search_nodes = res->nodes;
  info->search_start_period = res->start_period;
  info->has_lower_bound = 1;
  info->lower_bound = res->lower_bound;
  info->lower_bound_memory = o->mem_limit;
  info->lower_bound_exact = res->proven;
  info->lower_bound_from = "search";
  info->closed_form = info->closed_form_peak_memory = -1;
  info->closed_form_expr = info->closed_form_peak_memory_expr = NULL;
  info->closed_form_why = "the exact search's order has no formula";
}

void kt_sim_info_describe(kt_sim_info *info, const kt_sim_origin *o, const kt_schedule *s,
                          const kt_costs *c, const kt_metrics *met) {
  info->mem_limit = o->mem_limit > 0 ? o->mem_limit : 0;
  if (o->kind == KT_SIM_OPTIMAL) {
    optimal_info(info, o);
    return;
  }
  kt_closed_forms f;
  kt_gen_closed_forms(o->kind, s, c, met ? met->bubble_ratio : -1, &f);
  info->closed_form = f.bubble, info->closed_form_expr = f.bubble_expr, info->closed_form_why = f.why;
  info->closed_form_peak_memory = f.peak_memory;
  info->closed_form_peak_memory_expr = f.peak_memory_expr;
  if (o->bound) lower_bound(info, o->bound);
}

void kt_compare_row_fill(kt_compare_row *r, const kt_sim_info *info, const kt_sim_origin *o,
                         const kt_metrics *met, double peak_1f1b) {
  int p = met->p;
  r->applies = 1, r->v = info->v, r->period = met->period, r->makespan = met->makespan;
  r->bubble = met->bubble_ratio;
  r->closed = info->closed_form, r->closed_expr = info->closed_form_expr;
  r->closed_why = info->closed_form_why;
  r->closed_mem = info->closed_form_peak_memory;
  r->closed_mem_expr = info->closed_form_peak_memory_expr;
  r->mem_limit = o->mem_limit >= 0 ? o->mem_limit : -1;
  r->peak_mem_first = met->ranks[0].peak_memory;
  r->peak_mem_last = met->ranks[p - 1].peak_memory;
  r->peak_mem = 0;
  for (int k = 0; k < p; k++) r->peak_mem = fmax(r->peak_mem, met->ranks[k].peak_memory);
  r->mem_vs_1f1b = peak_1f1b > 0 ? r->peak_mem / peak_1f1b : -1;
  r->inflight_first = met->ranks[0].peak_inflight;
  r->inflight_last = met->ranks[p - 1].peak_inflight;
  r->messages = info->messages;
  r->has_lower_bound = info->has_lower_bound, r->lower_bound = info->lower_bound;
  r->lower_bound_memory = info->lower_bound_memory;
  r->lower_bound_exact = info->lower_bound_exact;
  r->proven = o->kind == KT_SIM_OPTIMAL ? info->proven : -1;
}

void kt_render_memory_model_line(const kt_costs *c, kt_buf *b) {
  if (!c || c->mem_wgrad != 0 || c->stage_mem_wgrad) return;
  kt_buf_printf(b, "memory: mem-wgrad 0 assumes an I frees its activation before W; the default "
                   "GPT's I keeps %.2f of it (measured; docs/schedules.md): mem-wgrad %.2f plans "
                   "with that\n", KT_GPT_WGRAD_KEEPS, KT_GPT_WGRAD_KEEPS);
}

void kt_render_cost_basis_line(const char *basis, int v, kt_buf *b) {
  if (basis && !strcmp(basis, "stage"))
    kt_buf_puts(b, "cost basis: stage (--per-stage: tf, tb, tw, mem-act, mem-wgrad are per stage)\n");
  else if (v > 1)
    kt_buf_printf(b, "cost basis: rank (tf, tb, tw, mem-act, mem-wgrad are one rank's share of the "
                     "model; with V=%d each stage runs 1/%d of them)\n", v, v);
  else
    kt_buf_puts(b, "cost basis: rank (tf, tb, tw, mem-act, mem-wgrad are one rank's share of the "
                   "model; at V=1 that is one stage)\n");
}
