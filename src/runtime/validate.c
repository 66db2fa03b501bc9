/* The step's end and its post-validation.
 *
 * After its actions a rank reduces its gradients (tied embeddings, data
 * parallel), then sends every other rank its record of the step: its share
 * of the squared global norm, its loss sum, which of its stages saw values
 * that were not finite, and its stop request. Every rank sums the records
 * in world-rank order, so every rank (and either step sync) gets the same
 * bits for the norm and the loss.
 *
 * With a barrier a rank waits for every record, then updates with the
 * clipping the norm asks for (none when a value is not finite). Without
 * one (the order's speculate) it updates at once with the gradients as
 * they are, keeping a copy of its weights, optimizer state and gradients,
 * unless its own share already says the update would be wrong (its part
 * of the norm above the clip, or its own values not finite) or the step
 * before needed its check (clipped or not finite: steps that clip tend to
 * follow each other, and a rollback costs a step): then it waits. The
 * records of the step are read after the next step's actions, when every
 * rank has sent them (every rank takes part in every micro-batch). When
 * the update was wrong every rank restores the copy, applies the right
 * update and runs the next step's actions again; ranks decide alike
 * because they read the same records. */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/internal.h"

typedef struct {
  double sq, loss;
  int32_t vote, speculated; /* the rank's update of the step ran before the check */
} record_head;

/* A record: its head, the rank's share of the squared norm by part
 * (kt__step_norm_parts), then per stage whether its forward output and
 * its gradients were finite. */
static size_t record_bytes(const kt_runtime *rt) {
  return sizeof(record_head) + sizeof(double) * (size_t)rt->n_parts + 2 * (size_t)rt->S;
}

static unsigned char *record_flags(const kt_runtime *rt, unsigned char *rec) {
  return rec + sizeof(record_head) + sizeof(double) * (size_t)rt->n_parts;
}

/* The records' tag, by the order's seq: 16 bits reach an MPI tag
 * (mpi_transport.c), and a few orders are in flight at most. */
static uint64_t record_tag(int seq) {
  return KT_TAG_COLLECTIVE | 0x4000u | ((unsigned)seq & 0x3FFu);
}

kt_status kt__step_alloc(kt__worker *w, kt_error *err) {
  kt_runtime *rt = w->rt;
  size_t world = (size_t)rt->P * (size_t)rt->D;
  w->pending = -1;
  w->records = kt_calloc(world, record_bytes(rt));
  if (!w->records) return kt_fail(err, KT_ENOMEM, "out of memory");
  if (rt->cfg.step_sync != KT_STEP_OVERLAP) return KT_OK;
  w->keep_params = kt_calloc((size_t)rt->V, sizeof *w->keep_params);
  w->keep_opt = kt_calloc((size_t)rt->V, sizeof *w->keep_opt);
  w->keep_grads = kt_calloc((size_t)rt->V, sizeof *w->keep_grads);
  if (!w->keep_params || !w->keep_opt || !w->keep_grads)
    return kt_fail(err, KT_ENOMEM, "out of memory");
  for (int c = 0; c < rt->V; c++) {
    size_t n;
    kt_chunk_params(w->chunk[c], &n);
    w->keep_params[c] = malloc((n ? n : 1) * sizeof(float));
    w->keep_grads[c] = malloc((n ? n : 1) * sizeof(float));
    w->keep_opt[c] = malloc((w->opt_n[c] ? w->opt_n[c] : 1) * sizeof(float));
    if (!w->keep_params[c] || !w->keep_opt[c] || !w->keep_grads[c])
      return kt_fail(err, KT_ENOMEM,
                     "out of memory for the copy of the weights a step may roll "
                     "back to (--step-sync barrier needs none)");
  }
  return KT_OK;
}

void kt__step_free(kt__worker *w) {
  for (int c = 0; w->keep_params && c < w->rt->V; c++) free(w->keep_params[c]);
  for (int c = 0; w->keep_opt && c < w->rt->V; c++) free(w->keep_opt[c]);
  for (int c = 0; w->keep_grads && c < w->rt->V; c++) free(w->keep_grads[c]);
  free(w->keep_params);
  free(w->keep_opt);
  free(w->keep_grads);
  free(w->records);
  w->keep_params = w->keep_opt = w->keep_grads = NULL;
  w->records = NULL;
}

int kt__stop_winner(const int *votes, int n) {
  int failed = 0, best = 0;
  static const int first[] = {SIGTERM, SIGINT, SIGUSR1};
  for (int i = 0; i < n; i++) failed |= votes[i] < 0;
  if (failed) return -1;
  for (int f = 0; f < 3; f++)
    for (int i = 0; i < n; i++)
      if (votes[i] == first[f]) return first[f];
  for (int i = 0; i < n; i++)
    if (votes[i] > 0 && (!best || votes[i] < best)) best = votes[i];
  return best;
}

/* This rank's record of the running step, kept in its own place. */
static void make_record(kt__worker *w, const kt__order *o, double sq, int speculated) {
  kt_runtime *rt = w->rt;
  unsigned char *rec = w->records + (size_t)w->world_rank * record_bytes(rt);
  record_head h = {.sq = sq, .loss = w->loss_sum, .vote = o->vote, .speculated = speculated};
  memcpy(rec, &h, sizeof h);
  unsigned char *fwd = record_flags(rt, rec), *grad = fwd + rt->S;
  memset(fwd, 0, (size_t)rt->S);
  for (int c = 0; c < rt->V; c++) {
    int stage = kt_rank_chunk_stage(&rt->sched_copy, w->stage_rank, c);
    if (stage >= 0) fwd[stage] = w->fwd_bad[c];
  }
  kt__step_grad_flags(w, grad);
}

static kt_status post_record(kt__worker *w, int seq, kt_error *err) {
  kt_runtime *rt = w->rt;
  size_t bytes = record_bytes(rt);
  const unsigned char *mine = w->records + (size_t)w->world_rank * bytes;
  for (int r = 0; r < rt->P * rt->D; r++) {
    if (r == w->world_rank) continue;
    kt_status st = kt_transport_send(w->t, r, record_tag(seq), mine, bytes, err);
    if (st) return st;
  }
  return KT_OK;
}

static kt_status collect_records(kt__worker *w, int seq, double *sync, kt_error *err) {
  kt_runtime *rt = w->rt;
  size_t bytes = record_bytes(rt);
  double t0 = kt_now();
  for (int r = 0; r < rt->P * rt->D; r++) {
    if (r == w->world_rank) continue;
    kt_status st =
        kt_transport_recv(w->t, r, record_tag(seq), w->records + (size_t)r * bytes, bytes, err);
    if (st) return st;
  }
  if (sync) *sync += kt_now() - t0;
  return KT_OK;
}

/* Where non-finite values first showed: the earliest stage whose forward
 * output (the loss on the last stage) was not, else the latest stage whose
 * gradients were not (backward runs from the last stage down). */
static void locate(const kt_runtime *rt, const unsigned char *fwd, const unsigned char *grad,
                   kt__step_out *out) {
  int S = rt->S;
  out->nonfinite_stage = S - 1;
  out->nonfinite_what = "loss";
  for (int s = S - 1; s >= 0; s--)
    if (grad[s]) {
      out->nonfinite_stage = s;
      out->nonfinite_what = "gradients";
      break;
    }
  for (int s = S - 1; s >= 0; s--)
    if (fwd[s])
      out->nonfinite_stage = s, out->nonfinite_what = s == S - 1 ? "loss" : "forward output";
}

static float clip_of(const kt_runtime *rt, double norm);

/* The step's figures from every rank's record: the same on every rank;
 * *speculated: some rank's update ran before the check. */
static kt_status figures(kt__worker *w, int step, kt__step_out *out, int *speculated) {
  kt_runtime *rt = w->rt;
  int world = rt->P * rt->D, S = rt->S;
  size_t bytes = record_bytes(rt);
  unsigned char *fwd = kt_calloc(2 * (size_t)S, 1);
  int *votes = kt_calloc((size_t)world, sizeof *votes);
  if (!fwd || !votes) {
    free(fwd), free(votes);
    return KT_ENOMEM;
  }
  double sq = 0, loss = 0;
  *speculated = 0;
  for (int r = 0; r < world; r++) {
    unsigned char *rec = w->records + (size_t)r * bytes;
    record_head h;
    memcpy(&h, rec, sizeof h);
    *speculated |= h.speculated;
    loss += h.loss;
    votes[r] = h.vote;
    for (int s = 0; s < 2 * S; s++) fwd[s] |= record_flags(rt, rec)[s];
  }
  /* the norm over this replica's pipeline, part by part in order: each
   * part is on one rank, so the sum has the same bits for any partition */
  for (int u = 0; u < rt->n_parts; u++)
    for (int r = w->replica; r < world; r += rt->D) {
      double x;
      memcpy(&x, w->records + (size_t)r * bytes + sizeof(record_head) + sizeof x * (size_t)u,
             sizeof x);
      if (x != 0) sq += x;
    }
  out->loss = loss / ((double)rt->K * rt->M * rt->D);
  out->grad_norm = sqrt(sq);
  out->lr = kt_optim_lr(&rt->cfg.optim, step);
  out->nonfinite = !isfinite(out->loss) || !isfinite(out->grad_norm);
  if (out->nonfinite) locate(rt, fwd, fwd + S, out);
  out->vote = kt__stop_winner(votes, world);
  w->last_wrong = out->nonfinite || clip_of(rt, out->grad_norm) != 1.0f;
  free(fwd);
  free(votes);
  return KT_OK;
}

/* The clipping the global norm asks for (1: none). */
static float clip_of(const kt_runtime *rt, double norm) {
  double c = rt->cfg.optim.grad_clip;
  return c > 0 && norm > c ? (float)(c / norm) : 1.0f;
}

/* Before an update checked behind it: the weights, the optimizer state
 * and the gradients (the next step's actions overwrite them); restore:
 * back to the weights and state from before it. */
typedef struct {
  float *to;
  const float *from;
} copy_job;

static void copy_range(void *ctx, size_t lo, size_t hi) {
  const copy_job *j = ctx;
  memcpy(j->to + lo, j->from + lo, (hi - lo) * sizeof(float));
}

/* to = from, n floats, on chunk c's compute threads. */
static void copy_floats(kt__worker *w, int c, float *to, const float *from, size_t n) {
  copy_job j = {to, from};
  kt_chunk_parallel(w->chunk[c], n, (size_t)1 << 16, copy_range, &j);
}

/* Back to the copy a step run ahead kept (kt__step_update_keeping). */
static void restore_kept(kt__worker *w) {
  for (int c = 0; c < w->rt->V; c++) {
    size_t n;
    float *p = kt_chunk_params(w->chunk[c], &n);
    copy_floats(w, c, p, w->keep_params[c], n);
    copy_floats(w, c, w->opt_state[c], w->keep_opt[c], w->opt_n[c]);
  }
}

/* The pending step checked (every rank checks it at the same point and
 * decides alike). *redo: some rank's update ran before the check and was
 * wrong, so what ran on it since must run again; this rank's own such
 * update is rolled back and the right one applied (none when a value was
 * not finite). */
static kt_status check_pending(kt__worker *w, int *redo, kt_error *err) {
  kt__step_out *out = &w->out[w->pending % KT__RING];
  int step = out->step;
  double sync = 0;
  /* a rank that waited at the step's end read the records then, and its
   * figures are out already (the caller may be reading them: the same
   * figures go to a copy) */
  kt_status st = w->pending_own ? collect_records(w, w->pending, &sync, err) : KT_OK;
  kt__step_out copy, *fig = out->valid ? &copy : out;
  int speculated;
  if (!st && figures(w, step, fig, &speculated)) st = kt_fail(err, KT_ENOMEM, "out of memory");
  if (st) return st;
  float clip = clip_of(w->rt, fig->grad_norm);
  int wrong = fig->nonfinite || clip != 1.0f;
  if (wrong && w->pending_own) { /* its gradients: the copy (the chunks hold the next step's) */
    restore_kept(w);
    if (!fig->nonfinite) kt__step_update(w, step, clip, w->keep_grads);
  }
  *redo = wrong && speculated;
  w->pending = -1;
  if (!out->valid) {
    out->sync_seconds += sync;
    kt__worker_validated(w, out);
  }
  return KT_OK;
}

kt_status kt__step_validate_pending(kt__worker *w, const kt__order *o, int *redo, kt_error *err) {
  *redo = 0;
  if (w->pending < 0) return KT_OK;
  const kt__step_out *before = &w->out[w->pending % KT__RING];
  kt_status st = check_pending(w, redo, err);
  if (st || !*redo) return st;
  if (before->nonfinite && o->stop_on_nonfinite) { /* the run stops: this step is not applied */
    kt__step_out *out = &w->out[o->seq % KT__RING];
    out->cancelled = 1;
    *redo = 0;
    kt__worker_validated(w, out);
  }
  return KT_OK;
}

/* What this rank's own share already says: the update will be clipped, or
 * a value is not finite. */
static int surely_wrong(const kt__worker *w, double sq) {
  double c = w->rt->cfg.optim.grad_clip;
  if (!isfinite(sq) || !isfinite(w->loss_sum) || (c > 0 && sq > c * c)) return 1;
  for (int k = 0; k < w->rt->V; k++)
    if (w->fwd_bad[k]) return 1;
  return 0;
}

/* This rank's norm parts into its record (rec), and their total. */
static double norm_parts(kt__worker *w, unsigned char *rec) {
  double *parts = kt_calloc((size_t)w->rt->n_parts + 1, sizeof *parts);
  if (!parts) return NAN; /* the step is then not applied: a failure would be no better */
  double sq = kt__step_norm_parts(w, parts);
  memcpy(rec + sizeof(record_head), parts, sizeof *parts * (size_t)w->rt->n_parts);
  free(parts);
  return sq;
}

kt_status kt__step_end(kt__worker *w, const kt__order *o, kt_error *err) {
  if (o->flush) {
    int redo;
    return check_pending(w, &redo, err);
  }
  kt__step_out *out = &w->out[o->seq % KT__RING];
  double t0 = kt_now(), sync = 0;
  kt_status st = kt__step_reduce(w, &sync, err);
  unsigned char *mine = w->records + (size_t)w->world_rank * record_bytes(w->rt);
  double sq = st ? 0 : norm_parts(w, mine);
  /* ahead unless the step before needed its check (clipped, not finite:
   * the next one likely does too, and every rank knows it alike) or this
   * rank's own share says this one does */
  int alone = w->rt->P * w->rt->D == 1; /* no record to wait for: nothing to run ahead of */
  int ahead = !alone && o->update && o->speculate && w->keep_params && !w->last_wrong &&
              !surely_wrong(w, sq);
  if (!st) make_record(w, o, sq, ahead);
  if (!st) st = post_record(w, o->seq, err);
  if (st) return st;
  if (!ahead) { /* the barrier, or a step this rank knows needs it */
    int speculated;
    if ((st = collect_records(w, o->seq, &sync, err))) return st;
    if (figures(w, o->step, out, &speculated)) return kt_fail(err, KT_ENOMEM, "out of memory");
    if (o->update && !out->nonfinite)
      kt__step_update(w, o->step, clip_of(w->rt, out->grad_norm), NULL);
  } else { /* on what this rank has: checked after the next step's actions */
    kt__step_update_keeping(w, o->step);
  }
  /* every rank checks a step that may have run ahead at the same point,
   * its own update right or not */
  if (o->speculate && o->update) w->pending = o->seq, w->pending_own = ahead;
  out->done = kt_now();
  out->sync_seconds += sync;
  out->tail_seconds = out->done - t0 - sync;
  out->waited = !ahead && !alone;
  double send_s, wait_s;
  kt_transport_stats(w->t, &out->bytes_sent, &send_s, &wait_s);
  out->comm_seconds = send_s + wait_s;
  if (!ahead) kt__worker_validated(w, out);
  return KT_OK;
}
