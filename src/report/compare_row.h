/* A comparison's rows as the table and the JSON print them (src/report). */
#ifndef KAITEN_REPORT_COMPARE_ROW_H
#define KAITEN_REPORT_COMPARE_ROW_H

#include "kaiten/report.h"

/* One schedule in a comparison. closed < 0: no closed form (closed_why
 * says why); mem_vs_1f1b: peak memory over 1F1B's on the same model (< 0:
 * unknown); mem_limit: zb-auto's limit (< 0: none). */
typedef struct {
  const char *schedule;
  int applies;
  const char *reason; /* why it does not apply */
  int v;
  double period, makespan, bubble, closed; /* period: a step in steady state (kt_metrics) */
  const char *closed_expr, *closed_why;
  double peak_mem, peak_mem_first, peak_mem_last, mem_vs_1f1b, closed_mem, mem_limit;
  const char *closed_mem_expr;
  int inflight_first, inflight_last;
  size_t messages;
  /* the lower bound on its layout's period within lower_bound_memory per
   * rank (kt_sim_info's fields); proven: its exact search finished (-1:
   * not searched) */
  int has_lower_bound, lower_bound_exact, proven;
  double lower_bound, lower_bound_memory;
} kt_compare_row;

typedef struct {
  int p, m, v;
  const kt_costs *costs;  /* as the user gave them */
  const char *cost_basis; /* "rank" | "stage" */
} kt_compare_info;

/* The row of an entry: from its result's simulation and info when it
 * applies, else its reason; peak_1f1b: 1F1B's peak memory on the same model
 * (<= 0: unknown). */
void kt__compare_row_fill(kt_compare_row *r, const kt_compare_entry *e, double peak_1f1b);

#endif
