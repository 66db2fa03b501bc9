/* The dashboard's cost to training (kaiten train --serve):
 *   - the trainer's side of a step: the per-rank metrics of its timeline and
 *     kt_server_push (a copy into the queue), timed one push at a time with
 *     the queue drained in between (the common case; a full queue drops,
 *     which is cheaper);
 *   - the server thread's rendering of a step for the page (the prediction:
 *     costs calibrated on the step, then simulated; both Gantt charts), done
 *     at most once a second while training runs.
 * Steps are simulated 1f1b steps in seconds (as a measured one): P=2 M=8,
 * the layout of bench/serve_overhead.sh, and P=8 M=64.
 * Usage: bench_serve [REPS] [--quick] [--tsv FILE] */
#include <sched.h>
#include <stdio.h>

#include "bench_rows.h"
#include "kaiten/serve.h"
#include "kaiten/sim.h"
#include "kaiten/train.h"
#include "serve/serve_internal.h"

static int step_of(int p, int m, kt_schedule *s, kt_timeline *t) {
  kt_error err;
  kt_gen_params params = {.p = p, .m = m};
  if (kt_generate(KT_SCHED_1F1B, &params, s, &err) || kt_simulate(s, NULL, t, &err)) {
    fprintf(stderr, "bench_serve: %s\n", err.msg);
    return -1;
  }
  snprintf(t->time_unit, sizeof t->time_unit, "s");
  for (size_t i = 0; i < t->n_events; i++) /* 1 ms per unit, as if measured from t = 100 s */
    t->events[i].start = 100 + 1e-3 * t->events[i].start,
    t->events[i].end = 100 + 1e-3 * t->events[i].end;
  for (size_t i = 0; i < t->n_mem; i++) t->mem[i].t = 100 + 1e-3 * t->mem[i].t;
  return 0;
}

/* The server thread's work for one step message, nr times: the
 * prediction and the rendered message (seconds each into render). */
static void time_renders(const kt_schedule *s, const kt_timeline *t, int p, int m, double *render,
                         int nr) {
  kt_error err;
  for (int i = 0; i < nr; i++) {
    kt_timeline shifted, pred;
    kt_timeline_init(&shifted, t->p, "s", "B");
    for (size_t k = 0; k < t->n_events; k++) {
      kt_event e = t->events[k];
      e.start -= 100, e.end -= 100;
      kt_timeline_add_event(&shifted, &e);
    }
    double t0 = kt_now();
    kt_costs costs;
    kt_buf msg;
    kt_buf_init(&msg);
    if (kt_train_predict(s, 1, &shifted, &costs, &pred, &err) == KT_OK) {
      kt__serve_timeline_msg(&msg, 0, i, &shifted, &pred, &costs, NULL, 1);
      kt_costs_free(&costs);
      kt_timeline_free(&pred);
    }
    render[i] = kt_now() - t0;
    if (i == 0)
      printf("P=%d M=%d: %zu events, rendered step message %zu bytes\n", p, m, t->n_events,
             msg.len);
    kt_buf_free(&msg);
    kt_timeline_free(&shifted);
  }
}

static void one_layout(const bench_opts *o, int p, int m, int reps) {
  kt_schedule s;
  kt_timeline t;
  if (step_of(p, m, &s, &t)) exit(1);
  kt_serve_live live = {
      .name = "bench", .schedule = &s, .grad_accum = 1, .predict = kt_train_predict, .steps = reps};
  kt_serve_config c;
  kt_serve_default_config(&c);
  c.port = 0;
  c.live = &live;
  c.queue = 64;
  c.render_every = 1e9; /* rendering is timed below, not in the feed */
  kt_server *srv;
  kt_error err;
  if (kt_server_create(&c, &srv, &err)) {
    fprintf(stderr, "bench_serve: %s\n", err.msg);
    exit(1);
  }
  double *push = kt_calloc((size_t)reps, sizeof *push), *render = kt_calloc(16, sizeof *render);
  kt_run_rank_step ranks[64];
  for (int i = 0; i < reps; i++) {
    while (atomic_load(&srv->head) != atomic_load(&srv->tail)) sched_yield();
    double t0 = kt_now();
    kt_metrics met;
    kt_timeline_metrics(&t, &met, &err);
    for (int r = 0; r < met.p && r < 64; r++)
      ranks[r] = (kt_run_rank_step){.busy = met.ranks[r].busy,
                                    .comm_time = met.ranks[r].comm_time,
                                    .bytes_sent = (double)met.ranks[r].bytes_sent,
                                    .peak_act_bytes = met.ranks[r].peak_memory};
    kt_serve_step rec = {.step = {.step = i + 1, .loss = 1, .seconds = 0.05},
                         .ranks = ranks,
                         .n_ranks = met.p < 64 ? met.p : 64,
                         .timeline = &t};
    kt_metrics_free(&met);
    if (kt_server_push(srv, &rec)) fprintf(stderr, "bench_serve: a push was dropped\n");
    push[i] = kt_now() - t0;
  }
  int nr = o->quick ? 3 : 9;
  time_renders(&s, &t, p, m, render, nr);
  kt_server_destroy(srv, "finished", 0);
  bench_stat ps = bench_stats(push, (size_t)reps, 1e6), rs = bench_stats(render, (size_t)nr, 1e3);
  printf("P=%d M=%d: trainer's side of a step %.2f us (%.2f-%.2f), rendering %.3f ms (%.3f-%.3f)\n",
         p, m, ps.med, ps.min, ps.max, rs.med, rs.min, rs.max);
  char id[64], what[160];
  snprintf(id, sizeof id, "serve.push.P%dM%d", p, m);
  snprintf(
      what, sizeof what,
      "train --serve, trainer's side of one step (metrics + push), 1f1b P=%d M=%d (%zu events)", p,
      m, t.n_events);
  ps = bench_stats(push, (size_t)reps, 1e3); /* in ms, against the training step */
  bench_row_vs(o, id, what, "ms", ps, "kaiten train step, default GPT P=2 M=8 (train.plain)",
               "train.plain");
  snprintf(id, sizeof id, "serve.render.P%dM%d", p, m);
  snprintf(
      what, sizeof what,
      "train --serve, server thread rendering one step (prediction + 2 Gantts, once a second), 1f1b P=%d M=%d",
      p, m);
  /* the ratio: the share of one core it takes at one rendering a second */
  bench_row(o, id, what, "ms", rs, "one second (1000 ms)", 1000);
  free(push);
  free(render);
  kt_timeline_free(&t);
  kt_schedule_free(&s);
}

int main(int argc, char **argv) {
  bench_opts o = bench_args(argc, argv, 2000, 200, 10, 1000000);
  one_layout(&o, 2, 8, o.reps);
  one_layout(&o, 8, 64, o.reps);
  bench_close(&o);
  return 0;
}
