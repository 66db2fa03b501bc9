/* Internal to src/train/: the straggler autopilot (docs/runtime.md, "The
 * autopilot"). The detector measures each step's ops and hand-overs
 * against the ones calibrated on the first clean steps and names the rank
 * or link more than KT__OVER over; the planner re-plans the run on the
 * costs the detector measured (a new order, a new partition) and says
 * whether the simulator predicts the new plan faster by more than the
 * switch costs. */
#ifndef KAITEN_TRAIN_AUTOPILOT_H
#define KAITEN_TRAIN_AUTOPILOT_H

#include "kaiten/train.h"

/* Each hand-over between ranks in a measured step whose consumer sat
 * waiting for it: its gap (the producer's end to the consumer's start)
 * into gaps (n_events + 1 entries), the ranks it went between (from[i],
 * to[i]; both NULL: not asked) and the consumer's event (consumer[i]; NULL:
 * not asked). Returns the count; 0 on ENOMEM (trainer.c). */
size_t kt__hop_gaps(const kt_timeline *t, const kt_schedule *s, double *gaps, int *from, int *to,
                    size_t *consumer);

/* ---- detection (detect.c) ---------------------------------------------------- */

#define KT__WARM_STEPS 1  /* steps left out first (caches, allocators, threads warming) */
#define KT__CALIB_STEPS 6 /* then the steps the costs are calibrated on */
#define KT__OVER 0.10     /* named: a rank's ops or a link's hand-overs this much over */
#define KT__NOISE 5.0 /* ... and this many median absolute deviations of the calibration's steps */
#define KT__CONFIRM 2 /* ... for this many steps in a row */
/* A rank whose ops grew only by the time its thread waited for a core (a
 * core shared with other programs) and that waited for one more than the
 * others did is named once that lasts this many steps */
#define KT__CONFIRM_WAIT 3
/* ... and a rank of a real model whose own (CPU) time is over: its ops'
 * CPU time wanders with the caches and memory bandwidth other programs
 * take (a synthetic op's own time is its timer's) */
#define KT__CONFIRM_CPU 3
/* A named link is planned for at the mean of its excess over its last
 * this many steps over (a delay that changes within steps: its expected
 * value, not the last step's draw) */
#define KT__DELAY_STEPS 4

typedef struct {
  int p, S;
  int *stage_rank;      /* S */
  int seen;             /* steps measured */
  double *samples;      /* KT__CALIB_STEPS x S x KT_OP_COUNT: each step's mean op (NAN: none) */
  double *link_samples; /* KT__CALIB_STEPS x p: each step's median hand-over per link */
  double *expected;     /* S x KT_OP_COUNT: the calibrated op durations (s; NAN: none seen) */
  double *base;         /* p: each link's calibrated hand-over (s; NAN: none seen) */
  double op_mean;       /* the mean calibrated op (s) */
  /* how far the calibration's steps wander: the median absolute deviation
   * of each rank's ratio (relative to the others') and of each link's
   * hand-over (s) */
  double *rank_spread, *link_spread;
  int clean; /* steps calibrated on (the last KT__CALIB_STEPS of them count) */
  int calibrated;
  /* the last step measured: each rank's ops over the calibrated (the
   * median op's ratio, over the other ranks' median: the step's pace; NAN
   * before calibration), each link's hand-overs
   * beyond the calibrated (the median's excess, s; NAN: none waited on) */
  double *factor, *excess;
  int *rank_since, *link_since; /* the first step (1-based) of each one's run of steps over;
                                   0: not over now (named: over KT__CONFIRM steps) */
  /* the first step of each rank's run of steps over by its ops' own time
   * (beyond its thread's waits for a core; named after KT__CONFIRM steps),
   * rank_since's runs also counting steps over by those waits (named after
   * KT__CONFIRM_WAIT) */
  int *own_since;
  /* the same of each op's own time (its wall time less the part of it
   * its thread waited for a core: kt_event.ready_wait while it ran): the
   * samples, the calibrated, the spreads, and each rank's factor at the
   * last step */
  double *own_samples, *own_expected, *own_spread, *own_factor;
  /* the last step: whether each rank's own op time was over (grew), and
   * whether its thread waited for a core more than the other ranks' did
   * (waited: KT__OVER more of its ops' time than their median) */
  int *grew, *waited;
  /* 0: a rank slowed only by waits for a core is never named (a run with
   * more compute threads than cores waits for them by design; set by the
   * session) */
  int name_waits;
  int confirm_own; /* steps a rank's own time must be over (KT__CONFIRM; real models:
                      KT__CONFIRM_CPU, set by the session) */
  /* each link's excess over its last KT__DELAY_STEPS steps over (a ring,
   * p x KT__DELAY_STEPS; s) and how many steps over it has in a row */
  double *recent;
  int *n_recent;
  int step;           /* the last step measured (1-based) */
  kt_run_fault fault; /* the worst one named at the last step (kind NONE: none) */
  /* after units moved, calibrating again: each rank's factor when they
   * moved (its steps' ops are divided by it: its clean cost), and the
   * fault named then, reported until the calibration is back */
  double *hold;
  kt_run_fault held;
} kt__detector;

kt_status kt__detector_init(kt__detector *d, const kt_schedule *s, kt_error *err);
void kt__detector_free(kt__detector *d);
/* Measures step (1-based) from its timeline t (every rank's events; K
 * rounds of s) and names what is over (d->fault, the worst). */
void kt__detector_step(kt__detector *d, const kt_timeline *t, const kt_schedule *s, int step);
/* After units moved: the stages' costs are calibrated again on the next
 * steps, each named rank's ops taken at their factor then (it stays
 * named, with that factor, while it stays as slow). */
void kt__detector_repartition(kt__detector *d);
/* Whether rank r / link l (kt_link_index) is named now: over for the
 * last KT__CONFIRM steps (a rank slowed by waits for a core:
 * KT__CONFIRM_WAIT). */
int kt__detector_rank_named(const kt__detector *d, int r);
int kt__detector_link_named(const kt__detector *d, int l);
/* The delay a plan takes for link l: the mean of its excess over its last
 * KT__DELAY_STEPS steps over where it is named (s), else 0. */
double kt__detector_link_delay(const kt__detector *d, int l);

/* ---- planning (autopilot.c) -------------------------------------------------- */

/* A plan must repay its switch within this many steps (or the steps left,
 * when fewer): what is measured now says little of the steps after (a
 * delay that changes every few hundred ms is another in a few steps) */
#define KT__PAYBACK_STEPS 4

typedef enum { KT__SWITCH_NONE, KT__SWITCH_REORDER, KT__SWITCH_REPARTITION } kt__switch_kind;

/* What the planner knows of the run. */
typedef struct {
  int p, v, m, k; /* layout, K rounds a step */
  kt_placement placement;
  kt_costs mem;     /* per-stage memory the run's orders are made with */
  double mem_limit; /* in mem's units (<= 0: zb-auto's default) */
  kt_step_sync sync;
  double tu;          /* the update per stage, measured (s) */
  int units;          /* model units a partition moves (0: none) */
  double *unit_w;     /* units: each unit's share of its stage's cost (relative) */
  double *unit_bytes; /* units: the bytes a unit moves with (weights, optimizer state) */
  int *offset;        /* S + 1: the units of each stage now */
  int original;       /* the plan switched to last was not the run's first */
  double tb_share;    /* of a full backward, the input gradient's part (0.5 when unknown) */
  double budget;      /* seconds a plan may take (0: the default search only) */
} kt__planner;

typedef struct {
  kt__switch_kind kind;
  kt_schedule sched;     /* the new compute order (kind != NONE) */
  int *partition;        /* S counts (REPARTITION), else NULL */
  double before, after;  /* predicted period of the plan now and the new one (s), as measured */
  double lower_bound;    /* of any order at the run's memory limit on those costs (s) */
  double cost;           /* predicted cost of the switch (s) */
  double replan_seconds; /* the search's time */
  double replan_cpu;     /* ... its CPU time */
  int adopted; /* faster by more than the switch costs over the steps left (KT__PAYBACK_STEPS at most) */
} kt__plan;

void kt__plan_free(kt__plan *p);
/* Plans the run from the current order cur (compute schedule), the
 * detector's measures and the steps left: out->kind NONE when nothing
 * beats the plan now. ENOMEM, the generators' errors. */
kt_status kt__autopilot_plan(const kt__planner *pl, const kt__detector *d, const kt_schedule *cur,
                             int steps_left, kt__plan *out, kt_error *err);

#endif
