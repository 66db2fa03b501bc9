/* kaiten train --serve: the live dashboard, fed from the training loop.
 * The server copies what it is handed and never makes the trainer wait; a
 * step it has no room for is dropped from the page (metrics.jsonl keeps
 * every step). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/train_cli.h"

/* A resumed run's steps up to the checkpoint's: those after it run again
 * (the session cuts metrics.jsonl back only after the server started). */
static void keep_done_steps(kt_run *done, int first_step) {
  while (done->n_steps > 0 && done->steps[done->n_steps - 1].step > first_step) done->n_steps--;
}

kt_status train_serve_start(const train_opts *o, const kt_session_info *info, kt_server **out,
                            kt_error *err) {
  char host[64] = "127.0.0.1";
  int port = 0;
  const kt_schedule *sched = info->schedule;
  kt_status st = kt_serve_parse_addr(o->serve, host, sizeof host, &port, err);
  if (st) return st; /* checked when the options were read */
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
  kt_serve_live live = {.name = name,
                        .run_dir = dir,
                        .schedule = sched,
                        .grad_accum = sp->grad_accum,
                        .predict = kt_train_predict,
                        .model = sp->synthetic ? "synthetic" : kt_model_kind_name(sp->model.kind),
                        .layers = sp->model.layers,
                        .hidden = sp->model.hidden,
                        .steps = sp->steps,
                        .transport = o->transport};
  /* 1F1B's peak and the limit, drawn beside each step's memory */
  kt_run_segment mine = {.peak_1f1b_bytes = info->peak_1f1b,
                         .mem_limit_bytes = info->mem_limit_bytes};
  if (kt_mem_limit_given(&sp->mem_limit))
    kt_mem_limit_format(&sp->mem_limit, mine.mem_limit, sizeof mine.mem_limit);
  live.layout = &mine;
  kt_error ignored;
  kt_run done; /* resuming: the steps already run come first */
  int have_done = sp->resume && kt_run_load(dir, &done, &ignored) == KT_OK;
  if (have_done) keep_done_steps(&done, info->first_step), live.done = &done;
  cli_hosts allow; /* checked when the options were read */
  if (cli_parse_hosts("allow-host", o->allow_host, &allow)) {
    if (have_done) kt_run_free(&done);
    return kt_fail(err, KT_EINVAL, "--allow-host %s: bad host list", o->allow_host);
  }
  kt_serve_config cfg;
  kt_serve_default_config(&cfg);
  cfg.host = host;
  cfg.port = port;
  cfg.live = &live;
  cfg.allow_hosts = allow.names;
  cfg.n_allow_hosts = allow.n;
  st = kt_server_create(&cfg, out, err);
  if (have_done) kt_run_free(&done);
  if (st) {
    kt_error why = *err; /* not formatted into itself */
    return kt_fail(err, st, "--serve: %s", why.msg);
  }
  return KT_OK;
}

void train_serve_announce(kt_server *srv, const train_opts *o) {
  char host[64] = "127.0.0.1";
  int port;
  kt_error err;
  if (!srv || kt_serve_parse_addr(o->serve, host, sizeof host, &port, &err)) return;
  fprintf(stderr, "kaiten: live dashboard at http://%s:%d/ (until the run ends)\n", host,
          kt_server_port(srv));
}

void train_serve_step(kt_server *srv, const kt_train_progress *p) {
  kt_serve_step rec = {.step = *p->record,
                       .skipped = p->skipped,
                       .ranks = p->ranks,
                       .n_ranks = p->n_ranks,
                       .timeline = p->timeline};
  kt_server_push(srv, &rec);
}

void train_serve_stop(kt_server *srv, int ok, const char *run_dir) {
  if (!srv) return;
  kt_serve_stats stats;
  kt_server_stats(srv, &stats);
  kt_server_destroy(srv, ok ? "finished" : "stopped", 2.0);
  if (stats.dropped)
    fprintf(stderr,
            "kaiten: the dashboard dropped %lld steps it had no room for (the run "
            "itself has them all)\n",
            stats.dropped);
  if (run_dir)
    fprintf(stderr, "kaiten: dashboard closed; kaiten serve %s shows the run again\n", run_dir);
}
