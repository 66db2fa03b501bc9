/* kaiten serve: the dashboard of training runs, in the browser. */
#define _GNU_SOURCE /* pipe2 */
#include <ctype.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "kaiten/serve.h"

static const cli_opt serve_opts[] = {
    {"addr", 0, "[HOST:]PORT", "where to listen (default 127.0.0.1:8080; PORT 0 = any free port)"},
    {"serve", 0, "[HOST:]PORT", "the same as --addr (train's spelling)"},
    {"port", 0, "PORT", "the port, on 127.0.0.1 or the HOST of --addr HOST"},
    {"max-clients", 0, "N", "browser tabs served at once (default 8)"},
    {"allow-host", 0, "NAME[,NAME]",
     "Host names a request may give besides this machine's (a name "
     "it is reached by through a proxy or DNS)"},
};

int cli_parse_hosts(const char *flag, const char *list, cli_hosts *out) {
  memset(out, 0, sizeof *out);
  if (!list) return 0;
  snprintf(out->text, sizeof out->text, "%s", list);
  if (strlen(list) >= sizeof out->text)
    return cli_usage_error("--%s: the list is longer than %zu characters", flag,
                           sizeof out->text - 1);
  for (char *p = out->text, *next; p; p = next) {
    next = strchr(p, ',');
    if (next) *next++ = 0;
    size_t n = strlen(p), ok = n > 0 && n <= 253;
    for (size_t i = 0; i < n && ok; i++)
      ok = isalnum((unsigned char)p[i]) || p[i] == '-' || p[i] == '.';
    if (!ok) return cli_usage_error("--%s '%s': not a host name", flag, p);
    if (out->n == CLI_MAX_HOSTS)
      return cli_usage_error("--%s: at most %d names", flag, CLI_MAX_HOSTS);
    out->names[out->n++] = p;
  }
  return 0;
}

int cli_serve_addr(const cli_args *a, char *buf, size_t n, const char **flag) {
  const char *serve = cli_get(a, "serve"), *addr = cli_get(a, "addr"), *port = cli_get(a, "port");
  buf[0] = 0;
  if (serve && addr)
    return cli_usage_error("give either --serve %s or --addr %s, not both (they are the same)",
                           serve, addr);
  const char *at = serve ? serve : addr;
  *flag = serve ? "--serve" : addr ? "--addr" : "--port";
  if (at && port && strchr(at, ':'))
    return cli_usage_error("--port %s beside %s %s, which has a port: give one of them", port,
                           *flag, at);
  if (port && (!*port || strchr(port, ':')))
    return cli_usage_error("--port '%s': expected a port number (0 = any free port)", port);
  int len = at && port ? snprintf(buf, n, "%s:%s", at, port)
                       : snprintf(buf, n, "%s",
                                  at     ? at
                                  : port ? port
                                         : "");
  if (len < 0 || (size_t)len >= n) return cli_usage_error("%s: the address is too long", *flag);
  return 0;
}

void cli_serve_exposed(const char *host, int port) {
  if (!kt_serve_host_exposed(host)) return;
  fprintf(stderr,
          "kaiten: warning: listening on %s:%d: the runs' files (config.json, "
          "metrics.jsonl, timeline.json, trace.json) and curves are readable from the "
          "network by anyone who reaches this machine; requests must name it (its "
          "addresses, its name, or --allow-host NAME)\n",
          host, port);
}

static void print_warning(void *ctx, const char *msg) {
  (void)ctx;
  fprintf(stderr, "kaiten: warning: %s\n", msg);
}

/* SIGINT and SIGTERM ask serve to stop. They are blocked in the main
 * thread, which takes them with sigtimedwait, and in the server's threads
 * (they inherit the mask); threads started before (OpenBLAS's) do not block
 * them, and the kernel hands a process's signal to any such thread when the
 * main one is not waiting: its default action killed the process (exit
 * 130) on a second Ctrl-C while the server closed. So a handler takes them
 * there and leaves a byte the main thread looks for, and once the first has
 * come both are ignored. */
static int stop_pipe[2] = {-1, -1};

static void on_stop(int sig) {
  (void)sig;
  char c = 1;
  if (write(stop_pipe[1], &c, 1) < 0) { /* full: a stop is already pending */
  }
}

static void catch_stop(sigset_t *stop) {
  sigemptyset(stop);
  sigaddset(stop, SIGINT);
  sigaddset(stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, stop, NULL);
  if (pipe2(stop_pipe, O_NONBLOCK | O_CLOEXEC)) return;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop;
  sa.sa_flags = SA_RESTART; /* other threads' calls go on */
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
}

static void wait_for_stop(const sigset_t *stop) {
  for (;;) {
    struct timespec tick = {0, 100 * 1000 * 1000};
    if (sigtimedwait(stop, NULL, &tick) > 0) break;
    char c;
    if (stop_pipe[0] >= 0 && read(stop_pipe[0], &c, 1) == 1) break;
  }
  signal(SIGINT, SIG_IGN);
  signal(SIGTERM, SIG_IGN);
}

/* Closing waits up to a second for the dashboards to take the last of the
 * stream, then stops the HTTP threads. Should a connection's thread never
 * end, a stop must still stop: after CLOSE_LIMIT_S the process leaves. */
#define CLOSE_LIMIT_S 15

static void *close_watchdog(void *arg) {
  (void)arg;
  struct timespec t = {CLOSE_LIMIT_S, 0};
  while (nanosleep(&t, &t)) {
  }
  static const char msg[] = "kaiten serve: the server did not close in 15 s; leaving anyway\n";
  ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
  (void)w;
  _exit(0);
  return NULL;
}

static int run_serve(cli_args *a) {
  sigset_t stop;
  catch_stop(&stop);
  if (a->n_pos == 0)
    return cli_usage_error(
        "serve needs a run directory: kaiten serve RUN_DIR... [--addr HOST:PORT]");
  kt_serve_config cfg;
  kt_serve_default_config(&cfg);
  char host[64] = "127.0.0.1";
  int port = KT_SERVE_DEFAULT_PORT;
  long clients;
  kt_error err = {{0}};
  char addr[320];
  const char *flag;
  if (cli_serve_addr(a, addr, sizeof addr, &flag)) return 2;
  if (addr[0] && kt_serve_parse_addr(addr, host, sizeof host, &port, &err))
    return cli_usage_error("%s %s", flag, err.msg);
  if (cli_int(a, "max-clients", 1, 1024, cfg.max_clients, &clients)) return 2;
  cli_hosts allow;
  if (cli_parse_hosts("allow-host", cli_get(a, "allow-host"), &allow)) return 2;
  cfg.host = host;
  cfg.port = port;
  cfg.max_clients = (int)clients;
  cfg.run_dirs = a->pos;
  cfg.n_run_dirs = a->n_pos;
  cfg.allow_hosts = allow.names;
  cfg.n_allow_hosts = allow.n;
  cfg.on_warning = print_warning;
  kt_server *srv;
  kt_status st = kt_server_create(&cfg, &srv, &err);
  if (st) return cli_fail(st, &err);
  cli_serve_exposed(host, kt_server_port(srv));
  printf("kaiten serve: http://%s:%d/ shows %d run%s (Ctrl-C stops)\n", host, kt_server_port(srv),
         a->n_pos, a->n_pos > 1 ? "s" : "");
  fflush(stdout);
  wait_for_stop(&stop);
  pthread_t watchdog;
  if (!pthread_create(&watchdog, NULL, close_watchdog, NULL)) pthread_detach(watchdog);
  kt_server_destroy(srv, "stopped", 1.0);
  return 0;
}

const cli_command cli_cmd_serve = {
    .name = "serve",
    .summary = "live dashboard of training runs in the browser (curves, stages, replay)",
    .usage = "RUN_DIR... [--addr HOST:PORT] [--max-clients N] [--allow-host NAME]",
    .details = "Serves one self-contained page and an event stream (Server-Sent Events) with\n"
               "the runs' curves (overlaid when several runs are given), per-rank utilisation\n"
               "and activation memory, and the traced step's measured and predicted Gantt\n"
               "charts with a conveyor-belt replay. A run still training (its trainer holds\n"
               "the directory's lock) is followed as it grows and shown as \"training (pid N)\"\n"
               "until it ends. Read-only: besides the page, only the runs' config.json,\n"
               "metrics.jsonl, timeline.json and trace.json are served (at /runs/N/FILE), and\n"
               "only as regular files of the directory (never through a link). Listens on\n"
               "127.0.0.1 unless --addr says otherwise (another address warns that the runs\n"
               "are readable from the network); requests must name this machine in their Host\n"
               "header (its addresses, its name, localhost, or --allow-host). An address in\n"
               "use is an error (exit 1). Runs until Ctrl-C or SIGTERM (exit 0).\n"
               "While a run trains, kaiten train --serve PORT shows it live.\n\n"
               "examples:\n  kaiten serve runs/demo\n"
               "  kaiten serve runs/1f1b runs/zb-h1 runs/zbv --addr 127.0.0.1:9000\n",
    .opts = serve_opts,
    .n_opts = sizeof serve_opts / sizeof *serve_opts,
    .run = run_serve,
};
