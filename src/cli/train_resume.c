/* kaiten train --resume DIR: the run's model, data and learning-rate
 * schedule come from its latest checkpoint, its layout from config.json
 * unless flags change it (what changed is said), and the steps it already
 * ran are never run twice. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/train_cli.h"

/* Adopts the checkpoint's model; a conflicting shape flag is an error. */
static int adopt_model(train_opts *o, const kt_checkpoint_meta *meta) {
  const kt_model_config *want = &o->model, *run = &meta->model;
  int given = o->model_flags_given;
  if ((given & TRAIN_MODEL_GIVEN) && want->kind != run->kind)
    return cli_usage_error("--model %s: the run in '%s' trains a %s model; leave --model out to "
                           "resume it",
                           kt_model_kind_name(want->kind), o->resume, kt_model_kind_name(run->kind));
  const struct { const char *flag; int want, run; } shape[] = {
      {"layers", want->layers, run->layers},
      {"hidden", want->hidden, run->hidden},
      {"heads", want->heads, run->heads},
      {"seq-len", want->seq_len, run->seq_len},
      {"tie-embeddings", want->tie_embeddings, run->tie_embeddings}};
  for (int i = 0; i < 5; i++)
    if ((given & (1 << i)) && shape[i].want != shape[i].run)
      return cli_usage_error("--%s %d: the run in '%s' has %d; drop the shape flags to resume it",
                             shape[i].flag, shape[i].want, o->resume, shape[i].run);
  int recompute = o->model.recompute;
  o->model = meta->model;
  o->model.recompute = recompute;
  o->seed = meta->data_seed;
  if (!o->decay_given) o->optim.decay_steps = meta->decay_steps; /* the run's schedule */
  o->optim.warmup_steps = meta->warmup_steps;
  return 0;
}

/* "2,3,3" from a segment's partition into buf (NULL when it has none). */
static const char *partition_text(const kt_run_segment *seg, char *buf, size_t n) {
  if (seg->n_partition <= 0) return NULL;
  size_t len = 0;
  for (int i = 0; i < seg->n_partition && len < n; i++)
    len += (size_t)snprintf(buf + len, n - len, "%s%d", i ? "," : "", seg->partition[i]);
  return len < n ? buf : NULL;
}

/* Layout flags the user left out take the run's last layout. */
static int adopt_layout(train_opts *o, const kt_run_segment *seg, char *part_buf, size_t n) {
  unsigned given = o->layout_given;
  if (!(given & (TRAIN_GIVEN_SCHEDULE | TRAIN_GIVEN_SCHEDULE_FILE))) {
    int kind = kt_schedule_kind_from_name(seg->schedule);
    if (kind < 0)
      return cli_usage_error("--resume %s: the run trained on a schedule file; give it again "
                             "with --schedule-file, or choose --schedule",
                             o->resume);
    o->schedule = (kt_schedule_kind)kind;
  }
  int p_same = !(given & TRAIN_GIVEN_P) || o->p == seg->p;
  int v_same = !(given & TRAIN_GIVEN_V) || o->v == seg->v;
  if (!(given & TRAIN_GIVEN_P)) o->p = seg->p;
  if (!(given & TRAIN_GIVEN_V) && !(given & TRAIN_GIVEN_SCHEDULE)) o->v = seg->v;
  if (!(given & TRAIN_GIVEN_M)) o->m = seg->m;
  if (!(given & TRAIN_GIVEN_B) && seg->b > 0) o->b = seg->b;
  if (!(given & TRAIN_GIVEN_K) && seg->k > 0) o->k = seg->k;
  if (!(given & TRAIN_GIVEN_D) && seg->d > 0) o->d = seg->d;
  /* the partition goes with the stage count it was made for */
  if (!(given & TRAIN_GIVEN_PARTITION) && p_same && v_same && !(given & TRAIN_GIVEN_SCHEDULE) &&
      !o->schedule_file)
    o->partition = partition_text(seg, part_buf, n);
  return 0;
}

/* "schedule 1f1b -> zb-h1, P 4 -> 2" for what differs from the last segment. */
static void describe_changes(const train_opts *o, const kt_run_segment *seg, kt_buf *out) {
  const char *sched = o->schedule_file ? o->schedule_file : kt_schedule_kind_name(o->schedule);
  if (strcmp(sched, seg->schedule))
    kt_buf_printf(out, "%sschedule %s -> %s", out->len ? ", " : "", seg->schedule, sched);
  const struct { const char *name; int was, now; } n[] = {
      {"P", seg->p, o->p}, {"M", seg->m, o->m}, {"b", seg->b, o->b},
      {"K", seg->k, o->k}, {"D", seg->d, o->d}};
  for (size_t i = 0; i < sizeof n / sizeof *n; i++)
    if (n[i].was != n[i].now)
      kt_buf_printf(out, "%s%s %d -> %d", out->len ? ", " : "", n[i].name, n[i].was, n[i].now);
  if (o->v > 0 && seg->v != o->v)
    kt_buf_printf(out, "%sV %d -> %d", out->len ? ", " : "", seg->v, o->v);
  if (strcmp(seg->transport, o->transport))
    kt_buf_printf(out, "%stransport %s -> %s", out->len ? ", " : "", seg->transport, o->transport);
}

static int checkpoint_of(train_opts *o, char **ckpt_path, kt_checkpoint_meta *meta) {
  kt_error err = {{0}};
  if (kt_checkpoint_latest(o->resume, ckpt_path, &err) != KT_OK) {
    fprintf(stderr,
            "kaiten: --resume %s: the run has a config.json but no checkpoint (it stopped before "
            "its first one; checkpoints are written at the end, on Ctrl-C and every "
            "--checkpoint-every K steps); start it again with --run-dir %s --force\n",
            o->resume, o->resume);
    return 2;
  }
  kt_status st = kt_checkpoint_read_meta(*ckpt_path, meta, &err);
  return st ? cli_fail(st, &err) : 0;
}

int train_resume_setup(train_opts *o, train_resume *r) {
  memset(r, 0, sizeof *r);
  kt_buf_init(&r->changes);
  struct stat sb;
  if (stat(o->resume, &sb) != 0)
    return cli_usage_error("--resume %s: the run directory does not exist", o->resume);
  if (!S_ISDIR(sb.st_mode))
    return cli_usage_error("--resume %s: not a directory (give a run directory of kaiten train "
                           "--run-dir)",
                           o->resume);
  kt_error err = {{0}};
  kt_status st = kt_rundir_check_free(o->resume, &err);
  if (!st) st = kt_rundir_read_config(o->resume, &r->prev, &err);
  if (st) return cli_fail(st, &err);
  if (r->prev.n_segments < 1)
    return cli_usage_error("--resume %s: config.json names no layout", o->resume);
  if (!strcmp(r->prev.model, "synthetic"))
    return cli_usage_error("--resume %s: a synthetic run has no parameters, so no checkpoint to "
                           "resume; start a new run",
                           o->resume);
  int rc = checkpoint_of(o, &r->ckpt_path, &r->meta);
  if (!rc) rc = adopt_model(o, &r->meta);
  const kt_run_segment *last = &r->prev.segments[r->prev.n_segments - 1];
  if (!rc) rc = adopt_layout(o, last, r->partition, sizeof r->partition);
  if (rc) return rc;
  o->run_dir = o->resume;
  if (r->meta.step >= o->steps)
    return cli_usage_error("--resume %s: the run is already at step %d; give --steps above it",
                           o->resume, r->meta.step);
  describe_changes(o, last, &r->changes);
  return 0;
}

void train_resume_free(train_resume *r) {
  free(r->ckpt_path);
  kt_run_config_free(&r->prev);
  kt_buf_free(&r->changes);
}

void train_resume_notes(const train_opts *o, const train_resume *r, FILE *f) {
  fprintf(f, "resuming %s at step %d", r->ckpt_path, r->meta.step);
  if (r->changes.len) fprintf(f, " with a new layout: %s", r->changes.data);
  else fprintf(f, " with its layout");
  fputc('\n', f);
  int decay = o->optim.decay_steps;
  if (decay > 0 && o->steps > decay) {
    double floor_lr = o->optim.lr * o->optim.min_lr_ratio;
    fprintf(f,
            "note: --steps %d runs past the learning-rate decay (%d steps): steps %d-%d stay at "
            "the floor lr %.3g;\n      give --decay-steps %d to stretch the decay over the "
            "whole run\n",
            o->steps, decay, decay + 1, o->steps, floor_lr, o->steps);
  }
}
