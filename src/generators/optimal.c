/* optimal: the fastest order of a small problem, proven, and the lower
 * bound on the period every `sim` and `compare` prints (the analytic one,
 * raised by a bounded exact search where it proves quickly).
 *
 * The search (optimal_search.c) starts from zb-auto's order as the one to
 * beat (zbv-auto's in v placement), so it only has to prove that nothing is
 * faster, or find what is. Whatever it returns runs through the simulator
 * once more (kt__exact_verify): the period reported is the simulator's, and
 * an order whose simulated period differs from the search's is an internal
 * error. zb-auto's own bounded exact step is exact_step.c's: this file
 * builds on zb-auto, never the other way.
 *
 * Micro-batches of their own costs: the search over micro-batch sequences
 * (optimal_mb.c) proves the optimum among orders that keep one sequence on
 * every stage; the order is called proven only when it meets the lower
 * bound on every order. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "generators/optimal_internal.h"
#include "generators/search/search.h"
#include "kaiten/sim.h"

#define DEFAULT_TIME_LIMIT 10.0
#define DEFAULT_MEMO_BYTES ((size_t)256 << 20)

/* Largest sizes the search accepts at all (its state counts in bytes, its
 * rank's ops in one machine bound); what it proves within a minute is far
 * smaller (KT_OPTIMAL_PROVES). */
#define MAX_P 8
#define MAX_M 64

static kt_status check_layout(const kt_gen_params *params, kt_placement placement, kt_error *err) {
  int p = params->p, v = params->v ? params->v : 1, m = params->m;
  if (v != 1 && v != 2)
    return kt_fail(err, KT_EINVAL,
                   "optimal: V=%d; the exact search takes V = 1 (loop placement) "
                   "or V = 2 (v placement)",
                   v);
  if (v == 1 && placement != KT_PLACEMENT_LOOP)
    return kt_fail(err, KT_EINVAL, "optimal: V=1 runs in loop placement");
  if (placement != KT_PLACEMENT_LOOP && placement != KT_PLACEMENT_V)
    return kt_fail(err, KT_EINVAL, "optimal: placement %s; loop or v",
                   kt_placement_name(placement));
  if (p < 1 || p > MAX_P || m < 1 || m > MAX_M)
    return kt_fail(err, KT_EINVAL,
                   "optimal: P=%d, M=%d is beyond the exact search (at most P=%d, M=%d; it proves "
                   "%s within a minute)",
                   p, m, MAX_P, MAX_M, KT_OPTIMAL_PROVES);
  return KT_OK;
}

static kt_status layout(const kt_gen_params *params, kt_placement placement, kt_schedule *s,
                        kt_error *err) {
  kt_status st =
      kt_schedule_init(s, params->p, params->v ? params->v : 1, params->m, placement, err);
  if (!st) snprintf(s->name, sizeof s->name, "optimal");
  return st;
}

kt_status kt_gen_lower_bound(const kt_schedule *layout, const kt_costs *c, double mem_limit,
                             long search_nodes, double *lb, int *exact, kt_error *err) {
  kt_costs unit;
  if (!c) kt_costs_default(&unit), c = &unit;
  if (exact) *exact = 0;
  kt_status st = kt_costs_check(c, kt_schedule_stages(layout), err);
  if (!st) st = kt__lower_bound(layout, c, mem_limit, 1, lb, err);
  if (st || search_nodes <= 0 || !kt__optimal_reach(layout) || c->links || c->send_overhead > 0 ||
      kt_costs_mb_differ(c))
    return st;
  kt_gen_params params = {
      .p = layout->p, .v = layout->v, .m = layout->m, .costs = c, .mem_limit = mem_limit};
  /* a bound, not an order, is wanted: the default search's order to beat
   * and a small table (the thorough start and 256 MiB took 35 ms of a
   * 40 ms `sim` at P=4, M=4) */
  kt_optimal_opts o = {.time_limit = 60,
                       .max_nodes = search_nodes,
                       .quick_start = 1,
                       .memo_bytes = KT__EXACT_MEMO_BYTES};
  kt_optimal_result res;
  kt_schedule found;
  kt_error e2;
  if (kt_gen_optimal(&params, layout->placement, &o, &found, &res, &e2)) return KT_OK;
  kt_schedule_free(&found);
  if (res.lower_bound > *lb) *lb = res.lower_bound;
  if (exact) *exact = res.proven;
  return KT_OK;
}

/* zb-auto's order on the same layout, costs and limit, as the one to beat
 * (its thorough search's, or its default's when quick): its period, or
 * INFINITY when zb-auto has none (its admission rule asks for more memory
 * than some orders need). */
static double starting_order(const kt__opt_problem *pb, const kt_gen_params *params, int quick,
                             kt_schedule *s) {
  kt_error e2;
  const kt__search_opts *o = quick ? &kt__search_default : &kt__search_thorough;
  if (kt__zb_auto_build(s, params->costs, params->mem_limit, o, 0, NULL, &e2)) return INFINITY;
  double period;
  return kt__exact_verify(pb, s, params->costs, INFINITY, &period, &e2) ? INFINITY : period;
}

/* Micro-batches of their own costs: the bound and proof are those on every
 * order (kt__lower_bound's), not the search's over its sequences. */
static kt_status every_order_bound(const kt_gen_params *params, const kt_schedule *s,
                                   kt_optimal_result *res, kt_error *err) {
  double lb = 0;
  kt_status st = kt__lower_bound(s, params->costs, params->mem_limit, 1, &lb, err);
  if (st) return st;
  res->lower_bound = fmin(lb, res->period);
  res->proven = res->period <= lb * (1 + 1e-9);
  res->gap = res->proven ? 0 : res->period / res->lower_bound - 1;
  if (res->proven) res->lower_bound = res->period;
  return KT_OK;
}

/* The problem of micro-batches of their own costs: the stages' least costs
 * for the bound (the slots' own come with each sequence), under the limit
 * their own memory sets. EINVAL when a micro-batch keeps more for its W
 * than its activation. */
static kt_status mb_problem(const kt_gen_params *params, const kt_costs *c, const kt_schedule *s,
                            kt__opt_problem *pb, kt_error *err) {
  int S = kt_schedule_stages(s);
  memset(pb, 0, sizeof *pb);
  kt_status st = kt_costs_check_m(c, s->m, err);
  for (int x = 0; !st && x < S; x++)
    for (int j = 0; !st && j < s->m; j++)
      if (kt_cost_mem_wgrad_mb(c, x, j) > kt_cost_mem_act_mb(c, x, j))
        st = kt_fail(err, KT_EINVAL,
                     "optimal: stage %d, micro-batch %d keeps more for its W (mem-wgrad %g) than "
                     "its activation (mem-act %g); the exact search places I then W, never a "
                     "full B, and is exact only while mem-wgrad <= mem-act",
                     x, j, kt_cost_mem_wgrad_mb(c, x, j), kt_cost_mem_act_mb(c, x, j));
  kt_costs least;
  if (!st) st = kt_costs_least(c, &least, err);
  if (st) return st;
  st = kt__opt_problem_init(pb, s, &least, kt_gen_mem_limit(params), 1, err);
  kt_costs_free(&least);
  int *seq = st ? NULL : kt_calloc((size_t)s->m, sizeof *seq);
  if (!st && !seq) st = kt_fail(err, KT_ENOMEM, "optimal: out of memory (M=%d)", s->m);
  for (int j = 0; !st && j < s->m; j++) seq[j] = j;
  if (!st) st = kt__opt_problem_sequence(pb, c, seq, err); /* marks the problem as one of them */
  free(seq);
  if (st && pb->p) kt__opt_problem_free(pb);
  return st;
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
  kt__opt_seq_info seqs = {0};
  st = pb->seq ? kt__opt_search_sequences(pb, params->costs, &so, &found, &sr, &seqs, err)
               : kt__opt_search(pb, &so, &found, &sr, err);
  int better = !st && sr.makespan < INFINITY;
  if (better) { /* the search's order replaces zb-auto's */
    kt_schedule_swap_lists(out, &found);
  }
  kt_schedule_free(&found);
  if (!st && !better && isinf(upper))
    st =
        kt_fail(err, KT_EMEMLIMIT, "optimal: no order of P=%d, V=%d, M=%d fits the memory limit %g",
                pb->p, pb->v, pb->m, pb->limit);
  if (!st)
    st = kt__exact_verify(pb, out, params->costs, better ? sr.makespan : upper, &res->period, err);
  if (st) return st;
  res->lower_bound = fmin(sr.lower, res->period);
  res->proven = sr.complete;
  res->gap = res->lower_bound > 0 ? res->period / res->lower_bound - 1 : 0;
  if (res->proven) res->gap = 0, res->lower_bound = res->period;
  res->start_period = upper;
  res->nodes = sr.nodes;
  res->seconds = sr.seconds;
  if (pb->seq) {
    res->sequences = seqs.searched, res->sequences_all = seqs.all;
    res->proven_in_sequences = sr.complete;
    st = every_order_bound(params, out, res, err);
  }
  return st;
}

kt_status kt_gen_optimal(const kt_gen_params *params, kt_placement placement,
                         const kt_optimal_opts *opts, kt_schedule *out, kt_optimal_result *res,
                         kt_error *err) {
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
    st = kt_fail(err, KT_EINVAL, "optimal: memory limit %g is not a finite number",
                 params->mem_limit);
  if (!st) st = kt_costs_check(c, kt_schedule_stages(out), err);
  int own = !st && kt_costs_mb_differ(c);
  if (!st) {
    kt_gen_params p2 = *params;
    p2.costs = c;
    st = own ? mb_problem(&p2, c, out, &pb, err)
             : kt__opt_problem_init(&pb, out, c, params->mem_limit, 1, err);
  }
  for (int x = 0; !st && !own && x < pb.S; x++)
    if (pb.wg[x] > pb.act[x]) { /* then a full B, which frees all at once, may win */
      st = kt_fail(err, KT_EINVAL,
                   "optimal: stage %d keeps more for its W (mem-wgrad %g) than "
                   "its activation (mem-act %g); the exact search places I then W, never a full "
                   "B, and is exact only while mem-wgrad <= mem-act",
                   x, pb.wg[x], pb.act[x]);
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
