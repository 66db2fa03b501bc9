/* Internal pieces of the serve module (not public API): the server's state,
 * shared by the HTTP side (http.c), the stream's messages (stream.c), the
 * live feed (feed.c) and the page (page.c).
 *
 * Locking: everything under "shared" is guarded by lock; the streams wait
 * on changed. The trainer touches only the queue (atomics and a
 * semaphore), never the lock.
 */
#ifndef KAITEN_SERVE_INTERNAL_H
#define KAITEN_SERVE_INTERNAL_H

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <microhttpd.h>

#include "kaiten/serve.h"

typedef struct {
  char name[96];
  char *dir;      /* its files are served; NULL: none */
  int dirfd;      /* dir, opened at start: files are opened under it, never by path */
  kt_run *follow; /* a run a trainer still writes (its lock held), read as it grows */
  long pid;       /* that trainer */
  char *tl_msg;   /* shared: the latest rendered step as an SSE message, or NULL */
  size_t tl_len;
  unsigned long tl_version; /* shared: bumped with every new tl_msg */
  char *end_msg;            /* shared: the end marker once the run is over, else NULL */
  size_t end_len;
} serve_run;

/* One record in the queue: a step and its timeline, owned by the queue. */
typedef struct {
  kt_run_step step;
  int skipped, n_ranks;
  kt_run_rank_step *ranks;
  kt_timeline timeline; /* p == 0: none */
} serve_record;

/* ---- guard.c: connections ---- */

#define KT__GUARD_PER_ADDR 32 /* live connections per client address */
#define KT__GUARD_TOTAL 128   /* and in all */
#define KT__GUARD_SLOTS 256   /* the daemon's limit: room for closed ones to go */
#define KT__GUARD_IDLE_S 10.0 /* an idle connection (no complete request) is closed after */

typedef struct {
  int used, busy, evicted;
  int fd;
  uint32_t addr; /* IPv4, network order */
  double since;  /* accepted, or its last response ended */
} guard_conn;

typedef struct {
  pthread_mutex_t lock;
  guard_conn slots[KT__GUARD_SLOTS];
  long long evicted, refused;
} serve_guard;

/* The daemon's connection notifications (cls: the server). */
void kt__guard_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                      enum MHD_ConnectionNotificationCode toe);
/* A request's headers are complete (busy = 1) or its response ended (0). */
void kt__guard_busy(kt_server *s, struct MHD_Connection *c, int busy);
/* Closes idle connections past their time (the watch thread, each second). */
void kt__guard_tick(kt_server *s);

struct kt_server {
  /* fixed once started */
  int port, max_clients;
  int n_runs, live; /* live: index of the live run, -1 when none */
  serve_run runs[KT_SERVE_MAX_RUNS];
  kt_buf page; /* the page, the same for every client */
  struct MHD_Daemon *daemon;
  int listen_fd;
  /* shared */
  pthread_mutex_t lock;
  pthread_cond_t changed;
  kt_buf history; /* SSE messages every stream starts with: hello, then steps */
  int closing;    /* no more records: streams end once they have everything */
  int stopped;    /* streams end now */
  int clients;
  long long steps, rendered, refused;
  /* the live feed: a single-producer, single-consumer ring */
  serve_record **ring;
  size_t ring_cap;
  atomic_size_t head, tail; /* consumer's and producer's positions */
  atomic_llong dropped;
  atomic_int finishing;
  sem_t wake;
  pthread_t pump;
  int pump_started;
  kt_schedule sched; /* the live run's, for the prediction */
  int grad_accum;
  kt_serve_predict_fn predict; /* or NULL */
  long long steps_before;      /* a resumed live run's earlier steps (in the history) */
  double render_every;
  char end_reason[32];
  serve_guard guard;
  /* Host names a request may give (the bound address, the machine's names,
   * --allow-host), lower case */
  char **hosts;
  int n_hosts;
  kt_serve_warning_fn on_warning;
  void *warning_ctx;
  /* the watch thread: the guard's timeouts, runs that still train */
  pthread_t watch;
  int watch_started;
  int watch_stop; /* under lock */
  pthread_cond_t watch_wake;
};

/* ---- stream.c: messages ------------------------------------------------------ */

/* Appends one SSE message: "event: EVENT\ndata: JSON\n\n" (newlines in the
 * JSON, which a well-formed one holds only between tokens, become spaces). */
void kt__sse_message(kt_buf *out, const char *event, const char *json, size_t len);
/* Lowers the calling thread (a stream's) to nice 19: with as many ranks as
 * cores, any other runnable thread at the ranks' priority takes a core from
 * a rank on the pipeline's critical path; at nice 19 a stream gets the idle
 * time and a small share under load, enough to copy messages (SCHED_IDLE did
 * starve it on a busy machine). Best effort. Not for the feed's renderings,
 * which would then lag the run (feed.c). */
void kt__serve_idle_priority(void);
/* The hello message: the runs shown (the page resets on it). */
void kt__serve_hello(kt_buf *out, const kt_server *s, const kt_run *const *runs,
                     const kt_serve_live *live);
/* One step record of run `run`. */
void kt__serve_step_msg(kt_buf *out, int run, const kt_run_step *st, int skipped,
                        const kt_run_rank_step *ranks, int n_ranks);
/* The rendered step: both timelines (events, per-rank busy, idle and peak
 * memory), the calibrated costs as the what-if panel's seed holds them
 * (NULL: unknown), their periods (measured
 * and predicted; NULL or NAN: each timeline's makespan) and both Gantt
 * charts on one time scale. measured and predicted start at 0. */
void kt__serve_timeline_msg(kt_buf *out, int run, int step, const kt_timeline *measured,
                            const kt_timeline *predicted, const kt_costs *costs,
                            const double periods[2], int chunks);
void kt__serve_end_msg(kt_buf *out, int run, long long steps, const char *reason);
/* Appends a message to the history, replaces run's rendered step, or sets
 * its end marker (a stream sends it after the run's last rendered step), and
 * wakes the streams. The last two take msg over (it is left empty). */
void kt__serve_publish(kt_server *s, const kt_buf *msg, int is_step);
void kt__serve_publish_timeline(kt_server *s, int run, kt_buf *msg);
void kt__serve_publish_end(kt_server *s, int run, kt_buf *msg);

/* ---- server.c: a run directory's messages ---- */

/* Steps from..n_steps of r into the history, as run i's; wakes the streams. */
void kt__serve_add_steps(kt_server *s, int i, const kt_run *r, size_t from);
/* r's traced step (when it has one) as run i's rendered step. */
void kt__serve_add_timeline(kt_server *s, int i, const kt_run *r);
/* Run i's end marker. */
void kt__serve_add_end(kt_server *s, int i, const kt_run *r, const char *reason);

/* ---- feed.c: the live run ------------------------------------------------------- */

kt_status kt__feed_start(kt_server *s, const kt_serve_live *live, int queue, kt_error *err);
/* Drains the queue, renders the last step, appends the end marker; joins the pump. */
void kt__feed_finish(kt_server *s);
void kt__feed_free(kt_server *s);

/* ---- http.c ------------------------------------------------------------------------ */

/* Starts the daemon on listen_fd (which it then owns); stops it, waiting for
 * its connection threads. */
/* libmicrohttpd's entry points, opened by kt__mhd_load (mhd.c), which
 * kt__http_start calls first: every other call runs inside its daemon. */
typedef struct {
  __typeof__(&MHD_start_daemon) start_daemon;
  __typeof__(&MHD_stop_daemon) stop_daemon;
  __typeof__(&MHD_create_response_from_buffer) create_response_from_buffer;
  __typeof__(&MHD_create_response_from_callback) create_response_from_callback;
  __typeof__(&MHD_create_response_from_fd64) create_response_from_fd64;
  __typeof__(&MHD_destroy_response) destroy_response;
  __typeof__(&MHD_add_response_header) add_response_header;
  __typeof__(&MHD_queue_response) queue_response;
  __typeof__(&MHD_get_connection_info) get_connection_info;
  __typeof__(&MHD_lookup_connection_value) lookup_connection_value;
} kt__mhd_api;
extern kt__mhd_api kt__mhd;
kt_status kt__mhd_load(kt_error *err);
kt_status kt__http_start(kt_server *s, kt_error *err);
void kt__http_stop(kt_server *s);

/* ---- hosts.c ---- */

/* The Host names the server answers to; ENOMEM. */
kt_status kt__hosts_init(kt_server *s, const char *bound, const kt_serve_config *cfg,
                         kt_error *err);
void kt__hosts_free(kt_server *s);
/* Whether a Host header value names this server (NULL: none sent, allowed). */
int kt__host_ok(const kt_server *s, const char *host);

/* ---- follow.c: runs still training, the watch thread ---- */

/* Marks the runs whose lock is held (before hello) and starts the watch
 * thread; finished runs get their end marker. */
kt_status kt__follow_start(kt_server *s, kt_error *err);
void kt__follow_stop(kt_server *s);
/* Reports a warning to the caller's callback. */
void kt__serve_warn(kt_server *s, const char *msg);

/* ---- page.c ----------------------------------------------------------------------- */

void kt__serve_page(kt_buf *b, const kt_server *s);
extern const char kt__live_js[];

#endif
