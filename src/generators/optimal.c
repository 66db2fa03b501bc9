/* optimal: the fastest order of a small problem, proven, and the lower
 * bound on the makespan that every `sim` and `compare` prints.
 *
 * The search (optimal_search.c) starts from zb-auto's order as the one to
 * beat (zbv-auto's in v placement), so it only has to prove that nothing is
 * faster, or find what is. Whatever it returns runs through the simulator
 * once more: the makespan reported is the simulator's, and an order whose
 * simulated makespan differs from the search's is an internal error. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "generators/optimal_internal.h"
#include "generators/search/search.h"
#include "kaiten/sim.h"

#define DEFAULT_TIME_LIMIT 10.0
#define DEFAULT_MEMO_BYTES ((size_t)256 << 20)
/* zb-auto's bounded exact step (kt__optimal_improve): a node count, not a
 * time, so that the order is the same on every machine (at most about 0.3 s
 * here; on the corpus it takes most orders within 1% of the optimum). The
 * same count as the search behind the bound `sim` prints
 * (KT_BOUND_SEARCH_NODES), which then reuses this one's result. */
#define IMPROVE_NODES 20000
#define IMPROVE_MEMO_BYTES ((size_t)16 << 20)

/* Largest sizes the search accepts at all (its state counts in bytes, its
 * rank's ops in one machine bound); what it proves within a minute is far
 * smaller (KT_OPTIMAL_PROVES). */
#define MAX_P 8
#define MAX_M 64

static kt_status check_layout(const kt_gen_params *params, kt_placement placement,
                              kt_error *err) {
  int p = params->p, v = params->v ? params->v : 1, m = params->m;
  if (v != 1 && v != 2)
    return kt_fail(err, KT_EINVAL, "optimal: V=%d; the exact search takes V = 1 (loop placement) "
                   "or V = 2 (v placement)", v);
  if (v == 1 && placement != KT_PLACEMENT_LOOP)
    return kt_fail(err, KT_EINVAL, "optimal: V=1 runs in loop placement");
  if (placement != KT_PLACEMENT_LOOP && placement != KT_PLACEMENT_V)
    return kt_fail(err, KT_EINVAL, "optimal: placement %s; loop or v", kt_placement_name(placement));
  if (p < 1 || p > MAX_P || m < 1 || m > MAX_M)
    return kt_fail(err, KT_EINVAL,
                   "optimal: P=%d, M=%d is beyond the exact search (at most P=%d, M=%d; it proves "
                   "%s within a minute)", p, m, MAX_P, MAX_M, KT_OPTIMAL_PROVES);
  return KT_OK;
}

static kt_status layout(const kt_gen_params *params, kt_placement placement, kt_schedule *s,
                        kt_error *err) {
  kt_status st = kt_schedule_init(s, params->p, params->v ? params->v : 1, params->m, placement, err);
  if (!st) snprintf(s->name, sizeof s->name, "optimal");
  return st;
}

/* The bound of optimal_bound.c at the start (nothing run). */
static kt_status analytic_bound(const kt_schedule *layout, const kt_costs *c, double mem_limit,
                                int needs, double *lb, kt_error *err) {
  kt__opt_problem pb;
  kt__opt_state state;
  kt__opt_bound_ws ws;
  kt_costs plain = *c;
  plain.links = NULL; /* shared links only lengthen a hop: 0 is a hop's least */
  if (c->links) plain.comm = 0, plain.comm_bandwidth = 0;
  kt_status st = kt__opt_problem_init(&pb, layout, &plain, mem_limit, needs, err);
  if (st) return st;
  if (!(st = kt__opt_state_init(&state, &pb, err))) {
    if (!(st = kt__opt_bound_ws_init(&ws, &pb, err))) {
      *lb = kt__opt_bound(&pb, &state, NULL, &ws);
      if (isinf(*lb))
        st = kt_fail(err, KT_EINVAL, "memory limit %g: no order of P=%d, V=%d, M=%d fits under it",
                     pb.limit, pb.p, pb.v, pb.m);
      kt__opt_bound_ws_free(&ws);
    }
    kt__opt_state_free(&state);
  }
  kt__opt_problem_free(&pb);
  return st;
}

/* The last bounded exact search zb-auto ran on this thread (its step from
 * its own order), so that the bound `sim` prints right after on the same
 * problem is not searched for again: what the problem was, and the bound
 * it left. The problems are small (kt__optimal_reach: at most 8 stages). */
#define KEY_STAGES 8
typedef struct {
  int valid, p, v, m, S, complete, sync, tied;
  long nodes;
  double limit, lower;
  int srank[KEY_STAGES];
  double cost[9][KEY_STAGES];
  double step[3 + KEY_STAGES]; /* the step's end: tie, all-reduces, each rank's update */
} last_search;
static _Thread_local last_search last;

/* pb's key into k (k->valid 0: too large to keep). */
static void problem_key(const kt__opt_problem *pb, last_search *k) {
  memset(k, 0, sizeof *k);
  if (pb->S > KEY_STAGES) return;
  k->valid = 1, k->p = pb->p, k->v = pb->v, k->m = pb->m, k->S = pb->S, k->limit = pb->limit;
  const double *arrays[9] = {pb->tf, pb->tb, pb->tw, pb->act, pb->wg, pb->hop_f, pb->hop_i,
                             pb->so_f, pb->so_i};
  for (int s = 0; s < pb->S; s++) {
    k->srank[s] = pb->srank[s];
    for (int a = 0; a < 9; a++) k->cost[a][s] = arrays[a] ? arrays[a][s] : 0;
  }
  const kt_step_model *m = &pb->step;
  k->sync = (int)m->sync, k->tied = m->tied;
  k->step[0] = m->t_tie, k->step[1] = m->t_dp, k->step[2] = m->t_norm;
  for (int r = 0; r < pb->p && r < KEY_STAGES; r++) k->step[3 + r] = m->update[r];
}

/* The bound the last search left on pb's problem with at least `nodes`
 * nodes (or complete), or -1. */
static double searched_bound(const kt__opt_problem *pb, long nodes, int *complete) {
  last_search k;
  problem_key(pb, &k);
  if (!k.valid || !last.valid || (!last.complete && last.nodes < nodes)) return -1;
  k.complete = last.complete, k.nodes = last.nodes, k.lower = last.lower;
  if (memcmp(&k, &last, sizeof k)) return -1;
  *complete = last.complete;
  return last.lower;
}

/* Problems the exact search proves in well under a second. */
int kt__optimal_reach(const kt_schedule *s) {
  int v1 = s->v == 1 && s->placement == KT_PLACEMENT_LOOP;
  int v2 = s->v == 2 && s->placement == KT_PLACEMENT_V;
  return (v1 || v2) && kt_schedule_even(s) && s->p <= 4 && s->m <= 6;
}

kt_status kt__lower_bound_plain(const kt_schedule *layout, const kt_costs *c, double mem_limit,
                                double *lb, kt_error *err) {
  kt_costs unit;
  if (!c) kt_costs_default(&unit), c = &unit;
  kt_status st = kt_costs_check(c, kt_schedule_stages(layout), err);
  return st ? st : analytic_bound(layout, c, mem_limit, 0, lb, err);
}

kt_status kt_makespan_lower_bound(const kt_schedule *layout, const kt_costs *c, double mem_limit,
                                  long search_nodes, double *lb, int *exact, kt_error *err) {
  kt_costs unit;
  if (!c) kt_costs_default(&unit), c = &unit;
  if (exact) *exact = 0;
  kt_status st = kt_costs_check(c, kt_schedule_stages(layout), err);
  if (!st) st = analytic_bound(layout, c, mem_limit, 1, lb, err);
  if (st || !search_nodes || !kt__optimal_reach(layout) || c->links || c->send_overhead > 0)
    return st;
  kt__opt_problem pb;
  kt_error e2;
  if (!kt__opt_problem_init(&pb, layout, c, mem_limit, 0, &e2)) { /* the key only */
    int complete = 0;
    double known = searched_bound(&pb, search_nodes > 0 ? search_nodes : 0, &complete);
    kt__opt_problem_free(&pb);
    if (known >= 0) {
      if (known > *lb) *lb = known;
      if (exact) *exact = complete;
      return KT_OK;
    }
  }
  if (search_nodes < 0) return KT_OK; /* what a search left, or nothing */
  kt_gen_params params = {.p = layout->p, .v = layout->v, .m = layout->m, .costs = c,
                               .mem_limit = mem_limit};
  /* a bound, not an order, is wanted: the default search's order to beat
   * and a small table (the thorough start and 256 MiB took 35 ms of a
   * 40 ms `sim` at P=4, M=4) */
  kt_optimal_opts o = {.time_limit = 60, .max_nodes = search_nodes, .quick_start = 1,
                       .memo_bytes = IMPROVE_MEMO_BYTES};
  kt_optimal_result res;
  kt_schedule found;
  if (kt_gen_optimal(&params, layout->placement, &o, &found, &res, &e2)) return KT_OK;
  kt_schedule_free(&found);
  if (res.lower_bound > *lb) *lb = res.lower_bound;
  if (exact) *exact = res.proven;
  return KT_OK;
}

/* zb-auto's order on the same layout, costs and limit, as the one to beat
 * (its thorough search's, or its default's when quick): its makespan, or
 * INFINITY when zb-auto has none (its admission rule asks for more memory
 * than some orders need). */
/* The search's objective for a simulated order: the period its ranks'
 * starts and ends imply (kt_step_model_period). */
static double objective(const kt__opt_problem *pb, const kt_metrics *m) {
  return kt_step_model_bound(&pb->step, m, NULL);
}

static double starting_order(const kt__opt_problem *pb, const kt_gen_params *params, int quick,
                             kt_schedule *s) {
  kt_error e2;
  const kt__search_opts *o = quick ? &kt__search_default : &kt__search_thorough;
  if (kt__zb_auto_build(s, params->costs, params->mem_limit, o, 0, &e2)) return INFINITY;
  kt_metrics m;
  if (kt_simulate_metrics(s, params->costs, &m, &e2)) return INFINITY;
  double ms = objective(pb, &m);
  kt_metrics_free(&m);
  return ms;
}

/* Runs the order through the simulator: its period must be the search's
 * and every rank must stay within the limit. */
static kt_status verify(const kt__opt_problem *pb, const kt_schedule *s, const kt_costs *c,
                        double expect, double *makespan, kt_error *err) {
  kt_metrics m;
  kt_status st = kt_simulate_metrics(s, c, &m, err);
  if (st) return st;
  *makespan = objective(pb, &m);
  kt_metrics_free(&m);
  if (!isinf(expect) && fabs(*makespan - expect) > 1e-9 * (1 + expect))
    return kt_fail(err, KT_ERUNTIME, "optimal: internal check failed: the search timed its order "
                   "at %.12g, the simulator at %.12g", expect, *makespan);
  for (int r = 0; r < s->p; r++) {
    double mem = 0;
    for (size_t i = 0; i < s->ranks[r].n; i++) {
      const kt_action *a = &s->ranks[r].actions[i];
      mem += kt_action_memory(a->op, pb->act[a->stage], pb->wg[a->stage]);
      if (mem > pb->limit * (1 + 1e-12) + 1e-12)
        return kt_fail(err, KT_ERUNTIME, "optimal: internal check failed: rank %d holds %g, "
                       "over the limit %g", r, mem, pb->limit);
    }
  }
  return KT_OK;
}

static kt_status run_search(const kt_gen_params *params, const kt_optimal_opts *opts,
                            kt__opt_problem *pb, kt_schedule *out, kt_optimal_result *res,
                            kt_error *err) {
  kt_schedule found;
  kt_status st = kt_schedule_init_like(&found, out, out->m, err);
  if (st) return st;
  double upper = starting_order(pb, params, opts && opts->quick_start, out);
  kt__opt_search_opts so = {
      .time_limit = opts && opts->time_limit > 0 ? opts->time_limit : DEFAULT_TIME_LIMIT,
      .upper = upper,
      .memo_bytes = opts && opts->memo_bytes ? opts->memo_bytes : DEFAULT_MEMO_BYTES,
      .no_delays = opts ? opts->no_delays : 0,
      .max_nodes = opts ? opts->max_nodes : 0};
  kt__opt_search_result sr;
  st = kt__opt_search(pb, &so, &found, &sr, err);
  int better = !st && sr.makespan < INFINITY;
  if (better) { /* the search's order replaces zb-auto's */
    for (int r = 0; r < out->p; r++) {
      kt_rank_actions tmp = out->ranks[r];
      out->ranks[r] = found.ranks[r], found.ranks[r] = tmp;
    }
  }
  kt_schedule_free(&found);
  if (!st && !better && isinf(upper))
    st = kt_fail(err, KT_EINVAL, "optimal: no order of P=%d, V=%d, M=%d fits the memory limit %g",
                 pb->p, pb->v, pb->m, pb->limit);
  if (!st) st = verify(pb, out, params->costs, better ? sr.makespan : upper, &res->period, err);
  if (st) return st;
  res->lower_bound = fmin(sr.lower, res->period);
  res->proven = sr.complete;
  res->gap = res->lower_bound > 0 ? res->period / res->lower_bound - 1 : 0;
  if (res->proven) res->gap = 0, res->lower_bound = res->period;
  res->start_period = upper;
  res->nodes = sr.nodes;
  res->seconds = sr.seconds;
  return KT_OK;
}

kt_status kt__optimal_improve(kt_schedule *s, const kt_costs *c, double mem_limit,
                             double *makespan, double *lower, kt_error *err) {
  if (!kt__optimal_reach(s) || c->links || c->send_overhead > 0 ||
      !(*makespan > *lower * (1 + 1e-9)))
    return KT_OK;
  kt__opt_problem pb;
  kt_error e2; /* a problem the exact search does not take: zb-auto's order stands */
  if (kt__opt_problem_init(&pb, s, c, mem_limit, 1, &e2)) return KT_OK;
  int exact = 1; /* the search places I then W, never a full B */
  for (int x = 0; x < pb.S; x++) exact &= pb.wg[x] <= pb.act[x];
  kt_schedule found;
  kt_status st = exact ? kt_schedule_init_like(&found, s, s->m, err) : KT_OK;
  if (exact && !st) {
    kt__opt_search_opts so = {.time_limit = DEFAULT_TIME_LIMIT, .upper = *makespan,
                              .memo_bytes = IMPROVE_MEMO_BYTES, .max_nodes = IMPROVE_NODES};
    kt__opt_search_result sr;
    double ms;
    st = kt__opt_search(&pb, &so, &found, &sr, err);
    if (!st) { /* what the search proved, for the caller and the bound printed next */
      problem_key(&pb, &last);
      last.complete = sr.complete, last.nodes = IMPROVE_NODES, last.lower = sr.lower;
      if (sr.lower > *lower) *lower = sr.lower;
    }
    if (!st && sr.makespan < *makespan * (1 - 1e-9) &&
        !(st = verify(&pb, &found, c, sr.makespan, &ms, err))) {
      for (int r = 0; r < s->p; r++) {
        kt_rank_actions tmp = s->ranks[r];
        s->ranks[r] = found.ranks[r], found.ranks[r] = tmp;
      }
      *makespan = ms;
    }
    kt_schedule_free(&found);
  }
  kt__opt_problem_free(&pb);
  return st;
}

kt_status kt_gen_optimal(const kt_gen_params *params, kt_placement placement,
                         const kt_optimal_opts *opts, kt_schedule *out,
                         kt_optimal_result *res, kt_error *err) {
  memset(res, 0, sizeof *res);
  memset(out, 0, sizeof *out);
  kt_status st = check_layout(params, placement, err);
  if (st) return st;
  if ((st = layout(params, placement, out, err))) return st;
  kt_costs unit;
  const kt_costs *c = params->costs;
  if (!c) kt_costs_default(&unit), c = &unit;
  kt__opt_problem pb;
  if (isnan(params->mem_limit) || isinf(params->mem_limit))
    st = kt_fail(err, KT_EINVAL, "optimal: memory limit %g is not a finite number", params->mem_limit);
  if (!st) st = kt_costs_check(c, kt_schedule_stages(out), err);
  if (!st) st = kt__opt_problem_init(&pb, out, c, params->mem_limit, 1, err);
  for (int x = 0; !st && x < pb.S; x++)
    if (pb.wg[x] > pb.act[x]) { /* then a full B, which frees all at once, may win */
      st = kt_fail(err, KT_EINVAL, "optimal: stage %d keeps more for its W (mem-wgrad %g) than "
                   "its activation (mem-act %g); the exact search places I then W, never a full "
                   "B, and is exact only while mem-wgrad <= mem-act", x, pb.wg[x], pb.act[x]);
      kt__opt_problem_free(&pb);
    }
  if (!st) {
    kt_gen_params p2 = *params;
    p2.costs = c;
    st = run_search(&p2, opts, &pb, out, res, err);
    kt__opt_problem_free(&pb);
  }
  if (st) kt_schedule_free(out);
  return st;
}
