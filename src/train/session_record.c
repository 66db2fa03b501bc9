/* What a session hands to its run directory (kaiten/rundir.h): the run's
 * configuration and layout segments, each rank's share of a step, and the
 * traced step's timelines. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/session_internal.h"

static const char *model_name(const kt_session_params *p) {
  if (p->make_chunk) return p->model_name ? p->model_name : "own";
  return p->synthetic ? "synthetic" : kt_model_kind_name(p->model.kind);
}

void kt__session_run_config(const kt_session *s, kt_run_config *c) {
  const kt_session_params *p = &s->p;
  const kt_model_config *m = &p->model;
  memset(c, 0, sizeof *c);
  snprintf(c->model, sizeof c->model, "%s", model_name(p));
  if (!p->make_chunk) { /* a model of the caller's own has no shape kaiten knows */
    c->layers = m->layers, c->hidden = m->hidden, c->heads = m->heads, c->seq_len = m->seq_len;
    c->vocab = m->vocab, c->tie_embeddings = m->tie_embeddings, c->recompute = m->recompute;
    c->model_seed = m->seed;
  }
  snprintf(c->optimizer, sizeof c->optimizer, "%s", kt_optim_name(p->optim.kind));
  c->lr = p->optim.lr, c->weight_decay = p->optim.weight_decay, c->grad_clip = p->optim.grad_clip;
  c->warmup_steps = p->optim.warmup_steps, c->decay_steps = p->optim.decay_steps;
  c->steps = p->steps, c->val_every = p->val_every, c->data_seed = p->data_seed;
  const char *data = p->data_path ? p->data_path : p->synthetic || p->data ? "" : "built-in";
  snprintf(c->data, sizeof c->data, "%s", data);
  snprintf(c->doc_lengths, sizeof c->doc_lengths, "%s", p->doc_lengths ? p->doc_lengths : "");
  snprintf(c->packing, sizeof c->packing, "%s", p->packing ? p->packing : "");
  c->seq_chunks = m->seq_chunks > 1 ? m->seq_chunks : 1;
  if (p->doc_lengths && p->attn_share >= 0)
    c->attn_share = p->attn_share, c->attn_from = p->attn_from, c->has_attn = 1;
}

/* The model's memory under the layout (borrowed from s: the segment is
 * copied where it is kept), 1F1B's peak and the limit on the whole peak. */
static void segment_memory(const kt_session *s, kt_run_segment *seg) {
  const kt_costs *m = &s->mem;
  if (m->n_stages == kt_schedule_stages(&s->sched) && m->stage_mem_act) {
    seg->n_mem = m->n_stages;
    seg->mem_act_bytes = m->stage_mem_act, seg->mem_wgrad_bytes = m->stage_mem_wgrad;
    seg->mem_transient_bytes = m->stage_mem_transient;
  }
  seg->peak_1f1b_bytes = s->peak_1f1b > 0 ? s->peak_1f1b : NAN;
  double lim = kt__session_limit_bytes(s);
  seg->mem_limit_bytes = lim > 0 ? lim : NAN;
  if (kt_mem_limit_given(&s->p.mem_limit))
    kt_mem_limit_format(&s->p.mem_limit, seg->mem_limit, sizeof seg->mem_limit);
}

double kt__session_limit_bytes(const kt_session *s) {
  const kt_mem_limit *ml = &s->p.mem_limit;
  if (!kt_mem_limit_given(ml)) return 0;
  if (ml->kind == KT_MEM_BYTES) return ml->value;
  if (ml->kind == KT_MEM_FRACTION && s->peak_1f1b > 0) return ml->value * s->peak_1f1b;
  return 0;
}

kt_run_segment kt__session_segment(const kt_session *s, int first_step, int *partition_buf) {
  const kt_session_params *p = &s->p;
  const kt_schedule *sc = &s->sched;
  kt_run_segment seg = {.first_step = first_step,
                        .last_step = -1,
                        .p = sc->p,
                        .v = sc->v,
                        .m = sc->m,
                        .b = p->micro_batch,
                        .k = p->grad_accum,
                        .d = p->data_parallel,
                        .predicted_bubble = NAN,
                        .measured_bubble = NAN,
                        .predicted_period = NAN,
                        .period_1f1b = NAN,
                        .cores = s->cores,
                        .compute_threads = s->compute_threads};
  snprintf(seg.schedule, sizeof seg.schedule, "%s", sc->name[0] ? sc->name : "file");
  snprintf(seg.transport, sizeof seg.transport, "%s", p->use_mpi ? "mpi" : "threads");
  const int *off = s->rt ? kt_runtime_unit_offsets(s->rt) : NULL;
  if (!p->synthetic && !p->make_chunk && off && partition_buf) {
    for (int i = 0; i < kt_schedule_stages(sc); i++) partition_buf[i] = off[i + 1] - off[i];
    seg.partition = partition_buf;
    seg.n_partition = kt_schedule_stages(sc);
  }
  segment_memory(s, &seg);
  return seg;
}

int kt__session_step_ranks(const kt_timeline *t, kt_run_rank_step *out, int cap) {
  kt_metrics m;
  kt_error err;
  if (!t || kt_timeline_metrics(t, &m, &err) != KT_OK) return -1;
  int n = m.p < cap ? m.p : cap;
  for (int r = 0; r < n; r++)
    out[r] = (kt_run_rank_step){.busy = m.ranks[r].busy,
                                .comm_time = m.ranks[r].comm_time,
                                .bytes_sent = (double)m.ranks[r].bytes_sent,
                                .peak_act_bytes = m.ranks[r].peak_memory};
  kt_metrics_free(&m);
  return n;
}

kt_status kt__session_write_timelines(kt_session *s, kt_error *err) {
  if (!s->p.render_timelines) return KT_OK;
  kt_buf tl, trace;
  kt_buf_init(&tl);
  kt_buf_init(&trace);
  const kt_train_result *r = &s->result.train;
  kt_run_timelines t = {.schedule = &s->sched,
                        .measured = &r->measured_timeline,
                        .predicted = &r->predicted_timeline,
                        .measured_metrics = &r->measured,
                        .predicted_metrics = &r->predicted,
                        .calibrated = &r->calibrated};
  s->p.render_timelines(&t, &tl, &trace);
  kt_status st =
      kt_rundir_write_file(s->rd, KT_RUNDIR_TIMELINE, &tl, err); /* ENOMEM if it failed */
  if (!st) st = kt_rundir_write_file(s->rd, KT_RUNDIR_TRACE, &trace, err);
  kt_buf_free(&tl);
  kt_buf_free(&trace);
  return st;
}

static int same_layout(const kt_run_segment *a, const kt_run_segment *b) {
  if (strcmp(a->schedule, b->schedule) || strcmp(a->transport, b->transport) || a->p != b->p ||
      a->v != b->v || a->m != b->m || a->b != b->b || a->k != b->k || a->d != b->d ||
      a->n_partition != b->n_partition)
    return 0;
  for (int i = 0; i < a->n_partition; i++)
    if (a->partition[i] != b->partition[i]) return 0;
  return 1;
}

/* The run directory taken: a lock another process holds, or a directory
 * that holds another run, is the caller's to advise on. */
static kt_status take_run_dir(kt_session *s, kt_error *err) {
  const kt_session_params *p = &s->p;
  kt_rundir_mode mode = p->resume ? KT_RUNDIR_RESUME : p->force ? KT_RUNDIR_FORCE : KT_RUNDIR_NEW;
  int kept = 0;
  kt_status st = kt_rundir_create(p->run_dir, mode, &kept, &s->rd, err);
  if (st == KT_EBUSY) s->failed = KT_SESSION_RUN_DIR_BUSY;
  else if (st == KT_EINVAL && mode == KT_RUNDIR_NEW && kept > 0)
    s->failed = KT_SESSION_RUN_DIR_TAKEN;
  if (!st && kept)
    kt__session_note(s, KT_NOTE_RUN_DIR_CLEARED, p->run_dir, kept,
                     "cleared kaiten's files in '%s' and kept %d other entr%s", p->run_dir, kept,
                     kept == 1 ? "y" : "ies");
  return st;
}

/* Resuming past newer checkpoints that were passed over: one note, with
 * the steps that then run again when config.json knows how far the run
 * got (their metrics lines are replaced). */
static void note_skipped(const kt_session *s) {
  const kt_session_resume *r = &s->resume;
  int last = -1;
  for (int i = 0; i < r->run.n_segments; i++)
    if (r->run.segments[i].last_step > last) last = r->run.segments[i].last_step;
  char again[64] = "";
  if (last > s->first_step + 1)
    snprintf(again, sizeof again, "; steps %d-%d run again", s->first_step + 1, last);
  else if (last == s->first_step + 1) snprintf(again, sizeof again, "; step %d runs again", last);
  kt__session_note(s, KT_NOTE_CHECKPOINT_SKIPPED, r->checkpoint, s->first_step,
                   "%s; resuming from %s at step %d%s", r->skipped, r->checkpoint, s->first_step,
                   again);
}

kt_status kt__session_open_run_dir(kt_session *s, kt_error *err) {
  const kt_session_params *p = &s->p;
  if (!p->run_dir || s->world_rank != 0) return KT_OK;
  kt_status st = take_run_dir(s, err);
  if (st) return st;
  if (s->have_resume && s->resume.n_skipped) note_skipped(s);
  kt__session_run_config(s, &s->cfg);
  for (int i = 0; s->have_resume && i < s->resume.run.n_segments && !st; i++) {
    kt_run_segment seg = s->resume.run.segments[i];
    if (seg.first_step >= s->first_step) break; /* steps that will run again */
    if (seg.last_step < 0 || seg.last_step > s->first_step) seg.last_step = s->first_step;
    st = kt_run_config_add_segment(&s->cfg, &seg, err);
  }
  s->seg_partition = kt_calloc((size_t)kt_schedule_stages(&s->sched), sizeof *s->seg_partition);
  if (!st && !s->seg_partition) st = kt_fail(err, KT_ENOMEM, "out of memory");
  if (!st) {
    kt_run_segment seg = kt__session_segment(s, s->first_step, s->seg_partition);
    kt_run_segment *last = s->cfg.n_segments ? &s->cfg.segments[s->cfg.n_segments - 1] : NULL;
    if (last && same_layout(last, &seg)) last->last_step = -1; /* the same layout goes on */
    else st = kt_run_config_add_segment(&s->cfg, &seg, err);
  }
  if (!st) st = kt_rundir_keep_steps(s->rd, p->resume ? s->first_step : 0, err);
  if (!st) st = kt_rundir_write_config(s->rd, &s->cfg, err);
  return st;
}
