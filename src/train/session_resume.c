/* Resuming a run: what its directory holds (config.json's layout segments,
 * the newest complete checkpoint), and a session's parameters set to
 * continue it. The model, its data and its learning-rate schedule come
 * from the checkpoint; the layout from the last segment unless the caller
 * chose its own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/session_internal.h"

kt_status kt_session_resume_read(const char *dir, kt_session_resume *out, kt_error *err) {
  memset(out, 0, sizeof *out);
  kt_status st = kt_rundir_check_free(dir, err);
  if (!st) st = kt_rundir_read_config(dir, &out->run, err);
  if (st) return st;
  /* a run with no layout, or a synthetic one, has no checkpoint to look for */
  if (out->run.n_segments < 1 || !strcmp(out->run.model, "synthetic")) return KT_OK;
  kt_error none;
  if (kt_checkpoint_latest(dir, &out->checkpoint, &none) != KT_OK) {
    out->checkpoint = NULL;
    return KT_OK;
  }
  st = kt_checkpoint_read_meta(out->checkpoint, &out->meta, err);
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
    int kind = kt_schedule_kind_from_name(seg->schedule);
    if (kind < 0)
      return kt_fail(err, KT_EINVAL, "the run in '%s' trained on a schedule of its own ('%s'): "
                                     "give that schedule again", dir, seg->schedule);
    p->kind = (kt_schedule_kind)kind;
  }
  int p_same = (keep & KT_KEEP_P) == 0 || p->p == seg->p;
  int v_same = (keep & KT_KEEP_V) == 0 || p->v == seg->v;
  if (!(keep & KT_KEEP_P)) p->p = seg->p;
  if (!(keep & KT_KEEP_V) && !(keep & KT_KEEP_SCHEDULE)) p->v = seg->v;
  if (!(keep & KT_KEEP_M)) p->m = seg->m;
  if (!(keep & KT_KEEP_B) && seg->b > 0) p->micro_batch = seg->b;
  if (!(keep & KT_KEEP_K) && seg->k > 0) p->grad_accum = seg->k;
  if (!(keep & KT_KEEP_D) && seg->d > 0) p->data_parallel = seg->d;
  /* the partition goes with the stage count it was made for */
  if (!(keep & KT_KEEP_PARTITION) && p_same && v_same && !(keep & KT_KEEP_SCHEDULE))
    p->partition = partition_text(seg, r->partition, sizeof r->partition);
  return KT_OK;
}

kt_status kt_session_params_from_run(kt_session_params *p, kt_session_resume *r,
                                     const char *dir, unsigned keep, kt_error *err) {
  if (r->run.n_segments < 1)
    return kt_fail(err, KT_EINVAL, "the run in '%s': its config.json names no layout", dir);
  if (!r->checkpoint)
    return kt_fail(err, KT_EINVAL, "the run in '%s' has no checkpoint to resume", dir);
  int recompute = p->model.recompute;
  p->model = r->meta.model;
  p->model.recompute = recompute;
  p->data_seed = r->meta.data_seed;
  if (!(keep & KT_KEEP_DECAY)) p->optim.decay_steps = r->meta.decay_steps; /* the run's schedule */
  p->optim.warmup_steps = r->meta.warmup_steps;
  p->resume = p->run_dir = dir;
  return adopt_layout(p, r, dir, keep, err);
}
