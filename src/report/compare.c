/* The comparison of schedules (kaiten compare): a text table and JSON. */
#include <stdio.h>
#include <string.h>

#include "kaiten/report.h"
#include "report/compare_row.h"

static void json_or_null(kt_buf *b, const char *key, double x, int present) {
  kt_buf_printf(b, ",\"%s\":", key);
  if (present) kt_buf_json_number(b, x);
  else kt_buf_puts(b, "null");
}

static void json_str_or_null(kt_buf *b, const char *key, const char *s) {
  kt_buf_printf(b, ",\"%s\":", key);
  if (s) kt_buf_json_string(b, s);
  else kt_buf_puts(b, "null");
}

static void row_json(const kt_compare_row *rw, kt_buf *b) {
  kt_buf_puts(b, "{\"schedule\":");
  kt_buf_json_string(b, rw->schedule); /* a file's name may hold anything */
  if (!rw->applies) {
    kt_buf_puts(b, ",\"applies\":false,\"reason\":");
    kt_buf_json_string(b, rw->reason ? rw->reason : "");
    kt_buf_puts(b, "}");
    return;
  }
  kt_buf_printf(b, ",\"applies\":true,\"v\":%d", rw->v);
  json_or_null(b, "period", rw->period, 1);
  json_or_null(b, "makespan", rw->makespan, 1);
  json_or_null(b, "bubble_ratio", rw->bubble, 1);
  json_or_null(b, "closed_form_bubble", rw->closed, rw->closed >= 0);
  json_str_or_null(b, "closed_form_expr", rw->closed_expr);
  if (rw->closed < 0) json_str_or_null(b, "closed_form_why", rw->closed_why);
  json_or_null(b, "peak_memory_first", rw->peak_mem_first, 1);
  json_or_null(b, "peak_memory_last", rw->peak_mem_last, 1);
  json_or_null(b, "peak_memory", rw->peak_mem, 1);
  json_or_null(b, "peak_memory_vs_1f1b", rw->mem_vs_1f1b, rw->mem_vs_1f1b >= 0);
  json_or_null(b, "closed_form_peak_memory", rw->closed_mem, rw->closed_mem >= 0);
  json_str_or_null(b, "closed_form_peak_memory_expr", rw->closed_mem_expr);
  if (rw->mem_limit >= 0) json_or_null(b, "mem_limit", rw->mem_limit, 1);
  json_or_null(b, "lower_bound", rw->lower_bound, rw->has_lower_bound);
  if (rw->has_lower_bound) {
    json_or_null(b, "lower_bound_memory", rw->lower_bound_memory, 1);
    kt_buf_printf(b, ",\"lower_bound_exact\":%s", rw->lower_bound_exact ? "true" : "false");
  }
  json_or_null(b, "gap", rw->lower_bound > 0 ? rw->period / rw->lower_bound - 1 : 0,
               rw->has_lower_bound);
  if (rw->proven >= 0) kt_buf_printf(b, ",\"proven\":%s", rw->proven ? "true" : "false");
  kt_buf_printf(b, ",\"peak_inflight_first\":%d,\"peak_inflight_last\":%d,\"messages\":%zu}",
                rw->inflight_first, rw->inflight_last, rw->messages);
}

static void compare_json(const kt_compare_info *info, const kt_compare_row *rows, size_t n,
                         kt_buf *b) {
  kt_buf_printf(b, "{\"p\":%d,\"m\":%d,\"v\":%d,\"step_sync\":\"%s\",\"cost_basis\":", info->p,
                info->m, info->v, kt_step_sync_name(info->costs->step_sync));
  kt_buf_json_string(b, info->cost_basis ? info->cost_basis : "stage");
  kt_buf_puts(b, ",\"costs\":");
  kt_render_costs_json(info->costs, b);
  /* the least of the rows' bounds: no schedule of these layouts, each
   * within its memory, is faster */
  double least = -1;
  for (size_t i = 0; i < n; i++)
    if (rows[i].applies && rows[i].has_lower_bound && (least < 0 || rows[i].lower_bound < least))
      least = rows[i].lower_bound;
  json_or_null(b, "lower_bound", least, least >= 0);
  kt_buf_puts(b, ",\"rows\":[");
  for (size_t i = 0; i < n; i++) {
    if (i) kt_buf_puts(b, ",");
    row_json(&rows[i], b);
  }
  kt_buf_puts(b, "]}\n");
}

static void table_rows(const kt_compare_row *rows, size_t n, int w, kt_buf *b) {
  kt_buf_printf(b, "%-*s %2s %10s %10s %8s %9s %8s %9s %8s %9s %9s %9s %6s %6s %8s\n", w,
                "schedule", "V", "period", "makespan", "bubble", "formula", "vs bound", "peak mem",
                "vs 1f1b", "mem form", "mem r0", "mem last", "fl r0", "fl last", "messages");
  for (size_t i = 0; i < n; i++) {
    const kt_compare_row *rw = &rows[i];
    if (!rw->applies) continue;
    char formula[32] = "-", mem_formula[32] = "-", frac[16] = "-", gap[16] = "-";
    if (rw->closed >= 0) snprintf(formula, sizeof formula, "%.2f%%", 100 * rw->closed);
    if (rw->has_lower_bound && rw->lower_bound > 0)
      snprintf(gap, sizeof gap, "%s%.2f%%", rw->lower_bound_exact ? "=" : "+",
               100 * (rw->period / rw->lower_bound - 1));
    if (rw->closed_mem >= 0) snprintf(mem_formula, sizeof mem_formula, "%g", rw->closed_mem);
    else if (rw->mem_limit >= 0) snprintf(mem_formula, sizeof mem_formula, "<=%g", rw->mem_limit);
    if (rw->mem_vs_1f1b >= 0) snprintf(frac, sizeof frac, "%.3g", rw->mem_vs_1f1b);
    kt_buf_printf(b, "%-*s %2d %10g %10g %7.2f%% %9s %8s %9g %8s %9s %9g %9g %6d %6d %8zu\n", w,
                  rw->schedule, rw->v, rw->period, rw->makespan, 100 * rw->bubble, formula, gap,
                  rw->peak_mem, frac, mem_formula, rw->peak_mem_first, rw->peak_mem_last,
                  rw->inflight_first, rw->inflight_last, rw->messages);
  }
}

static void table_notes(const kt_compare_row *rows, size_t n, kt_buf *b) {
  int forms = 0, skipped = 0;
  for (size_t i = 0; i < n; i++) {
    const kt_compare_row *rw = &rows[i];
    if (!rw->applies) continue;
    if (!forms++)
      kt_buf_puts(b, "\nclosed forms (uniform per-stage costs; bubble also T_comm = 0; "
                     "I = idle per rank, n = P-1):\n");
    if (rw->closed_expr) kt_buf_printf(b, "  %-14s bubble %s\n", rw->schedule, rw->closed_expr);
    else
      kt_buf_printf(b, "  %-14s bubble - (%s)\n", rw->schedule,
                    rw->closed_why ? rw->closed_why : "none");
    if (rw->closed_mem_expr) kt_buf_printf(b, "  %-14s memory %s\n", "", rw->closed_mem_expr);
    else if (rw->mem_limit >= 0)
      kt_buf_printf(b, "  %-14s memory <= --mem-limit (%g)\n", "", rw->mem_limit);
  }
  for (size_t i = 0; i < n; i++)
    if (!rows[i].applies) {
      if (!skipped++) kt_buf_puts(b, "\nnot applicable:\n");
      kt_buf_printf(b, "  %-14s %s\n", rows[i].schedule, rows[i].reason ? rows[i].reason : "");
    }
}

static void compare_table(const kt_compare_info *info, const kt_compare_row *rows, size_t n,
                          kt_buf *b) {
  char costs[400];
  kt_costs_describe(info->costs, costs, sizeof costs);
  kt_buf_printf(b, "P=%d M=%d  %s ", info->p, info->m, costs);
  const kt_costs *c = info->costs;
  const struct {
    const char *name;
    double u;
    const double *per;
  } mem[] = {{"mem-act", c->mem_act, c->stage_mem_act},
             {"mem-wgrad", c->mem_wgrad, c->stage_mem_wgrad}};
  for (int k = 0; k < 2; k++) { /* the memory as given: one value, or per stage */
    kt_buf_printf(b, " %s=", mem[k].name);
    if (!mem[k].per || c->n_stages <= 0) kt_buf_printf(b, "%g", mem[k].u);
    for (int st = 0; mem[k].per && st < c->n_stages; st++)
      kt_buf_printf(b, "%s%g", st ? "," : "", mem[k].per[st]);
  }
  kt_buf_puts(b, "\n");
  kt_render_step_line(info->costs->step_sync, b);
  if (info->cost_basis && !strcmp(info->cost_basis, "rank"))
    kt_buf_puts(b,
                "cost basis: rank (costs and memory are one rank's share of the model: every "
                "schedule runs the same model; V chunks per rank run 1/V of them per stage)\n\n");
  else
    kt_buf_puts(b, "cost basis: stage (--per-stage: costs and memory are per stage; a schedule "
                   "with V chunks per rank runs a model V times deeper)\n\n");
  int w = 12;
  for (size_t i = 0; i < n; i++)
    if ((int)strlen(rows[i].schedule) > w) w = (int)strlen(rows[i].schedule);
  table_rows(rows, n, w, b);
  table_notes(rows, n, b);
  kt_buf_puts(b, "\nvs bound = the period over the lower bound on any order of the schedule's "
                 "layout within its memory (=: the bound is the proven optimum).\n");
  kt_buf_puts(b, "peak mem = the largest peak over the ranks (vs 1f1b: as a fraction of 1F1B's "
                 "on the same model; mem form: its closed form); mem = peak activation memory "
                 "(units of --mem-act), fl = peak in-flight micro-batches, on the first and last "
                 "rank.\n");
}

void kt_render_comparison(const kt_comparison *cmp, int json, kt_buf *b) {
  kt_compare_row rows[KT_SCHED_COUNT + 2];
  size_t n = cmp->n < KT_SCHED_COUNT + 2 ? (size_t)cmp->n : KT_SCHED_COUNT + 2;
  for (size_t i = 0; i < n; i++) kt__compare_row_fill(&rows[i], &cmp->rows[i], cmp->peak_1f1b);
  kt_compare_info info = {
      .p = cmp->p, .m = cmp->m, .v = cmp->v, .costs = cmp->given, .cost_basis = cmp->cost_basis};
  if (json) compare_json(&info, rows, n, b);
  else compare_table(&info, rows, n, b);
}
