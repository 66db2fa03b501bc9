/* kaiten training: the loop (data, steps, validation, measured versus
 * predicted) over a kt_runtime, and the session that runs it the way
 * `kaiten train` does (schedule, runtime, run directory, resume,
 * checkpoints, the stop vote of MPI ranks, measurements). Progress and
 * notes arrive through callbacks; the library never prints. */
#ifndef KAITEN_TRAIN_H
#define KAITEN_TRAIN_H

#include "kaiten/calibrate.h"
#include "kaiten/checkpoint.h"
#include "kaiten/generators.h"
#include "kaiten/request.h"
#include "kaiten/report.h"
#include "kaiten/rundir.h"
#include "kaiten/runtime.h"
#include "kaiten/sim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A source of micro-batches. fill() writes the D*K*M micro-batches of one
 * optimizer step (index (d * K + k) * M + j) for the given split
 * (0 = train, 1 = validation); the pointers stay valid for `keeps` fills
 * (this one and keeps - 1 after it; 0 means 1). The batch of a step is a
 * pure function of (seed, step): resuming at step s reproduces an
 * uninterrupted run. Steps run without a barrier between them only with a
 * source that keeps KT_DATA_KEEPS (steps in flight at once). */
#define KT_DATA_KEEPS 3
typedef struct kt_data_source {
  kt_status (*fill)(struct kt_data_source *src, int split, int step, int D, int K, int M, int b,
                    kt_microbatch *out, kt_error *err);
  void (*destroy)(struct kt_data_source *src);
  void *impl;
  int has_validation;
  size_t tokens_per_sample; /* for tokens/s (MLP: 1) */
  int keeps;
} kt_data_source;

/* Synthetic regression for the MLP: x ~ U(-1, 1)^H, y = a fixed smooth
 * teacher of x; sample i of the stream is a function of (seed, i) only. */
kt_status kt_data_mlp_create(int hidden, uint64_t seed, kt_data_source **out, kt_error *err);

/* Byte-level text for the GPT (kaiten data: a file, or NULL for the built-in
 * corpus); validation from the held-out tail. EIO, EINVAL, ENOMEM. */
kt_status kt_data_text_source_create(const char *path, int seq_len, int micro_batch, uint64_t seed,
                                     kt_data_source **out, kt_error *err);

/* Documents of varying length for the GPT (kaiten/model.h's packed
 * micro-batches): each step draws document lengths from doc_lengths
 * ("lognormal:SIGMA:MIN:MAX", kaiten/packing.h; a document longer than
 * seq_len is cut into pieces of seq_len, the model's context), takes each
 * document's bytes (and next bytes as targets) from a place of the
 * training text, and packs them (kt_pack_documents) into micro-batches of
 * micro_batch * seq_len tokens: packing "fifo" (NULL) fills them in data
 * order, "balanced" assigns the same documents longest first to the
 * micro-batch with the least load (kt_token_model with attention share
 * attn_share) that has room, run in the packing's order. Loss and
 * gradients are the mean over the step's real tokens. A
 * pure function of (seed, step, replica). With seq_chunks K > 1 each
 * micro-batch is given as K chunks along the sequence (piece k of every
 * document, rows [k L / K, (k + 1) L / K), in chunk k; kaiten/model.h's
 * row): fill's M counts chunks (M / K micro-batches), the documents and
 * packing those of the unchunked fill. Validation: the held-out windows.
 * EINVAL naming a bad spec or packing, EIO, ENOMEM. */
kt_status kt_data_docs_source_create(const char *path, int seq_len, int micro_batch, uint64_t seed,
                                     const char *doc_lengths, const char *packing,
                                     double attn_share, int seq_chunks, kt_data_source **out,
                                     kt_error *err);
/* Balanced's micro-batches of a documents source run in the order that
 * makes the run's own step shortest (kt_pack_order_for): every order
 * simulated on s (copied; the schedule the run runs, each step's K M
 * micro-batches: with grad_accum K, its K rounds) under mem_limit (in
 * base's memory units; an order over it only when none fits; 0: none),
 * base the stage costs of a micro-batch of one document of
 * micro_batch * seq_len tokens (copied; each micro-batch's own from the
 * token model). The order is a pure function of (seed, step, the token
 * model). EINVAL (not a documents source, or one in chunks along the
 * sequence: Seq1F1B's order), ENOMEM; a fill whose step has not s's
 * micro-batches fails with EINVAL. */
kt_status kt_data_docs_order(kt_data_source *src, const kt_schedule *s, double mem_limit,
                             const kt_costs *base, kt_error *err);
/* From step from_step on, the token model's attention share is attn_share
 * (a calibration: kt_mb_cost_attn_fit) for balanced's packing and order. EINVAL. */
kt_status kt_data_docs_calibrate(kt_data_source *src, int from_step, double attn_share,
                                 kt_error *err);

typedef struct {
  int step;              /* optimizer step just finished (0-based) */
  int steps;             /* total */
  double loss, val_loss; /* val_loss NAN when not evaluated this step */
  double lr, grad_norm;
  double seconds; /* wall time of the step */
  double samples_per_s, tokens_per_s;
  double bubble;               /* measured bubble ratio of the step */
  const kt_timeline *timeline; /* measured, replica 0 */
  const kt_runtime *runtime;
  /* the step was skipped (skip_nonfinite): its loss or gradients were not
   * finite, first in nonfinite_what of nonfinite_stage */
  int skipped, nonfinite_stage;
  const char *nonfinite_what;
  int skipped_total;
  /* From a kt_session (NULL from kt_train_run): the step as the run
   * directory records it (metrics.jsonl), and each pipeline rank's share of
   * it (n_ranks entries) -- what a live dashboard is fed (kaiten/serve.h's
   * kt_serve_step holds the same three). */
  const kt_run_step *record;
  const kt_run_rank_step *ranks;
  int n_ranks;
  /* Nothing runs after this step yet (a barrier): the callback may use
   * collectives, and its stop request is taken as every rank's. Else the
   * next step already runs: the request is carried to every rank with the
   * step after it, and `agreed` is the request every rank agreed on with
   * this one (kt_runtime_submit's vote). */
  int barrier, agreed;
} kt_train_progress;

typedef struct {
  kt_runtime_config runtime;
  int first_step;  /* resume point (0 for a fresh run) */
  int steps;       /* run until this many optimizer steps in total */
  int val_every;   /* validation loss every N steps (0 = never) */
  int val_batches; /* optimizer-step-sized batches per validation */
  kt_data_source *data;
  /* Called after every step (may be NULL). Return non-zero to stop early. */
  int (*on_step)(void *ctx, const kt_train_progress *p);
  void *ctx;
  /* A step whose loss or gradients are not finite is never applied. 0: stop
   * with ERUNTIME naming the step and stage; 1: skip it and go on. */
  int skip_nonfinite;
  /* Optional: the cluster's links (which ranks share a node, link classes).
   * The prediction then costs each hop on the link it crosses and adds the
   * step's end: every pipeline rank's gradient all-reduce, the small
   * collectives and the measured optimizer update (predicted_step_seconds). */
  kt_links *links;
  /* Optional: whether a step must end with a barrier besides the run's own
   * (its last step, validations): e.g. a checkpoint after it. Every rank
   * must answer alike. */
  int (*barrier_at)(void *ctx, int step);
  /* Optional, every rank in this process: asked while a step runs whether
   * to stop (non-zero); the steps queued that no rank began are then not
   * run (kt_runtime_set_poll). */
  int (*should_stop)(void *ctx);
  /* Optional: called with nothing in flight (after a barrier) before step
   * `next` (0-based) is submitted: where the plan may change
   * (kt_runtime_replan). A status other than KT_OK ends the run with it. */
  kt_status (*between_steps)(void *ctx, kt_runtime *rt, int next, kt_error *err);
} kt_train_config;

/* One micro-batch of a step as it ran (replica 0): what it held and what
 * each stage measured for it (the action's own time: its CPU time, or for a
 * synthetic run the cost it slept). */
typedef struct {
  int round, mb;        /* round k of K, micro-batch j of M */
  int tokens;           /* real tokens (packed documents), else b T */
  int documents;        /* packed documents (fixed windows: b) */
  double attn_tokens2;  /* sum over its documents of L^2 (fixed windows: b T^2) */
  double *tf, *tb, *tw; /* [S] seconds per stage: F, the input gradient (I or a full B), W */
  /* [S] bytes per stage (the built-in GPT without recompute, else NULL):
   * kept after its F and after its I, and the most an op holds above that
   * (kt_model_mb_stash_bytes; a seq-chunks micro-batch's first chunk also
   * keeps the whole micro-batch's keys and values until its I) */
  double *mem_act, *mem_wgrad, *mem_transient;
} kt_mb_cost;

/* The attention share of the token model (kaiten/packing.h) fitted on a
 * step's n micro-batches (S stages each): each one's time (every stage's
 * F, I/B and W) is x L1 + y L2 (L1 its tokens, L2 its documents' squared
 * lengths summed), a line through t / L1 against L2 / L1 robust to a few
 * slow ops (Theil-Sen: the median of the slopes between pairs), and the
 * share y B / (x + y B) at a budget of B tokens, to two decimals; -1 where
 * the micro-batches cannot tell (fewer than two distinct L2 / L1, no time,
 * x or y not positive: not the token model's times). ENOMEM is -1 too. */
double kt_mb_cost_attn_fit(const kt_mb_cost *c, int n, int S, int budget);

typedef struct {
  double *losses; /* steps run by this call, in order (caller frees) */
  int n_losses;
  double last_val_loss;          /* NAN when never evaluated */
  kt_metrics measured;           /* last step (seconds) */
  kt_metrics predicted;          /* the same schedule simulated with costs calibrated from it */
  kt_costs calibrated;           /* per-stage costs (seconds) measured on the last step */
  kt_timeline measured_timeline; /* the last training step (validation steps excluded) */
  kt_timeline predicted_timeline;
  double mean_step_seconds;
  double samples_per_s, tokens_per_s; /* over every step run, the first included */
  /* at the median step of those after the first (the first alone when one
   * ran): what the pipeline sustains once warm */
  double steady_tokens_per_s;
  size_t peak_stash_bytes_stage0;
  int skipped_steps; /* steps not applied because of non-finite values */
  /* the run failed (ERUNTIME) on a step whose loss or gradients were not
   * finite, with skip_nonfinite off */
  int stopped_nonfinite;
  double median_step_seconds; /* over the training steps run (the first left out when more ran) */
  /* With links: the predicted step (pipeline, all-reduce, collectives,
   * update) and its all-reduce part; the measured all-reduce and
   * collectives, and the update, of the first local rank on the last step.
   * 0 without links. */
  double predicted_step_seconds, predicted_sync_seconds;
  double measured_sync_seconds, tail_seconds;
  /* steps run again because the update before them was rolled back
   * (post-validation, kaiten/runtime.h) */
  int rollbacks;
  /* training steps whose update waited for the step's check (clipping or a
   * non-finite value in the step before, or in this rank's own share); with
   * more than half of them the prediction is a barrier's */
  int waited_steps;
  /* the last training step's micro-batches, K rounds of M in run order, and
   * the stages S each has costs for (0 with no data source) */
  kt_mb_cost *mb_costs;
  int n_mb_costs, mb_cost_stages;
  /* real tokens over the steps run (packed documents count what they hold;
   * tokens_per_s and steady_tokens_per_s are these over the time) */
  double tokens;
} kt_train_result;

/* Trains with an already-created runtime (threads or MPI). */
kt_status kt_train_run(kt_runtime *rt, const kt_train_config *cfg, kt_train_result *out,
                       kt_error *err);
void kt_train_result_free(kt_train_result *r);

/* The prediction of a measured step: costs calibrated on it
 * (kt_calibrate_costs), then grad_accum rounds of s back to back simulated
 * with them into predicted (time unit "s"). On error nothing is left to
 * free. ENOMEM, and the simulator's errors. */
kt_status kt_train_predict(const kt_schedule *s, int grad_accum, const kt_timeline *measured,
                           kt_costs *calibrated, kt_timeline *predicted, kt_error *err);

/* The same on a cluster's links (NULL: as kt_train_predict): each hop of
 * comm_bytes costs what the link it crosses says, with transfers that share
 * a link taking turns; *sync_end (may be NULL) when the step's all-reduce
 * (kt_links_set_sync) ends (kt_simulate_step). */
kt_status kt_train_predict_on(const kt_schedule *s, int grad_accum, const kt_timeline *measured,
                              const kt_links *links, double comm_bytes, kt_costs *calibrated,
                              kt_timeline *predicted, double *sync_end, kt_error *err);

/* Per-stage costs from a measured timeline: mean F, I, W (and B) time per
 * stage (the prediction then does the step's total work), T_comm = the
 * median hand-over time between ranks (producer's end to consumer's start,
 * over actions that sat waiting for their input) and send_overhead = the
 * median time a send held its rank; the simulator's semantics then predict
 * the same schedule. (A run whose micro-batches differ by design,
 * syn_mb_scale, predicts with each (stage, micro-batch)'s own means where
 * some stage's micro-batches' forwards differ by more than a quarter.) */
kt_status kt_calibrate_costs(const kt_timeline *measured, const kt_schedule *s, kt_costs *out,
                             kt_error *err);

/* ---- sessions: a whole training run, as `kaiten train` runs it ------------------
 *
 *   kt_session_params p = kt_session_default_params();
 *   p.steps = 100, p.run_dir = "runs/a", p.on_step = show, p.ctx = me;
 *   kt_session *s;
 *   kt_status st = kt_session_open(&p, &s, &err);
 *   if (!st) st = kt_session_run(s, &err);
 *   ... kt_session_get_result(s) ...
 *   kt_session_close(s);
 *
 * open builds the schedule (the caller's, or one generated, memory-aware
 * ones on the model's measured activation bytes), the runtime on threads
 * or MPI ranks, the data, the cluster's links, and on rank 0 the run
 * directory with its config.json; resuming, it loads the checkpoint. run
 * trains until `steps`, records every step in metrics.jsonl, checkpoints
 * every checkpoint_every steps and at the end, and stops early once every
 * rank agrees (should_stop, on_step, a failure anywhere); the last step is
 * measured against the simulator's prediction from costs calibrated on it.
 * Under MPI every rank calls every function (collectives inside). The
 * library prints nothing: progress comes through on_step, one-line notes
 * through on_note, failures as a status, a message and kt_session_failed. */

typedef struct kt_session kt_session;
typedef struct kt_session_info kt_session_info; /* below */

typedef enum {
  KT_NOTE_LONG_SEARCH, /* a generator tunes its order at length: name the schedule, count its actions */
  KT_NOTE_RUN_DIR_CLEARED, /* force cleared kaiten's files from run directory `name`; count entries kept */
  KT_NOTE_STOPPING,        /* every rank agreed to stop after this step: count = the reason */
  KT_NOTE_OVERSUBSCRIBED, /* count = compute threads of this process (ranks x BLAS threads) above the cores */
  /* resuming, newer checkpoints were passed over (kt_session_resume's
   * skipped): `name` the checkpoint resumed from, count its step; the steps
   * after it run again (their metrics lines are replaced) */
  KT_NOTE_CHECKPOINT_SKIPPED,
  /* documents: the token model's attention share calibrated on the run
   * (kt_session_params.attn_share): count the step it is used from */
  KT_NOTE_CALIBRATED,
  KT_NOTE_COUNT
} kt_note_kind;

/* A one-line note for the session's user. */
typedef struct {
  kt_note_kind kind;
  const char *name;
  long long count;
  const char *text; /* the note in words, naming no option of any program */
} kt_note;

/* What made a session call fail, beyond its status and message: what a
 * program needs to add advice of its own (its option names) or to stay
 * quiet where another rank reports. */
typedef enum {
  KT_SESSION_OK,
  KT_SESSION_FAILED,           /* this rank failed: the message says why */
  KT_SESSION_FAILED_ELSEWHERE, /* another MPI rank failed and says why; this one has nothing to add */
  KT_SESSION_RUN_DIR_TAKEN,  /* the run directory holds another run (neither resumed nor forced) */
  KT_SESSION_RUN_DIR_BUSY,   /* another process writes the run directory (EBUSY) */
  KT_SESSION_TOO_FEW_LAYERS, /* more pipeline stages than the model has layers to split */
  KT_SESSION_WORLD_SIZE,     /* the MPI world is not P * D processes */
  KT_SESSION_CLUSTER,        /* the cluster spec (the message: "FILE: reason") */
  KT_SESSION_SAVE_INIT,      /* writing save_init (rank 0 says why) */
  KT_SESSION_NONFINITE,      /* a step's loss or gradients were not finite, skip_nonfinite off */
  KT_SESSION_FAILURE_COUNT
} kt_session_failure;

/* The checkpoints a run directory keeps by default (keep_checkpoints). */
#define KT_SESSION_KEEP_CHECKPOINTS 3

/* Stop reasons (should_stop, on_step) are 1..KT_STOP_MAX, e.g. a signal
 * number; ranks asking for different ones agree on SIGTERM, then SIGINT,
 * then SIGUSR1, then the smallest. */
#define KT_STOP_MAX 64

typedef struct {
  /* ---- the model and its data ---- */
  kt_model_config model;       /* a built-in model (default: the default GPT) */
  kt_chunk_factory make_chunk; /* or a model of the caller's own (kt_runtime_config) */
  void *chunk_ctx;
  const char *model_name; /* its name in config.json (default "own"; up to 15 bytes) */
  int synthetic;          /* or sleeps of the costs below with real tensors */
  double syn_tf_ms, syn_tb_ms, syn_tw_ms; /* one rank's share: V chunks run ms/V each */
  size_t syn_act_bytes, syn_grad_bytes;
  const double *syn_mb_scale; /* [m]: micro-batch k's costs are these times syn_mb_scale[k]
                                   (kt_runtime_config); NULL: all alike. Not owned. */
  kt_data_source *data;       /* the caller's (never destroyed here); NULL: the built-in model's */
  const char *data_path;      /* GPT's built-in data: a text file (NULL: the built-in corpus) */
  uint64_t data_seed;
  /* GPT: documents of varying length packed into micro-batches
   * (kt_data_docs_source_create: "lognormal:SIGMA:MIN:MAX"; NULL: fixed
   * windows of seq_len) and their packing ("fifo" (NULL) | "balanced") */
  const char *doc_lengths, *packing;
  /* their token model's attention share (kaiten/packing.h: how balanced
   * packs and orders them): < 0 (the default) the model's FLOPs', then the
   * share calibrated on the run's second step (threads; kt_mb_cost_attn_fit)
   * from KT_DATA_KEEPS steps after it; else this one, from step attn_from
   * on (0: the whole run; a resumed run's calibration) */
  double attn_share;
  int attn_from;
  /* ---- the schedule and the layout ---- */
  const kt_schedule *schedule; /* the caller's (copied); NULL: generate `kind` */
  const kt_schedule *program;  /* with schedule: its lowered form, run as written (may be NULL) */
  kt_gen_kind kind;
  int p, v, m; /* v 0: the kind's default chunk count */
  /* zb-auto, zbv-auto: the limit as stated (kaiten/request.h): the
   * generator's activation units per rank (value 0: its default), a
   * fraction of 1F1B's peak on the same layout, or bytes of the model's
   * activations, measured per stage */
  kt_mem_limit mem_limit;
  const char *partition; /* model units per stage, "2,3,3" (NULL: balanced by cost) */
  int micro_batch, grad_accum, data_parallel;
  /* ---- training ---- */
  kt_optim_config optim;
  int steps;                  /* optimizer steps in total (resuming: run until this many) */
  int val_every, val_batches; /* validation loss every N steps (0: never) on val_batches batches */
  int skip_nonfinite;         /* a non-finite step is skipped (1) or ends the run (0) */
  /* ---- where it runs ---- */
  int use_mpi;    /* one process per rank under mpirun; 0: threads of this process */
  double timeout; /* watchdog: seconds a rank waits for a peer */
  int pin_threads;
  /* OpenBLAS threads per rank, process-wide: > 0 that many; 0 the cores
   * over the ranks in this process; < 0 as the program set them */
  int blas_threads;
  const char *cluster; /* a cluster spec (kaiten calibrate): predict on its links */
  /* Fault injection (a straggler): pipeline rank slow_rank's compute takes
   * slow_factor (>= 1) times as long (kt_runtime_config); -1: none. */
  int slow_rank;
  double slow_factor;
  /* Fault injection: a NaN in pipeline rank nan_rank's gradients at step
   * nan_step (0-based; -1: none). */
  int nan_step, nan_rank;
  /* Faults that begin mid-run (kaiten/costs.h: --slow-rank R:F@S,
   * --slow-link A-B:+D@S in seconds, --fault-trace); NULL: none. The
   * caller's, never freed here; it must outlive the session. */
  const kt_faults *faults;
  /* The straggler autopilot (docs/runtime.md, "The autopilot"): every
   * step's slow rank or link is named (kt_run_step.fault) whatever this
   * says; with autopilot the run re-plans itself between steps when the
   * simulator predicts a new order or partition faster by more than the
   * switch costs (kt_run_step.sw). */
  int autopilot;
  /* Synthetic: each stage's own costs, ms (3 * syn_stages: F, I, W of
   * stage 0, then stage 1, ...; NULL: the uniform ones), and a model of
   * syn_units units a partition can move (0: one per stage). */
  const double *syn_stage_ms;
  int syn_stages, syn_units;
  /* How steps follow each other (kaiten/costs.h): overlap (the default,
   * post-validated) or barrier. */
  kt_step_sync step_sync;
  /* ---- files ---- */
  const char *run_dir;  /* config.json, metrics.jsonl, timelines, checkpoints (NULL: none) */
  int force;            /* run_dir may hold an old run: kaiten's files there are removed */
  const char *resume;   /* continue the run in this directory (its run_dir): see below */
  int checkpoint_every; /* also checkpoint every N steps (0: at the end only) */
  /* after each checkpoint, older ones beyond the newest N are removed (0:
   * none is; default 3, so a damaged newest one still has two to fall
   * back on) */
  int keep_checkpoints;
  const char *save_init; /* a checkpoint of the starting weights, written first (NULL: none) */
  /* Renders the run directory's timeline.json and trace.json:
   * kt_render_run_timelines (kaiten/report.h), handed in so that the
   * training runtime links no renderer. NULL: neither file is written. */
  void (*render_timelines)(const kt_run_timelines *t, kt_buf *timeline, kt_buf *trace);
  /* ---- callbacks, with ctx ---- */
  /* After every step, on every rank. Non-zero asks to stop, as should_stop. */
  int (*on_step)(void *ctx, const kt_train_progress *p);
  /* After every step (and its checkpoint): 0, or a reason 1..KT_STOP_MAX to
   * stop after it; every rank stops after the same step. */
  int (*should_stop)(void *ctx);
  void (*on_note)(void *ctx, const kt_note *note);
  /* On every rank once the schedule and the runtime are built (the
   * checkpoint loaded) and before the run directory is created or written
   * (resuming: before its metrics are cut back to the checkpoint's step):
   * what the caller sets up around the run and may fail, such as a
   * dashboard's listening socket, is taken here, so that its failure
   * leaves no run directory behind. A status other than KT_OK fails the
   * open with that status and err's message. May be NULL. */
  kt_status (*on_ready)(void *ctx, const kt_session_info *info, kt_error *err);
  void *ctx;
} kt_session_params;

/* The default GPT on 1F1B, P=4, M=8, b=4, K=1, D=1, 20 steps, AdamW at
 * lr 3e-3 with the gradient norm clipped to 1 (no warm-up or decay),
 * validation every 10 steps on 2 batches, threads, a 60 s watchdog;
 * synthetic costs 2 ms and 64 KiB tensors; the newest 3 checkpoints kept;
 * no files, no callbacks. */
kt_session_params kt_session_default_params(void);

/* Builds the session (see above): the schedule, the runtime, on_ready,
 * then the run directory. Like sqlite3_open, *out is set even when
 * opening fails (unless memory for the handle itself ran out: then NULL),
 * so kt_session_failed can say what failed: close it in every case. EINVAL
 * for a bad layout, model or run directory (KT_SESSION_RUN_DIR_TAKEN), EBUSY
 * (another process writes the run directory), ENOMEM, EIO, the
 * generators', the transport's and the checkpoint's errors. params is
 * copied; what its pointers name (strings, schedules, the data source,
 * chunk_ctx, ctx) must outlive the session. */
kt_status kt_session_open(const kt_session_params *params, kt_session **out, kt_error *err);
/* Writes save_init, trains until `steps` or an agreed stop, then
 * checkpoints and writes the run directory's timelines and config. Once
 * per session. ERUNTIME, ETIMEOUT, EPEER, EIO, ENOMEM. */
kt_status kt_session_run(kt_session *s, kt_error *err);
/* Ends the session: its runtime, transport (MPI is finalized), run
 * directory lock and memory. NULL is fine. */
void kt_session_close(kt_session *s);

/* Why the last call on s failed (KT_SESSION_OK when it did not). */
kt_session_failure kt_session_failed(const kt_session *s);

struct kt_session_info {
  const kt_schedule *schedule;         /* the compute schedule the ranks run */
  int use_mpi, world_rank, world_size; /* threads: rank 0 of P*D, all in this process */
  int first_step;                      /* 0, or the step the resumed checkpoint ends */
  const int *unit_offsets; /* model units per stage (S + 1 offsets); NULL: synthetic, own model */
  const char *checkpoint;  /* resuming: the checkpoint loaded; else NULL */
  const char *run_dir;     /* NULL: none */
  /* The built-in model's bytes per micro-batch on each of mem_stages stages
   * of the schedule (kt_session_activation_bytes): what an F keeps until
   * its B or I, what an I keeps until its W, and the most an op holds
   * above that while it runs; NULL (0 stages) for a synthetic model or one
   * of the caller's own. */
  const double *mem_act_bytes, *mem_wgrad_bytes, *mem_transient_bytes;
  int mem_stages;
  /* 1F1B's predicted peak activation bytes (the largest rank's) on the same
   * model at the same P, M and micro-batch (the schedule's partition at
   * V = 1, else balanced): what a memory limit's fraction is of; 0 when
   * there is none */
  double peak_1f1b;
  /* the memory limit (kt_session_params.mem_limit) on the whole peak in
   * bytes: as given, or its fraction of peak_1f1b; 0 when none is given or
   * it is in activation units */
  double mem_limit_bytes;
  /* the cores this process may use, and its compute threads (its ranks x
   * OpenBLAS threads each): more threads than cores and ops wait for a core */
  int cores, compute_threads;
};
/* After open; after a failed one, what was built before it failed (the
 * schedule, once made: p = 0 before). */
void kt_session_get_info(const kt_session *s, kt_session_info *out);
/* The runtime the session drives (after a successful open), e.g. to wrap a
 * rank's transport handle for fault injection (kt_runtime_handle), undone
 * before kt_session_close. */
kt_runtime *kt_session_runtime(kt_session *s);

typedef struct {
  kt_train_result train; /* this session's steps: losses, the last step measured and predicted */
  int stop;              /* the agreed reason for an early stop, 0 when it ran to `steps` */
  int steps_done;        /* steps completed in all (first_step + the steps run) */
  /* the largest rank's measured peak activation bytes on the last step over
   * 1F1B's predicted peak (kt_session_info.peak_1f1b); NAN when unknown */
  double peak_vs_1f1b;
  /* what the schedule's memory costs in time: 1F1B's predicted period on
   * the same model and the costs calibrated on the last step (a rank's
   * stages summed into its one stage), to set beside the prediction's
   * (train.predicted.period); NAN when unknown */
  double period_1f1b;
  /* Why the last step idled, per pipeline rank (p entries;
   * kt_idle_split_step), and the step's wall time they sum to; idle NULL
   * where the step's every event is not at hand (MPI ranks but world rank 0). */
  const kt_idle_split *idle;
  double idle_seconds;
  /* The autopilot: the plans it switched to, and the last one's record
   * (made 0: none). */
  int switches;
  kt_run_switch last_switch;
  /* GPT documents: the attention share of the token model balanced packs
   * and orders with at the end (kt_session_params.attn_share), used from
   * step attn_from on (0: every step) */
  double attn_share;
  int attn_from;
} kt_session_result;
/* After kt_session_run (also a failed one: the steps it ran). */
const kt_session_result *kt_session_get_result(const kt_session *s);

/* Each pipeline rank's peak activation memory (bytes) the simulator
 * predicts for the session's schedule from each stage's measured bytes
 * per micro-batch (kt_session_activation_bytes): peak[P]. EINVAL for a
 * synthetic model or one of the caller's own, ENOMEM, the simulator's. */
kt_status kt_session_predict_memory(kt_session *s, double *peak, kt_error *err);

/* Activation bytes per micro-batch of each of n_stages stages of the
 * built-in model of params (its partition, micro_batch), measured by
 * running each stage's chunk once, sizes only, on a zero micro-batch: what an F keeps
 * until its B or I (stage_mem_act), what an I keeps until its W
 * (stage_mem_wgrad) and the most an op holds above that while it runs
 * (stage_mem_transient), into c's per-stage arrays (c->n_stages set; free
 * with kt_costs_free). EINVAL for a synthetic model or one of the caller's
 * own, the model's errors, ENOMEM. */
kt_status kt_session_activation_bytes(const kt_session_params *params, int n_stages, kt_costs *c,
                                      kt_error *err);

/* ---- resuming ---------------------------------------------------------------------- */

/* What a run directory holds to resume from. */
typedef struct {
  kt_run_config run; /* config.json: the model and its layout segments (the last is current) */
  char *checkpoint;  /* the newest intact checkpoint (kt_checkpoint_find); NULL when the
                            * directory has none at all, or when the run names no layout or
                            * is synthetic (nothing is looked for) */
  kt_checkpoint_meta meta; /* its header (with checkpoint) */
  /* newer checkpoints passed over (damaged, not regular files, a "latest"
   * naming something else): how many, and one line saying what and why */
  int n_skipped;
  char skipped[1024];
  char partition[4096]; /* the last layout's partition, for kt_session_params_from_run */
} kt_session_resume;

/* Reads dir's config.json and finds its newest intact checkpoint
 * (kt_checkpoint_find: the whole file is verified, newer damaged ones are
 * passed over and described in skipped). The checkpoint must hold the
 * model config.json describes: EINVAL naming both shapes when it does
 * not (a checkpoint of another run). EINVAL too when the directory has
 * checkpoints but none intact, saying what each was; EBUSY when another
 * process writes dir; the run directory reader's errors. On error
 * nothing is left to free. */
kt_status kt_session_resume_read(const char *dir, kt_session_resume *out, kt_error *err);
void kt_session_resume_free(kt_session_resume *r);

/* What the caller of kt_session_params_from_run chose itself and keeps. */
enum {
  KT_KEEP_SCHEDULE = 1 << 0, /* kind (or a schedule of its own) */
  KT_KEEP_P = 1 << 1,
  KT_KEEP_V = 1 << 2,
  KT_KEEP_M = 1 << 3,
  KT_KEEP_B = 1 << 4,
  KT_KEEP_K = 1 << 5,
  KT_KEEP_D = 1 << 6,
  KT_KEEP_PARTITION = 1 << 7,
  KT_KEEP_DECAY = 1 << 8 /* optim.decay_steps */
};

/* Sets params to continue the run r describes: resume and run_dir to dir;
 * the checkpoint's model (params' recompute kept), data seed, warm-up and
 * decay; and the last segment's layout for what `keep` does not name (the
 * partition only with the same P, V and schedule). EINVAL when the run
 * has no checkpoint or names no layout, or its schedule came from a file
 * and keep lacks KT_KEEP_SCHEDULE. r must outlive the session
 * (params.partition may point into it). */
kt_status kt_session_params_from_run(kt_session_params *params, kt_session_resume *r,
                                     const char *dir, unsigned keep, kt_error *err);

#ifdef __cplusplus
}
#endif

#endif
