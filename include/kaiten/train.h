/* kaiten training loop: data, steps, validation, measured versus predicted.
 * Drives a kt_runtime for N optimizer steps and reports progress through a
 * callback; the CLI prints, the library does not. */
#ifndef KAITEN_TRAIN_H
#define KAITEN_TRAIN_H

#include "kaiten/runtime.h"
#include "kaiten/sim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A source of micro-batches. fill() writes the D*K*M micro-batches of one
 * optimizer step (index (d * K + k) * M + j) for the given split
 * (0 = train, 1 = validation); the pointers stay valid until the next fill.
 * The batch of a step is a pure function of (seed, step): resuming at step s
 * reproduces an uninterrupted run. */
typedef struct kt_data_source {
  kt_status (*fill)(struct kt_data_source *src, int split, int step, int D, int K, int M, int b,
                    kt_microbatch *out, kt_error *err);
  void (*destroy)(struct kt_data_source *src);
  void *impl;
  int has_validation;
  size_t tokens_per_sample; /* for tokens/s (MLP: 1) */
} kt_data_source;

/* Synthetic regression for the MLP: x ~ U(-1, 1)^H, y = a fixed smooth
 * teacher of x; sample i of the stream is a function of (seed, i) only. */
kt_status kt_data_mlp_create(int hidden, uint64_t seed, kt_data_source **out, kt_error *err);

/* Byte-level text for the GPT (kaiten data: a file, or NULL for the built-in
 * corpus); validation from the held-out tail. EIO, EINVAL, ENOMEM. */
kt_status kt_data_text_source_create(const char *path, int seq_len, int micro_batch,
                                     uint64_t seed, kt_data_source **out, kt_error *err);

typedef struct {
  int step;              /* optimizer step just finished (0-based) */
  int steps;             /* total */
  double loss, val_loss; /* val_loss NAN when not evaluated this step */
  double lr, grad_norm;
  double seconds;        /* wall time of the step */
  double samples_per_s, tokens_per_s;
  double bubble;         /* measured bubble ratio of the step */
  const kt_timeline *timeline;     /* measured, replica 0 */
  const kt_runtime *runtime;
  /* the step was skipped (skip_nonfinite): its loss or gradients were not
   * finite, first in nonfinite_what of nonfinite_stage */
  int skipped, nonfinite_stage;
  const char *nonfinite_what;
  int skipped_total;
} kt_train_progress;

typedef struct {
  kt_runtime_config runtime;
  int first_step;        /* resume point (0 for a fresh run) */
  int steps;             /* run until this many optimizer steps in total */
  int val_every;         /* validation loss every N steps (0 = never) */
  int val_batches;       /* optimizer-step-sized batches per validation */
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
} kt_train_config;

typedef struct {
  double *losses;        /* steps run by this call, in order (caller frees) */
  int n_losses;
  double last_val_loss;  /* NAN when never evaluated */
  kt_metrics measured;   /* last step (seconds) */
  kt_metrics predicted;  /* the same schedule simulated with costs calibrated from it */
  kt_costs calibrated;   /* per-stage costs (seconds) measured on the last step */
  kt_timeline measured_timeline;  /* the last training step (validation steps excluded) */
  kt_timeline predicted_timeline;
  double mean_step_seconds;
  double samples_per_s, tokens_per_s;
  size_t peak_stash_bytes_stage0;
  int skipped_steps;     /* steps not applied because of non-finite values */
  double median_step_seconds; /* over the training steps run (the first left out when more ran) */
  /* With links: the predicted step (pipeline, all-reduce, collectives,
   * update) and its all-reduce part; the measured all-reduce and
   * collectives, and the update, of the first local rank on the last step.
   * 0 without links. */
  double predicted_step_seconds, predicted_sync_seconds;
  double measured_sync_seconds, tail_seconds;
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
 * the same schedule. */
kt_status kt_calibrate_costs(const kt_timeline *measured, const kt_schedule *s, kt_costs *out,
                             kt_error *err);

#ifdef __cplusplus
}
#endif

#endif
