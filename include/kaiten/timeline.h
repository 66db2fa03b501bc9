/* kaiten timeline: what happened (measured) or would happen (simulated).
 *
 * The simulator and the runtime both produce a kt_timeline, so every metric
 * and renderer works on both. Times are in the timeline's time unit (cost
 * units for simulations, seconds for measured runs); memory in its unit.
 */
#ifndef KAITEN_TIMELINE_H
#define KAITEN_TIMELINE_H

#include "kaiten/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  int32_t rank, stage, mb;
  uint8_t op;    /* kt_op */
  uint8_t flags; /* KT_ACTION_* of the action that ran */
  double start, end;
  int64_t bytes;    /* bytes this action sent to other ranks */
  double comm_time; /* time spent waiting on / moving data for it (measured runs; not the
                       * time its thread then waited for a core: ready_wait) */
  /* Measured runs: the time the action itself took its device: the thread's
   * CPU time for a real model, the cost it sleeps for a synthetic one (so
   * end - start - comm_time beyond it is time the thread was ready but had
   * no core). 0 where unknown (simulations, older files). */
  double cpu_time;
  /* Measured runs: the time the rank's thread was ready to run but had no
   * core since its previous compute action ended (the step's start for its
   * first): between the actions, after its input arrived and while it ran
   * (Linux's per-thread run delay; elsewhere its wall time beyond its CPU
   * time). 0 where unknown. */
  double ready_wait;
} kt_event;

/* The memory level of a rank from time t on (after the change at t). */
typedef struct {
  int32_t rank;
  double t;
  double value;
} kt_mem_sample;

typedef struct {
  int p;
  kt_event
      *events; /* compute actions, in per-rank execution order, ranks interleaved arbitrarily */
  size_t n_events, cap_events;
  /* Communication actions of a lowered program (SEND, RECV, WAIT_SEND, ...):
   * start = when the rank posted it, end = when it completed (a RECV: when
   * its data had arrived; a SEND: when it was delivered). Kept apart from
   * the compute events: they overlap compute and are not busy time. Each
   * rank's are in program order. */
  kt_event *comm;
  size_t n_comm, cap_comm;
  kt_mem_sample *mem;
  size_t n_mem, cap_mem;
  char time_unit[8]; /* "unit", "s" */
  char mem_unit[8];  /* "unit", "B" */
} kt_timeline;

kt_status kt_timeline_init(kt_timeline *t, int p, const char *time_unit, const char *mem_unit);
void kt_timeline_free(kt_timeline *t);
kt_status kt_timeline_add_event(kt_timeline *t, const kt_event *e);
/* Makes room for at least n_events events and n_mem samples. ENOMEM. */
kt_status kt_timeline_reserve(kt_timeline *t, size_t n_events, size_t n_mem);
kt_status kt_timeline_add_mem(kt_timeline *t, int rank, double time, double value);
kt_status kt_timeline_add_comm(kt_timeline *t, const kt_event *e);
/* dst (an initialised timeline; what it held is replaced, its storage
 * reused) becomes a copy of src: events, communication events, memory
 * samples, P and units. ENOMEM (dst then holds part of src). */
kt_status kt_timeline_copy(kt_timeline *dst, const kt_timeline *src);
/* Sorts events by (rank, start), memory samples by (rank, t) and
 * communication events by rank (each rank's keep their program order). */
void kt_timeline_sort(kt_timeline *t);

typedef struct {
  int rank;
  double start, end;  /* first action's start, last action's end */
  double busy;        /* sum of action durations */
  double idle;        /* period - busy: this rank's share of the bubble */
  double peak_memory; /* max memory level (timeline memory unit) */
  int peak_inflight;  /* max (stage, mb) pairs between F and their last backward op */
  size_t actions;
  int64_t bytes_sent;
  double comm_time;
} kt_rank_metrics;

/* One step's numbers (docs/schedules.md, "What a step is"). */
typedef struct {
  int p;
  double makespan; /* one step alone: the last action's end anywhere - the first's start anywhere */
  double span;     /* the largest per-rank span, max over ranks of (end - start): the
                      zero-bubble paper's cost */
  /* The step time in steady state, what a run takes per step: for a
   * simulation, kt_sim_period under the costs' step sync and step-end
   * costs; a timeline alone (kt_timeline_metrics, kt_metrics_finish): the
   * makespan, until kt_metrics_set_period says otherwise. */
  double period;
  int step_sync;       /* the kt_step_sync the period is for; -1: a timeline alone */
  double bubble_ratio; /* 1 - sum(busy) / (P * period) */
  double total_busy;
  kt_rank_metrics *ranks; /* p entries, owned */
} kt_metrics;

/* Computes the metrics of a timeline. ENOMEM. */
kt_status kt_timeline_metrics(const kt_timeline *t, kt_metrics *out, kt_error *err);
void kt_metrics_free(kt_metrics *m);
/* Fills makespan, span, total_busy, period (= makespan), bubble_ratio and
 * each rank's idle from the per-rank start, end and busy (for metrics
 * gathered without a timeline). */
void kt_metrics_finish(kt_metrics *m);
/* Sets the period (and step_sync) and what follows from it: bubble_ratio
 * and each rank's idle. */
void kt_metrics_set_period(kt_metrics *m, double period, int step_sync);

/* ---- coarse timelines ------------------------------------------------------
 * For runs too large to keep every event: events and memory samples are
 * streamed into BINS equal time bins over [t0, t1] per rank, and finish
 * turns the bins into an ordinary timeline that every renderer draws. Per
 * rank and bin it holds, per op, an event as long as the op's total time in
 * the bin (laid end to end from the bin's start); or, with dominant set,
 * one bin-wide event of the op that used most of the bin when the rank was
 * busy for at least half of it (for character cells). Memory: the highest
 * level of each bin. Memory samples of a rank must come in time order. */
typedef struct {
  int p, bins, dominant;
  double t0, bin;
  double *busy;  /* p * bins * KT_OP_COUNT: time per op */
  double *mem;   /* p * bins: highest level */
  double *level; /* p: the level after the rank's last sample */
  int *mem_bin;  /* p: the bin of that sample */
} kt_timeline_coarse;

kt_status kt_coarse_init(kt_timeline_coarse *c, int p, double t0, double t1, int bins, int dominant,
                         kt_error *err);
/* Sink callbacks (ctx = the kt_timeline_coarse). */
void kt_coarse_add_event(void *ctx, const kt_event *e);
void kt_coarse_add_mem(void *ctx, int rank, double t, double value);
/* Builds out (caller frees) and releases the bins. ENOMEM. */
kt_status kt_coarse_finish(kt_timeline_coarse *c, const char *time_unit, const char *mem_unit,
                           kt_timeline *out, kt_error *err);
void kt_coarse_free(kt_timeline_coarse *c);

#ifdef __cplusplus
}
#endif

#endif
