/* kaiten reports: renderers over timelines and metrics (ASCII Gantt, JSON,
 * Chrome trace). Renderers append to a kt_buf and never print. */
#ifndef KAITEN_REPORT_H
#define KAITEN_REPORT_H

#include "kaiten/schedule.h"
#include "kaiten/sim.h"
#include "kaiten/timeline.h"

typedef struct {
  int width;       /* total columns available (default 120) */
  int color;       /* ANSI colours (only for terminals) */
  int chunks;      /* V of the schedule: labels carry the stage when V > 1 */
  int max_ranks;   /* rows drawn before eliding (default 16) */
} kt_gantt_opts;

void kt_gantt_default_opts(kt_gantt_opts *o);

/* ASCII Gantt chart: rows = ranks, columns = time, F/B/I/W with micro-batch
 * numbers, '.' for idle, a time axis and a legend. Scales to the width: one
 * cell per time quantum when it fits, proportional (labels elided) otherwise. */
void kt_render_gantt_ascii(const kt_timeline *t, const kt_gantt_opts *o, kt_buf *b);

/* Describes what a simulation was run with, for the headers of reports. */
typedef struct {
  const char *schedule; /* name */
  int p, v, m;
  const char *placement;
  const kt_costs *costs;
  double closed_form; /* < 0: none */
  const char *closed_form_expr;
  size_t messages;
} kt_sim_info;

/* Metrics as an aligned text table (after a Gantt chart). */
void kt_render_metrics_text(const kt_sim_info *info, const kt_metrics *m, const char *time_unit,
                            kt_buf *b);

/* One JSON object: schedule, p, m, v, makespan, bubble_ratio, ranks[] (rank,
 * busy, idle, peak_memory, peak_inflight, ...), plus costs and events[]. */
void kt_render_sim_json(const kt_sim_info *info, const kt_metrics *m, const kt_timeline *t,
                        kt_buf *b);

/* Chrome trace JSON (opens in Perfetto / chrome://tracing): one track per
 * rank, one slice per action with stage, micro-batch and op in args, memory
 * as counter tracks. us_per_unit converts timeline time to microseconds. */
void kt_render_chrome_trace(const kt_timeline *t, const char *title, double us_per_unit,
                            kt_buf *b);

/* Event label: "F3" (V = 1) or "5F3" (V > 1, stage included). */
int kt_event_label(const kt_event *e, int chunks, char *buf, size_t n);

#endif
