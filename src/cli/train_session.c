/* kaiten train: one training session (fresh or resumed) on threads or MPI.
 * Set-up (schedule, runtime, run directory), the step callback (metrics,
 * progress, checkpoints, signals) and the end (checkpoint, timelines, the
 * layout segment, the report). Under MPI every rank takes the same
 * decisions: a stop asked on one rank is agreed on by all after each step. */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/train_cli.h"
#include "kaiten/report.h"

/* An agreed stop that is a failure somewhere, not a signal. */
#define STOP_FAILED 255

typedef struct {
  train_opts *o;
  int use_mpi, world_rank, world_size, first_step;
  kt_schedule sched;   /* the compute schedule */
  kt_schedule program; /* a lowered schedule file, run as written (else empty) */
  int have_sched;
  int *partition;
  kt_runtime *rt;
  kt_transport *mpi_t;
  kt_data_source *data;
  train_resume resume;
  kt_rundir *rd;      /* rank 0 with --run-dir */
  kt_run_config cfg;  /* config.json with its segments */
  int *seg_partition;
  FILE *talk;         /* progress stream (NULL on MPI ranks other than 0) */
  int live;
  cli_live lv;
  double *losses;
  int n_losses, cap_losses;
  kt_checkpoint_meta meta;
  kt_status fail_status; /* a failure inside the step callback */
  kt_error fail_err;
  int stop; /* agreed: 0, a signal number, or STOP_FAILED */
  kt_server *srv; /* --serve: the live dashboard, fed after every step */
  void *hang;     /* KAITEN_TEST_HANG's wrapper, or NULL */
  kt_links *links; /* --cluster */
} session;

/* Every rank's stop request, agreed on (MPI: a collective sum of one slot
 * per kind: a failure wins, then SIGTERM, SIGINT, SIGUSR1); the local one
 * on threads. */
static int agree(session *s, int flag) {
  if (!s->use_mpi) return flag;
  static const int kinds[] = {STOP_FAILED, SIGTERM, SIGINT, SIGUSR1};
  float votes[4] = {0};
  for (int i = 0; i < 4; i++) votes[i] = flag == kinds[i];
  kt_error err;
  if (kt_allreduce(s->mpi_t, KT_GROUP_WORLD, votes, 4, &err) != KT_OK) return STOP_FAILED;
  for (int i = 0; i < 4; i++)
    if (votes[i] > 0) return kinds[i];
  return 0;
}

static void print_step_line(session *s, const kt_train_progress *p) {
  kt_metrics m;
  kt_error err;
  double act = 0;
  if (kt_timeline_metrics(p->timeline, &m, &err) == KT_OK) {
    for (int r = 0; r < m.p; r++) act = fmax(act, m.ranks[r].peak_memory);
    kt_metrics_free(&m);
  }
  FILE *f = s->talk;
  /* at most 100 columns: the widest fields are the step count and tokens/s */
  fprintf(f, "step %d/%d  loss %.4f", p->step + 1, p->steps, p->loss);
  if (!isnan(p->val_loss)) fprintf(f, "  val %.4f", p->val_loss);
  fprintf(f, "  lr %.2g  %.0f tok/s  %.1f ms  bubble %.1f%%", p->lr, p->tokens_per_s,
          1e3 * p->seconds, 100 * p->bubble);
  if (!s->o->synthetic) fprintf(f, "  act %.1f MiB", act / 1048576.0);
  fputc('\n', f);
  fflush(f);
}

static void record_loss(session *s, double loss) {
  if (s->n_losses == s->cap_losses) {
    int cap = s->cap_losses ? 2 * s->cap_losses : 64;
    double *n = realloc(s->losses, sizeof(double) * (size_t)cap);
    if (n) s->losses = n, s->cap_losses = cap;
  }
  if (s->n_losses < s->cap_losses) s->losses[s->n_losses++] = loss;
}

static void fail_in_step(session *s, kt_status st, const kt_error *err) {
  if (s->fail_status) return;
  s->fail_status = st;
  s->fail_err = *err;
}

static int on_step(void *ctx, const kt_train_progress *p) {
  session *s = ctx;
  kt_error err = {{0}};
  record_loss(s, p->loss);
  kt_status st;
  if (s->rd && (st = train_append_metrics(s->rd, p, &err))) fail_in_step(s, st, &err);
  if (s->srv) train_serve_step(s->srv, p); /* never waits */
  if (s->talk && p->skipped)
    fprintf(stderr, "kaiten: step %d skipped: loss %g, non-finite values first in the %s of stage %d\n",
            p->step + 1, p->loss, p->nonfinite_what, p->nonfinite_stage);
  if (s->talk && s->live) cli_live_draw(&s->lv, p, s->losses, s->n_losses);
  else if (s->talk) print_step_line(s, p);
  int every = s->o->checkpoint_every, done = p->step + 1;
  int ckpt = s->o->run_dir && !s->o->synthetic && every > 0 && done % every == 0 && done < p->steps;
  if (ckpt && agree(s, s->fail_status ? STOP_FAILED : 0) == 0) {
    s->meta.step = done;
    if ((st = kt_checkpoint_save_in_run(s->rt, s->o->run_dir, &s->meta, &err))) fail_in_step(s, st, &err);
  }
  s->stop = agree(s, s->fail_status ? STOP_FAILED : cli_stop_requested());
  if (s->stop && s->stop != STOP_FAILED) cli_note_stop(s->stop);
  return s->stop != 0;
}

static kt_status build_runtime(session *s, kt_error *err) {
  train_opts *o = s->o;
  int S = kt_schedule_stages(&s->sched);
  kt_status st = KT_OK;
  if (o->partition) {
    s->partition = kt_calloc((size_t)S, sizeof *s->partition);
    if (!s->partition) return kt_fail(err, KT_ENOMEM, "out of memory");
    st = kt_partition_parse(o->partition, S, kt_model_units(&o->model), s->partition, err);
    if (st) return st;
  }
  kt_runtime_config rc;
  kt_runtime_config_default(&rc);
  rc.schedule = s->program.ranks ? &s->program : &s->sched;
  rc.data_parallel = o->d, rc.grad_accum = o->k, rc.micro_batch = o->b;
  rc.model = o->model;
  rc.partition = s->partition;
  rc.optim = o->optim;
  rc.synthetic = o->synthetic;
  /* synthetic costs are one rank's share, as in sim and compare */
  int v = s->sched.v > 0 ? s->sched.v : 1;
  rc.syn_tf_ms = o->tf / v, rc.syn_tb_ms = o->tb / v, rc.syn_tw_ms = o->tw / v;
  rc.syn_act_bytes = (size_t)o->act_bytes;
  rc.syn_grad_bytes = (size_t)o->grad_bytes;
  rc.timeout = o->timeout;
  rc.pin_threads = o->pin;

  if (s->use_mpi) {
    st = kt_transport_mpi_create(s->sched.p, o->d, o->timeout, &s->mpi_t, err);
    if (st) return st;
    /* the processes on this machine share its cores */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int local = kt_transport_mpi_local_size();
    kt_blas_set_threads(o->blas_threads > 0 ? o->blas_threads : cores > local ? (int)(cores / local) : 1);
    s->world_rank = kt_transport_rank(s->mpi_t), s->world_size = kt_transport_world(s->mpi_t);
    st = kt_runtime_create(&rc, s->mpi_t, &s->world_rank, 1, &s->rt, err);
  } else { /* the ranks of this process share its cores */
    long cores = sysconf(_SC_NPROCESSORS_ONLN), ranks = (long)s->sched.p * o->d;
    kt_blas_set_threads(o->blas_threads > 0 ? o->blas_threads : ranks >= cores ? 1 : (int)(cores / ranks));
    st = kt_runtime_create_threads(&rc, &s->rt, err);
  }
  if (!st) st = train_cluster_links(o, s->mpi_t, s->sched.p, &s->links, err);
  if (!st) s->hang = cli_hang_install(s->rt); /* fault tests only */
  if (!st && s->resume.ckpt_path) st = kt_checkpoint_load(s->rt, s->resume.ckpt_path, &s->resume.meta, err);
  if (!st && !o->synthetic) {
    if (o->model.kind == KT_MODEL_MLP) st = kt_data_mlp_create(o->model.hidden, o->seed, &s->data, err);
    else st = kt_data_text_source_create(o->data_path, o->model.seq_len, o->b, o->seed, &s->data, err);
  }
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

/* Rank 0 opens (and locks) the run directory and writes config.json with
 * the run's segments: the earlier ones, then this session's. */
static kt_status open_run_dir(session *s, kt_error *err) {
  train_opts *o = s->o;
  if (!o->run_dir || s->world_rank != 0) return KT_OK;
  kt_rundir_mode mode = o->resume ? KT_RUNDIR_RESUME : o->force ? KT_RUNDIR_FORCE : KT_RUNDIR_NEW;
  int kept = 0;
  kt_status st = kt_rundir_create(o->run_dir, mode, &kept, &s->rd, err);
  if (st) return st;
  if (kept && s->talk)
    fprintf(stderr, "kaiten: --force cleared kaiten's files in '%s' and kept %d other entr%s\n",
            o->run_dir, kept, kept == 1 ? "y" : "ies");
  train_run_config(o, &s->cfg);
  for (int i = 0; o->resume && i < s->resume.prev.n_segments && !st; i++) {
    kt_run_segment seg = s->resume.prev.segments[i];
    if (seg.first_step >= s->first_step) break; /* steps that will run again */
    if (seg.last_step < 0 || seg.last_step > s->first_step) seg.last_step = s->first_step;
    st = kt_run_config_add_segment(&s->cfg, &seg, err);
  }
  s->seg_partition = kt_calloc((size_t)kt_schedule_stages(&s->sched), sizeof *s->seg_partition);
  if (!st && !s->seg_partition) st = kt_fail(err, KT_ENOMEM, "out of memory");
  if (!st) {
    kt_run_segment seg = train_segment(o, &s->sched, kt_runtime_unit_offsets(s->rt), s->first_step,
                                       s->seg_partition);
    kt_run_segment *last = s->cfg.n_segments ? &s->cfg.segments[s->cfg.n_segments - 1] : NULL;
    if (last && same_layout(last, &seg)) last->last_step = -1; /* the same layout goes on */
    else st = kt_run_config_add_segment(&s->cfg, &seg, err);
  }
  if (!st && o->resume) st = kt_rundir_keep_steps(s->rd, s->first_step, err);
  else if (!st) st = kt_rundir_keep_steps(s->rd, 0, err);
  if (!st) st = kt_rundir_write_config(s->rd, &s->cfg, err);
  return st;
}

static int load_schedule_file(session *s) {
  train_opts *o = s->o;
  char info[CLI_INFO_LEN];
  cli_size_flag sizes[3] = {{"--stages", o->p_given, o->p}, {"--chunks", o->v_given, o->v},
                            {"--microbatches", o->m_given, o->m}};
  int rc = cli_load_schedule_file(o->torch, o->schedule_file, sizes, &s->sched, &s->program, info, sizeof info);
  if (rc) return rc;
  o->p = s->sched.p, o->v = s->sched.v, o->m = s->sched.m;
  const char *rank = getenv("OMPI_COMM_WORLD_RANK"); /* one line per job, not per process */
  if (!rank || !strcmp(rank, "0")) fprintf(stderr, "kaiten: %s", info);
  return 0;
}

static int build_schedule(session *s) {
  train_opts *o = s->o;
  int rc;
  if (o->schedule_file) rc = load_schedule_file(s);
  else {
    kt_costs unit;
    kt_costs_default(&unit);
    kt_error err = {{0}};
    /* --mem-limit in bytes: the budget is on the model's activation bytes */
    int v = o->v > 0 ? o->v : kt_schedule_default_chunks(o->schedule);
    kt_status ms = o->mem_limit.kind == CLI_MEM_BYTES
                       ? train_activation_bytes(o, o->p * v, &unit, &err) : KT_OK;
    double limit = cli_mem_limit_units(&o->mem_limit, o->schedule, o->p, o->m, o->v, &unit);
    rc = ms ? cli_fail(ms, &err) : cli_generate(o->schedule, o->p, o->m, o->v, &unit, limit, &s->sched, &err);
    if (rc && !ms) fprintf(stderr, "kaiten: %s\n", err.msg);
    kt_costs_free(&unit);
  }
  s->have_sched = rc == 0;
  return rc;
}

/* mpirun without --transport mpi would start P*D independent runs writing
 * into one run directory. */
static int check_launch(const train_opts *o) {
  const char *size = getenv("OMPI_COMM_WORLD_SIZE");
  if (!size) size = getenv("PMI_SIZE");
  long n;
  if (strcmp(o->transport, "mpi") && size && kt_parse_int(size, 1, 1L << 30, &n) == 0 && n > 1)
    return cli_usage_error("running under mpirun with %ld processes but without --transport mpi: "
                           "each would train alone; add --transport mpi",
                           n);
  return 0;
}

/* Two lines of at most 100 columns: the layout, then the model. */
static void print_start(session *s) {
  train_opts *o = s->o;
  /* written to a buffer first: the live view clips it to the terminal */
  char *text = NULL;
  size_t len = 0;
  FILE *t = open_memstream(&text, &len);
  if (!t) return;
  fprintf(t, "kaiten train: %s P=%d V=%d M=%d b=%d K=%d D=%d on %s, global batch %ld\n",
          s->sched.name[0] ? s->sched.name : "file", s->sched.p, s->sched.v, s->sched.m, o->b, o->k,
          o->d, s->use_mpi ? "MPI" : "threads", (long)o->k * o->m * o->b * o->d);
  if (o->synthetic) {
    fprintf(t, "synthetic workload: tf=%g tb=%g tw=%g ms per rank's share, %ld-byte tensors\n",
            o->tf, o->tb, o->tw, o->act_bytes);
  } else {
    const int *off = kt_runtime_unit_offsets(s->rt);
    fprintf(t, "model: %s L=%d C=%d; units per stage", kt_model_kind_name(o->model.kind),
            o->model.layers, o->model.hidden);
    int S = kt_schedule_stages(&s->sched);
    for (int i = 0; i < S && i < 16; i++) fprintf(t, "%s%d", i ? "," : " ", off[i + 1] - off[i]);
    fputs(S > 16 ? ",...\n" : "\n", t);
  }
  if (o->resume) train_resume_notes(o, &s->resume, t);
  fclose(t);
  int width = s->live ? s->lv.width - 1 : 0;
  for (char *line = text; line && *line;) {
    char *nl = strchr(line, '\n');
    int n = nl ? (int)(nl - line) : (int)strlen(line);
    fprintf(s->talk, "%.*s\n", width > 0 && n > width ? width : n, line);
    line = nl ? nl + 1 : line + n;
  }
  free(text);
}

/* The end of the run: the final checkpoint (collective under MPI), then on
 * rank 0 the timelines and this segment's result in config.json. */
static kt_status finish_run(session *s, const kt_train_result *res, kt_error *err) {
  train_opts *o = s->o;
  if (!o->run_dir || res->n_losses == 0) return KT_OK;
  kt_status st = KT_OK;
  if (!o->synthetic) {
    s->meta.step = s->first_step + res->n_losses;
    st = kt_checkpoint_save_in_run(s->rt, o->run_dir, &s->meta, err);
  }
  if (st || !s->rd) return st;
  st = train_write_timelines(s->rd, &s->sched, res, err);
  kt_run_segment *seg = &s->cfg.segments[s->cfg.n_segments - 1];
  seg->last_step = s->first_step + res->n_losses;
  seg->predicted_bubble = res->predicted.bubble_ratio;
  seg->measured_bubble = res->measured.bubble_ratio;
  if (!st) st = kt_rundir_write_config(s->rd, &s->cfg, err);
  return st;
}

static int say_stopped(session *s, int done) {
  train_opts *o = s->o;
  int sig = s->stop;
  if (!s->talk) return 128 + sig;
  fprintf(stderr, "kaiten: stopped by %s after step %d of %d; ", cli_signal_name(sig), done, o->steps);
  if (!o->run_dir) fprintf(stderr, "no --run-dir, so nothing was saved\n");
  else if (o->synthetic) fprintf(stderr, "a synthetic run has no parameters to checkpoint; its metrics are in %s\n", o->run_dir);
  else if (s->use_mpi)
    fprintf(stderr, "resume with: mpirun -np %d %s train --transport mpi --resume %s --steps %d\n",
            s->world_size, cli_program, o->run_dir, o->steps);
  else fprintf(stderr, "resume with: %s train --resume %s --steps %d\n", cli_program, o->run_dir, o->steps);
  return 128 + sig;
}

static int report_failure(session *s, kt_status st, const kt_error *err) {
  if (s->use_mpi && s->stop == STOP_FAILED && s->world_rank != 0 && !s->fail_status)
    return 1; /* another rank failed and says why */
  if (s->use_mpi) { /* name this rank and its stage, then take the whole job down */
    fprintf(stderr, "kaiten: rank %d (stage %d): %s\n", s->world_rank,
            kt_rank_chunk_stage(&s->sched, s->world_rank / s->o->d, 0), err->msg);
    fflush(stderr);
    kt_transport_mpi_abort_job(1);
  }
  return cli_fail(st, err);
}

static int run_steps(session *s) {
  train_opts *o = s->o;
  kt_error err = {{0}};
  s->meta = (kt_checkpoint_meta){.decay_steps = o->optim.decay_steps, .warmup_steps = o->optim.warmup_steps,
                                 .lr = o->optim.lr, .min_lr_ratio = o->optim.min_lr_ratio,
                                 .data_seed = o->seed, .model = o->model, .optim = o->optim.kind};
  if (o->save_init) { /* every rank takes part: the file gathers all units */
    s->meta.step = s->first_step;
    kt_status st = kt_checkpoint_save(s->rt, o->save_init, &s->meta, &err);
    if (st) return s->world_rank == 0 ? cli_fail(st, &err) : kt_status_exit_code(st);
  }
  kt_train_config tc = {.runtime = *kt_runtime_config_of(s->rt), .first_step = s->first_step,
                        .steps = o->steps, .val_every = o->val_every, .val_batches = 2,
                        .data = s->data, .on_step = on_step, .ctx = s,
                        .skip_nonfinite = o->skip_nonfinite, .links = s->links};
  kt_train_result res;
  int rc = 0;
  if (o->serve && s->world_rank == 0 && (rc = train_serve_start(o, &s->sched, &s->srv))) return rc;
  kt_status st = kt_train_run(s->rt, &tc, &res, &err);
  train_serve_stop(s->srv, st == KT_OK, o->run_dir);
  s->srv = NULL;
  if (!st && s->fail_status) st = s->fail_status, err = s->fail_err;
  if (!st && s->stop == STOP_FAILED) st = KT_EPEER;
  if (!st) st = finish_run(s, &res, &err);
  if (st) {
    rc = report_failure(s, st, &err);
  } else if (res.n_losses > 0 && s->world_rank == 0) {
    kt_buf out;
    kt_buf_init(&out);
    train_final_report(o, &s->sched, &res, &out);
    if (strcmp(o->format, "json") && strcmp(o->format, "chrome")) train_memory_report(o, &s->sched, &res, &out);
    rc = cli_emit(o->output, &out);
    kt_buf_free(&out);
    if (o->run_dir && s->talk)
      fprintf(s->talk, "run directory: %s%s\n", o->run_dir,
              o->synthetic ? " (a synthetic run has no parameters to checkpoint)" : "");
  }
  if (!rc && s->stop) rc = say_stopped(s, s->first_step + res.n_losses);
  if (res.losses) kt_train_result_free(&res);
  return rc;
}

static void session_free(session *s) {
  if (s->data) s->data->destroy(s->data);
  if (s->rt) cli_hang_remove(s->rt, s->hang);
  kt_runtime_destroy(s->rt);
  kt_links_destroy(s->links);
  kt_transport_mpi_destroy(s->mpi_t);
  if (s->use_mpi) kt_transport_mpi_finalize();
  kt_rundir_destroy(s->rd);
  kt_run_config_free(&s->cfg);
  if (s->have_sched) kt_schedule_free(&s->sched);
  kt_schedule_free(&s->program);
  if (s->o->resume) train_resume_free(&s->resume);
  free(s->partition);
  free(s->seg_partition);
  free(s->losses);
}

int train_session(train_opts *o) {
  session s = {.o = o, .use_mpi = !strcmp(o->transport, "mpi"), .world_size = 1};
  int rc = check_launch(o);
  if (!rc && o->resume) rc = train_resume_setup(o, &s.resume);
  if (rc) {
    if (o->resume) train_resume_free(&s.resume);
    return rc;
  }
  s.first_step = o->resume ? s.resume.meta.step : 0;
  if (!rc) rc = build_schedule(&s);
  kt_error err = {{0}};
  kt_status st = KT_OK;
  if (!rc) {
    st = build_runtime(&s, &err);
    s.talk = s.world_rank == 0 ? (!strcmp(o->format, "text") ? stdout : stderr) : NULL;
    if (!st) st = open_run_dir(&s, &err);
    /* under MPI, rank 0's run-directory check decides for every rank */
    if (s.rt && agree(&s, st ? STOP_FAILED : 0)) rc = st ? cli_fail(st, &err) : 2;
    else if (st) rc = cli_fail(st, &err);
  }
  if (!rc) {
    int under_mpirun = getenv("OMPI_COMM_WORLD_SIZE") != NULL;
    s.live = s.talk == stdout && o->live && cli_use_color(NULL) && (!under_mpirun || o->live_forced);
    if (s.live) cli_live_init(&s.lv, s.talk);
    if (s.talk) print_start(&s);
    cli_signals_install();
    if (s.use_mpi) cli_signals_set_rank(s.world_rank, o->d);
    rc = run_steps(&s);
    cli_signals_restore();
  }
  session_free(&s);
  return rc;
}
