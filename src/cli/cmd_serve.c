/* kaiten serve: the dashboard of finished training runs, in the browser. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "kaiten/serve.h"

static const cli_opt serve_opts[] = {
    {"addr", 0, "[HOST:]PORT", "where to listen (default 127.0.0.1:8080; PORT 0 = any free port)"},
    {"max-clients", 0, "N", "browser tabs served at once (default 8)"},
};

static int run_serve(cli_args *a) {
  if (a->n_pos == 0)
    return cli_usage_error("serve needs a run directory: kaiten serve RUN_DIR... [--addr HOST:PORT]");
  kt_serve_config cfg;
  kt_serve_default_config(&cfg);
  char host[64] = "127.0.0.1";
  int port = KT_SERVE_DEFAULT_PORT;
  long clients;
  kt_error err = {{0}};
  const char *addr = cli_get(a, "addr");
  if (addr && kt_serve_parse_addr(addr, host, sizeof host, &port, &err))
    return cli_usage_error("--addr %s", err.msg);
  if (cli_int(a, "max-clients", 1, 1024, cfg.max_clients, &clients)) return 2;
  cfg.host = host;
  cfg.port = port;
  cfg.max_clients = (int)clients;
  cfg.run_dirs = a->pos;
  cfg.n_run_dirs = a->n_pos;
  /* SIGINT and SIGTERM are taken by sigwait below: blocked in every thread,
   * the server's included (they inherit this mask) */
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, NULL);
  kt_server *srv;
  kt_status st = kt_server_create(&cfg, &srv, &err);
  if (st) {
    pthread_sigmask(SIG_UNBLOCK, &stop, NULL);
    return cli_fail(st, &err);
  }
  printf("kaiten serve: http://%s:%d/ shows %d run%s (Ctrl-C stops)\n", host,
         kt_server_port(srv), a->n_pos, a->n_pos > 1 ? "s" : "");
  fflush(stdout);
  int sig = 0;
  sigwait(&stop, &sig);
  kt_server_destroy(srv, "stopped", 1.0);
  pthread_sigmask(SIG_UNBLOCK, &stop, NULL);
  return 0;
}

const cli_command cli_cmd_serve = {
    .name = "serve",
    .summary = "live dashboard of training runs in the browser (curves, stages, replay)",
    .usage = "RUN_DIR... [--addr HOST:PORT] [--max-clients N]",
    .details = "Serves one self-contained page and an event stream (Server-Sent Events) with\n"
               "the runs' curves (overlaid when several runs are given), per-rank utilisation\n"
               "and activation memory, and the traced step's measured and predicted Gantt\n"
               "charts with a conveyor-belt replay. Read-only: besides the page, only the\n"
               "runs' config.json, metrics.jsonl, timeline.json and trace.json are served\n"
               "(at /runs/N/FILE). Listens on 127.0.0.1 unless --addr says otherwise; an\n"
               "address in use is an error (exit 1). Runs until Ctrl-C (or SIGTERM).\n"
               "While a run trains, kaiten train --serve PORT shows it live.\n\n"
               "examples:\n  kaiten serve runs/demo\n"
               "  kaiten serve runs/1f1b runs/zb-h1 runs/zbv --addr 127.0.0.1:9000\n",
    .opts = serve_opts,
    .n_opts = sizeof serve_opts / sizeof *serve_opts,
    .run = run_serve,
};
