/* CLI internals: option parsing and the shared pieces of the commands.
 * Only src/cli/ prints and exits. */
#ifndef KAITEN_CLI_H
#define KAITEN_CLI_H

#include <stdio.h>

#include "kaiten/generators.h"
#include "kaiten/core.h"
#include "kaiten/report.h"
#include "kaiten/request.h"
#include "kaiten/rundir.h"
#include "kaiten/schedule.h"
#include "kaiten/sim.h"

typedef struct {
  const char *name; /* long name without dashes */
  char short_name;  /* 0 if none */
  const char *arg;  /* value placeholder ("N"), NULL for a flag */
  const char *help;
} cli_opt;

#define CLI_MAX_OPTS 96
#define CLI_MAX_POS 8

typedef struct {
  const cli_opt *opts;
  int n_opts;
  const char *value[CLI_MAX_OPTS]; /* last value given, or "1" for flags */
  int given[CLI_MAX_OPTS];         /* how many times */
  const char *pos[CLI_MAX_POS];
  int n_pos;
} cli_args;

typedef struct {
  const char *name;
  const char *summary;
  const char *usage;   /* after "kaiten NAME " */
  const char *details; /* printed after the options, may be NULL */
  const cli_opt *opts;
  int n_opts;
  int (*run)(cli_args *a);
  /* multiplies matrices: main loads OpenBLAS and chooses its kernels
   * before run, while the process has one thread (kt_blas_choose_core) */
  int linear_algebra;
} cli_command;

/* Returns 0 when parsed, 2 on a usage error (message printed), 1 when help
 * was printed (caller exits 0). */
int cli_parse(const cli_command *cmd, int argc, char **argv, cli_args *out);
void cli_print_help(const cli_command *cmd, FILE *f);

const char *cli_get(const cli_args *a, const char *name);
int cli_has(const cli_args *a, const char *name);
/* Integer/double options with range checks; print the error and return -1. */
int cli_int(const cli_args *a, const char *name, long lo, long hi, long dflt, long *out);
int cli_double(const cli_args *a, const char *name, double lo, double hi, double dflt, double *out);

/* The program as invoked (argv[0]; "kaiten" until main sets it), for
 * commands printed back to the user. */
extern const char *cli_program;

/* Prints "kaiten: <msg>" to stderr and returns the exit code for st. */
int cli_fail(kt_status st, const kt_error *err);
int cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Shared option groups (costs and layout), and their readers. */
#define CLI_COST_OPTS \
  {"tf", 0, "X", \
   "forward cost of one rank's share of the model (a schedule with V chunks per rank runs X/V per stage); a list x0,x1,... is per stage; 'a,b;c,d' is per stage (;) and micro-batch (,)"}, \
      {"tb", 0, "X", "input-gradient (I) cost, on the same basis; a full backward B costs tb+tw"}, \
      {"tw", 0, "X", "weight-gradient (W) cost, on the same basis"}, \
      {"per-stage", 0, NULL, "scalar costs and memory are per stage, not per rank's share"}, \
      {"comm", 0, "X", \
       "communication time per hop between ranks (default 0); a list x0,x1,... is per link (i: ranks i, i+1)"}, \
      {"comm-latency", 0, "X", "per-message latency (with --comm-bandwidth); a list is per link"}, \
      {"comm-bytes", 0, "N", "bytes per message (with --comm-bandwidth)"}, \
      {"comm-bandwidth", 0, "X", \
       "bytes per time unit; hop = latency + bytes/bandwidth; a list is per link"}, \
      {"send-overhead", 0, "X", "time a rank spends posting each message it sends (default 0)"}, \
      {"op-overhead", 0, "X", \
       "time every compute action (F, B, I, W) adds beyond its cost (default 0)"}, \
      {"mem-act", 0, "X", \
       "activation memory M_B of one micro-batch, rank basis as --tf (default 1)"}, \
      {"mem-wgrad", 0, "X", "memory M_W an I keeps until its W, rank basis as --tf (default 0)"}, \
      {"overlap", 0, "X", \
       "overlapped F&B cells: 0 = one after the other (default), 1 = fully hidden"}, \
      CLI_STEP_OPTS, { \
    "costs", 0, "FILE", \
        "JSON cost file: {\"tf\": 1 or [..], \"tb\", \"tw\", \"comm\", \"mem_act\", \"mem_wgrad\", \"tu\", \"step_sync\", ...}; or a run directory (runs/NAME): the costs its traced step was predicted with and its memory per stage (bytes), per stage, at its P and M (sim: its schedule and V) unless given" \
  }

/* What a step is (docs/schedules.md): how ranks go from one step to the
 * next, and what the step's end costs. */
#define CLI_STEP_SYNC_OPT \
  { \
    "step-sync", 0, "MODE", \
        "overlap (default): a rank starts its next step once its own update is done (the norm is checked behind it); barrier: every rank waits for all" \
  }
#define CLI_STEP_OPTS \
  CLI_STEP_SYNC_OPT, \
      {"tu", 0, "X", \
       "optimizer update of one rank's share of the parameters, basis as --tf (default 0)"}, \
      {"t-norm", 0, "X", "global gradient-norm all-reduce at the step's end (default 0)"}, \
      {"t-dp", 0, "X", \
       "a rank's data-parallel gradient all-reduce at the step's end (default 0)"}, \
  { \
    "tie", 0, "X", "tied embeddings: the first and last stage exchange a gradient, taking X" \
  }

/* The cost basis, said once on every table, JSON and report: scalar costs
 * describe one rank's share of the model unless --per-stage. */
#define CLI_COST_BASIS_HELP \
  "Cost basis: --tf/--tb/--tw and --mem-act/--mem-wgrad describe one rank's share of\n" \
  "the model (the source documents' T_f, T_b), so every schedule in a comparison runs the\n" \
  "same model: a schedule with V chunks per rank runs T/V and M_B/V per stage. --per-stage\n" \
  "makes them stage costs; per-stage lists (--tf 2,1,1,3, --costs FILE) are always per stage.\n"

/* --step-sync into *sync (left as it is when not given). Exit code. */
int cli_step_sync(const cli_args *a, kt_step_sync *sync);

/* The request (kaiten/request.h) a command's flags state: --costs FILE
 * first, then every given option that names a setting, as typed, then
 * --schedule-file (or --from) as the order. 0, or the exit code after
 * printing why. */
int cli_request_read(const cli_args *a, kt_request *rq);
/* A schedule file read as the request reads an order (the options given
 * among -p/-m/-v, --stages/--microbatches/--chunks, --torch-notation and
 * --torch-version apply), built into res (kt_request_build, the order
 * only). 0, or the exit code after printing why. */
int cli_order_read(const cli_args *a, const char *path, kt_result *res);

/* The options of a search: the memory limit, effort, time, a slow rank or link. */
#define CLI_SEARCH_OPTS \
  {"mem-limit", 0, "X", \
   "zb-auto, zbv-auto, optimal: memory per rank, in --mem-act units or as a fraction of 1F1B's (0.5x); default 1F1B's"}, \
      CLI_THOROUGH_OPT, \
      {"effort", 0, "E", \
       "zb-auto, zbv-auto: quick | default | thorough (the same as --thorough)"}, \
      CLI_TIME_LIMIT_OPT, \
      {"slow-rank", 0, "R:F[@S]", \
       "rank R's compute takes F times as long (a straggler; F in 1..1000; the fault as it is once begun: @S is train's)"}, \
  { \
    "slow-link", 0, "A-B:+D[@S]", \
        "messages between ranks A and B (next to each other) take D (the costs' unit) longer" \
  }

/* Documents of varying length packed into the micro-batches (kaiten/packing.h). */
#define CLI_PACKING_OPTS \
  {"doc-lengths", 0, "SPEC", \
   "lognormal:SIGMA:MIN:MAX: pack synthetic documents into the micro-batches; each micro-batch costs what its tokens do"}, \
      {"seed", 0, "N", "the documents' seed (default 1)"}, \
      {"packing", 0, "fifo|balanced", \
       "fifo: fill micro-batches in data order; balanced: longest first onto the cheapest, then the order with the shortest simulated step (default fifo)"}, \
      {"mb-tokens", 0, "N", \
       "a micro-batch's token budget (default 1024); --tf/--tb/--tw/--mem-act are a micro-batch of one N-token document"}, \
  { \
    "attn-share", 0, "X", \
        "the share of that time that grows with the square of a document's length (default 0.25)" \
  }

/* Schedule files (PyTorch CSV or kaiten text form). */
#define CLI_SCHEDULE_FILE_OPTS \
  {"schedule-file", 0, "FILE", \
   "a schedule file: PyTorch CSV (compute-only or with comms) or text form"}, \
      {"torch-notation", 0, "N", \
       "how B/BW read: auto (default) | current (B full, I input) | legacy (B input, BW full)"}, \
  { \
    "torch-version", 0, "V", \
        "the PyTorch release a lowered file is for: 2.15 (default; WAIT_SEND, REDUCE_GRAD) or older, e.g. 2.9" \
  }

#define CLI_THOROUGH_OPT \
  { \
    "thorough", 0, NULL, \
        "zb-auto, zbv-auto: the thorough search (every rule, a longer " \
        "refinement, a random walk): sometimes a faster order, at 10-1000x the time" \
  }

#define CLI_TIME_LIMIT_OPT \
  { "time-limit", 0, "SECONDS", "optimal: the exact search's time limit (default 10)" }

/* Writes text to path atomically, or to stdout when path is NULL or "-".
 * durable: waits for the disk (fsync; kt_write_file_atomic), for what a
 * command cannot make again in milliseconds (a training run's summary,
 * calibrated costs); 0 for outputs it can (kt_write_output). */
int cli_emit(const char *path, const kt_buf *b, int durable);

/* A list of host names (--allow-host a,b): parsed into names[] (pointing
 * into text); a bad name is a usage error naming it (returns 2). */
#define CLI_MAX_HOSTS 16
typedef struct {
  char text[1024];
  const char *names[CLI_MAX_HOSTS];
  int n;
} cli_hosts;
int cli_parse_hosts(const char *flag, const char *list, cli_hosts *out);
/* Where a dashboard listens (train and serve take the same flags): one of
 * --serve [HOST:]PORT and --addr [HOST:]PORT, or --port PORT, or --addr
 * HOST with --port PORT. Into buf ("" when none is given); two addresses,
 * or --port beside an address with a port, are a usage error (returns 2).
 * The address itself is checked by kt_serve_parse_addr; *flag names the
 * flag it came from ("--serve", "--addr" or "--port"), for its errors. */
int cli_serve_addr(const cli_args *a, char *buf, size_t n, const char **flag);
/* Warns on stderr when host:port is reachable from the network. */
void cli_serve_exposed(const char *host, int port);

/* Prints a run directory's warnings (lines of metrics.jsonl skipped) on stderr. */
void cli_run_warnings(const kt_run *r);

/* Whether colour output should be used on stdout (--color auto|always|never). */
int cli_use_color(const char *mode);
int cli_term_width(void);

extern const cli_command cli_cmd_sim, cli_cmd_compare, cli_cmd_validate;
extern const cli_command cli_cmd_train, cli_cmd_sample, cli_cmd_calibrate;
extern const cli_command cli_cmd_plan;
extern const cli_command cli_cmd_report;
extern const cli_command cli_cmd_serve;

#endif
