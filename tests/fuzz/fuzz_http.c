/* Fuzz target: the HTTP request path of kaiten serve (request line,
 * headers, URL, Host check, routes, files, the event stream), through the
 * real server: libmicrohttpd's parser, the connection guard and the
 * handlers. Each input is sent as it is over one loopback connection, the
 * sending side is closed, and the whole response is read.
 *
 * The server shows one finished run whose trace.json was replaced, after
 * the start, by a link to a file outside the run holding a marker, and whose
 * checkpoints/ holds another; it accepts the Host name fuzz.example.
 * Properties beyond sanitizers: the server answers every input and closes
 * within 5 s (a hang aborts), a response is HTTP with a known status, and
 * no response ever holds a marker. */
#define _GNU_SOURCE /* memmem */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "fuzz_common.h"
#include "kaiten/serve.h"
#include "serve/serve_internal.h"

static kt_server *srv;
static int port;
static char root[128];

static void put(const char *dir, const char *name, const char *text) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  if (!f) abort();
  fputs(text, f);
  fclose(f);
}

static void stop_server(void) {
  kt_server_destroy(srv, "stopped", 0);
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  if (system(cmd)) {
  }
}

static void start_server(void) {
  const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  snprintf(root, sizeof root, "%s/kaiten-fuzz-http-%ld", tmp, (long)getpid());
  char run[192], sub[224], path[256];
  snprintf(run, sizeof run, "%s/run", root);
  if ((mkdir(root, 0700) && errno != EEXIST) || (mkdir(run, 0700) && errno != EEXIST)) abort();
  put(run, "config.json",
      "{\"model\": {\"kind\": \"mlp\", \"layers\": 2, \"hidden\": 8},"
      " \"layout\": {\"schedule\": \"1f1b\", \"p\": 2, \"v\": 1, \"m\": 2}}\n");
  put(run, "metrics.jsonl",
      "{\"step\":1,\"loss\":0.5,\"ranks\":[{\"busy\":1},{\"busy\":2}]}\n"
      "{\"step\":2,\"loss\":0.4}\n");
  put(run, "timeline.json",
      "{\"measured\":{\"p\":2,\"events\":[{\"rank\":0,\"stage\":0,\"mb\":0,\"op\":\"F\",\"start\":0,"
      "\"end\":1},{\"rank\":1,\"stage\":1,\"mb\":0,\"op\":\"F\",\"start\":1,\"end\":2}]},"
      "\"predicted\":{\"p\":2,\"events\":[]}}\n");
  put(root, "secret.json", "{\"traceEvents\": [], \"x\": \"FUZZ-SECRET-MARKER\"}\n");
  snprintf(sub, sizeof sub, "%s/checkpoints", run);
  mkdir(sub, 0700);
  put(sub, "step-2.ckpt", "FUZZ-SECRET-MARKER");
  kt_serve_config c;
  kt_serve_default_config(&c);
  const char *dirs[1] = {run}, *allow[1] = {"fuzz.example"};
  c.port = 0;
  c.run_dirs = dirs;
  c.n_run_dirs = 1;
  c.max_clients = 4;
  c.allow_hosts = allow;
  c.n_allow_hosts = 1;
  kt_error err;
  if (kt_server_create(&c, &srv, &err)) {
    fprintf(stderr, "fuzz_http: %s\n", err.msg);
    abort();
  }
  port = kt_server_port(srv);
  /* swapped in after the start */
  snprintf(path, sizeof path, "%s/trace.json", run);
  snprintf(sub, sizeof sub, "%s/secret.json", root);
  if (symlink(sub, path)) abort();
  /* every run is finished: streams end once they sent everything */
  pthread_mutex_lock(&srv->lock);
  srv->closing = 1;
  pthread_mutex_unlock(&srv->lock);
  atexit(stop_server);
}

/* connect(), finished when a signal interrupted it. 0, or -1 (errno). */
static int dial(int fd, const struct sockaddr_in *a) {
  if (connect(fd, (const struct sockaddr *)a, sizeof *a) == 0) return 0;
  if (errno != EINTR && errno != EINPROGRESS) return -1;
  struct pollfd p = {.fd = fd, .events = POLLOUT};
  while (poll(&p, 1, 5000) < 0)
    if (errno != EINTR) return -1;
  int e = 0;
  socklen_t n = sizeof e;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &n) || e) return errno = e ? e : errno, -1;
  return 0;
}

static int known_status(int code) {
  static const int codes[] = {200, 204, 400, 403, 404, 405, 413, 414, 431, 500, 501, 503, 505};
  for (size_t i = 0; i < sizeof codes / sizeof *codes; i++)
    if (code == codes[i]) return 1;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!srv) start_server();
  if (size > 65536) return 0;
  /* each input from another loopback address (127.1.x.y): the connections
   * the server closed wait out TIME_WAIT without using up the ports */
  static unsigned next;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in from = {.sin_family = AF_INET};
  from.sin_addr.s_addr = htonl(0x7F010000u | (next++ & 0xFFFFu));
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (fd < 0 || bind(fd, (struct sockaddr *)&from, sizeof from) || dial(fd, &a)) {
    perror("fuzz_http: connect");
    abort();
  }
  /* the server may close before reading it all (a bad request line): not an error */
  for (size_t off = 0; off < size;) {
    ssize_t k = send(fd, data + off, size - off, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue; /* LeakSanitizer stops the world with signals */
    if (k <= 0) break;
    off += (size_t)k;
  }
  shutdown(fd, SHUT_WR);
  kt_buf b;
  kt_buf_init(&b);
  double end = kt_now() + 5;
  for (;;) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    double left = end - kt_now();
    if (left <= 0) {
      fprintf(stderr, "fuzz_http: no end of the response in 5 s\n");
      abort();
    }
    if (poll(&p, 1, (int)(left * 1000) + 1) <= 0) continue;
    char chunk[16384];
    ssize_t k = recv(fd, chunk, sizeof chunk, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    kt_buf_append(&b, chunk, (size_t)k);
  }
  close(fd);
  const char *text = b.data ? b.data : "";
  int code = 0;
  if (b.len && (sscanf(text, "HTTP/1.%*d %d", &code) != 1 || !known_status(code))) {
    fprintf(stderr, "fuzz_http: not an HTTP response: %.80s\n", text);
    abort();
  }
  if (b.len && memmem(b.data, b.len, "FUZZ-SECRET-MARKER", 18)) {
    fprintf(stderr, "fuzz_http: a file outside the run was served\n");
    abort();
  }
  kt_buf_free(&b);
  return 0;
}
