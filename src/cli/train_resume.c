/* kaiten train --resume DIR: the run's model, data and learning-rate
 * schedule come from its latest checkpoint, its layout from config.json
 * unless flags change it (what changed is said), and the steps it already
 * ran are never run twice. The library reads the run and adopts it
 * (kt_session_params_from_run); here the flags the user gave are checked
 * against it, in the flags' words. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/train_cli.h"

/* The model flags the user gave must agree with the run's model. */
static int check_model(const train_opts *o, const kt_checkpoint_meta *meta) {
  const kt_model_config *want = &o->sp.model, *run = &meta->model;
  int given = o->model_flags_given;
  const char *dir = o->sp.resume;
  if ((given & TRAIN_MODEL_GIVEN) && want->kind != run->kind)
    return cli_usage_error("--model %s: the run in '%s' trains a %s model; leave --model out to "
                           "resume it",
                           kt_model_kind_name(want->kind), dir, kt_model_kind_name(run->kind));
  const struct {
    const char *flag;
    int want, run;
  } shape[] = {{"layers", want->layers, run->layers},
               {"hidden", want->hidden, run->hidden},
               {"heads", want->heads, run->heads},
               {"seq-len", want->seq_len, run->seq_len},
               {"tie-embeddings", want->tie_embeddings, run->tie_embeddings}};
  for (int i = 0; i < 5; i++)
    if ((given & (1 << i)) && shape[i].want != shape[i].run)
      return cli_usage_error("--%s %d: the run in '%s' has %d; drop the shape flags to resume it",
                             shape[i].flag, shape[i].want, dir, shape[i].run);
  return 0;
}

/* The layout flags the user gave, as what the session keeps of its own. */
static unsigned kept_flags(const train_opts *o) {
  static const struct {
    unsigned given, keep;
  } map[] = {{TRAIN_GIVEN_SCHEDULE | TRAIN_GIVEN_SCHEDULE_FILE, KT_KEEP_SCHEDULE},
             {TRAIN_GIVEN_P, KT_KEEP_P},
             {TRAIN_GIVEN_V, KT_KEEP_V},
             {TRAIN_GIVEN_M, KT_KEEP_M},
             {TRAIN_GIVEN_B, KT_KEEP_B},
             {TRAIN_GIVEN_K, KT_KEEP_K},
             {TRAIN_GIVEN_D, KT_KEEP_D},
             {TRAIN_GIVEN_PARTITION, KT_KEEP_PARTITION}};
  unsigned keep = o->decay_given ? KT_KEEP_DECAY : 0;
  for (size_t i = 0; i < sizeof map / sizeof *map; i++)
    if (o->layout_given & map[i].given) keep |= map[i].keep;
  return keep;
}

/* "schedule 1f1b -> zb-h1, P 4 -> 2" for what differs from the last segment. */
static void describe_changes(const train_opts *o, const kt_run_segment *seg, kt_buf *out) {
  const kt_session_params *sp = &o->sp;
  const char *sched = o->schedule_file ? o->schedule_file : kt_gen_kind_name(sp->kind);
  if (strcmp(sched, seg->schedule))
    kt_buf_printf(out, "%sschedule %s -> %s", out->len ? ", " : "", seg->schedule, sched);
  const struct {
    const char *name;
    int was, now;
  } n[] = {{"P", seg->p, sp->p},
           {"M", seg->m, sp->m},
           {"b", seg->b, sp->micro_batch},
           {"K", seg->k, sp->grad_accum},
           {"D", seg->d, sp->data_parallel}};
  for (size_t i = 0; i < sizeof n / sizeof *n; i++)
    if (n[i].was != n[i].now)
      kt_buf_printf(out, "%s%s %d -> %d", out->len ? ", " : "", n[i].name, n[i].was, n[i].now);
  if (sp->v > 0 && seg->v != sp->v)
    kt_buf_printf(out, "%sV %d -> %d", out->len ? ", " : "", seg->v, sp->v);
  if (strcmp(seg->transport, o->transport))
    kt_buf_printf(out, "%stransport %s -> %s", out->len ? ", " : "", seg->transport, o->transport);
}

/* What the run holds, as kaiten train's flags see it; 0 or the exit code. */
static int check_run(const train_opts *o, const kt_session_resume *r) {
  const char *dir = o->sp.resume;
  if (r->run.n_segments < 1)
    return cli_usage_error("--resume %s: config.json names no layout", dir);
  if (!strcmp(r->run.model, "synthetic"))
    return cli_usage_error("--resume %s: a synthetic run has no parameters, so no checkpoint to "
                           "resume; start a new run",
                           dir);
  if (!r->checkpoint) {
    fprintf(stderr,
            "kaiten: --resume %s: the run has a config.json but no checkpoint (it stopped before "
            "its first one; checkpoints are written at the end, on Ctrl-C and every "
            "--checkpoint-every K steps); start it again with --run-dir %s --force\n",
            dir, dir);
    return 2;
  }
  int rc = check_model(o, &r->meta);
  const kt_run_segment *last = &r->run.segments[r->run.n_segments - 1];
  if (!rc && !(o->layout_given & (TRAIN_GIVEN_SCHEDULE | TRAIN_GIVEN_SCHEDULE_FILE)) &&
      kt_gen_kind_from_name(last->schedule) < 0 && strcmp(last->schedule, "seq1f1b"))
    return cli_usage_error("--resume %s: the run trained on a schedule file; give it again "
                           "with --schedule-file, or choose --schedule",
                           dir);
  return rc;
}

/* "; wait for it to end or choose another --run-dir" after a lock held. */
int train_busy_hint(kt_status st, kt_error *err) {
  if (st == KT_EBUSY) {
    size_t n = strlen(err->msg);
    snprintf(err->msg + n, sizeof err->msg - n, "; wait for it to end or choose another --run-dir");
  }
  return cli_fail(st, err);
}

int train_resume_setup(train_opts *o, train_resume *r) {
  memset(r, 0, sizeof *r);
  kt_buf_init(&r->changes);
  const char *dir = o->sp.resume;
  struct stat sb;
  if (stat(dir, &sb) != 0)
    return cli_usage_error("--resume %s: the run directory does not exist", dir);
  if (!S_ISDIR(sb.st_mode))
    return cli_usage_error("--resume %s: not a directory (give a run directory of kaiten train "
                           "--run-dir)",
                           dir);
  kt_error err = {{0}};
  kt_status st = kt_session_resume_read(dir, &r->run, &err);
  if (st) return train_busy_hint(st, &err);
  int rc = check_run(o, &r->run);
  if (!rc && (st = kt_session_params_from_run(&o->sp, &r->run, dir, kept_flags(o), &err)))
    rc = cli_fail(st, &err);
  if (rc) return rc;
  if (r->run.meta.step >= o->sp.steps)
    return cli_usage_error("--resume %s: the run is already at step %d; give --steps above it", dir,
                           r->run.meta.step);
  describe_changes(o, &r->run.run.segments[r->run.run.n_segments - 1], &r->changes);
  return 0;
}

void train_resume_free(train_resume *r) {
  kt_session_resume_free(&r->run);
  kt_buf_free(&r->changes);
}

void train_resume_notes(const train_opts *o, const train_resume *r, FILE *f) {
  fprintf(f, "resuming %s at step %d", r->run.checkpoint, r->run.meta.step);
  if (r->changes.len) fprintf(f, " with a new layout: %s", r->changes.data);
  else fprintf(f, " with its layout");
  fputc('\n', f);
  const kt_optim_config *opt = &o->sp.optim;
  int decay = opt->decay_steps, steps = o->sp.steps;
  if (decay > 0 && steps > decay) {
    double floor_lr = opt->lr * opt->min_lr_ratio;
    fprintf(f,
            "note: --steps %d runs past the learning-rate decay (%d steps): steps %d-%d stay at "
            "the floor lr %.3g;\n      give --decay-steps %d to stretch the decay over the "
            "whole run\n",
            steps, decay, decay + 1, steps, floor_lr, steps);
  }
}
