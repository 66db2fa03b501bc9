/* kaiten requests: one question, one answer, through every door.
 *
 * The question: this schedule (a generator's name, "optimal", or an order
 * the caller holds), at these sizes, under these costs and this memory
 * limit: build it, simulate it, say what it is. `kaiten sim`, `kaiten
 * compare` and `kaiten validate` (argv), the what-if page (key=value), the
 * ffi and the Python package all fill one kt_request and get one
 * kt_result, so the same request gives the same bytes whichever door it
 * came through.
 *
 * The vocabulary is the CLI's long flag names, without dashes (and "_" may
 * stand for "-"; a few long names have the Python API's aliases):
 *
 *   schedule=NAME        a generator (kt_gen_kind_list) or "optimal" (default 1f1b)
 *   schedules=A,B,...    compare: the rows (default: every generator)
 *   p=P (stages)  m=M (microbatches)  v=V (chunks; 0: the schedule's own)
 *   placement=loop|v     zb-auto in v placement is zbv-auto; optimal with 2 chunks
 *   tf= tb= tw= tu= mem-act= mem-wgrad= mem-transient=   X, or x0,x1,... per stage
 *   comm= comm-latency= comm-bytes= comm-bandwidth= send-overhead= op-overhead=
 *   overlap= t-norm= t-dp= tie= step-sync=overlap|barrier    as kaiten sim's flags
 *                        (comm, comm-latency, comm-bandwidth: X, or x0,x1,... per link)
 *   link-delay=x0,x1,... latency added to each link (a cost file's link_delay)
 *   per-stage=0|1        scalar costs are per stage, not one rank's share
 *   mem-limit=X | Fx | NGiB   mem-act units, a fraction of 1F1B's peak, bytes (train)
 *   effort=quick|default|thorough   (thorough=1, quick=1 too)
 *   time-limit=SECONDS   optimal's exact search (default 10)
 *   slow-rank=R:F[@S]    rank R's compute costs F times as much (F in 1..1000)
 *   slow-link=A-B:+D[@S] messages between ranks A and B take D (the costs' unit) longer
 *                        (kt_faults: the vocabulary of kaiten train's faults; a simulation
 *                        takes them as they are once begun, from step S)
 *   doc-lengths=lognormal:SIGMA:MIN:MAX   documents packed into the micro-batches
 *                        (kaiten/packing.h); each micro-batch's costs from its tokens
 *   seed=N               the documents' seed (default 1)
 *   packing=fifo|balanced   (default fifo)
 *   mb-tokens=N          a micro-batch's token budget (default 1024): tf, tb, tw and
 *                        mem-act are those of a micro-batch of one N-token document
 *   attn-share=X         the share of that time that grows with the square of a
 *                        document's length (default 0.25)
 *
 * kt_request_set reads one setting, kt_request_parse a blank-separated
 * list, kt_request_print writes one back (parse(print(r)) is r). An error
 * names the key as the caller wrote it ("-p", "stages", "mem_limit") with
 * its value.
 */
#ifndef KAITEN_REQUEST_H
#define KAITEN_REQUEST_H

#include "kaiten/costs.h"
#include "kaiten/generators.h"
#include "kaiten/packing.h"
#include "kaiten/schedule.h"
#include "kaiten/sim.h"
#include "kaiten/timeline.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- memory limits ------------------------------------------------------------ */

/* A memory limit as the user states it: in mem-act units per rank ("12"),
 * as a fraction of 1F1B's peak on the same model ("0.5x"), or in bytes
 * ("2GiB", "512MiB", "64KiB", "1e9B"; training only). */
typedef enum { KT_MEM_UNITS, KT_MEM_FRACTION, KT_MEM_BYTES } kt_mem_kind;
typedef struct {
  kt_mem_kind kind;
  double value;  /* units, the fraction, or bytes; 0 (units): none given */
  char text[32]; /* as written (a prefix), for messages; may be "" when set in code */
} kt_mem_limit;
/* 1 when a limit is given (value above 0). */
static inline int kt_mem_limit_given(const kt_mem_limit *ml) { return ml->value > 0; }
/* The limit as written, or as kt_mem_limit_parse reads it back ("0.5x",
 * "12", "2147483648B"). */
void kt_mem_limit_format(const kt_mem_limit *ml, char *buf, size_t n);

/* Parses text (name: how the caller's key is written, for the message).
 * allow_bytes 0 refuses bytes (a schedule's memory is in mem-act units).
 * EINVAL naming the value. The only reader of "0.5x" in kaiten. */
kt_status kt_mem_limit_parse(const char *name, const char *text, int allow_bytes, kt_mem_limit *out,
                             kt_error *err);
/* The limit in the schedule's memory units for kind at P, M, V under the
 * stage costs c: as given, or the fraction of 1F1B's peak for the layout,
 * the largest op scratch (mem-transient) included, less that scratch (what
 * the order may keep); -1 when none is given. Bytes are returned as they
 * are (costs whose memory is in bytes). */
double kt_mem_limit_units(const kt_mem_limit *ml, kt_gen_kind kind, int p, int m, int v,
                          const kt_costs *c);
/* The fraction of 1F1B's peak that units is (the inverse of the above). */
double kt_mem_limit_fraction(double units, kt_gen_kind kind, int p, int m, int v,
                             const kt_costs *c);

/* ---- the request ---------------------------------------------------------------- */

typedef enum { KT_EFFORT_DEFAULT, KT_EFFORT_QUICK, KT_EFFORT_THOROUGH } kt_effort;
/* "default", "quick", "thorough"; "?" out of range. */
const char *kt_effort_name(kt_effort e);

/* Which sizes were given (a held order must agree with them). */
enum { KT_REQ_GIVEN_P = 1, KT_REQ_GIVEN_M = 2, KT_REQ_GIVEN_V = 4 };

#define KT_REQUEST_NAME_LEN 64
typedef struct {
  char schedule[KT_REQUEST_NAME_LEN]; /* a generator's name or "optimal" */
  char *schedules;                    /* compare's rows, comma-separated; NULL: all */
  int p, m, v;                        /* v 0: the schedule's default */
  int placement;                      /* kt_placement asked for, or -1 */
  unsigned given;                     /* KT_REQ_GIVEN_* */
  char size_key[3][16];               /* how P, M, V were keyed ("-p", "stages"), for messages */
  char key_prefix[3];                 /* the dashes the caller's keys carry ("--": argv) */
  int per_stage;                      /* the cost basis: 1 stage, 0 rank */
  kt_costs costs;                     /* as given (kt_costs_default first) */
  kt_mem_limit mem_limit;
  kt_effort effort;
  double time_limit; /* optimal: seconds */
  kt_faults faults;  /* slow-rank, slow-link: at most one of each */
  /* An order to run instead of generating one (kt_request_set_order). */
  char *order;
  char order_name[KT_REQUEST_NAME_LEN]; /* its name when it has none ("" = "schedule") */
  char *order_origin;                   /* where it came from, for messages (a path), or NULL */
  kt_notation notation;                 /* how its B/BW read */
  kt_torch_ir ir;                       /* the IR a lowered order is checked against */
  /* Documents packed into the micro-batches (doc_lengths.max 0: none). */
  kt_doc_lengths doc_lengths;
  uint64_t seed;
  kt_packing packing;
  kt_token_model tokens; /* budget (mb-tokens) and attn (attn-share) */
  /* Not a setting: called before a generator's search over more than a
   * million actions starts (kt_gen_params.on_long_search), for progress. */
  void (*on_long_search)(const char *schedule, size_t actions, void *ctx);
  void *ctx;
} kt_request;

/* The defaults: schedule 1f1b, P=4, M=8, kt_costs_default, no limit,
 * default effort, time limit 10 s, overlap, no order. */
void kt_request_init(kt_request *rq);
void kt_request_free(kt_request *rq);
/* A deep copy (ENOMEM). */
kt_status kt_request_copy(kt_request *dst, const kt_request *src);

/* One setting. key: a name of the vocabulary, with or without leading
 * dashes, "_" or "-" alike; the message of an error names key as given.
 * EINVAL naming key and a prefix of value. */
kt_status kt_request_set(kt_request *rq, const char *key, const char *value, kt_error *err);
/* 1 when key names a setting of the vocabulary (as kt_request_set reads it). */
int kt_request_knows(const char *key);
/* Blank-separated key=value settings, applied in order. */
kt_status kt_request_parse(kt_request *rq, const char *text, kt_error *err);
/* Every setting that differs from kt_request_init's, as key=value
 * separated by blanks (an order is not written). */
void kt_request_print(const kt_request *rq, kt_buf *out);

/* An order to run: a schedule in kaiten text or CSV form (copied), read
 * in rq->notation; name: its name when its text gives none; origin: where
 * it came from (a path) for messages, or NULL. ENOMEM. */
kt_status kt_request_set_order(kt_request *rq, const char *text, const char *name,
                               const char *origin, kt_error *err);

/* The order in the file at path, read as every door reads one (kt_read_text:
 * at most KT_SCHEDULE_FILE_MAX bytes, lines of at most KT_SCHEDULE_LINE_MAX,
 * no NUL byte; a device or FIFO within the same limits), named name or,
 * when NULL, after the file (its name up to the first '.'). EINVAL (empty,
 * too large, a NUL byte), EIO, ENOMEM. */
kt_status kt_request_read_order(kt_request *rq, const char *path, const char *name, kt_error *err);

/* Checks the settings that depend on each other (comm and comm-bandwidth
 * both set, comm-bytes or comm-latency alone, a per-link list counting as
 * set; a link's bandwidth 0 in a list; all compute costs 0). */
kt_status kt_request_check(const kt_request *rq, kt_error *err);

/* ---- the result ------------------------------------------------------------------ */

/* What a simulation was run with and what is known about it beyond its
 * own numbers, for every renderer (kaiten/report.h). */
typedef struct {
  const char *schedule; /* name */
  int p, v, m;
  const char *placement;      /* may carry the table: "explicit (stage:rank 0:0 ...)" */
  const int32_t *stage_ranks; /* explicit placement: rank of each of the p*v stages, else NULL */
  const kt_costs *costs;      /* the stage costs the schedule ran with */
  const char *cost_basis;     /* "rank" (costs given for one rank's share) | "stage" | NULL */
  double closed_form;         /* < 0: none */
  const char *closed_form_expr;
  const char *closed_form_why; /* when there is none: why (one phrase), or NULL */
  size_t messages;
  /* A lower bound on the period of every order of this layout that stays
   * within lower_bound_memory per rank (kt_gen_bound_of, or the exact
   * search's); lower_bound_exact: it is the proven optimum.
   * has_lower_bound 0: none (lower_bound_why says why, or NULL). */
  int has_lower_bound, lower_bound_exact;
  double lower_bound, lower_bound_memory;
  const char *lower_bound_why;
  const char *lower_bound_from; /* "analytic", "search" (the exact search raised it), or NULL */
  /* The exact search that made schedule "optimal" (searched 0: none). */
  int searched, proven;
  double search_seconds, search_time_limit, search_start_period;
  long search_nodes;
  /* micro-batches of their own costs (0 when alike): the sequences the
   * search kept on every stage (kt_optimal_result) */
  int search_sequences, search_sequences_all, search_proven_in_sequences;
  double mem_limit; /* zb-auto, zbv-auto, optimal: the memory limit the search kept (mem-act
                       units); 0: none */
  /* the closed-form peak memory (mem-act units) where exact, else < 0 */
  double closed_form_peak_memory;
  const char *closed_form_peak_memory_expr;
  const char *stages; /* zb-auto, zbv-auto: the stages of its search that ran, or NULL */
  /* documents packed into the micro-batches (kaiten/packing.h), or NULL */
  const kt_pack *pack;
  const char *packing;
  long step_tokens;
} kt_sim_info;

/* The exact search's schedule "optimal" among kinds (not a kt_gen_kind). */
#define KT_SIM_OPTIMAL KT_SCHED_COUNT
#define KT_OPTIMAL_NAME "optimal"

/* How much of a simulation to keep. */
typedef enum {
  KT_RESULT_ORDER,   /* build the order only */
  KT_RESULT_METRICS, /* and simulate: metrics and period (nothing per action) */
  KT_RESULT_TIMELINE /* and keep every event */
} kt_result_detail;

typedef struct {
  kt_schedule order;   /* the compute order */
  kt_schedule program; /* a held order with its communication, run as written (ranks NULL: none) */
  int kind;            /* its generator, KT_SIM_OPTIMAL, or -1: an order held */
  kt_costs costs;      /* the stage costs it runs with */
  double mem_limit;    /* zb-auto, zbv-auto, optimal: the limit searched under; an order
                          held: the limit given, checked against; mem-act units, < 0: none
                          (a generator that keeps to none refuses one) */
  double time_limit;
  const char *cost_basis;
  kt_gen_outcome outcome;   /* what generating it proved */
  kt_optimal_result search; /* optimal: the exact search's figures */
  char read_info[1024];     /* an order held: what reading it inferred (one line), else "" */
  size_t comm_actions, p2p_actions; /* an order held: its communication actions */
  /* after kt_result_simulate */
  int simulated, has_timeline;
  kt_metrics met;
  kt_timeline tl;
  kt_gen_bound bound;
  kt_sim_info info; /* points into this result */
  /* with doc-lengths: the step's packing (costs holds its per-micro-batch
   * costs in its run order, stage_costs the stage costs they were made
   * from: a full micro-batch's); packed 0: none */
  int packed;
  kt_pack pack;
  kt_costs stage_costs;
  long step_tokens; /* the tokens the step's micro-batches hold */
  char placement_text[512];
} kt_result;

/* Builds the order the request asks for into res (zeroed first): the
 * generator's (stage costs from the cost basis and its V, the memory limit
 * in units), the exact search's, or the held order's (parsed in its
 * notation, validated with its lowered form, sizes checked against those
 * given). A limit no order meets is EMEMLIMIT naming the limit as written
 * and, for a fraction, the smallest fraction that works. res is freed on
 * failure. */
kt_status kt_request_build(const kt_request *rq, kt_result *res, kt_error *err);
/* Simulates a built result (detail METRICS or TIMELINE), its period under
 * the step sync, the lower bound its order is stated with, and fills
 * res->info. */
kt_status kt_result_simulate(kt_result *res, kt_result_detail detail, kt_error *err);
/* build, then simulate unless detail is ORDER. */
kt_status kt_request_run(const kt_request *rq, kt_result *res, kt_result_detail detail,
                         kt_error *err);
void kt_result_free(kt_result *res);
/* What runs: the program when there is one, else the order. */
const kt_schedule *kt_result_runs(const kt_result *res);

/* Packs len[0..n-1] as rq says, for a caller that holds its own data:
 * documents (given 0: into rq->m micro-batches of rq->tokens.budget tokens
 * by rq->packing) or the lengths of micro-batches already formed (given 1:
 * n of them; sq, optional, their documents' summed squared lengths).
 * Balanced orders them for rq's schedule (a generator), costs and memory
 * limit. out is freed with kt_pack_free. EINVAL naming the bad value. */
kt_status kt_request_pack(const kt_request *rq, const int *len, const double *sq, int n, int given,
                          kt_pack *out, kt_error *err);

/* ---- comparisons ---------------------------------------------------------------- */

typedef struct {
  char name[KT_REQUEST_NAME_LEN]; /* the row's schedule */
  int applies;                    /* 0: reason says why */
  char reason[KT_ERROR_LEN];
  kt_result result; /* when it applies */
} kt_compare_entry;

typedef struct {
  int p, m, v; /* the layout compared (v: the chunked loop kinds') */
  const char *cost_basis;
  const kt_costs *given; /* the request's costs as given */
  double peak_1f1b;      /* 1F1B's peak on the same model (<= 0: unknown) */
  kt_compare_entry *rows;
  int n;
} kt_comparison;

/* Every schedule of rq->schedules (all generators when NULL; "optimal"
 * adds the exact search's order with V = 1) side by side, and the held
 * order as one more row (its P and M then set the comparison's). v (0:
 * 2) is the V of interleaved and looped-bfs. detail: METRICS, or TIMELINE
 * to keep each row's events (a report). A row that does not apply says
 * why; the call fails only on a bad request (an unknown or repeated
 * schedule) or memory. cmp keeps a pointer to rq's costs. */
kt_status kt_request_compare(const kt_request *rq, kt_result_detail detail, kt_comparison *cmp,
                             kt_error *err);
void kt_comparison_free(kt_comparison *cmp);

#ifdef __cplusplus
}
#endif

#endif
