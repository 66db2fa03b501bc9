/* A rank's worker: interprets its lowered program (kt_schedule_lower), the
 * same one the simulator runs. Compute actions run on the rank's chunks; a
 * result another rank needs waits in an outbox until its SEND posts it; a
 * RECV posts a receive, which the consuming compute action waits on; a
 * WAIT_SEND retires a send (the transports copy a message out when it is
 * posted, so it has completed by then); the per-stage actions (gradient
 * reduction, FSDP unshard/reshard) do nothing here. Every action is
 * recorded: compute actions as events, the others as communication events
 * (posted, completed). */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runtime/internal.h"

/* The running action's chunk (w->at: its resolved form, resolve.c). */
static kt_chunk *chunk_of(const kt__worker *w) { return w->chunk[w->at->chunk]; }

static double since_step(const kt__worker *w) { return kt_now() - w->rt->t_origin; }

/* Events carry the micro-batch's number within the step: round k's
 * micro-batch j is k*M + j, as in the prediction (kt_schedule_repeat). */
static int step_mb(const kt__worker *w, const kt_action *a, int k) {
  return kt_op_has_mb(a->op) ? a->mb + k * w->rt->M : a->mb;
}

/* The calling thread's run delay (seconds it was runnable but not
 * running, Linux's schedstat), or NAN when unknown; *runs (may be NULL):
 * how many times it was put on a core. */
static double ready_count(const kt__worker *w, double *runs) {
  char buf[96];
  if (runs) *runs = 0;
  if (w->ready_fd < 0) return NAN;
  ssize_t n = pread(w->ready_fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return NAN;
  buf[n] = 0;
  unsigned long long run, delay, count;
  if (sscanf(buf, "%llu %llu %llu", &run, &delay, &count) != 3) return NAN;
  if (runs) *runs = (double)count;
  return (double)delay * 1e-9;
}
static double ready_now(const kt__worker *w) { return ready_count(w, NULL); }

static kt_status add_comm(kt__worker *w, const kt_action *a, int k, double start, double end,
                          int64_t bytes, size_t *index, kt_error *err) {
  kt_event e = {.rank = w->stage_rank,
                .stage = a->stage,
                .mb = step_mb(w, a, k),
                .op = a->op,
                .start = start,
                .end = end,
                .bytes = bytes};
  if (index) *index = w->events->n_comm;
  if (kt_timeline_add_comm(w->events, &e))
    return kt_fail(err, KT_ENOMEM, "out of memory recording the timeline");
  return KT_OK;
}

/* A stamped message (a fault on a link, kt_runtime_config.faults): the
 * tensor into buf, then the wait until it is due. */
static kt_status recv_stamped(kt__worker *w, int peer, uint64_t tag, float *buf, size_t elems,
                              void **loan, kt_error *err) {
  size_t bytes = elems * sizeof(float);
  double due;
  *loan = NULL;
  kt_status st = kt_transport_recv(w->t, peer, tag, w->stamp_buf, bytes + sizeof due, err);
  if (st) return st;
  memcpy(buf, w->stamp_buf, bytes);
  memcpy(&due, w->stamp_buf + bytes, sizeof due);
  kt__sleep_until(due);
  return KT_OK;
}

/* Waits for a peer's tensor; turns a timeout into the watchdog's message
 * and closes the RECV's event when the data is in. The tensor lands in buf
 * or stays where the transport holds it (*data, lent until *loan is given
 * back with kt_transport_release). */
static kt_status recv_tensor(kt__worker *w, const kt_action *a, int k, float *buf, size_t elems,
                             const float **data, void **loan, double *wait, kt_error *err) {
  const kt__resolved *x = w->at;
  int peer = x->in_peer;
  uint64_t tag = kt_tag_round(x->in_tag, k);
  double runs0, runs1, t0 = kt_now(), cpu0 = kt_thread_cpu_now(), ready0 = ready_count(w, &runs0);
  kt_error sub;
  const void *got = buf;
  kt_status st = w->rt->stamped ? recv_stamped(w, peer, tag, buf, elems, loan, &sub)
                                : kt_transport_recv_lend(w->t, peer, tag, buf,
                                                         elems * sizeof(float), &got, loan, &sub);
  *data = got;
  w->input_at = kt_now();
  *wait += w->input_at - t0;
  w->wait_cpu += kt_thread_cpu_now() - cpu0; /* a transport that spins while it waits */
  /* Once the data was in, the thread may have waited for a core: its run
   * delay after the wake that found it. A wait that slept once (a futex)
   * has that one; one that polled (sleeps of microseconds between tests,
   * MPI across hosts) woke many times while nothing had come, and its
   * last wake is taken as long as its average. */
  double woke = ready_count(w, &runs1) - ready0;
  if (woke > 0) w->wait_ready += woke / fmax(1, runs1 - runs0);
  if (st == KT_ETIMEOUT) {
    char at[32];
    kt_action_format(a, at, sizeof at);
    return kt_fail(err, st,
                   "watchdog: rank %d (stage %d) waited %g s at action %s for the %s from rank %d "
                   "(stage %d)",
                   w->world_rank, a->stage, kt_transport_timeout(w->t), at,
                   x->input == KT_OUT_F ? "activation" : "gradient", peer,
                   x->input == KT_OUT_F ? a->stage - 1 : a->stage + 1);
  }
  if (st) return kt_fail(err, st, "%s", sub.msg);
  size_t ev = w->recv_event[x->in_slot];
  if (ev < w->events->n_comm) w->events->comm[ev].end = since_step(w);
  return KT_OK;
}

/* Keeps a copy of a tensor in slot (a hand-over inside the rank, or an
 * outbox entry waiting for its SEND). */
static kt_status keep(float **slot, const float *src, size_t elems, kt_error *err) {
  float *buf = malloc(elems * sizeof(float) + 16);
  if (!buf) return kt_fail(err, KT_ENOMEM, "out of memory handing over a tensor");
  memcpy(buf, src, elems * sizeof(float));
  free(*slot);
  *slot = buf;
  return KT_OK;
}

/* The input of a compute action: nothing (stage 0's F, the last stage's
 * backward), a hand-over inside the rank (*taken, freed after the action),
 * or a received tensor (*loan, given back after the action). */
static kt_status take_input(kt__worker *w, const kt_action *a, int k, const float **in,
                            float **taken, void **loan, double *wait, kt_error *err) {
  const kt__resolved *x = w->at;
  *in = NULL, *taken = NULL, *loan = NULL;
  if (x->input == KT_OUT_NONE) return KT_OK;
  kt_chunk *c = chunk_of(w);
  int fwd = x->input == KT_OUT_F;
  if (x->in_local) {
    float **slot = fwd ? &w->act_handoff[x->in_pair] : &w->grad_handoff[x->in_pair];
    *taken = *slot;
    *in = *taken;
    *slot = NULL;
    if (!*taken)
      return kt_fail(err, KT_ERUNTIME, "rank %d: %s%d of stage %d before its input", w->world_rank,
                     fwd ? "F" : "backward ", a->mb, a->stage);
    return KT_OK;
  }
  float *buf = fwd ? w->in_buf : w->dout_buf;
  size_t elems = fwd ? kt_chunk_in_elems(c) : kt_chunk_out_elems(c);
  return recv_tensor(w, a, k, buf, elems, in, loan, wait, err);
}

/* Gives back what take_input took once the action has used it. */
static void drop_input(kt__worker *w, float *taken, void *loan) {
  free(taken);
  kt_transport_release(w->t, loan);
}

/* Whether the result's SEND follows before anything that could write the
 * compute buffer or take the direct hand-off: only receives (posted into
 * the transport's own storage), send completions and the per-stage actions
 * (no-ops here) may come between. 1F1B's B is followed by WAIT_SEND_F, then
 * SEND_B: without looking past it every gradient was copied once more. */
static int send_comes_next(const kt__worker *w, const kt_action *a, int send) {
  for (const kt_action *n = w->next; n && n < w->end; n++) {
    if (n->op == send && n->stage == a->stage && n->mb == a->mb) return 1;
    if (n->op < KT_OP_COUNT || n->op == KT_OP_SEND_F || n->op == KT_OP_SEND_B) return 0;
  }
  return 0;
}

/* Where a compute action writes its result r (scratch: the worker's own
 * buffer): into the transport's storage for the message (the receiver's
 * inbox slot, a pooled message) when the result leaves the rank by a SEND
 * that comes next, so that SEND hands it over without a copy
 * (w->lent_out); the scratch buffer otherwise. */
static float *result_buffer(kt__worker *w, const kt_action *a, float *scratch, size_t elems) {
  const kt__resolved *x = w->at;
  if (x->output == KT_OUT_NONE || x->out_local || w->rt->stamped ||
      !send_comes_next(w, a, x->output == KT_OUT_F ? KT_OP_SEND_F : KT_OP_SEND_B))
    return scratch;
  w->lent_out = kt_transport_buffer(w->t, x->out_peer, elems * sizeof(float));
  return w->lent_out ? w->lent_out : scratch;
}

/* Gives a transport buffer that was not sent back (an action failed). */
static void drop_result_buffer(kt__worker *w) {
  kt_transport_drop_buffer(w->t, w->lent_out);
  w->lent_out = NULL;
}

/* Hands a computed result to its consumer: kept for a stage on this rank,
 * put in the outbox for its SEND otherwise, or, when that SEND comes next
 * (send_comes_next), left in the compute buffer for it. */
static kt_status give_output(kt__worker *w, const kt_action *a, const float *data, size_t elems,
                             kt_error *err) {
  const kt__resolved *x = w->at;
  if (x->output == KT_OUT_NONE) return KT_OK;
  if (x->out_local) {
    float **slot =
        x->output == KT_OUT_F ? &w->act_handoff[x->out_pair] : &w->grad_handoff[x->out_pair];
    return keep(slot, data, elems, err);
  }
  if (send_comes_next(w, a, x->output == KT_OUT_F ? KT_OP_SEND_F : KT_OP_SEND_B)) {
    w->direct = data;
    w->direct_slot = x->out_slot;
    return KT_OK;
  }
  return keep(&w->outbox[x->out_slot], data, elems, err);
}

static kt_status run_forward(kt__worker *w, const kt_action *a, const kt_microbatch *mbd, int k,
                             double *wait, kt_error *err) {
  kt_runtime *rt = w->rt;
  kt_chunk *c = chunk_of(w);
  const float *in;
  float *taken;
  void *loan;
  kt_status st = take_input(w, a, k, &in, &taken, &loan, wait, err);
  if (st) return st;
  double loss = 0;
  float *out =
      w->at->output == KT_OUT_F ? result_buffer(w, a, w->out_buf, kt_chunk_out_elems(c)) : NULL;
  st = kt_chunk_forward(c, a->mb, mbd, in, out, &loss, err);
  drop_input(w, taken, loan);
  if (st) {
    drop_result_buffer(w);
    return st;
  }
  unsigned char *bad = &w->fwd_bad[w->at->chunk];
  if (!rt->cfg.synthetic && !*bad) { /* synthetic tensors hold no values */
    *bad = out ? 0 : !isfinite(loss);
    for (size_t i = 0; out && i < kt_chunk_out_elems(c) && !*bad; i++) *bad = !isfinite(out[i]);
  }
  if (!out) {
    w->loss_sum += loss;
    return KT_OK;
  }
  return give_output(w, a, out, kt_chunk_out_elems(c), err);
}

/* I, or a full B (I and W together: its gradient leaves when the whole B
 * is done, by its SEND_B after it). */
static kt_status run_backward(kt__worker *w, const kt_action *a, const kt_microbatch *mbd, int k,
                              double *wait, kt_error *err) {
  kt_chunk *c = chunk_of(w);
  const float *dout;
  float *taken;
  void *loan;
  kt_status st = take_input(w, a, k, &dout, &taken, &loan, wait, err);
  if (st) return st;
  float *din =
      w->at->output == KT_OUT_BI ? result_buffer(w, a, w->din_buf, kt_chunk_in_elems(c)) : NULL;
  st = a->op == KT_OP_B ? kt_chunk_backward(c, a->mb, mbd, dout, din, err)
                        : kt_chunk_backward_input(c, a->mb, mbd, dout, din, err);
  drop_input(w, taken, loan);
  if (st) drop_result_buffer(w);
  if (st || !din) return st;
  return give_output(w, a, din, kt_chunk_in_elems(c), err);
}

static size_t rank_stash_bytes(const kt__worker *w) {
  size_t n = 0;
  for (int c = 0; c < w->rt->V; c++) n += kt_chunk_stash_bytes(w->chunk[c]);
  return n;
}

void kt__sleep_until(double until) {
  for (double left; (left = until - kt_now()) > 0;) {
    struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
    nanosleep(&ts, NULL);
  }
}

/* The straggler of --slow-rank: an action that took `own` seconds of its
 * device takes the rank's factor times that (the static slow_factor, or
 * a fault begun by this step). A real model's rank burns the extra CPU
 * time (as a slower core would keep it busy); a synthetic one sleeps it.
 * Returns the action's device time. */
static double stretch(const kt__worker *w, double own) {
  const kt_runtime_config *cfg = &w->rt->cfg;
  double factor = kt_faults_rank_factor(cfg->faults, w->stage_rank, w->step);
  if (w->stage_rank == cfg->slow_rank && cfg->slow_factor > factor) factor = cfg->slow_factor;
  if (!(factor > 1)) return own;
  double extra = own * (factor - 1);
  if (cfg->synthetic) {
    kt__sleep_until(kt_now() + extra);
  } else {
    double until = kt_thread_cpu_now() + extra;
    while (kt_thread_cpu_now() < until) {
    }
  }
  return own * factor;
}

/* Runs one compute action and records it with the most activation memory
 * the rank held while it ran, what it holds after, and the time it took
 * its device (cpu_time). */
static kt_status run_compute(kt__worker *w, const kt_action *a, int k, kt_error *err) {
  kt_runtime *rt = w->rt;
  const kt_microbatch *mbd =
      w->data ? &w->data[((size_t)w->replica * rt->K + k) * rt->M + a->mb] : NULL;
  kt_chunk *c = chunk_of(w);
  size_t before = rank_stash_bytes(w), chunk_before = kt_chunk_stash_bytes(c);
  kt_chunk_reset_peak(c);
  double wait = 0, t_begin = kt_now(), cpu_begin = kt_thread_cpu_now();
  w->wait_cpu = w->wait_ready = 0, w->input_at = 0;
  kt_status st;
  switch (a->op) {
    case KT_OP_F: st = run_forward(w, a, mbd, k, &wait, err); break;
    case KT_OP_I:
    case KT_OP_B: st = run_backward(w, a, mbd, k, &wait, err); break;
    default: st = kt_chunk_backward_weight(c, a->mb, err); break; /* W */
  }
  if (st) return st;
  double own = rt->cfg.synthetic ? kt__synthetic_cost(c, (kt_op)a->op, a->mb)
                                 : kt_thread_cpu_now() - cpu_begin - w->wait_cpu;
  own = stretch(w, own);
  double t_end = kt_now(), cpu_end = kt_thread_cpu_now(), ready_end = ready_now(w);
  double ready = ready_end - w->ready_mark;
  if (!(ready >= 0)) /* no run delay here: what its wall time has beyond its CPU time */
    ready = fmax(0, t_end - t_begin - wait - own) +
            fmax(0, (t_begin - w->t_mark) - (cpu_begin - w->cpu_mark));
  w->t_mark = t_end, w->cpu_mark = cpu_end, w->ready_mark = ready_end;
  /* compute starts once the input arrived (when the receive returned: a
   * thread preempted before it posted the receive would make t_begin +
   * wait too early); the wait shows as idle (the part of it after the
   * input arrived that the thread waited for a core is ready_wait's, not
   * a transfer's) */
  double start = w->input_at > 0 ? w->input_at : t_begin;
  kt_event e = {.rank = w->stage_rank,
                .stage = a->stage,
                .mb = step_mb(w, a, k),
                .op = a->op,
                .flags = a->flags,
                .start = start - rt->t_origin,
                .end = t_end - rt->t_origin,
                .comm_time = fmax(0, wait - w->wait_ready),
                .cpu_time = own,
                .ready_wait = ready};
  double peak = (double)(before - chunk_before + kt_chunk_peak_stash_bytes(c));
  if (kt_timeline_add_event(w->events, &e) ||
      kt_timeline_add_mem(w->events, w->stage_rank, e.start, peak) ||
      kt_timeline_add_mem(w->events, w->stage_rank, e.end, (double)rank_stash_bytes(w)))
    return kt_fail(err, KT_ENOMEM, "out of memory recording the timeline");
  return KT_OK;
}

/* A message with when it is due: now, plus the delay the faults give its
 * link at this step (and, for a trace, at this time). */
static kt_status send_stamped(kt__worker *w, int dst, uint64_t tag, const float *data, size_t bytes,
                              kt_error *err) {
  const kt_runtime *rt = w->rt;
  double now = kt_now(), t = rt->fault_origin > 0 ? now - rt->fault_origin : -1;
  double due = now + kt_faults_link_delay(rt->cfg.faults, w->stage_rank, dst / rt->D, w->step, t);
  memcpy(w->stamp_buf, data, bytes);
  memcpy(w->stamp_buf + bytes, &due, sizeof due);
  return kt_transport_send(w->t, dst, tag, w->stamp_buf, bytes + sizeof due, err);
}

/* SEND: posts the outbox tensor of (stage, mb) to the rank of its consumer. */
static kt_status run_send(kt__worker *w, const kt_action *a, int k, kt_error *err) {
  const kt__resolved *x = w->at;
  size_t at_slot = x->out_slot;
  float **slot = &w->outbox[at_slot];
  const float *data = *slot;
  if (w->direct && w->direct_slot == at_slot) data = w->direct;
  w->direct = NULL;
  char at[32];
  if (!data) {
    kt_action_format(a, at, sizeof at);
    return kt_fail(err, KT_ERUNTIME, "rank %d runs %s before the action that makes its data",
                   w->world_rank, at);
  }
  kt_chunk *c = chunk_of(w);
  size_t bytes =
      (x->output == KT_OUT_F ? kt_chunk_out_elems(c) : kt_chunk_in_elems(c)) * sizeof(float);
  int dst = x->out_peer;
  double t0 = since_step(w);
  uint64_t tag = kt_tag_round(x->out_tag, k);
  kt_status st;
  if (w->rt->stamped) {
    st = send_stamped(w, dst, tag, data, bytes, err);
  } else if (w->lent_out && data == w->lent_out) { /* computed into the message itself */
    w->lent_out = NULL;
    st = kt_transport_send_buffer(w->t, dst, tag, (void *)data, bytes, err);
  } else {
    st = kt_transport_send(w->t, dst, tag, data, bytes, err);
  }
  free(*slot);
  *slot = NULL;
  if (st) return st;
  return add_comm(w, a, k, t0, since_step(w), (int64_t)bytes, NULL, err);
}

/* RECV: posts the receive (transports without post() receive on demand). */
static kt_status run_recv(kt__worker *w, const kt_action *a, int k, kt_error *err) {
  const kt__resolved *x = w->at;
  kt_chunk *c = chunk_of(w);
  double t0 = since_step(w);
  if (kt_transport_has_post(w->t)) {
    size_t elems = x->input == KT_OUT_F ? kt_chunk_in_elems(c) : kt_chunk_out_elems(c);
    size_t stamp = w->rt->stamped ? sizeof(double) : 0;
    kt_status st = kt_transport_post(w->t, x->in_peer, kt_tag_round(x->in_tag, k),
                                     elems * sizeof(float) + stamp, err);
    if (st) return st;
  }
  return add_comm(w, a, k, t0, t0, 0, &w->recv_event[x->in_slot], err);
}

static kt_status run_action(kt__worker *w, const kt_action *a, int k, kt_error *err) {
  if (a->op < KT_OP_COUNT) return run_compute(w, a, k, err);
  switch (a->op) {
    case KT_OP_SEND_F:
    case KT_OP_SEND_B: return run_send(w, a, k, err);
    case KT_OP_RECV_F:
    case KT_OP_RECV_B: return run_recv(w, a, k, err);
    default: { /* WAIT_SEND and the per-stage actions: recorded, nothing to do */
      double t = since_step(w);
      return add_comm(w, a, k, t, t, 0, NULL, err);
    }
  }
}

/* The rank's actions, K rounds of them. */
kt_status kt__worker_rounds(kt__worker *w, kt_error *err) {
  const kt_rank_actions *ra = &w->rt->program.ranks[w->stage_rank];
  w->loss_sum = 0;
  w->direct = NULL;
  memset(w->fwd_bad, 0, sizeof w->fwd_bad);
  w->events->n_events = w->events->n_mem = w->events->n_comm = 0;
  for (int c = 0; c < w->rt->V; c++) kt_chunk_zero_grad(w->chunk[c]);
  for (int k = 0; k < w->rt->K; k++) {
    for (size_t i = 0; i < ra->n; i++) {
      w->next = &ra->actions[i + 1];
      w->end = ra->actions + ra->n;
      w->at = &w->plan[i];
      kt_status st = run_action(w, &ra->actions[i], k, err);
      if (st) {
        drop_result_buffer(w); /* computed into, never sent: back to the transport */
        return st;
      }
    }
  }
  /* the fault of --inject-nan: one gradient of this rank's first chunk */
  const kt_runtime_config *cfg = &w->rt->cfg;
  if (w->step == cfg->nan_step && w->stage_rank == cfg->nan_rank) {
    size_t n;
    float *g = kt_chunk_grads(w->chunk[0], &n);
    if (n) g[n / 2] = NAN;
  }
  return KT_OK;
}

kt_status kt__worker_order(kt__worker *w, const kt__order *o, kt_error *err) {
  if (o->flush) return w->pending >= 0 ? kt__step_end(w, o, err) : KT_OK;
  int slot = o->seq % KT__RING;
  w->step = o->step, w->update = o->update, w->data = o->data;
  w->events = &w->ev[slot];
  kt__step_out *out = &w->out[slot]; /* begun by the driver (kt__step_out_begin) */
  /* the step's clocks from its start: the thread's CPU time and run delay */
  w->ready_fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
  kt_status st = KT_OK;
  for (int redo = 1; !st && redo;) {
    w->t_mark = kt_now();
    w->cpu_mark = kt_thread_cpu_now();
    w->ready_mark = ready_now(w);
    redo = 0;
    st = kt__worker_rounds(w, err);
    if (!st) st = kt__step_validate_pending(w, o, &redo, err);
    /* only a step that runs again counts: a step this rank validated
     * already is the driver's to read (a write of 0 races its read) */
    if (redo) out->rollbacks++;
  }
  if (w->ready_fd >= 0) close(w->ready_fd);
  w->ready_fd = -1;
  return st || out->cancelled ? st : kt__step_end(w, o, err);
}
