/* kaiten train internals: parsed options, the session that runs them, and
 * the run directory. */
#ifndef KAITEN_CLI_TRAIN_H
#define KAITEN_CLI_TRAIN_H

#include "cli/cli.h"
#include "kaiten/generators.h"
#include "kaiten/checkpoint.h"
#include "kaiten/report.h"
#include "kaiten/rundir.h"
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
  cli_torch torch;
  int p, v, m, b, k, d;
  const char *partition;
  kt_optim_config optim;
  int steps, val_every, checkpoint_every;
  int decay_given;
  uint64_t seed;
  int synthetic;
  int skip_nonfinite;
  double tf, tb, tw, timeout;
  cli_mem_limit mem_limit; /* --mem-limit as given (bytes: from the model's activations) */
  long act_bytes, grad_bytes;
  const char *format, *output, *transport, *run_dir, *resume, *data_path;
  const char *save_init; /* checkpoint of the starting weights, or NULL */
  int live;        /* redraw a live view on terminals */
  int live_forced; /* --live: even under mpirun */
  int force;       /* --force: clear a run directory that holds an old run */
  unsigned layout_given; /* TRAIN_GIVEN_* layout flags the user set */
  int blas_threads; /* OpenBLAS threads per rank (0: cores / local ranks) */
  int pin;          /* rank threads each on a core of their own (kt_runtime_config.pin_threads) */
  const char *serve; /* live dashboard address ([HOST:]PORT), NULL: none */
  const char *allow_host; /* --allow-host NAME[,NAME] (checked; cli_parse_hosts), NULL: none */
  const char *cluster; /* --cluster FILE: predict on its links, NULL: none */
} train_opts;

#define TRAIN_MODEL_GIVEN (1 << 5)
enum {
  TRAIN_GIVEN_SCHEDULE = 1 << 0, TRAIN_GIVEN_SCHEDULE_FILE = 1 << 1, TRAIN_GIVEN_P = 1 << 2,
  TRAIN_GIVEN_V = 1 << 3, TRAIN_GIVEN_M = 1 << 4, TRAIN_GIVEN_B = 1 << 5, TRAIN_GIVEN_K = 1 << 6,
  TRAIN_GIVEN_D = 1 << 7, TRAIN_GIVEN_PARTITION = 1 << 8
};

int train_parse(const cli_args *a, train_opts *o);
int train_session(train_opts *o);

/* Memory (train_memory.c): the model's activation bytes per micro-batch on
 * each of S stages, after F (stage_mem_act) and after I (stage_mem_wgrad),
 * into c's per-stage arrays (caller frees c); and the predicted peak of
 * each rank beside the measured one. */
kt_status train_activation_bytes(const train_opts *o, int S, kt_costs *c, kt_error *err);
void train_memory_report(const train_opts *o, const kt_schedule *s, const kt_train_result *r,
                         kt_buf *out);

/* What train hands to its run directory (train_rundir.c). */
void train_run_config(const train_opts *o, kt_run_config *c);
/* The layout segment starting at first_step; partition_buf holds P*V ints. */
kt_run_segment train_segment(const train_opts *o, const kt_schedule *s, const int *unit_offset,
                             int first_step, int *partition_buf);
/* Each rank's share of a step (busy, communication, bytes sent, peak
 * activation memory) into out; how many (at most cap), -1 on failure. */
int train_step_ranks(const kt_train_progress *p, kt_run_rank_step *out, int cap);
kt_status train_append_metrics(kt_rundir *rd, const kt_train_progress *p, kt_error *err);
kt_status train_write_timelines(kt_rundir *rd, const kt_schedule *s, const kt_train_result *r,
                                kt_error *err);

/* The live dashboard of train --serve (train_serve.c): started before the
 * first step (prints where; returns an exit code), fed after every step
 * without waiting, closed with the run. */
int train_serve_start(const train_opts *o, const kt_schedule *sched, kt_server **out);
void train_serve_step(kt_server *srv, const kt_train_progress *p);
void train_serve_stop(kt_server *srv, int ok, const char *run_dir);

/* --resume (train_resume.c): the checkpoint, the run's last layout, what changed. */
typedef struct {
  char *ckpt_path;
  kt_checkpoint_meta meta;
  kt_run_config prev;  /* config.json as it was */
  kt_buf changes;      /* "schedule 1f1b -> zb-h1, P 4 -> 2" or empty */
  char partition[4096];
} train_resume;
/* Fills r and adapts o; 0, or the exit code after printing why. */
int train_resume_setup(train_opts *o, train_resume *r);
void train_resume_free(train_resume *r);
/* The "resuming ..." line, and a note when --steps runs past the decay. */
void train_resume_notes(const train_opts *o, const train_resume *r, FILE *f);

/* --cluster (train_cluster.c): the links of the spec with this job's ranks
 * on their nodes (MPI: collective; mpi_t NULL for threads); *out NULL
 * without --cluster. */
kt_status train_cluster_links(const train_opts *o, kt_transport *mpi_t, int p, kt_links **out,
                              kt_error *err);

/* The final report: text summary, JSON, Chrome trace (train_report.c). */
void train_final_report(const train_opts *o, const kt_schedule *sched, const kt_train_result *res,
                        kt_buf *out);

/* KAITEN_TEST_HANG (hang_transport.c): wraps that rank's transport handle
 * when it lives in this process; the handle back as it was before the
 * runtime is destroyed. */
void *cli_hang_install(kt_runtime *rt);
void cli_hang_remove(kt_runtime *rt, void *installed);

/* Signals (signals.c): the first SIGINT/SIGTERM/SIGUSR1 asks for a stop after
 * the current step, a second ends the process; SIGWINCH marks a resize. */
void cli_signals_install(void);
void cli_signals_restore(void);
int cli_stop_requested(void); /* the signal number, or 0 */
/* MPI: this process's world rank and D, so a SIGTERM that ends the job while
 * a receive waits names the rank it waited for (a lost machine). */
void cli_signals_set_rank(int world_rank, int d);
void cli_note_stop(int sig);  /* another rank asked (MPI) */
int cli_take_resize(void);    /* 1 once after each resize */
const char *cli_signal_name(int sig);

/* The live terminal view (live_view.c). */
typedef struct {
  FILE *f;
  int drawn;       /* lines of the block on screen */
  int width, rows; /* the terminal's size */
} cli_live;
void cli_live_init(cli_live *lv, FILE *f);
void cli_live_draw(cli_live *lv, const kt_train_progress *p, const double *losses, int n);

#endif
