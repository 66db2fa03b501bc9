/* kaiten ffi: the library through a foreign-function interface.
 *
 * ctypes (Python) and other FFIs call C functions, but cannot safely lay out
 * C structs that grow with the library. This module gives them opaque
 * handles that hold the library's plain-data structs (a cost table, a
 * schedule, a simulation's timeline and metrics, a planner request),
 * creates and frees them, and hands them to the library's own functions.
 * Results come back as numbers, or as the text (JSON, CSV, charts, HTML)
 * the library's renderers write. Nothing here computes a result of its
 * own: what the CLI states about a simulation (closed forms where exact,
 * the lower bound, the exact search's figures, a comparison's rows) comes
 * from the same library calls it makes (kt_sim_info_describe,
 * kt_compare_row_fill); the rules of its flags (the cost basis, a memory
 * limit given as a fraction of 1F1B's) are applied by the caller with
 * these same calls, as python/kaiten does.
 *
 * A handle's pointer may be passed wherever the library takes the struct
 * (kt_ffi_costs_new's result is a kt_costs *, kt_ffi_schedule_new's a
 * kt_schedule *), so the scalar-and-pointer functions of kaiten/schedule.h,
 * kaiten/costs.h and kaiten/generators.h are called directly.
 *
 * Text results are malloc'd and NUL-terminated: free them with
 * kt_ffi_free. Errors: a kt_status, and the one-line reason in err.
 *
 * Every argument is checked here, once, as the CLI checks its flags: a
 * NULL handle, text or array is EINVAL naming it; P, V and M take the
 * CLI's ranges (1..KT_MAX_RANKS, 0..KT_MAX_CHUNKS, 1..KT_MAX_MICROBATCHES);
 * a layout whose simulation this machine cannot hold is refused before
 * anything is built (kt_sim_memory_check, the CLI's guard); costs are in
 * kt_costs_check's range. Nothing a caller passes makes a call crash, loop
 * past its stated limit or read without bound.
 */
#ifndef KAITEN_FFI_H
#define KAITEN_FFI_H

#include "kaiten/costs.h"
#include "kaiten/schedule.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Frees a text result. */
void kt_ffi_free(char *text);

/* ---- costs ------------------------------------------------------------------ */

/* A cost table with kt_costs_default's values; NULL when out of memory.
 * Fill it with kt_costs_parse_json; derive a schedule's stage costs with
 * kt_costs_for_chunks into another kt_ffi_costs_new table. */
kt_costs *kt_ffi_costs_new(void);
void kt_ffi_costs_free(kt_costs *c);
/* The table as the CLI's JSON writes it (kt_render_costs_json). ENOMEM. */
kt_status kt_ffi_costs_json(const kt_costs *c, char **out, kt_error *err);

/* ---- schedules -------------------------------------------------------------- */

/* An empty schedule (fill it with kt_ffi_generate, kt_ffi_optimal or
 * kt_ffi_parse, which replace what a used handle holds, or with
 * kt_schedule_lower_ir); NULL when out of memory. */
kt_schedule *kt_ffi_schedule_new(void);
void kt_ffi_schedule_free(kt_schedule *s);
/* shape[0..4] = P, V, M, stages, placement (kt_placement). */
void kt_ffi_schedule_shape(const kt_schedule *s, int shape[5]);
const char *kt_ffi_schedule_name(const kt_schedule *s);
void kt_ffi_schedule_set_name(kt_schedule *s, const char *name);

/* kt_generate of kind at P, V (0: its default), M with stage costs
 * c (NULL: unit costs) and zb-auto's memory limit in M_B units (<= 0: its
 * default; > 0 for a kind that keeps to none is refused, as
 * kt_gen_check_mem_limit says); thorough: zb-auto's thorough search
 * (kt_gen_params.thorough). EINVAL with the reason when the sizes do not
 * suit the kind or its simulation would not fit this machine. */
kt_status kt_ffi_generate(int kind, int p, int v, int m, const kt_costs *c, double mem_limit,
                          int thorough, kt_schedule *out, kt_error *err);
/* kt_gen_1f1b_peak and kt_gen_mem_limit of those parameters; -1 when
 * they are out of range (as kt_ffi_generate checks them). */
double kt_ffi_1f1b_peak(int kind, int p, int v, int m, const kt_costs *c);
double kt_ffi_mem_limit(int p, int v, int m, const kt_costs *c, double mem_limit);

/* kt_schedule_parse_opts of a CSV or text schedule, read in notation
 * (kt_notation; AUTO detects). lowered (optional) receives the whole file
 * when it has communication actions; info[0..2] (optional) = the notation
 * it was read in, its communication actions, and of those SEND/RECV/
 * WAIT_SEND actions. EPARSE naming the bad cell. */
kt_status kt_ffi_parse(const char *text, int notation, kt_schedule *out, kt_schedule *lowered,
                       long info[3], kt_error *err);
/* The same from a file, as `kaiten sim --schedule-file` reads it
 * (kt_schedule_parse_file_opts: at most KT_SCHEDULE_FILE_MAX bytes, a NUL
 * byte or an over-long line stops the read at once). EINVAL, EPARSE. */
kt_status kt_ffi_parse_file(const char *path, int notation, kt_schedule *out,
                            kt_schedule *lowered, long info[3], kt_error *err);
/* The schedule in PyTorch's CSV (kt_schedule_write_csv_notation), or in
 * kaiten's text form when notation < 0. ENOMEM. */
kt_status kt_ffi_schedule_write(const kt_schedule *s, int notation, char **out, kt_error *err);

/* ---- simulations -------------------------------------------------------------- */

/* A simulation's timeline and metrics. */
typedef struct kt_ffi_sim kt_ffi_sim;
/* kt_simulate_both of s with costs c into a new simulation. EDEADLOCK,
 * EINVALID_SCHEDULE with the reason, EINVAL (an empty handle, a timeline
 * this machine cannot hold), ENOMEM. */
kt_status kt_ffi_simulate(const kt_schedule *s, const kt_costs *c, kt_ffi_sim **out,
                          kt_error *err);
void kt_ffi_sim_free(kt_ffi_sim *sim);

/* The schedule "optimal": kt_gen_optimal at P, V (1: loop, 2: v
 * placement), M under the stage costs c and zb-auto's memory limit (M_B
 * units, <= 0: its default) within time_limit seconds (<= 0: 10; else
 * --time-limit's 0.001..1e6). *search
 * (a new handle) keeps the search's figures for kt_ffi_info_new. EINVAL
 * (above its reach, nothing fits the limit), ENOMEM. */
typedef struct kt_ffi_search kt_ffi_search;
kt_status kt_ffi_optimal(int p, int v, int m, const kt_costs *c, double mem_limit,
                         double time_limit, kt_schedule *out, kt_ffi_search **search,
                         kt_error *err);
void kt_ffi_search_free(kt_ffi_search *search);

/* What a simulation ran with, for the renderers (kaiten/report.h's
 * kt_sim_info, filled as the CLI fills it by kt_sim_info_describe): the
 * schedule's shape, placement and stage table, its stage costs c, the cost
 * basis ("rank" | "stage" | NULL), and from how it was made (kind: its
 * generator, KT_SIM_OPTIMAL with search, or -1 for a file; mem_limit: the
 * limit zb-auto, zbv-auto or the search kept, < 0: none) and its
 * simulation sim (NULL: none yet) the closed forms, the lower bound and
 * the search's figures. The strings and the search's figures are copied;
 * s, c and sim are not and must outlive the info. NULL when out of memory
 * or when s is empty, c NULL or mem_limit not finite. */
typedef struct kt_ffi_info kt_ffi_info;
kt_ffi_info *kt_ffi_info_new(const kt_schedule *s, const kt_costs *c, const char *cost_basis,
                             int kind, double mem_limit, const kt_ffi_search *search,
                             const kt_ffi_sim *sim);
void kt_ffi_info_free(kt_ffi_info *info);

/* The simulation as `kaiten sim --format json` writes it (kt_render_sim_json),
 * its events listed when events is 1. ENOMEM. */
kt_status kt_ffi_sim_json(const kt_ffi_info *info, const kt_ffi_sim *sim, int events, char **out,
                          kt_error *err);
/* The terminal chart `kaiten sim` draws at width columns (no colour; 0:
 * 120, else --width's 40..100000): the Gantt, a blank line, the metrics
 * table and the cost basis. EINVAL, ENOMEM. */
kt_status kt_ffi_sim_gantt(const kt_ffi_info *info, const kt_ffi_sim *sim, int width, char **out,
                           kt_error *err);
/* The HTML report (kt_write_html_report) of n entries, written to path
 * atomically: entry i, named names[i], is sims[i] with infos[i], or when
 * sims[i] is NULL a schedule that does not apply, for reasons[i]. Every
 * entry says the layout asked for (p, m) and the cost basis. given: the
 * costs as the user gave them (NULL: the first entry's). EIO, ENOMEM. */
kt_status kt_ffi_report(const char *path, const char *title, int n, const kt_ffi_info *const *infos,
                        const kt_ffi_sim *const *sims, const char *const *names,
                        const char *const *reasons, int p, int m, const char *cost_basis,
                        const kt_costs *given, kt_error *err);

/* The comparison `kaiten compare` prints, as JSON (table 0) or its table
 * (1), of n rows: row i, named names[i], is sims[i] described by infos[i]
 * (kt_compare_row_fill), or when sims[i] is NULL a schedule that does not
 * apply, for reasons[i]. peak_1f1b: 1F1B's peak on the same model (<= 0:
 * unknown); p, m, v, the cost basis and the costs as given head it.
 * EINVAL, ENOMEM. */
kt_status kt_ffi_compare(int n, const kt_ffi_info *const *infos, const kt_ffi_sim *const *sims,
                         const char *const *names, const char *const *reasons, double peak_1f1b,
                         int p, int m, int v, const char *cost_basis, const kt_costs *given,
                         int table, char **out, kt_error *err);

/* ---- partitioner -------------------------------------------------------------- */

/* kt_partition_minmax of n layers with the given loads (fixed, act, mult
 * optional, NULL = none, as kt_partition_problem says) into stages:
 * counts[stages] layers per stage, *bottleneck the largest stage load. */
kt_status kt_ffi_partition(int n, const double *load, const double *fixed, const double *act,
                           const double *mult, double mem_cap, int stages, int *counts,
                           double *bottleneck, kt_error *err);

/* ---- planner ------------------------------------------------------------------ */

/* A planner request: a model, a cluster (kt_plan_cluster_default until
 * changed), training options and search parameters (their defaults), and
 * after a search its report. */
typedef struct kt_ffi_plan kt_ffi_plan;
kt_ffi_plan *kt_ffi_plan_new(void);
void kt_ffi_plan_free(kt_ffi_plan *pl);
/* The model: a preset name or a JSON file (kt_plan_model_load), or JSON
 * text (kt_plan_model_parse). EINVAL, EPARSE, EIO. */
kt_status kt_ffi_plan_model(kt_ffi_plan *pl, const char *preset_or_path, kt_error *err);
kt_status kt_ffi_plan_model_json(kt_ffi_plan *pl, const char *json, kt_error *err);
/* Overrides cluster fields from a JSON object (kt_plan_cluster_parse). */
kt_status kt_ffi_plan_cluster_json(kt_ffi_plan *pl, const char *json, kt_error *err);
/* The same from a file, as `kaiten plan --cluster` reads it
 * (kt_plan_cluster_load: at most KT_PLAN_FILE_MAX bytes of text). */
kt_status kt_ffi_plan_cluster_file(kt_ffi_plan *pl, const char *path, kt_error *err);
/* Sets one field by its C name: the cluster's (devices, devices_per_node,
 * mem_bytes, mem_reserved, peak_flops, efficiency, achieved_flops,
 * intra_bw, intra_latency, inter_bw, inter_latency, inter_burst), the
 * options' (weight_bytes, grad_bytes, optimizer_bytes, zero,
 * sequence_parallel), the search's (global_batch, max_bubble,
 * max_microbatches, max_chunks, top, collapse, the masks schedules,
 * recomputes, node_layouts, and the pins p, d, t, v, m, b, k), or the
 * model's seq_len. Integer fields take the value as an integer. EINVAL
 * naming an unknown field or a value out of its type's range. */
kt_status kt_ffi_plan_set(kt_ffi_plan *pl, const char *field, double value, kt_error *err);
/* kt_plan_cluster_check of the cluster as set. */
kt_status kt_ffi_plan_check(const kt_ffi_plan *pl, kt_error *err);
/* kt_plan_search, and the result as `kaiten plan --format json` writes it
 * (also when nothing fits: configs is then empty). */
kt_status kt_ffi_plan_search(kt_ffi_plan *pl, char **json, kt_error *err);
/* After a search: the smallest peak seen (bytes) and the first schedule's
 * rejection ("" when none), for saying why nothing fits. */
double kt_ffi_plan_min_memory(const kt_ffi_plan *pl);
const char *kt_ffi_plan_not_applicable(const kt_ffi_plan *pl);
/* kt_plan_partition_only into stages with t, b, m, d and recompute
 * (kt_recompute), capped by the device memory when capped is 1, as `kaiten
 * plan --partition-only --format json` writes it. */
kt_status kt_ffi_plan_partition(const kt_ffi_plan *pl, int stages, int t, int b, int m, int d,
                                int recompute, int capped, char **json, kt_error *err);

#ifdef __cplusplus
}
#endif

#endif
