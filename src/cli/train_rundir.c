/* What kaiten train hands to its run directory (kaiten/rundir.h): the run's
 * configuration and layout segment, one metrics record per step, and the
 * traced step's timelines. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/train_cli.h"
#include "kaiten/report.h"

void train_run_config(const train_opts *o, kt_run_config *c) {
  const kt_model_config *m = &o->model;
  memset(c, 0, sizeof *c);
  snprintf(c->model, sizeof c->model, "%s", o->synthetic ? "synthetic" : kt_model_kind_name(m->kind));
  c->layers = m->layers, c->hidden = m->hidden, c->heads = m->heads, c->seq_len = m->seq_len;
  c->vocab = m->vocab, c->tie_embeddings = m->tie_embeddings, c->recompute = m->recompute;
  c->model_seed = m->seed;
  snprintf(c->optimizer, sizeof c->optimizer, "%s", kt_optim_name(o->optim.kind));
  c->lr = o->optim.lr, c->weight_decay = o->optim.weight_decay, c->grad_clip = o->optim.grad_clip;
  c->warmup_steps = o->optim.warmup_steps, c->decay_steps = o->optim.decay_steps;
  c->steps = o->steps, c->val_every = o->val_every, c->data_seed = o->seed;
  snprintf(c->data, sizeof c->data, "%s",
           o->data_path ? o->data_path : o->synthetic ? "" : "built-in");
}

kt_run_segment train_segment(const train_opts *o, const kt_schedule *s, const int *unit_offset,
                             int first_step, int *partition_buf) {
  kt_run_segment seg = {.first_step = first_step, .last_step = -1, .p = s->p, .v = s->v,
                        .m = s->m, .b = o->b, .k = o->k, .d = o->d, .predicted_bubble = NAN,
                        .measured_bubble = NAN};
  snprintf(seg.schedule, sizeof seg.schedule, "%s", s->name[0] ? s->name : "file");
  snprintf(seg.transport, sizeof seg.transport, "%s", o->transport);
  if (!o->synthetic && unit_offset && partition_buf) {
    for (int i = 0; i < kt_schedule_stages(s); i++) partition_buf[i] = unit_offset[i + 1] - unit_offset[i];
    seg.partition = partition_buf;
    seg.n_partition = kt_schedule_stages(s);
  }
  return seg;
}

int train_step_ranks(const kt_train_progress *p, kt_run_rank_step *out, int cap) {
  kt_metrics m;
  kt_error err;
  if (kt_timeline_metrics(p->timeline, &m, &err) != KT_OK) return -1;
  int n = m.p < cap ? m.p : cap;
  for (int r = 0; r < n; r++)
    out[r] = (kt_run_rank_step){.busy = m.ranks[r].busy, .comm_time = m.ranks[r].comm_time,
                                .bytes_sent = (double)m.ranks[r].bytes_sent,
                                .peak_act_bytes = m.ranks[r].peak_memory};
  kt_metrics_free(&m);
  return n;
}

kt_status train_append_metrics(kt_rundir *rd, const kt_train_progress *p, kt_error *err) {
  kt_run_step s = {.step = p->step + 1, .skipped = p->skipped, .loss = p->loss,
                   .val_loss = p->val_loss, .lr = p->lr, .grad_norm = p->grad_norm,
                   .seconds = p->seconds, .tokens_per_s = p->tokens_per_s,
                   .samples_per_s = p->samples_per_s, .bubble = p->bubble};
  int P = p->timeline->p;
  kt_run_rank_step *ranks = kt_calloc(P > 0 ? (size_t)P : 1, sizeof *ranks);
  if (!ranks) return kt_fail(err, KT_ENOMEM, "out of memory");
  int n = train_step_ranks(p, ranks, P);
  kt_status st = n < 0 ? kt_fail(err, KT_ENOMEM, "out of memory")
                       : kt_rundir_append_step(rd, &s, ranks, n, err);
  free(ranks);
  return st;
}

kt_status train_write_timelines(kt_rundir *rd, const kt_schedule *s, const kt_train_result *r,
                                kt_error *err) {
  kt_metrics mm;
  kt_status st = kt_timeline_metrics(&r->measured_timeline, &mm, err);
  if (st) return st;
  kt_buf b;
  kt_buf_init(&b);
  /* measured and predicted in the sim JSON format, side by side */
  kt_sim_info info = {.schedule = s->name, .p = s->p, .v = s->v, .m = s->m,
                      .placement = kt_placement_name(s->placement), .closed_form = -1,
                      .messages = kt_schedule_messages(s)};
  kt_buf_puts(&b, "{\"measured\":");
  kt_render_sim_json(&info, &mm, &r->measured_timeline, &b);
  kt_buf_puts(&b, ",\"predicted\":");
  info.costs = &r->calibrated;
  kt_render_sim_json(&info, &r->predicted, &r->predicted_timeline, &b);
  kt_buf_puts(&b, "}\n");
  kt_metrics_free(&mm);
  st = kt_rundir_write_file(rd, KT_RUNDIR_TIMELINE, &b, err);
  kt_buf_free(&b);
  if (st) return st;
  kt_buf_init(&b);
  char title[96];
  snprintf(title, sizeof title, "kaiten train %s P=%d M=%d (measured)", s->name, s->p, s->m);
  kt_render_chrome_trace(&r->measured_timeline, title, 1e6, &b);
  st = kt_rundir_write_file(rd, KT_RUNDIR_TRACE, &b, err);
  kt_buf_free(&b);
  return st;
}
