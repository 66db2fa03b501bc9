/* The dashboard server (kaiten serve, train --serve) over real sockets:
 * routes and read-only file serving (path traversal, methods, foreign Host
 * headers, a FIFO), the event stream of a finished run (history in order,
 * valid JSON, end after the last rendered step), a live run fed through the
 * queue (early and late clients get every step, then the end), the client
 * limit, pushes that never wait (the server's lock held while the trainer
 * pushes: records drop, nothing blocks), a busy port, and addresses. */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "kaiten/serve.h"
#include "kaiten/sim.h"
#include "kaiten/train.h"
#include "serve/serve_internal.h"

#define HAS(text, needle) CHECK_MSG(strstr(text, needle) != NULL, "no '%s' in the text", needle)

static char root[256];

/* ---- a client: HTTP/1.0, so the body ends when the server closes ------------- */

static int dial(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a)) {
    close(fd);
    return -1;
  }
  return fd;
}

static int send_all(int fd, const char *s) {
  for (size_t n = strlen(s); n;) {
    ssize_t k = send(fd, s, n, MSG_NOSIGNAL);
    if (k <= 0) return -1;
    s += k, n -= (size_t)k;
  }
  return 0;
}

static void reset(kt_buf *b) {
  b->len = 0;
  if (b->data) b->data[0] = 0;
}

/* Reads into b until EOF, until `until` appears, or for at most secs. 1 on
 * EOF, 0 otherwise. */
static int read_until(int fd, kt_buf *b, const char *until, double secs) {
  double end = kt_now() + secs;
  for (;;) {
    if (until && b->data && strstr(b->data, until)) return 0;
    double left = end - kt_now();
    if (left <= 0) return 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, (int)(left * 1000) + 1) <= 0) continue;
    char chunk[8192];
    ssize_t k = recv(fd, chunk, sizeof chunk, 0);
    if (k <= 0) return 1;
    kt_buf_append(b, chunk, (size_t)k);
  }
}

/* One request; the whole response in out; the status code. */
static int request(int port, const char *fmt, ...) {
  char req[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(req, sizeof req, fmt, ap);
  va_end(ap);
  int fd = dial(port);
  if (fd < 0) return -1;
  kt_buf b;
  kt_buf_init(&b);
  int code = -1;
  if (!send_all(fd, req) && read_until(fd, &b, NULL, 5) && b.data)
    sscanf(b.data, "HTTP/1.%*d %d", &code);
  close(fd);
  kt_buf_free(&b);
  return code;
}

static int get(int port, const char *path) {
  return request(port, "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
}

/* Opens the event stream; fills b up to the first message. */
static int open_stream(int port, kt_buf *b) {
  int fd = dial(port);
  if (fd < 0) return -1;
  send_all(fd, "GET /events HTTP/1.0\r\nHost: 127.0.0.1:1\r\n\r\n");
  read_until(fd, b, "\n\n", 5);
  return fd;
}

/* ---- reading a stream back -------------------------------------------------------- */

typedef struct {
  int hello, steps, timelines, ends;
  int last_step, in_order, end_last, end_steps, bad_json;
  int timeline_before_end;
} summary;

static summary summarise(const char *text) {
  summary s = {.in_order = 1, .end_steps = -1};
  const char *body = strstr(text, "\r\n\r\n");
  const char *p = body ? body + 4 : text;
  int seen_timeline = 0;
  while ((p = strstr(p, "event: "))) {
    char ev[32] = "";
    sscanf(p + 7, "%31s", ev);
    const char *data = strstr(p, "\ndata: ");
    const char *eol = data ? strchr(data + 7, '\n') : NULL;
    if (!data || !eol) break;
    size_t n = (size_t)(eol - data - 7);
    char *json = malloc(n + 1);
    memcpy(json, data + 7, n);
    json[n] = 0;
    cJSON *o = cJSON_Parse(json);
    if (!o) s.bad_json++;
    s.end_last = 0;
    if (!strcmp(ev, "hello")) s.hello++;
    if (!strcmp(ev, "step")) {
      int step = cJSON_GetObjectItem(o, "step") ? cJSON_GetObjectItem(o, "step")->valueint : -1;
      if (step != s.last_step + 1) s.in_order = 0;
      s.last_step = step;
      s.steps++;
    }
    if (!strcmp(ev, "timeline")) {
      s.timelines++;
      seen_timeline = 1;
      if (!cJSON_GetObjectItem(o, "svg_measured") || !cJSON_GetObjectItem(o, "measured"))
        s.bad_json++;
    }
    if (!strcmp(ev, "end")) {
      s.ends++;
      s.end_last = 1;
      s.timeline_before_end = seen_timeline;
      cJSON *k = cJSON_GetObjectItem(o, "steps");
      s.end_steps = k ? k->valueint : -1;
    }
    cJSON_Delete(o);
    free(json);
    p = eol;
  }
  return s;
}

/* ---- a finished run directory --------------------------------------------------------- */

static void put(const char *dir, const char *name, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  CHECK_MSG(f != NULL, "cannot write %s", path);
  if (f) fputs(text, f), fclose(f);
}

static const char *finished_run(void) {
  static char dir[320];
  snprintf(dir, sizeof dir, "%s/run", root);
  mkdir(dir, 0755);
  put(dir, "config.json",
      "{\"model\": {\"kind\": \"mlp\", \"layers\": 4, \"hidden\": 16},\n"
      " \"layout\": {\"schedule\": \"1f1b\", \"p\": 2, \"v\": 1, \"m\": 1}, \"steps\": 3}\n");
  put(dir, "metrics.jsonl",
      "{\"step\":1,\"loss\":0.7,\"val_loss\":null,\"seconds\":0.01,\"bubble\":0.5,\"ranks\":"
      "[{\"busy\":0.001},{\"busy\":0.002}]}\n"
      "{\"step\":2,\"loss\":0.6,\"val_loss\":0.65,\"seconds\":0.01,\"bubble\":0.4}\n"
      "{\"step\":3,\"loss\":0.5,\"val_loss\":null,\"seconds\":0.01,\"bubble\":0.4}\n");
  put(dir, "timeline.json",
      "{\"measured\":{\"p\":2,\"time_unit\":\"s\",\"events\":["
      "{\"rank\":0,\"stage\":0,\"mb\":0,\"op\":\"F\",\"start\":5.0,\"end\":5.001},"
      "{\"rank\":1,\"stage\":1,\"mb\":0,\"op\":\"F\",\"start\":5.001,\"end\":5.002},"
      "{\"rank\":1,\"stage\":1,\"mb\":0,\"op\":\"B\",\"start\":5.002,\"end\":5.004},"
      "{\"rank\":0,\"stage\":0,\"mb\":0,\"op\":\"B\",\"start\":5.004,\"end\":5.006}]},"
      "\"predicted\":{\"p\":2,\"time_unit\":\"s\",\"costs\":{\"tf\":0.001,\"tb\":0.002,"
      "\"tw\":0,\"comm\":0},\"events\":["
      "{\"rank\":0,\"stage\":0,\"mb\":0,\"op\":\"F\",\"start\":0,\"end\":0.001},"
      "{\"rank\":1,\"stage\":1,\"mb\":0,\"op\":\"F\",\"start\":0.001,\"end\":0.002},"
      "{\"rank\":1,\"stage\":1,\"mb\":0,\"op\":\"B\",\"start\":0.002,\"end\":0.004},"
      "{\"rank\":0,\"stage\":0,\"mb\":0,\"op\":\"B\",\"start\":0.004,\"end\":0.006}]}}\n");
  char sub[400];
  snprintf(sub, sizeof sub, "%s/checkpoints", dir);
  mkdir(sub, 0755);
  put(sub, "step-3.ckpt", "secret");
  snprintf(sub, sizeof sub, "%s/trace.json", dir); /* a FIFO must not hang the server */
  mkfifo(sub, 0644);
  put(root, "outside.txt", "outside");
  return dir;
}

static kt_server *serve_runs(const char *const *dirs, int n, int max_clients) {
  kt_serve_config c;
  kt_serve_default_config(&c);
  c.port = 0;
  c.run_dirs = dirs;
  c.n_run_dirs = n;
  if (max_clients) c.max_clients = max_clients;
  kt_server *s = NULL;
  kt_error err = {{0}};
  CHECK_MSG(kt_server_create(&c, &s, &err) == KT_OK, "start: %s", err.msg);
  return s;
}

static void routes(const char *dir) {
  kt_server *s = serve_runs(&dir, 1, 0);
  REQUIRE_VOID(s);
  int port = kt_server_port(s);
  CHECK(port > 0);
  CHECK_EQ_INT(get(port, "/"), 200);
  CHECK_EQ_INT(get(port, "/runs/0/config.json"), 200);
  CHECK_EQ_INT(get(port, "/runs/0/metrics.jsonl"), 200);
  CHECK_EQ_INT(get(port, "/runs/0/timeline.json"), 200);
  CHECK_EQ_INT(get(port, "/runs/0/trace.json"), 404); /* a FIFO: not a regular file */
  static const char *const outside[] = {"/runs/0/../outside.txt",
                                        "/runs/0/..%2foutside.txt",
                                        "/runs/0/%2e%2e/outside.txt",
                                        "/runs/0/checkpoints/step-3.ckpt",
                                        "/runs/0/checkpoints",
                                        "/runs/0/",
                                        "/runs/0",
                                        "/runs//config.json",
                                        "/runs/00/config.json",
                                        "/runs/1/config.json",
                                        "/runs/-1/config.json",
                                        "/runs/0/config.json/",
                                        "/runs/0/CONFIG.JSON",
                                        "/runs/0/config.json%00.txt",
                                        "/../outside.txt",
                                        "//etc/passwd",
                                        "/etc/passwd",
                                        "/runs/0/./config.json",
                                        "/runs/9999999999/config.json",
                                        "/index.html"};
  for (size_t i = 0; i < sizeof outside / sizeof *outside; i++) {
    int code = get(port, outside[i]);
    CHECK_MSG(code == 404, "%s: %d, want 404", outside[i], code);
  }
  /* the whole response of a known file is that file */
  int fd = dial(port);
  kt_buf b;
  kt_buf_init(&b);
  send_all(fd, "GET /runs/0/metrics.jsonl HTTP/1.0\r\nHost: localhost\r\n\r\n");
  read_until(fd, &b, NULL, 5);
  close(fd);
  HAS(b.data ? b.data : "", "\r\n\r\n{\"step\":1,\"loss\":0.7");
  HAS(b.data ? b.data : "", "X-Content-Type-Options: nosniff");
  reset(&b);
  fd = dial(port);
  send_all(fd, "GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
  read_until(fd, &b, NULL, 5);
  close(fd);
  HAS(b.data ? b.data : "", "Content-Security-Policy: default-src 'none'");
  HAS(b.data ? b.data : "", "new EventSource('events')");
  CHECK_MSG(!strstr(b.data ? b.data : "", "http:/"), "the page names an external address");
  kt_buf_free(&b);
  /* read-only; the loopback answers only to loopback names */
  CHECK_EQ_INT(request(port, "POST / HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Length: 3\r\n\r\nabc"),
               405);
  CHECK_EQ_INT(request(port, "PUT /runs/0/config.json HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"), 405);
  CHECK_EQ_INT(request(port, "DELETE /runs/0/config.json HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"),
               405);
  CHECK_EQ_INT(request(port, "GET / HTTP/1.0\r\nHost: attacker.example\r\n\r\n"), 403);
  CHECK_EQ_INT(request(port, "GET / HTTP/1.0\r\nHost: localhost:%d\r\n\r\n", port), 200);
  CHECK_EQ_INT(
      request(port, "GET / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nConnection: close\r\n\r\n", port),
      200);
  CHECK_EQ_INT(request(port, "HEAD / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"), 200);
  double t0 = kt_now();
  kt_server_destroy(s, "stopped", 1);
  CHECK_MSG(kt_now() - t0 < 1.5, "close took %.2f s", kt_now() - t0);
}

static void history(const char *dir) {
  const char *dirs[2] = {dir, dir};
  kt_server *s = serve_runs(dirs, 2, 0);
  REQUIRE_VOID(s);
  kt_buf b;
  kt_buf_init(&b);
  int fd = open_stream(kt_server_port(s), &b);
  read_until(fd, &b, "\"run\":1,\"steps\":3", 5);
  CHECK_STR_CONTAINS(b.data, "Content-Type: text/event-stream");
  summary sm = summarise(b.data ? b.data : "");
  CHECK_EQ_INT(sm.hello, 1);
  CHECK_EQ_INT(sm.steps, 6);     /* both runs' three steps */
  CHECK_EQ_INT(sm.timelines, 2); /* each run's traced step */
  CHECK_EQ_INT(sm.ends, 2);
  CHECK_EQ_INT(sm.bad_json, 0);
  CHECK(sm.end_last && sm.timeline_before_end);
  HAS(b.data ? b.data : "", "\"name\":\"run\"");
  HAS(b.data ? b.data : "", "\"name\":\"run (2)\""); /* the same directory twice: told apart */
  HAS(b.data ? b.data : "", "\"val_loss\":0.65");
  HAS(b.data ? b.data : "", "class=\\\"gantt\\\" data-mode=\\\"detail\\\"");
  kt_serve_stats st;
  kt_server_stats(s, &st);
  CHECK_EQ_INT(st.clients, 1);
  CHECK_EQ_INT(st.steps, 6);
  kt_server_destroy(s, "stopped", 1);
  reset(&b);
  CHECK(read_until(fd, &b, NULL, 3) == 1); /* closed with the server */
  close(fd);
  kt_buf_free(&b);
}

/* ---- the live run ------------------------------------------------------------------------ */

static kt_schedule sched;
static kt_timeline step_tl; /* a simulated step in seconds, as a measured one would be */

static kt_server *serve_live(int queue) {
  kt_serve_live live = {.name = "live",
                        .schedule = &sched,
                        .grad_accum = 1,
                        .predict = kt_train_predict,
                        .model = "mlp",
                        .layers = 4,
                        .hidden = 16,
                        .steps = 100,
                        .transport = "threads"};
  kt_serve_config c;
  kt_serve_default_config(&c);
  c.port = 0;
  c.live = &live;
  c.queue = queue;
  c.render_every = 0.02;
  kt_server *s = NULL;
  kt_error err = {{0}};
  CHECK_MSG(kt_server_create(&c, &s, &err) == KT_OK, "start: %s", err.msg);
  return s;
}

static int push(kt_server *s, int step) {
  kt_run_rank_step ranks[2] = {{.busy = 0.002, .peak_act_bytes = 4096},
                               {.busy = 0.003, .peak_act_bytes = 2048}};
  kt_serve_step rec = {.step = {.step = step,
                                .loss = 1.0 / step,
                                .val_loss = NAN,
                                .lr = 1e-3,
                                .grad_norm = 1,
                                .seconds = 0.01,
                                .tokens_per_s = 1000,
                                .samples_per_s = 10,
                                .bubble = 0.3},
                       .ranks = ranks,
                       .n_ranks = 2,
                       .timeline = &step_tl};
  return kt_server_push(s, &rec);
}

static void *closer(void *arg) {
  kt_server_destroy(arg, "finished", 3);
  return NULL;
}

static int wait_steps(kt_server *s, long long n) {
  kt_serve_stats st;
  for (double end = kt_now() + 5; kt_now() < end;) {
    kt_server_stats(s, &st);
    if (st.steps >= n && st.rendered > 0) return 1;
    usleep(5000);
  }
  return 0;
}

static void live_run(void) {
  kt_server *s = serve_live(0);
  REQUIRE_VOID(s);
  int port = kt_server_port(s);
  kt_buf early, late;
  kt_buf_init(&early);
  kt_buf_init(&late);
  int fa = open_stream(port, &early);
  enum { N = 40 };
  int queued = 0;
  for (int i = 1; i <= N; i++) {
    queued += push(s, i) == 0;
    if (i % 8 == 0) usleep(2000);
  }
  CHECK_EQ_INT(queued, N);
  CHECK(wait_steps(s, N));
  int fb = open_stream(port, &late); /* late: history first */
  pthread_t t;
  pthread_create(&t, NULL, closer, s);
  CHECK(read_until(fa, &early, NULL, 5) == 1);
  CHECK(read_until(fb, &late, NULL, 5) == 1);
  pthread_join(t, NULL);
  close(fa);
  close(fb);
  summary a = summarise(early.data ? early.data : ""), b = summarise(late.data ? late.data : "");
  summary both[2] = {a, b};
  for (int k = 0; k < 2; k++) {
    CHECK_EQ_INT(both[k].hello, 1);
    CHECK_EQ_INT(both[k].steps, N);
    CHECK(both[k].in_order);
    CHECK(both[k].timelines >= 1);
    CHECK_EQ_INT(both[k].ends, 1);
    CHECK_EQ_INT(both[k].end_steps, N);
    CHECK(both[k].end_last && both[k].timeline_before_end);
    CHECK_EQ_INT(both[k].bad_json, 0);
  }
  HAS(early.data ? early.data : "", "\"live\":true");
  HAS(early.data ? early.data : "", "\"reason\":\"finished\"");
  /* the prediction ran: costs calibrated on the pushed step */
  HAS(early.data ? early.data : "", "\"costs\":{\"overlap\":0,\"tf\":[");
  kt_buf_free(&early);
  kt_buf_free(&late);
}

static void limits(void) {
  kt_serve_config c;
  kt_serve_live live = {.name = "live", .schedule = &sched, .steps = 1};
  kt_serve_default_config(&c);
  c.port = 0;
  c.max_clients = 2;
  c.live = &live;
  kt_server *s = NULL;
  kt_error err;
  REQUIRE_VOID(kt_server_create(&c, &s, &err) == KT_OK);
  int port = kt_server_port(s);
  kt_buf b, b2;
  kt_buf_init(&b);
  kt_buf_init(&b2);
  int f1 = open_stream(port, &b), f2 = open_stream(port, &b2);
  kt_buf_free(&b2);
  reset(&b);
  CHECK_EQ_INT(get(port, "/events"), 503);
  CHECK_EQ_INT(get(port, "/"), 200); /* the page is still served */
  kt_serve_stats st;
  kt_server_stats(s, &st);
  CHECK_EQ_INT(st.clients, 2);
  CHECK_EQ_INT(st.refused, 1);
  close(f1);
  /* the server notices the gone client at its next write (a keep-alive) */
  int freed = 0;
  for (double end = kt_now() + 12; kt_now() < end && !freed; usleep(20000)) {
    kt_server_stats(s, &st);
    freed = st.clients == 1;
  }
  CHECK_MSG(freed, "a closed stream still counts (%d clients)", st.clients);
  reset(&b);
  int f3 = open_stream(port, &b);
  CHECK_STR_CONTAINS(b.data, "event: hello");
  kt_server_destroy(s, "stopped", 0.5);
  close(f2);
  close(f3);
  kt_buf_free(&b);
}

/* The trainer's push must not wait for the server: with the server's lock
 * held (its feed thread cannot publish), pushes still return at once and,
 * once the queue is full, drop. A push that waited would hang here. */
static void no_wait(void) {
  enum { QUEUE = 4, PUSHES = 200 };
  kt_server *s = serve_live(QUEUE);
  REQUIRE_VOID(s);
  pthread_mutex_lock(&s->lock);
  int queued = 0;
  double worst = 0;
  for (int i = 1; i <= PUSHES; i++) {
    double t0 = kt_now();
    queued += push(s, i) == 0;
    double dt = kt_now() - t0;
    if (dt > worst) worst = dt;
  }
  pthread_mutex_unlock(&s->lock);
  /* the feed may have taken one queue's worth before it blocked on the lock */
  CHECK_MSG(queued <= 2 * QUEUE, "%d of %d pushes queued with a queue of %d", queued, PUSHES,
            QUEUE);
  CHECK_MSG(worst < 0.05, "a push took %.3f s", worst);
  kt_serve_stats st;
  kt_server_stats(s, &st);
  CHECK_EQ_INT(st.dropped, PUSHES - queued);
  CHECK(wait_steps(s, queued));
  kt_server_destroy(s, "finished", 0);
  CHECK(kt_server_push(NULL, NULL) == 1);
}

static void errors(const char *dir) {
  kt_server *a = serve_runs(&dir, 1, 0);
  REQUIRE_VOID(a);
  kt_serve_config c;
  kt_serve_default_config(&c);
  c.port = kt_server_port(a);
  c.run_dirs = &dir;
  c.n_run_dirs = 1;
  kt_server *b = NULL;
  kt_error err = {{0}};
  CHECK_EQ_INT(kt_server_create(&c, &b, &err), KT_EIO);
  CHECK_STR_CONTAINS(err.msg, "already in use");
  CHECK(b == NULL);
  kt_server_destroy(a, "stopped", 0);
  const char *missing = "/nonexistent/run";
  c.port = 0;
  c.run_dirs = &missing;
  CHECK_EQ_INT(kt_server_create(&c, &b, &err), KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "/nonexistent/run");
  c.n_run_dirs = 0;
  CHECK_EQ_INT(kt_server_create(&c, &b, &err), KT_EINVAL);
  const char *many[KT_SERVE_MAX_RUNS + 1];
  for (int i = 0; i <= KT_SERVE_MAX_RUNS; i++) many[i] = dir;
  c.run_dirs = many;
  c.n_run_dirs = KT_SERVE_MAX_RUNS + 1;
  CHECK_EQ_INT(kt_server_create(&c, &b, &err), KT_EINVAL);
  c.n_run_dirs = 1;
  c.host = "10.255.255.1"; /* not this machine's */
  CHECK_EQ_INT(kt_server_create(&c, &b, &err), KT_EIO);
}

static void addresses(void) {
  char host[64] = "127.0.0.1";
  int port = -1;
  kt_error err;
  CHECK(kt_serve_parse_addr("8080", host, sizeof host, &port, &err) == KT_OK && port == 8080 &&
        !strcmp(host, "127.0.0.1"));
  CHECK(kt_serve_parse_addr("0.0.0.0:9000", host, sizeof host, &port, &err) == KT_OK &&
        port == 9000 && !strcmp(host, "0.0.0.0"));
  CHECK(kt_serve_parse_addr("localhost:0", host, sizeof host, &port, &err) == KT_OK && port == 0);
  static const char *const bad[] = {
      "",         "x",          "65536",         "-1",      ":80", "host.example:80",
      "1.2.3:80", "127.0.0.1:", "127.0.0.1:80x", "[::1]:80"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    CHECK_MSG(kt_serve_parse_addr(bad[i], host, sizeof host, &port, &err) == KT_EINVAL,
              "'%s' accepted", bad[i]);
}

int main(void) {
  alarm(120); /* a server that hangs fails the test instead of stalling CI */
  snprintf(root, sizeof root, "/tmp/kt_serve_XXXXXX");
  if (!mkdtemp(root)) return perror("mkdtemp"), 1;
  kt_error err;
  kt_gen_params params = {.p = 2, .m = 4};
  if (kt_generate(KT_SCHED_1F1B, &params, &sched, &err) ||
      kt_simulate(&sched, NULL, &step_tl, &err))
    return fprintf(stderr, "%s\n", err.msg), 1;
  snprintf(step_tl.time_unit, sizeof step_tl.time_unit, "s");
  for (size_t i = 0; i < step_tl.n_events; i++)
    step_tl.events[i].start = 7 + 1e-3 * step_tl.events[i].start,
    step_tl.events[i].end = 7 + 1e-3 * step_tl.events[i].end;
  const char *dir = finished_run();
  addresses();
  routes(dir);
  history(dir);
  live_run();
  limits();
  no_wait();
  errors(dir);
  kt_timeline_free(&step_tl);
  kt_schedule_free(&sched);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
  return kt_test_done(__FILE__);
}
