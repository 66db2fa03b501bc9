/* kaiten checkpoints: by model unit (layer), not by stage, so a run saved
 * with one pipeline layout resumes under any other (P, V, schedule, D).
 *
 * File: header (magic, version, model and optimizer configuration, step,
 * data seed, decay steps), then per unit its parameters and optimizer state,
 * each unit with a CRC-32, and a CRC-32 of everything before the trailer.
 * Written atomically (temp file, fsync, rename); a truncated, corrupt or
 * mismatched file is refused with a clear message.
 */
#ifndef KAITEN_CHECKPOINT_H
#define KAITEN_CHECKPOINT_H

#include "kaiten/runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  int step;             /* optimizer steps completed */
  int decay_steps;      /* the learning-rate schedule of the run (kept on resume) */
  int warmup_steps;
  double lr, min_lr_ratio;
  uint64_t data_seed;
  kt_model_config model;
  kt_optim_kind optim;
} kt_checkpoint_meta;

/* Saves every unit of replica 0 (all its chunks must be local: threads, or
 * MPI after kt_checkpoint_gather). EIO, ENOMEM. */
kt_status kt_checkpoint_save(kt_runtime *rt, const char *path, const kt_checkpoint_meta *meta,
                             kt_error *err);
/* Reads and checks the header only. EIO, EPARSE. */
kt_status kt_checkpoint_read_meta(const char *path, kt_checkpoint_meta *out, kt_error *err);
/* Loads parameters and optimizer state into every local chunk of every
 * replica. EPARSE for truncated/corrupt files, EINVAL when the model or
 * optimizer does not match the runtime's. */
kt_status kt_checkpoint_load(kt_runtime *rt, const char *path, kt_checkpoint_meta *meta,
                             kt_error *err);

/* Run directories: RUN_DIR/checkpoints/step_NNNNNNNN.ckpt and a "latest"
 * file naming the newest complete one. */
kt_status kt_checkpoint_save_in_run(kt_runtime *rt, const char *run_dir,
                                    const kt_checkpoint_meta *meta, kt_error *err);
/* Path of the newest complete checkpoint of a run directory (caller frees).
 * Falls back to scanning when "latest" is missing or names a damaged file. */
kt_status kt_checkpoint_latest(const char *run_dir, char **path, kt_error *err);

uint32_t kt_crc32(uint32_t crc, const void *data, size_t n);

#ifdef __cplusplus
}
#endif

#endif
