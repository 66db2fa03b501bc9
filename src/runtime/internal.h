/* Internal to src/runtime/: the runtime and its per-rank workers. */
#ifndef KAITEN_RUNTIME_INTERNAL_H
#define KAITEN_RUNTIME_INTERNAL_H

#include "kaiten/runtime.h"

typedef struct kt__worker kt__worker;

struct kt_runtime {
  kt_runtime_config cfg;
  kt_schedule sched_copy;  /* the compute schedule (placement, stages, sizes) */
  kt_schedule program;     /* what the workers run: its lowered form */
  int P, V, M, S, D, K;
  int *unit_offset;        /* S + 1 */
  kt__worker *workers;     /* n_local */
  int n_local;
  kt_transport *handles;   /* n_local, owned when owns_transport */
  int owns_transport;
  kt_timeline timeline;    /* replica 0, merged after each step */
  double step_t0;
};

struct kt__worker {
  kt_runtime *rt;
  kt_transport *t;
  int world_rank, stage_rank, replica;
  int cpu;                 /* the core its thread runs on, or -1: not pinned */
  kt_chunk **chunk;        /* [V], chunk c holds stage kt_rank_chunk_stage(stage_rank, c) */
  float **opt_state;       /* [V] optimizer state per chunk, or NULL */
  unsigned char **decay;   /* [V] 1 where weight decay applies (matrices), per parameter */
  size_t *opt_n;           /* [V] */
  float *in_buf, *out_buf, *dout_buf, *din_buf; /* boundary scratch */
  size_t boundary_elems;
  float **act_handoff, **grad_handoff; /* [S * M] tensors handed over inside the rank */
  float **outbox;          /* [V * M * 2] results waiting for their SEND (F, BI) */
  size_t *recv_event;      /* [V * M * 2] the comm event of the last RECV posted there */
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
  double wait_cpu;         /* CPU time the running action spent receiving its input */
  double input_at;         /* when the running action's input arrived (0: none received) */
  double wait_ready;       /* time it then waited for a core (its run delay in the wait) */
  /* when the thread's last compute action ended: the clock, its CPU time
   * and its run delay (the time it was ready without a core) */
  double t_mark, cpu_mark, ready_mark;
  int ready_fd;            /* the thread's /proc schedstat (-1: its run delay is unknown) */
  int fresh_thread;        /* runs in a thread started for this step (its clocks start at 0) */
  kt_timeline events;      /* this worker's events and memory samples for the step */
  /* step inputs and outputs (threads mode) */
  int step, update;
  const kt_microbatch *data;
  kt_status status;
  kt_error err;
  double grad_norm, lr, loss;
  /* the step's end (finish_step): seconds in collectives, and the rest
   * (gradient scaling, norms, the optimizer update) */
  double sync_seconds, tail_seconds;
  /* non-finite values this step: per chunk, its forward output (or loss) */
  unsigned char fwd_bad[KT_MAX_CHUNKS];
  int nonfinite, nonfinite_stage; /* after finish_step: the step was not applied */
  const char *nonfinite_what;
};

/* Runs one optimizer step on this worker: K rounds of its action list, then
 * the gradient synchronisation and the update. */
kt_status kt__worker_step(kt__worker *w, kt_error *err);

/* Gradient synchronisation, clipping and the optimizer update (optim.c). */
kt_status kt__worker_finish_step(kt__worker *w, kt_error *err);
kt_status kt__optim_alloc_state(kt__worker *w, kt_error *err);

/* Synthetic chunk (synthetic.c): F/I/W sleep their cost, tensors of act_bytes. */
kt_status kt__synthetic_chunk_create(const kt_runtime_config *cfg, int stage, int n_stages,
                                     int n_microbatches, kt_chunk **out, kt_error *err);

/* Owner world rank of a stage for a replica. */
static inline int kt__stage_world_rank(const kt_runtime *rt, int stage, int replica) {
  return kt_world_rank(kt_stage_rank(&rt->sched_copy, stage), replica, rt->D);
}



/* Per worker thread in synthetic mode: 1 ns timer slack for precise sleeps. */
void kt__synthetic_thread_setup(void);
#endif
