/* kt_session: a whole training run (kaiten/train.h). Opening builds the
 * schedule, the runtime on threads or MPI, the data and the cluster's links,
 * loads the checkpoint when resuming and opens the run directory; running
 * is session_run.c, the run directory's records session_record.c. */
#define _GNU_SOURCE /* sched_getaffinity */
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kaiten/plan.h"
#include "train/session_internal.h"

kt_session_params kt_session_default_params(void) {
  kt_session_params p;
  memset(&p, 0, sizeof p);
  kt_model_config_default(&p.model, KT_MODEL_GPT);
  p.syn_tf_ms = p.syn_tb_ms = p.syn_tw_ms = 2;
  p.syn_act_bytes = 65536;
  p.data_seed = 1;
  p.kind = KT_SCHED_1F1B;
  p.p = 4, p.m = 8;
  p.micro_batch = 4, p.grad_accum = 1, p.data_parallel = 1;
  kt_optim_config_default(&p.optim);
  p.optim.lr = 3e-3;
  p.optim.grad_clip = 1.0;
  p.steps = 20;
  p.val_every = 10, p.val_batches = 2;
  p.timeout = 60;
  p.pin_threads = 1;
  p.slow_rank = -1, p.slow_factor = 1;
  p.nan_step = p.nan_rank = -1;
  p.keep_checkpoints = KT_SESSION_KEEP_CHECKPOINTS;
  p.attn_share = -1; /* the model's FLOPs, then calibrated */
  return p;
}

void kt__session_note(const kt_session *s, kt_note_kind kind, const char *name, long long count,
                      const char *fmt, ...) {
  if (!s->p.on_note) return;
  char text[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  kt_note n = {.kind = kind, .name = name, .count = count, .text = text};
  s->p.on_note(s->p.ctx, &n);
}

/* A model that is not the built-in one keeps no units: no partition,
 * checkpoints or activation measurement. */
static int has_units(const kt_session_params *p) { return !p->synthetic && !p->make_chunk; }

static kt_status check_params(const kt_session_params *p, kt_error *err) {
  if (p->steps < 1) return kt_fail(err, KT_EINVAL, "steps %d: expected at least 1", p->steps);
  if (p->synthetic && p->make_chunk)
    return kt_fail(err, KT_EINVAL, "a synthetic run has no model: not one of the caller's own too");
  if (p->make_chunk && !p->data)
    return kt_fail(err, KT_EINVAL, "a model of the caller's own needs the caller's data source");
  if (!has_units(p) && (p->resume || p->save_init))
    return kt_fail(err, KT_EINVAL, "a %s model has no parameters to %s",
                   p->synthetic ? "synthetic" : "caller's own", p->resume ? "resume" : "save");
  if (!has_units(p) && p->partition)
    return kt_fail(err, KT_EINVAL,
                   "a partition splits the built-in model's layers; this run has none");
  if (!has_units(p) && p->mem_limit.kind == KT_MEM_BYTES)
    return kt_fail(err, KT_EINVAL,
                   "a memory limit in bytes needs the built-in model's activation "
                   "sizes; give it in activation units or as a fraction");
  int limited = p->mem_limit.kind != KT_MEM_UNITS || p->mem_limit.value > 0;
  if (limited && p->schedule)
    return kt_fail(err, KT_EINVAL,
                   "a schedule of the caller's cannot keep to a memory limit: its "
                   "order sets its memory (zb-auto and zbv-auto search for an order within one)");
  return kt_gen_check_mem_limit(p->kind, limited ? 1.0 : 0.0, err);
}

/* Resuming: the run read back, and what it must hold to go on. */
static kt_status read_resume(kt_session *s, kt_error *err) {
  const char *dir = s->p.resume;
  kt_status st = kt_session_resume_read(dir, &s->resume, err);
  if (st) {
    if (st == KT_EBUSY) s->failed = KT_SESSION_RUN_DIR_BUSY;
    return st;
  }
  s->have_resume = 1;
  const kt_session_resume *r = &s->resume;
  if (r->run.n_segments < 1)
    return kt_fail(err, KT_EINVAL, "the run in '%s': its config.json names no layout", dir);
  if (!strcmp(r->run.model, "synthetic"))
    return kt_fail(err, KT_EINVAL, "the run in '%s' is synthetic: it has no parameters to resume",
                   dir);
  if (!r->checkpoint)
    return kt_fail(err, KT_EINVAL, "the run in '%s' has a config.json but no checkpoint", dir);
  if (r->meta.step >= s->p.steps)
    return kt_fail(err, KT_EINVAL, "the run in '%s' is already at step %d of %d", dir, r->meta.step,
                   s->p.steps);
  s->p.run_dir = dir;
  s->first_step = r->meta.step;
  return KT_OK;
}

static void announce_search(const char *schedule, size_t actions, void *ctx) {
  kt__session_note(ctx, KT_NOTE_LONG_SEARCH, schedule, (long long)actions,
                   "%s: tuning its order to the costs over %zu actions (seconds per million)",
                   schedule, actions);
}

/* A synthetic run's orders are made for its own costs (one rank's share:
 * V chunks run cost/V each; per-stage lists as they are). */
static void synthetic_costs(const kt_session_params *p, int v, kt_costs *gen) {
  if (!p->synthetic) return;
  gen->tf = p->syn_tf_ms / v, gen->tb = p->syn_tb_ms / v, gen->tw = p->syn_tw_ms / v;
  if (!p->syn_stage_ms || p->syn_stages != p->p * v) return;
  double *a = kt_calloc(3 * (size_t)p->syn_stages, sizeof *a); /* three lists, one allocation */
  if (!a) return;
  for (int st = 0; st < p->syn_stages; st++)
    for (int k = 0; k < 3; k++) a[k * p->syn_stages + st] = p->syn_stage_ms[3 * st + k];
  gen->n_stages = p->syn_stages;
  gen->stage_tf = a, gen->stage_tb = a + p->syn_stages, gen->stage_tw = a + 2 * p->syn_stages;
}

/* The compute schedule: the caller's (and its program), or kind generated
 * on the built-in model's own memory (each stage's measured M_B and M_W:
 * what zb-auto, zbv-auto, v-half, v-min and interleaved-zb keep within)
 * with unit times; a memory limit is on those bytes. */
static kt_status build_schedule(kt_session *s, kt_error *err) {
  const kt_session_params *p = &s->p;
  kt_status st;
  if (p->schedule) {
    st = kt_schedule_copy(&s->sched, p->schedule, err);
    if (!st && p->program) st = kt_schedule_copy(&s->program, p->program, err);
    if (!st && has_units(p))
      st = kt__session_memory(s, kt_schedule_stages(&s->sched), s->sched.p, s->sched.m, err);
    return st;
  }
  int K = p->model.seq_chunks;
  if (K > 1) { /* micro-batches in chunks along the sequence: Seq1F1B */
    if (p->kind != KT_SCHED_1F1B || p->v > 1)
      return kt_fail(err, KT_EINVAL,
                     "--seq-chunks %d runs 1f1b's order over the chunks (Seq1F1B), "
                     "not %s",
                     K, kt_gen_kind_name(p->kind));
    /* 1F1B's peak: on the whole micro-batches, unchunked */
    if (has_units(p) && (st = kt__session_memory(s, p->p, p->p, p->m, err))) return st;
    return kt__seq1f1b(&s->sched, p->p, p->m, K, err);
  }
  int v = p->v > 0 ? p->v : kt_gen_default_chunks(p->kind);
  if (has_units(p) && (st = kt__session_memory(s, p->p * v, p->p, p->m, err))) return st;
  kt_costs gen; /* unit times, the model's bytes (borrowed: never freed here) */
  kt_costs_default(&gen);
  if (s->mem.n_stages) {
    gen.n_stages = s->mem.n_stages;
    gen.stage_mem_act = s->mem.stage_mem_act, gen.stage_mem_wgrad = s->mem.stage_mem_wgrad;
  }
  double limit;
  if ((st = kt__session_mem_limit(s, v, &gen, &limit, err))) return st;
  s->gen_limit = limit;
  synthetic_costs(p, v, &gen);
  kt_gen_params gp = {.p = p->p,
                      .m = p->m,
                      .v = p->v,
                      .costs = &gen,
                      .mem_limit = limit,
                      .on_long_search = announce_search,
                      .ctx = s};
  st = kt_generate(p->kind, &gp, &s->sched, err);
  if (p->synthetic) free(gen.stage_tf); /* synthetic_costs' (the model's bytes stay borrowed) */
  return st;
}

static void runtime_config(const kt_session *s, kt_runtime_config *rc) {
  const kt_session_params *p = &s->p;
  kt_runtime_config_default(rc);
  rc->schedule = s->program.ranks ? &s->program : &s->sched;
  rc->data_parallel = p->data_parallel, rc->grad_accum = p->grad_accum;
  rc->micro_batch = p->micro_batch;
  rc->model = p->model;
  rc->partition = s->partition;
  rc->make_chunk = p->make_chunk, rc->chunk_ctx = p->chunk_ctx;
  rc->optim = p->optim;
  rc->synthetic = p->synthetic;
  /* synthetic costs are one rank's share, as in sim and compare */
  int v = s->sched.v > 0 ? s->sched.v : 1;
  rc->syn_tf_ms = p->syn_tf_ms / v, rc->syn_tb_ms = p->syn_tb_ms / v,
  rc->syn_tw_ms = p->syn_tw_ms / v;
  rc->syn_act_bytes = p->syn_act_bytes;
  rc->syn_mb_scale = p->syn_mb_scale;
  rc->syn_grad_bytes = p->syn_grad_bytes;
  rc->syn_stage_ms = p->syn_stage_ms, rc->syn_units = p->syn_units;
  rc->faults = p->faults;
  rc->keep_pinned = p->autopilot; /* it moves work away from a crowded core itself */
  rc->timeout = p->timeout;
  rc->pin_threads = p->pin_threads;
  rc->slow_rank = p->slow_rank, rc->slow_factor = p->slow_factor;
  rc->step_sync = p->step_sync;
  rc->nan_step = p->nan_step, rc->nan_rank = p->nan_rank;
}

/* The cores this process may run on (all of the machine's under MPI:
 * mpirun may bind each process to one while its neighbours share them). */
static long cores_available(int use_mpi) {
  cpu_set_t set;
  if (!use_mpi && !sched_getaffinity(0, sizeof set, &set) && CPU_COUNT(&set) > 0)
    return CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? n : 1;
}

/* The ranks of this process share its cores; more compute threads than
 * cores is said once (ops then wait for a core: core_wait). */
static void set_blas_threads(kt_session *s, long ranks_here) {
  const kt_session_params *p = &s->p;
  long cores = cores_available(p->use_mpi);
  int blas = p->blas_threads > 0  ? p->blas_threads
             : cores > ranks_here ? (int)(cores / ranks_here)
                                  : 1;
  if (p->blas_threads >= 0) kt_blas_set_threads(blas);
  else blas = kt_blas_threads();
  if (p->synthetic) blas = 0; /* sleeps: no compute threads */
  s->cores = (int)cores, s->compute_threads = (int)(ranks_here * blas);
  if (s->compute_threads > cores && s->world_rank == 0) /* one note per job */
    kt__session_note(
        s, KT_NOTE_OVERSUBSCRIBED, NULL, s->compute_threads,
        "%ld rank%s x %d BLAS thread%s = %d compute threads on %ld cores: ops wait for "
        "a core (core_wait), so steps are slower and the bubble larger than the "
        "schedule's",
        ranks_here, ranks_here == 1 ? "" : "s", blas, blas == 1 ? "" : "s", s->compute_threads,
        cores);
}

/* Once the model is in memory (the room left is known): the address space
 * for the buffers of this process's compute threads (ranks times threads). */
static kt_status check_blas_room(const kt_session *s, int ranks_in_process, kt_error *err) {
  if (s->p.synthetic) return KT_OK; /* sleeps: no matrix products */
  return kt_blas_check_room(ranks_in_process * kt_blas_threads(), err);
}

/* The runtime on MPI (one rank in this process) or threads (all of them). */
static kt_status create_runtime(kt_session *s, const kt_runtime_config *rc, kt_error *err) {
  const kt_session_params *p = &s->p;
  int P = s->sched.p, D = p->data_parallel;
  if (!p->use_mpi) {
    set_blas_threads(s, (long)P * D);
    s->world_size = P * D;
    kt_status st = kt_runtime_create_threads(rc, &s->rt, err);
    return st ? st : check_blas_room(s, P * D, err);
  }
  int rank, world;
  kt_status st = kt_transport_mpi_init(&rank, &world, err);
  if (!st && world != P * D) s->failed = KT_SESSION_WORLD_SIZE;
  if (!st) st = kt_transport_mpi_create(P, D, p->timeout, &s->mpi_t, err);
  if (st) return st;
  s->world_rank = kt_transport_rank(s->mpi_t), s->world_size = kt_transport_world(s->mpi_t);
  set_blas_threads(s, kt_transport_mpi_local_size()); /* the processes of a machine share it */
  if ((st = kt_runtime_create(rc, s->mpi_t, &s->world_rank, 1, &s->rt, err))) return st;
  return check_blas_room(s, 1, err); /* this process runs one rank */
}

/* The cluster spec's link classes, with this job's ranks on their nodes
 * (MPI: the machines' names; threads: devices_per_node consecutive ranks
 * per node). */
static kt_status cluster_links(kt_session *s, kt_error *err) {
  const kt_session_params *p = &s->p;
  if (!p->cluster) return KT_OK;
  kt_plan_cluster c;
  kt_plan_cluster_default(&c);
  kt_status st = kt_plan_cluster_load(p->cluster, &c, err);
  if (!st) st = kt_plan_cluster_check(&c, err);
  kt_link_classes lc = {.intra_latency = c.intra_latency,
                        .intra_bw = c.intra_bw,
                        .inter_latency = c.inter_latency,
                        .inter_bw = c.inter_bw,
                        .inter_burst = c.inter_burst};
  int world = s->sched.p * p->data_parallel, *nodes = NULL;
  if (!st && s->mpi_t) {
    nodes = kt_calloc((size_t)world, sizeof *nodes);
    st = nodes ? kt_transport_mpi_nodes(s->mpi_t, nodes, err)
               : kt_fail(err, KT_ENOMEM, "out of memory");
  }
  if (!st)
    st = kt_links_create(&lc, s->sched.p, p->data_parallel, nodes, c.devices_per_node, &s->links,
                         err);
  free(nodes);
  if (!st) return KT_OK;
  s->failed = KT_SESSION_CLUSTER;
  kt_error why = *err; /* not formatted into itself */
  return kt_fail(err, st, "%s: %s", p->cluster, why.msg);
}

/* The runtime, the cluster's links, the resumed checkpoint, the data. */
static kt_status build_runtime(kt_session *s, kt_error *err) {
  kt_session_params *p = &s->p;
  int S = kt_schedule_stages(&s->sched);
  kt_status st;
  if (p->partition) {
    if (!(s->partition = kt_calloc((size_t)S, sizeof *s->partition)))
      return kt_fail(err, KT_ENOMEM, "out of memory");
    if ((st = kt_partition_parse(p->partition, S, kt_model_units(&p->model), s->partition, err)))
      return st;
  }
  kt_runtime_config rc;
  runtime_config(s, &rc);
  if ((st = create_runtime(s, &rc, err))) {
    if (s->failed == KT_SESSION_FAILED && has_units(p) && S > kt_model_units(&p->model))
      s->failed = KT_SESSION_TOO_FEW_LAYERS;
    return st;
  }
  if ((st = cluster_links(s, err))) return st;
  if (s->have_resume &&
      (st = kt_checkpoint_load(s->rt, s->resume.checkpoint, &s->resume.meta, err)))
    return st;
  if (p->data || !has_units(p)) return KT_OK;
  if (p->model.kind == KT_MODEL_MLP)
    return kt_data_mlp_create(p->model.hidden, p->data_seed, &s->data, err);
  if (p->doc_lengths) return kt__session_docs_open(s, err);
  return kt_data_text_source_create(p->data_path, p->model.seq_len, p->micro_batch, p->data_seed,
                                    &s->data, err);
}

/* The caller's on_ready, between the runtime and the run directory. */
static kt_status ready(kt_session *s, kt_error *err) {
  if (!s->p.on_ready) return KT_OK;
  kt_session_info info;
  kt_session_get_info(s, &info);
  return s->p.on_ready(s->p.ctx, &info, err);
}

kt_status kt_session_open(const kt_session_params *params, kt_session **out, kt_error *err) {
  kt_session *s = kt_calloc(1, sizeof *s);
  *out = s;
  if (!s) return kt_fail(err, KT_ENOMEM, "out of memory");
  s->p = *params;
  s->failed = KT_SESSION_FAILED;
  s->world_size = 1;
  kt_costs_default(&s->mem);
  kt_status st = check_params(&s->p, err);
  if (!st && s->p.resume) st = read_resume(s, err);
  if (!st) st = build_schedule(s, err);
  if (!st) st = kt_sim_check_fault_links(s->p.faults, &s->sched, err);
  /* a synthetic cost list is one entry per stage of the schedule that runs */
  if (!st && s->p.syn_stage_ms && s->p.syn_stages != kt_schedule_stages(&s->sched))
    st = kt_fail(err, KT_EINVAL, "--tf/--tb/--tw list %d stages; the pipeline has %d (P=%d x V=%d)",
                 s->p.syn_stages, kt_schedule_stages(&s->sched), s->sched.p,
                 s->sched.v > 0 ? s->sched.v : 1);
  if (!st && has_units(&s->p)) st = kt__session_memory_fits(s, err);
  if (!st) st = build_runtime(s, err);
  if (!st) st = ready(s, err);
  if (!st) st = kt__session_open_run_dir(s, err);
  /* under MPI, rank 0's run-directory check decides for every rank */
  if (s->rt && kt__session_agree(s, st ? KT__STOP_FAILED : 0) && !st) {
    s->failed = KT_SESSION_FAILED_ELSEWHERE;
    st = kt_fail(err, KT_EPEER, "another rank failed to open the session");
  }
  if (st) return st;
  s->meta = (kt_checkpoint_meta){.decay_steps = s->p.optim.decay_steps,
                                 .warmup_steps = s->p.optim.warmup_steps,
                                 .lr = s->p.optim.lr,
                                 .min_lr_ratio = s->p.optim.min_lr_ratio,
                                 .data_seed = s->p.data_seed,
                                 .model = s->p.model,
                                 .optim = s->p.optim.kind};
  s->failed = KT_SESSION_OK;
  s->opened = 1;
  return KT_OK;
}

void kt_session_close(kt_session *s) {
  if (!s) return;
  if (s->data) s->data->destroy(s->data);
  kt_runtime_destroy(s->rt);
  kt_links_destroy(s->links);
  kt_transport_mpi_destroy(s->mpi_t);
  if (s->p.use_mpi) kt_transport_mpi_finalize();
  kt_rundir_destroy(s->rd);
  kt_run_config_free(&s->cfg);
  kt_schedule_free(&s->sched);
  kt_schedule_free(&s->program);
  if (s->have_resume) kt_session_resume_free(&s->resume);
  if (s->result.train.losses) kt_train_result_free(&s->result.train);
  free(s->partition);
  free(s->seg_partition);
  free(s->ranks);
  free(s->idle);
  kt_schedule_free(&s->rounds);
  kt_costs_free(&s->mem);
  kt__session_autopilot_free(s);
  free(s);
}

kt_session_failure kt_session_failed(const kt_session *s) {
  return s ? s->failed : KT_SESSION_FAILED;
}

void kt_session_get_info(const kt_session *s, kt_session_info *out) {
  *out = (kt_session_info){.schedule = &s->sched,
                           .use_mpi = s->p.use_mpi,
                           .world_rank = s->world_rank,
                           .world_size = s->world_size,
                           .first_step = s->first_step,
                           .run_dir = s->p.run_dir,
                           .checkpoint = s->have_resume ? s->resume.checkpoint : NULL};
  if (s->rt && has_units(&s->p)) out->unit_offsets = kt_runtime_unit_offsets(s->rt);
  out->mem_stages = s->mem.n_stages;
  out->mem_act_bytes = s->mem.stage_mem_act, out->mem_wgrad_bytes = s->mem.stage_mem_wgrad;
  out->mem_transient_bytes = s->mem.stage_mem_transient;
  out->peak_1f1b = s->peak_1f1b;
  out->mem_limit_bytes = kt__session_limit_bytes(s);
  out->cores = s->cores, out->compute_threads = s->compute_threads;
}

kt_runtime *kt_session_runtime(kt_session *s) { return s->rt; }

const kt_session_result *kt_session_get_result(const kt_session *s) { return &s->result; }
