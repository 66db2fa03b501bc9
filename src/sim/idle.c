/* Where a measured step's idle time went: each rank's step split into its
 * actions' own time and five causes of everything else, by replaying the
 * step in the simulator with more and more of what was measured.
 *
 *   replay 0: every action lasts its own time (cpu_time)           -> schedule
 *   replay 1: ... and its measured wall time, and the part of the
 *             runtime's gap before it its thread had no core         -> core_wait
 *   replay 2: ... and the whole gap (the runtime's own work)          -> overhead
 *   measured: ... and real transfers                                  -> comm
 *   after the pipeline's last action anywhere, to the step's end      -> optimizer
 *
 * Each rank's share runs to the pipeline's end (the last action of any
 * rank), as the bubble ratio counts it: a rank that finished early waits
 * for the drain, and the replays say why. Without a barrier between steps
 * (kt_step_sync overlap) a rank's step runs from its first action to its
 * next step's: the replays and the measurement then count the largest
 * per-rank span (the period of steps back to back with no update), and the
 * rest of the step's period is the optimizer's. No replay has communication
 * costs, so what the measurement adds beyond replay 2 is the time
 * transfers took. Each replay keeps the schedule's order, so a delay shows
 * where it propagates: a rank that waited for a core late delivers its
 * activation, and the rank that waits for it books that wait under
 * core_wait too, not under comm. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/sim.h"

enum { OWN, CORE, GAP, N_DUR }; /* the per-action durations of replays 0..2 */

typedef struct {
  const kt_event **ev; /* per action in schedule order (rank-major) */
  double *dur[N_DUR];  /* per action: own; + waits for a core; + the runtime's gap */
  size_t n;
} step_actions;

static int by_rank_start(const void *a, const void *b) {
  const kt_event *x = *(const kt_event *const *)a, *y = *(const kt_event *const *)b;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  return x->start < y->start ? -1 : x->start > y->start;
}

/* An action's durations in the three replays. Its own time is its CPU
 * time (unknown, 0: all its wall time); replay 1 adds the time its thread
 * was ready without a core since the previous action (ready_wait: between
 * the two, after its input came and while it ran); replay 2 is all of its
 * wall time and the gap before it (after its rank's previous action, less
 * its wait for data). */
static void durations(const kt_event *e, double prev_end, double *own, double *core, double *gap) {
  double wall = fmax(0, e->end - e->start);
  double g = fmax(0, e->start - e->comm_time - prev_end);
  int measured = e->cpu_time > 0;
  *own = measured ? fmin(e->cpu_time, wall) : wall;
  *gap = wall + g;
  *core = *own + (measured ? fmin(fmax(e->ready_wait, 0), *gap - *own) : 0);
}

/* Each rank's measured events matched to its actions (a rank runs its list
 * in order). EINVAL when they do not match. */
static kt_status match(const kt_schedule *s, const kt_timeline *m, step_actions *sa,
                       kt_error *err) {
  sa->n = kt_schedule_total_actions(s);
  if (m->n_events != sa->n)
    return kt_fail(err, KT_EINVAL, "the measured step has %zu actions, the schedule %zu",
                   m->n_events, sa->n);
  size_t n = sa->n ? sa->n : 1;
  sa->ev = malloc(n * sizeof *sa->ev);
  sa->dur[0] = malloc(n * N_DUR * sizeof(double));
  if (!sa->ev || !sa->dur[0]) return kt_fail(err, KT_ENOMEM, "out of memory");
  for (int k = 1; k < N_DUR; k++) sa->dur[k] = sa->dur[0] + (size_t)k * n;
  for (size_t i = 0; i < sa->n; i++) sa->ev[i] = &m->events[i];
  qsort(sa->ev, sa->n, sizeof *sa->ev, by_rank_start);
  size_t k = 0;
  for (int r = 0; r < s->p; r++) {
    double prev_end = 0;
    for (size_t i = 0; i < s->ranks[r].n; i++, k++) {
      const kt_action *a = &s->ranks[r].actions[i];
      const kt_event *e = sa->ev[k];
      if (e->rank != r || e->stage != a->stage || e->mb != a->mb || e->op != a->op)
        return kt_fail(err, KT_EINVAL,
                       "rank %d's action %zu ran as rank %d's %d/%d/%d: not the schedule's step", r,
                       i, (int)e->rank, (int)e->stage, (int)e->op, (int)e->mb);
      durations(e, prev_end, &sa->dur[OWN][k], &sa->dur[CORE][k], &sa->dur[GAP][k]);
      prev_end = e->end;
    }
  }
  return KT_OK;
}

/* The pipeline's part of the step when it is replayed with durations dur
 * (no communication cost): under a barrier its end (the last action's end
 * anywhere), without one its period with no step's end. */
static kt_status replay(const kt_schedule *s, const double *dur, kt_step_sync sync, double *end,
                        kt_error *err) {
  kt_costs c;
  kt_costs_default(&c);
  c.action_time = dur;
  c.step_sync = sync;
  kt_metrics m;
  kt_status st = kt_simulate_metrics(s, &c, &m, err);
  if (st) return st;
  *end = 0;
  for (int r = 0; r < s->p; r++)
    if (m.ranks[r].actions) *end = fmax(*end, m.ranks[r].end);
  if (sync == KT_STEP_OVERLAP) *end = m.period;
  kt_metrics_free(&m);
  return KT_OK;
}

/* The measured pipeline's part: its end, or its largest per-rank span. */
static double measured_part(const step_actions *sa, kt_step_sync sync) {
  double end = 0, span = 0;
  for (size_t i = 0; i < sa->n; i++) end = fmax(end, sa->ev[i]->end);
  for (size_t i = 0, first = 0; i < sa->n; i++) /* ev is rank-major, each rank's in time order */
    if (i + 1 == sa->n || sa->ev[i + 1]->rank != sa->ev[i]->rank) {
      span = fmax(span, sa->ev[i]->end - sa->ev[first]->start);
      first = i + 1;
    }
  return sync == KT_STEP_OVERLAP ? span : end;
}

/* Splits rank r's non-busy time before the pipeline's end (left) over the
 * replays' predictions of it, in order; whatever the measurement has
 * beyond the last replay is comm. Each share is at least 0 and at most
 * what is left, so they sum to left exactly. */
static void split_rank(double left, const double *replayed, kt_idle_split *o) {
  double *to[] = {&o->schedule, &o->core_wait, &o->overhead};
  double given = 0;
  for (int k = 0; k < N_DUR; k++) {
    double share = fmin(fmax(replayed[k] - given, 0), left - given);
    *to[k] = share;
    given += share;
  }
  o->comm = left - given;
}

kt_status kt_idle_split_step(const kt_schedule *s, const kt_timeline *measured, double step_seconds,
                             kt_step_sync sync, kt_idle_split *out, kt_error *err) {
  step_actions sa = {0};
  double ends[N_DUR], pipeline_end = 0;
  kt_status st = match(s, measured, &sa, err);
  for (int k = 0; k < N_DUR && !st; k++) st = replay(s, sa.dur[k], sync, &ends[k], err);
  if (!st) pipeline_end = measured_part(&sa, sync);
  /* Without a barrier a rank's span can outlast the step's period (its
   * first actions ran beside the step before's last): what is split is
   * the step, so the split stops at its end. */
  if (sync == KT_STEP_OVERLAP && step_seconds > 0) pipeline_end = fmin(pipeline_end, step_seconds);
  size_t k = 0;
  for (int r = 0; !st && r < s->p; r++) {
    kt_idle_split *o = &out[r];
    memset(o, 0, sizeof *o);
    for (size_t i = 0; i < s->ranks[r].n; i++, k++) o->busy += sa.dur[OWN][k];
    double replayed[N_DUR];
    for (int j = 0; j < N_DUR; j++) replayed[j] = ends[j] - o->busy;
    split_rank(fmax(0, pipeline_end - o->busy), replayed, o);
    o->optimizer = fmax(0, step_seconds - pipeline_end);
  }
  free(sa.ev), free(sa.dur[0]);
  return st;
}

const char *const kt_idle_cause_names[KT_IDLE_CAUSES] = {"schedule", "core_wait", "comm",
                                                         "overhead", "optimizer"};

double kt_idle_cause(const kt_idle_split *s, int i) {
  const double v[KT_IDLE_CAUSES] = {s->schedule, s->core_wait, s->comm, s->overhead, s->optimizer};
  return i >= 0 && i < KT_IDLE_CAUSES ? v[i] : NAN;
}

/* To the nanosecond: a measurement's clock says no more, and a rank's
 * record stays short (metrics.jsonl holds one per rank and step). */
static double ns(double x) { return isfinite(x) ? round(x * 1e9) / 1e9 : x; }

void kt_idle_split_json(const kt_idle_split *s, kt_buf *b) {
  double sum = ns(s->busy);
  for (int i = 0; i < KT_IDLE_CAUSES; i++) {
    kt_buf_printf(b, "%s\"%s\":", i ? "," : "{", kt_idle_cause_names[i]);
    kt_buf_json_number(b, ns(kt_idle_cause(s, i)));
    sum += ns(kt_idle_cause(s, i));
  }
  /* "compute": the ops' own time, apart from the wall time a rank's "busy"
   * (the bubble ratio's) counts */
  kt_buf_puts(b, ",\"compute\":");
  kt_buf_json_number(b, ns(s->busy));
  kt_buf_puts(b, ",\"seconds\":");
  kt_buf_json_number(b, ns(sum));
  kt_buf_puts(b, "}");
}
