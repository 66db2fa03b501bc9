/* A rank's worker: runs its action list in order on its chunks, receiving and
 * sending boundary tensors, and records what it did. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/internal.h"

#define HANDOFF(w, stage, mb) ((size_t)(stage) * (size_t)(w)->rt->M + (size_t)(mb))

static kt_chunk *chunk_of(kt__worker *w, int stage) {
  return w->chunk[kt_stage_chunk(&w->rt->sched_copy, stage)];
}

/* Waits for a peer's tensor; turns a timeout into the watchdog's message. */
static kt_status recv_tensor(kt__worker *w, const kt_action *a, int peer, uint64_t tag, float *buf,
                             size_t elems, const char *what, double *wait, kt_error *err) {
  double t0 = kt_now();
  kt_error sub;
  kt_status st = w->t->ops->recv(w->t, peer, tag, buf, elems * sizeof(float), &sub);
  *wait += kt_now() - t0;
  if (st == KT_ETIMEOUT) {
    char at[32];
    kt_action_format(a, at, sizeof at);
    return kt_fail(err, st,
                   "watchdog: rank %d (stage %d) waited %g s at action %s for the %s from rank %d "
                   "(stage %d)",
                   w->world_rank, a->stage, w->t->timeout, at, what, peer,
                   a->op == KT_OP_F ? a->stage - 1 : a->stage + 1);
  }
  if (st) return kt_fail(err, st, "%s", sub.msg);
  return KT_OK;
}

static kt_status keep_local(float **slot, const float *src, size_t elems, kt_error *err) {
  float *buf = malloc(elems * sizeof(float) + 16);
  if (!buf) return kt_fail(err, KT_ENOMEM, "out of memory handing over a tensor");
  memcpy(buf, src, elems * sizeof(float));
  free(*slot);
  *slot = buf;
  return KT_OK;
}

static kt_status run_forward(kt__worker *w, const kt_action *a, const kt_microbatch *mbd, int k,
                             double *wait, int64_t *bytes, kt_error *err) {
  kt_runtime *rt = w->rt;
  int s = a->stage, j = a->mb, d = w->replica;
  kt_chunk *c = chunk_of(w, s);
  const float *in = NULL;
  float *taken = NULL;
  kt_status st;
  if (s > 0) {
    int src = kt__stage_world_rank(rt, s - 1, d);
    if (src == w->world_rank) {
      taken = w->act_handoff[HANDOFF(w, s, j)];
      w->act_handoff[HANDOFF(w, s, j)] = NULL;
      if (!taken) return kt_fail(err, KT_ERUNTIME, "rank %d: F%d of stage %d before its input", w->world_rank, j, s);
      in = taken;
    } else {
      st = recv_tensor(w, a, src, kt_tag(KT_TAG_ACT, s, j, k), w->in_buf, c->in_elems,
                       "activation", wait, err);
      if (st) return st;
      in = w->in_buf;
    }
  }
  double loss = 0;
  float *out = s + 1 < rt->S ? w->out_buf : NULL;
  st = c->ops->forward(c, j, mbd, in, out, &loss, err);
  free(taken);
  if (st) return st;
  unsigned char *bad = &w->fwd_bad[kt_stage_chunk(&rt->sched_copy, s)];
  if (!rt->cfg.synthetic && !*bad) { /* synthetic tensors hold no values */
    *bad = out ? 0 : !isfinite(loss);
    for (size_t i = 0; out && i < c->out_elems && !*bad; i++) *bad = !isfinite(out[i]);
  }
  if (!out) {
    w->loss_sum += loss;
    return KT_OK;
  }
  int dst = kt__stage_world_rank(rt, s + 1, d);
  if (dst == w->world_rank) return keep_local(&w->act_handoff[HANDOFF(w, s + 1, j)], out, c->out_elems, err);
  *bytes += (int64_t)(c->out_elems * sizeof(float));
  return w->t->ops->send(w->t, dst, kt_tag(KT_TAG_ACT, s + 1, j, k), out,
                         c->out_elems * sizeof(float), err);
}

static kt_status run_backward_input(kt__worker *w, const kt_action *a, const kt_microbatch *mbd,
                                    int k, double *wait, int64_t *bytes, kt_error *err) {
  kt_runtime *rt = w->rt;
  int s = a->stage, j = a->mb, d = w->replica;
  kt_chunk *c = chunk_of(w, s);
  const float *dout = NULL;
  float *taken = NULL;
  kt_status st;
  if (s + 1 < rt->S) {
    int src = kt__stage_world_rank(rt, s + 1, d);
    if (src == w->world_rank) {
      taken = w->grad_handoff[HANDOFF(w, s, j)];
      w->grad_handoff[HANDOFF(w, s, j)] = NULL;
      if (!taken) return kt_fail(err, KT_ERUNTIME, "rank %d: backward %d of stage %d before its gradient", w->world_rank, j, s);
      dout = taken;
    } else {
      st = recv_tensor(w, a, src, kt_tag(KT_TAG_GRAD, s, j, k), w->dout_buf, c->out_elems,
                       "gradient", wait, err);
      if (st) return st;
      dout = w->dout_buf;
    }
  }
  float *din = s > 0 ? w->din_buf : NULL;
  st = c->ops->backward_input(c, j, mbd, dout, din, err);
  free(taken);
  if (st || !din) return st;
  int dst = kt__stage_world_rank(rt, s - 1, d);
  if (dst == w->world_rank) return keep_local(&w->grad_handoff[HANDOFF(w, s - 1, j)], din, c->in_elems, err);
  *bytes += (int64_t)(c->in_elems * sizeof(float));
  return w->t->ops->send(w->t, dst, kt_tag(KT_TAG_GRAD, s - 1, j, k), din,
                         c->in_elems * sizeof(float), err);
}

static size_t rank_stash_bytes(const kt__worker *w) {
  size_t n = 0;
  for (int c = 0; c < w->rt->V; c++) n += w->chunk[c]->stash_bytes;
  return n;
}

/* Test hook: a hung rank sleeps (abortably) well past the watchdog. */
static void hang(kt__worker *w) {
  double until = kt_now() + 3 * w->t->timeout + 1;
  while (kt_now() < until) {
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    if (w->t->ops->aborted(w->t)) return;
  }
}

/* Announces every remote tensor this round will receive (MPI posts the
 * receives now, so transfers progress while the rank computes). */
static kt_status post_receives(kt__worker *w, const kt_rank_actions *ra, int k, kt_error *err) {
  kt_runtime *rt = w->rt;
  if (!w->t->ops->post) return KT_OK;
  for (size_t i = 0; i < ra->n; i++) {
    const kt_action *a = &ra->actions[i];
    kt_chunk *c = chunk_of(w, a->stage);
    kt_status st = KT_OK;
    if (a->op == KT_OP_F && a->stage > 0) {
      int src = kt__stage_world_rank(rt, a->stage - 1, w->replica);
      if (src != w->world_rank)
        st = w->t->ops->post(w->t, src, kt_tag(KT_TAG_ACT, a->stage, a->mb, k),
                             c->in_elems * sizeof(float), err);
    } else if ((a->op == KT_OP_I || a->op == KT_OP_B) && a->stage + 1 < rt->S) {
      int src = kt__stage_world_rank(rt, a->stage + 1, w->replica);
      if (src != w->world_rank)
        st = w->t->ops->post(w->t, src, kt_tag(KT_TAG_GRAD, a->stage, a->mb, k),
                             c->out_elems * sizeof(float), err);
    }
    if (st) return st;
  }
  return KT_OK;
}

kt_status kt__worker_step(kt__worker *w, kt_error *err) {
  kt_runtime *rt = w->rt;
  const kt_rank_actions *ra = &rt->sched_copy.ranks[w->stage_rank];
  w->loss_sum = 0;
  memset(w->fwd_bad, 0, sizeof w->fwd_bad);
  w->events.n_events = w->events.n_mem = 0;
  for (int c = 0; c < rt->V; c++) {
    kt_chunk_zero_grad(w->chunk[c]);
    w->chunk[c]->peak_stash_bytes = w->chunk[c]->stash_bytes;
  }
  for (int k = 0; k < rt->K; k++) {
    kt_status pst = post_receives(w, ra, k, err);
    if (pst) return pst;
    for (size_t i = 0; i < ra->n; i++) {
      const kt_action *a = &ra->actions[i];
      if (w->world_rank == rt->cfg.hang_rank && (int)i == rt->cfg.hang_action && k == 0) hang(w);
      const kt_microbatch *mbd =
          w->data ? &w->data[((size_t)w->replica * rt->K + k) * rt->M + a->mb] : NULL;
      double wait = 0, t_begin = kt_now();
      int64_t bytes = 0;
      kt_status st;
      /* compute starts once the input arrived; the wait shows as idle */
      switch (a->op) {
        case KT_OP_F: st = run_forward(w, a, mbd, k, &wait, &bytes, err); break;
        case KT_OP_I: st = run_backward_input(w, a, mbd, k, &wait, &bytes, err); break;
        case KT_OP_B:
          st = run_backward_input(w, a, mbd, k, &wait, &bytes, err);
          if (!st) st = chunk_of(w, a->stage)->ops->backward_weight(chunk_of(w, a->stage), a->mb, err);
          break;
        case KT_OP_W:
          st = chunk_of(w, a->stage)->ops->backward_weight(chunk_of(w, a->stage), a->mb, err);
          break;
        default: st = kt_fail(err, KT_EINVALID_SCHEDULE, "bad op %d", a->op);
      }
      if (st) return st;
      double t_end = kt_now();
      kt_event e = {.rank = w->stage_rank, .stage = a->stage, .mb = a->mb, .op = a->op,
                    .flags = a->flags, .start = t_begin + wait - rt->step_t0,
                    .end = t_end - rt->step_t0, .bytes = bytes, .comm_time = wait};
      if (kt_timeline_add_event(&w->events, &e) ||
          kt_timeline_add_mem(&w->events, w->stage_rank, e.end, (double)rank_stash_bytes(w)))
        return kt_fail(err, KT_ENOMEM, "out of memory recording the timeline");
    }
  }
  return kt__worker_finish_step(w, err);
}
