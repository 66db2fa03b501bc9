/* Runtime set-up and the step driver: builds each local rank's chunks and
 * buffers, runs one thread per local rank per step, stops everyone when one
 * rank fails, and merges the measured timeline. */
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
                                       empty_destroy};

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
  kt_status st = rt->cfg.make_chunk(rt->cfg.chunk_ctx, stage, rt->S, rt->cfg.micro_batch, rt->M,
                                    &c, err);
  if (st) return st;
  const char *bad = !c ? "no chunk" : !c->ops ? "no operations" : !c->ops->destroy ? "no destroy"
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
  free(w->chunk);
  free(w->opt_state);
  free(w->opt_n);
  free(w->in_buf);
  free(w->out_buf);
  free(w->dout_buf);
  free(w->din_buf);
  free(w->act_handoff);
  free(w->grad_handoff);
  kt_timeline_free(&w->events);
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
  kt_timeline_init(&w->events, rt->P, "s", "B");
  if (!w->chunk || !w->opt_state || !w->opt_n || !w->act_handoff || !w->grad_handoff ||
      !w->outbox || !w->recv_event)
    return kt_fail(err, KT_ENOMEM, "out of memory");
  for (int c = 0; c < rt->V; c++) {
    int stage = kt_rank_chunk_stage(&rt->sched_copy, w->stage_rank, c);
    kt_status st;
    if (stage < 0)
      st = empty_chunk_create(&rt->cfg, &w->chunk[c], err);
    else if (rt->cfg.synthetic)
      st = kt__synthetic_chunk_create(&rt->cfg, stage, rt->S, rt->M, &w->chunk[c], err);
    else if (rt->cfg.make_chunk)
      st = make_own_chunk(rt, stage, &w->chunk[c], err);
    else
      st = kt_chunk_create(&rt->cfg.model, rt->unit_offset[stage],
                           rt->unit_offset[stage + 1] - rt->unit_offset[stage],
                           rt->cfg.micro_batch, rt->M, &w->chunk[c], err);
    if (st) return st;
    size_t e = w->chunk[c]->in_elems > w->chunk[c]->out_elems ? w->chunk[c]->in_elems
                                                              : w->chunk[c]->out_elems;
    if (e > w->boundary_elems) w->boundary_elems = e;
  }
  size_t bytes = (w->boundary_elems + 16) * sizeof(float);
  w->in_buf = malloc(bytes);
  w->out_buf = malloc(bytes);
  w->dout_buf = malloc(bytes);
  w->din_buf = malloc(bytes);
  if (!w->in_buf || !w->out_buf || !w->dout_buf || !w->din_buf)
    return kt_fail(err, KT_ENOMEM, "out of memory for boundary buffers");
  return kt__optim_alloc_state(w, err);
}

static kt_status check_config(const kt_runtime_config *cfg, kt_error *err) {
  if (!cfg->schedule) return kt_fail(err, KT_EINVAL, "no schedule");
  if (cfg->data_parallel < 1 || cfg->data_parallel > 4096)
    return kt_fail(err, KT_EINVAL, "data-parallel degree D=%d: expected 1..4096", cfg->data_parallel);
  if (cfg->grad_accum < 1 || cfg->grad_accum > 65535)
    return kt_fail(err, KT_EINVAL, "gradient accumulation K=%d: expected 1..65535", cfg->grad_accum);
  if (cfg->micro_batch < 1) return kt_fail(err, KT_EINVAL, "micro-batch size b=%d: expected at least 1", cfg->micro_batch);
  if (cfg->slow_rank >= cfg->schedule->p)
    return kt_fail(err, KT_EINVAL, "slow rank %d: the pipeline has ranks 0..%d", cfg->slow_rank,
                   cfg->schedule->p - 1);
  if (cfg->slow_rank >= 0 && !(cfg->slow_factor >= 1 && cfg->slow_factor <= 1000))
    return kt_fail(err, KT_EINVAL, "slow factor %g: expected 1..1000", cfg->slow_factor);
  if (cfg->synthetic) {
    if (cfg->syn_tf_ms < 0 || cfg->syn_tb_ms < 0 || cfg->syn_tw_ms < 0)
      return kt_fail(err, KT_EINVAL, "synthetic costs must be >= 0 ms");
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

/* The program the workers run: a lowered schedule as given, or the
 * lowering of a compute-only one. sched_copy holds its compute actions. */
static kt_status build_program(kt_runtime *rt, const kt_schedule *s, int posts, kt_error *err) {
  kt_error sub;
  kt_status st;
  if (has_p2p(s)) {
    if ((st = kt_lowered_validate(s, &sub))) return kt_fail(err, st, "schedule: %s", sub.msg);
    if ((st = kt_schedule_copy(&rt->program, s, err))) return st;
    return compute_of(s, &rt->sched_copy, err);
  }
  if ((st = kt_schedule_validate(s, &sub)))
    return kt_fail(err, st, "schedule %s: %s", s->name, sub.msg);
  if ((st = kt_schedule_copy(&rt->sched_copy, s, err))) return st;
  if ((st = kt_schedule_lower(&rt->sched_copy, &rt->program, err))) return st;
  if (posts) receives_first(&rt->program);
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
  if (!rt->cfg.pin_threads || rt->n_local < 2 ||
      sched_getaffinity(0, sizeof allowed, &allowed))
    return;
  int n = CPU_COUNT(&allowed);
  if (rt->n_local > n) return; /* oversubscribed: the kernel balances better */
  int stride = n / rt->n_local, next = 0, seen = 0;
  for (int c = 0; c < CPU_SETSIZE && next < rt->n_local; c++) {
    if (!CPU_ISSET(c, &allowed)) continue;
    if (seen++ % stride == 0) rt->workers[next++].cpu = c;
  }
}

kt_status kt_runtime_create(const kt_runtime_config *cfg, kt_transport *handles, const int *local,
                            int n_local, kt_runtime **out, kt_error *err) {
  *out = NULL;
  kt_status st = check_config(cfg, err);
  if (st) return st;
  kt_runtime *rt = calloc(1, sizeof *rt);
  if (!rt) return kt_fail(err, KT_ENOMEM, "out of memory");
  rt->cfg = *cfg;
  if ((st = build_program(rt, cfg->schedule, n_local > 0 && kt_transport_has_post(handles), err))) {
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
  kt_timeline_init(&rt->timeline, rt->P, "s", "B");
  rt->unit_offset = kt_calloc((size_t)rt->S + 1, sizeof *rt->unit_offset);
  rt->workers = kt_calloc((size_t)n_local, sizeof *rt->workers);
  if (!rt->unit_offset || !rt->workers) {
    st = kt_fail(err, KT_ENOMEM, "out of memory");
    goto fail;
  }
  if (!cfg->synthetic && !cfg->make_chunk) {
    int units = kt_model_units(&cfg->model);
    int *counts = kt_calloc((size_t)rt->S, sizeof *counts);
    if (!counts) {
      st = kt_fail(err, KT_ENOMEM, "out of memory");
      goto fail;
    }
    if (rt->S > units)
      st = kt_fail(err, KT_EINVAL,
                   "%d stages (P=%d, V=%d) but the model has only %d layers to split",
                   rt->S, rt->P, rt->V, units);
    else if (cfg->partition)
      memcpy(counts, cfg->partition, sizeof(int) * (size_t)rt->S);
    else
      st = kt_partition_balanced(&cfg->model, rt->S, counts, err);
    for (int s = 0; !st && s < rt->S; s++) {
      if (counts[s] < 1) st = kt_fail(err, KT_EINVAL, "stage %d of the partition is empty", s);
      rt->unit_offset[s + 1] = rt->unit_offset[s] + counts[s];
    }
    if (!st && rt->unit_offset[rt->S] != units)
      st = kt_fail(err, KT_EINVAL, "the partition covers %d layers, the model has %d",
                   rt->unit_offset[rt->S], units);
    free(counts);
    if (st) goto fail;
  }
  for (int i = 0; i < n_local; i++) {
    rt->n_local = i + 1;
    if ((st = worker_init(rt, &rt->workers[i], kt_transport_at(handles, i), local[i], err))) goto fail;
  }
  assign_cores(rt);
  *out = rt;
  return KT_OK;
fail:
  kt_runtime_destroy(rt);
  return st;
}

kt_status kt_runtime_create_threads(const kt_runtime_config *cfg, kt_runtime **out,
                                    kt_error *err) {
  *out = NULL;
  if (!cfg->schedule) return kt_fail(err, KT_EINVAL, "no schedule");
  int P = cfg->schedule->p, D = cfg->data_parallel > 0 ? cfg->data_parallel : 1;
  /* the mailbox bound: every message a rank can receive in one round */
  size_t cap = 2 * (size_t)cfg->schedule->m * cfg->schedule->v + 64;
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
  for (int i = 0; i < rt->n_local; i++) worker_free(&rt->workers[i], rt->V, rt->S * rt->M);
  if (rt->owns_transport) kt_transport_threads_destroy(rt->handles, rt->P * rt->D);
  free(rt->workers);
  free(rt->unit_offset);
  kt_timeline_free(&rt->timeline);
  kt_schedule_free(&rt->sched_copy);
  kt_schedule_free(&rt->program);
  free(rt);
}

/* With ranks in other processes, world rank 0 collects the timelines of
 * replica 0's pipeline ranks so reports show every rank. */
static kt_status gather_timeline(kt_runtime *rt, kt_error *err) {
  if (rt->n_local == rt->P * rt->D) return KT_OK;
  kt__worker *w = &rt->workers[0];
  kt_transport *t = w->t;
  const uint64_t tag = KT_TAG_COLLECTIVE | 0x300;
  if (w->replica != 0) return KT_OK;
  if (w->world_rank != 0) {
    int64_t counts[3] = {(int64_t)w->events.n_events, (int64_t)w->events.n_mem,
                         (int64_t)w->events.n_comm};
    kt_status st = kt_transport_send(t, 0, tag, counts, sizeof counts, err);
    if (!st) st = kt_transport_send(t, 0, tag + 1, w->events.events, w->events.n_events * sizeof(kt_event), err);
    if (!st) st = kt_transport_send(t, 0, tag + 2, w->events.mem, w->events.n_mem * sizeof(kt_mem_sample), err);
    if (!st) st = kt_transport_send(t, 0, tag + 3, w->events.comm, w->events.n_comm * sizeof(kt_event), err);
    return st;
  }
  for (int r = 1; r < rt->P; r++) {
    int src = kt_world_rank(r, 0, rt->D);
    int64_t counts[3];
    kt_status st = kt_transport_recv(t, src, tag, counts, sizeof counts, err);
    if (st) return st;
    for (int k = 0; k < 3; k++)
      if (counts[k] < 0 || counts[k] > (1 << 26))
        return kt_fail(err, KT_ERUNTIME, "bad timeline from rank %d", src);
    kt_event *ev = kt_calloc((size_t)counts[0] + 1, sizeof *ev);
    kt_mem_sample *mem = kt_calloc((size_t)counts[1] + 1, sizeof *mem);
    kt_event *comm = kt_calloc((size_t)counts[2] + 1, sizeof *comm);
    if (!ev || !mem || !comm) st = kt_fail(err, KT_ENOMEM, "out of memory");
    if (!st) st = kt_transport_recv(t, src, tag + 1, ev, (size_t)counts[0] * sizeof *ev, err);
    if (!st) st = kt_transport_recv(t, src, tag + 2, mem, (size_t)counts[1] * sizeof *mem, err);
    if (!st) st = kt_transport_recv(t, src, tag + 3, comm, (size_t)counts[2] * sizeof *comm, err);
    for (int64_t i = 0; !st && i < counts[0]; i++)
      if (kt_timeline_add_event(&rt->timeline, &ev[i])) st = kt_fail(err, KT_ENOMEM, "out of memory");
    for (int64_t i = 0; !st && i < counts[1]; i++)
      if (kt_timeline_add_mem(&rt->timeline, mem[i].rank, mem[i].t, mem[i].value))
        st = kt_fail(err, KT_ENOMEM, "out of memory");
    for (int64_t i = 0; !st && i < counts[2]; i++)
      if (kt_timeline_add_comm(&rt->timeline, &comm[i])) st = kt_fail(err, KT_ENOMEM, "out of memory");
    free(ev);
    free(mem);
    free(comm);
    if (st) return st;
  }
  return KT_OK;
}

static void *worker_main(void *arg) {
  kt__worker *w = arg;
  if (w->cpu >= 0) { /* best effort: a refusal leaves the thread where the kernel put it */
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(w->cpu, &set);
    (void)pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  }
  if (w->rt->cfg.synthetic) kt__synthetic_thread_setup();
  w->status = kt__worker_step(w, &w->err);
  if (w->status && w->status != KT_EPEER) {
    char reason[KT_ERROR_LEN + 64];
    snprintf(reason, sizeof reason, "stopped because rank %d failed: %s", w->world_rank, w->err.msg);
    kt_transport_abort(w->t, reason);
  }
  return NULL;
}

/* Bytes sent and seconds in send or wait so far, over this process's workers
 * (the transports count from their start; a step's share is a difference). */
static void local_traffic(kt_runtime *rt, int64_t *bytes, double *seconds) {
  *bytes = 0, *seconds = 0;
  for (int i = 0; i < rt->n_local; i++) {
    int64_t b;
    double send_s, wait_s;
    kt_transport_stats(rt->workers[i].t, &b, &send_s, &wait_s);
    *bytes += b;
    *seconds += send_s + wait_s;
  }
}

/* Runs every local worker's step: in this thread when it is the only one,
 * else one thread each. */
static kt_status run_workers(kt_runtime *rt, kt_error *err) {
  if (rt->n_local == 1) {
    worker_main(&rt->workers[0]);
    return KT_OK;
  }
  pthread_t *th = kt_calloc((size_t)rt->n_local, sizeof *th);
  if (!th) return kt_fail(err, KT_ENOMEM, "out of memory");
  int started = 0;
  for (; started < rt->n_local; started++)
    if (pthread_create(&th[started], NULL, worker_main, &rt->workers[started])) break;
  if (started < rt->n_local) kt_transport_abort(rt->workers[0].t, "cannot start threads");
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
  free(th);
  if (started < rt->n_local) return kt_fail(err, KT_ERUNTIME, "cannot start %d worker threads", rt->n_local);
  return KT_OK;
}

/* The root cause is the first failure that is not a consequence of another
 * (KT_EPEER: stopped because a peer failed); NULL when none failed. */
static const kt__worker *root_failure(const kt_runtime *rt) {
  const kt__worker *failed = NULL;
  for (int i = 0; i < rt->n_local; i++) {
    const kt__worker *w = &rt->workers[i];
    if (w->status && (!failed || (failed->status == KT_EPEER && w->status != KT_EPEER))) failed = w;
  }
  return failed;
}

/* The step's timeline from this process's replica-0 workers (the other
 * processes' come by gather_timeline). */
static kt_status collect_local_timeline(kt_runtime *rt, kt_error *err) {
  rt->timeline.n_events = rt->timeline.n_mem = rt->timeline.n_comm = 0;
  for (int i = 0; i < rt->n_local; i++) {
    const kt__worker *w = &rt->workers[i];
    if (w->replica != 0) continue;
    for (size_t e = 0; e < w->events.n_events; e++)
      if (kt_timeline_add_event(&rt->timeline, &w->events.events[e]))
        return kt_fail(err, KT_ENOMEM, "out of memory");
    for (size_t m = 0; m < w->events.n_mem; m++)
      if (kt_timeline_add_mem(&rt->timeline, w->events.mem[m].rank, w->events.mem[m].t,
                              w->events.mem[m].value))
        return kt_fail(err, KT_ENOMEM, "out of memory");
    for (size_t c = 0; c < w->events.n_comm; c++)
      if (kt_timeline_add_comm(&rt->timeline, &w->events.comm[c]))
        return kt_fail(err, KT_ENOMEM, "out of memory");
  }
  return KT_OK;
}

/* Pinned ranks keep a core each while nothing else wants it: once one
 * waited for its core over 5% of a step (another program busy there),
 * the kernel balances them for the rest of the run. Pinned beside one
 * busy loop, P=2 ran at about half the speed of unpinned MPI ranks. */
static void unpin_when_crowded(kt_runtime *rt, double step_seconds) {
  for (int i = 0; i < rt->n_local; i++) {
    double waited = 0;
    for (size_t e = 0; e < rt->workers[i].events.n_events; e++)
      waited += rt->workers[i].events.events[e].ready_wait;
    if (rt->workers[i].cpu >= 0 && waited > 0.05 * step_seconds && waited > 1e-3)
      for (int k = 0; k < rt->n_local; k++) rt->workers[k].cpu = -1;
  }
}

kt_status kt_runtime_step(kt_runtime *rt, int step, const kt_microbatch *data, int update,
                          kt_step_result *res, kt_error *err) {
  memset(res, 0, sizeof *res);
  for (int i = 0; i < rt->n_local; i++) {
    kt__worker *w = &rt->workers[i];
    w->step = step;
    w->data = data;
    w->update = update;
    w->fresh_thread = rt->n_local > 1; /* else it runs in this thread */
    w->status = KT_OK;
    w->err.msg[0] = 0;
  }
  int64_t bytes0;
  double comm0;
  local_traffic(rt, &bytes0, &comm0);
  if (rt->n_local < rt->P * rt->D) { /* other processes: start together, one clock origin */
    kt_status bst = kt_transport_barrier(rt->workers[0].t, err);
    if (bst) return bst;
  }
  rt->step_t0 = kt_now();
  kt_status st = run_workers(rt, err);
  if (st) return st;
  res->seconds = kt_now() - rt->step_t0;
  const kt__worker *failed = root_failure(rt);
  if (failed) return kt_fail(err, failed->status, "%s", failed->err.msg);
  unpin_when_crowded(rt, res->seconds);
  if ((st = collect_local_timeline(rt, err))) return st;
  local_traffic(rt, &res->bytes_sent, &res->comm_seconds);
  res->bytes_sent -= bytes0;
  res->comm_seconds -= comm0;
  if ((st = gather_timeline(rt, err))) return st;
  kt_timeline_sort(&rt->timeline);
  const kt__worker *w0 = &rt->workers[0];
  res->sync_seconds = w0->sync_seconds;
  res->tail_seconds = w0->tail_seconds;
  res->loss = w0->loss;
  res->grad_norm = w0->grad_norm;
  res->lr = w0->lr;
  res->nonfinite = w0->nonfinite;
  res->nonfinite_stage = w0->nonfinite_stage;
  res->nonfinite_what = w0->nonfinite_what;
  return KT_OK;
}

const kt_timeline *kt_runtime_timeline(const kt_runtime *rt) { return &rt->timeline; }

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

const kt_runtime_config *kt_runtime_config_of(const kt_runtime *rt) { return &rt->cfg; }

kt_transport *kt_runtime_transport(kt_runtime *rt) { return rt->workers[0].t; }

int kt_runtime_all_local(const kt_runtime *rt) { return rt->n_local == rt->P * rt->D; }
