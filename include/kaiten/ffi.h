/* kaiten ffi: the library through a foreign-function interface.
 *
 * ctypes (Python) and other FFIs call C functions, but cannot safely lay out
 * C structs that grow with the library. This module gives them opaque
 * handles: a request (kaiten/request.h: settings by name, as the CLI's
 * flags and the page's key=value), its result, a comparison, a planner
 * request. Results come back as numbers, or as the text (JSON, charts,
 * HTML) the library's renderers write: the same bytes `kaiten sim` and
 * `kaiten compare` print for the same request. Nothing here computes or
 * checks anything of its own; the request's rules are the library's.
 *
 * A result's schedule (kt_ffi_result_order) may be passed wherever the
 * library takes a const kt_schedule *, so kaiten/schedule.h's read-only
 * functions are called on it directly.
 *
 * Text results are malloc'd and NUL-terminated: free them with
 * kt_ffi_free. Errors: a kt_status, and the one-line reason in err.
 *
 * Every argument is checked here or by the library, once: a NULL handle,
 * text or array is EINVAL naming it; a setting is the request's to check
 * (the CLI's ranges, the size guard of the path that will run); a number
 * this interface takes itself (a detail, a chart's width, a notation) has
 * its stated range. Nothing a caller passes makes a call crash, loop past
 * its stated limit or read without bound.
 */
#ifndef KAITEN_FFI_H
#define KAITEN_FFI_H

#include "kaiten/request.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Frees a text result. */
void kt_ffi_free(char *text);

/* ---- requests ------------------------------------------------------------------- */

/* A request with kt_request_init's defaults; NULL when out of memory. */
kt_request *kt_ffi_request_new(void);
void kt_ffi_request_free(kt_request *rq);
/* kt_request_set, kt_request_parse: EINVAL naming the key as given. */
kt_status kt_ffi_request_set(kt_request *rq, const char *key, const char *value, kt_error *err);
kt_status kt_ffi_request_parse(kt_request *rq, const char *text, kt_error *err);
/* Costs in the cost file's JSON format (kt_costs_parse_json, as `--costs
 * FILE` reads a file) onto the request's. EPARSE, EINVAL naming the key. */
kt_status kt_ffi_request_costs(kt_request *rq, const char *json, kt_error *err);
/* The order to run instead of generating one (kt_request_set_order): a
 * schedule in kaiten text or CSV form of len bytes (a NUL byte among them
 * is EPARSE), name used when it gives none. */
kt_status kt_ffi_request_order(kt_request *rq, const char *text, size_t len, const char *name,
                               kt_error *err);
/* The order in the file at path (kt_request_read_order: read as `kaiten sim
 * --schedule-file` reads it, bounded), named name (NULL: after the file).
 * EINVAL, EIO, ENOMEM. */
kt_status kt_ffi_request_order_file(kt_request *rq, const char *path, const char *name,
                                    kt_error *err);
/* The order's text the request holds ("" when none). */
const char *kt_ffi_request_order_text(const kt_request *rq);
/* kt_request_print. */
kt_status kt_ffi_request_text(const kt_request *rq, char **out, kt_error *err);
/* kt_request_pack of len[0..n-1] (given 1: micro-batches' lengths, sq
 * optional; 0: documents) as JSON: {"packing", "micro_batches": [[document
 * indices], ...] in run order, "tokens": [...], "order": [packed index run
 * k-th, ...], "left_out", "period"} (free with kt_ffi_free). */
kt_status kt_ffi_request_pack(const kt_request *rq, const int *len, const double *sq, int n,
                              int given, char **out, kt_error *err);

/* ---- results -------------------------------------------------------------------- */

/* kt_request_run into a new result: detail 0 builds the order only, 1
 * simulates its metrics, 2 keeps every event. The request's errors
 * (EINVAL, EMEMLIMIT, EPARSE, EINVALID_SCHEDULE, EDEADLOCK, ENOMEM). */
kt_status kt_ffi_run(const kt_request *rq, int detail, kt_result **out, kt_error *err);
/* Simulates a result built with less detail (1 or 2; nothing when it has it). */
kt_status kt_ffi_result_simulate(kt_result *res, int detail, kt_error *err);
void kt_ffi_result_free(kt_result *res);
/* The order built, and a held order's lowered program (NULL: none). */
const kt_schedule *kt_ffi_result_order(const kt_result *res);
const kt_schedule *kt_ffi_result_program(const kt_result *res);
/* The memory limit the order was searched under or is checked against
 * (mem-act units; < 0: none), and what reading a held order inferred. */
double kt_ffi_result_mem_limit(const kt_result *res);
const char *kt_ffi_result_read_info(const kt_result *res);
/* A simulated result as `kaiten sim --format json` writes it (its events
 * when events is 1 and it kept them). EINVAL before a simulation. */
kt_status kt_ffi_result_json(const kt_result *res, int events, char **out, kt_error *err);
/* The terminal chart `kaiten sim` draws at width columns (no colour;
 * --width's 40..100000, else EINVAL): the Gantt, a blank line, the metrics
 * table and the cost basis (a result with its events). */
kt_status kt_ffi_result_gantt(const kt_result *res, int width, char **out, kt_error *err);
/* The stage costs the order runs with, as the CLI's JSON writes costs. */
kt_status kt_ffi_result_costs_json(const kt_result *res, char **out, kt_error *err);
/* The HTML report `kaiten sim --report` writes (a result with its events),
 * written to path atomically; rq (may be NULL) gives the costs as stated;
 * title NULL: kaiten sim's. EIO, ENOMEM. */
kt_status kt_ffi_result_report(const kt_result *res, const kt_request *rq, const char *path,
                               const char *title, kt_error *err);

/* ---- comparisons ---------------------------------------------------------------- */

/* kt_request_compare into a new comparison (detail 2: every row keeps its
 * events, for a report). The comparison reads rq's costs: rq must outlive it. */
kt_status kt_ffi_compare(const kt_request *rq, int detail, kt_comparison **out, kt_error *err);
void kt_ffi_comparison_free(kt_comparison *cmp);
/* `kaiten compare`'s output: its JSON (json 1) or its table. */
kt_status kt_ffi_comparison_text(const kt_comparison *cmp, int json, char **out, kt_error *err);
/* Its rows: row i's result (NULL when it does not apply: *reason says
 * why), its name. */
int kt_ffi_comparison_rows(const kt_comparison *cmp);
const kt_result *kt_ffi_comparison_row(const kt_comparison *cmp, int i, const char **name,
                                       const char **reason);
/* `kaiten compare --report` (a comparison made with detail 2). */
kt_status kt_ffi_comparison_report(const kt_comparison *cmp, const char *path, const char *title,
                                   kt_error *err);

/* ---- the what-if page's call ------------------------------------------------------ */

/* kt_web_run (kaiten/web.h): the answer the page gets for args (and an
 * order), success or failure alike (its "ok" says which). ENOMEM. */
kt_status kt_ffi_web_run(const char *args, const char *order, char **out, kt_error *err);

/* ---- schedules ---------------------------------------------------------------- */

/* shape[0..4] = P, V, M, stages, placement (kt_placement). */
void kt_ffi_schedule_shape(const kt_schedule *s, int shape[5]);
const char *kt_ffi_schedule_name(const kt_schedule *s);
/* The schedule as text: kaiten's text form (notation -1) or PyTorch's CSV
 * (1 current, 2 legacy), lowered first for the IR lowered_ir (kt_torch_ir;
 * -1: compute only). ENOMEM, the lowering's errors. */
kt_status kt_ffi_schedule_write(const kt_schedule *s, int notation, int lowered_ir, char **out,
                                kt_error *err);

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
