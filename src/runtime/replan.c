/* A new plan between steps (kt_runtime_replan): another order of the same
 * layout, and units moved between stages with their weights and optimizer
 * state. Every local worker gets new chunks for the stages whose units
 * change; a unit's record (its parameters, then each optimizer state
 * slice) is copied from the old chunk that held it when that one is in
 * this process, and sent by the process that held it otherwise (every
 * process sends first, then receives: the transports copy a message out
 * when it is posted). */
#include <stdlib.h>
#include <string.h>

#include "runtime/internal.h"

#define MOVE_TAG(u) (KT_TAG_COLLECTIVE | 0x2000u | ((unsigned)(u)&0x1FFFu))

/* Whether nothing is in flight: every step's result taken (only flushes
 * after it), so every worker is done with its orders or about to be (it
 * validated them; it is waited for), and the last step checked. */
static int between_steps(kt_runtime *rt) {
  int ok = 1;
  for (int q = rt->completed; q < rt->submitted; q++) ok &= rt->orders[q % KT__RING].flush;
  if (!ok) return 0;
  pthread_mutex_lock(&rt->lock);
  for (int i = 0; i < rt->n_local; i++)
    while (rt->workers[i].next_order != rt->submitted && !rt->workers[i].status)
      pthread_cond_wait(&rt->done, &rt->lock);
  for (int i = 0; i < rt->n_local; i++)
    ok &= rt->workers[i].next_order == rt->submitted && rt->workers[i].pending < 0 &&
          !rt->workers[i].status;
  pthread_mutex_unlock(&rt->lock);
  return ok;
}

static kt_status same_layout(const kt_runtime *rt, const kt_schedule *s, kt_error *err) {
  if (s->p != rt->P || s->v != rt->V || s->m != rt->M)
    return kt_fail(err, KT_EINVAL, "a new plan keeps P=%d, V=%d, M=%d; %s has P=%d, V=%d, M=%d",
                   rt->P, rt->V, rt->M, s->name, s->p, s->v, s->m);
  for (int st = 0; st < rt->S; st++)
    if (kt_stage_rank(s, st) != kt_stage_rank(&rt->sched_copy, st))
      return kt_fail(err, KT_EINVAL,
                     "a new plan keeps each stage on its rank; %s puts stage %d on "
                     "rank %d, not %d",
                     s->name, st, kt_stage_rank(s, st), kt_stage_rank(&rt->sched_copy, st));
  return KT_OK;
}

/* The stage whose units hold u under offsets off (S + 1 of them). */
static int stage_of(const int *off, int S, int u) {
  int s = 0;
  while (s + 1 < S && off[s + 1] <= u) s++;
  return s;
}

/* Optimizer state floats per parameter (0, 1 or 2). */
static int state_per(const kt_runtime *rt) {
  const kt_optim_config *o = &rt->cfg.optim;
  return o->kind == KT_OPTIM_ADAMW ? 2 : o->momentum != 0 ? 1 : 0;
}

/* Unit u's slice of chunk c (its parameters, *n of them, at *off). */
static float *unit_slice(kt_chunk *c, int u, size_t *off, size_t *n, size_t *n_params) {
  int first;
  const size_t *o = kt_chunk_unit_offsets(c, &first, NULL);
  *off = o[u - first], *n = o[u - first + 1] - o[u - first];
  return kt_chunk_params(c, n_params);
}

/* Copies unit u between a chunk and a record (to_record: into rec). */
static void unit_record(kt_chunk *c, const float *state, int per, int u, float *rec, int to_record,
                        float *state_out) {
  size_t off, n, np;
  float *p = unit_slice(c, u, &off, &n, &np);
  if (to_record) {
    memcpy(rec, p + off, n * sizeof *rec);
    for (int k = 0; k < per; k++)
      memcpy(rec + (size_t)(k + 1) * n, state + k * np + off, n * sizeof *rec);
    return;
  }
  memcpy(p + off, rec, n * sizeof *rec);
  for (int k = 0; k < per; k++)
    memcpy(state_out + k * np + off, rec + (size_t)(k + 1) * n, n * sizeof *rec);
}

/* The local worker of world rank wr, or NULL (another process). */
static kt__worker *local_worker(kt_runtime *rt, int wr) {
  for (int i = 0; i < rt->n_local; i++)
    if (rt->workers[i].world_rank == wr) return &rt->workers[i];
  return NULL;
}

/* Sends every unit this process holds that moves to a rank of another
 * process. */
static kt_status send_moving(kt_runtime *rt, const int *to, float *rec, kt_error *err) {
  int per = state_per(rt);
  for (int i = 0; i < rt->n_local; i++) {
    kt__worker *w = &rt->workers[i];
    for (int c = 0; c < rt->V; c++) {
      int st = kt_rank_chunk_stage(&rt->sched_copy, w->stage_rank, c);
      for (int u = st < 0 ? 0 : rt->unit_offset[st]; st >= 0 && u < rt->unit_offset[st + 1]; u++) {
        int dst = kt_world_rank(kt_stage_rank(&rt->sched_copy, stage_of(to, rt->S, u)), w->replica,
                                rt->D);
        if (dst == w->world_rank || local_worker(rt, dst)) continue;
        size_t off, n, np;
        unit_slice(w->chunk[c], u, &off, &n, &np);
        unit_record(w->chunk[c], w->opt_state[c], per, u, rec, 1, NULL);
        kt_status s = kt_transport_send(w->t, dst, MOVE_TAG(u), rec,
                                        (size_t)(1 + per) * n * sizeof *rec, err);
        if (s) return s;
      }
    }
  }
  return KT_OK;
}

/* Fills unit u of worker w's new chunk c (state: its new optimizer state)
 * from the old chunk that held it: here, or received. */
static kt_status fill_unit(kt_runtime *rt, kt__worker *w, kt_chunk *c, float *state, int u,
                           float *rec, kt_error *err) {
  int per = state_per(rt), old = stage_of(rt->unit_offset, rt->S, u);
  int src = kt_world_rank(kt_stage_rank(&rt->sched_copy, old), w->replica, rt->D);
  kt__worker *from = local_worker(rt, src);
  size_t off, n, np;
  unit_slice(c, u, &off, &n, &np);
  if (from) {
    int oc = kt_stage_chunk(&rt->sched_copy, old);
    unit_record(from->chunk[oc], from->opt_state[oc], per, u, rec, 1, NULL);
  } else {
    kt_status s =
        kt_transport_recv(w->t, src, MOVE_TAG(u), rec, (size_t)(1 + per) * n * sizeof *rec, err);
    if (s) return s;
  }
  unit_record(c, NULL, per, u, rec, 0, state);
  return KT_OK;
}

/* The new chunks (and their optimizer state) of every local worker whose
 * stage's units change, filled; NULL where a chunk stays. */
static kt_status build_new(kt_runtime *rt, const int *to, kt_chunk **fresh, float **state,
                           float *rec, kt_error *err) {
  int per = state_per(rt);
  kt_status s = KT_OK;
  for (int i = 0; i < rt->n_local && !s; i++) {
    kt__worker *w = &rt->workers[i];
    for (int c = 0; c < rt->V && !s; c++) {
      int st = kt_rank_chunk_stage(&rt->sched_copy, w->stage_rank, c);
      if (st < 0 || (to[st] == rt->unit_offset[st] && to[st + 1] == rt->unit_offset[st + 1]))
        continue;
      kt_chunk **ch = &fresh[i * rt->V + c];
      if ((s = kt__chunk_for(rt, st, to[st], to[st + 1] - to[st], ch, err))) break;
      size_t np;
      kt_chunk_params(*ch, &np);
      if (per && !(state[i * rt->V + c] = kt_calloc((size_t)per * np, sizeof(float))))
        s = kt_fail(err, KT_ENOMEM, "out of memory for optimizer state");
      for (int u = to[st]; !s && u < to[st + 1]; u++)
        s = fill_unit(rt, w, *ch, state[i * rt->V + c], u, rec, err);
    }
  }
  return s;
}

/* Each worker takes its new chunks: the old ones go, with the state, the
 * decay masks and the rollback copies sized for them. */
static kt_status take_new(kt_runtime *rt, kt_chunk **fresh, float **state, kt_error *err) {
  kt_status s = KT_OK;
  for (int i = 0; i < rt->n_local; i++) {
    kt__worker *w = &rt->workers[i];
    for (int c = 0; c < rt->V; c++) {
      if (!fresh[i * rt->V + c]) continue;
      kt_chunk_destroy(w->chunk[c]);
      free(w->opt_state[c]);
      w->chunk[c] = fresh[i * rt->V + c], w->opt_state[c] = state[i * rt->V + c];
      fresh[i * rt->V + c] = NULL, state[i * rt->V + c] = NULL;
      size_t np;
      kt_chunk_params(w->chunk[c], &np);
      w->opt_n[c] = (size_t)state_per(rt) * np;
    }
    for (int c = 0; w->decay && c < rt->V; c++) free(w->decay[c]);
    free(w->decay);
    s = kt__optim_decay_masks(w, err);
    kt__step_free(w);
    if (!s) s = kt__step_alloc(w, err);
    if (!s) s = kt__worker_buffers(w, err);
    if (s) return s;
  }
  return KT_OK;
}

/* The most floats a unit's record takes: every unit's parameters are at
 * most those of the largest chunk, old or new (a process may receive a
 * larger unit than any it holds). */
static size_t record_floats(const kt_runtime *rt, const int *to) {
  size_t most = 0;
  if (rt->cfg.synthetic) { /* units of one size */
    for (int i = 0; i < rt->n_local; i++)
      for (int c = 0; c < rt->V; c++) {
        int first, n;
        const size_t *o = kt_chunk_unit_offsets(rt->workers[i].chunk[c], &first, &n);
        if (n > 0 && o[1] > most) most = o[1];
      }
  } else {
    for (int u = 0; u < to[rt->S]; u++) {
      size_t n = kt_model_unit_params(&rt->cfg.model, u);
      most = n > most ? n : most;
    }
  }
  return (size_t)(1 + state_per(rt)) * most + 1;
}

/* Moves the units to offsets to (S + 1). */
static kt_status move_units(kt_runtime *rt, const int *to, kt_error *err) {
  size_t slots = (size_t)rt->n_local * (size_t)rt->V;
  kt_chunk **fresh = kt_calloc(slots, sizeof *fresh);
  float **state = kt_calloc(slots, sizeof *state);
  float *rec = malloc(record_floats(rt, to) * sizeof *rec); /* a unit's record at most */
  kt_status s = fresh && state && rec ? KT_OK : kt_fail(err, KT_ENOMEM, "out of memory");
  if (!s && !kt_runtime_all_local(rt)) s = send_moving(rt, to, rec, err);
  if (!s) s = build_new(rt, to, fresh, state, rec, err);
  if (!s) s = take_new(rt, fresh, state, err);
  if (!s) memcpy(rt->unit_offset, to, sizeof *to * ((size_t)rt->S + 1));
  for (size_t k = 0; fresh && state && k < slots; k++) {
    if (fresh[k]) kt_chunk_destroy(fresh[k]);
    free(state[k]);
  }
  free(fresh), free(state), free(rec);
  return s;
}

/* The offsets a partition gives (S + 1), checked against the units. */
static kt_status offsets_of(const kt_runtime *rt, const int *partition, int *to, kt_error *err) {
  if (rt->cfg.make_chunk || (rt->cfg.synthetic && rt->cfg.syn_units <= 0))
    return kt_fail(err, KT_EINVAL, "a model %s has no units to partition anew",
                   rt->cfg.make_chunk ? "of the caller's own" : "of one synthetic unit per stage");
  to[0] = 0;
  for (int st = 0; st < rt->S; st++) {
    if (partition[st] < 1) return kt_fail(err, KT_EINVAL, "stage %d of the partition is empty", st);
    to[st + 1] = to[st] + partition[st];
  }
  if (to[rt->S] != rt->unit_offset[rt->S])
    return kt_fail(err, KT_EINVAL, "the partition covers %d layers, the model has %d", to[rt->S],
                   rt->unit_offset[rt->S]);
  return KT_OK;
}

kt_status kt_runtime_replan(kt_runtime *rt, const kt_schedule *s, const int *partition,
                            kt_error *err) {
  if (!between_steps(rt))
    return kt_fail(err, KT_EINVAL,
                   "a new plan only between steps: take every step's result and "
                   "flush the last one first");
  kt_status st = same_layout(rt, s, err);
  int *to = kt_calloc((size_t)rt->S + 1, sizeof *to);
  if (!st && !to) st = kt_fail(err, KT_ENOMEM, "out of memory");
  if (!st && partition) st = offsets_of(rt, partition, to, err);
  kt_schedule sched = {0}, program = {0};
  if (!st) st = kt__build_program(s, rt->posts, &sched, &program, err);
  int moves = 0;
  for (int i = 0; !st && partition && i <= rt->S; i++) moves |= to[i] != rt->unit_offset[i];
  if (!st && moves) st = move_units(rt, to, err);
  if (!st) { /* the same layout: only the lists change (rt->cfg.schedule stays &sched_copy) */
    kt_schedule tmp = rt->sched_copy;
    rt->sched_copy = sched, sched = tmp;
    tmp = rt->program, rt->program = program, program = tmp;
    for (int i = 0; !st && i < rt->n_local; i++) st = kt__worker_resolve(&rt->workers[i], err);
    rt->plans++;
  }
  kt_schedule_free(&sched);
  kt_schedule_free(&program);
  free(to);
  return st;
}
