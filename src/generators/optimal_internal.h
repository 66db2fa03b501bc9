/* Internal: the exact search for the fastest order (optimal*.c) and the
 * lower bound on the makespan every `sim` and `compare` prints.
 *
 * The model. Micro-batches are alike (costs are per stage), so an order is
 * described by slots: the k-th F, I and W of each stage. In slot order the
 * k-th F of stage s takes the k-th F result of stage s-1, the k-th I of
 * stage s the k-th I result of stage s+1 (the k-th F result on the last
 * stage) and the k-th W of stage s the k-th I result of its own stage.
 * Relabelling the micro-batches of any order this way never makes an action
 * start later (the k-th input to arrive is never later than the input of
 * the k-th action), and memory depends only on the op types a rank runs.
 * One exception: the makespan counts each rank from its first action, so a
 * rank that starts later can have a shorter span. The model therefore lets
 * each rank's first forward wait for the k-th result of the stage before it
 * (k chosen by the search): the order that realises it runs that
 * micro-batch first on the rank (kt__opt_labels). Exhaustive enumeration of
 * every order on small problems agrees with this model (tests/test_optimal.c).
 */
#ifndef KAITEN_GENERATORS_OPTIMAL_INTERNAL_H
#define KAITEN_GENERATORS_OPTIMAL_INTERNAL_H

#include <stdint.h>

#include "generators/internal.h"
#include "kaiten/sim.h"

enum { KT__OPT_F, KT__OPT_I, KT__OPT_W, KT__OPT_TYPES };

/* The problem: a layout with its stage costs, flattened (optimal_problem.c). */
typedef struct {
  int p, v, m, S;
  int *srank;                      /* stage -> rank */
  int *schunk;                     /* stage -> its chunk on its rank */
  int *rstage;                     /* rank * v + chunk -> stage (-1: none) */
  int *first;                      /* rank -> its chunk-0 stage, where its first action runs */
  double *tf, *tb, *tw, *act, *wg; /* per stage */
  /* per stage: the hop its F result takes to stage s+1 (comm when that is
   * on another rank, else 0) and its I result to stage s-1 */
  double *hop_f, *hop_i;
  /* per stage: what sending that result holds the rank (send overhead) */
  double *so_f, *so_i;
  /* per stage and op type: the least time from the op's end until the last
   * action its rank must still run because of it ends (0: none) */
  double *tail[KT__OPT_TYPES];
  double limit; /* memory per rank: prefix sums of kt_action_memory stay under it */
  /* What must run on a rank before each of its ops (optimal_needs.c), for
   * problems small enough (NULL otherwise): for op (chunk c, type t, slot
   * j) of rank r, at need + (((r * v + c) * 3 + t) * m + j) * nk, the
   * count of each kind c' * 3 + t' of the rank that precedes it. */
  int nk, *need;
  int infeasible; /* 1: some op can never fit under the limit */
  /* Micro-batches of their own costs (kt__opt_problem_sequence): every
   * stage runs its F's, I's and W's each in one sequence, slot j being
   * micro-batch seq[j]; per stage * m + slot, each slot's durations and
   * memory. The per-stage arrays then hold each stage's least (the bound's
   * costs: shorter ops and smaller activations only let an order end
   * sooner). NULL: micro-batches alike. */
  int *seq;
  double *slot_t[KT__OPT_TYPES], *slot_act, *slot_wg;
  /* The objective: the period under the costs' step sync and step-end
   * costs (kt_step_model_period of the ranks' starts and ends) */
  kt_step_model step;
} kt__opt_problem;

/* Fills pb->need (sizes permitting; else leaves it NULL). ENOMEM. */
kt_status kt__opt_needs_init(kt__opt_problem *pb, kt_error *err);
static inline const int *kt__opt_need(const kt__opt_problem *pb, int r, int c, int t, int j) {
  return pb->need +
         ((((size_t)r * (size_t)pb->v + (size_t)c) * KT__OPT_TYPES + (size_t)t) * (size_t)pb->m +
          (size_t)j) *
             (size_t)pb->nk;
}

/* layout of s (p, v, m, placement), stage costs c (NULL: unit), limit <= 0:
 * kt_gen_mem_limit's default; needs: the predecessor table too (sizes
 * permitting). EINVAL for links (the search has no model of shared links),
 * ENOMEM. */
kt_status kt__opt_problem_init(kt__opt_problem *pb, const kt_schedule *s, const kt_costs *c,
                               double limit, int needs, kt_error *err);
void kt__opt_problem_free(kt__opt_problem *pb);
static inline double kt__opt_dur(const kt__opt_problem *pb, int type, int s) {
  return type == KT__OPT_F ? pb->tf[s] : type == KT__OPT_I ? pb->tb[s] : pb->tw[s];
}
static inline double kt__opt_mem(const kt__opt_problem *pb, int type, int s) {
  return type == KT__OPT_F ? pb->act[s] : type == KT__OPT_I ? pb->wg[s] - pb->act[s] : -pb->wg[s];
}

/* Slot j's duration and memory change on stage s: its micro-batch's own
 * under a sequence, else the stage's. */
static inline double kt__opt_sdur(const kt__opt_problem *pb, int type, int s, int j) {
  return pb->seq ? pb->slot_t[type][(size_t)s * (size_t)pb->m + (size_t)j]
                 : kt__opt_dur(pb, type, s);
}
static inline double kt__opt_smem(const kt__opt_problem *pb, int type, int s, int j) {
  if (!pb->seq) return kt__opt_mem(pb, type, s);
  size_t at = (size_t)s * (size_t)pb->m + (size_t)j;
  double a = pb->slot_act[at], w = pb->slot_wg[at];
  return type == KT__OPT_F ? a : type == KT__OPT_I ? w - a : -w;
}
/* Sets the sequence (seq: m micro-batches) and fills the slot arrays from
 * c's per-micro-batch costs (pb built on kt_costs_least of c). ENOMEM. */
kt_status kt__opt_problem_sequence(kt__opt_problem *pb, const kt_costs *c, const int *seq,
                                   kt_error *err);

/* A partial order in slot form: how many of each op each stage has run,
 * when they ended, and each rank's clock. */
typedef struct {
  int *n[KT__OPT_TYPES];                    /* per stage */
  double *end_f, *end_i;                    /* per stage * m + slot */
  double *free_at, *start, *last_end, *mem; /* per rank */
  uint8_t *started;                         /* per rank */
} kt__opt_state;

kt_status kt__opt_state_init(kt__opt_state *st, const kt__opt_problem *pb, kt_error *err);
void kt__opt_state_free(kt__opt_state *st);
/* Back to nothing run (rank 0 starts at 0). */
void kt__opt_state_reset(kt__opt_state *st, const kt__opt_problem *pb);

/* ---- the bound (optimal_bound.c) ------------------------------------------- */

#define KT__OPT_HX(ws, pb, t, s, j) \
  (((size_t)(j) & (ws)->slot_mask[t]) * (size_t)(pb)->S + (size_t)(s))
typedef struct {
  double *head[KT__OPT_TYPES]; /* per slot * S + stage (KT__OPT_HX): a sweep's slot at once */
  /* Per kind of op, SIZE_MAX: every slot's heads are kept. Else a window:
   * the last slot_mask + 1 slots (a power of two), enough for the memory
   * rules of a sweep from the empty state (kt__opt_root_window) that read
   * I's and W's heads; F's (and W's, when no W frees memory) only the slot
   * before. The heads of rank keep_rank's stages, which its single-machine
   * bound reads, kept aside (per chunk * m + slot); window_short: a rule
   * reached past the window (the bound is to be computed again on every
   * slot). */
  size_t slot_mask[KT__OPT_TYPES];
  int keep_rank, window_short;
  double *keep[KT__OPT_TYPES];
  double *eff_free; /* per rank */
  /* one rank's ops for the single-machine bound, and its heap */
  struct kt__opt_job {
    double head, dur, tail;
  } * jobs;
  double *heap_key;
  int *heap_job;
} kt__opt_bound_ws;

kt_status kt__opt_bound_ws_init(kt__opt_bound_ws *ws, const kt__opt_problem *pb, kt_error *err);
/* The least max(end + tail) of ws's first n jobs on one machine,
 * preemption allowed (optimal_jackson.c; sorted: by head already). Sorts
 * ws->jobs and consumes their durations. */
double kt__opt_jackson(kt__opt_bound_ws *ws, int n, int sorted);
/* A workspace for one kt__opt_bound from the empty state that keeps the
 * heads of the last `slots` slots (kt__opt_root_window) and every head of
 * rank keep_rank's stages. */
kt_status kt__opt_bound_ws_window(kt__opt_bound_ws *ws, const kt__opt_problem *pb, size_t slots,
                                  int keep_rank, kt_error *err);
void kt__opt_bound_ws_free(kt__opt_bound_ws *ws);
/* Slots a window needs for kt__opt_bound from the empty state of pb (a
 * power of two below M: the farthest a memory rule reaches back, and the
 * slot before), or 0 when it must keep every slot (small problems, a
 * barrier, the predecessor table, micro-batch sequences). */
size_t kt__opt_root_window(const kt__opt_problem *pb);
/* Tests: 0 as above; -1 every slot; k > 0 (a power of two) a window of k
 * slots wherever one may be used, however far the rules reach. */
extern int kt__opt_window_test;
/* Tests: 1 makes every sweep from the empty state take the general path
 * (the one a state with ops run takes), not its row-by-row copy. */
extern int kt__opt_sweep_general;

/* A lower bound on the makespan of every completion of st: for each rank
 * the single-machine bound (preemptive, releases from the dependency
 * chains and the memory limit, tails to the rank's last action) of what
 * it still runs, less its start; a rank that has not started counts from
 * its own first forward. ready_at (per rank, may be NULL): a time before
 * which the rank's next action cannot start. INFINITY when the memory
 * limit can never be met. */
double kt__opt_bound(const kt__opt_problem *pb, const kt__opt_state *st, const double *ready_at,
                     kt__opt_bound_ws *ws);

/* The heads the last kt__opt_bound computed for the started ranks' ops:
 * lower bounds on when each op can start (a workspace of every slot). */
static inline double kt__opt_head(const kt__opt_bound_ws *ws, const kt__opt_problem *pb, int type,
                                  int s, int slot) {
  return ws->head[type][KT__OPT_HX(ws, pb, type, s, slot)];
}

/* ---- the search (optimal_search.c, optimal_memo.c) --------------------------- */

typedef struct kt__opt_memo kt__opt_memo;
/* A table of visited states (bytes: its memory cap). NULL on ENOMEM. */
kt__opt_memo *kt__opt_memo_new(size_t bytes);
void kt__opt_memo_free(kt__opt_memo *mm);
/* 1 when a stored state with the same key has every value <= vals (it is
 * at least as good), else stores vals (when there is room) and returns 0. */
int kt__opt_memo_seen(kt__opt_memo *mm, const uint8_t *key, size_t key_len, const double *vals,
                      size_t n_vals);
size_t kt__opt_memo_states(const kt__opt_memo *mm);

typedef struct {
  double time_limit; /* seconds */
  double upper;      /* makespan of a known order (INFINITY: none) */
  size_t memo_bytes;
  int no_delays;  /* 1: every rank starts as soon as it can (plain slot order) */
  long max_nodes; /* > 0: stop after this many nodes too */
} kt__opt_search_opts;

typedef struct {
  double makespan; /* of the best order found (INFINITY: none better than upper) */
  double lower;    /* proven: no order of the model is faster */
  int complete;    /* 1: the search ran to the end (lower = the optimum) */
  long nodes;
  double seconds;
  size_t memo_states;
} kt__opt_search_result;

/* Searches pb's orders for one faster than o->upper. When it finds one it
 * is written into out (out has pb's layout; its lists are replaced). */
kt_status kt__opt_search(const kt__opt_problem *pb, const kt__opt_search_opts *o, kt_schedule *out,
                         kt__opt_search_result *res, kt_error *err);

/* Micro-batches of their own costs: what the search over sequences did. */
typedef struct {
  int searched; /* sequences searched to the end or until time ran out */
  int distinct; /* distinct sequences there are (micro-batches of equal costs alike) */
  int all;      /* 1: every distinct sequence was tried (else the given one only) */
} kt__opt_seq_info;

/* kt__opt_search over micro-batch sequences (pb from kt_costs_least of c,
 * c's micro-batches differing; optimal_mb.c): the given one (0, 1, ...,
 * m-1), then every other distinct one where m <= KT__OPT_SEQ_ALL_M;
 * o->time_limit and o->max_nodes for all of them together.
 * res->complete: each sequence was searched to its end (then no order that
 * keeps one of them on every stage is faster than res->makespan, or
 * o->upper when that is INFINITY). */
#define KT__OPT_SEQ_ALL_M 6
kt_status kt__opt_search_sequences(kt__opt_problem *pb, const kt_costs *c,
                                   const kt__opt_search_opts *o, kt_schedule *out,
                                   kt__opt_search_result *res, kt__opt_seq_info *info,
                                   kt_error *err);

/* The analytic lower bound on the period of every order of layout's ranks
 * (kt_gen_lower_bound without its search); needs: with the memory
 * predecessor table (tighter; on large problems the searches stop early
 * on the cheaper bound without it). EINVAL when no order fits the limit. */
kt_status kt__lower_bound(const kt_schedule *layout, const kt_costs *c, double mem_limit, int needs,
                          double *lb, kt_error *err);
/* Whether the exact search proves problems of s's layout in well under a
 * second (P <= 4, M <= 6, V = 1 loop or V = 2 v placement, even stages). */
int kt__optimal_reach(const kt_schedule *s);

/* ---- zb-auto's bounded exact step (exact_step.c) ---- */

/* Its nodes: a count, not a time, so that the order is the same on every
 * machine (at most about 0.3 s here; on the corpus it takes most orders
 * within 1% of the optimum), and its table of visited states. */
#define KT__EXACT_NODES 20000
#define KT__EXACT_MEMO_BYTES ((size_t)16 << 20)

typedef struct {
  double period;   /* in: the incumbent's; out: the order left in s */
  double lower;    /* in: a bound known; out: raised to what the search proved */
  int ran, proven; /* out: the search ran; it finished (lower is the optimum) */
  long nodes;
} kt__exact_outcome;

/* s (the incumbent, io->period under c) replaced by a faster order when a
 * bounded exact search from it finds one: only where the search proves in
 * well under a second (kt__optimal_reach, no links or send overhead,
 * mem-wgrad <= mem-act) and the incumbent is above io->lower. ENOMEM. */
kt_status kt__exact_step(kt_schedule *s, const kt_costs *c, double mem_limit, long nodes,
                         kt__exact_outcome *io, kt_error *err);
/* Runs an order the search returned through the simulator: its period
 * (the search's objective, kt_step_model_bound) must be expect (INFINITY:
 * unchecked) and every rank must stay within pb's limit. *period receives
 * it. ERUNTIME on a mismatch. */
kt_status kt__exact_verify(const kt__opt_problem *pb, const kt_schedule *s, const kt_costs *c,
                           double expect, double *period, kt_error *err);

#endif
