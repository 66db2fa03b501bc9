/* Resuming a run: what its directory holds (config.json's layout segments,
 * the newest complete checkpoint), and a session's parameters set to
 * continue it. The model, its data and its learning-rate schedule come
 * from the checkpoint; the layout from the last segment unless the caller
 * chose its own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/session_internal.h"

/* "gpt L=2 C=32 H=2 T=32 V=256" (tied: " tied"), "mlp L=8 C=64". */
static void shape_text(const char *kind, int layers, int hidden, int heads, int seq, int vocab,
                       int tie, char *buf, size_t n) {
  int len = snprintf(buf, n, "%s L=%d C=%d", kind, layers, hidden);
  if (!strcmp(kind, "gpt") && len > 0 && (size_t)len < n)
    snprintf(buf + len, n - (size_t)len, " H=%d T=%d V=%d%s", heads, seq, vocab,
             tie ? " tied" : "");
}

/* The checkpoint holds the model config.json describes (fields an older
 * config.json lacks are not compared). */
static kt_status check_shape(const char *dir, const kt_session_resume *r, kt_error *err) {
  const kt_run_config *c = &r->run;
  const kt_model_config *m = &r->meta.model;
  const char *kind = kt_model_kind_name(m->kind);
  int gpt = m->kind == KT_MODEL_GPT;
  int same = !strcmp(c->model, kind) && (!c->layers || c->layers == m->layers) &&
             (!c->hidden || c->hidden == m->hidden);
  if (same && gpt)
    same = (!c->heads || c->heads == m->heads) && (!c->seq_len || c->seq_len == m->seq_len) &&
           (!c->vocab || c->vocab == m->vocab) && c->tie_embeddings == m->tie_embeddings;
  if (same) return KT_OK;
  char run[160], ckpt[160];
  shape_text(c->model, c->layers, c->hidden, c->heads, c->seq_len, c->vocab, c->tie_embeddings, run,
             sizeof run);
  shape_text(kind, m->layers, m->hidden, m->heads, m->seq_len, m->vocab, m->tie_embeddings, ckpt,
             sizeof ckpt);
  const char *base = strrchr(r->checkpoint, '/');
  return kt_fail(err, KT_EINVAL,
                 "the run in '%s' trains %s (config.json), but its checkpoint "
                 "%s holds %s: not this run's model",
                 dir, run, base ? base + 1 : r->checkpoint, ckpt);
}

/* The checkpoint to resume from: none at all leaves checkpoint NULL; only
 * damaged ones is the error that says what they were. */
static kt_status find_checkpoint(const char *dir, kt_session_resume *out, kt_error *err) {
  kt_checkpoint_found f;
  kt_status st = kt_checkpoint_find(dir, &f, err);
  if (st) return st == KT_EINVAL ? KT_OK : st;
  out->checkpoint = f.path, out->meta = f.meta;
  out->n_skipped = f.n_skipped;
  snprintf(out->skipped, sizeof out->skipped, "%s", f.skipped);
  return KT_OK;
}

kt_status kt_session_resume_read(const char *dir, kt_session_resume *out, kt_error *err) {
  memset(out, 0, sizeof *out);
  kt_status st = kt_rundir_check_free(dir, err);
  if (!st) st = kt_rundir_read_config(dir, &out->run, err);
  if (st) return st;
  /* a run with no layout, or a synthetic one, has no checkpoint to look for */
  if (out->run.n_segments < 1 || !strcmp(out->run.model, "synthetic")) return KT_OK;
  st = find_checkpoint(dir, out, err);
  if (!st && out->checkpoint) st = check_shape(dir, out, err);
  if (st) kt_session_resume_free(out);
  return st;
}

void kt_session_resume_free(kt_session_resume *r) {
  free(r->checkpoint);
  kt_run_config_free(&r->run);
  memset(r, 0, sizeof *r);
}

/* "2,3,3" from a segment's partition into buf (NULL when it has none). */
static const char *partition_text(const kt_run_segment *seg, char *buf, size_t n) {
  if (seg->n_partition <= 0) return NULL;
  size_t len = 0;
  for (int i = 0; i < seg->n_partition && len < n; i++)
    len += (size_t)snprintf(buf + len, n - len, "%s%d", i ? "," : "", seg->partition[i]);
  return len < n ? buf : NULL;
}

/* Layout parameters the caller did not keep take the run's last layout. */
static kt_status adopt_layout(kt_session_params *p, kt_session_resume *r, const char *dir,
                              unsigned keep, kt_error *err) {
  const kt_run_segment *seg = &r->run.segments[r->run.n_segments - 1];
  if (!(keep & KT_KEEP_SCHEDULE)) {
    /* Seq1F1B is 1f1b over a micro-batch's chunks (kaiten train --seq-chunks) */
    int kind =
        !strcmp(seg->schedule, "seq1f1b") ? KT_SCHED_1F1B : kt_gen_kind_from_name(seg->schedule);
    if (kind < 0)
      return kt_fail(err, KT_EINVAL,
                     "the run in '%s' trained on a schedule of its own ('%s'): "
                     "give that schedule again",
                     dir, seg->schedule);
    p->kind = (kt_gen_kind)kind;
  }
  int p_same = (keep & KT_KEEP_P) == 0 || p->p == seg->p;
  int v_same = (keep & KT_KEEP_V) == 0 || p->v == seg->v;
  if (!(keep & KT_KEEP_P)) p->p = seg->p;
  if (!(keep & KT_KEEP_V) && !(keep & KT_KEEP_SCHEDULE)) p->v = seg->v;
  if (!(keep & KT_KEEP_M)) p->m = seg->m / (p->model.seq_chunks > 1 ? p->model.seq_chunks : 1);
  if (!(keep & KT_KEEP_B) && seg->b > 0) p->micro_batch = seg->b;
  if (!(keep & KT_KEEP_K) && seg->k > 0) p->grad_accum = seg->k;
  if (!(keep & KT_KEEP_D) && seg->d > 0) p->data_parallel = seg->d;
  /* the partition goes with the stage count it was made for */
  if (!(keep & KT_KEEP_PARTITION) && p_same && v_same && !(keep & KT_KEEP_SCHEDULE))
    p->partition = partition_text(seg, r->partition, sizeof r->partition);
  return KT_OK;
}

kt_status kt_session_params_from_run(kt_session_params *p, kt_session_resume *r, const char *dir,
                                     unsigned keep, kt_error *err) {
  if (r->run.n_segments < 1)
    return kt_fail(err, KT_EINVAL, "the run in '%s': its config.json names no layout", dir);
  if (!r->checkpoint)
    return kt_fail(err, KT_EINVAL, "the run in '%s' has no checkpoint to resume", dir);
  int recompute = p->model.recompute; /* how to run it is this invocation's choice */
  kt_gemm_kind gemm = p->model.gemm;
  p->model = r->meta.model;
  p->model.recompute = recompute, p->model.gemm = gemm;
  p->data_seed = r->meta.data_seed;
  /* the run's documents, packing and chunks (its m counts the chunks) */
  p->doc_lengths = r->run.doc_lengths[0] ? r->run.doc_lengths : NULL;
  p->packing = r->run.packing[0] ? r->run.packing : NULL;
  p->model.seq_chunks = r->run.seq_chunks > 1 ? r->run.seq_chunks : 0;
  if (r->run.has_attn && p->attn_share < 0) /* the run's calibration, unless one is given */
    p->attn_share = r->run.attn_share, p->attn_from = r->run.attn_from;
  if (!(keep & KT_KEEP_DECAY)) p->optim.decay_steps = r->meta.decay_steps; /* the run's schedule */
  p->optim.warmup_steps = r->meta.warmup_steps;
  p->resume = p->run_dir = dir;
  return adopt_layout(p, r, dir, keep, err);
}
