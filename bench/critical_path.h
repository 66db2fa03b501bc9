/* Where a measured pipeline step's time goes on its critical path.
 *
 * The walk starts at the last action of the rank whose span (first start to
 * last end) is the makespan and follows, from each action, the predecessor
 * that ended last: the rank's previous action, or the action on another
 * rank whose result it consumed (the F of the stage before, the backward of
 * the stage after), until an action with neither (in 1F1B the first F of
 * stage 0). Along that path its span (the makespan when the path ends at the
 * rank's first action, as in 1F1B) splits exactly into
 *
 *   op time    sum of the actions' durations: nominal + overrun
 *   hand-offs  gaps after a predecessor on another rank (send, delivery,
 *              wake-up of the receiver, receive copy)
 *   local      gaps after the rank's own previous action (the runtime's
 *              bookkeeping between actions)
 *
 * and span - simulated = overrun + hand-offs + local - slack, where slack
 * is the simulated makespan minus the nominal op time of this path (the path
 * the measured run took may be shorter in nominal terms than the simulated
 * critical path). */
#ifndef KT_BENCH_CRITICAL_PATH_H
#define KT_BENCH_CRITICAL_PATH_H

#include <stddef.h>

#include "kaiten/timeline.h"

typedef struct {
  double makespan;         /* the span of the walk's rank (s) */
  double span;             /* from the path's first action's start to its end: the
                              makespan, unless the path leaves the rank's first action */
  size_t ops;              /* actions on the path */
  double op_time, nominal; /* their measured and nominal durations (s) */
  size_t handoffs, locals; /* gaps after another rank's / the own rank's action */
  double handoff_time, handoff_max, local_time;
} kt_critical_path;

/* Walks the critical path of a measured timeline (seconds). Nominal costs
 * of F, I, W in seconds (B = I + W). Returns 0, or -1 when the timeline has
 * no events. Across processes (MPI) each rank's clock starts at its own
 * step start, so the split between hand-offs and local gaps is approximate
 * there; the sum is not. */
int kt_critical_path_walk(const kt_timeline *t, double tf, double tb, double tw,
                          kt_critical_path *out);

#endif
