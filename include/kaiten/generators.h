/* kaiten schedule generators: gpipe, 1f1b, interleaved, looped-bfs, the
 * zero-bubble family and zb-auto, their closed forms, and dispatch by name.
 * They build kaiten/schedule.h's IR; zb-auto searches with the simulator,
 * so this layer sits above both the schedule IR and the simulator.
 * Generation is named kt_generate and kt_gen_*; the IR and its formats
 * (parse, write, validate, lower) stay kt_schedule_*.
 */
#ifndef KAITEN_GENERATORS_H
#define KAITEN_GENERATORS_H

#include "kaiten/costs.h"
#include "kaiten/schedule.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  KT_SCHED_GPIPE,
  KT_SCHED_1F1B,
  KT_SCHED_INTERLEAVED,
  KT_SCHED_LOOPED_BFS,
  KT_SCHED_ZB_H1,
  KT_SCHED_ZB_H2,
  KT_SCHED_ZBV,
  KT_SCHED_DUALPIPEV,
  KT_SCHED_ZB_AUTO,
  KT_SCHED_ZBV_AUTO,
  KT_SCHED_INTERLEAVED_ZB,
  KT_SCHED_V_HALF,
  KT_SCHED_V_MIN,
  KT_SCHED_COUNT
} kt_gen_kind;

const char *kt_gen_kind_name(kt_gen_kind k);
/* Accepts names and aliases ("interleaved-1f1b"). -1 when unknown. */
int kt_gen_kind_from_name(const char *name);
/* Comma-separated list of all names, for help and error messages. */
const char *kt_gen_kind_list(void);
/* Chunks per rank a schedule uses when the user gives none (1 or 2). */
int kt_gen_default_chunks(kt_gen_kind k);
/* Where a schedule puts its stages: loop (gpipe … interleaved-zb, zb-auto)
 * or v (zbv, dualpipev, zbv-auto, v-half, v-min; always V = 2). */
kt_placement kt_gen_kind_placement(kt_gen_kind k);
/* Closed-form bubble ratio under uniform per-stage costs and T_comm = 0, or a
 * negative value when the schedule has none for these sizes (zb-h1 needs
 * M >= P; zb-h2, zbv, dualpipev M >= 2P); expr (if non-NULL) receives the
 * formula as text, NULL when there is none. docs/schedules.md derives them. */
double kt_gen_closed_form_bubble(kt_gen_kind k, int p, int v, int m, double tf, double tb,
                                 double tw, const char **expr);
/* Why a schedule has no closed-form bubble at these sizes (one phrase, for
 * "closed form -: ..."), or NULL when it has one. Every form also needs
 * uniform costs and T_comm = 0. */
const char *kt_gen_closed_form_why_not(kt_gen_kind k, int p, int v, int m);
/* Closed-form peak memory (the largest over the ranks, in mem_act units)
 * under uniform per-stage M_B = mem_act and M_W = mem_wgrad, or a negative
 * value when there is none (interleaved with M not a multiple of P, the
 * zero-bubble schedules below their M bound or with M_W > M_B, zb-auto). */
double kt_gen_closed_form_peak_memory(kt_gen_kind k, int p, int v, int m, double mem_act,
                                      double mem_wgrad, const char **expr);

/* A schedule's closed forms as they apply to one simulation of it: the
 * bubble ratio and the peak memory (in mem_act units) where the forms are
 * exact for s under c, else -1 with why saying why (one phrase). */
typedef struct {
  double bubble;
  const char *bubble_expr, *why;
  double peak_memory;
  const char *peak_memory_expr;
} kt_closed_forms;

/* The forms of kind for s (its P, V, M) under the stage costs c, as every
 * report states them: the bubble's needs uniform T_F, T_B, T_W, no
 * communication and no send or op overhead; the memory's uniform M_B and
 * M_W. simulated_bubble (< 0: unknown) is the simulation's: a zbv order the
 * generator tuned to unequal costs beats its fixed order's form, and then
 * neither form is the schedule's. kind < 0 (a schedule file): none. */
void kt_gen_closed_forms(int kind, const kt_schedule *s, const kt_costs *c, double simulated_bubble,
                         kt_closed_forms *out);

/* What generating a schedule found out beyond its order
 * (kt_gen_params.outcome): zb-auto's and zbv-auto's stages, and the lower
 * bound their search proved. */
typedef struct {
  double lower_bound; /* on the period of any order within the memory limit (0: none) */
  int proven;         /* the exact step finished: lower_bound is the optimum */
  long nodes;         /* the exact step's nodes (0: it did not run) */
  char stages[96];    /* the stages that ran, in order ("bound,quick,search,exact") */
} kt_gen_outcome;

typedef struct {
  int p, v, m; /* v = 0: the schedule's default chunk count */
  /* zb-auto, zbv-auto, v-half, v-min: the cost model to optimise against
   * (NULL = unit costs); zb-auto and zbv-auto: the memory limit per rank in
   * the units of mem_act (<= 0: kt_gen_mem_limit's default). */
  const kt_costs *costs;
  double mem_limit;
  /* zb-auto, zbv-auto: 1 = the quick search (the round-based orders, the
   * handcrafted ones and one list-scheduler order, no refinement), for
   * callers that generate many schedules (the planner). */
  int quick;
  /* zb-auto, zbv-auto: 1 = the thorough search (every rule combination of
   * the list scheduler, refinement along the critical path and a random walk
   * past its plateaus): on some problems a faster order than the default
   * search's, at 10-1000x its time. Ignored when quick is set. */
  int thorough;
  /* Called once before a search over whole orders of more than 1,000,000
   * actions starts (the tuning to the costs of v-half, v-min, zbv, zb-h1
   * and zb-h2 takes seconds per million actions) with the schedule's name
   * and its actions, for callers that show progress; NULL: not called. */
  void (*on_long_search)(const char *schedule, size_t actions, void *ctx);
  void *ctx;
  /* Optional: receives what the generation found out (zeroed first). */
  kt_gen_outcome *outcome;
} kt_gen_params;

/* The rule every caller that takes a memory limit from a user applies
 * (the request, kaiten/request.h, for sim, compare, the page, the ffi and
 * Python; train): KT_OK for a finite mem_limit <= 0 (none:
 * the default) and for a limit > 0 given to zb-auto or zbv-auto, the kinds
 * that keep to one; EINVAL naming kind otherwise (its order sets its
 * memory). kt_generate itself only refuses a limit that is not finite
 * (the planner hands its budget to every kind). */
kt_status kt_gen_check_mem_limit(kt_gen_kind kind, double mem_limit, kt_error *err);

/* The memory limit zb-auto and zbv-auto keep every rank under:
 * params->mem_limit, or when that is <= 0, P*V (V = params->v, at least 1)
 * times the largest max(mem_act, mem_wgrad) over the P*V stages: 1F1B's
 * activation memory of the same model (P*M_B with one chunk per rank). */
double kt_gen_mem_limit(const kt_gen_params *params);

/* 1F1B's peak activation memory on the same model, in the units of the
 * costs' mem_act: min(P, M) micro-batches of the largest rank's activation
 * (the sum of M_B over its chunks in kind's placement, with params->v or
 * kind's default V chunks). A memory limit of "0.5x" is half of it. */
double kt_gen_1f1b_peak(kt_gen_kind kind, const kt_gen_params *params);

/* The smallest memory limit zb-auto and zbv-auto (kind) can keep to on
 * params' layout (P, V, M) and costs, in the units of mem_act: the rank
 * that needs most holds one micro-batch's max(M_B, M_W) of its first chunk
 * and, with V >= 2, room for a later chunk's. Below it no order of theirs
 * exists; at it or above they always find one. -1 for another kind, a bad
 * layout or no memory. */
double kt_gen_min_mem_limit(kt_gen_kind kind, const kt_gen_params *params);

/* The simulator's timing of s without a timeline, for callers that
 * evaluate many schedules: *period the step in steady state under c's step
 * sync and step-end costs (kaiten/sim.h), *busy the total of the action
 * times; exactly kt_simulate_metrics' figures (tests/test_schedule_span.c
 * checks it on random orders). A fast
 * path (the generators' search evaluation, several times quicker) runs
 * when it applies: compute actions only, no overlapped pairs, no links, no
 * send overhead, no per-action times; anything else, and a deadlock
 * (reported as the simulator reports it), goes through
 * kt_simulate_metrics. EDEADLOCK, EINVALID_SCHEDULE, ENOMEM. */
kt_status kt_gen_period(const kt_schedule *s, const kt_costs *c, double *period, double *busy,
                        kt_error *err);

/* Builds the named schedule. v-half and v-min with costs NULL are the
 * cost-oblivious constructions; with costs, the fastest order found within
 * the construction's memory. EINVAL with a one-line reason when the
 * parameters are impossible for it (e.g. interleaved with M < P). */
kt_status kt_generate(kt_gen_kind kind, const kt_gen_params *params, kt_schedule *out,
                      kt_error *err);

/* The lower bound an order is stated with (every sim, compare and page):
 * the analytic bound on the period of every order of s's layout within
 * limit per rank (the memory its order was searched under; <= 0: s's own
 * peak), under the stage costs c, raised to what s's generation proved
 * (outcome, may be NULL: zb-auto's exact step); exact: the proven optimum
 * (the generation proved it, or s's period meets it; period NAN: not known
 * yet, kt_gen_bound_meets adds it). No search runs here. */
typedef struct {
  int has;              /* 0: none, why says why */
  double value, memory; /* the bound, and the memory per rank it holds within */
  int exact;
  const char *from; /* "analytic", or "search" (raised by a search's proof) */
  const char *why;
} kt_gen_bound;
void kt_gen_bound_of(const kt_schedule *s, const kt_costs *c, double limit, double period,
                     const kt_gen_outcome *outcome, kt_gen_bound *out);
/* A bound the order's period meets is its optimum: b made exact when
 * period is within 1e-9 of it (relative). */
void kt_gen_bound_meets(kt_gen_bound *b, double period);

/* ---- optimal: the fastest order of a small problem, proven -------------- */

/* What the exact search proves within a minute on 2 cores (the corpus of
 * bench/optimal_corpus.sh, docs/schedules.md). */
#define KT_OPTIMAL_PROVES "P <= 4 and M <= 6, V = 1 or 2 (215 of the corpus's 216 problems)"

/* An order within this fraction above the lower bound is near-optimal:
 * zb-auto's default keeps such an order of its quick search on small
 * problems without searching further, and `sim` prints the bound of an
 * order this close without raising it by the exact search. */
#define KT_NEAR_OPTIMAL 0.01

typedef struct {
  double time_limit; /* seconds (<= 0: 10) */
  size_t memo_bytes; /* the table of visited states (0: 256 MiB) */
  int no_delays;     /* 1: every rank starts as soon as its input arrives (a smaller search) */
  long max_nodes;    /* > 0: the search also stops after this many nodes (deterministic) */
  int quick_start;   /* 1: set out from zb-auto's default order, not its thorough search's */
} kt_optimal_opts;

typedef struct {
  double
      period; /* of the order returned (what the search minimises: kt_step_model_period of its simulation) */
  double lower_bound;  /* no order is faster (= period when proven) */
  int proven;          /* 1: the search finished: the order is optimal */
  double gap;          /* period / lower_bound - 1 (0 when proven) */
  double start_period; /* zb-auto's (zbv-auto's), the order the search set out to beat */
  long nodes;
  double seconds;
  /* Micro-batches of their own costs (all 0 when alike): the search keeps
   * one micro-batch sequence on every stage (docs/schedules.md). sequences:
   * how many it searched; sequences_all: 1 when those were every distinct
   * sequence (M <= 6), 0 when only the given one; proven_in_sequences: 1
   * when it finished each (no order that keeps one of them on every stage
   * is faster). proven then means more: the order meets the lower bound on
   * every order, lower_bound being that bound (kt_gen_lower_bound's). */
  int sequences, sequences_all, proven_in_sequences;
} kt_optimal_result;

/* The fastest order of params->p ranks, params->m micro-batches and
 * params->v (1: loop placement, 2: the given placement, loop or v) chunks
 * per rank, under params->costs (stage costs; NULL: unit) and
 * params->mem_limit (as zb-auto reads it), searched exactly within
 * opts->time_limit: an order of F, I and W (a full B never helps while
 * M_W <= M_B). Above its reach (P > 8 or M > 64), EINVAL naming what it
 * proves. When time runs out, the best order found with proven = 0 and the
 * gap to the lower bound. EINVAL when no order fits the memory limit, the
 * costs have links, or a stage's M_W exceeds its M_B (a full B could then
 * beat I then W), ENOMEM. */
kt_status kt_gen_optimal(const kt_gen_params *params, kt_placement placement,
                         const kt_optimal_opts *opts, kt_schedule *out, kt_optimal_result *res,
                         kt_error *err);

/* A lower bound on the period (kaiten/sim.h, under c's step sync and step-end
 * costs) of every order of layout's ranks, stages
 * and micro-batches (its actions are not read) under the stage costs c
 * (NULL: unit) whose ranks stay within mem_limit (as zb-auto reads it; <= 0:
 * its default): per rank, the single-machine bound of the ops it runs,
 * released by the dependency chains, by what the memory limit makes run
 * first and by the rank's own machine, each with the least time its rank
 * still needs after it (docs/schedules.md, "Lower bound"). O(P V M log M)
 * above small sizes. Links and send overhead only lengthen an order and
 * are left out. search_nodes > 0: on problems the exact search proves
 * quickly (P <= 4, M <= 6, V = 1, or V = 2 in v placement), also that
 * search, up to that many nodes (the same answer on every machine; about
 * 10^5 a second); *exact (may be NULL) is then 1 when the bound is the
 * proven optimum. EINVAL when no order fits the limit, ENOMEM. */
kt_status kt_gen_lower_bound(const kt_schedule *layout, const kt_costs *c, double mem_limit,
                             long search_nodes, double *lb, int *exact, kt_error *err);

#ifdef __cplusplus
}
#endif

#endif
