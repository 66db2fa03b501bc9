/* kaiten runtime: executes a schedule for real. One worker per rank runs its
 * action list in order on real model chunks, exchanging real activations and
 * gradients through a transport; the run is measured into the same timeline
 * type the simulator produces.
 *
 * One optimizer step = K rounds of the schedule (gradient accumulation), then:
 * tied-embedding gradients summed, data-parallel all-reduce, gradients scaled
 * once by 1/(K*M*D), global-norm clipping, and the optimizer update.
 *
 * Steps follow each other with a barrier (every rank waits for the global
 * norm, then updates) or without one (KT_STEP_OVERLAP, post-validation): a
 * rank updates its own chunks as soon as its last action of the step ends,
 * with the gradients as they are, and goes on with the next step; the
 * global norm and a non-finite check come from every rank's record of the
 * step, read at the end of the next step's actions. When they say the
 * update was wrong (clipping applies, or a value is not finite) every rank
 * restores its weights and optimizer state from before it, applies the
 * right update (or none) and runs the next step's actions again: losses and
 * weights are bitwise those of the barrier. docs/runtime.md, "What a step is".
 */
#ifndef KAITEN_RUNTIME_H
#define KAITEN_RUNTIME_H

#include "kaiten/costs.h"
#include "kaiten/model.h"
#include "kaiten/schedule.h"
#include "kaiten/timeline.h"
#include "kaiten/transport.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { KT_OPTIM_SGD, KT_OPTIM_ADAMW, KT_OPTIM_COUNT } kt_optim_kind;

const char *kt_optim_name(kt_optim_kind k);
int kt_optim_from_name(const char *name);

typedef struct {
  kt_optim_kind kind;
  double lr;                              /* peak learning rate */
  double momentum;                        /* SGD */
  double beta1, beta2, eps, weight_decay; /* AdamW (decoupled decay) */
  double grad_clip;                       /* max global gradient norm; 0 = off */
  int warmup_steps;                       /* linear warm-up from 0 */
  int decay_steps; /* cosine decay to min_lr_ratio * lr at this step; 0 = constant */
  double min_lr_ratio;
} kt_optim_config;

void kt_optim_config_default(kt_optim_config *o);
/* Learning rate at optimizer step `step` (0-based). */
double kt_optim_lr(const kt_optim_config *o, int step);

/* Builds the chunk of pipeline stage `stage` (of n_stages) of a model of
 * the caller's own, for micro-batches of micro_batch samples with up to
 * n_microbatches of them stashed at once (kaiten/model_impl.h: ops, params
 * and grads of n_params floats, in_elems/out_elems, is_first/is_last, and
 * stash_bytes kept current for the memory measurement). */
typedef kt_status (*kt_chunk_factory)(void *ctx, int stage, int n_stages, int micro_batch,
                                      int n_microbatches, kt_chunk **out, kt_error *err);

typedef struct {
  const kt_schedule *schedule; /* P, V, M, placement and the action lists */
  int data_parallel;           /* D replicas */
  int grad_accum;              /* K rounds of M micro-batches per optimizer step */
  int micro_batch;             /* b samples per micro-batch */
  kt_model_config model;
  const int *partition; /* S unit counts (stage order), NULL = balanced */
  /* A model of the caller's own instead of `model` (NULL: the built-in
   * model): every stage's chunk comes from make_chunk(chunk_ctx, ...). It
   * has no units, so no partition and no checkpoints; weight decay applies
   * to all its parameters. */
  kt_chunk_factory make_chunk;
  void *chunk_ctx;
  kt_optim_config optim;
  /* Synthetic workload: every F/I/W sleeps its cost and sends act_bytes. */
  int synthetic;
  double syn_tf_ms, syn_tb_ms, syn_tw_ms;
  size_t syn_act_bytes;
  size_t syn_grad_bytes; /* gradient bytes per synthetic stage (all-reduced with D > 1) */
  /* Optional: each stage's own synthetic costs, ms (3 * S: F, I, W of
   * stage 0, then stage 1, ...; NULL: the uniform ones above). Not owned. */
  const double *syn_stage_ms;
  /* A synthetic model of syn_units units (0: one per stage), each with
   * its share of the model's cost (a stage of n units costs n * S /
   * syn_units times the uniform costs above) and of its gradient bytes:
   * a partition moves them (kt_runtime_replan). Not with syn_stage_ms. */
  int syn_units;
  /* Optional: micro-batch k's synthetic F, I and W take syn_mb_scale[k]
   * times the costs above (variable-length micro-batches, M entries; not
   * owned); NULL: all alike. */
  const double *syn_mb_scale;
  double timeout; /* watchdog: seconds a rank may wait for a peer (default 60) */
  /* Rank threads of one process each on a core of their own when the
   * process may use enough cores (default 1; 0 leaves them to the kernel). */
  int pin_threads;
  /* Fault injection (a straggler): pipeline rank slow_rank's compute takes
   * slow_factor times its time (>= 1): a real model's actions burn the
   * extra CPU time after they ran, a synthetic one's sleep it. slow_rank
   * -1 (default): none. */
  int slow_rank;
  double slow_factor;
  /* Faults that begin mid-run (kaiten/costs.h: --slow-rank R:F@S,
   * --slow-link A-B:+D@S with D in seconds, --fault-trace): a slow rank's
   * compute is stretched as above; with a fault on a link every message
   * between pipeline ranks carries when it is due (the send's time plus
   * the link's delay then), and its receiver waits until then (one clock:
   * the ranks on one machine). A trace's time counts from when its step is
   * submitted. NULL: none. Not owned (must outlive the runtime). */
  const kt_faults *faults;
  /* 1: pinned rank threads stay pinned when another program takes their
   * core (by default the kernel balances them from then on): a caller that
   * moves work away from a crowded core itself (the autopilot) sets it. */
  int keep_pinned;
  /* How steps follow each other (kaiten/costs.h; default overlap): the
   * caller's kt_runtime_submit says which steps may overlap. */
  kt_step_sync step_sync;
  /* Fault injection: at this optimizer step (0-based; -1 none, the
   * default) pipeline rank nan_rank's gradients hold a NaN. */
  int nan_step, nan_rank;
} kt_runtime_config;

void kt_runtime_config_default(kt_runtime_config *c);

typedef struct kt_runtime kt_runtime;

/* Creates the runtime for the local world ranks `local` (n_local of them) on
 * the given transport handles (handles[i] belongs to local[i]). Threads runs
 * every rank locally; MPI runs one. Chunks are built and initialised here.
 * EINVAL for inconsistent configurations, ENOMEM. */
kt_status kt_runtime_create(const kt_runtime_config *cfg, kt_transport *handles, const int *local,
                            int n_local, kt_runtime **out, kt_error *err);
/* Convenience: the threads transport with every rank local. */
kt_status kt_runtime_create_threads(const kt_runtime_config *cfg, kt_runtime **out, kt_error *err);
void kt_runtime_destroy(kt_runtime *rt);

typedef struct {
  double loss;         /* mean loss over the global batch */
  double grad_norm;    /* global norm before clipping */
  double lr;           /* learning rate applied */
  double seconds;      /* wall time of the step */
  int64_t bytes_sent;  /* point-to-point + collective bytes, all local ranks */
  double comm_seconds; /* time local ranks spent sending and waiting to receive */
  /* The first local rank's step end: seconds in the collectives (gradient
   * all-reduce, norm and loss sums; they wait for the other ranks) and the
   * compute around them (gradient scaling, norms, the optimizer update). */
  double sync_seconds, tail_seconds;
  /* 1 when the loss or a gradient was not finite: the optimizer did not run.
   * nonfinite_stage is where it first showed and nonfinite_what what it was
   * ("forward output", "loss" or "gradients"). */
  int nonfinite, nonfinite_stage;
  const char *nonfinite_what;
  int step;      /* the optimizer step these figures are for */
  int rollbacks; /* times this step ran again because the one before it was rolled back */
  int cancelled; /* a non-finite step before it stopped it before its update (not applied) */
  /* its update waited for the step's check on a local rank: a barrier, a
   * step after one that was clipped or not finite, or one the rank's own
   * share showed would be */
  int waited;
  int vote; /* the winner of the stop requests carried with it, on every rank alike */
} kt_step_result;

/* Runs one optimizer step with a barrier after it. data holds D*K*M micro-batches, index
 * (d * K + k) * M + j (only first- and last-stage ranks read them; NULL is
 * fine for synthetic runs). step is the optimizer step number (learning rate
 * schedule). With update = 0 gradients are computed and scaled but the
 * optimizer does not run (gradient checks). A step whose loss or gradients
 * are not finite is not applied either (res->nonfinite says where). */
kt_status kt_runtime_step(kt_runtime *rt, int step, const kt_microbatch *data, int update,
                          kt_step_result *res, kt_error *err);

/* Steps without a barrier between them. kt_runtime_submit starts a step
 * (data: as kt_runtime_step's, kept unchanged until its result is taken);
 * with speculate the caller promises another kt_runtime_submit, or a
 * kt_runtime_flush, before it takes this step's result, and the step's
 * update may run before every rank has ended it. With one local rank the
 * step runs in the calling thread, else on the runtime's worker threads.
 * vote: a stop request (0: none; a reason; -1: a failure) carried to every
 * rank with the step; the winner comes back in the step's result, the same
 * on every rank. stop_on_nonfinite: a step whose values are not finite
 * cancels the step after it (cancelled, not applied). At most three steps
 * are in flight (a fast rank may start a step while a slow one ends the one
 * before and the one before that awaits its check). EINVAL when the order cannot be taken; a runtime failure
 * of a step run in the calling thread. */
kt_status kt_runtime_submit(kt_runtime *rt, int step, const kt_microbatch *data, int update,
                            int speculate, int stop_on_nonfinite, int vote, kt_error *err);
/* Validates the step still pending after a speculative submit (no next step
 * follows). */
kt_status kt_runtime_flush(kt_runtime *rt, kt_error *err);
/* Waits for the oldest submitted step to be validated; its result, and its
 * timeline in kt_runtime_timeline. seconds: from the end of the step before
 * it (when they overlapped) or from its submission, to the end of its last
 * local update: the period of a run in steady state. */
kt_status kt_runtime_complete(kt_runtime *rt, kt_step_result *res, kt_error *err);

/* Steps on worker threads (every rank in this process): while the caller
 * waits in kt_runtime_complete, poll(ctx) is asked every 50 ms whether to
 * stop; when it says so, the submitted steps no worker began are taken
 * back (the last one left, when it runs ahead, gets its flush).
 * kt_runtime_retracted then says how many were, and the first one's step
 * (and forgets them). With one local rank (MPI) steps run as they are
 * submitted and none is ever taken back. */
void kt_runtime_set_poll(kt_runtime *rt, int (*poll)(void *ctx), void *ctx);
/* Waits until every local worker ended every order submitted (a step that
 * ran ahead ends too; only its check waits). A caller that stops taking
 * results, on an error, calls it before it frees the steps' data. */
void kt_runtime_settle(kt_runtime *rt);
int kt_runtime_retracted(kt_runtime *rt, int *first_step);

/* Runs s from the next step on: another order of the same layout (P, V,
 * M, the same stage on the same rank), and with partition (S unit counts,
 * NULL: the units stay where they are) each stage's units as it says:
 * the units that change stage move with their weights and optimizer state
 * to their new rank (copied between threads; sent between MPI processes),
 * nothing else changes, so a step runs the same arithmetic (the global
 * norm is summed unit by unit, whatever the partition). Only between
 * steps: every submitted step's result taken, the last one flushed. Under
 * MPI every rank calls it with the same s and partition. EINVAL (steps in
 * flight, another layout, a partition of a model without units), the
 * transport's errors, ENOMEM; on an error the runtime is left as it was
 * unless units were moving (then it is not fit to run). */
kt_status kt_runtime_replan(kt_runtime *rt, const kt_schedule *s, const int *partition,
                            kt_error *err);

/* The measured timeline of the last step for replica 0's pipeline ranks
 * (times in seconds from the step start; memory = activation bytes held).
 * Only ranks local to this process have events. */
const kt_timeline *kt_runtime_timeline(const kt_runtime *rt);

/* The chunk of stage s on replica d, or NULL when not local. */
kt_chunk *kt_runtime_chunk(kt_runtime *rt, int stage, int replica);
/* Optimizer state of that chunk (2 * n_params floats for AdamW: m then v;
 * n_params for SGD momentum; NULL when none). */
float *kt_runtime_optim_state(kt_runtime *rt, int stage, int replica, size_t *n);
/* The configuration the runtime runs (its own copy). */
const kt_runtime_config *kt_runtime_config_of(const kt_runtime *rt);
/* The transport handle of world rank r when it lives in this process, else
 * NULL (a caller may wrap it, e.g. for fault injection, and restore it
 * before kt_runtime_destroy). */
kt_transport *kt_runtime_handle(kt_runtime *rt, int world_rank);
/* The transport handle of the first local rank, and whether every rank of
 * the job lives in this process (threads) or not (MPI). */
kt_transport *kt_runtime_transport(kt_runtime *rt);
int kt_runtime_all_local(const kt_runtime *rt);
/* Stage -> units mapping actually used (S + 1 offsets). */
const int *kt_runtime_unit_offsets(const kt_runtime *rt);
/* How many plans kt_runtime_replan has installed (0: the first still runs). */
int kt_runtime_plans(const kt_runtime *rt);

#ifdef __cplusplus
}
#endif

#endif
