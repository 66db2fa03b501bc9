/* kaiten reports: renderers over timelines and metrics (ASCII Gantt, JSON,
 * Chrome trace, SVG charts, self-contained HTML). Renderers append to a
 * kt_buf and never print. */
#ifndef KAITEN_REPORT_H
#define KAITEN_REPORT_H

#include "kaiten/generators.h"
#include "kaiten/rundir.h"
#include "kaiten/schedule.h"
#include "kaiten/plan.h"
#include "kaiten/request.h"
#include "kaiten/sim.h"
#include "kaiten/timeline.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  int width;     /* total columns available (default 120) */
  int color;     /* ANSI colours (only for terminals) */
  int chunks;    /* V of the schedule: labels carry the stage when V > 1 */
  int max_ranks; /* rows drawn before eliding (default 16) */
  int coarse;    /* the timeline is a coarse one (kt_coarse_*, dominant) with one
                      bin per column: op letters only, and the legend says so */
} kt_gantt_opts;

/* The columns the chart's bars get at o->width for p ranks (what a coarse
 * timeline drawn with o->coarse needs as its number of bins). */
int kt_gantt_columns(const kt_gantt_opts *o, int p);

void kt_gantt_default_opts(kt_gantt_opts *o);

/* ASCII Gantt chart: rows = ranks, columns = time, F/B/I/W with micro-batch
 * numbers, '.' for idle, a time axis and a legend. Scales to the width: one
 * cell per time quantum when it fits, proportional (labels elided) otherwise. */
void kt_render_gantt_ascii(const kt_timeline *t, const kt_gantt_opts *o, kt_buf *b);

/* The line under a table saying what the costs describe: basis "stage"
 * (per stage) or "rank" (one rank's share of the model; with V chunks a
 * stage runs 1/V of it). */
void kt_render_cost_basis_line(const char *basis, int v, kt_buf *b);

/* What the default GPT's I keeps of its stage's activations for W (M_W /
 * M_B, measured by kaiten train over the whole model: its mem_wgrad_bytes
 * over mem_act_bytes; test_memory_cli checks it; docs/schedules.md). */
#define KT_GPT_WGRAD_KEEPS 0.81
/* With costs that free an F's activation at its I (mem-wgrad 0 on every
 * stage), one line saying so and what the default GPT really keeps; else
 * nothing. A caller that was told mem-wgrad 0 on purpose skips it. */
void kt_render_memory_model_line(const kt_costs *c, kt_buf *b);

/* One line saying what period and makespan mean under sync (every table's
 * header says it once). */
void kt_render_step_line(kt_step_sync sync, kt_buf *b);
/* "period X unit (a step, overlap)", and the makespan of one step alone
 * where it differs: the step's figures as every text output states them. */
void kt_render_period_text(const kt_metrics *m, const char *time_unit, kt_buf *b);

/* Metrics as an aligned text table (after a Gantt chart). */
void kt_render_metrics_text(const kt_sim_info *info, const kt_metrics *m, const char *time_unit,
                            kt_buf *b);

/* One JSON object: schedule, p, m, v, makespan, period, step_sync, span, bubble_ratio, ranks[] (rank,
 * busy, idle, peak_memory, peak_inflight, ...), plus costs and events[]. */
void kt_render_sim_json(const kt_sim_info *info, const kt_metrics *m, const kt_timeline *t,
                        kt_buf *b);

/* The costs as JSON: numbers, or per-stage lists, and per_stage. */
void kt_render_costs_json(const kt_costs *c, kt_buf *b);

/* ---- comparisons (compare.c) ---------------------------------------------- */

/* A comparison (kaiten/request.h) as an aligned table (with the basis line,
 * closed forms and what did not apply), or as one JSON object {p, m, v,
 * cost_basis, costs, rows[]}. */
void kt_render_comparison(const kt_comparison *cmp, int json, kt_buf *b);

/* Chrome trace JSON (opens in Perfetto / chrome://tracing): one track per
 * rank, one slice per action with stage, micro-batch and op in args, memory
 * as counter tracks. us_per_unit converts timeline time to microseconds. */
void kt_render_chrome_trace(const kt_timeline *t, const char *title, double us_per_unit, kt_buf *b);

/* A training run's traced step (times in seconds). */
typedef struct {
  const kt_schedule *schedule;
  const kt_timeline *measured, *predicted;
  /* the measured step's metrics with its period (NULL: the timeline's own,
   * its period its makespan), the prediction's */
  const kt_metrics *measured_metrics, *predicted_metrics;
  const kt_costs *calibrated; /* the costs the prediction ran on */
} kt_run_timelines;
/* A run directory's timeline.json (the measured and the predicted step,
 * each as kt_render_sim_json writes a simulation) and trace.json (the
 * measured step as a Chrome trace): what kt_session_params.render_timelines
 * takes. Out of memory: timeline->failed or trace->failed. */
void kt_render_run_timelines(const kt_run_timelines *t, kt_buf *timeline, kt_buf *trace);

/* Event label: "F3" (V = 1) or "5F3" (V > 1, stage included). */
int kt_event_label(const kt_event *e, int chunks, char *buf, size_t n);

/* ---- SVG building blocks (svg.c, svg_gantt.c) ------------------------------
 *
 * Each call appends one complete <svg> element: inline, no external
 * references, well-formed XML (usable inside HTML or as an .svg file). They
 * share a left margin (KT_SVG_MARGIN_LEFT) and right margin, so a Gantt and a
 * line chart of the same width and x range line up. Colours: Okabe-Ito.
 */

#define KT_SVG_MARGIN_LEFT 64
#define KT_SVG_MARGIN_RIGHT 20

/* Fill colour of an op ("#0072B2" ...); later chunks use a lighter tint. */
const char *kt_svg_op_color(kt_op op, int chunk);
/* Colour of series i of n: Okabe-Ito for n <= 8, a viridis ramp beyond. */
const char *kt_svg_series_color(size_t i, size_t n);
/* Appends s with &, <, >, " and ' escaped (text or attribute value). */
void kt_buf_xml_escape(kt_buf *b, const char *s);

typedef struct {
  const char *title;   /* <title> of the svg (tooltip, accessibility); NULL = none */
  const char *id;      /* id attribute, NULL = none */
  int standalone;      /* add the SVG namespace and an XML-safe font (for .svg files) */
  int chunks;          /* V: labels carry the stage when > 1, later chunks are lighter */
  double px_per_unit;  /* horizontal scale; 0 = fit the span into width */
  int width;           /* total width in px when px_per_unit is 0 (default 1200) */
  int row_height;      /* px per rank, 0 = by P (24, 18 or 12) */
  double t_min, t_max; /* time range; t_max <= t_min = the events' own range */
  size_t max_rects;    /* more events than this are drawn aggregated (0 = 4000) */
  double min_bar_px;   /* narrower actions are drawn aggregated (0 = 2) */
  int force_aggregate; /* always draw the aggregated view */
  /* Optional second timeline (e.g. the prediction for a measured run): drawn
   * as a thin strip under each rank's bars, same colours, data-pred="1". */
  const kt_timeline *predicted;
  const char *predicted_label; /* legend text for the strip (default "predicted") */
  /* Detail view only: the timeline's memory samples go into the svg as
   * <metadata class="kt-mem">{"unit": "M_B" | "B" | ..., "ranks": [[t, v,
   * t, v, ...], ...]}</metadata> (t from the chart's start, in time order),
   * for the conveyor-belt replay's memory counters. */
  int embed_memory;
} kt_svg_gantt_opts;

void kt_svg_gantt_default_opts(kt_svg_gantt_opts *o);

/* SVG Gantt chart: one row per rank, a time axis with units, a legend, one
 * <rect data-rank data-stage data-mb data-op> per action with micro-batch
 * labels where they fit; idle time is left empty over a pale lane. When there
 * are more than max_rects actions, or they would be thinner than min_bar_px,
 * each rank is drawn aggregated instead: blocks of similar activity whose
 * height is the utilisation and whose bands are the share of each op, one
 * <rect data-rank data-op data-n> per op and block (data-n = actions that
 * start in it, so they still add up to the rank's action count). The <svg>
 * carries data-mode="detail|aggregate", data-t0 and data-ppu (px per unit).
 * The time axis counts from the chart's start t0 (t_min, or the first event),
 * in ms or µs when a seconds timeline is short. */
void kt_svg_gantt(kt_buf *b, const kt_timeline *t, const kt_svg_gantt_opts *o);

/* Horizontal scale the Gantt would use for span time units drawn into width
 * px (the plot area is width minus the margins). */
double kt_svg_fit_scale(double span, int width);

/* One (x, y) series of a line chart. */
typedef struct {
  const char *name;    /* legend text */
  const double *x, *y; /* n points, x non-decreasing */
  size_t n;
  int step;          /* value holds until the next x (memory levels) */
  const char *color; /* NULL = kt_svg_series_color */
  int dashed;        /* drawn dashed (e.g. validation loss, predictions) */
  int markers;       /* a dot (with a tooltip) at every point: sparse series only */
} kt_series;

typedef struct {
  const char *title; /* heading drawn in the chart, NULL = none */
  const char *id;
  const char *x_label; /* axis titles: say the unit, e.g. "time (s)" */
  const char *y_label;
  int width, height;   /* total px (defaults 900 x 220) */
  double x_min, x_max; /* x_max <= x_min: from the data */
  double y_min, y_max; /* y_max <= y_min: from the data (y_min 0 when data >= 0) */
  int log_y;           /* logarithmic y axis (positive values only) */
  int standalone;
  int max_legend; /* legend entries before eliding the middle (default 8) */
} kt_chart_opts;

void kt_chart_default_opts(kt_chart_opts *o);

/* Line chart with axes, ticks, grid, axis titles and a legend. Series are
 * thinned to at most four points per pixel column (first, min, max, last),
 * so a million-point loss curve stays a few kilobytes and keeps its peaks. */
void kt_svg_line_chart(kt_buf *b, const kt_chart_opts *o, const kt_series *s, size_t n);

/* Horizontal bar chart: one row per category, k values per row, grouped
 * side by side or stacked (e.g. per-stage busy and idle). */
typedef struct {
  const char *const *labels; /* n category names */
  size_t n;
  const char *const *series_names; /* k legend names (NULL when k == 1) */
  size_t k;
  const double *values; /* n * k, values[i * k + j] */
  int stacked;
  const char *const *colors; /* k colours, NULL = kt_svg_series_color */
  const char *value_fmt;     /* printf format of the value labels ("%.1f%%"); NULL = "%g" */
  double value_scale;        /* labels show value * scale (0 = 1) */
} kt_bar_data;

/* x_label names the value axis; x_max (when > x_min) fixes its extent. */
void kt_svg_bar_chart(kt_buf *b, const kt_chart_opts *o, const kt_bar_data *d);

/* ---- HTML pages (html.c, html_report.c) -------------------------------------
 *
 * A page is assembled from pieces: kt_html_begin, then sections and charts
 * (any of the kt_svg_* calls, kt_html_table), then kt_html_end. The result
 * is one self-contained file: inline CSS and SVG, a little inline JS for
 * tooltips; no network, XHTML-compatible markup (parses as XML). */

void kt_html_begin(kt_buf *b, const char *title, const char *subtitle);
/* Appends the tooltip script and closes the page; the script marks
 * <body data-kt="ready"> when it ran (a test hook). */
void kt_html_end(kt_buf *b);
/* <section><h2>heading</h2> ... </section>; id may be NULL. */
void kt_html_section_begin(kt_buf *b, const char *id, const char *heading, const char *note);
void kt_html_section_end(kt_buf *b);
/* A table: ncols header cells, then nrows * ncols cells (NULL = empty).
 * Cells that look numeric are right-aligned. */
void kt_html_table(kt_buf *b, const char *caption, const char *const *header, size_t ncols,
                   const char *const *cells, size_t nrows);
/* Escaped text (element content or attribute value). */
void kt_html_text(kt_buf *b, const char *s);

/* Memory-over-time of a timeline as one step series per rank ("rank 3"),
 * starting at 0 at t_from and held until t_to. Free with kt_series_free.
 * ENOMEM. */
kt_status kt_timeline_mem_series(const kt_timeline *t, double t_from, double t_to, kt_series **out,
                                 size_t *n);
void kt_series_free(kt_series *s, size_t n);

/* Per-rank busy and idle time as stacked horizontal bars (utilisation in
 * the labels); time_label names the axis with its unit. */
void kt_svg_rank_utilisation(kt_buf *b, const kt_metrics *m, const char *time_label,
                             const kt_chart_opts *o);

/* One simulated schedule in a report: what it was run with and what came of
 * it, or why it does not apply (timeline NULL, reason set). */
typedef struct {
  kt_sim_info info;
  const kt_timeline *timeline;
  const kt_metrics *metrics;
  const char *reason;
} kt_report_entry;

/* The simulation report (one entry) or the comparison report (several):
 * comparison bars (bubble ratio, makespan, peak memory), a Gantt per
 * schedule on one time scale, memory over time per rank, per-rank busy and
 * idle, a metrics table and the configuration. costs may be NULL. */
void kt_render_html_report(kt_buf *b, const char *title, const kt_report_entry *entries, size_t n,
                           const kt_costs *costs);
/* Renders that report and writes it to path atomically. ENOMEM, EIO. */
kt_status kt_write_html_report(const char *path, const char *title, const kt_report_entry *entries,
                               size_t n, const kt_costs *costs, kt_error *err);
/* The report of one result (its timeline, or timeline when not NULL: a
 * coarse one) or of a comparison whose rows kept their timelines
 * (KT_RESULT_TIMELINE), written to path atomically; title NULL: the one
 * kaiten sim or compare gives. ENOMEM, EIO. */
kt_status kt_write_result_report(const char *path, const char *title, const kt_result *res,
                                 const kt_timeline *timeline, const kt_costs *given, kt_error *err);
kt_status kt_write_comparison_report(const char *path, const char *title, const kt_comparison *cmp,
                                     kt_error *err);

/* ---- run reports (run_report.c): a run directory (kaiten/rundir.h) drawn ---- */

/* The run report: summary, loss and validation-loss curves, tokens/s and
 * bubble per step, learning rate and gradient norm, the traced step's
 * measured Gantt with the prediction under it and its memory, per-rank
 * busy/idle, activation memory and communication per step per rank, and the
 * configuration. Curves take every step (the charts thin them to a few
 * points per pixel column); past 50 steps a moving average is drawn over
 * the raw curve. */
void kt_render_run_report(kt_buf *b, const kt_run *r, const char *title);
/* Renders it and writes it to path atomically. ENOMEM, EIO. */
kt_status kt_write_run_report(const char *path, const kt_run *r, const char *title, kt_error *err);

/* ---- kaiten plan (report/plan.c) ---------------------------------------------- */

/* The ranking (text table or JSON object), with explain the breakdown of
 * the best configuration. */
void kt_render_plan(const kt_plan_model *m, const kt_plan_cluster *c, const kt_plan_options *o,
                    const kt_plan_search_params *sp, const kt_plan_report *rep, int json,
                    int explain, kt_buf *out);
/* The partition-only view: per-stage table and the --partition argument. */
void kt_render_plan_partition(const kt_plan_model *m, const kt_plan_cluster *c,
                              const kt_plan_partition_view *pv, int json, kt_buf *out);
/* The model presets with their shapes. */
void kt_render_plan_presets(kt_buf *out);
/* How to run configuration r with the frameworks users run: Megatron-LM's
 * flags, torchtitan's [parallelism] settings (transformer models) and
 * kaiten.torch's call, each with r's partition; json: a "launch" member
 * {"megatron","torchtitan","kaiten_torch"} appended to an open object. */
void kt_render_plan_launch(const kt_plan_model *m, const kt_plan_options *o,
                           const kt_plan_result *r, long B, int json, kt_buf *out);

#ifdef __cplusplus
}
#endif

#endif
