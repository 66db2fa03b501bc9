/* kt_session_run: the steps, with what each one's end brings (its record in
 * metrics.jsonl, the caller's progress callback, a checkpoint when due, the
 * stop every rank agrees on), then the end of the run (the final
 * checkpoint, the traced step's timelines, the layout's segment). Under MPI
 * every rank takes the same decisions: a stop asked on one rank is agreed
 * on by all after each step. */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "train/session_internal.h"

/* Vote slots: a failure, then reasons 1..KT_STOP_MAX. */
#define SLOTS (KT_STOP_MAX + 1)

static int clamp_reason(int r) {
  return r < 0 ? KT__STOP_FAILED : r > KT_STOP_MAX ? KT_STOP_MAX : r;
}

/* The winner among the requests voted: a failure, then SIGTERM, SIGINT,
 * SIGUSR1, then the smallest reason. */
static int winner(const float *votes) {
  if (votes[0] > 0) return KT__STOP_FAILED;
  static const int first[] = {SIGTERM, SIGINT, SIGUSR1};
  for (int i = 0; i < 3; i++)
    if (first[i] <= KT_STOP_MAX && votes[first[i]] > 0) return first[i];
  for (int r = 1; r <= KT_STOP_MAX; r++)
    if (votes[r] > 0) return r;
  return 0;
}

int kt__session_agree(kt_session *s, int request) {
  request = clamp_reason(request);
  if (!s->p.use_mpi || !s->mpi_t) return request;
  float votes[SLOTS] = {0};
  votes[request == KT__STOP_FAILED ? 0 : request] = request != 0;
  kt_error err;
  if (kt_allreduce(s->mpi_t, KT_GROUP_WORLD, votes, SLOTS, &err) != KT_OK) return KT__STOP_FAILED;
  return winner(votes);
}

static void fail_in_step(kt_session *s, kt_status st, const kt_error *err) {
  if (s->fail_status) return;
  s->fail_status = st;
  s->fail_err = *err;
}

/* After a checkpoint of step `step` is written: the older ones beyond
 * keep_checkpoints go (rank 0 holds the files). One that cannot be
 * removed costs disk space, not the run: the run goes on. */
static void prune_checkpoints(const kt_session *s, int step) {
  kt_error err;
  if (s->world_rank == 0)
    (void)kt_checkpoint_prune(s->p.run_dir, s->p.keep_checkpoints, step, NULL, &err);
}

/* Whether a checkpoint is due after step (0-based): every checkpoint_every
 * steps, before the last (which the end of the run writes). Such a step
 * ends with a barrier: a checkpoint holds validated weights. */
static int checkpoint_at(void *ctx, int step) {
  const kt_session *s = ctx;
  int every = s->p.checkpoint_every, done = step + 1;
  return s->p.run_dir && !s->p.synthetic && !s->p.make_chunk && every > 0 && done % every == 0 &&
         done < s->p.steps;
}

/* Where the next step waits for this one everywhere: a checkpoint after
 * it, or the autopilot's switch. */
static int barrier_at(void *ctx, int step) {
  return checkpoint_at(ctx, step) || kt__session_autopilot_due(ctx);
}

/* The checkpoint due after this step, unless some rank failed. */
static void checkpoint_due(kt_session *s, const kt_train_progress *p) {
  int done = p->step + 1;
  if (!checkpoint_at(s, p->step)) return;
  if (kt__session_agree(s, s->fail_status ? KT__STOP_FAILED : 0) != 0) return;
  kt_error err = {{0}};
  s->meta.step = done;
  kt_status st = kt_checkpoint_save_in_run(s->rt, s->p.run_dir, &s->meta, &err);
  if (st) fail_in_step(s, st, &err);
  else prune_checkpoints(s, done);
}

static int by_rank_start(const void *a, const void *b) {
  const kt_event *x = a, *y = b;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  return x->start < y->start ? -1 : x->start > y->start;
}

/* Why the step idled, into each rank's record (NAN where unknown): the
 * step's events against its K rounds (s->rounds), each round's
 * micro-batches numbered on as kt_schedule_repeat numbers them. Where the
 * step's events are not all here (MPI ranks but world rank 0) nothing. */
static void idle_causes(kt_session *s, const kt_train_progress *p, kt_run_rank_step *ranks, int n) {
  for (int r = 0; r < n; r++) ranks[r].idle = (kt_idle_split){NAN, NAN, NAN, NAN, NAN, NAN};
  s->result.idle = NULL;
  const kt_timeline *t = p->timeline;
  const kt_schedule *rs = &s->rounds;
  if (!t || !rs->ranks || t->n_events != kt_schedule_total_actions(rs) || t->n_events == 0) return;
  kt_event *ev = malloc(t->n_events * sizeof *ev);
  if (!ev) return;
  memcpy(ev, t->events, t->n_events * sizeof *ev);
  qsort(ev, t->n_events, sizeof *ev, by_rank_start);
  int M = s->sched.m, K = M > 0 ? rs->m / M : 1;
  for (size_t i = 0, k = 0; i < t->n_events; i++, k++) {
    if (i > 0 && ev[i].rank != ev[i - 1].rank) k = 0;
    int r = ev[i].rank;
    size_t per_round = r >= 0 && r < rs->p && K > 0 ? rs->ranks[r].n / (size_t)K : 0;
    if (per_round) ev[i].mb += (int32_t)(k / per_round) * M;
  }
  kt_timeline tl = *t;
  tl.events = ev;
  kt_error err;
  if (kt_idle_split_step(rs, &tl, p->seconds, s->p.step_sync, s->idle, &err) == KT_OK) {
    for (int r = 0; r < n && r < rs->p; r++) ranks[r].idle = s->idle[r];
    s->result.idle = s->idle, s->result.idle_seconds = p->seconds;
  }
  free(ev);
}

static int on_step(void *ctx, const kt_train_progress *tp) {
  kt_session *s = ctx;
  kt_error err = {{0}};
  kt_train_progress p = *tp;
  kt_run_step rec = {.step = p.step + 1,
                     .skipped = p.skipped,
                     .loss = p.loss,
                     .val_loss = p.val_loss,
                     .lr = p.lr,
                     .grad_norm = p.grad_norm,
                     .seconds = p.seconds,
                     .tokens_per_s = p.tokens_per_s,
                     .samples_per_s = p.samples_per_s,
                     .bubble = p.bubble};
  int n = kt__session_step_ranks(p.timeline, s->ranks, s->sched.p);
  p.record = &rec, p.ranks = s->ranks, p.n_ranks = n > 0 ? n : 0;
  idle_causes(s, &p, s->ranks, p.n_ranks);
  kt__session_autopilot_step(s, &p, &rec);
  kt_status st = kt__session_docs_step(s, &p, &err);
  if (!st && s->rd)
    st = n < 0 ? kt_fail(&err, KT_ENOMEM, "out of memory")
               : kt_rundir_append_step(s->rd, &rec, s->ranks, n, &err);
  if (st) fail_in_step(s, st, &err);
  int request = s->p.on_step ? s->p.on_step(s->p.ctx, &p) : 0;
  checkpoint_due(s, &p);
  if (!request && s->p.should_stop) request = s->p.should_stop(s->p.ctx);
  request = s->fail_status ? KT__STOP_FAILED : request;
  /* at a barrier every rank agrees now; else the next step already runs and
   * the request goes to every rank with the one after it (the trainer
   * carries it), and what every rank agreed on comes back with a step */
  int was = s->stop;
  if (!was) s->stop = p.barrier || !s->p.use_mpi ? kt__session_agree(s, request) : p.agreed;
  if (s->stop > 0 && !was && p.barrier)
    kt__session_note(s, KT_NOTE_STOPPING, NULL, s->stop,
                     "every rank stops after step %d (reason %d)", p.step + 1, s->stop);
  else if (s->stop > 0 && !was)
    kt__session_note(s, KT_NOTE_STOPPING, NULL, s->stop,
                     "every rank stops after the steps under way, from step %d (reason %d)",
                     p.step + 1, s->stop);
  return p.barrier ? s->stop != 0 : request;
}

/* Asked while a step runs (kt_train_config.should_stop): the caller's
 * request, or a failure noted. */
static int poll_stop(void *ctx) {
  kt_session *s = ctx;
  return s->fail_status || (s->p.should_stop && s->p.should_stop(s->p.ctx));
}

/* The end of the run: the final checkpoint (collective under MPI), then on
 * rank 0 the timelines and this segment's result in config.json. */
static kt_status finish_run(kt_session *s, kt_error *err) {
  const kt_train_result *res = &s->result.train;
  if (!s->p.run_dir || res->n_losses == 0) return KT_OK;
  kt_status st = KT_OK;
  if (!s->p.synthetic && !s->p.make_chunk) {
    s->meta.step = s->first_step + res->n_losses;
    st = kt_checkpoint_save_in_run(s->rt, s->p.run_dir, &s->meta, err);
    if (!st) prune_checkpoints(s, s->meta.step);
  }
  if (st || !s->rd) return st;
  st = kt__session_write_timelines(s, err);
  kt_run_segment *seg = &s->cfg.segments[s->cfg.n_segments - 1];
  seg->last_step = s->first_step + res->n_losses;
  seg->predicted_bubble = res->predicted.bubble_ratio;
  seg->measured_bubble = res->measured.bubble_ratio;
  seg->predicted_period = res->predicted.period;
  seg->period_1f1b = s->result.period_1f1b;
  if (!st) st = kt_rundir_write_config(s->rd, &s->cfg, err);
  return st;
}

/* The starting weights, before any step (every rank takes part: the file
 * gathers all units). */
static kt_status save_init(kt_session *s, kt_error *err) {
  if (!s->p.save_init) return KT_OK;
  s->meta.step = s->first_step;
  kt_status st = kt_checkpoint_save(s->rt, s->p.save_init, &s->meta, err);
  if (st) s->failed = KT_SESSION_SAVE_INIT;
  return st;
}

kt_status kt_session_run(kt_session *s, kt_error *err) {
  if (!s->opened || s->ran) return kt_fail(err, KT_EINVAL, "a session runs once, after it opened");
  s->ran = 1;
  s->failed = KT_SESSION_FAILED;
  const kt_runtime_config *rc = kt_runtime_config_of(s->rt);
  if (!(s->ranks = kt_calloc((size_t)s->sched.p, sizeof *s->ranks)) ||
      !(s->idle = kt_calloc((size_t)s->sched.p, sizeof *s->idle)))
    return kt_fail(err, KT_ENOMEM, "out of memory");
  /* a step runs K rounds of the compute schedule the runtime runs */
  kt_status st =
      kt_schedule_repeat(rc->schedule, rc->grad_accum > 0 ? rc->grad_accum : 1, &s->rounds, err);
  if (st) return st;
  if ((st = save_init(s, err))) return st;
  if ((st = kt__session_autopilot_init(s, err))) return st;
  kt_train_config tc = {.runtime = *kt_runtime_config_of(s->rt),
                        .first_step = s->first_step,
                        .steps = s->p.steps,
                        .val_every = s->p.val_every,
                        .val_batches = s->p.val_batches,
                        .data = s->data ? s->data : s->p.data,
                        .on_step = on_step,
                        .ctx = s,
                        .skip_nonfinite = s->p.skip_nonfinite,
                        .links = s->links,
                        .barrier_at = barrier_at,
                        .should_stop = poll_stop,
                        .between_steps = kt__session_autopilot_switch};
  kt_train_result *res = &s->result.train;
  st = kt_train_run(s->rt, &tc, res, err);
  if (!st && s->fail_status) st = s->fail_status, *err = s->fail_err;
  if (!st && s->stop == KT__STOP_FAILED) {
    s->failed = KT_SESSION_FAILED_ELSEWHERE;
    st = kt_fail(err, KT_EPEER, "another rank failed");
  }
  if (!st) st = kt__session_price(s, err);
  if (!st) st = finish_run(s, err);
  s->result.stop = s->stop > 0 ? s->stop : 0;
  s->result.steps_done = s->first_step + res->n_losses;
  s->result.peak_vs_1f1b = NAN;
  for (int r = 0; res->n_losses > 0 && s->peak_1f1b > 0 && r < res->measured.p; r++) {
    double ratio = res->measured.ranks[r].peak_memory / s->peak_1f1b;
    if (isnan(s->result.peak_vs_1f1b) || ratio > s->result.peak_vs_1f1b)
      s->result.peak_vs_1f1b = ratio;
  }
  if (st && res->stopped_nonfinite) s->failed = KT_SESSION_NONFINITE;
  if (!st) s->failed = KT_SESSION_OK;
  return st;
}
