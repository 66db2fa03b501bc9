/* The server's life: the address, the runs it shows (run directories read
 * with kt_run_load, those still training followed by follow.c, and the live
 * run), start, statistics and a clean close.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "serve/serve_internal.h"

void kt_serve_default_config(kt_serve_config *c) {
  memset(c, 0, sizeof *c);
  c->host = "127.0.0.1";
  c->port = KT_SERVE_DEFAULT_PORT;
  c->max_clients = 8;
  c->queue = 256;
  c->render_every = 0.5;
}

kt_status kt_serve_parse_addr(const char *text, char *host, size_t n, int *port, kt_error *err) {
  if (!text || !*text) return kt_fail(err, KT_EINVAL, "empty address: give PORT or HOST:PORT");
  const char *colon = strrchr(text, ':');
  const char *ptext = colon ? colon + 1 : text;
  long p;
  if (kt_parse_int(ptext, 0, 65535, &p))
    return kt_fail(err, KT_EINVAL, "'%s': the port must be a number in 0..65535", text);
  if (colon) {
    size_t len = (size_t)(colon - text);
    char h[64];
    if (len == 0 || len >= sizeof h || len >= n)
      return kt_fail(err, KT_EINVAL, "'%s': expected HOST:PORT with an IPv4 HOST", text);
    memcpy(h, text, len);
    h[len] = 0;
    struct in_addr a;
    if (strcmp(h, "localhost") && inet_pton(AF_INET, h, &a) != 1)
      return kt_fail(err, KT_EINVAL, "'%s': '%s' is not an IPv4 address (or localhost)", text, h);
    memcpy(host, h, len + 1);
  }
  *port = (int)p;
  return KT_OK;
}

/* Opens the listening socket (so that the reason of a failure is known). */
static kt_status listen_on(kt_server *s, const char *host, int port, kt_error *err) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  const char *ip = !strcmp(host, "localhost") ? "127.0.0.1" : host;
  if (inet_pton(AF_INET, ip, &a.sin_addr) != 1)
    return kt_fail(err, KT_EINVAL, "'%s' is not an IPv4 address (or localhost)", host);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return kt_fail(err, KT_EIO, "cannot open a socket: %s", strerror(errno));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 32)) {
    int e = errno;
    close(fd);
    if (e == EADDRINUSE)
      return kt_fail(err, KT_EIO,
                     "%s:%d is already in use (another server?); choose another "
                     "port",
                     host, port);
    if (e == EACCES)
      return kt_fail(err, KT_EIO,
                     "no permission to listen on %s:%d (ports below 1024 need "
                     "privileges)",
                     host, port);
    if (e == EADDRNOTAVAIL)
      return kt_fail(err, KT_EIO, "%s is not an address of this machine", host);
    return kt_fail(err, KT_EIO, "cannot listen on %s:%d: %s", host, port, strerror(e));
  }
  socklen_t len = sizeof a;
  getsockname(fd, (struct sockaddr *)&a, &len);
  s->port = ntohs(a.sin_port);
  s->listen_fd = fd;
  return KT_OK;
}

/* The last component of a directory ("runs/a/" -> "a"). */
static void dir_name(char *out, size_t n, const char *dir) {
  size_t end = strlen(dir), start;
  while (end > 1 && dir[end - 1] == '/') end--;
  for (start = end; start > 0 && dir[start - 1] != '/';) start--;
  snprintf(out, n, "%.*s", (int)(end - start), dir + start);
}

/* Names shown in the page: unique, so overlaid curves can be told apart. */
static void unique_names(kt_server *s) {
  for (int i = 1; i < s->n_runs; i++)
    for (int j = 0; j < i; j++)
      if (!strcmp(s->runs[i].name, s->runs[j].name)) {
        char base[80];
        snprintf(base, sizeof base, "%s", s->runs[i].name);
        snprintf(s->runs[i].name, sizeof s->runs[i].name, "%s (%d)", base, i + 1);
        break;
      }
}

void kt__serve_add_steps(kt_server *s, int i, const kt_run *r, size_t from) {
  kt_buf msg;
  kt_buf_init(&msg);
  for (size_t k = from; k < r->n_steps; k++)
    kt__serve_step_msg(&msg, i, &r->steps[k], r->steps[k].skipped,
                       r->ranks ? &r->rank_steps[k * (size_t)r->ranks] : NULL, r->ranks);
  pthread_mutex_lock(&s->lock);
  if (msg.failed) s->history.failed = 1;
  else kt_buf_append(&s->history, msg.data ? msg.data : "", msg.len);
  s->steps += (long long)(r->n_steps - from);
  pthread_cond_broadcast(&s->changed);
  pthread_mutex_unlock(&s->lock);
  kt_buf_free(&msg);
}

void kt__serve_add_timeline(kt_server *s, int i, const kt_run *r) {
  if (!r->has_timeline) return;
  kt_buf msg;
  kt_buf_init(&msg);
  int step = r->n_steps ? r->steps[r->n_steps - 1].step : 0;
  double periods[2] = {r->measured_period, r->predicted_period};
  kt__serve_timeline_msg(&msg, i, step, &r->measured, &r->predicted,
                         r->has_calibrated ? &r->calibrated : NULL, periods, r->v > 0 ? r->v : 1);
  kt__serve_publish_timeline(s, i, &msg);
  kt_buf_free(&msg);
}

void kt__serve_add_end(kt_server *s, int i, const kt_run *r, const char *reason) {
  kt_buf msg;
  kt_buf_init(&msg);
  kt__serve_end_msg(&msg, i, (long long)r->n_steps, reason);
  kt__serve_publish_end(s, i, &msg);
  kt_buf_free(&msg);
}

static void server_free(kt_server *s) {
  kt__feed_free(s);
  for (int i = 0; i < s->n_runs; i++) {
    serve_run *r = &s->runs[i];
    free(r->dir);
    free(r->tl_msg);
    free(r->end_msg);
    if (r->dirfd >= 0) close(r->dirfd);
    if (r->follow) kt_run_free(r->follow);
    free(r->follow);
  }
  kt__hosts_free(s);
  kt_buf_free(&s->page);
  kt_buf_free(&s->history);
  if (s->listen_fd >= 0) close(s->listen_fd);
  pthread_mutex_destroy(&s->lock);
  pthread_cond_destroy(&s->changed);
  pthread_mutex_destroy(&s->guard.lock);
  pthread_cond_destroy(&s->watch_wake);
  free(s);
}

void kt__serve_warn(kt_server *s, const char *msg) {
  if (s->on_warning) s->on_warning(s->warning_ctx, msg);
}

/* Run i's directory: its name, a descriptor its files are opened under,
 * whether a trainer still writes it, and its warnings. */
static kt_status add_dir(kt_server *s, const char *dir, const kt_run *r, kt_error *err) {
  serve_run *sr = &s->runs[s->n_runs++];
  dir_name(sr->name, sizeof sr->name, dir);
  if (!(sr->dir = strdup(dir))) return kt_fail(err, KT_ENOMEM, "out of memory");
  if ((sr->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
    return kt_fail(err, KT_EIO, "cannot open run directory '%s': %s", dir, strerror(errno));
  if (kt_rundir_writer(dir, &sr->pid) && !sr->pid) sr->pid = -1; /* held, PID unknown */
  for (size_t k = 0; k < r->n_warnings; k++) kt__serve_warn(s, r->warnings[k]);
  if (r->bad_lines > KT_RUN_LINES_DESCRIBED) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s/metrics.jsonl: %zu more bad lines skipped", dir,
             r->bad_lines - KT_RUN_LINES_DESCRIBED);
    kt__serve_warn(s, msg);
  }
  return KT_OK;
}

/* Reads the run directories into the history; the runs' descriptions go
 * into hello, which must come first. A run a trainer still writes keeps
 * its kt_run (followed by the watch thread) and gets no end marker yet; its
 * timeline.json is of an earlier step than its last (a trainer writes it
 * when it ends), so it is shown only once rewritten. */
static kt_status load_runs(kt_server *s, const kt_serve_config *cfg, kt_error *err) {
  kt_run *runs = kt_calloc((size_t)cfg->n_run_dirs + 1, sizeof *runs);
  const kt_run *by_index[KT_SERVE_MAX_RUNS] = {0};
  if (!runs) return kt_fail(err, KT_ENOMEM, "out of memory");
  kt_status st = KT_OK;
  int loaded = 0;
  for (int i = 0; i < cfg->n_run_dirs && !st; i++, loaded++) {
    st = kt_run_load(cfg->run_dirs[i], &runs[i], err);
    if (st) break;
    by_index[s->n_runs] = &runs[i];
    st = add_dir(s, cfg->run_dirs[i], &runs[i], err);
  }
  if (!st) {
    unique_names(s);
    kt_buf hello;
    kt_buf_init(&hello);
    kt__serve_hello(&hello, s, by_index, cfg->live);
    kt__serve_publish(s, &hello, 0);
    if (hello.failed) st = kt_fail(err, KT_ENOMEM, "out of memory");
    kt_buf_free(&hello);
  }
  if (!st && cfg->live && cfg->live->done) kt__serve_add_steps(s, s->live, cfg->live->done, 0);
  for (int i = 0; i < s->n_runs && !st; i++) {
    kt_run *r = (kt_run *)by_index[i];
    if (!r) continue;
    kt__serve_add_steps(s, i, r, 0);
    if (!s->runs[i].pid) {
      kt__serve_add_timeline(s, i, r); /* the traced step: the last one */
      kt__serve_add_end(s, i, r, "finished");
    } else if ((s->runs[i].follow = malloc(sizeof *r))) { /* handed over */
      *s->runs[i].follow = *r;
      memset(r, 0, sizeof *r);
    } else {
      st = kt_fail(err, KT_ENOMEM, "out of memory");
    }
  }
  if (!st && s->history.failed) st = kt_fail(err, KT_ENOMEM, "out of memory reading the runs");
  for (int i = 0; i < loaded; i++) kt_run_free(&runs[i]);
  free(runs);
  return st;
}

kt_status kt_server_create(const kt_serve_config *cfg, kt_server **out, kt_error *err) {
  *out = NULL;
  int n = cfg->n_run_dirs + (cfg->live != NULL);
  if (cfg->n_run_dirs < 0 || n == 0) return kt_fail(err, KT_EINVAL, "no run to serve");
  if (n > KT_SERVE_MAX_RUNS)
    return kt_fail(err, KT_EINVAL, "%d runs: at most %d can be shown at once", n,
                   KT_SERVE_MAX_RUNS);
  kt_server *s = kt_calloc(1, sizeof *s);
  if (!s) return kt_fail(err, KT_ENOMEM, "out of memory");
  s->listen_fd = -1;
  s->live = -1;
  for (int i = 0; i < KT_SERVE_MAX_RUNS; i++) s->runs[i].dirfd = -1;
  s->on_warning = cfg->on_warning;
  s->warning_ctx = cfg->warning_ctx;
  pthread_mutex_init(&s->guard.lock, NULL);
  pthread_cond_init(&s->watch_wake, NULL);
  s->max_clients = cfg->max_clients > 0 ? cfg->max_clients : 8;
  s->render_every = cfg->render_every > 0 ? cfg->render_every : 0.5;
  kt_buf_init(&s->page);
  kt_buf_init(&s->history);
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->changed, NULL);
  kt_status st = KT_OK;
  if (cfg->live) { /* the live run is run 0 */
    const kt_serve_live *lv = cfg->live;
    s->live = s->n_runs++;
    snprintf(s->runs[0].name, sizeof s->runs[0].name, "%s", lv->name ? lv->name : "live");
    if (lv->run_dir && !(s->runs[0].dir = strdup(lv->run_dir)))
      st = kt_fail(err, KT_ENOMEM, "out of memory");
    s->steps_before = lv->done ? (long long)lv->done->n_steps : 0;
    if (!st) st = kt__feed_start(s, lv, cfg->queue, err);
  }
  const char *host = cfg->host ? cfg->host : "127.0.0.1";
  if (!st) st = load_runs(s, cfg, err);
  if (!st) st = listen_on(s, host, cfg->port, err);
  if (!st) st = kt__hosts_init(s, !strcmp(host, "localhost") ? "127.0.0.1" : host, cfg, err);
  if (!st) st = kt__follow_start(s, err);
  if (!st) {
    kt__serve_page(&s->page, s);
    if (s->page.failed) st = kt_fail(err, KT_ENOMEM, "out of memory");
  }
  if (!st) st = kt__http_start(s, err);
  if (st) {
    kt__http_stop(s);
    kt__follow_stop(s);
    kt__feed_finish(s);
    server_free(s);
    return st;
  }
  *out = s;
  return KT_OK;
}

int kt_server_port(const kt_server *s) { return s ? s->port : 0; }

void kt_server_stats(kt_server *s, kt_serve_stats *out) {
  memset(out, 0, sizeof *out);
  if (!s) return;
  pthread_mutex_lock(&s->lock);
  out->clients = s->clients;
  out->steps = s->steps;
  out->rendered = s->rendered;
  out->refused = s->refused;
  pthread_mutex_unlock(&s->lock);
  pthread_mutex_lock(&s->guard.lock);
  out->evicted = s->guard.evicted;
  out->turned_away = s->guard.refused;
  pthread_mutex_unlock(&s->guard.lock);
  out->dropped = atomic_load(&s->dropped);
}

void kt_server_destroy(kt_server *s, const char *reason, double wait_s) {
  if (!s) return;
  snprintf(s->end_reason, sizeof s->end_reason, "%s", reason ? reason : "finished");
  kt__follow_stop(s);
  kt__feed_finish(s); /* the rest of the queue, the last step rendered, the end marker */
  pthread_mutex_lock(&s->lock);
  s->closing = 1;
  pthread_cond_broadcast(&s->changed);
  double until = kt_now() + (wait_s > 0 ? wait_s : 0);
  while (s->clients > 0 && kt_now() < until) { /* streams end once they have everything */
    pthread_mutex_unlock(&s->lock);
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    pthread_mutex_lock(&s->lock);
  }
  s->stopped = 1;
  pthread_cond_broadcast(&s->changed);
  pthread_mutex_unlock(&s->lock);
  kt__http_stop(s);
  server_free(s);
}
