/* Critical path of a measured step (see critical_path.h), and a program that
 * prints it for a run directory:
 *
 *   critical_path RUN_DIR [--tf MS --tb MS --tw MS] [--sim MS]
 *
 * Costs default to the synthetic defaults (2 ms each); --sim, the simulated
 * makespan in ms, adds the slack line. */
#include "critical_path.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/rundir.h"
#include "kaiten/schedule.h"

static double nominal_of(int op, double tf, double tb, double tw) {
  switch (op) {
    case KT_OP_F: return tf;
    case KT_OP_B: return tb + tw;
    case KT_OP_I: return tb;
    default: return tw;
  }
}

/* The event whose result e consumed from another stage: F(s-1, mb) for an F,
 * the backward (B or I) of (s+1, mb) for a backward. -1: none (stage 0's F,
 * the last stage's backward, a W). */
static long producer(const kt_timeline *t, const kt_event *e, int last_stage) {
  int stage, want_f;
  if (e->op == KT_OP_F) stage = e->stage - 1, want_f = 1;
  else if (e->op == KT_OP_B || e->op == KT_OP_I) stage = e->stage + 1, want_f = 0;
  else return -1;
  if (stage < 0 || stage > last_stage) return -1;
  /* the latest one that started before e (earlier rounds), else the first
   * one: clocks of ranks in different processes may be skewed */
  long best = -1, first = -1;
  for (size_t i = 0; i < t->n_events; i++) {
    const kt_event *c = &t->events[i];
    if (c->stage != stage || c->mb != e->mb) continue;
    if (want_f ? c->op != KT_OP_F : !(c->op == KT_OP_B || c->op == KT_OP_I)) continue;
    if (first < 0 || c->start < t->events[first].start) first = (long)i;
    if (c->start >= e->start) continue;
    if (best < 0 || c->start > t->events[best].start) best = (long)i;
  }
  if (best < 0) best = first;
  return best;
}

int kt_critical_path_walk(const kt_timeline *t, double tf, double tb, double tw,
                          kt_critical_path *out) {
  memset(out, 0, sizeof *out);
  if (!t->n_events) return -1;
  int last_stage = 0;
  for (size_t i = 0; i < t->n_events; i++)
    if (t->events[i].stage > last_stage) last_stage = t->events[i].stage;
  /* the rank with the longest span, and its first and last events */
  int best_rank = -1;
  long first = -1, last = -1;
  for (int r = 0; r < t->p; r++) {
    long f = -1, l = -1;
    for (size_t i = 0; i < t->n_events; i++) {
      const kt_event *e = &t->events[i];
      if (e->rank != r) continue;
      if (f < 0 || e->start < t->events[f].start) f = (long)i;
      if (l < 0 || e->end > t->events[l].end) l = (long)i;
    }
    if (f < 0) continue;
    double span = t->events[l].end - t->events[f].start;
    if (best_rank < 0 || span > out->makespan)
      best_rank = r, first = f, last = l, out->makespan = span;
  }
  if (best_rank < 0) return -1;
  long cur = last;
  while (cur >= 0) {
    const kt_event *e = &t->events[cur];
    out->ops++;
    out->op_time += e->end - e->start;
    out->nominal += nominal_of(e->op, tf, tb, tw);
    if (cur == first) break;
    long same = -1; /* the rank's previous action */
    for (size_t i = 0; i < t->n_events; i++) {
      const kt_event *c = &t->events[i];
      if (c->rank == e->rank && c->start < e->start &&
          (same < 0 || c->start > t->events[same].start))
        same = (long)i;
    }
    long other = producer(t, e, last_stage);
    if (other >= 0 && t->events[other].rank == e->rank) other = -1; /* a hand-over in the rank */
    long pred = same;
    if (other >= 0 && (same < 0 || t->events[other].end > t->events[same].end)) pred = other;
    if (pred < 0) break; /* an action with no predecessor: the path starts here */
    double gap = e->start - t->events[pred].end;
    if (gap < 0) gap = 0;
    if (pred == other) {
      out->handoffs++;
      out->handoff_time += gap;
      if (gap > out->handoff_max) out->handoff_max = gap;
    } else {
      out->locals++;
      out->local_time += gap;
    }
    cur = pred;
  }
  out->span = t->events[last].end - t->events[cur].start;
  return 0;
}

#ifndef KT_CRITICAL_PATH_NO_MAIN
int main(int argc, char **argv) {
  const char *dir = NULL;
  double tf = 2, tb = 2, tw = 2, sim = -1;
  for (int i = 1; i < argc; i++) {
    double *v = !strcmp(argv[i], "--tf")    ? &tf
                : !strcmp(argv[i], "--tb")  ? &tb
                : !strcmp(argv[i], "--tw")  ? &tw
                : !strcmp(argv[i], "--sim") ? &sim
                                            : NULL;
    if (v && i + 1 < argc) {
      char *end;
      *v = strtod(argv[++i], &end);
      if (*end || *v < 0) {
        fprintf(stderr, "critical_path: bad value '%s' for %s\n", argv[i], argv[i - 1]);
        return 2;
      }
    } else if (!v && !dir && argv[i][0] != '-') {
      dir = argv[i];
    } else {
      fprintf(stderr, "usage: critical_path RUN_DIR [--tf MS --tb MS --tw MS] [--sim MS]\n");
      return 2;
    }
  }
  if (!dir) {
    fprintf(stderr, "usage: critical_path RUN_DIR [--tf MS --tb MS --tw MS] [--sim MS]\n");
    return 2;
  }
  kt_run run;
  kt_error err;
  if (kt_run_load(dir, &run, &err)) {
    fprintf(stderr, "critical_path: %s\n", err.msg);
    return 1;
  }
  kt_critical_path cp;
  if (!run.has_timeline ||
      kt_critical_path_walk(&run.measured, tf * 1e-3, tb * 1e-3, tw * 1e-3, &cp)) {
    fprintf(stderr, "critical_path: %s has no pipeline timeline to walk\n", dir);
    kt_run_free(&run);
    return 1;
  }
  double ms = 1e3;
  printf("critical path of the traced step of %s: makespan %.3f ms, path %.3f ms, %zu actions\n",
         dir, ms * cp.makespan, ms * cp.span, cp.ops);
  printf("  op time      %9.3f ms  (nominal %.3f ms, overrun %.3f ms, %.1f us per action)\n",
         ms * cp.op_time, ms * cp.nominal, ms * (cp.op_time - cp.nominal),
         1e6 * (cp.op_time - cp.nominal) / (double)cp.ops);
  printf("  hand-offs    %9.3f ms  (%zu, mean %.1f us, max %.1f us)\n", ms * cp.handoff_time,
         cp.handoffs, cp.handoffs ? 1e6 * cp.handoff_time / (double)cp.handoffs : 0.0,
         1e6 * cp.handoff_max);
  printf("  local gaps   %9.3f ms  (%zu, mean %.1f us)\n", ms * cp.local_time, cp.locals,
         cp.locals ? 1e6 * cp.local_time / (double)cp.locals : 0.0);
  if (sim >= 0)
    printf("  vs simulated %9.3f ms: path - simulated = %.3f ms = overrun %.3f + hand-offs "
           "%.3f + local %.3f - slack %.3f\n",
           sim, ms * cp.span - sim, ms * (cp.op_time - cp.nominal), ms * cp.handoff_time,
           ms * cp.local_time, sim - ms * cp.nominal);
  kt_run_free(&run);
  return 0;
}
#endif
