/* Internal to src/train/: the session (kaiten/train.h's kt_session) and
 * the pieces of it that live in their own files. */
#ifndef KAITEN_TRAIN_SESSION_INTERNAL_H
#define KAITEN_TRAIN_SESSION_INTERNAL_H

#include "kaiten/train.h"
#include "train/autopilot.h"

/* An agreed stop that is a failure somewhere, not a request. */
#define KT__STOP_FAILED (-1)

struct kt_session {
  kt_session_params p; /* the caller's, resolved (defaults, resume) */
  kt_session_failure failed;
  int opened, ran;
  int world_rank, world_size, first_step;
  kt_schedule sched;   /* the compute schedule */
  kt_schedule program; /* the caller's lowered program, run as written (else empty) */
  int *partition;      /* S unit counts, or NULL: balanced */
  kt_runtime *rt;
  kt_transport *mpi_t;
  kt_data_source *data;     /* the session's own source (NULL: none, or the caller's) */
  kt_links *links;          /* the cluster's (NULL: none) */
  kt_session_resume resume; /* resuming: the run read back */
  int have_resume;
  kt_rundir *rd;     /* rank 0 with a run directory */
  kt_run_config cfg; /* config.json with its segments */
  int *seg_partition;
  kt_checkpoint_meta meta; /* what every checkpoint of the run carries */
  kt_status fail_status;   /* a failure inside the step callback */
  kt_error fail_err;
  int stop;                   /* agreed: 0, a reason, or KT__STOP_FAILED */
  kt_run_rank_step *ranks;    /* the step's per-rank record (P entries) */
  kt_costs mem;               /* the model's bytes per stage of sched (n_stages 0: none) */
  double peak_1f1b;           /* 1F1B's predicted peak on the model (bytes; 0: none) */
  int cores, compute_threads; /* this process's cores and ranks x BLAS threads */
  kt_schedule rounds;         /* a step: K rounds of the compute schedule (the idle split's) */
  kt_idle_split *idle;        /* the last step's idle split per rank (P entries) */
  kt_session_result result;
  double gen_limit; /* the memory limit the schedule was generated under (its units) */
  /* the straggler autopilot (session_autopilot.c) */
  kt__detector det; /* p = 0: not measuring */
  kt__planner pl;
  kt__plan plan;                  /* adopted, switched to at the next barrier (kind NONE: none) */
  kt_run_switch switched;         /* the last switch, for the next step's record */
  unsigned long long planned_for; /* what was named when the last plan was made */
  double last_step_seconds;
  int remote_plan; /* MPI: world rank 0 has a plan to switch to (every rank knows) */
};

/* The autopilot (session_autopilot.c): set up once the runtime runs
 * (the detector always, the planner with autopilot); each step measured
 * into its record (and a plan made when what is named changed); whether a
 * switch waits for the next barrier; the switch itself (kt_train_config's
 * between_steps, ctx the session). */
kt_status kt__session_autopilot_init(kt_session *s, kt_error *err);
void kt__session_autopilot_free(kt_session *s);
void kt__session_autopilot_step(kt_session *s, const kt_train_progress *p, kt_run_step *rec);
int kt__session_autopilot_due(const kt_session *s);
kt_status kt__session_autopilot_switch(void *ctx, kt_runtime *rt, int next, kt_error *err);

/* Every rank's stop request (0, 1..KT_STOP_MAX or KT__STOP_FAILED) agreed
 * on: MPI, a collective; threads, the request itself (session_run.c). */
int kt__session_agree(kt_session *s, int request);

/* The run directory's records (session_record.c): config.json's run, the
 * layout segment that starts at first_step (partition_buf: S ints), each
 * pipeline rank's share of a step (at most cap; -1 on failure) and the
 * traced step's timeline.json and trace.json. */
void kt__session_run_config(const kt_session *s, kt_run_config *c);
kt_run_segment kt__session_segment(const kt_session *s, int first_step, int *partition_buf);
int kt__session_step_ranks(const kt_timeline *t, kt_run_rank_step *out, int cap);
kt_status kt__session_write_timelines(kt_session *s, kt_error *err);
/* The memory limit on the whole peak in bytes (kt_session_info.mem_limit_bytes). */
double kt__session_limit_bytes(const kt_session *s);
/* Rank 0 opens (and locks) the run directory and writes config.json with
 * the run's segments: the earlier ones, then this session's. */
kt_status kt__session_open_run_dir(kt_session *s, kt_error *err);

/* The model's memory (session_memory.c): each of the S stages' bytes into
 * mem, and 1F1B's predicted peak at P, M on the same model into peak_1f1b. */
kt_status kt__session_memory(kt_session *s, int S, int P, int M, kt_error *err);
/* ENOMEM with a one-line reason when a run of threads in this process
 * needs more memory than the machine has available (Linux's MemAvailable):
 * the activations at the schedule's predicted peak on every rank and
 * replica, and the parameters and gradients, a lower bound on what it
 * allocates (full micro-batches only: not with packed documents). Past it
 * a run would be killed mid-step. */
kt_status kt__session_memory_fits(kt_session *s, kt_error *err);
/* The memory limit the generator of s->p.kind keeps to with costs gen (V
 * chunks), on what actions keep: a limit in bytes or as a fraction is on
 * the peak, so less the largest op's scratch; 0 for none. EINVAL naming
 * the smallest fraction of 1F1B's peak it can keep to when it is below. */
kt_status kt__session_mem_limit(const kt_session *s, int v, const kt_costs *gen, double *out,
                                kt_error *err);

/* 1F1B's predicted period on the last step's calibrated costs into
 * s->result.period_1f1b (session_price.c). ENOMEM, the simulator's. */
kt_status kt__session_price(kt_session *s, kt_error *err);

/* Emits a note through the caller's callback. */
void kt__session_note(const kt_session *s, kt_note_kind kind, const char *name, long long count,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* A step taken (mb_costs.c): its real tokens (what packed micro-batches
 * hold; fixed without data or for fixed windows) into out->tokens and
 * p->tokens_per_s, and its micro-batches (mbs: the step's D K M, NULL
 * without data; replica 0's K M recorded, in run order) with each stage's
 * measured costs from the step's timeline tl into out->mb_costs. ENOMEM. */
kt_status kt__step_record(kt_train_result *out, const kt_train_config *cfg,
                          const kt_microbatch *mbs, double fixed, const kt_timeline *tl,
                          kt_train_progress *p, kt_error *err);
void kt__free_mb_costs(kt_train_result *out);
/* Each (stage, micro-batch)'s own costs from measured step t into out,
 * where its micro-batches differ by design (calibrate_costs.c). */
kt_status kt__calibrate_mb(const kt_timeline *t, const kt_schedule *s, kt_costs *out,
                           kt_error *err);

/* The GPT's documents (session_docs.c): their source with its token model
 * and balanced's order for the run's schedule; after each step, on this
 * session's second, the attention share calibrated on it (balanced on
 * threads, none given or recorded) from KT_DATA_KEEPS steps on, recorded
 * in config.json. EINVAL, ENOMEM, EIO. */
kt_status kt__session_docs_open(kt_session *s, kt_error *err);
kt_status kt__session_docs_step(kt_session *s, const kt_train_progress *tp, kt_error *err);

/* Seq1F1B (seq_chunks.c): 1F1B over M micro-batches of K chunks each (mb
 * j K + k), every micro-batch's chunks backward in reverse; validated.
 * ENOMEM. */
kt_status kt__seq1f1b(kt_schedule *s, int P, int M, int K, kt_error *err);

#endif
