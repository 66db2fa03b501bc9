/* kaiten train: one training session (fresh or resumed) on threads or MPI. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/train_cli.h"
#include "kaiten/report.h"

typedef struct {
  train_opts *o;
  kt_runtime *rt;
  FILE *talk;      /* progress stream (NULL on MPI ranks other than 0) */
  int live, drawn; /* live terminal view: lines drawn last time */
  double *losses;
  int n_losses, cap_losses;
  kt_checkpoint_meta meta;
  kt_status ckpt_status;
  kt_error ckpt_err;
  kt_server *srv; /* --serve: the live dashboard, fed after every step */
} session;

static const char *const spark[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};

/* Redraws, in place, a utilisation bar per stage and a loss sparkline. */
static void draw_live(session *s, const kt_train_progress *p) {
  kt_metrics m;
  kt_error err;
  if (kt_timeline_metrics(p->timeline, &m, &err)) return;
  if (s->drawn) fprintf(s->talk, "\x1b[%dA", s->drawn);
  int lines = 0;
  fprintf(s->talk, "\x1b[2Kstep %d/%d  loss %.4f", p->step + 1, p->steps, p->loss);
  if (!isnan(p->val_loss)) fprintf(s->talk, "  val %.4f", p->val_loss);
  fprintf(s->talk, "  %.0f tok/s  bubble %.1f%%\n", p->tokens_per_s, 100 * p->bubble);
  lines++;
  int shown = m.p <= 16 ? m.p : 16;
  for (int r = 0; r < shown; r++) {
    double u = m.makespan > 0 ? m.ranks[r].busy / m.makespan : 0;
    int fill = (int)lround(u * 40);
    fprintf(s->talk, "\x1b[2K  rank %2d |", r);
    for (int i = 0; i < 40; i++) fputs(i < fill ? "█" : "·", s->talk);
    fprintf(s->talk, "| %5.1f%% busy\n", 100 * u);
    lines++;
  }
  fprintf(s->talk, "\x1b[2K  loss ");
  int from = s->n_losses > 60 ? s->n_losses - 60 : 0;
  double lo = INFINITY, hi = -INFINITY;
  for (int i = from; i < s->n_losses; i++) lo = fmin(lo, s->losses[i]), hi = fmax(hi, s->losses[i]);
  for (int i = from; i < s->n_losses; i++) {
    int level = hi > lo ? (int)((s->losses[i] - lo) / (hi - lo) * 7.999) : 0;
    fputs(spark[level], s->talk);
  }
  fprintf(s->talk, "  %.4f .. %.4f\n", lo, hi);
  lines++;
  fflush(s->talk);
  s->drawn = lines;
  kt_metrics_free(&m);
}

static int on_step(void *ctx, const kt_train_progress *p) {
  session *s = ctx;
  if (s->n_losses == s->cap_losses) {
    int cap = s->cap_losses ? 2 * s->cap_losses : 64;
    double *n = realloc(s->losses, sizeof(double) * (size_t)cap);
    if (n) s->losses = n, s->cap_losses = cap;
  }
  if (s->n_losses < s->cap_losses) s->losses[s->n_losses++] = p->loss;
  if (s->o->run_dir && s->talk) rundir_append_metrics(s->o->run_dir, p, s->rt);
  if (s->srv) train_serve_step(s->srv, p, s->rt); /* never waits */
  if (s->talk && p->skipped)
    fprintf(stderr, "kaiten: step %d skipped: loss %g, non-finite values first in the %s of stage %d\n",
            p->step + 1, p->loss, p->nonfinite_what, p->nonfinite_stage);
  if (s->talk) {
    if (s->live) {
      draw_live(s, p);
    } else {
      fprintf(s->talk, "step %4d/%d  loss %.6f", p->step + 1, p->steps, p->loss);
      if (!isnan(p->val_loss)) fprintf(s->talk, "  val %.6f", p->val_loss);
      fprintf(s->talk, "  lr %.3g  %9.0f tok/s  %7.1f ms  bubble %5.1f%%", p->lr, p->tokens_per_s,
              1e3 * p->seconds, 100 * p->bubble);
      /* peak activation memory of each stage during the step (local stages) */
      const kt_schedule *sc = kt_runtime_config_of(p->runtime)->schedule;
      if (!s->o->synthetic) {
        fprintf(s->talk, "  act MiB");
        for (int st = 0; st < kt_schedule_stages(sc); st++) {
          kt_chunk *c = kt_runtime_chunk((kt_runtime *)p->runtime, st, 0);
          if (c) fprintf(s->talk, "%s%.2f", st ? "/" : " ", c->peak_stash_bytes / 1048576.0);
          else fprintf(s->talk, "%s-", st ? "/" : " ");
        }
      }
      fputc('\n', s->talk);
      fflush(s->talk);
    }
  }
  int every = s->o->checkpoint_every;
  if (s->o->run_dir && every > 0 && (p->step + 1) % every == 0 && p->step + 1 < p->steps) {
    s->meta.step = p->step + 1;
    s->ckpt_status = kt_checkpoint_save_in_run(s->rt, s->o->run_dir, &s->meta, &s->ckpt_err);
    if (s->ckpt_status) return 1; /* stop: a run that cannot checkpoint should not go on */
  }
  return 0;
}

/* Adopts the checkpoint's model; a conflicting shape flag is an error. */
static int resume_setup(train_opts *o, char **ckpt_path, kt_checkpoint_meta *meta) {
  kt_error err = {{0}};
  kt_status st = kt_checkpoint_latest(o->resume, ckpt_path, &err);
  if (!st) st = kt_checkpoint_read_meta(*ckpt_path, meta, &err);
  if (st) return cli_fail(st, &err);
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
  o->run_dir = o->resume;
  if (meta->step >= o->steps)
    return cli_usage_error("--resume %s: the run is already at step %d; give --steps above it",
                           o->resume, meta->step);
  return 0;
}

static kt_status make_data(const train_opts *o, kt_data_source **out, kt_error *err) {
  *out = NULL;
  if (o->synthetic) return KT_OK;
  if (o->model.kind == KT_MODEL_MLP) return kt_data_mlp_create(o->model.hidden, o->seed, out, err);
  return kt_data_text_source_create(o->data_path, o->model.seq_len, o->b, o->seed, out, err);
}

static void final_report(session *s, const kt_schedule *sched, const kt_train_result *res,
                         kt_buf *out);

/* An imported schedule sets P, V and M; flags that say otherwise are an error. */
static int load_schedule_file(train_opts *o, kt_schedule *sched) {
  char info[CLI_INFO_LEN];
  cli_size_flag sizes[3] = {{"--stages", o->p_given, o->p}, {"--chunks", o->v_given, o->v},
                            {"--microbatches", o->m_given, o->m}};
  int rc = cli_load_schedule_file(o->notation, o->schedule_file, sizes, sched, info, sizeof info);
  if (rc) return rc;
  o->p = sched->p, o->v = sched->v, o->m = sched->m;
  const char *rank = getenv("OMPI_COMM_WORLD_RANK"); /* one line per job, not per process */
  if (!rank || !strcmp(rank, "0")) fprintf(stderr, "kaiten: %s", info);
  return 0;
}

int train_session(train_opts *o) {
  kt_error err = {{0}};
  char *ckpt_path = NULL;
  kt_checkpoint_meta rmeta;
  int rc, use_mpi = !strcmp(o->transport, "mpi"), world_rank = 0;
  if (o->resume && (rc = resume_setup(o, &ckpt_path, &rmeta))) {
    free(ckpt_path);
    return rc;
  }
  int first_step = o->resume ? rmeta.step : 0;
  kt_schedule sched;
  kt_costs unit;
  kt_costs_default(&unit);
  if (o->schedule_file) {
    rc = load_schedule_file(o, &sched);
    if (rc) {
      free(ckpt_path);
      return rc;
    }
  } else if ((rc = cli_generate(o->schedule, o->p, o->m, o->v, &unit, o->mem_limit, &sched, &err))) {
    free(ckpt_path);
    fprintf(stderr, "kaiten: %s\n", err.msg);
    return rc;
  }
  int S = sched.p * sched.v;
  int *partition = NULL;
  kt_runtime *rt = NULL;
  kt_transport *mpi_t = NULL;
  kt_data_source *data = NULL;
  kt_status st = KT_OK;
  if (o->partition) {
    partition = kt_calloc((size_t)S, sizeof *partition);
    if (!partition) st = kt_fail(&err, KT_ENOMEM, "out of memory");
    else st = kt_partition_parse(o->partition, S, kt_model_units(&o->model), partition, &err);
  }
  kt_runtime_config rcfg;
  kt_runtime_config_default(&rcfg);
  rcfg.schedule = &sched;
  rcfg.data_parallel = o->d;
  rcfg.grad_accum = o->k;
  rcfg.micro_batch = o->b;
  rcfg.model = o->model;
  rcfg.partition = partition;
  rcfg.optim = o->optim;
  rcfg.synthetic = o->synthetic;
  rcfg.syn_tf_ms = o->tf, rcfg.syn_tb_ms = o->tb, rcfg.syn_tw_ms = o->tw;
  rcfg.syn_act_bytes = (size_t)o->act_bytes;
  rcfg.timeout = o->timeout;
  rcfg.blas_threads = o->blas_threads;
  /* Test hook for fault tests: KAITEN_TEST_HANG=RANK,ACTION stops that world
   * rank before its ACTION-th action of the first step. */
  const char *hang = getenv("KAITEN_TEST_HANG");
  if (hang && sscanf(hang, "%d,%d", &rcfg.hang_rank, &rcfg.hang_action) != 2)
    rcfg.hang_rank = rcfg.hang_action = -1;
  if (!st && use_mpi) {
    st = kt_transport_mpi_create(sched.p, o->d, o->timeout, &mpi_t, &err);
    if (!st && rcfg.blas_threads <= 0) { /* the processes on this machine share its cores */
      long cores = sysconf(_SC_NPROCESSORS_ONLN);
      int local = kt_transport_mpi_local_size();
      rcfg.blas_threads = cores > local ? (int)(cores / local) : 1;
    }
    if (!st) {
      world_rank = mpi_t->rank;
      st = kt_runtime_create(&rcfg, mpi_t, &world_rank, 1, &rt, &err);
    }
  } else if (!st) {
    st = kt_runtime_create_threads(&rcfg, &rt, &err);
  }
  if (!st && ckpt_path) st = kt_checkpoint_load(rt, ckpt_path, &rmeta, &err);
  if (!st) st = make_data(o, &data, &err);
  FILE *talk = world_rank == 0 ? (!strcmp(o->format, "text") ? stdout : stderr) : NULL;
  if (!st && o->run_dir && world_rank == 0) {
    if (rundir_prepare(o->run_dir, o->resume != NULL, first_step) ||
        rundir_write_config(o->run_dir, o, &sched, kt_runtime_unit_offsets(rt), o->optim.decay_steps))
      st = kt_fail(&err, KT_EIO, "cannot write the run directory '%s'", o->run_dir);
  }
  if (st) {
    rc = world_rank == 0 ? cli_fail(st, &err) : kt_status_exit_code(st);
    goto done;
  }
  session s = {.o = o, .rt = rt, .talk = talk,
               .live = talk == stdout && o->live && cli_use_color(NULL)};
  s.meta = (kt_checkpoint_meta){.decay_steps = o->optim.decay_steps, .warmup_steps = o->optim.warmup_steps,
                                .lr = o->optim.lr, .min_lr_ratio = o->optim.min_lr_ratio,
                                .data_seed = o->seed, .model = o->model, .optim = o->optim.kind};
  if (talk) {
    const int *off = kt_runtime_unit_offsets(rt);
    fprintf(talk, "kaiten train: %s P=%d V=%d M=%d b=%d K=%d D=%d on %s; global batch K*M*b*D = %ld",
            sched.name, sched.p, sched.v, sched.m, o->b, o->k, o->d, use_mpi ? "MPI" : "threads",
            (long)o->k * o->m * o->b * o->d);
    if (o->synthetic) fprintf(talk, " (synthetic workload)\n");
    else {
      fprintf(talk, " samples; %s L=%d C=%d", kt_model_kind_name(o->model.kind), o->model.layers,
              o->model.hidden);
      fprintf(talk, "; units per stage:");
      for (int i = 0; i < S; i++) fprintf(talk, "%s%d", i ? "," : " ", off[i + 1] - off[i]);
      fputc('\n', talk);
    }
    if (o->resume) fprintf(talk, "resuming %s at step %d\n", ckpt_path, first_step);
  }
  if (o->serve && world_rank == 0 && (rc = train_serve_start(o, &sched, &s.srv))) goto done;
  kt_train_config tc = {.runtime = rcfg, .first_step = first_step, .steps = o->steps,
                        .val_every = o->val_every, .val_batches = 2, .data = data,
                        .on_step = on_step, .ctx = &s, .skip_nonfinite = o->skip_nonfinite};
  kt_train_result res;
  st = kt_train_run(rt, &tc, &res, &err);
  train_serve_stop(s.srv, st == KT_OK, o->run_dir);
  if (!st && s.ckpt_status) st = s.ckpt_status, err = s.ckpt_err;
  if (!st && o->run_dir && res.n_losses > 0) {
    s.meta.step = first_step + res.n_losses;
    st = kt_checkpoint_save_in_run(rt, o->run_dir, &s.meta, &err);
    if (!st && world_rank == 0 &&
        rundir_write_timelines(o->run_dir, &sched, &res, &res.measured_timeline))
      st = kt_fail(&err, KT_EIO, "cannot write timelines to '%s'", o->run_dir);
  }
  if (st) {
    if (use_mpi) { /* name this rank and its stage, then take the whole job down */
      fprintf(stderr, "kaiten: rank %d (stage %d): %s\n", world_rank,
              kt_rank_chunk_stage(&sched, world_rank / o->d, 0), err.msg);
      fflush(stderr);
      kt_transport_mpi_abort_job(1);
    }
    rc = cli_fail(st, &err);
  } else if (res.n_losses > 0 && world_rank == 0) {
    kt_buf out;
    kt_buf_init(&out);
    final_report(&s, &sched, &res, &out);
    rc = cli_emit(o->output, &out);
    kt_buf_free(&out);
    if (o->run_dir && talk) fprintf(talk, "run directory: %s\n", o->run_dir);
  } else {
    rc = 0;
  }
  if (res.losses) kt_train_result_free(&res);
  free(s.losses);
done:
  if (data) data->destroy(data);
  kt_runtime_destroy(rt);
  kt_transport_mpi_free(mpi_t);
  if (use_mpi) kt_transport_mpi_finalize();
  kt_schedule_free(&sched);
  free(partition);
  free(ckpt_path);
  return rc;
}

static void json_result(kt_buf *b, const train_opts *o, const kt_schedule *s,
                        const kt_train_result *r) {
  kt_buf_puts(b, "{\"schedule\":");
  kt_buf_json_string(b, s->name);
  kt_buf_printf(b, ",\"model\":\"%s\",\"transport\":\"%s\",\"p\":%d,\"v\":%d,\"m\":%d,\"d\":%d,"
                   "\"k\":%d,\"b\":%d,\"losses\":[",
                o->synthetic ? "synthetic" : kt_model_kind_name(o->model.kind), o->transport, s->p,
                s->v, s->m, o->d, o->k, o->b);
  for (int i = 0; i < r->n_losses; i++) {
    if (i) kt_buf_puts(b, ",");
    kt_buf_json_number(b, r->losses[i]);
  }
  kt_buf_puts(b, "],\"val_loss\":");
  kt_buf_json_number(b, r->last_val_loss);
  const struct { const char *k; double v; } nums[] = {
      {"bubble_ratio", r->measured.bubble_ratio},
      {"predicted_bubble_ratio", r->predicted.bubble_ratio},
      {"makespan", r->measured.makespan},
      {"predicted_makespan", r->predicted.makespan},
      {"step_seconds", r->mean_step_seconds},
      {"samples_per_s", r->samples_per_s},
      {"tokens_per_s", r->tokens_per_s},
      {"peak_activation_bytes_stage0", (double)r->peak_stash_bytes_stage0}};
  for (size_t i = 0; i < sizeof nums / sizeof *nums; i++) {
    kt_buf_printf(b, ",\"%s\":", nums[i].k);
    kt_buf_json_number(b, nums[i].v);
  }
  kt_buf_puts(b, ",\"ranks\":[");
  for (int i = 0; i < r->measured.p; i++) {
    const kt_rank_metrics *m = &r->measured.ranks[i];
    const kt_rank_metrics *q = &r->predicted.ranks[i];
    kt_buf_printf(b, "%s{\"rank\":%d,\"busy\":", i ? "," : "", i);
    kt_buf_json_number(b, m->busy);
    kt_buf_puts(b, ",\"idle\":");
    kt_buf_json_number(b, m->idle);
    kt_buf_printf(b, ",\"peak_inflight\":%d,\"predicted_peak_inflight\":%d,\"peak_memory\":",
                  m->peak_inflight, q->peak_inflight);
    kt_buf_json_number(b, m->peak_memory);
    kt_buf_printf(b, ",\"bytes_sent\":%lld,\"comm_time\":", (long long)m->bytes_sent);
    kt_buf_json_number(b, m->comm_time);
    kt_buf_puts(b, ",\"predicted_busy\":");
    kt_buf_json_number(b, q->busy);
    kt_buf_puts(b, "}");
  }
  kt_buf_puts(b, "]}\n");
}

static void text_summary(kt_buf *b, const kt_train_result *r) {
  kt_buf_printf(b, "\nlast step, measured:  makespan %8.2f ms  bubble %5.1f%%\n",
                1e3 * r->measured.makespan, 100 * r->measured.bubble_ratio);
  kt_buf_printf(b, "predicted (simulator, costs calibrated on that step): makespan %8.2f ms  "
                   "bubble %5.1f%%\n",
                1e3 * r->predicted.makespan, 100 * r->predicted.bubble_ratio);
  kt_buf_printf(b, "%-5s %10s %10s %10s %10s %10s %10s %12s\n", "rank", "busy ms", "idle ms",
                "pred busy", "in flight", "predicted", "sent KiB", "peak act MiB");
  for (int i = 0; i < r->measured.p; i++) {
    const kt_rank_metrics *m = &r->measured.ranks[i], *q = &r->predicted.ranks[i];
    kt_buf_printf(b, "%-5d %10.2f %10.2f %10.2f %10d %10d %10.1f %12.3f\n", i, 1e3 * m->busy,
                  1e3 * m->idle, 1e3 * q->busy, m->peak_inflight, q->peak_inflight,
                  m->bytes_sent / 1024.0, m->peak_memory / 1048576.0);
  }
  kt_buf_printf(b, "throughput: %.0f samples/s, %.0f tokens/s (mean step %.1f ms)\n",
                r->samples_per_s, r->tokens_per_s, 1e3 * r->mean_step_seconds);
}

static void final_report(session *s, const kt_schedule *sched, const kt_train_result *res,
                         kt_buf *out) {
  const train_opts *o = s->o;
  if (!strcmp(o->format, "json")) {
    json_result(out, o, sched, res);
  } else if (!strcmp(o->format, "chrome")) {
    char title[96];
    snprintf(title, sizeof title, "kaiten train %s P=%d M=%d (measured)", sched->name, sched->p,
             sched->m);
    kt_render_chrome_trace(&res->measured_timeline, title, 1e6, out);
  } else {
    if (!strcmp(o->format, "ascii")) {
      kt_gantt_opts go;
      kt_gantt_default_opts(&go);
      go.width = cli_term_width();
      go.chunks = sched->v;
      go.color = cli_use_color(NULL) && !o->output;
      kt_buf_puts(out, "\nmeasured (last step):\n");
      kt_render_gantt_ascii(&res->measured_timeline, &go, out);
      kt_buf_puts(out, "\npredicted:\n");
      kt_render_gantt_ascii(&res->predicted_timeline, &go, out);
    }
    text_summary(out, res);
  }
}
