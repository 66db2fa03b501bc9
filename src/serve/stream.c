/* The event stream's messages: hello (the runs shown), step (one metrics
 * record), timeline (a rendered step: both timelines and both Gantt
 * charts) and end (a run is over), and publishing them to the streams.
 *
 * Every message is one SSE event whose data is one line of JSON:
 *   event: step
 *   data: {"run":0,"step":12,"loss":2.31,...}
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/whatif.h"
#include "serve/serve_internal.h"

#define GANTT_W 1300 /* the page lays charts out for a 1400 px window */

void kt__sse_message(kt_buf *out, const char *event, const char *json, size_t len) {
  kt_buf_printf(out, "event: %s\ndata: ", event);
  const char *run = json, *end = json + len;
  for (const char *c = json; c < end; c++) {
    if (*c != '\n' && *c != '\r') continue;
    kt_buf_append(out, run, (size_t)(c - run));
    kt_buf_puts(out, " ");
    run = c + 1;
  }
  kt_buf_append(out, run, (size_t)(end - run));
  kt_buf_puts(out, "\n\n");
}

static void num_field(kt_buf *b, const char *key, double v) {
  kt_buf_printf(b, ",\"%s\":", key);
  kt_buf_json_number(b, v); /* null when not finite */
}

/* A run as hello describes it. */
typedef struct {
  const char *name, *schedule, *model, *transport, *state;
  int p, v, m, layers, hidden, steps, live, files;
  const kt_run_segment *seg; /* its layout's memory, price and bubble (NULL: unknown) */
  const kt_run_config *cfg;  /* its segments, for the predicted bubble of every step (or NULL) */
} run_desc;

/* "memory": 1F1B's peak, the limit, what the schedule costs in time; and
 * each segment's steps with its predicted bubble. */
static void memory_json(kt_buf *b, const run_desc *d) {
  const kt_run_segment *g = d->seg;
  kt_buf_puts(b, ",\"memory\":{\"peak_1f1b_bytes\":");
  kt_buf_json_number(b, g && g->peak_1f1b_bytes > 0 ? g->peak_1f1b_bytes : NAN);
  kt_buf_puts(b, ",\"mem_limit\":");
  if (g && g->mem_limit[0]) kt_buf_json_string(b, g->mem_limit);
  else kt_buf_puts(b, "null");
  num_field(b, "mem_limit_bytes", g && g->mem_limit_bytes > 0 ? g->mem_limit_bytes : NAN);
  num_field(b, "predicted_period", g && g->predicted_period > 0 ? g->predicted_period : NAN);
  num_field(b, "period_1f1b", g && g->period_1f1b > 0 ? g->period_1f1b : NAN);
  /* the model's memory per stage as train measured it (null: not measured) */
  const char *names[3] = {"act_bytes", "wgrad_bytes", "transient_bytes"};
  const double *per[3] = {g ? g->mem_act_bytes : NULL, g ? g->mem_wgrad_bytes : NULL,
                          g ? g->mem_transient_bytes : NULL};
  for (int k = 0; k < 3; k++) {
    kt_buf_printf(b, ",\"stage_%s\":", names[k]);
    if (!per[k] || g->n_mem <= 0) kt_buf_puts(b, "null");
    for (int s = 0; per[k] && s < g->n_mem; s++) {
      kt_buf_puts(b, s ? "," : "[");
      kt_buf_json_number(b, per[k][s]);
    }
    if (per[k] && g->n_mem > 0) kt_buf_puts(b, "]");
  }
  kt_buf_puts(b, "},\"segments\":[");
  for (int i = 0; d->cfg && i < d->cfg->n_segments; i++) {
    const kt_run_segment *s = &d->cfg->segments[i];
    kt_buf_printf(b, "%s{\"first_step\":%d,\"last_step\":%d", i ? "," : "", s->first_step,
                  s->last_step);
    num_field(b, "predicted_bubble", s->predicted_bubble);
    kt_buf_puts(b, "}");
  }
  kt_buf_puts(b, "]");
}

static void run_json(kt_buf *b, const run_desc *d) {
  kt_buf_puts(b, "{\"name\":");
  kt_buf_json_string(b, d->name);
  kt_buf_puts(b, ",\"schedule\":");
  kt_buf_json_string(b, d->schedule ? d->schedule : "");
  kt_buf_puts(b, ",\"model\":");
  kt_buf_json_string(b, d->model ? d->model : "");
  kt_buf_puts(b, ",\"transport\":");
  kt_buf_json_string(b, d->transport ? d->transport : "");
  kt_buf_printf(b,
                ",\"p\":%d,\"v\":%d,\"m\":%d,\"layers\":%d,\"hidden\":%d,\"steps\":%d,"
                "\"live\":%s,\"files\":%s",
                d->p, d->v, d->m, d->layers, d->hidden, d->steps, d->live ? "true" : "false",
                d->files ? "true" : "false");
  if (d->state) {
    kt_buf_puts(b, ",\"state\":");
    kt_buf_json_string(b, d->state);
  }
  memory_json(b, d);
  kt_buf_puts(b, "}");
}

void kt__serve_hello(kt_buf *out, const kt_server *s, const kt_run *const *runs,
                     const kt_serve_live *live) {
  kt_buf j;
  kt_buf_init(&j);
  kt_buf_printf(&j, "{\"version\":1,\"live\":%s,\"runs\":[", s->live >= 0 ? "true" : "false");
  for (int i = 0; i < s->n_runs; i++) {
    if (i) kt_buf_puts(&j, ",");
    const serve_run *sr = &s->runs[i];
    if (i == s->live) {
      const kt_schedule *sc = &s->sched;
      run_desc d = {.name = sr->name,
                    .schedule = sc->name,
                    .model = live->model,
                    .transport = live->transport,
                    .p = sc->p,
                    .v = sc->v,
                    .m = sc->m,
                    .layers = live->layers,
                    .hidden = live->hidden,
                    .steps = live->steps,
                    .live = 1,
                    .files = sr->dir != NULL,
                    .seg = live->layout};
      run_json(&j, &d);
    } else {
      /* a run whose trainer still writes it (its lock held) is followed */
      const kt_run *r = runs[i];
      char state[48];
      if (sr->pid > 0) snprintf(state, sizeof state, "training (pid %ld)", sr->pid);
      else snprintf(state, sizeof state, "training");
      run_desc d = {.name = sr->name,
                    .schedule = r->schedule,
                    .model = r->model,
                    .transport = r->transport,
                    .state = sr->pid ? state : NULL,
                    .p = r->p,
                    .v = r->v,
                    .m = r->m,
                    .layers = r->layers,
                    .hidden = r->hidden,
                    .steps = r->steps_planned,
                    .live = sr->pid != 0,
                    .files = 1,
                    .seg = r->cfg.n_segments ? &r->cfg.segments[r->cfg.n_segments - 1] : NULL,
                    .cfg = &r->cfg};
      run_json(&j, &d);
    }
  }
  kt_buf_puts(&j, "]}");
  if (j.failed) out->failed = 1;
  else kt__sse_message(out, "hello", j.data, j.len);
  kt_buf_free(&j);
}

void kt__serve_step_msg(kt_buf *out, int run, const kt_run_step *st, int skipped,
                        const kt_run_rank_step *ranks, int n_ranks) {
  kt_buf j;
  kt_buf_init(&j);
  kt_buf_printf(&j, "{\"run\":%d,\"step\":%d", run, st->step);
  if (skipped) kt_buf_puts(&j, ",\"skipped\":true");
  num_field(&j, "loss", st->loss);
  num_field(&j, "val_loss", st->val_loss);
  num_field(&j, "lr", st->lr);
  num_field(&j, "grad_norm", st->grad_norm);
  num_field(&j, "seconds", st->seconds);
  num_field(&j, "tokens_per_s", st->tokens_per_s);
  num_field(&j, "samples_per_s", st->samples_per_s);
  num_field(&j, "bubble", st->bubble);
  if (st->fault.kind != KT_FAULT_NONE) { /* the autopilot's: what was slow, a switch before it */
    kt_buf_puts(&j, ",\"fault\":");
    kt_run_fault_json(&st->fault, &j);
  }
  if (st->sw.made) {
    kt_buf_puts(&j, ",\"switch\":");
    kt_run_switch_json(&st->sw, &j);
  }
  kt_buf_puts(&j, ",\"ranks\":[");
  for (int r = 0; r < n_ranks; r++) {
    kt_buf_puts(&j, r ? ",{\"busy\":" : "{\"busy\":");
    kt_buf_json_number(&j, ranks[r].busy);
    num_field(&j, "comm_time", ranks[r].comm_time);
    num_field(&j, "bytes_sent", ranks[r].bytes_sent);
    num_field(&j, "peak_act_bytes", ranks[r].peak_act_bytes);
    if (!isnan(ranks[r].idle.busy)) {
      kt_buf_puts(&j, ",\"idle_causes\":");
      kt_idle_split_json(&ranks[r].idle, &j);
    }
    kt_buf_puts(&j, "}");
  }
  kt_buf_puts(&j, "]}");
  if (j.failed) out->failed = 1;
  else kt__sse_message(out, "step", j.data, j.len);
  kt_buf_free(&j);
}

/* {"time_unit", "makespan", "period", "bubble_ratio", "ranks": [...], "events": [...]} */
static void timeline_json(kt_buf *b, const kt_timeline *t, const kt_metrics *m) {
  kt_buf_puts(b, "{\"time_unit\":");
  kt_buf_json_string(b, t->time_unit);
  num_field(b, "makespan", m->makespan);
  num_field(b, "period", m->period);
  num_field(b, "bubble_ratio", m->bubble_ratio);
  kt_buf_puts(b, ",\"ranks\":[");
  for (int r = 0; r < m->p; r++) {
    const kt_rank_metrics *rm = &m->ranks[r];
    kt_buf_printf(b, "%s{\"rank\":%d,\"busy\":", r ? "," : "", r);
    kt_buf_json_number(b, rm->busy);
    num_field(b, "idle", rm->idle);
    num_field(b, "peak_memory", rm->peak_memory);
    kt_buf_printf(b, ",\"peak_inflight\":%d,\"actions\":%zu}", rm->peak_inflight, rm->actions);
  }
  kt_buf_puts(b, "],\"events\":[");
  for (size_t i = 0; i < t->n_events; i++) {
    const kt_event *e = &t->events[i];
    kt_buf_printf(b, "%s{\"rank\":%d,\"stage\":%d,\"mb\":%d,\"op\":\"%c\"", i ? "," : "", e->rank,
                  e->stage, e->mb, kt_op_letter((kt_op)e->op));
    num_field(b, "start", e->start);
    num_field(b, "end", e->end);
    if (e->flags & KT_ACTION_OVERLAP_NEXT) kt_buf_puts(b, ",\"overlap_next\":true");
    kt_buf_puts(b, "}");
  }
  kt_buf_puts(b, "]}");
}

/* The measured step's critical path and every action's slack (the
 * what-if panel draws them on the measured chart). */
static void critical_json(kt_buf *b, const kt_timeline *t) {
  kt_critical cr;
  if (kt_timeline_critical(t, 0, 0, &cr, NULL)) return;
  kt_buf_puts(b, ",\"measured_path\":[");
  for (size_t i = 0; i < cr.n_path; i++) kt_buf_printf(b, "%s%zu", i ? "," : "", cr.path[i]);
  kt_buf_puts(b, "],\"measured_slack\":[");
  for (size_t i = 0; i < t->n_events; i++) {
    if (i) kt_buf_puts(b, ",");
    kt_buf_json_number(b, cr.slack[i]);
  }
  kt_buf_puts(b, "]");
  kt_critical_free(&cr);
}

static void gantt_svg(kt_buf *b, const kt_timeline *t, const char *id, const char *title,
                      double span, int chunks) {
  kt_svg_gantt_opts go;
  kt_svg_gantt_default_opts(&go);
  go.id = id;
  go.title = title;
  go.chunks = chunks > 0 ? chunks : 1;
  go.px_per_unit = kt_svg_fit_scale(span, GANTT_W);
  go.t_min = 0;
  go.t_max = span;
  go.min_bar_px = 1e-6; /* measured actions vary: thin ones must not aggregate the chart */
  go.embed_memory = 1;
  kt_svg_gantt(b, t, &go);
}

void kt__serve_timeline_msg(kt_buf *out, int run, int step, const kt_timeline *measured,
                            const kt_timeline *predicted, const kt_costs *costs,
                            const double periods[2], int chunks) {
  kt_metrics mm = {0}, pm = {0};
  kt_error err;
  if (kt_timeline_metrics(measured, &mm, &err) || kt_timeline_metrics(predicted, &pm, &err)) {
    kt_metrics_free(&mm);
    out->failed = 1;
    return;
  }
  /* the steps' periods where known (the run's step time, the prediction's) */
  if (periods && isfinite(periods[0]) && periods[0] > 0) kt_metrics_set_period(&mm, periods[0], -1);
  if (periods && isfinite(periods[1]) && periods[1] > 0) kt_metrics_set_period(&pm, periods[1], -1);
  double span = mm.makespan > pm.makespan ? mm.makespan : pm.makespan;
  if (!(span > 0)) span = 1e-6;
  kt_buf j, svg;
  kt_buf_init(&j);
  kt_buf_init(&svg);
  kt_buf_printf(&j, "{\"run\":%d,\"step\":%d,\"chunks\":%d,\"measured\":", run, step, chunks);
  timeline_json(&j, measured, &mm);
  kt_buf_puts(&j, ",\"predicted\":");
  timeline_json(&j, predicted, &pm);
  critical_json(&j, measured);
  kt_buf_puts(&j, ",\"costs\":");
  if (costs) {
    kt__whatif_costs_json(&j, costs);
  } else {
    kt_buf_puts(&j, "null");
  }
  char id[48];
  snprintf(id, sizeof id, "gantt-measured-%d", run);
  gantt_svg(&svg, measured, id, "measured step", span, chunks);
  kt_buf_puts(&j, ",\"svg_measured\":");
  kt_buf_json_string(&j, svg.data ? svg.data : "");
  svg.len = 0;
  if (svg.data) svg.data[0] = 0;
  snprintf(id, sizeof id, "gantt-predicted-%d", run);
  gantt_svg(&svg, predicted, id, "predicted step (simulator)", span, chunks);
  kt_buf_puts(&j, ",\"svg_predicted\":");
  kt_buf_json_string(&j, svg.data ? svg.data : "");
  kt_buf_puts(&j, "}");
  if (j.failed || svg.failed) out->failed = 1;
  else kt__sse_message(out, "timeline", j.data, j.len);
  kt_buf_free(&j);
  kt_buf_free(&svg);
  kt_metrics_free(&mm);
  kt_metrics_free(&pm);
}

void kt__serve_end_msg(kt_buf *out, int run, long long steps, const char *reason) {
  kt_buf j;
  kt_buf_init(&j);
  kt_buf_printf(&j, "{\"run\":%d,\"steps\":%lld,\"reason\":", run, steps);
  kt_buf_json_string(&j, reason ? reason : "finished");
  kt_buf_puts(&j, "}");
  if (j.failed) out->failed = 1;
  else kt__sse_message(out, "end", j.data, j.len);
  kt_buf_free(&j);
}

void kt__serve_publish(kt_server *s, const kt_buf *msg, int is_step) {
  if (msg->failed || !msg->len) return;
  pthread_mutex_lock(&s->lock);
  kt_buf_append(&s->history, msg->data, msg->len);
  s->steps += is_step;
  pthread_cond_broadcast(&s->changed);
  pthread_mutex_unlock(&s->lock);
}

/* Puts msg (taken over) into run's rendered step (timeline) or end marker
 * under the lock, and wakes the streams. */
static void publish_slot(kt_server *s, int run, kt_buf *msg, int timeline) {
  if (msg->failed || !msg->len) return;
  serve_run *r = &s->runs[run];
  pthread_mutex_lock(&s->lock);
  char **slot = timeline ? &r->tl_msg : &r->end_msg;
  free(*slot);
  *slot = msg->data;
  if (timeline) {
    r->tl_len = msg->len;
    r->tl_version++;
    s->rendered++;
  } else {
    r->end_len = msg->len;
  }
  pthread_cond_broadcast(&s->changed);
  pthread_mutex_unlock(&s->lock);
  kt_buf_init(msg);
}

void kt__serve_publish_end(kt_server *s, int run, kt_buf *msg) { publish_slot(s, run, msg, 0); }

void kt__serve_publish_timeline(kt_server *s, int run, kt_buf *msg) {
  publish_slot(s, run, msg, 1);
}
