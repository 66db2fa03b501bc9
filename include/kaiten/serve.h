/* kaiten serve: the live dashboard over training runs.
 *
 * A small HTTP server (libmicrohttpd) that serves one self-contained page
 * and a Server-Sent Events stream. The stream carries, for every run shown:
 * its description, one record per optimizer step (the fields of a
 * metrics.jsonl line), the latest rendered step (measured and predicted
 * timelines, per-rank busy/idle and memory, and both Gantt charts), and an
 * end marker. A client that connects late gets the history first, then the
 * live records.
 *
 * Two sources: run directories (read with kt_run_load; one whose lock a
 * trainer holds is followed as it grows, shown as "training (pid N)" until
 * the lock is released), and at most one live run, fed by the trainer with
 * kt_server_push. The trainer never waits on the server: records go through
 * a bounded single-producer queue and are dropped (and counted) when it is
 * full.
 *
 * Read-only: besides the page and the stream, only the known files of each
 * run directory are served (/runs/N/config.json, metrics.jsonl,
 * timeline.json, trace.json), and only when they are regular files in that
 * directory (never through a symbolic link, one swapped in later included);
 * every other path is 404, so no request can name a file outside them.
 * Requests must name this machine in their Host header (DNS rebinding).
 * Connections are guarded (a client address holds at most 32, all clients
 * 128; an idle connection gives its place to a new one, and waits at most
 * 10 s for its request), so slow clients cannot lock others out. The
 * library never prints.
 */
#ifndef KAITEN_SERVE_H
#define KAITEN_SERVE_H

#include "kaiten/report.h"
#include "kaiten/schedule.h"
#include "kaiten/timeline.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KT_SERVE_DEFAULT_PORT 8080
#define KT_SERVE_MAX_RUNS 16

/* Predicts a measured step of schedule s (grad_accum rounds): the costs
 * calibrated on it and the simulated timeline; kt_train_predict is one. */
typedef kt_status (*kt_serve_predict_fn)(const kt_schedule *s, int grad_accum,
                                         const kt_timeline *measured, kt_costs *calibrated,
                                         kt_timeline *predicted, kt_error *err);

/* The run the trainer feeds (everything is copied by kt_server_create). */
typedef struct {
  const char *name;            /* shown in the page (e.g. the run directory's name) */
  const char *run_dir;         /* its files are served under /runs/0/ (NULL: none) */
  const kt_schedule *schedule; /* predicts each rendered step (costs calibrated on it) */
  int grad_accum;              /* K rounds of the schedule per step */
  kt_serve_predict_fn predict; /* the prediction (NULL: the page shows none); a callback,
                                * so that the server links no training runtime */
  const char *model;           /* "gpt", "mlp", "synthetic" */
  int layers, hidden, steps;   /* steps: planned in total */
  const char *transport;       /* "threads" | "mpi" */
  const kt_run *done;          /* a resumed run's earlier steps, shown first (may be NULL) */
  /* its layout as config.json has it: the model's memory, 1F1B's peak and
   * the memory limit, drawn beside each step's (may be NULL) */
  const kt_run_segment *layout;
} kt_serve_live;

/* Receives a warning (a line of metrics.jsonl skipped); may be called from
 * the server's threads. */
typedef void (*kt_serve_warning_fn)(void *ctx, const char *msg);

typedef struct {
  const char *host;            /* IPv4 address or "localhost" (default "127.0.0.1") */
  int port;                    /* 0 = any free port (see kt_server_port) */
  int max_clients;             /* event streams at once (default 8); more get 503 */
  int queue;                   /* step records the trainer may have in flight (default 256) */
  double render_every;         /* seconds between rendered steps of a live run (default 0.5) */
  const char *const *run_dirs; /* finished runs to show (their curves overlay) */
  int n_run_dirs;
  const kt_serve_live *live; /* NULL: only run_dirs */
  /* Host header names accepted besides the machine's own (its addresses, its
   * name, localhost): a request naming another host is 403 (DNS rebinding) */
  const char *const *allow_hosts;
  int n_allow_hosts;
  kt_serve_warning_fn on_warning; /* NULL: warnings are dropped */
  void *warning_ctx;
} kt_serve_config;

/* Whether listening on host exposes the runs beyond this machine (an address
 * that is not the loopback). */
int kt_serve_host_exposed(const char *host);

void kt_serve_default_config(kt_serve_config *c);

/* Parses "[HOST:]PORT" (PORT alone keeps *host). HOST is an IPv4 address or
 * "localhost"; PORT is 0..65535. host receives the address text (n bytes).
 * EINVAL with the reason. */
kt_status kt_serve_parse_addr(const char *text, char *host, size_t n, int *port, kt_error *err);

/* One optimizer step of the live run: its metrics line and, optionally, the
 * step's measured timeline (copied by kt_server_push). */
typedef struct {
  kt_run_step step;
  int skipped;                   /* the step was not applied (non-finite values) */
  const kt_run_rank_step *ranks; /* n_ranks entries (busy, comm, bytes, peak activations) */
  int n_ranks;
  const kt_timeline *timeline; /* measured, may be NULL */
} kt_serve_step;

typedef struct kt_server kt_server;

typedef struct {
  int clients;           /* event streams open now */
  long long steps;       /* step records the stream holds (all runs) */
  long long dropped;     /* records the queue had no room for */
  long long rendered;    /* steps rendered for the page */
  long long refused;     /* streams refused for the client limit */
  long long evicted;     /* idle connections closed to make room, or past their time */
  long long turned_away; /* connections closed at once: all in their way were busy */
} kt_serve_stats;

/* Loads the run directories, binds host:port and starts serving. EINVAL:
 * a bad run directory or address (the reader's reason), EIO: the address
 * cannot be bound (in use: the reason says so), ENOMEM. */
kt_status kt_server_create(const kt_serve_config *cfg, kt_server **out, kt_error *err);
/* The bound port (the chosen one when cfg->port was 0). */
int kt_server_port(const kt_server *s);
/* Hands one step of the live run to the server without waiting: returns 0
 * when queued, 1 when dropped (queue full, out of memory, or no live run).
 * Call from one thread only (the trainer's). */
int kt_server_push(kt_server *s, const kt_serve_step *rec);
void kt_server_stats(kt_server *s, kt_serve_stats *out);
/* Ends the live run (reason: "finished", "stopped", ...): its last step is
 * rendered and an end marker follows; open streams get up to wait_s seconds
 * to receive everything, then the server stops and s is freed. NULL is a
 * no-op. */
void kt_server_destroy(kt_server *s, const char *reason, double wait_s);

#ifdef __cplusplus
}
#endif

#endif
