/* Internal to src/sim/: the simulation itself, beneath the public entry
 * points that also work out the step's period (step.c). */
#ifndef KAITEN_SIM_INTERNAL_H
#define KAITEN_SIM_INTERNAL_H

#include "kaiten/sim.h"

/* One simulation (sim.c), filling the timeline out, the metrics met (their
 * period the makespan) and/or a sink, each may be NULL; *sync_end (may be
 * NULL): when the step's all-reduce on the costs' links ends, NAN without
 * links. */
kt_status kt__simulate(const kt_schedule *s, const kt_costs *c, kt_timeline *out, kt_metrics *met,
                       const kt_sim_sink *sink, double *sync_end, kt_error *err);

/* One run of the schedule, filling out, met and/or sink (each may be
 * NULL); with links, booking its transfers on them (reset first when
 * reset_links). */
kt_status kt__simulate_run(const kt_schedule *s, const kt_costs *c, kt_links *links,
                           kt_timeline *out, kt_metrics *met, const kt_sim_sink *sink,
                           int reset_links, kt_error *err);

#endif
