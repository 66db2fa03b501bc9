/* A comparison's row made of its result (kaiten/request.h states what a
 * result is: its closed forms, bound and search figures), the reports of a
 * result and of a comparison, and the lines under tables. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kaiten/report.h"
#include "report/compare_row.h"

void kt__compare_row_fill(kt_compare_row *r, const kt_compare_entry *e, double peak_1f1b) {
  memset(r, 0, sizeof *r);
  r->schedule = e->name, r->reason = e->reason, r->proven = -1;
  if (!e->applies) return;
  const kt_result *res = &e->result;
  const kt_sim_info *info = &res->info;
  const kt_metrics *met = &res->met;
  int p = met->p;
  r->applies = 1, r->v = info->v, r->period = met->period, r->makespan = met->makespan;
  r->bubble = met->bubble_ratio;
  r->closed = info->closed_form, r->closed_expr = info->closed_form_expr;
  r->closed_why = info->closed_form_why;
  r->closed_mem = info->closed_form_peak_memory;
  r->closed_mem_expr = info->closed_form_peak_memory_expr;
  r->mem_limit = res->mem_limit >= 0 ? res->mem_limit : -1;
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
  r->proven = res->kind == KT_SIM_OPTIMAL ? info->proven : -1;
}

void kt_render_memory_model_line(const kt_costs *c, kt_buf *b) {
  if (!c || c->mem_wgrad != 0 || c->stage_mem_wgrad) return;
  kt_buf_printf(b,
                "memory: mem-wgrad 0 assumes an I frees its activation before W; the default "
                "GPT's I keeps %.2f of it (measured; docs/schedules.md): mem-wgrad %.2f plans "
                "with that\n",
                KT_GPT_WGRAD_KEEPS, KT_GPT_WGRAD_KEEPS);
}

void kt_render_cost_basis_line(const char *basis, int v, kt_buf *b) {
  if (basis && !strcmp(basis, "stage"))
    kt_buf_puts(b,
                "cost basis: stage (--per-stage: tf, tb, tw, mem-act, mem-wgrad are per stage)\n");
  else if (v > 1)
    kt_buf_printf(b,
                  "cost basis: rank (tf, tb, tw, mem-act, mem-wgrad are one rank's share of the "
                  "model; with V=%d each stage runs 1/%d of them)\n",
                  v, v);
  else
    kt_buf_puts(b, "cost basis: rank (tf, tb, tw, mem-act, mem-wgrad are one rank's share of the "
                   "model; at V=1 that is one stage)\n");
}

kt_status kt_write_result_report(const char *path, const char *title, const kt_result *res,
                                 const kt_timeline *timeline, const kt_costs *given,
                                 kt_error *err) {
  char own[160];
  if (!title) {
    snprintf(own, sizeof own, "kaiten sim: %s, P=%d V=%d M=%d", res->order.name, res->order.p,
             res->order.v, res->order.m);
    title = own;
  }
  kt_report_entry entry = {
      .info = res->info, .timeline = timeline ? timeline : &res->tl, .metrics = &res->met};
  return kt_write_html_report(path, title, &entry, 1, given, err);
}

kt_status kt_write_comparison_report(const char *path, const char *title, const kt_comparison *cmp,
                                     kt_error *err) {
  kt_report_entry entries[KT_SCHED_COUNT + 2];
  size_t n = cmp->n < KT_SCHED_COUNT + 2 ? (size_t)cmp->n : KT_SCHED_COUNT + 2;
  for (size_t i = 0; i < n; i++) {
    const kt_compare_entry *e = &cmp->rows[i];
    entries[i] = (kt_report_entry){.info = e->result.info,
                                   .timeline = e->applies ? &e->result.tl : NULL,
                                   .metrics = e->applies ? &e->result.met : NULL,
                                   .reason = e->reason};
    /* also where it does not apply: its name, the layout asked, the basis */
    entries[i].info.schedule = e->name;
    entries[i].info.cost_basis = cmp->cost_basis;
    entries[i].info.p = cmp->p, entries[i].info.m = cmp->m;
  }
  char own[96];
  if (!title) {
    snprintf(own, sizeof own, "kaiten compare: P=%d M=%d", cmp->p, cmp->m);
    title = own;
  }
  return kt_write_html_report(path, title, entries, n, cmp->given, err);
}
