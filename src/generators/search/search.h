/* Internal: the pieces the searched schedules (zb-auto in every placement,
 * v-half, v-min) share: a flattened cost table, the one readiness rule, a
 * fast evaluation of an order, the memory-bounded list scheduler, the
 * round-based builder, and the critical-path refinement. */
#ifndef KAITEN_GENERATORS_SEARCH_H
#define KAITEN_GENERATORS_SEARCH_H

#include "kaiten/costs.h"
#include "kaiten/sim.h"
#include "generators/internal.h"

/* A layout (P, V, M, placement) and a cost model flattened per stage, and a
 * memory budget per rank. res = max(M_B, M_W): what an activation may hold
 * until its W (an I turns M_B into M_W). head[r] is the room a micro-batch's
 * first F on rank r must find beyond its own: with V = 2 room for one
 * later chunk's activation (left free), with V >= 3 the rest of its chunks
 * (reserved until they run). It is what makes memory-bounded list
 * scheduling deadlock-free with V >= 2. */
typedef struct {
  int p, v, m, S;
  int *srank, *schunk, *rstage; /* stage -> rank, stage -> chunk, rank*V + chunk -> stage */
  double *tf, *tb, *tw, *act, *wg, *res; /* per stage (with per-micro-batch costs: the
                                            stage's mean time and largest memory) */
  /* per (stage, mb) (KT__PAIR) when micro-batches have their own costs, else NULL */
  double *mtf, *mtb, *mtw, *mact, *mwg;
  double *head, *limit; /* per rank */
  double comm;          /* the uniform hop (kt_cost_comm) */
  double *hop; /* per stage x: the hop between stages x and x + 1 (0 on one rank; per link) */
  /* the objective: the period the ranks' starts and ends imply under the
   * costs' step sync and step-end costs (kt_step_model_period) */
  kt_step_model step;
} kt__search_problem;

/* Reads the layout of s (p, v, m, placement) and the costs (NULL = unit).
 * limit <= 0: P * max(res) on every rank. ENOMEM. */
kt_status kt__search_problem_init(kt__search_problem *pb, const kt_schedule *s, const kt_costs *c,
                                  double limit, kt_error *err);
void kt__search_problem_free(kt__search_problem *pb);
/* The smallest budget with which every rank can hold one micro-batch (and,
 * with V >= 2, the room for a later chunk): the admission rule needs it. */
double kt__search_min_limit(const kt__search_problem *pb, int *rank);

/* When one (stage, micro-batch) pair's ops ended; NAN = not yet. */
typedef struct {
  double f, i;
} kt__search_pair_end;

#define KT__PAIR(pb, stage, mb) ((size_t)(stage) * (size_t)(pb)->m + (size_t)(mb))

/* When the input of op (F or I; a W needs its own I) on (stage, mb) is
 * available under the executors' rule (kt_action_needs), or NAN while its
 * producer has not run; a hand-over between ranks adds T_comm. The search
 * never places a full B, so I's end stands for the BI result too. */
static inline double kt__search_input_ready(const kt__search_problem *pb,
                                            const kt__search_pair_end *end, int stage, kt_op op,
                                            int mb) {
  int from;
  kt_output need = kt_action_needs(op, stage, pb->S, &from);
  if (need == KT_OUT_NONE) return 0;
  const kt__search_pair_end *pe = &end[KT__PAIR(pb, from, mb)];
  double t = need == KT_OUT_F ? pe->f : pe->i;
  return from == stage ? t : t + pb->hop[from < stage ? from : stage]; /* W: its own I */
}

/* What op on (stage, mb) takes. */
static inline double kt__search_cost(const kt__search_problem *pb, int stage, kt_op op, int mb) {
  if (pb->mtf) {
    size_t x = KT__PAIR(pb, stage, mb);
    return op == KT_OP_F   ? pb->mtf[x]
           : op == KT_OP_I ? pb->mtb[x]
           : op == KT_OP_W ? pb->mtw[x]
                           : pb->mtb[x] + pb->mtw[x];
  }
  return op == KT_OP_F   ? pb->tf[stage]
         : op == KT_OP_I ? pb->tb[stage]
         : op == KT_OP_W ? pb->tw[stage]
                         : pb->tb[stage] + pb->tw[stage];
}

/* Makes room for 3*V*M actions on every rank (an F, an I and a W per pair),
 * so the builders append without checks. ENOMEM. */
kt_status kt__search_reserve(kt_schedule *s, kt_error *err);

/* ---- evaluation of an order --------------------------------------------- */

/* Scratch space for evaluating orders of one problem (reused across calls). */
typedef struct {
  kt__search_pair_end *end;
  double *start, *stop, *free_at; /* per rank: first start, last end, free time */
  size_t *pos;
  kt_rank_queue work; /* ranks whose next action may have become ready */
  double **at;        /* optional: per rank, the start time of each action (caller-sized) */
  double cutoff;      /* an evaluation stops once a rank's span exceeds it (INFINITY: never) */
} kt__search_eval;

kt_status kt__search_eval_init(kt__search_eval *ev, const kt__search_problem *pb, kt_error *err);
/* What rank r's start and end alone say about the period (never more than
 * it): its span and its step's end without a barrier, its end and the
 * step's end with one. The critical rank is the one with the most. */
static inline double kt__search_rank_cost(const kt__search_problem *pb, double start, double stop,
                                          int r) {
  const kt_step_model *m = &pb->step;
  if (m->sync == KT_STEP_BARRIER) return stop + m->t_dp + m->t_norm + m->max_update;
  return stop - start + m->t_dp + m->update[r];
}
void kt__search_eval_free(kt__search_eval *ev);
/* Simulates the order of s (F, I, W actions; a B counts as I then W) with
 * the simulator's semantics; the makespan, or -1 when it deadlocks, or
 * INFINITY when a rank's span passed ev->cutoff (the rest is not run). Per-rank
 * first start and last end are left in ev->start / ev->stop. */
double kt__search_evaluate(const kt__search_problem *pb, kt__search_eval *ev, const kt_schedule *s);
/* Moves a rank's action from `from` to `to` (those between shift by one). */
void kt__search_move(kt_action *a, size_t from, size_t to);
/* Whether rank r's memory prefix sums stay within its budget (with a
 * relative tolerance). */
int kt__search_rank_fits(const kt__search_problem *pb, const kt_rank_actions *ra, int r);
/* The highest memory prefix sum over the ranks into *peak; 1 when every
 * rank stays within its budget, else 0. */
int kt__search_fits(const kt__search_problem *pb, const kt_schedule *s, double *peak);

/* ---- builders --------------------------------------------------------------- */

/* Decision rules of the list scheduler (see search/list.c). */
typedef struct {
  int prio;  /* KT__PRIO_*: F or I first when both are ready */
  int wfill; /* KT__WFILL_*: when a W fills a gap */
  int cap;   /* KT__CAP_*: in-flight cap per rank */
  int depth; /* 1: among chunks, the later stage first (depth first); 0: the earlier */
  /* optional: every rank runs its F's and I's in this order (its W's are
   * ignored) and only the W's are placed by the rules above; loose: the
   * F's in their order and the I's in theirs, interleaved by the rules */
  const kt_schedule *follow;
  int loose;
} kt__search_rules;

enum { KT__PRIO_I_FIRST, KT__PRIO_F_FIRST, KT__PRIO_I_GUARD, KT__PRIO_COUNT };
enum { KT__WFILL_FIT, KT__WFILL_EAGER, KT__WFILL_LAZY, KT__WFILL_BALANCE, KT__WFILL_COUNT };
enum { KT__CAP_NONE, KT__CAP_1F1B, KT__CAP_ZBH2, KT__CAP_COUNT };

typedef struct kt__search_list kt__search_list; /* list scheduler state, reused across variants */

kt_status kt__search_list_new(const kt__search_problem *pb, kt__search_list **out, kt_error *err);
void kt__search_list_free(kt__search_list *ls);
/* Builds one order into s (its lists are emptied first); the makespan of the
 * order (from the builder's clock, which follows the simulator), or -1 with
 * err set when no rank can proceed (cannot happen above kt__search_min_limit). */
double kt__search_list_build(kt__search_list *ls, const kt__search_rules *rules, kt_schedule *s,
                             kt_error *err);

/* The round-based builder for one chunk per rank (search/rounds.c): warm-up
 * forwards from timing, then one forward and one backward per round with
 * W filling gaps. flags: KT__ROUND_*. Returns the makespan, or -1 when the
 * budget cannot hold the order (err set). */
enum {
  KT__ROUND_FILL_PAST = 1, /* warm-up: a forward may end after the first I could start */
  KT__ROUND_SKIP_F = 2,    /* a stage far ahead of the next one may skip its forward */
  KT__ROUND_GREEDY_W = 4,  /* fill a gap shorter than a W when the stage can afford it */
  KT__ROUND_FLAGS = 8
};
double kt__search_rounds_build(const kt__search_problem *pb, int flags, const int *depth_delta,
                               kt_schedule *s, kt_error *err);

/* The round-based builder for v placement, two chunks per rank
 * (search/v_rounds.c). flags: KT__VROUND_*. 0 with the order in s (to be
 * evaluated), -1 when the budget cannot hold it (err set). */
enum { KT__VROUND_FILL_I = 1, KT__VROUND_FILL_F = 2, KT__VROUND_FLAGS = 4 };
int kt__search_v_rounds_build(const kt__search_problem *pb, int flags, kt_schedule *s,
                              kt_error *err);

/* Critical-path refinement (search/refine.c): moves that let the rank with the
 * longest span start its critical actions earlier, each kept when the
 * evaluated makespan drops (ties: the sum of spans drops) and every budget
 * still holds. At most max_evals evaluations. Returns the new makespan. */
double kt__search_refine(const kt__search_problem *pb, kt__search_eval *ev, kt_schedule *s,
                         double makespan, long max_evals);

/* A random walk over orders that are no slower (search/walk.c): an action of
 * the critical rank or a neighbour moves a few slots, kept when every
 * budget holds and the makespan does not grow, so the walk crosses the
 * plateaus where the refinement's moves all tie. Deterministic (the seed
 * is a function of round); at most max_evals evaluations. Returns the new
 * makespan. */
double kt__search_walk(const kt__search_problem *pb, kt__search_eval *ev, kt_schedule *s,
                       double makespan, long max_evals, unsigned round);
/* Simulated annealing from the order of s (search/walk.c): `restarts` runs
 * of `evals` evaluations each, deterministic; the fastest order seen, when
 * faster, replaces s's lists. Returns the new makespan. */
double kt__search_anneal(const kt__search_problem *pb, kt__search_eval *ev, kt_schedule *s,
                         double makespan, long evals, int restarts);
/* A walk budget: 20,000 evaluations, fewer where that would simulate more
 * than `work` actions in all. */
long kt__search_walk_budget(const kt__search_problem *pb, double work);

/* ---- the search ------------------------------------------------------------ */

typedef struct {
  int lists;         /* the list scheduler's rule combinations compete */
  int rounds;        /* the round-based builder's (one chunk per rank) */
  int handcrafted;   /* zb-h1 and zb-h2, zbv, or interleaved-zb, when they fit */
  long refine_evals; /* refinement budget in evaluations; < 0: by problem size */
  int quick;         /* the list scheduler's core rules only, no W re-timing */
  int walk;          /* small problems: the winner walked past its plateaus (search/walk.c) */
  /* A lower bound on every order's makespan under pb (kt_gen_lower_bound;
   * 0: none): once a candidate meets it no order is faster, and the search
   * stops there. */
  double lower;
  int refine_one;   /* refine only the fastest candidate, not the KEEP fastest */
  double walk_work; /* the walk's budget in simulated actions (0: 2e6) */
  /* zb-auto: the quick search first, and its order kept, with no further
   * search and no exact step, when the bound proves it near-optimal (within
   * KT_NEAR_OPTIMAL of lower) */
  int near_first;
  /* zb-auto, small problems: after the exact step, simulated annealing
   * when the order is still more than KT__FAR above the best bound known */
  int anneal;
} kt__search_opts;

/* How far above the bound an order sends zb-auto's small problems to the
 * annealing stage (zb_auto.c). */
#define KT__FAR 0.03

/* The fastest order of the candidates above and extra[0..n_extra) that fits
 * every rank's budget, refined; its lists replace s's (s has pb's layout).
 * EINVAL when nothing fits, ENOMEM. */
kt_status kt__search_run(const kt__search_problem *pb, const kt__search_opts *o,
                         const kt_schedule *const *extra, int n_extra, kt_schedule *s,
                         kt_error *err);

/* zb-auto's quick, default and thorough efforts (zb_auto.c: what each runs). */
extern const kt__search_opts kt__search_quick, kt__search_default, kt__search_thorough;

/* zb-auto on the layout of s (costs NULL = unit costs; mem_limit <= 0: P*V
 * times max(mem-act, mem-wgrad), 1F1B's memory of the same model) with the
 * search options o; improve: the bounded exact step and the annealing on
 * small problems too. The winner's lists go to s; out (may be NULL)
 * receives the bound proved and the stages that ran. */
kt_status kt__zb_auto_build(kt_schedule *s, const struct kt_costs *costs, double mem_limit,
                            const kt__search_opts *o, int improve, kt_gen_outcome *out,
                            kt_error *err);

/* The constructed order in s tuned to params->costs (search/tune.c): the
 * search above with every rank's budget the construction's largest
 * per-rank peak and the construction as a candidate; unless params->quick,
 * then the random walk (kt__search_walk) and the refinement once more, on
 * problems of up to 30,000 actions. strict: the construction is kept
 * unless the result is strictly faster (ties in makespan keep it). */
kt_status kt__search_tune(kt_schedule *s, const kt_gen_params *params, int strict, kt_error *err);

#endif
