/* The training loop: steps, validation, calibration and prediction. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/train.h"
#include "train/autopilot.h"
#include "train/session_internal.h"

void kt_train_result_free(kt_train_result *r) {
  free(r->losses);
  kt_metrics_free(&r->measured);
  kt_metrics_free(&r->predicted);
  kt_costs_free(&r->calibrated);
  kt_timeline_free(&r->predicted_timeline);
  kt_timeline_free(&r->measured_timeline);
  kt__free_mb_costs(r);
  memset(r, 0, sizeof *r);
}

kt_status kt_train_predict(const kt_schedule *s, int grad_accum, const kt_timeline *measured,
                           kt_costs *calibrated, kt_timeline *predicted, kt_error *err) {
  return kt_train_predict_on(s, grad_accum, measured, NULL, 0, calibrated, predicted, NULL, err);
}

/* Per-micro-batch costs for rounds back to back (micro-batch k*M + j is j). */
static kt_status repeat_mb(kt_costs *c, int rounds, kt_error *err) {
  if (!c->n_mb || rounds <= 1) return KT_OK;
  int S = c->n_stages, M = c->n_mb;
  double *vals = malloc(sizeof(double) * (size_t)S * (size_t)M * (size_t)rounds);
  if (!vals) return kt_fail(err, KT_ENOMEM, "out of memory");
  double *const per[] = {c->mb_tf, c->mb_tb, c->mb_tw}; /* taken over: the lists are cleared */
  c->mb_tf = c->mb_tb = c->mb_tw = NULL;
  kt_costs_clear_mb(c);
  const char *const fields[] = {"tf", "tb", "tw"};
  kt_status st = KT_OK;
  for (int f = 0; f < 3 && !st; f++) {
    if (!per[f]) continue;
    for (int s = 0; s < S; s++)
      for (int j = 0; j < M * rounds; j++)
        vals[(size_t)s * (size_t)(M * rounds) + (size_t)j] =
            per[f][(size_t)s * (size_t)M + (size_t)(j % M)];
    st = kt_costs_set_mb(c, fields[f], vals, S, M * rounds, err);
  }
  free(vals), free(per[0]), free(per[1]), free(per[2]);
  return st;
}

/* kt_train_predict_on; per_mb: the micro-batches differ by design (each
 * one's own costs calibrated where they differ: kt__calibrate_mb). */
static kt_status predict_on(const kt_schedule *s, int grad_accum, const kt_timeline *measured,
                            const kt_links *links, double comm_bytes, int per_mb,
                            kt_costs *calibrated, kt_timeline *predicted, double *sync_end,
                            kt_error *err) {
  kt_status st = kt_calibrate_costs(measured, s, calibrated, err);
  if (!st && per_mb && (st = kt__calibrate_mb(measured, s, calibrated, err)))
    kt_costs_free(calibrated);
  if (st) return st;
  calibrated->links = links;
  calibrated->comm_bytes = comm_bytes;
  kt_schedule rounds;
  if ((st = repeat_mb(calibrated, grad_accum, err)) ||
      (st = kt_schedule_repeat(s, grad_accum > 0 ? grad_accum : 1, &rounds, err))) {
    kt_costs_free(calibrated);
    return st;
  }
  st = kt_simulate_step(&rounds, calibrated, predicted, sync_end, err);
  kt_schedule_free(&rounds);
  if (st) {
    kt_costs_free(calibrated);
    return st;
  }
  snprintf(predicted->time_unit, sizeof predicted->time_unit, "s");
  return KT_OK;
}

kt_status kt_train_predict_on(const kt_schedule *s, int grad_accum, const kt_timeline *measured,
                              const kt_links *links, double comm_bytes, kt_costs *calibrated,
                              kt_timeline *predicted, double *sync_end, kt_error *err) {
  return predict_on(s, grad_accum, measured, links, comm_bytes, 0, calibrated, predicted, sync_end,
                    err);
}

/* The first chunk of this process (a model of the caller's own: its sizes
 * come from its chunks), or NULL. */
static kt_chunk *local_chunk(kt_runtime *rt, int S, int D) {
  for (int st = 0; st < S; st++)
    for (int d = 0; d < D; d++) {
      kt_chunk *c = kt_runtime_chunk(rt, st, d);
      if (c) return c;
    }
  return NULL;
}

/* Bytes of one point-to-point message: a boundary activation of b samples. */
static double message_bytes(kt_runtime *rt, const kt_runtime_config *rc) {
  if (rc->synthetic) return (double)rc->syn_act_bytes;
  if (rc->make_chunk) {
    kt_chunk *c = local_chunk(rt, kt_schedule_stages(rc->schedule), rc->data_parallel);
    return c ? (double)kt_chunk_out_elems(c) * sizeof(float) : 0;
  }
  return (double)kt_model_boundary_elems(&rc->model) * rc->micro_batch * sizeof(float);
}

/* A collective of a few numbers over a group: 2 log2(n) latencies of the
 * slowest class it crosses. */
static double small_collective(const kt_links *l, const int *members, int n) {
  int spans = 0, rounds = 0;
  for (int i = 1; i < n; i++) spans |= kt_links_node(l, members[i]) != kt_links_node(l, members[0]);
  while ((1 << rounds) < n) rounds++;
  const kt_link_classes *c = kt_links_classes(l);
  return 2.0 * rounds * (spans ? c->inter_latency : c->intra_latency);
}

/* Bytes of each pipeline rank's gradients (bytes[P]). */
static void gradient_bytes(kt_runtime *rt, const kt_runtime_config *rc, double *bytes) {
  const kt_schedule *s = rc->schedule;
  int S = kt_schedule_stages(s);
  const int *off = kt_runtime_unit_offsets(rt);
  for (int st = 0; st < S && rc->synthetic; st++)
    bytes[kt_stage_rank(s, st)] += (double)(rc->syn_grad_bytes / sizeof(float) * sizeof(float));
  for (int st = 0; st < S && rc->make_chunk; st++) { /* what this process holds of them */
    kt_chunk *c = kt_runtime_chunk(rt, st, 0);
    size_t n = 0;
    if (c) kt_chunk_params(c, &n);
    bytes[kt_stage_rank(s, st)] += 4.0 * (double)n;
  }
  for (int st = 0; st < S && !rc->synthetic && !rc->make_chunk; st++)
    for (int u = off[st]; u < off[st + 1]; u++)
      bytes[kt_stage_rank(s, st)] += 4.0 * (double)kt_model_unit_params(&rc->model, u);
}

/* The step's end on the links: the simulation ended with each pipeline
 * rank's gradient all-reduce (kt_links_set_sync), started when the last
 * replica's pipeline there ends (*t_dp: its time after the pipeline's
 * end); then the norm and loss sums (*t_norm). */
static void predict_step_end(const kt_train_config *cfg, double sync_end, kt_train_result *out,
                             double *t_dp, double *t_norm) {
  const kt_runtime_config *rc = &cfg->runtime;
  int P = rc->schedule->p, D = rc->data_parallel;
  const kt_timeline *tl = &out->predicted_timeline;
  double pipeline_end = 0;
  for (size_t i = 0; i < tl->n_events; i++)
    if (tl->events[i].end > pipeline_end) pipeline_end = tl->events[i].end;
  double synced = fmax(sync_end, pipeline_end);
  int *members = kt_calloc((size_t)P * D, sizeof *members);
  double small = 0;
  if (members) {
    for (int r = 0; r < P; r++) members[r] = kt_world_rank(r, 0, D);
    small = small_collective(cfg->links, members, P);
    for (int r = 0; r < P * D; r++) members[r] = r;
    small += small_collective(cfg->links, members, P * D);
    free(members);
  }
  *t_dp = synced - pipeline_end, *t_norm = small;
  out->predicted_sync_seconds = *t_dp + small;
}

/* The predicted period: K rounds of the calibrated costs with the step's
 * end as measured (the update, tail) and as the links cost it, under the
 * run's step sync (kaiten/sim.h). */
static kt_status predicted_period(const kt_train_config *cfg, double tail, double t_dp,
                                  double t_norm, kt_train_result *out, kt_error *err) {
  const kt_runtime_config *rc = &cfg->runtime;
  kt_costs *c = &out->calibrated;
  /* steps that mostly waited for their check ran as under a barrier */
  c->step_sync = 2 * out->waited_steps > out->n_losses ? KT_STEP_BARRIER : rc->step_sync;
  c->tu = tail / (rc->schedule->v > 0 ? rc->schedule->v : 1); /* a rank runs V stages' updates */
  c->t_dp = t_dp, c->t_norm = t_norm;
  c->tied = !rc->synthetic && !rc->make_chunk && rc->model.kind == KT_MODEL_GPT &&
            rc->model.tie_embeddings;
  kt_schedule rounds;
  kt_status st =
      kt_schedule_repeat(rc->schedule, rc->grad_accum > 0 ? rc->grad_accum : 1, &rounds, err);
  if (st) return st;
  st = kt_sim_period(&rounds, c, &out->predicted, err);
  kt_schedule_free(&rounds);
  out->predicted_step_seconds = out->predicted.period;
  return st;
}

static kt_status predict(kt_runtime *rt, const kt_train_config *cfg, const kt_timeline *measured,
                         double tail, kt_train_result *out, kt_error *err) {
  const kt_runtime_config *rc = &cfg->runtime;
  if (cfg->links) {
    double *bytes = kt_calloc((size_t)rc->schedule->p, sizeof *bytes);
    if (!bytes) return kt_fail(err, KT_ENOMEM, "out of memory");
    gradient_bytes(rt, rc, bytes);
    kt_links_set_sync(cfg->links, bytes);
    free(bytes);
  }
  double sync_end = 0, t_dp = 0, t_norm = 0;
  kt_status st = predict_on(rc->schedule, rc->grad_accum, measured, cfg->links,
                            message_bytes(rt, rc), rc->syn_mb_scale != NULL, &out->calibrated,
                            &out->predicted_timeline, &sync_end, err);
  if (cfg->links) {
    if (!st) predict_step_end(cfg, sync_end, out, &t_dp, &t_norm);
    kt_links_set_sync(cfg->links, NULL);
  }
  out->calibrated.links = NULL; /* the caller's */
  if (st) return st;
  st = kt_timeline_metrics(&out->predicted_timeline, &out->predicted, err);
  return st ? st : predicted_period(cfg, tail, t_dp, t_norm, out, err);
}

/* After the last step: throughput, the measured last step (last is handed
 * over to out) and the prediction calibrated on typical (a step of median
 * length among the last few: one step's op times on a shared machine
 * moved the prediction by a third from run to run, while the median step
 * it is read against hardly moved). */
static kt_status summarise(kt_runtime *rt, const kt_train_config *cfg, kt_timeline *last,
                           const kt_timeline *typical, double *step_s, double mean, double samples,
                           size_t tps, kt_train_result *out, kt_error *err) {
  const kt_runtime_config *rc = &cfg->runtime;
  double last_s = step_s[out->n_losses - 1]; /* the median below sorts step_s */
  out->mean_step_seconds = mean;
  out->median_step_seconds =
      out->n_losses > 1 ? kt_median(step_s + 1, (size_t)out->n_losses - 1) : step_s[0];
  (void)tps; /* out->tokens: what the steps held */
  out->samples_per_s = samples / out->mean_step_seconds;
  out->tokens_per_s = out->tokens / out->n_losses / out->mean_step_seconds;
  out->steady_tokens_per_s = out->tokens / out->n_losses / out->median_step_seconds;
  kt_status st = kt_timeline_metrics(last, &out->measured, err);
  /* the last step as it ran: its period, from the end of the one before */
  if (!st) kt_metrics_set_period(&out->measured, last_s, (int)rc->step_sync);
  if (!st) st = predict(rt, cfg, typical ? typical : last, out->tail_seconds, out, err);
  int r0 = kt_stage_rank(rc->schedule, 0); /* the rank of stage 0: its peak activation memory */
  if (!st && r0 >= 0 && r0 < out->measured.p)
    out->peak_stash_bytes_stage0 = (size_t)out->measured.ranks[r0].peak_memory;
  out->measured_timeline = *last; /* handed over */
  kt_timeline_init(last, rc->schedule->p, "s", "B");
  return st;
}

/* Whether step (0-based) ends with a validation: every val_every steps and
 * after the last, when the data has a validation split. */
static int validates(const kt_train_config *cfg, int step) {
  return cfg->data && cfg->data->has_validation && cfg->val_every > 0 &&
         ((step + 1) % cfg->val_every == 0 || step + 1 == cfg->steps);
}

/* The mean loss over val_batches validation batches, run forward and
 * backward without an update (mbs: room for one optimizer step's batch). */
static kt_status validation_loss(kt_runtime *rt, const kt_train_config *cfg, int step,
                                 kt_microbatch *mbs, double *loss, kt_error *err) {
  const kt_runtime_config *rc = &cfg->runtime;
  int D = rc->data_parallel, K = rc->grad_accum, M = rc->schedule->m, b = rc->micro_batch;
  double sum = 0;
  int nb = cfg->val_batches > 0 ? cfg->val_batches : 1;
  kt_status st = KT_OK;
  for (int v = 0; v < nb && !st; v++) {
    kt_step_result vr;
    st = cfg->data->fill(cfg->data, 1, v, D, K, M, b, mbs, err);
    if (!st) st = kt_runtime_step(rt, step, mbs, 0, &vr, err);
    if (!st) sum += vr.loss;
  }
  if (!st) *loss = sum / nb;
  return st;
}

/* The progress record of a step: its result, its bubble from the step's
 * timeline (copied into last, which the record points to). */
static kt_status step_progress(kt_runtime *rt, const kt_train_config *cfg, int step,
                               const kt_step_result *res, double samples, size_t tps,
                               kt_timeline *last, const kt_train_result *out, kt_train_progress *p,
                               kt_error *err) {
  kt_status st = kt_timeline_copy(last, kt_runtime_timeline(rt));
  if (st) return kt_fail(err, st, "out of memory");
  kt_metrics met;
  if ((st = kt_timeline_metrics(last, &met, err))) return st;
  kt_metrics_set_period(&met, res->seconds, (int)cfg->runtime.step_sync); /* the step as it ran */
  *p = (kt_train_progress){.step = step,
                           .steps = cfg->steps,
                           .loss = res->loss,
                           .val_loss = NAN,
                           .lr = res->lr,
                           .grad_norm = res->grad_norm,
                           .seconds = res->seconds,
                           .samples_per_s = samples / res->seconds,
                           .tokens_per_s = samples * (double)tps / res->seconds,
                           .bubble = met.bubble_ratio,
                           .timeline = last,
                           .runtime = rt,
                           .skipped = res->nonfinite,
                           .nonfinite_stage = res->nonfinite_stage,
                           .nonfinite_what = res->nonfinite_what,
                           .skipped_total = out->skipped_steps};
  kt_metrics_free(&met);
  return KT_OK;
}

/* What the loop carries from step to step. Steps may run ahead of their
 * check (kaiten/runtime.h): a step that does is followed by the next one,
 * or a flush, before its result is taken; the next but one goes too, so a
 * rank that ends a step early finds the next one there. At most
 * KT_STEPS_AHEAD are in flight, each with a buffer of micro-batches of its
 * own (step % KT_STEPS_AHEAD). */
#define KT_STEPS_AHEAD KT_DATA_KEEPS
#define KT_CALIBRATION_STEPS 9
typedef struct {
  kt_runtime *rt;
  const kt_train_config *cfg;
  kt_train_result *out;
  kt_microbatch *mbs[KT_STEPS_AHEAD];
  int next, taken; /* the next step to submit; results taken */
  int ahead;       /* the last step submitted runs ahead: a step or a flush must follow */
  int stopping;
  int vote; /* this process's stop request, carried to every rank with the next step */
  double *step_s, total_seconds, samples;
  size_t tps;
  kt_timeline last;
  /* the last steps after the first (a ring), for the prediction's calibration: only steps
   * of the plan that runs now (kt_runtime_plans) */
  kt_timeline recent[KT_CALIBRATION_STEPS];
  double recent_s[KT_CALIBRATION_STEPS];
  int n_recent;
} run_loop;

/* Keeps the step just taken (in L->last, res->seconds long) among the
 * recent ones; not the first (it warms up), nor where each micro-batch has
 * costs of its own (calibrated on the step they ran in). */
static kt_status keep_recent(run_loop *L, double seconds, kt_error *err) {
  if (L->out->n_losses < 2 || L->cfg->runtime.syn_mb_scale) return KT_OK;
  int i = L->n_recent++ % KT_CALIBRATION_STEPS;
  L->recent_s[i] = seconds;
  if (kt_timeline_copy(&L->recent[i], &L->last)) return kt_fail(err, KT_ENOMEM, "out of memory");
  return KT_OK;
}

/* The recent step of median length, or NULL when none was kept. */
static const kt_timeline *typical_step(const run_loop *L) {
  int n = L->n_recent < KT_CALIBRATION_STEPS ? L->n_recent : KT_CALIBRATION_STEPS;
  for (int i = 0; i < n; i++) { /* the one with as many shorter as longer (ties by index) */
    int below = 0, above = 0;
    for (int j = 0; j < n; j++) {
      double a = L->recent_s[j], b = L->recent_s[i];
      below += a < b || (a == b && j < i), above += a > b || (a == b && j > i);
    }
    if (below == n / 2 || (below == (n - 1) / 2 && above == n / 2)) return &L->recent[i];
  }
  return NULL;
}

/* Where the next step must wait for this one to be checked everywhere: a
 * validation or a checkpoint (the caller's barrier_at) after it. */
static int barrier_after(const kt_train_config *cfg, int step) {
  return validates(cfg, step) || (cfg->barrier_at && cfg->barrier_at(cfg->ctx, step));
}

/* Submits the next step: without a barrier it runs ahead of its check and
 * a step or a flush follows it (follow). */
static kt_status submit_next(run_loop *L, kt_error *err) {
  const kt_runtime_config *rc = &L->cfg->runtime;
  int step = L->next++;
  kt_microbatch *buf = L->mbs[step % KT_STEPS_AHEAD];
  kt_status st = L->cfg->data
                     ? L->cfg->data->fill(L->cfg->data, 0, step, rc->data_parallel, rc->grad_accum,
                                          rc->schedule->m, rc->micro_batch, buf, err)
                     : KT_OK;
  /* ahead only when the data source keeps every batch in flight */
  L->ahead =
      rc->step_sync == KT_STEP_OVERLAP && (!L->cfg->data || L->cfg->data->keeps >= KT_STEPS_AHEAD);
  if (!st)
    st = kt_runtime_submit(L->rt, step, L->cfg->data ? buf : NULL, 1, L->ahead,
                           !L->cfg->skip_nonfinite, L->vote, err);
  return st;
}

/* What follows steps that run ahead: the next ones, up to KT_STEPS_AHEAD
 * in flight, or a flush where the run stops or needs a barrier (the
 * update already ran; the flush checks it). */
static kt_status follow(run_loop *L, kt_error *err) {
  kt_status st = KT_OK;
  while (!st && L->ahead) {
    if (L->stopping || L->next >= L->cfg->steps || barrier_after(L->cfg, L->next - 1)) {
      L->ahead = 0;
      return kt_runtime_flush(L->rt, err);
    }
    if (L->next - L->cfg->first_step - L->taken >= KT_STEPS_AHEAD) return KT_OK;
    st = submit_next(L, err);
  }
  return st;
}

/* A step's result taken: recorded, its validation, the caller's callback. */
static kt_status take(run_loop *L, const kt_step_result *res, kt_error *err) {
  const kt_train_config *cfg = L->cfg;
  kt_train_result *out = L->out;
  int step = res->step;
  if (res->nonfinite && !cfg->skip_nonfinite) {
    out->stopped_nonfinite = 1;
    return kt_fail(err, KT_ERUNTIME,
                   "step %d: the loss is %g and the gradient norm %g; non-finite values first in "
                   "the %s of stage %d (of %d). The step was not applied",
                   step + 1, res->loss, res->grad_norm, res->nonfinite_what, res->nonfinite_stage,
                   kt_schedule_stages(cfg->runtime.schedule));
  }
  out->skipped_steps += res->nonfinite;
  out->rollbacks += res->rollbacks;
  out->waited_steps += res->waited && cfg->runtime.step_sync == KT_STEP_OVERLAP;
  out->losses[out->n_losses++] = res->loss;
  L->total_seconds += res->seconds;
  L->step_s[out->n_losses - 1] = res->seconds;
  out->measured_sync_seconds = res->sync_seconds, out->tail_seconds = res->tail_seconds;
  if (res->vote) L->stopping = 1; /* every rank agreed to stop */
  kt_train_progress p;
  kt_status st = step_progress(L->rt, cfg, step, res, L->samples, L->tps, &L->last, out, &p, err);
  if (!st) st = keep_recent(L, res->seconds, err);
  if (st) return st;
  if ((st = kt__step_record(L->out, cfg, L->cfg->data ? L->mbs[step % KT_STEPS_AHEAD] : NULL,
                            L->samples * (double)L->tps, &L->last, &p, err)))
    return st;
  p.barrier = L->taken == L->next - cfg->first_step; /* nothing in flight */
  p.agreed = res->vote;
  if (validates(cfg, step)) { /* a barrier: nothing in flight */
    if ((st = validation_loss(L->rt, cfg, step, L->mbs[0], &out->last_val_loss, err))) return st;
    p.val_loss = out->last_val_loss;
  }
  int request = cfg->on_step ? cfg->on_step(cfg->ctx, &p) : 0;
  /* agreed already at a barrier (kt_train_progress.barrier), and with every
   * rank here; else every rank learns it with a later step */
  if (p.barrier || kt_runtime_all_local(L->rt)) L->stopping |= request != 0;
  else L->vote = request;
  return KT_OK;
}

kt_status kt_train_run(kt_runtime *rt, const kt_train_config *cfg, kt_train_result *out,
                       kt_error *err) {
  memset(out, 0, sizeof *out);
  out->last_val_loss = NAN;
  const kt_runtime_config *rc = &cfg->runtime;
  int D = rc->data_parallel, K = rc->grad_accum, M = rc->schedule->m, b = rc->micro_batch;
  int n = cfg->steps - cfg->first_step;
  if (n < 0) n = 0;
  run_loop L = {
      .rt = rt,
      .cfg = cfg,
      .out = out,
      .next = cfg->first_step,
      .samples = (double)D * K * M * b,
      .tps = cfg->data && cfg->data->tokens_per_sample ? cfg->data->tokens_per_sample : 1};
  out->losses = kt_calloc((size_t)n + 1, sizeof *out->losses);
  int fed = 1;
  for (int i = 0; i < KT_STEPS_AHEAD; i++)
    fed &= (L.mbs[i] = kt_calloc((size_t)D * K * M, sizeof *L.mbs[i])) != NULL;
  L.step_s = kt_calloc((size_t)n + 1, sizeof *L.step_s);
  kt_timeline_init(&L.last, rc->schedule->p, "s", "B");
  for (int i = 0; i < KT_CALIBRATION_STEPS; i++)
    kt_timeline_init(&L.recent[i], rc->schedule->p, "s", "B");
  kt_status st = KT_OK;
  if (!out->losses || !fed || !L.step_s) st = kt_fail(err, KT_ENOMEM, "out of memory");
  if (cfg->should_stop && kt_runtime_all_local(rt))
    kt_runtime_set_poll(rt, cfg->should_stop, cfg->ctx);
  if (!st && L.next < cfg->steps) st = submit_next(&L, err);
  while (!st && L.taken < L.next - cfg->first_step) {
    kt_step_result res;
    if (!(st = follow(&L, err))) st = kt_runtime_complete(rt, &res, err);
    int first, back = kt_runtime_retracted(rt, &first);
    if (back) L.next = first, L.ahead = 0, L.stopping = 1; /* a stop: the steps not begun */
    if (st && back && L.taken == L.next - cfg->first_step) st = KT_OK; /* this one was taken back */
    if (st || L.taken == L.next - cfg->first_step) break;
    L.taken++;
    if (!res.cancelled) st = take(&L, &res, err);
    if (!st && !L.ahead && !L.stopping && L.next < cfg->steps &&
        L.taken == L.next - cfg->first_step) {
      int plans = kt_runtime_plans(rt);
      if (cfg->between_steps) st = cfg->between_steps(cfg->ctx, rt, L.next, err);
      if (kt_runtime_plans(rt) != plans) L.n_recent = 0; /* the steps before ran another plan */
      if (!st) st = submit_next(&L, err);
    }
  }
  if (!st && out->n_losses > 0)
    st = summarise(rt, cfg, &L.last, typical_step(&L), L.step_s, L.total_seconds / out->n_losses,
                   L.samples, L.tps, out, err);
  kt_runtime_set_poll(rt, NULL, NULL);
  kt_runtime_settle(rt); /* steps left in flight by an error still read L.mbs */
  for (int i = 0; i < KT_STEPS_AHEAD; i++) free(L.mbs[i]);
  free(L.step_s);
  kt_timeline_free(&L.last);
  for (int i = 0; i < KT_CALIBRATION_STEPS; i++) kt_timeline_free(&L.recent[i]);
  return st;
}
