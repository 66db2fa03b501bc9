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

/* The lines a memory chart draws beside the ranks' (bytes / scale, from
 * x0 to x1): 1F1B's predicted peak on the same model and the memory limit,
 * where the run's current segment has them. Fills out (at most
 * KT__MEM_REFS series, their points in xy[4 * KT__MEM_REFS], names in
 * names); returns how many. */
#define KT__MEM_REFS 2
int kt__run_mem_refs(const kt_run *r, double scale, double x0, double x1, kt_series *out,
                     double *xy, char (*names)[64]);
/* The largest of those references, bytes (0: none). */
double kt__run_mem_ref_peak(const kt_run *r);

/* The summary's memory note: the last step's peak against 1F1B's, the
 * limit, the price in time (nothing when 1F1B's peak is unknown). */
void kt__run_memory_note(kt_buf *b, const kt_run *r);
/* The model's memory per stage (config.json's segment g), a note. */
void kt__run_stage_memory(kt_buf *b, const kt_run_segment *g);
/* The costs the prediction ran on (per stage where so), in tu at scale ts. */
void kt__run_calibrated_costs(kt_buf *b, const kt_costs *c, double ts, const char *tu);

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
