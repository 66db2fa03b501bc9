/* kaiten simulator: runs a schedule against a cost model, event by event.
 *
 * Semantics (docs/schedules.md, "Simulator semantics"): each rank runs its actions strictly in order; an
 * action starts at max(end of the previous action on its rank, time its
 * inputs are ready). F(s,j) needs F(s-1,j) (+T_comm across ranks); B/I(s,j)
 * needs B/I(s+1,j) (+T_comm across ranks), or F(S-1,j) on the last stage;
 * W(s,j) needs I(s,j) (kaiten/schedule.h defines these rules once). B costs
 * T_B + T_W and publishes its input gradient when the whole B ends, as
 * PyTorch's full backward does (an early send is what I then W says).
 * A lowered program (SEND/RECV/WAIT_SEND actions) runs as written: a result
 * arrives one hop after its SEND; a RECV posts; a WAIT_SEND waits for the
 * peer's RECV. A compute-only schedule runs as its lowering does.
 *
 * Overlapped pairs (KT_ACTION_OVERLAP_NEXT, DualPipeV's F&B slots) start when
 * both inputs are ready, occupy the rank for the sum of both costs (one device
 * computes both one after the other) unless kt_costs.overlap credits some
 * overlap, and publish both results when the pair ends.
 *
 * Every function here only reads its schedule and costs (the links' booking
 * happens on a copy of the simulation's own), so simulations may share them
 * across threads.
 */
#ifndef KAITEN_SIM_H
#define KAITEN_SIM_H

#include "kaiten/costs.h"
#include "kaiten/schedule.h"
#include "kaiten/timeline.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Duration of an op on stage: T_F, T_B + T_W (B), T_B (I) or T_W (W), plus
 * the costs' op_overhead. */
double kt_cost_op(const kt_costs *c, int stage, kt_op op);
/* The same for micro-batch mb (its own costs where given per micro-batch). */
double kt_cost_op_mb(const kt_costs *c, int stage, int mb, kt_op op);

/* Simulates the schedule; fills a fresh timeline (caller frees). out may be
 * NULL to only check that the schedule runs to completion.
 * EDEADLOCK names every blocked rank, its next action and what it waits for;
 * EINVALID_SCHEDULE for actions outside the schedule's stages/micro-batches. */
kt_status kt_simulate(const kt_schedule *s, const kt_costs *c, kt_timeline *out, kt_error *err);

/* kt_simulate of one training step on the costs' links: *sync_end is when
 * the step's all-reduce (kt_links_set_sync on c->links) ends on the last
 * replica, or the pipeline's end without one or without links. */
kt_status kt_simulate_step(const kt_schedule *s, const kt_costs *c, kt_timeline *out,
                           double *sync_end, kt_error *err);

/* Metrics only, no timeline stored: memory O(stages x micro-batches)
 * instead of O(actions), and several times faster. The metrics are exactly
 * kt_timeline_metrics of kt_simulate's timeline (caller frees). */
kt_status kt_simulate_metrics(const kt_schedule *s, const kt_costs *c, kt_metrics *out,
                              kt_error *err);

/* Receives a simulation's events and memory samples as they happen (each
 * rank's in time order) instead of a stored timeline: e.g. a coarse
 * timeline (kaiten/timeline.h) for runs too large to keep. */
typedef struct {
  void *ctx;
  void (*event)(void *ctx, const kt_event *e);
  void (*mem)(void *ctx, int rank, double t, double value);
} kt_sim_sink;
kt_status kt_simulate_into(const kt_schedule *s, const kt_costs *c, const kt_sim_sink *sink,
                           kt_metrics *met, kt_error *err);

/* Both in one run: the timeline (out) and its metrics (met). */
kt_status kt_simulate_both(const kt_schedule *s, const kt_costs *c, kt_timeline *out,
                           kt_metrics *met, kt_error *err);

/* ---- what a step is (src/sim/step.c; docs/schedules.md) --------------------
 *
 * The metrics of every simulation above carry the step's period: the step
 * time of a run in steady state under the costs' step sync and step-end
 * costs (kt_costs.step_sync, tu, t_norm, t_dp, tie), as well as the
 * makespan of one step alone. */

/* The step's end as a rank sees it, for one layout and cost model. */
typedef struct {
  int p;
  kt_step_sync sync;
  int first, last; /* the ranks of stage 0 and of the last stage */
  int tied;        /* they exchange the tied embedding's gradient (different ranks) */
  double t_tie, t_dp, t_norm;
  double *update; /* per rank: the update of its stages (their tu summed) */
  double max_update;
} kt_step_model;

kt_status kt_step_model_init(kt_step_model *m, const kt_schedule *s, const kt_costs *c,
                             kt_error *err);
void kt_step_model_free(kt_step_model *m);
/* When each rank may start its next step (ready[p]), given when each ended
 * its last action of this one (end[p], one clock). */
void kt_step_model_ready(const kt_step_model *m, const double *end, double *ready);
/* The period that one step's per-rank first start and last end imply:
 * under a barrier exactly; without one the largest ready_r - start_r, an
 * upper bound that is the period when *exact (may be NULL) says so. */
double kt_step_model_period(const kt_step_model *m, const double *start, const double *end,
                            int *exact);
/* kt_step_model_period of met's ranks (a simulation's metrics). */
double kt_step_model_bound(const kt_step_model *m, const kt_metrics *met, int *exact);
/* The period of s under c from met (a simulation of s under c): sets it
 * with kt_metrics_set_period, simulating steps back to back when one step
 * does not settle it. EDEADLOCK, ENOMEM. */
kt_status kt_sim_period(const kt_schedule *s, const kt_costs *c, kt_metrics *met, kt_error *err);

/* ---- the size guard: a simulation this machine cannot hold is refused ----
 *
 * Bytes per action a whole run needs, from its schedule to its written
 * result, by the path it takes (measured at P=256, M=4096 and above, with
 * a margin; docs/simulator.md): kt_simulate_metrics (the schedule, the
 * simulator's state per stage and micro-batch, the metrics), a timeline
 * (kt_simulate_both: an event and memory samples per action) with the JSON
 * of its events or a report, and a timeline written as a Chrome trace. */
#define KT_SIM_BYTES_METRICS 32
#define KT_SIM_BYTES_TIMELINE 192
#define KT_SIM_BYTES_CHROME 320
/* EINVAL when actions * bytes_per_action is more than 3/4 of this
 * machine's physical memory: "up to 2.01e+08 actions would need about
 * 5.6 GiB of memory (this machine has 4 GiB)"; under an address-space
 * limit (ulimit -v) that limit counts. The request (kaiten/request.h),
 * every door's, asks it before it generates anything, and again for the
 * path it takes (a timeline, a Chrome trace). */
kt_status kt_sim_memory_check(double actions, double bytes_per_action, kt_error *err);

/* ---- the critical path of a timeline, simulated or measured ----------------
 *
 * Each action waits for its rank's previous one (which holds the rank
 * send_overhead longer for every message it sent to another rank) and for
 * the action that made its input (kt_action_needs), handed over hop later
 * when that one ran on another rank; an overlapped group publishes when it
 * all ends. For a simulation without links, hop = kt_cost_comm(c) and
 * send_overhead = c->send_overhead reproduce its timing; for a measured
 * step pass 0 (the waits hold the transfers). */
typedef struct {
  /* per event, in the timeline's order: how much later it could start
   * without moving the step's end (the latest event end), every other
   * action keeping its duration and every hand-over its time; 0 on the
   * critical path */
  double *slack;
  /* the critical path, first action to last: from the action that ends
   * last, back through the predecessor that released it last (on a tie
   * the hand-over from another rank), as event indices */
  size_t *path;
  size_t n_path;
  double end; /* the step's end */
} kt_critical;

/* EINVAL for a negative hop or overhead, an event outside the timeline's
 * ranks, or waits that form a cycle (a measured timeline with skewed
 * clocks may); ENOMEM. Free with kt_critical_free. */
kt_status kt_timeline_critical(const kt_timeline *t, double hop, double send_overhead,
                               kt_critical *out, kt_error *err);
void kt_critical_free(kt_critical *c);

/* ---- why a measured step idled ------------------------------------------ */

/* One rank's share of a measured step, in seconds: its actions' own time
 * and the causes of the rest; the six sum to the step's wall time. */
typedef struct {
  double busy;      /* the actions' own time (kt_event.cpu_time) */
  double schedule;  /* idle a replay with those own times also has: the pipeline's
                       structural bubble and its stages' imbalance */
  double core_wait; /* actions ready but their thread not running (more ranks and BLAS
                       threads than cores), and the waits that caused elsewhere */
  double comm;      /* waiting on transfers: what the measurement has beyond a replay
                       of every measured duration without communication */
  double overhead;  /* the runtime between actions (posting sends and receives), and
                       what it delayed */
  double optimizer; /* after the rank's last action: all-reduce, update, flush */
} kt_idle_split;

/* Splits each rank's share of a measured step by replaying it in the
 * simulator (src/sim/idle.c says how): s is the compute schedule the step
 * ran (all its rounds: kt_schedule_repeat), measured its timeline (events
 * of every rank, from the step's start, with cpu_time and comm_time),
 * step_seconds the step's wall time (without a barrier, sync overlap: its
 * period, each rank's step from its first action to its next step's; a
 * span longer than the period is split up to the period only); out
 * receives s->p entries. EINVAL when
 * the timeline is not a run of s, ENOMEM. */
kt_status kt_idle_split_step(const kt_schedule *s, const kt_timeline *measured, double step_seconds,
                             kt_step_sync sync, kt_idle_split *out, kt_error *err);

/* The causes' names in JSON and reports, in this order: schedule,
 * core_wait, comm, overhead, optimizer (KT_IDLE_CAUSES of them). */
#define KT_IDLE_CAUSES 5
extern const char *const kt_idle_cause_names[KT_IDLE_CAUSES];
/* Cause i of s (kt_idle_cause_names' order). */
double kt_idle_cause(const kt_idle_split *s, int i);
/* {"schedule":..,"core_wait":..,"comm":..,"overhead":..,"optimizer":..,
 * "compute":..,"seconds":..} (compute: the actions' own time, .busy;
 * seconds: what the six sum to, the step) */
void kt_idle_split_json(const kt_idle_split *s, kt_buf *b);

/* EINVAL when a link fault of f (a slow link, a trace's link) joins ranks
 * no message of sc crosses (no two consecutive stages run on them: the
 * wrap from the last rank to rank 0 in 1F1B), naming it: the fault would
 * change nothing. */
kt_status kt_sim_check_fault_links(const kt_faults *f, const kt_schedule *sc, kt_error *err);

#ifdef __cplusplus
}
#endif

#endif
