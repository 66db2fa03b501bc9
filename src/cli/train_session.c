/* kaiten train: one training session (fresh or resumed) on threads or MPI,
 * run by the library (kt_session, kaiten/train.h). Here: the launch check,
 * the schedule file, the session's callbacks (progress lines or the live
 * view, the dashboard's feed, notes, signals as stop requests), and what
 * is printed at the start, on failure and at the end. */
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/train_cli.h"

typedef struct {
  train_opts *o;
  kt_session *ss;
  kt_session_info info;
  train_resume resume;
  FILE *talk; /* progress stream (NULL on MPI ranks other than 0) */
  int live;
  cli_live lv;
  double *losses; /* for the live view's sparkline */
  int n_losses, cap_losses;
  kt_server *srv;     /* --serve: the live dashboard, fed after every step */
  void *hang;         /* KAITEN_TEST_HANG's wrapper, or NULL */
  kt_run_fault named; /* the fault the last step named (the autopilot's line when it changes) */
} train_run;

/* Whether the fault of a step is one the step before did not name (the
 * detector names a fault one step after its onset, since). */
static int new_fault(const kt_run_fault *x, const kt_run_fault *before) {
  return x->kind != KT_FAULT_NONE &&
         (x->kind != before->kind || x->rank != before->rank || x->a != before->a ||
          x->b != before->b || x->since != before->since);
}

/* The autopilot's lines under a step's: the plan switched to before it,
 * and what it found slow (when it is first named). */
static void print_autopilot(FILE *f, const kt_run_step *rec, int named) {
  if (!rec) return;
  const kt_run_switch *w = &rec->sw;
  if (w->made)
    fprintf(f,
            "  switched before it: %s %s -> %s%s%s, predicted %.1f -> %.1f ms/step "
            "(re-planned in %.2g ms)\n",
            w->kind, w->from, w->to, w->partition[0] ? ", layers " : "", w->partition,
            1e3 * w->predicted_before, 1e3 * w->predicted_after, 1e3 * w->replan_seconds);
  const kt_run_fault *x = &rec->fault;
  if (named && x->kind == KT_FAULT_RANK)
    fprintf(f, "  slow: rank %d, its ops x%.2f since step %d\n", x->rank, x->factor, x->since);
  else if (named && x->kind == KT_FAULT_LINK)
    fprintf(f, "  slow: link %d-%d, +%.1f ms a message since step %d\n", x->a, x->b, 1e3 * x->delay,
            x->since);
}

/* A log (no terminal) of a long run gets one step line every few steps,
 * 25 or so in all (1, 2, 5, 10, 20, 50, ... apart), besides the first, the
 * last, validations and skipped steps; metrics.jsonl keeps every step. */
static int worth_a_line(const kt_train_progress *p) {
  static const int mantissa[3] = {1, 2, 5};
  int n = p->steps, every = 1;
  for (long scale = 1; n > 50 && every * 25L < n && scale < 100000000; scale *= 10)
    for (int k = 0; k < 3 && every * 25L < n; k++) every = (int)(mantissa[k] * scale);
  return p->step == 0 || p->step + 1 == n || (p->step + 1) % every == 0 || !isnan(p->val_loss) ||
         p->skipped;
}

/* Whether a line written to F now would not block. An MPI rank's output is
 * a pipe that mpirun reads; when mpirun ends the job it stops reading and
 * only then signals the ranks, not all at once: a rank blocked on a full
 * pipe before its own signal came would never see the stop the others
 * voted for, nor write its checkpoint. Its step lines are skipped instead
 * (metrics.jsonl has every step). A file or terminal always has room. */
static int room_for_a_line(FILE *f) {
  struct pollfd pf = {.fd = fileno(f), .events = POLLOUT};
  return poll(&pf, 1, 0) == 1 && (pf.revents & POLLOUT);
}

static void print_step_line(train_run *r, const kt_train_progress *p, int named) {
  double act = 0;
  for (int i = 0; i < p->n_ranks; i++) act = fmax(act, p->ranks[i].peak_act_bytes);
  FILE *f = r->talk;
  /* at most 100 columns: the widest fields are the step count and tokens/s */
  fprintf(f, "step %d/%d  loss %.4f", p->step + 1, p->steps, p->loss);
  if (!isnan(p->val_loss)) fprintf(f, "  val %.4f", p->val_loss);
  fprintf(f, "  lr %.2g  %.0f tok/s  %.1f ms  bubble %.1f%%", p->lr, p->tokens_per_s,
          1e3 * p->seconds, 100 * p->bubble);
  if (!r->o->sp.synthetic) fprintf(f, "  act %.1f MiB", act / 1048576.0);
  fputc('\n', f);
  print_autopilot(f, p->record, named);
  fflush(f);
}

static void record_loss(train_run *r, double loss) {
  if (r->n_losses == r->cap_losses) {
    int cap = r->cap_losses ? 2 * r->cap_losses : 64;
    double *n = realloc(r->losses, sizeof(double) * (size_t)cap);
    if (n) r->losses = n, r->cap_losses = cap;
  }
  if (r->n_losses < r->cap_losses) r->losses[r->n_losses++] = loss;
}

static int on_step(void *ctx, const kt_train_progress *p) {
  train_run *r = ctx;
  record_loss(r, p->loss);
  if (r->srv) train_serve_step(r->srv, p); /* never waits */
  if (r->talk && p->skipped)
    fprintf(stderr,
            "kaiten: step %d skipped: loss %g, non-finite values first in the %s of stage %d\n",
            p->step + 1, p->loss, p->nonfinite_what, p->nonfinite_stage);
  /* once a stop is asked for, the steps it takes every rank to agree are
   * not printed: mpirun stops reading a rank's output when it is sent
   * SIGTERM, and a rank blocked on a full pipe would never reach its
   * checkpoint (metrics.jsonl still has them) */
  if (cli_stop_requested()) return 0;
  if (r->info.use_mpi && r->talk && !room_for_a_line(r->talk)) return 0;
  int named = p->record && new_fault(&p->record->fault, &r->named);
  if (p->record) r->named = p->record->fault;
  if (r->talk && r->live) cli_live_draw(&r->lv, p, r->losses, r->n_losses);
  else if (r->talk && (worth_a_line(p) || named || (p->record && p->record->sw.made)))
    print_step_line(r, p, named);
  return 0;
}

/* --serve: the dashboard listens before the run directory is touched. */
static kt_status on_ready(void *ctx, const kt_session_info *info, kt_error *err) {
  train_run *r = ctx;
  if (!r->o->serve || info->world_rank != 0) return KT_OK;
  return train_serve_start(r->o, info, &r->srv, err);
}

static int should_stop(void *ctx) {
  (void)ctx;
  return cli_stop_requested();
}

static void on_note(void *ctx, const kt_note *n) {
  (void)ctx;
  switch (n->kind) {
    case KT_NOTE_RUN_DIR_CLEARED:
      fprintf(stderr, "kaiten: --force cleared kaiten's files in '%s' and kept %lld other entr%s\n",
              n->name, n->count, n->count == 1 ? "y" : "ies");
      break;
    case KT_NOTE_STOPPING: cli_note_stop((int)n->count); break; /* another rank asked (MPI) */
    case KT_NOTE_OVERSUBSCRIBED: break; /* said with the start (print_start), once it opened */
    case KT_NOTE_CHECKPOINT_SKIPPED: fprintf(stderr, "kaiten: warning: %s\n", n->text); break;
    default: fprintf(stderr, "kaiten: %s\n", n->text);
  }
}

/* mpirun without --transport mpi would start P*D independent runs writing
 * into one run directory. */
static int check_launch(const train_opts *o) {
  const char *size = getenv("OMPI_COMM_WORLD_SIZE");
  if (!size) size = getenv("PMI_SIZE");
  long n;
  if (!o->sp.use_mpi && size && kt_parse_int(size, 1, 1L << 30, &n) == 0 && n > 1)
    return cli_usage_error("running under mpirun with %ld processes but without --transport mpi: "
                           "each would train alone; add --transport mpi",
                           n);
  return 0;
}

/* Appends text to err's message. */
static void add_hint(kt_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add_hint(kt_error *err, const char *fmt, ...) {
  size_t n = strlen(err->msg);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->msg + n, sizeof err->msg - n, fmt, ap);
  va_end(ap);
}

/* The session did not open: the reason, with the flags that change it. */
static int open_failed(train_run *r, kt_status st, kt_error *err) {
  const kt_session_params *sp = &r->o->sp;
  kt_session_info info;
  switch (kt_session_failed(r->ss)) {
    case KT_SESSION_FAILED_ELSEWHERE: return 2; /* rank 0 says why */
    case KT_SESSION_RUN_DIR_TAKEN:
      add_hint(err,
               ": --resume %s continues that run, --force clears it, or choose another --run-dir",
               sp->run_dir);
      break;
    case KT_SESSION_RUN_DIR_BUSY: return train_busy_hint(st, err);
    case KT_SESSION_TOO_FEW_LAYERS:
      kt_session_get_info(r->ss, &info);
      add_hint(err, " (--layers %d or more)",
               sp->model.layers + kt_schedule_stages(info.schedule) - kt_model_units(&sp->model));
      break;
    case KT_SESSION_WORLD_SIZE:
      add_hint(err, " (--stages %d x --data-parallel %d)", sp->p, sp->data_parallel);
      break;
    case KT_SESSION_CLUSTER: {
      kt_error e = *err;
      kt_fail(err, st, "--cluster %s", e.msg);
      break;
    }
    default: break;
  }
  return cli_fail(st, err);
}

/* The matmuls' library, how it was chosen, and the threads of a rank, in
 * 100 columns: the classes of products on another library are named only
 * where they fit (the JSON lists them all). */
static void print_gemm(FILE *t, const kt_gemm_choice *g) {
  char how[160] = "", shapes[64] = "", tail[32];
  int threads = kt_blas_threads();
  snprintf(tail, sizeof tail, "); %d thread%s per rank", threads, threads == 1 ? "" : "s");
  size_t head = strlen("gemm: ") + strlen(kt_gemm_name(g->kind)) + strlen(" ("), n = 0;
  if (!strcmp(g->how, "given")) n += (size_t)snprintf(how, sizeof how, "--gemm");
  else if (!strcmp(g->how, "small"))
    n += (size_t)snprintf(how, sizeof how, "auto: too little work to measure");
  else {
    n += (size_t)snprintf(how, sizeof how, "auto, %s",
                          !strcmp(g->how, "cached") ? "measured before here" : "measured");
    const char *sep = "; time of ";
    for (int k = 1; k < KT_GEMM_COUNT && n < sizeof how; k++)
      if (k != (int)g->kind && g->seconds[k] > 0 && g->seconds[g->kind] > 0) {
        size_t was = n; /* a library whose time does not fit is left out */
        n += (size_t)snprintf(how + n, sizeof how - n, "%s%s %.2fx", sep,
                              kt_gemm_name((kt_gemm_kind)k), g->seconds[k] / g->seconds[g->kind]);
        if (n >= sizeof how || head + n + strlen(tail) > 100) how[n = was] = 0;
        else sep = ", ";
      }
    if (g->n_shapes) /* "; 2 shapes on openblas" (the first class's library) */
      snprintf(shapes, sizeof shapes, "; %d shape%s on %s", g->n_shapes,
               g->n_shapes == 1 ? "" : "s", kt_gemm_name(g->shapes[0].kind));
  }
  if (head + strlen(how) + strlen(shapes) + strlen(tail) > 100) shapes[0] = 0;
  fprintf(t, "gemm: %s (%s%s%s\n", kt_gemm_name(g->kind), how, shapes, tail);
}

/* The library the model's chunks run on (the first this process holds). */
static void find_gemm(train_run *r) {
  kt_runtime *rt = kt_session_runtime(r->ss);
  r->o->gemm = (kt_gemm_choice){.kind = KT_GEMM_OPENBLAS, .how = "given"};
  int S = kt_schedule_stages(r->info.schedule);
  for (int s = 0; rt && s < S; s++) {
    kt_chunk *c = kt_runtime_chunk(rt, s, 0);
    if (c) {
      kt_chunk_gemm(c, &r->o->gemm);
      return;
    }
  }
}

/* Lines of at most 100 columns: the layout, the model, the matmuls. */
static void print_start(train_run *r) {
  const train_opts *o = r->o;
  const kt_session_params *sp = &o->sp;
  const kt_schedule *sc = r->info.schedule;
  /* written to a buffer first: the live view clips it to the terminal */
  char *text = NULL;
  size_t len = 0;
  FILE *t = open_memstream(&text, &len);
  if (!t) return;
  fprintf(t, "kaiten train: %s P=%d V=%d M=%d b=%d K=%d D=%d on %s, global batch %ld\n",
          sc->name[0] ? sc->name : "file", sc->p, sc->v, sc->m, sp->micro_batch, sp->grad_accum,
          sp->data_parallel, sp->use_mpi ? "MPI" : "threads",
          (long)sp->grad_accum * sp->m * sp->micro_batch * sp->data_parallel);
  if (sp->synthetic && sp->syn_stage_ms) { /* the lists as they run, not a uniform value */
    fputs("synthetic workload:", t);
    for (int k = 0; k < 3; k++) {
      fprintf(t, " %s=", (const char *[]){"tf", "tb", "tw"}[k]);
      for (int st = 0; st < sp->syn_stages; st++)
        fprintf(t, "%s%g", st ? "," : "", sp->syn_stage_ms[3 * st + k]);
    }
    fprintf(t, " ms per stage, %zu-byte tensors\n", sp->syn_act_bytes);
  } else if (sp->synthetic) {
    fprintf(t, "synthetic workload: tf=%g tb=%g tw=%g ms per rank's share, %zu-byte tensors\n",
            sp->syn_tf_ms, sp->syn_tb_ms, sp->syn_tw_ms, sp->syn_act_bytes);
  } else {
    const int *off = r->info.unit_offsets;
    fprintf(t, "model: %s L=%d C=%d; units per stage", kt_model_kind_name(sp->model.kind),
            sp->model.layers, sp->model.hidden);
    int S = kt_schedule_stages(sc);
    for (int i = 0; i < S && i < 16; i++) fprintf(t, "%s%d", i ? "," : " ", off[i + 1] - off[i]);
    fputs(S > 16 ? ",...\n" : "\n", t);
  }
  if (!sp->synthetic) print_gemm(t, &o->gemm);
  if (sp->resume) train_resume_notes(o, &r->resume, t);
  if (r->info.compute_threads > r->info.cores)
    fprintf(t,
            "oversubscribed: %d compute threads (ranks x threads per rank) on %d cores: ops "
            "wait for one\n",
            r->info.compute_threads, r->info.cores);
  fclose(t);
  int width = r->live ? r->lv.width - 1 : 0;
  for (char *line = text; line && *line;) {
    char *nl = strchr(line, '\n');
    int n = nl ? (int)(nl - line) : (int)strlen(line);
    fprintf(r->talk, "%.*s\n", width > 0 && n > width ? width : n, line);
    line = nl ? nl + 1 : line + n;
  }
  free(text);
}

static int say_stopped(train_run *r, int sig, int done) {
  const kt_session_params *sp = &r->o->sp;
  if (!r->talk) return 128 + sig;
  fprintf(stderr, "kaiten: stopped by %s after step %d of %d; ", cli_signal_name(sig), done,
          sp->steps);
  if (!sp->run_dir) fprintf(stderr, "no --run-dir, so nothing was saved\n");
  else if (sp->synthetic)
    fprintf(stderr, "a synthetic run has no parameters to checkpoint; its metrics are in %s\n",
            sp->run_dir);
  else if (sp->use_mpi)
    fprintf(stderr, "resume with: mpirun -np %d %s train --transport mpi --resume %s --steps %d\n",
            r->info.world_size, cli_program, sp->run_dir, sp->steps);
  else
    fprintf(stderr, "resume with: %s train --resume %s --steps %d\n", cli_program, sp->run_dir,
            sp->steps);
  return 128 + sig;
}

static int report_failure(train_run *r, kt_status st, kt_error *err) {
  const kt_session_info *in = &r->info;
  kt_session_failure why = kt_session_failed(r->ss);
  if (why == KT_SESSION_SAVE_INIT) /* rank 0 says why */
    return in->world_rank == 0 ? cli_fail(st, err) : kt_status_exit_code(st);
  if (why == KT_SESSION_NONFINITE) add_hint(err, "; --skip-nonfinite skips such steps instead");
  if (in->use_mpi && why == KT_SESSION_FAILED_ELSEWHERE && in->world_rank != 0)
    return 1;        /* another rank failed and says why */
  if (in->use_mpi) { /* name this rank and its stage, then take the whole job down */
    fprintf(stderr, "kaiten: rank %d (stage %d): %s\n", in->world_rank,
            kt_rank_chunk_stage(in->schedule, in->world_rank / r->o->sp.data_parallel, 0),
            err->msg);
    fflush(stderr);
    kt_transport_mpi_abort_job(1);
  }
  return cli_fail(st, err);
}

/* The final report (rank 0), as --format asks. */
static int report(train_run *r, const kt_session_result *res) {
  const train_opts *o = r->o;
  kt_buf out;
  kt_buf_init(&out);
  /* JSON: each rank's predicted peak beside the measured (the text report's table) */
  double *pred = NULL;
  kt_error e2;
  if (!strcmp(o->format, "json") && !o->sp.synthetic &&
      (pred = kt_calloc((size_t)r->info.schedule->p, sizeof *pred)) &&
      kt_session_predict_memory(r->ss, pred, &e2))
    free(pred), pred = NULL;
  train_final_report(o, &r->info, res, pred, &out);
  free(pred);
  if (strcmp(o->format, "json") && strcmp(o->format, "chrome") && !o->sp.synthetic)
    train_memory_report(o, r->ss, res, &out);
  int rc = cli_emit(o->output, &out, 1);
  kt_buf_free(&out);
  if (o->sp.run_dir && r->talk)
    fprintf(r->talk, "run directory: %s%s\n", o->sp.run_dir,
            o->sp.synthetic ? " (a synthetic run has no parameters to checkpoint)" : "");
  return rc;
}

static int run_steps(train_run *r) {
  const train_opts *o = r->o;
  kt_error err = {{0}};
  int rc = 0;
  kt_status st = kt_session_run(r->ss, &err);
  train_serve_stop(r->srv, st == KT_OK, o->sp.run_dir);
  r->srv = NULL;
  const kt_session_result *res = kt_session_get_result(r->ss);
  if (st) rc = report_failure(r, st, &err);
  else if (res->train.n_losses > 0 && r->info.world_rank == 0) rc = report(r, res);
  if (!rc && res->stop) rc = say_stopped(r, res->stop, res->steps_done);
  return rc;
}

/* The session opened: say what runs, then run it with signals asking it to
 * stop. */
static int train_opened(train_run *r) {
  train_opts *o = r->o;
  kt_session_get_info(r->ss, &r->info);
  r->talk = r->info.world_rank == 0 ? (!strcmp(o->format, "text") ? stdout : stderr) : NULL;
  int under_mpirun = getenv("OMPI_COMM_WORLD_SIZE") != NULL;
  r->live =
      r->talk == stdout && o->live && cli_use_color(NULL) && (!under_mpirun || o->live_forced);
  if (r->live) cli_live_init(&r->lv, r->talk);
  if (!o->sp.synthetic) find_gemm(r);
  if (r->talk) print_start(r);
  train_serve_announce(r->srv, o);
  r->hang = cli_hang_install(kt_session_runtime(r->ss)); /* fault tests only */
  cli_signals_install();
  if (r->info.use_mpi) cli_signals_set_rank(r->info.world_rank, o->sp.data_parallel);
  int rc = run_steps(r);
  cli_signals_restore();
  cli_hang_remove(kt_session_runtime(r->ss), r->hang);
  return rc;
}

int train_session(train_opts *o) {
  train_run r = {.o = o};
  int rc = check_launch(o);
  if (!rc && o->sp.resume) rc = train_resume_setup(o, &r.resume);
  if (!rc) {
    o->sp.on_step = on_step, o->sp.should_stop = should_stop, o->sp.on_note = on_note;
    o->sp.on_ready = on_ready, o->sp.render_timelines = kt_render_run_timelines;
    o->sp.ctx = &r;
    kt_error err = {{0}};
    kt_status st = kt_session_open(&o->sp, &r.ss, &err);
    rc = st ? open_failed(&r, st, &err) : train_opened(&r);
  }
  if (r.srv) kt_server_destroy(r.srv, "stopped", 0); /* the open failed after it started */
  kt_session_close(r.ss);
  if (o->sp.resume) train_resume_free(&r.resume);
  if (o->have_file) kt_result_free(&o->file);
  free(o->syn_mb_scale);
  o->syn_mb_scale = NULL;
  free(r.losses);
  return rc;
}
