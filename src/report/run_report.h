/* Internal pieces shared by the run report's files (not public API). */
#ifndef KAITEN_REPORT_RUN_REPORT_H
#define KAITEN_REPORT_RUN_REPORT_H

#include <stddef.h>

#include "report/svg_util.h"

#define PAGE_W 1320                      /* laid out for a 1400 px window, like the sim report */
#define CARD_W1 (PAGE_W - 20)            /* one card across the page */
#define CARD_W2 ((PAGE_W - 14) / 2 - 20) /* two cards side by side */
#define MAX_CURVES 8                     /* per-rank line charts draw at most this many ranks */
#define RFIELD(f) offsetof(kt_run_rank_step, f)

/* Display unit of a byte count (B, KiB, MiB, GiB): returns the divisor. */
double kt__run_bytes_unit(double peak, const char **name);
/* Display unit of a time span in seconds (µs, ms, s, as the Gantt axis): the factor. */
double kt__run_time_scale(double span, const char **name);
/* Up to MAX_CURVES of p ranks, evenly spaced, first and last included; how many. */
int kt__run_pick_ranks(int p, int *show);
/* Mean over the steps of one field of kt_run_rank_step (NAN when none). */
double kt__run_rank_mean(const kt_run *r, int rank, size_t field);
void kt__run_chart_opts(kt_chart_opts *co, const char *id, const char *title, const char *xl,
                        const char *yl, int w, int h);
void kt__run_card_begin(kt_buf *b);
void kt__run_card_end(kt_buf *b);

/* Sections (run_report_curves.c). predicted_bubble in %, NAN when unknown. */
void kt__run_training_section(kt_buf *b, const kt_run *r, double predicted_bubble);
void kt__run_memory_section(kt_buf *b, const kt_run *r);
/* A card: why each rank idled on the run's last step (its ranks[].idle_causes),
 * a stacked bar per rank; nothing when the step has none. */
void kt__run_idle_card(kt_buf *b, const kt_run *r);
/* The autopilot's section (run_report_autopilot.c): the pipeline with the
 * rank or link named slow, each switch's step before and after; nothing
 * when the run named no fault and made no switch. */
void kt__run_autopilot_section(kt_buf *b, const kt_run *r);

#endif
