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
  int step;        /* optimizer steps completed */
  int decay_steps; /* the learning-rate schedule of the run (kept on resume) */
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
/* Reads and checks the header only. A path that is not a regular file (a
 * FIFO, a device, a directory) is refused without waiting on it: EINVAL.
 * EIO, EPARSE. */
kt_status kt_checkpoint_read_meta(const char *path, kt_checkpoint_meta *out, kt_error *err);
/* Reads the whole file and checks everything kt_checkpoint_load would
 * (header, each unit's size and checksum, the end marker and the file's
 * checksum) without a runtime, streaming it through a 1 MiB buffer; *meta
 * gets its header. EINVAL (not a regular file), EPARSE naming what is
 * wrong, EIO, ENOMEM. */
kt_status kt_checkpoint_verify(const char *path, kt_checkpoint_meta *meta, kt_error *err);
/* Loads parameters and optimizer state into every local chunk of every
 * replica. EPARSE for truncated/corrupt files, EINVAL when the model or
 * optimizer does not match the runtime's or the path is not a regular
 * file. */
kt_status kt_checkpoint_load(kt_runtime *rt, const char *path, kt_checkpoint_meta *meta,
                             kt_error *err);

/* ---- a run directory's checkpoints ---------------------------------------------
 *
 * RUN_DIR/checkpoints/step_NNNNNNNN.ckpt (the steps completed, at least 8
 * digits) and a "latest" file naming the newest. Only entries of that
 * form, regular files inside checkpoints/, are ever read: "latest" is a
 * hint that may name one of them and nothing else (a path out of the
 * directory is not followed), and a symbolic link, FIFO or other special
 * file among them is passed over unopened. */

/* Saves the checkpoint of meta->step, then points "latest" at it, each
 * written to a temp file and renamed over its name: an entry of either
 * name that is not a regular file (a link out of the directory, a FIFO)
 * is removed first, never written through. Under MPI every rank calls it
 * (world rank 0 writes). EIO, ENOMEM. */
kt_status kt_checkpoint_save_in_run(kt_runtime *rt, const char *run_dir,
                                    const kt_checkpoint_meta *meta, kt_error *err);

/* The newest intact checkpoint of a run directory, and what was passed
 * over on the way to it. */
typedef struct {
  char *path;              /* RUN_DIR/checkpoints/step_NNNNNNNN.ckpt (kt_checkpoint_found_free) */
  kt_checkpoint_meta meta; /* its header */
  int n_skipped;           /* newer entries passed over (damaged, missing, not regular files),
                            * and a "latest" naming something else */
  char skipped[1024];      /* one line saying what was passed over and why ("" when nothing) */
} kt_checkpoint_found;

/* Finds the checkpoint to resume from: the highest step whose file
 * verifies (kt_checkpoint_verify) and whose header holds the step its
 * name says. EINVAL when the directory holds no checkpoint, EPARSE when
 * it holds some but none intact (the message says what was passed over),
 * ENOMEM. On error nothing is left to free. */
kt_status kt_checkpoint_find(const char *run_dir, kt_checkpoint_found *out, kt_error *err);
void kt_checkpoint_found_free(kt_checkpoint_found *f);
/* kt_checkpoint_find's path alone (caller frees). */
kt_status kt_checkpoint_latest(const char *run_dir, char **path, kt_error *err);

/* Removes the checkpoints of steps below `newest` except the keep - 1
 * highest of them (keep <= 0 removes nothing): those above `newest` (an
 * abandoned later run's, left for kt_checkpoint_find to pass over or a
 * later save to replace) and entries that are not regular files are left
 * alone. *removed (may be NULL) counts the files removed. EIO when one
 * cannot be removed (the others still are). */
kt_status kt_checkpoint_prune(const char *run_dir, int keep, int newest, int *removed,
                              kt_error *err);

uint32_t kt_crc32(uint32_t crc, const void *data, size_t n);

#ifdef __cplusplus
}
#endif

#endif
