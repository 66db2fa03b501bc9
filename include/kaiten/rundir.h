/* kaiten run directory: the files `kaiten train --run-dir DIR` writes, their
 * one writer (train) and their one reader (report, serve, resume).
 *
 *   config.json    the run: model, optimizer, and its layout segments (a run
 *                  resumed under another layout has one segment per layout)
 *   metrics.jsonl  one line per optimizer step, appended as it ends
 *   timeline.json  the traced (last) step, measured and predicted
 *   trace.json     the same step as a Chrome trace
 *   checkpoints/   written by the train module (kaiten/checkpoint.h)
 *   .lock          held (flock) by the one process writing the directory;
 *                  it holds that process's PID
 *
 * Every failure names the file (and line); the library never prints.
 */
#ifndef KAITEN_RUNDIR_H
#define KAITEN_RUNDIR_H

#include "kaiten/core.h"
#include "kaiten/schedule.h"
#include "kaiten/sim.h"
#include "kaiten/timeline.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- records ------------------------------------------------------------------ */

/* The straggler autopilot's records (docs/runtime.md, "The autopilot"). */
typedef enum { KT_FAULT_NONE, KT_FAULT_RANK, KT_FAULT_LINK, KT_FAULT_KIND_COUNT } kt_fault_kind;

/* metrics.jsonl "fault": the rank or link named slow at a step,
 * {"rank": 2, "factor": 1.5, "since": 10} or {"link": "0-1", "factor":
 * 41.3, "delay": 0.12, "since": 10}. */
typedef struct {
  int kind;      /* kt_fault_kind (NONE: the step named none) */
  int rank;      /* RANK: the pipeline rank */
  int a, b;      /* LINK: between pipeline ranks a < b */
  double factor; /* its ops' (a link: its hand-overs') time over the calibrated */
  double delay;  /* LINK: seconds each hand-over took beyond the calibrated (else NAN) */
  int since;     /* the step (1-based) it was first named */
} kt_run_fault;

/* metrics.jsonl "switch": the plan this step ran under was made between
 * it and the step before (the autopilot's switch), with what the
 * simulator predicted for the plan before and after on the costs measured. */
typedef struct {
  int made;                                 /* 0: no switch before this step */
  char kind[16];                            /* "reorder" | "repartition" */
  char from[32], to[32];                    /* the orders' names */
  char partition[128];                      /* repartition: the new layers per stage, "2,3,3" */
  double predicted_before, predicted_after; /* seconds a step */
  double lower_bound;     /* of any order at the run's memory limit on those costs (s) */
  double cost;            /* the switch's predicted cost (s) */
  double replan_seconds;  /* the search, measured (wall time) */
  double replan_cpu;      /* ... its thread's CPU time (the wall time less waits for a core) */
  double replan_fraction; /* ... over the step it was made after */
  double switch_seconds;  /* the switch itself (new chunks, units moved), measured */
} kt_run_switch;

/* Their JSON objects as metrics.jsonl holds them ("null" for none). */
void kt_run_fault_json(const kt_run_fault *f, kt_buf *b);
void kt_run_switch_json(const kt_run_switch *w, kt_buf *b);

/* One optimizer step of metrics.jsonl; NAN where a value is null or absent. */
typedef struct {
  int step;              /* 1-based: optimizer steps completed */
  int skipped;           /* not applied: its loss or gradients were not finite */
  double loss, val_loss; /* val_loss: NAN when not evaluated at this step */
  double lr, grad_norm, seconds, tokens_per_s, samples_per_s, bubble;
  kt_run_fault fault; /* the autopilot's detector: what this step found slow */
  kt_run_switch sw;   /* the autopilot's switch before this step */
} kt_run_step;

/* One rank in one step (metrics.jsonl ranks[]); NAN where absent.
 * peak_act_bytes: the most activation bytes the rank held at once during
 * the step (every stash its chunks kept, docs/runtime.md). */
typedef struct {
  double busy, comm_time, bytes_sent, peak_act_bytes;
  /* why the rank idled (metrics.jsonl ranks[].idle_causes): the actions'
   * own time and five causes, summing to the step's seconds
   * (kt_idle_split_step); every field NAN when the step has none */
  kt_idle_split idle;
} kt_run_rank_step;

/* One layout the run trained under, from first_step to last_step. */
typedef struct {
  int first_step; /* steps completed when the segment began */
  int last_step;  /* steps completed when it ended; -1 while running or unknown */
  char schedule[32];
  char transport[16]; /* "threads" | "mpi" */
  int p, v, m, b, k, d;
  int *partition; /* n_partition = P*V units per stage; NULL for synthetic runs */
  int n_partition;
  double predicted_bubble; /* the simulator, costs calibrated on the segment's last step; NAN */
  double measured_bubble;  /* measured on that step; NAN */
  /* that step's predicted period, and 1F1B's on the same costs and model
   * (kt_session_result.period_1f1b): what the schedule costs in time (s; NAN) */
  double predicted_period, period_1f1b;
  /* the cores the run's (first) process could use and its compute threads
   * (ranks x OpenBLAS threads): more threads than cores and ops waited for
   * a core; 0 when unknown */
  int cores, compute_threads;
  /* The model's memory under this layout (bytes per micro-batch, measured
   * by train; kt_session_info): per stage (n_mem = P*V entries; NULL and 0
   * for a synthetic model or one of the caller's own) what an F keeps,
   * what an I keeps for its W, and what an op holds above that while it
   * runs; 1F1B's predicted peak on the same model (the largest rank's;
   * 0 or NAN: unknown); the memory limit the schedule was built under, on
   * the whole peak (0 or NAN: none, or none in bytes) and as written ("":
   * none). */
  double *mem_act_bytes, *mem_wgrad_bytes, *mem_transient_bytes;
  int n_mem;
  double peak_1f1b_bytes, mem_limit_bytes;
  char mem_limit[32];
} kt_run_segment;

/* config.json as data. model is "gpt", "mlp" or "synthetic". */
typedef struct {
  char model[16];
  int layers, hidden, heads, seq_len, vocab, tie_embeddings, recompute;
  uint64_t model_seed;
  char optimizer[16];
  double lr, weight_decay, grad_clip;
  int warmup_steps, decay_steps;
  int steps, val_every; /* the steps the run aims for; validation every N */
  uint64_t data_seed;
  char data[512]; /* a data file, "built-in", or "" (synthetic) */
  /* GPT documents of varying length: the spec ("" for fixed windows), the
   * packing, and the chunks along the sequence (1: none; a segment's m
   * counts the chunks) */
  char doc_lengths[64], packing[16];
  int seq_chunks;
  /* their token model's attention share (kaiten/packing.h) where it is not
   * the model's FLOPs': given for the whole run (attn_from 0), or
   * calibrated and used from step attn_from on; has_attn 0: none */
  double attn_share;
  int attn_from, has_attn;
  kt_run_segment *segments; /* n_segments >= 1; the last is the current layout */
  int n_segments;
} kt_run_config;

void kt_run_config_free(kt_run_config *c);
/* Appends a segment (deep copy of seg, partition and memory included). ENOMEM. */
kt_status kt_run_config_add_segment(kt_run_config *c, const kt_run_segment *seg, kt_error *err);

/* ---- writing (one writer per directory) ------------------------------------------ */

typedef struct kt_rundir kt_rundir; /* an open, locked run directory */

typedef enum {
  KT_RUNDIR_NEW,   /* created when missing; refused (EINVAL) when it holds anything */
  KT_RUNDIR_FORCE, /* created when missing; kaiten's files in it are removed first */
  KT_RUNDIR_RESUME /* must exist and hold config.json */
} kt_rundir_mode;

/* Opens dir for writing and takes its lock for as long as it stays open.
 * EBUSY when another process holds it (the message names its PID); EINVAL
 * for a path that is not a directory, a non-empty directory in NEW mode, or
 * a missing run in RESUME mode; EIO. With FORCE, *kept (may be NULL)
 * receives how many entries that are not kaiten's were left in place; a
 * NEW directory refused for what it holds leaves that count there (> 0). */
kt_status kt_rundir_create(const char *dir, kt_rundir_mode mode, int *kept, kt_rundir **out,
                           kt_error *err);
void kt_rundir_destroy(kt_rundir *rd);
/* EBUSY (naming the PID) when a process writes dir now; KT_OK otherwise,
 * also when dir has no lock file. Takes no lock that outlives the call. */
kt_status kt_rundir_check_free(const char *dir, kt_error *err);
const char *kt_rundir_path(const kt_rundir *rd);

/* Writes config.json (atomically). EIO, ENOMEM. */
kt_status kt_rundir_write_config(kt_rundir *rd, const kt_run_config *c, kt_error *err);
/* Keeps the metrics lines of steps <= steps (a crash may have left later or
 * torn lines); a missing file becomes an empty one. EIO. */
kt_status kt_rundir_keep_steps(kt_rundir *rd, int steps, kt_error *err);
/* Appends one complete metrics line and flushes it. EIO (a full disk) with
 * the file named; the line is then not counted as written. */
kt_status kt_rundir_append_step(kt_rundir *rd, const kt_run_step *s, const kt_run_rank_step *ranks,
                                int n_ranks, kt_error *err);

typedef enum { KT_RUNDIR_TIMELINE, KT_RUNDIR_TRACE, KT_RUNDIR_FILE_COUNT } kt_rundir_file;
/* "timeline.json", "trace.json" */
const char *kt_rundir_file_name(kt_rundir_file f);
/* Writes one of the directory's rendered files atomically. EIO. */
kt_status kt_rundir_write_file(kt_rundir *rd, kt_rundir_file f, const kt_buf *text, kt_error *err);

/* ---- reading ---------------------------------------------------------------------- */

/* Reads config.json. Older directories without segments get one segment from
 * their layout. EINVAL when the directory or file is missing, EPARSE. */
kt_status kt_rundir_read_config(const char *dir, kt_run_config *out, kt_error *err);

/* config.json flattened to "model.kind" = "gpt", "layout.partition" =
 * "2, 1, 1, 2", in file order (the segments are in kt_run.cfg only). */
typedef struct {
  char *key, *value;
} kt_run_config_item;

/* kt_run.warnings holds at most KT_RUN_MAX_WARNINGS messages, of which the
 * first KT_RUN_LINES_DESCRIBED bad lines of metrics.jsonl (the rest counted). */
#define KT_RUN_MAX_WARNINGS 16
#define KT_RUN_LINES_DESCRIBED 8

/* Where kt_run_follow goes on reading (set by kt_run_load; not for callers). */
typedef struct {
  long long metrics_end;             /* bytes of metrics.jsonl read */
  int metrics_lines;                 /* its lines read */
  unsigned long long metrics_id[2];  /* its device and inode */
  unsigned long long timeline_id[4]; /* timeline.json's device, inode, size, mtime (ns) */
} kt_run_follow_state;

/* A whole run directory read back: DIR/config.json and DIR/metrics.jsonl
 * are required, DIR/timeline.json (the traced step, measured and predicted)
 * and DIR/trace.json (its memory counters) are optional. */
typedef struct {
  char *dir;
  kt_run_config cfg;
  kt_run_config_item *config;
  size_t n_config;
  /* the current (last) segment's layout and the model, for headings */
  char model[32], schedule[32], transport[16];
  int p, v, m, layers, hidden, steps_planned;
  /* metrics.jsonl, sorted by step */
  kt_run_step *steps;
  size_t n_steps;
  int ranks;                    /* ranks[] entries per step (the most any line has) */
  kt_run_rank_step *rank_steps; /* n_steps * ranks, row per step */
  size_t skipped_lines;         /* a torn last line (no newline, not JSON) is skipped */
  /* complete lines that hold no step (malformed JSON, a NUL byte, no "step")
   * are skipped, never the file: how many, the first described in warnings
   * ("DIR/metrics.jsonl line 7: malformed JSON (skipped)"), with other
   * things skipped (a trace.json too large to read) */
  size_t bad_lines;
  char *warnings[KT_RUN_MAX_WARNINGS];
  size_t n_warnings;
  /* timeline.json: the traced (last) step, both shifted to start at 0 (s) */
  int has_timeline;
  kt_timeline measured, predicted;
  /* the costs the prediction ran on (timeline.json's predicted.costs, s:
   * per stage where calibrated per stage), with the current segment's
   * memory per stage (bytes) where config.json has it; has_calibrated 0
   * when the file has none (calibrated is then kt_costs_default's) */
  kt_costs calibrated;
  int has_calibrated;
  /* each rank's bytes sent in the traced step (timeline.json's
   * measured.ranks[].bytes_sent; measured.p entries, NULL when absent) */
  double *sent_bytes;
  /* the traced step's period, measured and predicted (s), and its step
   * sync (kt_step_sync; -1: unknown, a run before periods were written: NAN) */
  double measured_period, predicted_period;
  int step_sync;
  int has_memory; /* measured.mem holds trace.json's memory counters (bytes) */
  kt_run_follow_state follow;
} kt_run;

/* Reads a run directory. A missing directory or required file, malformed
 * JSON in config.json, timeline.json or trace.json, a timeline whose times
 * overflow, a file far larger than kaiten writes (config.json 4 MiB,
 * timeline.json 64 MiB, metrics.jsonl 1 GiB or a line of
 * 1 MiB) or one that is not a regular file is EINVAL or EPARSE with a
 * one-line reason naming the file (and line); ENOMEM, EIO. A bad line of
 * metrics.jsonl is skipped and described in warnings, and so is trace.json
 * past 64 MiB (its memory counters are not read). On error *out holds
 * nothing to free. */
kt_status kt_run_load(const char *dir, kt_run *out, kt_error *err);
void kt_run_free(kt_run *r);

/* What kt_run_follow found. */
typedef struct {
  size_t steps; /* steps appended to r->steps, in file order */
  int timeline; /* timeline.json changed: measured, predicted, calibrated and
                    the memory counters were read again */
} kt_run_news;

/* Reads what a trainer added to a run loaded with kt_run_load: the complete
 * lines appended to metrics.jsonl since (when the file was rewritten, as a
 * resume does, only steps after the last one held), and timeline.json when
 * it changed. Bad lines are skipped and counted as in kt_run_load; errors
 * as kt_run_load's, r stays as it was (new steps already added stay). */
kt_status kt_run_follow(kt_run *r, kt_run_news *news, kt_error *err);

/* The costs a run's traced step was predicted with, and its memory, as
 * kt_run_load reads them (kt_run.calibrated), without reading its
 * metrics: what `compare --costs runs/NAME` takes. *layout (may be NULL)
 * receives the current segment (its schedule, P, V, M; its arrays are
 * not set: partition and memory NULL). EINVAL naming the directory when
 * it is not a run or has no timeline.json yet (written when training
 * ends), EPARSE, ENOMEM. Free out with kt_costs_free. */
kt_status kt_rundir_read_costs(const char *dir, kt_costs *out, kt_run_segment *layout,
                               kt_error *err);

/* Whether a process holds dir's lock (writes it now): 1 with its PID in
 * *pid (0 when unknown), else 0. Takes no lock while a writer holds it
 * (the kernel's lock table is read), so a trainer starting then is never
 * refused. */
int kt_rundir_writer(const char *dir, long *pid);

#ifdef __cplusplus
}
#endif

#endif
