/* Where a measured step's idle time went: each rank's step split into its
 * actions' own time and five causes of everything else, by replaying the
 * step in the simulator with more and more of what was measured.
 *
 *   replay 0: every action lasts its own time (cpu_time)         -> schedule
 *   replay 1: ... and its measured wall time (waits for a core)   -> core_wait
 *   replay 2: ... and the runtime's gap before it                 -> overhead
 *   measured: ... and real transfers                              -> comm
 *   after the rank's last action, to the step's end               -> optimizer
 *
 * No replay has communication costs, so what the measurement adds beyond
 * replay 2 is the time transfers took. Each replay keeps the schedule's
 * order, so a delay shows where it propagates: a rank that waited for a
 * core late delivers its activation, and the rank that waits for it books
 * that wait under core_wait too, not under comm. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/sim.h"

typedef struct {
  const kt_event **ev; /* per action in schedule order (rank-major) */
  double *own, *wall, *gap; /* per action: own time, wall time, runtime gap before it */
  size_t n;
} step_actions;

static int by_rank_start(const void *a, const void *b) {
  const kt_event *x = *(const kt_event *const *)a, *y = *(const kt_event *const *)b;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  return x->start < y->start ? -1 : x->start > y->start;
}

/* Each rank's measured events matched to its actions (a rank runs its list
 * in order). EINVAL when they do not match. */
static kt_status match(const kt_schedule *s, const kt_timeline *m, step_actions *sa,
                       kt_error *err) {
  sa->n = kt_schedule_total_actions(s);
  if (m->n_events != sa->n)
    return kt_fail(err, KT_EINVAL, "the measured step has %zu actions, the schedule %zu",
                   m->n_events, sa->n);
  sa->ev = malloc((sa->n ? sa->n : 1) * sizeof *sa->ev);
  sa->own = malloc((sa->n ? sa->n : 1) * 3 * sizeof *sa->own);
  if (!sa->ev || !sa->own) return kt_fail(err, KT_ENOMEM, "out of memory");
  sa->wall = sa->own + sa->n, sa->gap = sa->own + 2 * sa->n;
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
      double wall = fmax(0, e->end - e->start);
      sa->wall[k] = wall;
      sa->own[k] = e->cpu_time > 0 ? fmin(e->cpu_time, wall) : wall; /* unknown: all its own */
      sa->gap[k] = fmax(0, e->start - e->comm_time - prev_end);
      prev_end = e->end;
    }
  }
  return KT_OK;
}

/* Each rank's last action's end when the step is replayed with durations
 * dur (no communication cost), into end[p]. */
static kt_status replay(const kt_schedule *s, const double *dur, double *end, kt_error *err) {
  kt_costs c;
  kt_costs_default(&c);
  c.action_time = dur;
  kt_metrics m;
  kt_status st = kt_simulate_metrics(s, &c, &m, err);
  if (st) return st;
  for (int r = 0; r < s->p; r++) end[r] = m.ranks[r].actions ? m.ranks[r].end : 0;
  kt_metrics_free(&m);
  return KT_OK;
}

/* Splits rank r's non-busy time before its last action's end (left) over
 * the replays' predictions of it, in order; whatever the measurement has
 * beyond the last replay is comm. Each share is at least 0 and at most what
 * is left, so they sum to left exactly. */
static void split_rank(double left, const double *replayed, kt_idle_split *o) {
  double *to[] = {&o->schedule, &o->core_wait, &o->overhead};
  double given = 0;
  for (int k = 0; k < 3; k++) {
    double share = fmin(fmax(replayed[k] - given, 0), left - given);
    *to[k] = share;
    given += share;
  }
  o->comm = left - given;
}

kt_status kt_idle_split_step(const kt_schedule *s, const kt_timeline *measured,
                             double step_seconds, kt_idle_split *out, kt_error *err) {
  step_actions sa = {0};
  double *dur = NULL, *ends = NULL;
  kt_status st = match(s, measured, &sa, err);
  if (!st && (!(dur = malloc((sa.n ? sa.n : 1) * sizeof *dur)) ||
              !(ends = malloc(3 * (size_t)s->p * sizeof *ends))))
    st = kt_fail(err, KT_ENOMEM, "out of memory");
  for (int k = 0; k < 3 && !st; k++) { /* own; + waits for a core; + the runtime's gaps */
    for (size_t i = 0; i < sa.n; i++)
      dur[i] = k == 0 ? sa.own[i] : k == 1 ? sa.wall[i] : sa.wall[i] + sa.gap[i];
    st = replay(s, dur, ends + (size_t)k * s->p, err);
  }
  size_t k = 0;
  for (int r = 0; !st && r < s->p; r++) {
    kt_idle_split *o = &out[r];
    memset(o, 0, sizeof *o);
    double last_end = 0;
    for (size_t i = 0; i < s->ranks[r].n; i++, k++) {
      o->busy += sa.own[k];
      last_end = sa.ev[k]->end;
    }
    double replayed[3];
    for (int j = 0; j < 3; j++) replayed[j] = ends[(size_t)j * s->p + r] - o->busy;
    split_rank(fmax(0, last_end - o->busy), replayed, o);
    o->optimizer = fmax(0, step_seconds - last_end);
  }
  free(sa.ev), free(sa.own), free(dur), free(ends);
  return st;
}
