/* The HTTP side: libmicrohttpd with a thread per connection (bounded by a
 * connection limit), a fixed table of routes, and the event streams.
 *
 * Routes (GET and HEAD only; anything else is 404 or 405):
 *   /                   the page
 *   /events             the event stream (at most max_clients at once; 503 beyond)
 *   /runs/N/FILE        FILE of run N's directory, FILE one of run_files[]
 * A path is compared with these whole, as sent (no %-decoding: no route
 * needs it); nothing in a request ever becomes part of a file name, and a
 * file is opened under its directory without following links, so no path
 * can reach outside the run directories. A request must name this server
 * in its Host header (hosts.c); connections are guarded (guard.c).
 *
 * A stream sends the history first (from byte 0), then each run's latest
 * rendered step, then waits for more; it sends a comment every few seconds
 * so a dead client is noticed, and ends when the server closes.
 */
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "serve/serve_internal.h"

#define KEEPALIVE_S 2 /* a comment this often: a closed client frees its slot */
#define STREAM_BLOCK (32 * 1024)

static const char *const run_files[] = {"config.json", "metrics.jsonl", "timeline.json",
                                        "trace.json"};

/* Only self-contained pages: inline script and style, the stream, nothing else
 * ('wasm-unsafe-eval': the what-if panel compiles the simulator the page carries). */
static const char page_policy[] =
    "default-src 'none'; script-src 'unsafe-inline' 'wasm-unsafe-eval'; style-src 'unsafe-inline'; "
    "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'";

typedef struct {
  kt_server *s;
  size_t off;                            /* bytes of the history sent */
  unsigned long seen[KT_SERVE_MAX_RUNS]; /* rendered step versions sent */
  char ended[KT_SERVE_MAX_RUNS];         /* end markers sent */
  char *pend;                            /* a message being sent, and how far */
  size_t pend_len, pend_off;
  int idle; /* the thread runs at idle priority */
} stream;

static void common_headers(struct MHD_Response *r, const char *type) {
  kt__mhd.add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  kt__mhd.add_response_header(r, "X-Content-Type-Options", "nosniff");
  kt__mhd.add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
  kt__mhd.add_response_header(r, "Referrer-Policy", "no-referrer");
}

static enum MHD_Result respond(struct MHD_Connection *c, unsigned code, const char *text) {
  struct MHD_Response *r =
      kt__mhd.create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
  if (!r) return MHD_NO;
  common_headers(r, "text/plain; charset=utf-8");
  if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
    kt__mhd.add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
  if (code == MHD_HTTP_SERVICE_UNAVAILABLE)
    kt__mhd.add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "5");
  enum MHD_Result ret = kt__mhd.queue_response(c, code, r);
  kt__mhd.destroy_response(r);
  return ret;
}

static size_t take_pending(stream *st, char *buf, size_t max) {
  size_t n = st->pend_len - st->pend_off;
  if (n > max) n = max;
  memcpy(buf, st->pend + st->pend_off, n);
  st->pend_off += n;
  if (st->pend_off == st->pend_len) {
    free(st->pend);
    st->pend = NULL;
  }
  return n;
}

/* The next message for st after the history: a run's newer rendered step,
 * else the end marker of a run whose last step it has. Under the lock. */
static int next_message(stream *st, kt_server *s) {
  for (int i = 0; i < s->n_runs; i++) {
    serve_run *r = &s->runs[i];
    const char *msg = NULL;
    size_t len = 0;
    if (r->tl_msg && r->tl_version != st->seen[i]) {
      msg = r->tl_msg, len = r->tl_len;
      st->seen[i] = r->tl_version;
    } else if (r->end_msg && !st->ended[i]) {
      msg = r->end_msg, len = r->end_len;
      st->ended[i] = 1;
    }
    if (!msg) continue;
    if (!(st->pend = malloc(len))) return 0;
    memcpy(st->pend, msg, len);
    st->pend_len = len, st->pend_off = 0;
    return 1;
  }
  return 0;
}

/* Called from the connection's own thread: it may wait. */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
  (void)pos;
  stream *st = cls;
  kt_server *s = st->s;
  if (!st->idle) st->idle = 1, kt__serve_idle_priority(); /* this connection's thread */
  if (st->pend) return (ssize_t)take_pending(st, buf, max);
  pthread_mutex_lock(&s->lock);
  for (;;) {
    if (s->stopped) break;
    if (st->off < s->history.len) {
      size_t n = s->history.len - st->off;
      if (n > max) n = max;
      memcpy(buf, s->history.data + st->off, n);
      st->off += n;
      pthread_mutex_unlock(&s->lock);
      return (ssize_t)n;
    }
    if (next_message(st, s)) {
      pthread_mutex_unlock(&s->lock);
      return (ssize_t)take_pending(st, buf, max);
    }
    if (s->closing) break;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += KEEPALIVE_S;
    if (pthread_cond_timedwait(&s->changed, &s->lock, &ts) == ETIMEDOUT) {
      pthread_mutex_unlock(&s->lock);
      static const char ping[] = ": keep-alive\n\n";
      size_t n = sizeof ping - 1 < max ? sizeof ping - 1 : max;
      memcpy(buf, ping, n);
      return (ssize_t)n;
    }
  }
  pthread_mutex_unlock(&s->lock);
  return MHD_CONTENT_READER_END_OF_STREAM;
}

static void stream_free(void *cls) {
  stream *st = cls;
  kt_server *s = st->s;
  free(st->pend);
  free(st);
  pthread_mutex_lock(&s->lock);
  s->clients--;
  pthread_cond_broadcast(&s->changed);
  pthread_mutex_unlock(&s->lock);
}

static enum MHD_Result open_stream(kt_server *s, struct MHD_Connection *c) {
  pthread_mutex_lock(&s->lock);
  int full = s->clients >= s->max_clients, closed = s->stopped;
  if (full) s->refused++;
  else if (!closed) s->clients++;
  pthread_mutex_unlock(&s->lock);
  if (closed) return respond(c, MHD_HTTP_SERVICE_UNAVAILABLE, "the server is stopping\n");
  if (full) return respond(c, MHD_HTTP_SERVICE_UNAVAILABLE, "too many open dashboards\n");
  stream *st = kt_calloc(1, sizeof *st);
  struct MHD_Response *r = st ? kt__mhd.create_response_from_callback(
                                    MHD_SIZE_UNKNOWN, STREAM_BLOCK, stream_read, st, stream_free)
                              : NULL;
  if (!r) {
    if (st) {
      st->s = s;
      stream_free(st);
    } else {
      pthread_mutex_lock(&s->lock);
      s->clients--;
      pthread_mutex_unlock(&s->lock);
    }
    return respond(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
  }
  st->s = s;
  common_headers(r, "text/event-stream; charset=utf-8");
  enum MHD_Result ret = kt__mhd.queue_response(c, MHD_HTTP_OK, r);
  kt__mhd.destroy_response(r);
  return ret;
}

/* "/runs/N/FILE" with N a canonical index of a run that has files and FILE
 * one of run_files[]: that run; else -1. *file receives FILE. */
static int run_file_of(const kt_server *s, const char *url, const char **file) {
  if (strncmp(url, "/runs/", 6)) return -1;
  const char *p = url + 6;
  int n = 0, digits = 0;
  for (; *p >= '0' && *p <= '9' && digits < 3; p++, digits++) n = n * 10 + (*p - '0');
  if (!digits || *p != '/' || (digits > 1 && url[6] == '0')) return -1;
  if (n >= s->n_runs || !s->runs[n].dir) return -1;
  for (size_t i = 0; i < sizeof run_files / sizeof *run_files; i++)
    if (!strcmp(p + 1, run_files[i])) {
      *file = run_files[i];
      return n;
    }
  return -1;
}

/* Whether the opened file is the run's own: a regular file (no FIFO or
 * device) with one link (a hard link names a file that lives elsewhere
 * too: /etc/shadow linked in as trace.json) that belongs to this server's
 * user or to the run directory's owner. Checked on the descriptor, so a
 * file swapped in after the check cannot pass it. */
static int own_file(int dirfd, int fd, struct stat *sb) {
  struct stat dir;
  if (fstat(fd, sb) || !S_ISREG(sb->st_mode) || sb->st_nlink != 1) return 0;
  return sb->st_uid == geteuid() || (!fstat(dirfd, &dir) && sb->st_uid == dir.st_uid);
}

/* Opens FILE under the run directory's descriptor (held since start), never
 * following a symbolic link (one swapped in later included) and never
 * blocking (a FIFO), and serves it only when it is the run's own
 * (own_file): no request can read anything but the run's own files. */
static enum MHD_Result serve_file(kt_server *s, struct MHD_Connection *c, int run,
                                  const char *file) {
  int dirfd = s->runs[run].dirfd;
  int fd = dirfd >= 0 ? openat(dirfd, file, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW) : -1;
  struct stat sb;
  if (fd < 0 || !own_file(dirfd, fd, &sb)) {
    if (fd >= 0) close(fd);
    return respond(c, MHD_HTTP_NOT_FOUND, "not in the run directory\n");
  }
  struct MHD_Response *r = kt__mhd.create_response_from_fd64((uint64_t)sb.st_size, fd);
  if (!r) {
    close(fd);
    return respond(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
  }
  size_t len = strlen(file);
  common_headers(r, len > 6 && !strcmp(file + len - 6, ".jsonl") ? "application/x-ndjson"
                                                                 : "application/json");
  enum MHD_Result ret = kt__mhd.queue_response(c, MHD_HTTP_OK, r);
  kt__mhd.destroy_response(r);
  return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_size, void **req) {
  (void)version, (void)upload_data;
  kt_server *s = cls;
  if (!*req) { /* the headers are complete: the connection is busy until its response ends */
    *req = s;
    kt__guard_busy(s, c, 1);
  }
  if (*upload_size) {
    *upload_size = 0; /* a body is never read */
    return MHD_YES;
  }
  if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
    return respond(c, MHD_HTTP_METHOD_NOT_ALLOWED, "read-only: GET or HEAD\n");
  const char *host = kt__mhd.lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
  if (!kt__host_ok(s, host)) return respond(c, MHD_HTTP_FORBIDDEN, "unexpected Host header\n");
  if (!strcmp(url, "/")) {
    struct MHD_Response *r =
        kt__mhd.create_response_from_buffer(s->page.len, s->page.data, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    common_headers(r, "text/html; charset=utf-8");
    kt__mhd.add_response_header(r, "Content-Security-Policy", page_policy);
    enum MHD_Result ret = kt__mhd.queue_response(c, MHD_HTTP_OK, r);
    kt__mhd.destroy_response(r);
    return ret;
  }
  if (!strcmp(url, "/events")) return open_stream(s, c);
  if (!strcmp(url, "/favicon.ico")) return respond(c, MHD_HTTP_NO_CONTENT, "");
  const char *file;
  int run = run_file_of(s, url, &file);
  if (run >= 0) return serve_file(s, c, run, file);
  return respond(c, MHD_HTTP_NOT_FOUND, "not found\n");
}

/* Paths stay as sent: "%2e%2e" or "%00" never turn into something else. */
static size_t keep_escapes(void *cls, struct MHD_Connection *c, char *s) {
  (void)cls, (void)c;
  return strlen(s);
}

/* A response ended (or the request failed): the connection is idle again. */
static void request_done(void *cls, struct MHD_Connection *c, void **req,
                         enum MHD_RequestTerminationCode toe) {
  (void)toe;
  if (*req) kt__guard_busy(cls, c, 0);
  *req = NULL;
}

kt_status kt__http_start(kt_server *s, kt_error *err) {
  kt_status st = kt__mhd_load(err);
  if (st) return st;
  unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO;
  /* the guard (guard.c) keeps the limits; the daemon's is its table's size.
   * A connection that makes no progress for the timeout is closed (a stream
   * sends a comment every KEEPALIVE_S, so a reader never idles that long) */
  s->daemon = kt__mhd.start_daemon(
      flags, 0, NULL, NULL, on_request, s, MHD_OPTION_LISTEN_SOCKET, (MHD_socket)s->listen_fd,
      MHD_OPTION_CONNECTION_LIMIT, (unsigned)KT__GUARD_SLOTS, MHD_OPTION_CONNECTION_TIMEOUT,
      (unsigned)15, MHD_OPTION_UNESCAPE_CALLBACK, keep_escapes, NULL, MHD_OPTION_NOTIFY_CONNECTION,
      kt__guard_notify, s, MHD_OPTION_NOTIFY_COMPLETED, request_done, s, MHD_OPTION_END);
  if (!s->daemon) return kt_fail(err, KT_ERUNTIME, "cannot start the HTTP server");
  s->listen_fd = -1; /* the daemon closes it */
  return KT_OK;
}

void kt__http_stop(kt_server *s) {
  if (s->daemon) kt__mhd.stop_daemon(s->daemon);
  s->daemon = NULL;
}
