/* Runtime set-up: builds each local rank's chunks and buffers (the steps
 * run in driver.c). */
#define _GNU_SOURCE /* sched_getaffinity, pthread_setaffinity_np */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kaiten/model_impl.h"
#include "runtime/internal.h"

void kt_runtime_config_default(kt_runtime_config *c) {
  memset(c, 0, sizeof *c);
  c->data_parallel = 1;
  c->grad_accum = 1;
  c->micro_batch = 1;
  kt_model_config_default(&c->model, KT_MODEL_MLP);
  kt_optim_config_default(&c->optim);
  c->timeout = 60;
  c->pin_threads = 1;
  c->slow_rank = -1;
  c->nan_step = c->nan_rank = -1;
  c->slow_factor = 1;
}

/* An empty chunk slot: a rank of an uneven placement holds fewer stages than
 * V. It has no parameters and no actions run on it; the per-chunk loops
 * (zeroing, the optimizer, memory sums) pass over it. */
static kt_status no_stage(kt_chunk *c, kt_error *err) {
  (void)c;
  return kt_fail(err, KT_ERUNTIME, "an action ran on an empty chunk slot");
}
static kt_status empty_forward(kt_chunk *c, int mb, const kt_microbatch *data, const float *in,
                               float *out, double *loss, kt_error *err) {
  (void)mb, (void)data, (void)in, (void)out, (void)loss;
  return no_stage(c, err);
}
static kt_status empty_backward_input(kt_chunk *c, int mb, const kt_microbatch *data,
                                      const float *dout, float *din, kt_error *err) {
  (void)mb, (void)data, (void)dout, (void)din;
  return no_stage(c, err);
}
static kt_status empty_backward_weight(kt_chunk *c, int mb, kt_error *err) {
  (void)mb;
  return no_stage(c, err);
}
static void empty_destroy(kt_chunk *c) {
  free(c->params);
  free(c->grads);
  free(c->unit_offset);
  free(c);
}
static const kt_chunk_ops empty_ops = {empty_forward, empty_backward_input, empty_backward_weight,
                                       empty_destroy, NULL};

static kt_status empty_chunk_create(const kt_runtime_config *cfg, kt_chunk **out, kt_error *err) {
  kt_chunk *c = calloc(1, sizeof *c);
  if (c) {
    c->ops = &empty_ops;
    c->cfg = cfg->model;
    c->micro_batch = cfg->micro_batch;
    c->params = calloc(1, sizeof(float)); /* never NULL: loops memset and scan them */
    c->grads = calloc(1, sizeof(float));
    c->unit_offset = calloc(1, sizeof *c->unit_offset);
  }
  if (!c || !c->params || !c->grads || !c->unit_offset) {
    if (c) empty_destroy(c);
    return kt_fail(err, KT_ENOMEM, "out of memory");
  }
  *out = c;
  return KT_OK;
}

/* A chunk of the caller's own model (kt_runtime_config.make_chunk): what
 * the runtime relies on is checked once here, so a bad factory fails with
 * a reason instead of corrupting a step. */
static kt_status make_own_chunk(kt_runtime *rt, int stage, kt_chunk **out, kt_error *err) {
  *out = NULL;
  kt_chunk *c = NULL;
  kt_status st =
      rt->cfg.make_chunk(rt->cfg.chunk_ctx, stage, rt->S, rt->cfg.micro_batch, rt->M, &c, err);
  if (st) return st;
  const char *bad = !c                        ? "no chunk"
                    : !c->ops                 ? "no operations"
                    : !c->ops->destroy        ? "no destroy"
                    : !c->params || !c->grads ? "no parameter or gradient buffer"
                    : c->is_first != (stage == 0) || c->is_last != (stage == rt->S - 1)
                        ? "is_first or is_last does not match its place in the pipeline"
                        : NULL;
  if (bad && c && c->ops && c->ops->destroy) kt_chunk_destroy(c);
  if (bad) return kt_fail(err, KT_EINVAL, "the chunk made for stage %d: %s", stage, bad);
  *out = c;
  return KT_OK;
}

static void worker_free(kt__worker *w, int V, int SM) {
  if (w->chunk)
    for (int c = 0; c < V; c++) kt_chunk_destroy(w->chunk[c]);
  if (w->opt_state)
    for (int c = 0; c < V; c++) free(w->opt_state[c]);
  if (w->decay)
    for (int c = 0; c < V; c++) free(w->decay[c]);
  free(w->decay);
  if (w->act_handoff)
    for (int i = 0; i < SM; i++) free(w->act_handoff[i]), free(w->grad_handoff[i]);
  if (w->outbox)
    for (size_t i = 0; i < 2 * (size_t)V * (size_t)w->rt->M; i++) free(w->outbox[i]);
  free(w->outbox);
  free(w->recv_event);
  free(w->plan);
  free(w->chunk);
  free(w->opt_state);
  free(w->opt_n);
  free(w->in_buf);
  free(w->out_buf);
  free(w->dout_buf);
  free(w->din_buf);
  free(w->stamp_buf);
  free(w->act_handoff);
  free(w->grad_handoff);
  for (int k = 0; k < KT__RING; k++) kt_timeline_free(&w->ev[k]);
  kt__step_free(w);
}

kt_status kt__chunk_for(kt_runtime *rt, int stage, int first, int n, kt_chunk **out,
                        kt_error *err) {
  if (stage < 0) return empty_chunk_create(&rt->cfg, out, err);
  if (rt->cfg.synthetic)
    return kt__synthetic_chunk_create(&rt->cfg, stage, rt->S, first, n, rt->M, out, err);
  if (rt->cfg.make_chunk) return make_own_chunk(rt, stage, out, err);
  return kt_chunk_create(&rt->cfg.model, first, n, rt->cfg.micro_batch, rt->M, out, err);
}

kt_status kt__worker_buffers(kt__worker *w, kt_error *err) {
  size_t most = 0;
  for (int c = 0; c < w->rt->V; c++) {
    const kt_chunk *ch = w->chunk[c];
    size_t e = ch->in_elems > ch->out_elems ? ch->in_elems : ch->out_elems;
    if (e > most) most = e;
  }
  if (most <= w->boundary_elems && w->in_buf) return KT_OK;
  w->boundary_elems = most;
  size_t bytes = (most + 16) * sizeof(float);
  float **bufs[] = {&w->in_buf, &w->out_buf, &w->dout_buf, &w->din_buf};
  int fail = 0;
  for (int i = 0; i < 4; i++) {
    free(*bufs[i]);
    fail |= !(*bufs[i] = malloc(bytes));
  }
  free(w->stamp_buf); /* a stamped message: the tensor and when it is due */
  fail |= !(w->stamp_buf = malloc(bytes + sizeof(double)));
  return fail ? kt_fail(err, KT_ENOMEM, "out of memory for boundary buffers") : KT_OK;
}

static kt_status worker_init(kt_runtime *rt, kt__worker *w, kt_transport *t, int world_rank,
                             kt_error *err) {
  memset(w, 0, sizeof *w);
  w->rt = rt;
  w->t = t;
  w->world_rank = world_rank;
  w->stage_rank = world_rank / rt->D;
  w->replica = world_rank % rt->D;
  size_t SM = (size_t)rt->S * rt->M;
  w->chunk = kt_calloc((size_t)rt->V, sizeof *w->chunk);
  w->opt_state = kt_calloc((size_t)rt->V, sizeof *w->opt_state);
  w->opt_n = kt_calloc((size_t)rt->V, sizeof *w->opt_n);
  w->act_handoff = kt_calloc(SM, sizeof *w->act_handoff);
  w->grad_handoff = kt_calloc(SM, sizeof *w->grad_handoff);
  size_t slots = 2 * (size_t)rt->V * (size_t)rt->M;
  w->outbox = kt_calloc(slots, sizeof *w->outbox);
  w->recv_event = kt_calloc(slots, sizeof *w->recv_event);
  for (int k = 0; k < KT__RING; k++) kt_timeline_init(&w->ev[k], rt->P, "s", "B");
  w->events = &w->ev[0];
  w->pending = -1;
  if (!w->chunk || !w->opt_state || !w->opt_n || !w->act_handoff || !w->grad_handoff ||
      !w->outbox || !w->recv_event)
    return kt_fail(err, KT_ENOMEM, "out of memory");
  for (int c = 0; c < rt->V; c++) {
    int stage = kt_rank_chunk_stage(&rt->sched_copy, w->stage_rank, c);
    int first = stage >= 0 ? rt->unit_offset[stage] : 0;
    int n = stage >= 0 ? rt->unit_offset[stage + 1] - first : 0;
    kt_status st = kt__chunk_for(rt, stage, first, n, &w->chunk[c], err);
    if (st) return st;
  }
  kt_status st = kt__worker_buffers(w, err);
  if (!st) st = kt__optim_alloc_state(w, err);
  if (!st) st = kt__step_alloc(w, err);
  return st ? st : kt__worker_resolve(w, err);
}

static kt_status check_config(const kt_runtime_config *cfg, kt_error *err) {
  if (!cfg->schedule) return kt_fail(err, KT_EINVAL, "no schedule");
  if (cfg->data_parallel < 1 || cfg->data_parallel > 4096)
    return kt_fail(err, KT_EINVAL, "data-parallel degree D=%d: expected 1..4096",
                   cfg->data_parallel);
  if (cfg->grad_accum < 1 || cfg->grad_accum > 65535)
    return kt_fail(err, KT_EINVAL, "gradient accumulation K=%d: expected 1..65535",
                   cfg->grad_accum);
  if (cfg->micro_batch < 1)
    return kt_fail(err, KT_EINVAL, "micro-batch size b=%d: expected at least 1", cfg->micro_batch);
  if (cfg->slow_rank >= cfg->schedule->p)
    return kt_fail(err, KT_EINVAL, "slow rank %d: the pipeline has ranks 0..%d", cfg->slow_rank,
                   cfg->schedule->p - 1);
  if (cfg->slow_rank >= 0 && !(cfg->slow_factor >= 1 && cfg->slow_factor <= 1000))
    return kt_fail(err, KT_EINVAL, "slow factor %g: expected 1..1000", cfg->slow_factor);
  if (cfg->synthetic) {
    if (cfg->syn_tf_ms < 0 || cfg->syn_tb_ms < 0 || cfg->syn_tw_ms < 0)
      return kt_fail(err, KT_EINVAL, "synthetic costs must be >= 0 ms");
    for (int i = 0; cfg->syn_stage_ms && i < 3 * kt_schedule_stages(cfg->schedule); i++)
      if (!(cfg->syn_stage_ms[i] >= 0 && cfg->syn_stage_ms[i] <= 1e6))
        return kt_fail(err, KT_EINVAL, "synthetic stage cost %g ms: expected 0..1e6",
                       cfg->syn_stage_ms[i]);
    if (cfg->syn_units < 0 || cfg->syn_units > 65536 || (cfg->syn_units && cfg->syn_stage_ms))
      return kt_fail(err, KT_EINVAL,
                     "synthetic units %d: expected 0..65536, without per-stage costs",
                     cfg->syn_units);
    for (int k = 0; cfg->syn_mb_scale && k < cfg->schedule->m; k++)
      if (!(cfg->syn_mb_scale[k] >= 0 && cfg->syn_mb_scale[k] <= 1e6))
        return kt_fail(err, KT_EINVAL, "synthetic micro-batch %d: scale %g must be in 0..1e6", k,
                       cfg->syn_mb_scale[k]);
    return KT_OK;
  }
  return cfg->make_chunk ? KT_OK : kt_model_config_check(&cfg->model, err);
}

static int has_p2p(const kt_schedule *s) {
  for (int r = 0; r < s->p; r++)
    for (size_t i = 0; i < s->ranks[r].n; i++)
      if (kt_op_is_p2p(s->ranks[r].actions[i].op)) return 1;
  return 0;
}

/* The compute actions of a lowered program (flags kept). */
static kt_status compute_of(const kt_schedule *program, kt_schedule *out, kt_error *err) {
  kt_status st = kt_schedule_init_like(out, program, program->m, err);
  for (int r = 0; r < program->p && !st; r++)
    for (size_t i = 0; i < program->ranks[r].n && !st; i++) {
      const kt_action *a = &program->ranks[r].actions[i];
      if (a->op >= KT_OP_COUNT) continue;
      if (kt_schedule_push(out, r, a->stage, (kt_op)a->op, a->mb))
        st = kt_fail(err, KT_ENOMEM, "out of memory");
      else out->ranks[r].actions[out->ranks[r].n - 1].flags = a->flags;
    }
  if (st && out->ranks) kt_schedule_free(out);
  return st;
}

/* Every RECV of a rank moved to the front of its list, each pair's in the
 * order they were (legal for non-blocking receives): a transport that posts
 * receives then moves data while the rank computes. */
static void receives_first(kt_schedule *program) {
  for (int r = 0; r < program->p; r++) {
    kt_rank_actions *ra = &program->ranks[r];
    kt_action *tmp = kt_calloc(ra->n ? ra->n : 1, sizeof *tmp);
    if (!tmp) return; /* the program as lowered is just as valid */
    size_t n = 0;
    for (int pass = 0; pass < 2; pass++)
      for (size_t i = 0; i < ra->n; i++) {
        int recv = ra->actions[i].op == KT_OP_RECV_F || ra->actions[i].op == KT_OP_RECV_B;
        if (recv == (pass == 0)) tmp[n++] = ra->actions[i];
      }
    memcpy(ra->actions, tmp, ra->n * sizeof *tmp);
    free(tmp);
  }
}

kt_status kt__build_program(const kt_schedule *s, int posts, kt_schedule *sched,
                            kt_schedule *program, kt_error *err) {
  kt_error sub;
  kt_status st;
  if (has_p2p(s)) {
    if ((st = kt_lowered_validate(s, &sub))) return kt_fail(err, st, "schedule: %s", sub.msg);
    if ((st = kt_schedule_copy(program, s, err))) return st;
    return compute_of(s, sched, err);
  }
  if ((st = kt_schedule_validate(s, &sub)))
    return kt_fail(err, st, "schedule %s: %s", s->name, sub.msg);
  if ((st = kt_schedule_copy(sched, s, err))) return st;
  if ((st = kt_schedule_lower(sched, program, err))) return st;
  if (posts) receives_first(program);
  return KT_OK;
}

/* With several rank threads in this process and a core for each, thread i
 * runs on the i-th core it may use (spread evenly when there are more).
 * Unpinned, a woken receiver is often placed on its sender's core and the
 * two share it until the balancer moves one: on two cores that made a
 * small GPT's P=2 step 20-50% slower than its prediction. */
static void assign_cores(kt_runtime *rt) {
  for (int i = 0; i < rt->n_local; i++) rt->workers[i].cpu = -1;
  cpu_set_t allowed;
  if (!rt->cfg.pin_threads || rt->n_local < 2 || sched_getaffinity(0, sizeof allowed, &allowed))
    return;
  int n = CPU_COUNT(&allowed);
  if (rt->n_local > n) return; /* oversubscribed: the kernel balances better */
  int stride = n / rt->n_local, next = 0, seen = 0;
  for (int c = 0; c < CPU_SETSIZE && next < rt->n_local; c++) {
    if (!CPU_ISSET(c, &allowed)) continue;
    if (seen++ % stride == 0) rt->workers[next++].cpu = c;
  }
}

/* Where each stage's units lie (rt->unit_offset): the model's (its
 * partition, or balanced by cost), a synthetic model's of syn_units
 * (balanced: as even as they go), or one per stage. */
static kt_status set_units(kt_runtime *rt, const kt_runtime_config *cfg, kt_error *err) {
  int has_units = !cfg->make_chunk && (!cfg->synthetic || cfg->syn_units > 0);
  int units = !has_units ? rt->S : cfg->synthetic ? cfg->syn_units : kt_model_units(&cfg->model);
  rt->n_parts = units;
  if (!has_units) {
    for (int s = 0; s <= rt->S; s++) rt->unit_offset[s] = s;
    return KT_OK;
  }
  int *counts = kt_calloc((size_t)rt->S, sizeof *counts);
  if (!counts) return kt_fail(err, KT_ENOMEM, "out of memory");
  kt_status st = KT_OK;
  if (rt->S > units)
    st = kt_fail(err, KT_EINVAL, "%d stages (P=%d, V=%d) but the model has only %d layers to split",
                 rt->S, rt->P, rt->V, units);
  else if (cfg->partition) memcpy(counts, cfg->partition, sizeof(int) * (size_t)rt->S);
  else if (cfg->synthetic)
    for (int s = 0; s < rt->S; s++) counts[s] = units / rt->S + (s < units % rt->S);
  else st = kt_partition_balanced(&cfg->model, rt->S, counts, err);
  for (int s = 0; !st && s < rt->S; s++) {
    if (counts[s] < 1) st = kt_fail(err, KT_EINVAL, "stage %d of the partition is empty", s);
    rt->unit_offset[s + 1] = rt->unit_offset[s] + counts[s];
  }
  if (!st && rt->unit_offset[rt->S] != units)
    st = kt_fail(err, KT_EINVAL, "the partition covers %d layers, the model has %d",
                 rt->unit_offset[rt->S], units);
  free(counts);
  return st;
}

kt_status kt_runtime_create(const kt_runtime_config *cfg, kt_transport *handles, const int *local,
                            int n_local, kt_runtime **out, kt_error *err) {
  *out = NULL;
  kt_status st = check_config(cfg, err);
  if (st) return st;
  kt_runtime *rt = calloc(1, sizeof *rt);
  if (!rt) return kt_fail(err, KT_ENOMEM, "out of memory");
  rt->cfg = *cfg;
  rt->posts = n_local > 0 && kt_transport_has_post(handles);
  if ((st = kt__build_program(cfg->schedule, rt->posts, &rt->sched_copy, &rt->program, err))) {
    kt_schedule_free(&rt->program);
    kt_schedule_free(&rt->sched_copy);
    free(rt);
    return st;
  }
  rt->cfg.schedule = &rt->sched_copy;
  rt->P = rt->sched_copy.p;
  rt->V = rt->sched_copy.v;
  rt->M = rt->sched_copy.m;
  rt->S = kt_schedule_stages(&rt->sched_copy);
  rt->D = cfg->data_parallel;
  rt->K = cfg->grad_accum;
  rt->handles = handles;
  pthread_mutex_init(&rt->lock, NULL);
  pthread_cond_init(&rt->wake, NULL);
  pthread_cond_init(&rt->done, NULL);
  kt_timeline_init(&rt->timeline, rt->P, "s", "B");
  rt->unit_offset = kt_calloc((size_t)rt->S + 1, sizeof *rt->unit_offset);
  rt->workers = kt_calloc((size_t)n_local, sizeof *rt->workers);
  if (!rt->unit_offset || !rt->workers) {
    st = kt_fail(err, KT_ENOMEM, "out of memory");
    goto fail;
  }
  if ((st = set_units(rt, cfg, err))) goto fail;
  rt->stamped = kt_faults_on_links(cfg->faults);
  if (cfg->faults && (st = kt_faults_check(cfg->faults, rt->P, err))) goto fail;
  for (int i = 0; i < n_local; i++) {
    rt->n_local = i + 1;
    if ((st = worker_init(rt, &rt->workers[i], kt_transport_at(handles, i), local[i], err)))
      goto fail;
  }
  assign_cores(rt);
  *out = rt;
  return KT_OK;
fail:
  kt_runtime_destroy(rt);
  return st;
}

kt_status kt_runtime_create_threads(const kt_runtime_config *cfg, kt_runtime **out, kt_error *err) {
  *out = NULL;
  if (!cfg->schedule) return kt_fail(err, KT_EINVAL, "no schedule");
  int P = cfg->schedule->p, D = cfg->data_parallel > 0 ? cfg->data_parallel : 1;
  /* the mailbox bound: every message a rank can receive in one round, and
   * two steps' records of every other rank (post-validation) */
  size_t cap = 2 * (size_t)cfg->schedule->m * cfg->schedule->v + 64 + 4 * (size_t)P * D;
  kt_transport *h;
  kt_status st = kt_transport_threads_create(P, D, cfg->timeout, cap, &h, err);
  if (st) return st;
  int *local = kt_calloc((size_t)P * D, sizeof *local);
  if (!local) {
    kt_transport_threads_destroy(h, P * D);
    return kt_fail(err, KT_ENOMEM, "out of memory");
  }
  for (int i = 0; i < P * D; i++) local[i] = i;
  st = kt_runtime_create(cfg, h, local, P * D, out, err);
  free(local);
  if (st) {
    kt_transport_threads_destroy(h, P * D);
    return st;
  }
  (*out)->owns_transport = 1;
  return KT_OK;
}

void kt_runtime_destroy(kt_runtime *rt) {
  if (!rt) return;
  kt__driver_stop(rt);
  pthread_cond_destroy(&rt->wake);
  pthread_cond_destroy(&rt->done);
  pthread_mutex_destroy(&rt->lock);
  for (int i = 0; i < rt->n_local; i++) worker_free(&rt->workers[i], rt->V, rt->S * rt->M);
  if (rt->owns_transport) kt_transport_threads_destroy(rt->handles, rt->P * rt->D);
  free(rt->workers);
  free(rt->unit_offset);
  kt_timeline_free(&rt->timeline);
  kt_schedule_free(&rt->sched_copy);
  kt_schedule_free(&rt->program);
  free(rt);
}

kt_transport *kt_runtime_handle(kt_runtime *rt, int world_rank) {
  for (int i = 0; i < rt->n_local; i++)
    if (rt->workers[i].world_rank == world_rank) return rt->workers[i].t;
  return NULL;
}

kt_chunk *kt_runtime_chunk(kt_runtime *rt, int stage, int replica) {
  if (stage < 0 || stage >= rt->S) return NULL;
  int wr = kt__stage_world_rank(rt, stage, replica);
  for (int i = 0; i < rt->n_local; i++)
    if (rt->workers[i].world_rank == wr)
      return rt->workers[i].chunk[kt_stage_chunk(&rt->sched_copy, stage)];
  return NULL;
}

float *kt_runtime_optim_state(kt_runtime *rt, int stage, int replica, size_t *n) {
  int wr = kt__stage_world_rank(rt, stage, replica);
  for (int i = 0; i < rt->n_local; i++)
    if (rt->workers[i].world_rank == wr) {
      int c = kt_stage_chunk(&rt->sched_copy, stage);
      if (n) *n = rt->workers[i].opt_n[c];
      return rt->workers[i].opt_state[c];
    }
  if (n) *n = 0;
  return NULL;
}

const int *kt_runtime_unit_offsets(const kt_runtime *rt) { return rt->unit_offset; }

int kt_runtime_plans(const kt_runtime *rt) { return rt->plans; }

const kt_runtime_config *kt_runtime_config_of(const kt_runtime *rt) { return &rt->cfg; }

kt_transport *kt_runtime_transport(kt_runtime *rt) { return rt->workers[0].t; }

int kt_runtime_all_local(const kt_runtime *rt) { return rt->n_local == rt->P * rt->D; }
