/* kaiten train internals: parsed options, the session that runs them, and
 * the run directory. */
#ifndef KAITEN_CLI_TRAIN_H
#define KAITEN_CLI_TRAIN_H

#include "cli/cli.h"
#include "kaiten/generators.h"
#include "kaiten/checkpoint.h"
#include "kaiten/report.h"
#include "kaiten/serve.h"
#include "kaiten/train.h"

typedef struct {
  kt_model_config model;
  /* which model flags the user set (checked on resume): bit i = --layers,
   * --hidden, --heads, --seq-len, --tie-embeddings; TRAIN_MODEL_GIVEN = --model */
  int model_flags_given;
  kt_schedule_kind schedule;
  const char *schedule_file; /* instead of schedule: a file (P, V, M from it) */
  int p_given, v_given, m_given;
  kt_notation notation;
  int p, v, m, b, k, d;
  const char *partition;
  kt_optim_config optim;
  int steps, val_every, checkpoint_every;
  int decay_given;
  uint64_t seed;
  int synthetic;
  int skip_nonfinite;
  double tf, tb, tw, timeout, mem_limit;
  long act_bytes;
  const char *format, *output, *transport, *run_dir, *resume, *data_path;
  int live; /* redraw a live view on terminals */
  int blas_threads; /* OpenBLAS threads per rank (0: cores / local ranks) */
  const char *serve; /* live dashboard address ([HOST:]PORT), NULL: none */
} train_opts;

#define TRAIN_MODEL_GIVEN (1 << 5)

int train_parse(const cli_args *a, train_opts *o);
int train_session(train_opts *o);

/* Run directory (train_rundir.c). */
int rundir_prepare(const char *dir, int resuming, int keep_steps);
int rundir_write_config(const char *dir, const train_opts *o, const kt_schedule *s,
                        const int *unit_offset, int decay_steps);
void rundir_append_metrics(const char *dir, const kt_train_progress *p, const kt_runtime *rt);
int rundir_step_ranks(const kt_train_progress *p, const kt_runtime *rt, kt_run_rank_step *out,
                      int cap);
int rundir_write_timelines(const char *dir, const kt_schedule *s, const kt_train_result *r,
                           const kt_timeline *measured);

/* The live dashboard of train --serve (train_serve.c): started before the
 * first step (prints where; returns an exit code), fed after every step
 * without waiting, closed with the run. */
int train_serve_start(const train_opts *o, const kt_schedule *sched, kt_server **out);
void train_serve_step(kt_server *srv, const kt_train_progress *p, const kt_runtime *rt);
void train_serve_stop(kt_server *srv, int ok, const char *run_dir);

#endif
