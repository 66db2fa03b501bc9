/* A session's memory: the model's activation bytes per micro-batch on each
 * stage, measured by running the stage's chunk once (what a memory limit
 * in bytes is a budget on), and the schedule's predicted peak per rank from
 * them, to set beside the measured one. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/session_internal.h"

/* One stage: its chunk on a zero micro-batch of b samples; bytes held
 * after F and after I, and the most an op holds above that. */
static kt_status measure_stage(const kt_model_config *m, int b, int first_unit, int n_units,
                               double *act, double *wg, double *transient, kt_error *err) {
  kt_chunk *c;
  kt_status st = kt_chunk_create(m, first_unit, n_units, b, 1, &c, err);
  if (st) return st;
  size_t per_sample = m->kind == KT_MODEL_GPT ? (size_t)m->seq_len : (size_t)m->hidden;
  float *x = kt_calloc((size_t)b * per_sample, sizeof *x);
  float *y = kt_calloc((size_t)b * per_sample, sizeof *y);
  int *tokens = kt_calloc((size_t)b * per_sample, sizeof *tokens);
  float *in = kt_calloc(kt_chunk_in_elems(c) + 1, sizeof *in), *din = kt_calloc(kt_chunk_in_elems(c) + 1, sizeof *din);
  float *out = kt_calloc(kt_chunk_out_elems(c) + 1, sizeof *out), *dout = kt_calloc(kt_chunk_out_elems(c) + 1, sizeof *dout);
  if (!x || !y || !tokens || !in || !din || !out || !dout) {
    st = kt_fail(err, KT_ENOMEM, "out of memory measuring activation sizes");
  } else {
    kt_microbatch mb = {.b = b, .x = x, .y = y, .tokens = tokens, .targets = tokens};
    double loss, extra = 0;
    int first = kt_chunk_is_first(c), last = kt_chunk_is_last(c);
    /* each op: what it keeps, and the most it holds above that while it runs */
    kt_chunk_reset_peak(c);
    st = kt_chunk_forward(c, 0, &mb, first ? NULL : in, last ? NULL : out, &loss, err);
    *act = (double)kt_chunk_stash_bytes(c);
    extra = fmax(extra, (double)kt_chunk_peak_stash_bytes(c) - *act);
    kt_chunk_reset_peak(c);
    if (!st) st = kt_chunk_backward_input(c, 0, &mb, last ? NULL : dout, first ? NULL : din, err);
    *wg = (double)kt_chunk_stash_bytes(c);
    extra = fmax(extra, (double)kt_chunk_peak_stash_bytes(c) - fmax(*act, *wg));
    kt_chunk_reset_peak(c);
    if (!st) st = kt_chunk_backward_weight(c, 0, err);
    extra = fmax(extra, (double)kt_chunk_peak_stash_bytes(c) - *wg);
    *transient = extra;
  }
  free(x), free(y), free(tokens), free(in), free(din), free(out), free(dout);
  kt_chunk_destroy(c);
  return st;
}

kt_status kt_session_activation_bytes(const kt_session_params *p, int S, kt_costs *c,
                                      kt_error *err) {
  if (p->synthetic || p->make_chunk)
    return kt_fail(err, KT_EINVAL, "activation sizes are measured on the built-in models only");
  int *counts = kt_calloc((size_t)S, sizeof *counts);
  c->n_stages = S;
  c->stage_mem_act = kt_calloc((size_t)S, sizeof(double));
  c->stage_mem_wgrad = kt_calloc((size_t)S, sizeof(double));
  c->stage_mem_transient = kt_calloc((size_t)S, sizeof(double));
  kt_status st = KT_OK;
  if (!counts || !c->stage_mem_act || !c->stage_mem_wgrad || !c->stage_mem_transient)
    st = kt_fail(err, KT_ENOMEM, "out of memory");
  else if (p->partition)
    st = kt_partition_parse(p->partition, S, kt_model_units(&p->model), counts, err);
  else
    st = kt_partition_balanced(&p->model, S, counts, err);
  for (int s = 0, unit = 0; s < S && !st; unit += counts[s], s++)
    st = measure_stage(&p->model, p->micro_batch, unit, counts[s], &c->stage_mem_act[s],
                       &c->stage_mem_wgrad[s], &c->stage_mem_transient[s], err);
  free(counts);
  return st;
}

kt_status kt_session_predict_memory(kt_session *s, double *peak, kt_error *err) {
  kt_costs c;
  kt_costs_default(&c);
  kt_metrics pred;
  kt_status st = kt_session_activation_bytes(&s->p, kt_schedule_stages(&s->sched), &c, err);
  if (!st) st = kt_simulate_metrics(&s->sched, &c, &pred, err);
  kt_costs_free(&c);
  if (st) return st;
  for (int r = 0; r < s->sched.p; r++) peak[r] = r < pred.p ? pred.ranks[r].peak_memory : 0;
  kt_metrics_free(&pred);
  return KT_OK;
}
