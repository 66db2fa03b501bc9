/* kaiten train --serve: the live dashboard, fed from the training loop.
 * The server copies what it is handed and never makes the trainer wait; a
 * step it has no room for is dropped from the page (metrics.jsonl keeps
 * every step). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/train_cli.h"

int train_serve_start(const train_opts *o, const kt_schedule *sched, kt_server **out) {
  char host[64] = "127.0.0.1";
  int port = 0;
  kt_error err = {{0}};
  kt_status st = kt_serve_parse_addr(o->serve, host, sizeof host, &port, &err);
  if (st) return cli_usage_error("--serve %s", err.msg);
  char name[96];
  const char *dir = o->sp.run_dir;
  if (dir) { /* the run directory's last component names the run */
    size_t end = strlen(dir), start;
    while (end > 1 && dir[end - 1] == '/') end--;
    for (start = end; start > 0 && dir[start - 1] != '/';) start--;
    snprintf(name, sizeof name, "%.*s", (int)(end - start), dir + start);
  } else {
    snprintf(name, sizeof name, "%s", sched->name[0] ? sched->name : "live run");
  }
  const kt_session_params *sp = &o->sp;
  kt_serve_live live = {.name = name, .run_dir = dir, .schedule = sched,
                        .grad_accum = sp->grad_accum,
                        .model = sp->synthetic ? "synthetic" : kt_model_kind_name(sp->model.kind),
                        .layers = sp->model.layers, .hidden = sp->model.hidden,
                        .steps = sp->steps, .transport = o->transport};
  kt_run done; /* resuming: the steps already run come first */
  int have_done = sp->resume && kt_run_load(dir, &done, &err) == KT_OK;
  if (have_done) live.done = &done;
  cli_hosts allow; /* checked when the options were read */
  if (cli_parse_hosts("allow-host", o->allow_host, &allow)) return 2;
  kt_serve_config cfg;
  kt_serve_default_config(&cfg);
  cfg.host = host;
  cfg.port = port;
  cfg.live = &live;
  cfg.allow_hosts = allow.names;
  cfg.n_allow_hosts = allow.n;
  st = kt_server_create(&cfg, out, &err);
  if (have_done) kt_run_free(&done);
  if (st) {
    fprintf(stderr, "kaiten: --serve: %s\n", err.msg);
    return kt_status_exit_code(st);
  }
  fprintf(stderr, "kaiten: live dashboard at http://%s:%d/ (until the run ends)\n", host,
          kt_server_port(*out));
  return 0;
}

void train_serve_step(kt_server *srv, const kt_train_progress *p) {
  kt_serve_step rec = {.step = *p->record, .skipped = p->skipped, .ranks = p->ranks,
                       .n_ranks = p->n_ranks, .timeline = p->timeline};
  kt_server_push(srv, &rec);
}

void train_serve_stop(kt_server *srv, int ok, const char *run_dir) {
  if (!srv) return;
  kt_serve_stats stats;
  kt_server_stats(srv, &stats);
  kt_server_destroy(srv, ok ? "finished" : "stopped", 2.0);
  if (stats.dropped)
    fprintf(stderr, "kaiten: the dashboard dropped %lld steps it had no room for (the run "
                    "itself has them all)\n", stats.dropped);
  if (run_dir) fprintf(stderr, "kaiten: dashboard closed; kaiten serve %s shows the run again\n", run_dir);
}
