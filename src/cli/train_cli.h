/* kaiten train internals: parsed options, the command around the library's
 * session (kt_session: kaiten/train.h), and what it prints. */
#ifndef KAITEN_CLI_TRAIN_H
#define KAITEN_CLI_TRAIN_H

#include "cli/cli.h"
#include "kaiten/generators.h"
#include "kaiten/report.h"
#include "kaiten/serve.h"
#include "kaiten/train.h"

/* The options of kaiten train: what the library's session takes (sp), and
 * what only the command knows (which flags were given, output, the
 * terminal, the dashboard). */
typedef struct {
  kt_session_params sp;
  /* which model flags the user set (checked on resume): bit i = --layers,
   * --hidden, --heads, --seq-len, --tie-embeddings; TRAIN_MODEL_GIVEN = --model */
  int model_flags_given;
  const char *schedule_file; /* instead of --schedule: a file (P, V, M from it) */
  kt_result file;            /* ... read (cli_order_read), freed by train_session */
  int have_file;
  int p_given, v_given, m_given;
  int decay_given;
  const char *format, *output, *transport;
  int live;               /* redraw a live view on terminals */
  int live_forced;        /* --live: even under mpirun */
  unsigned layout_given;  /* TRAIN_GIVEN_* layout flags the user set */
  const char *serve;      /* live dashboard address ([HOST:]PORT), NULL: none */
  char serve_addr[320];   /* what serve points to (cli_serve_addr) */
  const char *allow_host; /* --allow-host NAME[,NAME] (checked; cli_parse_hosts), NULL: none */
  kt_faults faults;       /* --slow-rank, --slow-link, --fault-trace (sp.faults points here) */
  double *syn_stage_ms;   /* --synthetic with --tf/--tb/--tw lists (sp.syn_stage_ms) */
  kt_gemm_choice gemm;    /* the library the model's matmuls run on (after the session opens) */
  double *syn_mb_scale;   /* --synthetic --doc-lengths: each micro-batch's cost multiple (owned) */
  long step_tokens;       /* ... and the tokens of a step */
} train_opts;

#define TRAIN_MODEL_GIVEN (1 << 5)
enum {
  TRAIN_GIVEN_SCHEDULE = 1 << 0,
  TRAIN_GIVEN_SCHEDULE_FILE = 1 << 1,
  TRAIN_GIVEN_P = 1 << 2,
  TRAIN_GIVEN_V = 1 << 3,
  TRAIN_GIVEN_M = 1 << 4,
  TRAIN_GIVEN_B = 1 << 5,
  TRAIN_GIVEN_K = 1 << 6,
  TRAIN_GIVEN_D = 1 << 7,
  TRAIN_GIVEN_PARTITION = 1 << 8
};

int train_parse(const cli_args *a, train_opts *o);
/* --synthetic with --doc-lengths: the documents packed into the
 * micro-batches as `kaiten sim` packs them (same flags, --seed), each
 * micro-batch's synthetic costs scaled by its load (o->syn_mb_scale). The
 * GPT's own documents are its data source's (kt_data_docs_source_create):
 * --mb-tokens is refused there, --attn-share fixes its token model's
 * share (kt_session_params.attn_share). */
int train_synthetic_packing(const cli_args *a, train_opts *o);
#define CLI_TRAIN_PACKING_OPTS \
  {"doc-lengths", 0, "SPEC", \
   "lognormal:SIGMA:MIN:MAX documents (seeded by --seed) packed into the micro-batches: the GPT's micro-batches of b x T tokens with block-diagonal attention, or with --synthetic each micro-batch sleeps its load's share of --tf/--tb/--tw"}, \
      {"packing", 0, "fifo|balanced", \
       "how documents fill micro-batches and their order (default fifo; see kaiten sim --help)"}, \
      {"mb-tokens", 0, "N", \
       "--synthetic: a micro-batch's token budget (default 1024; the GPT's is b x T)"}, \
  { \
    "attn-share", 0, "X", \
        "the share of a full micro-batch's time quadratic in document length (--synthetic: default 0.25; the GPT: default its FLOPs' share, then calibrated on the run's second step)" \
  }
int train_session(train_opts *o);

/* The peak activation memory the schedule predicts per rank beside the
 * measured one, against 1F1B's, and what it costs in time (train_report.c). */
void train_memory_report(const train_opts *o, kt_session *s, const kt_session_result *r,
                         kt_buf *out);

/* The live dashboard of train --serve (train_serve.c): started by world
 * rank 0 from the session's on_ready, before the run directory is
 * created or written (so a port in use leaves nothing behind), announced
 * with the start lines, fed after every step without waiting, closed with
 * the run. */
kt_status train_serve_start(const train_opts *o, const kt_session_info *info, kt_server **out,
                            kt_error *err);
void train_serve_announce(kt_server *srv, const train_opts *o);
void train_serve_step(kt_server *srv, const kt_train_progress *p);
void train_serve_stop(kt_server *srv, int ok, const char *run_dir);

/* --resume (train_resume.c): the run read back, what changed. */
typedef struct {
  kt_session_resume run;
  kt_buf changes; /* "schedule 1f1b -> zb-h1, P 4 -> 2" or empty */
} train_resume;
/* Fills r and adapts o; 0, or the exit code after printing why. */
int train_resume_setup(train_opts *o, train_resume *r);
void train_resume_free(train_resume *r);
/* cli_fail for st, with "; wait for it to end or choose another --run-dir"
 * after a run directory's lock held by another process (EBUSY). */
int train_busy_hint(kt_status st, kt_error *err);
/* The "resuming ..." line, and a note when --steps runs past the decay. */
void train_resume_notes(const train_opts *o, const train_resume *r, FILE *f);

/* The final report: text summary, JSON, Chrome trace (train_report.c). */
void train_final_report(const train_opts *o, const kt_session_info *in,
                        const kt_session_result *res, const double *pred_peak, kt_buf *out);

/* KAITEN_TEST_HANG (hang_transport.c): wraps that rank's transport handle
 * when it lives in this process (the session's runtime, after it opened);
 * the handle back as it was before the session closes. */
void *cli_hang_install(kt_runtime *rt);
void cli_hang_remove(kt_runtime *rt, void *installed);

/* Signals (signals.c): the first SIGINT/SIGTERM/SIGUSR1 asks for a stop after
 * the current step; the same signal again is the same request until the
 * stop's checkpoint is under way and 2 s have passed, after which (or for
 * another stop signal) it ends the process; SIGWINCH marks a resize. */
void cli_signals_install(void);
void cli_signals_restore(void);
int cli_stop_requested(void); /* the signal number, or 0 */
/* Every rank agreed to stop after this step: the checkpoint comes next. */
void cli_signals_stopping(void);
/* MPI: this process's world rank and D, so a SIGTERM that ends the job while
 * a receive waits names the rank it waited for (a lost machine). */
void cli_signals_set_rank(int world_rank, int d);
void cli_note_stop(int sig); /* another rank asked (MPI) */
int cli_take_resize(void);   /* 1 once after each resize */
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
