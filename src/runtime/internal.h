/* Internal to src/runtime/: the runtime and its per-rank workers. */
#ifndef KAITEN_RUNTIME_INTERNAL_H
#define KAITEN_RUNTIME_INTERNAL_H

#include <pthread.h>

#include "kaiten/runtime.h"

typedef struct kt__worker kt__worker;

/* Orders in flight at most: the step a fast rank starts, the one a slow
 * rank still runs, the one before them waiting to be validated, and a
 * flush (with room to spare). An order's results live in slot seq % KT__RING. */
#define KT__RING 5
#define KT__STEPS_IN_FLIGHT 3

/* What the workers are asked to do (driver.c): a step, or a flush that only
 * validates the step still pending (post-validation, validate.c). */
typedef struct {
  int seq; /* its place among the runtime's orders: slot seq % KT__RING, and its messages' tags */
  int step, update;
  int speculate; /* the next step follows without a barrier: this one's update may run
                    on what the rank has, checked behind it */
  int flush;
  int stop_on_nonfinite; /* a non-finite step cancels the one after it */
  int vote;              /* the caller's stop request, carried to every rank */
  const kt_microbatch *data;
  double submitted; /* kt_now() */
} kt__order;

/* A step as one worker knows it once it is validated. */
typedef struct {
  int seq, step; /* the order and the step these figures are for */
  int valid;     /* validated: the figures are final */
  int cancelled; /* a non-finite step before it stopped it before its update */
  double loss, grad_norm, lr;
  int nonfinite, nonfinite_stage;
  const char *nonfinite_what;
  int rollbacks;      /* times it was run again after the step before it was rolled back */
  int waited;         /* its update waited for its check (under a barrier, or clipped before) */
  int vote;           /* the winner of the stop requests it carried (kt__stop_winner) */
  double begin, done; /* kt_now(): the order's start, its update's end */
  int64_t bytes_sent; /* the worker's transport since its start, at the step's end */
  double comm_seconds;
  double sync_seconds, tail_seconds;
} kt__step_out;

struct kt_runtime {
  kt_runtime_config cfg;
  kt_schedule sched_copy; /* the compute schedule (placement, stages, sizes) */
  kt_schedule program;    /* what the workers run: its lowered form */
  int P, V, M, S, D, K;
  int *unit_offset; /* S + 1 */
  int n_parts;      /* what the global norm is summed over: model units, else stages */
  int posts;        /* the transport posts receives: the program's receives come first */
  int plans;        /* plans kt_runtime_replan has installed */
  /* faults (kt_runtime_config.faults): messages between pipeline ranks
   * carry when they are due (stamped), and a trace's clock starts when its
   * step is submitted (fault_origin, kt_now(); 0: not yet) */
  int stamped;
  double fault_origin;
  kt__worker *workers; /* n_local */
  int n_local;
  kt_transport *handles; /* n_local, owned when owns_transport */
  int owns_transport;
  kt_timeline timeline; /* replica 0, merged after each step */
  /* Event times count from here (kt_now()): set when a step starts after a
   * barrier (with other processes: right after the transport's barrier,
   * so every process counts from the same moment) and kept while steps
   * follow each other without one. */
  double t_origin;
  /* the orders (driver.c): submitted so far, and the step orders whose
   * results were taken */
  kt__order orders[KT__RING];
  int submitted, completed;
  double last_done;    /* when the last completed step's last update ended */
  int last_speculated; /* it was followed without a barrier */
  int64_t bytes_mark;  /* local traffic when the last step completed */
  double comm_mark;
  /* a stop asked for while the caller waits (kt_runtime_set_poll): the
   * steps no worker began were taken back (retracted, from retract_step) */
  int (*poll)(void *ctx);
  void *poll_ctx;
  int retracted, retract_step;
  /* persistent worker threads (more than one local rank) */
  pthread_t *threads;
  int n_threads, shutdown;
  pthread_mutex_t lock;
  pthread_cond_t wake, done;
};

/* One action of a rank's program as the worker runs it (resolve.c): its
 * chunk, its input (none, or a result of stage `from` handed over on this
 * rank or received from in_peer under in_tag) and its result (none, or
 * kept on this rank or sent to out_peer under out_tag); tags are round
 * 0's (kt_tag_round), slots index the outbox and recv_event, pairs the
 * hand-over arrays. */
typedef struct {
  int chunk;
  kt_output input, output;
  int in_peer, out_peer;   /* world ranks, -1: none */
  int in_local, out_local; /* the peer is this rank: a hand-over */
  uint64_t in_tag, out_tag;
  size_t in_slot, out_slot, in_pair, out_pair;
} kt__resolved;

struct kt__worker {
  kt_runtime *rt;
  kt__resolved *plan;     /* one per action of its program (kt__worker_resolve) */
  const kt__resolved *at; /* the running action's */
  kt_transport *t;
  int world_rank, stage_rank, replica;
  int cpu;               /* the core its thread runs on, or -1: not pinned */
  kt_chunk **chunk;      /* [V], chunk c holds stage kt_rank_chunk_stage(stage_rank, c) */
  float **opt_state;     /* [V] optimizer state per chunk, or NULL */
  unsigned char **decay; /* [V] 1 where weight decay applies (matrices), per parameter */
  size_t *opt_n;         /* [V] */
  float *in_buf, *out_buf, *dout_buf, *din_buf; /* boundary scratch */
  unsigned char *stamp_buf; /* a stamped message: the tensor, then when it is due (a double) */
  size_t boundary_elems;
  float **act_handoff, **grad_handoff; /* [S * M] tensors handed over inside the rank */
  float **outbox;                      /* [V * M * 2] results waiting for their SEND (F, BI) */
  size_t *recv_event;          /* [V * M * 2] the comm event of the last RECV posted there */
  const kt_action *next, *end; /* the actions after the running one: [next, end) */
  /* A result whose SEND comes before any action that could touch the
   * compute buffer: sent from that buffer itself (no copy into the outbox);
   * slot is its outbox index. */
  const float *direct;
  size_t direct_slot;
  /* The transport's buffer the running action computes its result into
   * (result_buffer), until its SEND hands it over; NULL: none. */
  float *lent_out;
  double loss_sum;
  double wait_cpu;   /* CPU time the running action spent receiving its input */
  double input_at;   /* when the running action's input arrived (0: none received) */
  double wait_ready; /* time it then waited for a core (its run delay in the wait) */
  /* when the thread's last compute action ended: the clock, its CPU time
   * and its run delay (the time it was ready without a core) */
  double t_mark, cpu_mark, ready_mark;
  int ready_fd;             /* the thread's /proc schedstat (-1: its run delay is unknown) */
  kt_timeline ev[KT__RING]; /* events and memory samples, per order slot */
  kt_timeline *events;      /* the running order's (ev[seq % KT__RING]) */
  kt__step_out out[KT__RING];
  /* the running order */
  int step, update;
  const kt_microbatch *data;
  int next_order; /* the next order this worker runs (driver.c) */
  int began;      /* it began order next_order (driver.c, lock held) */
  kt_status status;
  kt_error err;
  /* non-finite values this step: per chunk, its forward output (or loss) */
  unsigned char fwd_bad[KT_MAX_CHUNKS];
  /* ... and its gradients, found by kt__step_norm_parts */
  unsigned char grad_bad[KT_MAX_CHUNKS];
  /* post-validation (validate.c): the order (seq) whose update may have
   * run on what a rank had and is not checked yet (-1: none), the weights,
   * optimizer state and gradients from before it, and the step's records
   * (one per world rank) */
  int pending;
  int pending_own; /* this rank's own update of it ran before the check */
  int last_wrong;  /* the last step checked needed it: clipped, or not finite */
  float **keep_params, **keep_opt, **keep_grads; /* [V] */
  unsigned char *records;                        /* world * kt__record_bytes(rt) */
};

/* Runs an order on this worker (worker.c): K rounds of its action list,
 * the validation of the step before it, then the step's end (validate.c). */
/* Resolves the rank's program once (resolve.c). ENOMEM. */
kt_status kt__worker_resolve(kt__worker *w, kt_error *err);
kt_status kt__worker_order(kt__worker *w, const kt__order *o, kt_error *err);
/* The K rounds of the running step's actions (worker.c). */
kt_status kt__worker_rounds(kt__worker *w, kt_error *err);

/* ---- the step's end (optim.c) ---- */
/* Tied-embedding gradients summed and the data-parallel all-reduce;
 * *sync += seconds in collectives. */
kt_status kt__step_reduce(kt__worker *w, double *sync, kt_error *err);
/* In one pass over the gradients: their scaling by 1/(K*M*D), this rank's
 * share of the squared global norm (the tied head copy left out) by part
 * (rt->n_parts: each model unit, or each stage of a model without units;
 * 0 where the rank holds none), returned in total, and which chunks'
 * gradients are not finite (w->grad_bad). */
double kt__step_norm_parts(kt__worker *w, double *parts);
/* 1 where a stage's gradients on this rank are not finite (flags[S]), as
 * kt__step_norm_parts found them. */
void kt__step_grad_flags(kt__worker *w, unsigned char *flags);
/* The optimizer update of every chunk with the gradients scaled by clip:
 * the chunks' own, or grads[V] (a copy kept from the step they belong to). */
void kt__step_update(kt__worker *w, int step, float clip, float *const *grads);
/* The update of a step run ahead of its check (clip 1), keeping its
 * weights, gradients and optimizer state first (keep_params, keep_grads,
 * keep_opt: what a rollback restores), block by block in the same pass. */
void kt__step_update_keeping(kt__worker *w, int step);
kt_status kt__optim_alloc_state(kt__worker *w, kt_error *err);
/* The weight-decay masks of the worker's chunks (w->decay, allocated). */
kt_status kt__optim_decay_masks(kt__worker *w, kt_error *err);

/* ---- post-validation (validate.c) ---- */
/* The step's end after its actions: the step pending before it validated
 * (*redo: it was rolled back, so this step's actions ran on wrong weights
 * and must run again), then this step's reduction, its record sent to
 * every rank, and its update: checked at once, or on what the rank has and
 * checked behind it (o->speculate). */
kt_status kt__step_validate_pending(kt__worker *w, const kt__order *o, int *redo, kt_error *err);
kt_status kt__step_end(kt__worker *w, const kt__order *o, kt_error *err);
/* Room for post-validation (rollback copies, records). ENOMEM. */
kt_status kt__step_alloc(kt__worker *w, kt_error *err);
void kt__step_free(kt__worker *w);
/* The winner of stop requests (a failure first, then SIGTERM, SIGINT,
 * SIGUSR1, then the smallest reason). */
int kt__stop_winner(const int *votes, int n);

/* ---- the driver (driver.c) ---- */
/* A step order's figures before it runs (the lock held while threads run). */
void kt__step_out_begin(kt__worker *w, const kt__order *o);
/* Marks slot's step validated on this worker (wakes whoever waits for it). */
void kt__worker_validated(kt__worker *w, kt__step_out *out);
/* Stops and joins the worker threads. */
void kt__driver_stop(kt_runtime *rt);

/* Synthetic chunk (synthetic.c): F/I/W sleep their cost, tensors of
 * act_bytes; units [first, first + n) of a model of syn_units (else one
 * unit, the stage). */
kt_status kt__synthetic_chunk_create(const kt_runtime_config *cfg, int stage, int n_stages,
                                     int first, int n_units, int n_microbatches, kt_chunk **out,
                                     kt_error *err);

/* Owner world rank of a stage for a replica. */
static inline int kt__stage_world_rank(const kt_runtime *rt, int stage, int replica) {
  return kt_world_rank(kt_stage_rank(&rt->sched_copy, stage), replica, rt->D);
}

/* The program the workers run for s (runtime.c): a lowered schedule as
 * given, or the lowering of a compute-only one (receives first when the
 * transport posts them); sched receives its compute actions. */
kt_status kt__build_program(const kt_schedule *s, int posts, kt_schedule *sched,
                            kt_schedule *program, kt_error *err);
/* A worker's chunk for stage (runtime.c): the model's units [first, first
 * + n), a synthetic one, one of the caller's own or an empty slot (stage
 * < 0). */
kt_status kt__chunk_for(kt_runtime *rt, int stage, int first, int n, kt_chunk **out, kt_error *err);
/* The worker's boundary buffers for its chunks' largest tensor (runtime.c). */
kt_status kt__worker_buffers(kt__worker *w, kt_error *err);
/* Sleeps until kt_now() reaches t (worker.c). */
void kt__sleep_until(double t);

/* What an op of a synthetic chunk sleeps for micro-batch mb (seconds). */
double kt__synthetic_cost(const kt_chunk *c, kt_op op, int mb);

/* Per worker thread in synthetic mode: 1 ns timer slack for precise sleeps. */
void kt__synthetic_thread_setup(void);
#endif
