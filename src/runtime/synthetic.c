/* Synthetic chunk: F, I and W sleep for their cost and boundary tensors of
 * act_bytes travel for real, so pipelines with more ranks than cores run with
 * true timing and their measured bubble can be checked against the simulator. */
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "kaiten/model_impl.h"
#include "runtime/internal.h"

typedef struct {
  double tf, tb, tw;      /* seconds */
  const double *mb_scale; /* [M]: each micro-batch's multiple of them (NULL: 1) */
  /* The wake-up latency this chunk's sleeps have been seeing (seconds,
   * smoothed): a sleep aims that much early so operations last their cost
   * on average. Kept with the chunk, not the thread: the threads runtime
   * starts fresh threads every step, and a per-thread estimate would start
   * from zero (every first op of a step late) each time. */
  double late_ema;
} synth_impl;

/* The most one sleep's lateness moves the estimate (seconds). */
#define LATE_CLIP 200e-6

/* Sleeps for `seconds` on an absolute deadline (no drift from early wake-ups;
 * the thread's timer slack is 1 ns, set in the worker). */
static void busy_for(synth_impl *s, double seconds) {
  if (seconds <= 0) return;
  double late_ema = s->late_ema;
  double start = kt_now(), target = seconds - late_ema;
  if (target > 0) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long ns = (long long)ts.tv_nsec + (long long)(target * 1e9);
    ts.tv_sec += (time_t)(ns / 1000000000LL);
    ts.tv_nsec = (long)(ns % 1000000000LL);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0) {
    }
  }
  double late = (kt_now() - start) - seconds; /* > 0: overslept */
  /* A rare long stall (the core taken by another process for milliseconds)
   * says nothing about the timer's usual lateness: clip each sample so one
   * stall cannot make the following sleeps end far too early. */
  if (late > LATE_CLIP) late = LATE_CLIP;
  if (late < -LATE_CLIP) late = -LATE_CLIP;
  late_ema += 0.2 * late;
  if (late_ema < 0) late_ema = 0;
  if (late_ema > 0.5 * seconds) late_ema = 0.5 * seconds;
  s->late_ema = late_ema;
}

static kt_status syn_forward(kt_chunk *c, int mb, const kt_microbatch *data, const float *in,
                             float *out, double *loss, kt_error *err) {
  (void)data, (void)in, (void)err;
  synth_impl *s = c->impl;
  busy_for(s, s->tf * (s->mb_scale ? s->mb_scale[mb] : 1));
  if (out && c->out_elems) out[0] = (float)mb; /* touch the tensor */
  if (loss) *loss = 0;
  c->stash_bytes += c->out_elems * sizeof(float) + sizeof(float);
  if (c->stash_bytes > c->peak_stash_bytes) c->peak_stash_bytes = c->stash_bytes;
  return KT_OK;
}

static kt_status syn_backward_input(kt_chunk *c, int mb, const kt_microbatch *data,
                                    const float *dout, float *din, kt_error *err) {
  (void)data, (void)dout, (void)err;
  synth_impl *s = c->impl;
  busy_for(s, s->tb * (s->mb_scale ? s->mb_scale[mb] : 1));
  if (din && c->in_elems) din[0] = (float)mb;
  return KT_OK;
}

static kt_status syn_backward_weight(kt_chunk *c, int mb, kt_error *err) {
  (void)err;
  synth_impl *s = c->impl;
  busy_for(s, s->tw * (s->mb_scale ? s->mb_scale[mb] : 1));
  c->stash_bytes -= c->out_elems * sizeof(float) + sizeof(float);
  return KT_OK;
}

static void syn_destroy(kt_chunk *c) {
  free(c->impl);
  free(c->unit_offset);
  free(c->params);
  free(c->grads);
  free(c);
}

static const kt_chunk_ops synth_ops = {syn_forward, syn_backward_input, syn_backward_weight,
                                       syn_destroy, NULL};

/* A synthetic stage's costs (seconds) and gradient floats per unit: its
 * own (syn_stage_ms), its units' share of the model's (syn_units), or the
 * uniform ones. */
static size_t synthetic_costs(const kt_runtime_config *cfg, int stage, int n_stages, int n_units,
                              synth_impl *s) {
  double scale = cfg->syn_units > 0 ? (double)n_units * n_stages / cfg->syn_units : 1;
  const double *own = cfg->syn_stage_ms ? cfg->syn_stage_ms + 3 * stage : NULL;
  s->tf = (own ? own[0] : cfg->syn_tf_ms * scale) * 1e-3;
  s->tb = (own ? own[1] : cfg->syn_tb_ms * scale) * 1e-3;
  s->tw = (own ? own[2] : cfg->syn_tw_ms * scale) * 1e-3;
  size_t np = cfg->syn_grad_bytes / sizeof(float);
  return cfg->syn_units > 0 ? np * (size_t)n_stages / (size_t)cfg->syn_units : np;
}

kt_status kt__synthetic_chunk_create(const kt_runtime_config *cfg, int stage, int n_stages,
                                     int first, int n_units, int n_microbatches, kt_chunk **out,
                                     kt_error *err) {
  if (cfg->syn_units <= 0) first = stage, n_units = 1; /* one unit per stage */
  kt_chunk *c = calloc(1, sizeof *c);
  synth_impl *s = calloc(1, sizeof *s);
  size_t per = s ? synthetic_costs(cfg, stage, n_stages, n_units, s) : 0,
         np = per * (size_t)n_units;
  if (c) {
    c->unit_offset = calloc((size_t)n_units + 1, sizeof *c->unit_offset);
    /* gradients to all-reduce when asked for (zeros: the sums stay finite) */
    c->params = calloc(np ? np : 1, sizeof(float));
    c->grads = calloc(np ? np : 1, sizeof(float));
  }
  if (!c || !s || !c->unit_offset || !c->params || !c->grads) {
    if (c) syn_destroy(c);
    else free(s);
    return kt_fail(err, KT_ENOMEM, "out of memory");
  }
  for (int u = 0; u <= n_units; u++) c->unit_offset[u] = (size_t)u * per;
  s->mb_scale = cfg->syn_mb_scale;
  size_t elems = (cfg->syn_act_bytes + sizeof(float) - 1) / sizeof(float);
  if (elems == 0) elems = 1;
  c->ops = &synth_ops;
  c->impl = s;
  c->first_unit = first;
  c->n_units = n_units;
  c->is_first = stage == 0;
  c->is_last = stage == n_stages - 1;
  c->micro_batch = 1;
  c->n_microbatches = n_microbatches;
  c->in_elems = c->is_first ? 0 : elems;
  c->out_elems = c->is_last ? 0 : elems;
  c->n_params = np;
  *out = c;
  return KT_OK;
}

double kt__synthetic_cost(const kt_chunk *c, kt_op op, int mb) {
  const synth_impl *s = c->impl;
  double t = op == KT_OP_F ? s->tf : op == KT_OP_I ? s->tb : op == KT_OP_W ? s->tw : s->tb + s->tw;
  return t * (s->mb_scale ? s->mb_scale[mb] : 1);
}

/* Called by each worker thread in synthetic mode: sleeps end within ~1 us. */
void kt__synthetic_thread_setup(void) { prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0); }
