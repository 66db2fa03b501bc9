/* The run directory of kaiten train: config.json, metrics.jsonl (one line per
 * step), timeline.json + trace.json of the traced (last) step, checkpoints/. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/train_cli.h"
#include "kaiten/generators.h"
#include "kaiten/report.h"

static int mkdir_p(const char *dir) {
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", dir);
  for (char *p = buf + 1; *p; p++)
    if (*p == '/') {
      *p = 0;
      if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
      *p = '/';
    }
  return mkdir(buf, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

/* Fresh: creates the directory and an empty metrics file. Resuming: keeps
 * the metrics lines of steps <= keep_steps (a crash may have left later or
 * half-written lines), rewritten atomically. */
int rundir_prepare(const char *dir, int resuming, int keep_steps) {
  if (mkdir_p(dir)) return -1;
  char path[4200];
  snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
  kt_error err;
  if (!resuming) return kt_write_file_atomic(path, "", 0, &err) ? -1 : 0;
  char *text = NULL;
  if (kt_read_file(path, &text, NULL, &err) != KT_OK) return kt_write_file_atomic(path, "", 0, &err) ? -1 : 0;
  kt_buf keep;
  kt_buf_init(&keep);
  for (char *line = text; *line;) {
    char *nl = strchr(line, '\n');
    if (!nl) break; /* a torn last line */
    int step;
    if (sscanf(line, "{\"step\":%d", &step) == 1 && step <= keep_steps)
      kt_buf_append(&keep, line, (size_t)(nl - line + 1));
    line = nl + 1;
  }
  free(text);
  int rc = kt_write_file_atomic(path, keep.data ? keep.data : "", keep.len, &err) ? -1 : 0;
  kt_buf_free(&keep);
  return rc;
}

int rundir_write_config(const char *dir, const train_opts *o, const kt_schedule *s,
                        const int *unit_offset, int decay_steps) {
  kt_buf b;
  kt_buf_init(&b);
  const kt_model_config *m = &o->model;
  kt_buf_printf(&b, "{\n  \"model\": {\"kind\": \"%s\", \"layers\": %d, \"hidden\": %d, \"heads\": %d, "
                    "\"seq_len\": %d, \"vocab\": %d, \"tie_embeddings\": %s, \"recompute\": %s, "
                    "\"seed\": %llu},\n",
                o->synthetic ? "synthetic" : kt_model_kind_name(m->kind), m->layers, m->hidden,
                m->heads, m->seq_len, m->vocab, m->tie_embeddings ? "true" : "false",
                m->recompute ? "true" : "false", (unsigned long long)m->seed);
  kt_buf_puts(&b, "  \"layout\": {\"schedule\": ");
  kt_buf_json_string(&b, s->name);
  kt_buf_printf(&b, ", \"p\": %d, \"v\": %d, \"m\": %d, \"b\": %d, \"k\": %d, \"d\": %d, "
                    "\"transport\": \"%s\", \"partition\": [",
                s->p, s->v, s->m, o->b, o->k, o->d, o->transport);
  for (int i = 0; !o->synthetic && i < s->p * s->v; i++)
    kt_buf_printf(&b, "%s%d", i ? ", " : "", unit_offset[i + 1] - unit_offset[i]);
  kt_buf_printf(&b, "]},\n  \"optimizer\": {\"kind\": \"%s\", \"lr\": ", kt_optim_name(o->optim.kind));
  kt_buf_json_number(&b, o->optim.lr);
  kt_buf_puts(&b, ", \"weight_decay\": ");
  kt_buf_json_number(&b, o->optim.weight_decay);
  kt_buf_puts(&b, ", \"grad_clip\": ");
  kt_buf_json_number(&b, o->optim.grad_clip);
  kt_buf_printf(&b, ", \"warmup_steps\": %d, \"decay_steps\": %d},\n", o->optim.warmup_steps,
                decay_steps);
  kt_buf_printf(&b, "  \"steps\": %d, \"val_every\": %d, \"data_seed\": %llu, \"data\": ", o->steps,
                o->val_every, (unsigned long long)o->seed);
  if (o->data_path) kt_buf_json_string(&b, o->data_path);
  else kt_buf_puts(&b, o->synthetic ? "null" : "\"built-in\"");
  kt_buf_puts(&b, "\n}\n");
  char path[4200];
  snprintf(path, sizeof path, "%s/config.json", dir);
  kt_error err;
  int rc = b.failed || kt_write_file_atomic(path, b.data, b.len, &err) ? -1 : 0;
  kt_buf_free(&b);
  return rc;
}

/* Each rank's share of a step: busy and communication time and bytes sent
 * (from the step's timeline), and the peak activation memory of its first
 * stage (from the runtime; the timeline's memory when the stage is not in
 * this process). Returns how many ranks were written (at most cap), -1 when
 * the metrics cannot be computed. */
int rundir_step_ranks(const kt_train_progress *p, const kt_runtime *rt, kt_run_rank_step *out,
                      int cap) {
  kt_metrics m;
  kt_error err;
  if (kt_timeline_metrics(p->timeline, &m, &err) != KT_OK) return -1;
  int n = m.p < cap ? m.p : cap;
  const kt_schedule *sched = kt_runtime_config_of(rt)->schedule;
  for (int r = 0; r < n; r++) {
    kt_chunk *c = kt_runtime_chunk((kt_runtime *)rt, kt_rank_chunk_stage(sched, r, 0), 0);
    out[r] = (kt_run_rank_step){.busy = m.ranks[r].busy, .comm_time = m.ranks[r].comm_time,
                                .bytes_sent = (double)m.ranks[r].bytes_sent,
                                .peak_act_bytes = c ? (double)c->peak_stash_bytes
                                                    : m.ranks[r].peak_memory};
  }
  kt_metrics_free(&m);
  return n;
}

/* One complete line per step, appended and flushed (a crash leaves at most a
 * torn last line, which resuming drops). */
void rundir_append_metrics(const char *dir, const kt_train_progress *p, const kt_runtime *rt) {
  char path[4200];
  snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
  FILE *f = fopen(path, "a");
  if (!f) return;
  kt_buf b;
  kt_buf_init(&b);
  kt_buf_printf(&b, "{\"step\":%d,%s\"loss\":", p->step + 1, p->skipped ? "\"skipped\":true," : "");
  kt_buf_json_number(&b, p->loss);
  kt_buf_puts(&b, ",\"val_loss\":");
  kt_buf_json_number(&b, p->val_loss); /* null when not evaluated */
  const struct { const char *k; double v; } nums[] = {
      {"lr", p->lr}, {"grad_norm", p->grad_norm}, {"seconds", p->seconds},
      {"tokens_per_s", p->tokens_per_s}, {"samples_per_s", p->samples_per_s},
      {"bubble", p->bubble}};
  for (size_t i = 0; i < sizeof nums / sizeof *nums; i++) {
    kt_buf_printf(&b, ",\"%s\":", nums[i].k);
    kt_buf_json_number(&b, nums[i].v);
  }
  int P = p->timeline->p;
  kt_run_rank_step *ranks = kt_calloc(P > 0 ? (size_t)P : 1, sizeof *ranks);
  int n = ranks ? rundir_step_ranks(p, rt, ranks, P) : -1;
  if (n >= 0) {
    kt_buf_puts(&b, ",\"ranks\":[");
    for (int r = 0; r < n; r++) {
      kt_buf_printf(&b, "%s{\"busy\":", r ? "," : "");
      kt_buf_json_number(&b, ranks[r].busy);
      kt_buf_printf(&b, ",\"bytes_sent\":%lld,\"comm_time\":", (long long)ranks[r].bytes_sent);
      kt_buf_json_number(&b, ranks[r].comm_time);
      kt_buf_puts(&b, ",\"peak_act_bytes\":");
      kt_buf_json_number(&b, ranks[r].peak_act_bytes);
      kt_buf_puts(&b, "}");
    }
    kt_buf_puts(&b, "]");
  }
  free(ranks);
  kt_buf_puts(&b, "}\n");
  if (!b.failed) fwrite(b.data, 1, b.len, f);
  kt_buf_free(&b);
  fclose(f);
}

int rundir_write_timelines(const char *dir, const kt_schedule *s, const kt_train_result *r,
                           const kt_timeline *measured) {
  char path[4200];
  kt_error err;
  kt_buf b;
  kt_buf_init(&b);
  /* measured and predicted in the sim JSON format, side by side */
  kt_metrics mm;
  if (kt_timeline_metrics(measured, &mm, &err)) return -1;
  kt_sim_info info = {.schedule = s->name, .p = s->p, .v = s->v, .m = s->m,
                      .placement = kt_placement_name(s->placement), .closed_form = -1,
                      .messages = kt_schedule_messages(s)};
  kt_buf_puts(&b, "{\"measured\":");
  kt_render_sim_json(&info, &mm, measured, &b);
  kt_buf_puts(&b, ",\"predicted\":");
  info.costs = &r->calibrated;
  kt_render_sim_json(&info, &r->predicted, &r->predicted_timeline, &b);
  kt_buf_puts(&b, "}\n");
  kt_metrics_free(&mm);
  snprintf(path, sizeof path, "%s/timeline.json", dir);
  int rc = b.failed || kt_write_file_atomic(path, b.data, b.len, &err) ? -1 : 0;
  kt_buf_free(&b);
  if (rc) return rc;
  kt_buf_init(&b);
  char title[96];
  snprintf(title, sizeof title, "kaiten train %s P=%d M=%d (measured)", s->name, s->p, s->m);
  kt_render_chrome_trace(measured, title, 1e6, &b);
  snprintf(path, sizeof path, "%s/trace.json", dir);
  rc = b.failed || kt_write_file_atomic(path, b.data, b.len, &err) ? -1 : 0;
  kt_buf_free(&b);
  return rc;
}
