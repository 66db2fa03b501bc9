/* Internal to src/sim/: the state of one simulation (sim.c advances it,
 * state.c sets it up, par.c runs it on two threads). */
#ifndef KAITEN_SIM_STATE_H
#define KAITEN_SIM_STATE_H

#include "sim/internal.h"
#include "sim/pairs.h"

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

/* A two-thread run's half (sim/par.c): the ranks one thread advances, its
 * own table of the results made and read within it (stages counted from
 * first_stage), and channels for the results that cross between the
 * halves: one per (result, stage) made on one side and read on the other,
 * m slots each holding the time's bits, NaN until it is published. */
typedef struct {
  int lo, hi;                         /* ranks [lo, hi) */
  int first_stage;                    /* the table's stage 0 */
  int m;                              /* slots per channel */
  const int *chan_of;                 /* result * S + stage -> channel, -1: none */
  _Atomic uint64_t *chan;             /* channel * m + mb */
  const _Atomic uint64_t *pending;    /* the slot an action just found empty */
  int n_wait, cap_wait;               /* ranks parked on an empty slot, */
  int *wait_rank;                     /* each */
  const _Atomic uint64_t **wait_slot; /* and the slot it waits for */
  _Atomic uint64_t out;               /* results published to the other half */
  _Atomic uint64_t seen; /* the other half's out when this one last had nothing to run */
  _Atomic int finished;  /* it publishes no more */
  _Atomic int sleeping;  /* it sleeps until the other half notifies it */
} kt__sim_half;

/* After h published, went idle or finished: wakes the other half if it
 * sleeps (sim/par.c). */
void kt__sim_par_notify(kt__sim_half *h);

/* A slot's time, NAN while it is not published (acquire: the time is all
 * the reader needs). */
static inline double kt__sim_slot_time(const _Atomic uint64_t *slot) {
  uint64_t bits = atomic_load_explicit(slot, memory_order_acquire);
  double t;
  memcpy(&t, &bits, sizeof t);
  return t;
}

/* One stage's costs, looked up once: duration and memory change per op
 * (indexed by kt_op), and the scratch an op holds while it runs. */
typedef struct {
  double dur[KT_OP_COUNT], mem[KT_OP_COUNT], transient;
} stage_costs;

/* One rank's running state, kept together: a visit touches one aligned
 * pair of cache lines for it, which the hardware fetches as one (1F1B at
 * P=1024: seven arrays indexed by rank were seven lines; the metrics
 * apart, 80 bytes a rank, were two more). */
typedef struct {
  _Alignas(128) const kt_action *actions; /* the schedule's, and how many */
  size_t n, pos;                          /* pos: the next one */
  double free_at;                         /* end of the previous action */
  double mem;                             /* running memory */
  size_t waits; /* the result its next compute action waits for (RESULT_KEY) */
  int inflight; /* pairs between F and their last backward op (with metrics) */
  /* its metrics as they accumulate (kt_rank_metrics; copied out at the end) */
  _Alignas(64) double start, end, busy, peak_memory;
  size_t actions_run;
  int64_t bytes_sent;
  int peak_inflight;
} rank_run;

typedef struct {
  const kt_schedule *s;
  const kt_costs *c;
  kt_links *links;      /* the simulation's own copy of c->links (NULL: none) */
  size_t *first_action; /* with c->action_time: rank -> its first entry */
  int S, lowered;
  /* compute-only without links, a timeline, a sink, per-action or
   * per-micro-batch costs: lone actions take run_plain (sim.c) */
  int plain;
  int i_ops; /* some action makes or reads an I (else pairs keep F and BI only) */
  double comm;
  stage_costs *cost;       /* per stage, or per (stage, mb) with per-micro-batch costs */
  int *cost_ix;            /* stage -> the stage whose entries it reads: the first of a
                            * few alike (a visit then finds its costs in cache) */
  int cost_mbs;            /* micro-batches per stage in cost: M, or 1 (a stage's mbs alike) */
  kt_metrics *met;         /* metrics accumulated as actions run (NULL: not asked) */
  const kt_sim_sink *sink; /* receives events and memory samples (NULL: none) */
  kt__pairs done;          /* when each (stage, mb) pair's results are available */
  int *owner;              /* stage -> rank (no division in the hot loop) */
  rank_run *rk;            /* per rank */
  int sent;                /* messages the running compute action sent to other ranks */
  kt_rank_queue work;      /* ranks whose next action may have become ready */
  kt__sim_half *half;      /* a two-thread run's half this state advances (NULL: one thread) */
  int stage0;              /* done's stage 0 (a half's first stage; 0: one thread) */
  /* lowered programs only, per message (result F or BI of a pair): when its
   * SEND ran, when its RECV was posted, and the RECV's comm event */
  double *sent_at, *posted_at;
  size_t *recv_event;
} sim_state;

/* Per-pair tables micro-batch-major: a result travels stage to stage and
 * the simulation follows it (latest()), so visits touch neighbouring cells. */
#define PREFETCH_AHEAD 16 /* actions: a little over two cache lines */
#define PREFETCH_PAIRS 2  /* actions: a visit runs one and finds the next waiting */
#define IDX(st, stage, mb) ((size_t)(mb) * (size_t)(st)->done.row + (size_t)(stage))
#define MSG(st, result, stage, mb) \
  ((size_t)(result) * (size_t)(st)->s->m * (size_t)(st)->done.row + IDX(st, stage, mb))
/* A result named by one number (0: none), for comparing what a rank waits
 * for with what was made. */
#define RESULT_KEY(st, result, stage, mb) \
  (((size_t)(mb) * (size_t)(st)->S + (size_t)(stage)) * KT_OUT_COUNT + (size_t)(result) + 1)

/* The rank woken last, taken off the queue: the simulation follows each
 * result to its consumer while the lines it wrote are in the cache (1F1B
 * P=1024 M=16384: 2.3 s against 3.0 first-woken-first). The order changes
 * no time; with links (transfers booked in the order runs reach them) the
 * ranks go first-woken-first, as the link model was measured. */
static inline int kt__sim_latest(kt_rank_queue *q) {
  if (q->len == 0) return -1;
  int at = q->head + --q->len;
  int r = q->ring[at >= q->n ? at - q->n : at];
  q->queued[r] = 0;
  return r;
}

/* Whether action a is within S stages and m micro-batches (a
 * communication action of a whole stage names no micro-batch). */
static inline int kt__sim_action_ok(const kt_action *a, int S, int m) {
  int per_stage = a->op >= KT_OP_COUNT && !kt_op_has_mb(a->op);
  return a->op < KT_OP_ANY_COUNT && a->stage >= 0 && a->stage < S &&
         (per_stage || (a->mb >= 0 && a->mb < m));
}

/* Every action within the schedule's stages and micro-batches; st->lowered:
 * it sends and receives; st->i_ops: it runs I or W; reads[mb]: the inputs
 * mb's actions read. */
kt_status kt__sim_check_actions(const kt_schedule *s, sim_state *st, int *reads, kt_error *err);
/* The tables of st every run reads (s, c and S set): ranks, owners, costs.
 * ENOMEM, EINVAL (st then holds what kt__sim_state_free frees). */
kt_status kt__sim_state_init(sim_state *st, kt_error *err);
/* The one-thread run's tables (check_actions done): the pairs, and a
 * lowered program's messages; reads: check_actions's count, taken over.
 * ENOMEM. */
kt_status kt__sim_tables_init(sim_state *st, int *reads, kt_error *err);
void kt__sim_state_free(sim_state *st);
/* The rows of micro-batches a compute-only run keeps (sim/pairs.h). */
int kt__sim_window_rows(int S);

/* Runs rank's actions until one is not ready (sim.c). */
kt_status kt__sim_advance(sim_state *st, kt_timeline *tl, int rank);

/* A run of st (set up, ranks released, metrics zeroed; compute-only, no
 * links, timeline or sink) on two threads, each advancing half of the
 * ranks: 1 when it ran to the end, 0 when it was not tried or did not end
 * (a deadlock, out of memory: st's ranks and metrics are then to be reset
 * and run on one thread). The answer is the one-thread run's, bit for bit:
 * an action's start only depends on finished results. */
int kt__sim_par_run(sim_state *st);
/* Whether kt__sim_par_run would try s (large enough, threads at hand);
 * it then checks the actions itself, the one-thread run after it. */
int kt__sim_par_wanted(const kt_schedule *s);
/* The fewest actions and ranks a schedule has for kt__sim_par_run to use
 * two threads (tests lower them to compare both runs on small schedules).
 * The halves exchange results about once per micro-batch step: with few
 * ranks a half has too little to run between exchanges (1F1B P=8,
 * M=16384 took 9x longer on two threads). */
extern size_t kt__sim_par_min_actions;
extern int kt__sim_par_min_ranks;
/* Two-thread runs that ran to the end (tests check their path was taken). */
extern _Atomic size_t kt__sim_par_runs;

#endif
