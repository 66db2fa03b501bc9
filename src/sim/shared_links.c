/* Runs with links shared between replicas and overlapping transfers:
 * kt__simulate over kt__simulate_run (sim.c). */
#include <math.h>

#include "sim/internal.h"

/* Runs beyond the first that share the links between overlapping
 * transfers (kt_links_share; each replay moves the durations halfway, so
 * the runs settle where a saturated link made them swing between two
 * answers: 7e-5 s of change left after 20 runs on test_links's saturated
 * link), and the flows above which they are skipped (a replay is
 * quadratic in the transfers in flight at once). */
#define SHARE_RUNS 20
#define SHARE_MAX_FLOWS 20000

/* The transfers a run of every replica makes at most (each pair's F and
 * B results crossing once, each rank's all-reduce as a ring over D). */
static size_t replay_flows(const kt_schedule *s, int replicas) {
  size_t ring = 2 * (size_t)replicas * (size_t)(replicas - 1); /* a rank's all-reduce at most */
  return 2 * (size_t)s->m * (size_t)kt_schedule_stages(s) * (size_t)replicas + (size_t)s->p * ring;
}

/* One run for each of the D replicas in turn, side by side on the links
 * (outputs from replica 0's); one run following replica 0 with the others'
 * copies when they would exceed the flows a replay takes. */
static kt_status simulate_replicas(const kt_schedule *s, const kt_costs *c, kt_links *l,
                                   kt_timeline *out, kt_metrics *met, const kt_sim_sink *sink,
                                   kt_error *err) {
  int D = kt_links_replicas(l);
  kt_status st = KT_OK;
  if (D == 1 || replay_flows(s, D) > SHARE_MAX_FLOWS) {
    st = kt__simulate_run(s, c, l, out, met, sink, 1, err);
  } else {
    kt_links_reset(l);
    for (int k = 0; k < D && !st; k++) {
      kt_links_follow_replica(l, k);
      st = kt__simulate_run(s, c, l, k ? NULL : out, k ? NULL : met, k ? NULL : sink, 0, err);
    }
    kt_links_follow_replica(l, -1);
  }
  if (!st) kt_links_sync(l); /* the step's all-reduce, when one is set */
  return st;
}

/* With links: on a copy of them (the caller's are only read), a first run
 * books transfers in turns, then runs that take their durations from a
 * replay of the last one in time order (links shared), until the
 * durations settle; the last run fills the outputs. *sync_end (may be
 * NULL): when the step's all-reduce ends, NAN without links. */
kt_status kt__simulate(const kt_schedule *s, const kt_costs *c, kt_timeline *out, kt_metrics *met,
                       const kt_sim_sink *sink, double *sync_end, kt_error *err) {
  if (sync_end) *sync_end = NAN;
  if (!c || !c->links) return kt__simulate_run(s, c, NULL, out, met, sink, 1, err);
  kt_links *l;
  kt_status st = kt_links_clone(c->links, &l, err);
  for (int run = 0; !st && run < SHARE_RUNS && replay_flows(s, 1) <= SHARE_MAX_FLOWS; run++) {
    st = simulate_replicas(s, c, l, NULL, NULL, NULL, err);
    if (!st && !(kt_links_share(l) > 1e-7)) break; /* settled */
  }
  if (!st) st = simulate_replicas(s, c, l, out, met, sink, err);
  if (!st && sync_end) *sync_end = kt_links_synced(l);
  kt_links_destroy(l);
  return st;
}
