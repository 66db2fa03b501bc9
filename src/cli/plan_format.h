/* kaiten plan: the partition-only computation and the text/JSON renderers. */
#ifndef KAITEN_CLI_PLAN_FORMAT_H
#define KAITEN_CLI_PLAN_FORMAT_H

#include "kaiten/core.h"
#include "kaiten/plan.h"

/* --partition-only: inputs, then the cut and its per-stage figures. */
typedef struct {
  int stages, t, b, m, d;
  kt_recompute recompute;
  int capped;       /* cut under the device memory with 1F1B in-flight counts */
  int *counts;      /* stages */
  double *load;     /* stages: seconds per micro-batch (F + I + W) */
  double *params;   /* stages */
  double *mem;      /* stages: model state + in-flight activations (capped mode) */
  double bottleneck, mean;
} cli_plan_partition_view;

kt_status cli_plan_partition(const kt_plan_model *m, const kt_plan_cluster *c,
                             const kt_plan_options *o, cli_plan_partition_view *pv, kt_error *err);
void cli_plan_partition_view_free(cli_plan_partition_view *pv);
void cli_plan_render_partition(const kt_plan_model *m, const kt_plan_cluster *c,
                               const cli_plan_partition_view *pv, int json, kt_buf *out);

void cli_plan_render_presets(kt_buf *out);

/* The ranking (text table or JSON object), with --explain the breakdown of
 * the best configuration. */
void cli_plan_render(const kt_plan_model *m, const kt_plan_cluster *c, const kt_plan_options *o,
                     const kt_plan_search_params *sp, const kt_plan_report *rep, int json,
                     int explain, kt_buf *out);

/* One line: why nothing fits (the smallest memory seen against the budget). */
void cli_plan_nothing_fits(const kt_plan_cluster *c, const kt_plan_search_params *sp,
                           const kt_plan_report *rep, kt_error *err);

#endif
