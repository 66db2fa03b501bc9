/* zb-auto's bounded exact step: the exact search (optimal_search.c) run
 * from an incumbent order for a fixed number of nodes, and the check every
 * order the search returns goes through. It builds on the search engine
 * only: the `optimal` generator (optimal.c) builds on zb-auto, which builds
 * on this. */
#include <math.h>
#include <stdlib.h>

#include "generators/optimal_internal.h"
#include "kaiten/sim.h"

kt_status kt__exact_verify(const kt__opt_problem *pb, const kt_schedule *s, const kt_costs *c,
                           double expect, double *period, kt_error *err) {
  kt_metrics m;
  kt_status st = kt_simulate_metrics(s, c, &m, err);
  if (st) return st;
  *period = kt_step_model_bound(&pb->step, &m, NULL); /* the search's objective */
  kt_metrics_free(&m);
  if (!isinf(expect) && fabs(*period - expect) > 1e-9 * (1 + expect))
    return kt_fail(err, KT_ERUNTIME,
                   "optimal: internal check failed: the search timed its order "
                   "at %.12g, the simulator at %.12g",
                   expect, *period);
  for (int r = 0; r < s->p; r++) {
    double mem = 0;
    for (size_t i = 0; i < s->ranks[r].n; i++) {
      const kt_action *a = &s->ranks[r].actions[i];
      mem += kt_action_memory(a->op, pb->act[a->stage], pb->wg[a->stage]);
      if (mem > kt_tolerance(pb->limit))
        return kt_fail(err, KT_ERUNTIME,
                       "optimal: internal check failed: rank %d holds %g, "
                       "over the limit %g",
                       r, mem, pb->limit);
    }
  }
  return KT_OK;
}

kt_status kt__exact_step(kt_schedule *s, const kt_costs *c, double mem_limit, long nodes,
                         kt__exact_outcome *io, kt_error *err) {
  if (!kt__optimal_reach(s) || c->links || c->send_overhead > 0 ||
      !(io->period > io->lower * (1 + 1e-9)))
    return KT_OK;
  kt__opt_problem pb;
  kt_error e2; /* a problem the exact search does not take: the incumbent stands */
  if (kt__opt_problem_init(&pb, s, c, mem_limit, 1, &e2)) return KT_OK;
  int exact = 1; /* the search places I then W, never a full B */
  for (int x = 0; x < pb.S; x++) exact &= pb.wg[x] <= pb.act[x];
  kt_schedule found;
  kt_status st = exact ? kt_schedule_init_like(&found, s, s->m, err) : KT_OK;
  if (exact && !st) {
    kt__opt_search_opts so = {.time_limit = 10,
                              .upper = io->period,
                              .memo_bytes = KT__EXACT_MEMO_BYTES,
                              .max_nodes = nodes};
    kt__opt_search_result sr;
    double period;
    st = kt__opt_search(&pb, &so, &found, &sr, err);
    if (!st) {
      io->ran = 1, io->nodes = sr.nodes;
      if (sr.lower > io->lower) io->lower = sr.lower;
      io->proven = sr.complete;
    }
    if (!st && sr.makespan < io->period * (1 - 1e-9) &&
        !(st = kt__exact_verify(&pb, &found, c, sr.makespan, &period, err))) {
      kt_schedule_swap_lists(s, &found); /* the search's order replaces the incumbent */
      io->period = period;
    }
    kt_schedule_free(&found);
  }
  kt__opt_problem_free(&pb);
  return st;
}
