/* kaiten train: memory as the user states it. --mem-limit in bytes becomes
 * a budget on the model's own activation bytes per micro-batch, measured
 * by running each stage's ops once; after training, the schedule's
 * predicted peak per rank is printed beside the measured one. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/train_cli.h"
#include "kaiten/model.h"

/* One stage: its chunk on a zero micro-batch; bytes held after F and after I. */
static kt_status measure_stage(const train_opts *o, int first_unit, int n_units, double *act,
                               double *wg, double *transient, kt_error *err) {
  kt_chunk *c;
  kt_status st = kt_chunk_create(&o->model, first_unit, n_units, o->b, 1, &c, err);
  if (st) return st;
  size_t per_sample = o->model.kind == KT_MODEL_GPT ? (size_t)o->model.seq_len : (size_t)o->model.hidden;
  float *x = kt_calloc((size_t)o->b * per_sample, sizeof *x);
  float *y = kt_calloc((size_t)o->b * per_sample, sizeof *y);
  int *tokens = kt_calloc((size_t)o->b * per_sample, sizeof *tokens);
  float *in = kt_calloc(kt_chunk_in_elems(c) + 1, sizeof *in), *din = kt_calloc(kt_chunk_in_elems(c) + 1, sizeof *din);
  float *out = kt_calloc(kt_chunk_out_elems(c) + 1, sizeof *out), *dout = kt_calloc(kt_chunk_out_elems(c) + 1, sizeof *dout);
  if (!x || !y || !tokens || !in || !din || !out || !dout) {
    st = kt_fail(err, KT_ENOMEM, "out of memory measuring activation sizes");
  } else {
    kt_microbatch mb = {.b = o->b, .x = x, .y = y, .tokens = tokens, .targets = tokens};
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

kt_status train_activation_bytes(const train_opts *o, int S, kt_costs *c, kt_error *err) {
  int *counts = kt_calloc((size_t)S, sizeof *counts);
  c->n_stages = S;
  c->stage_mem_act = kt_calloc((size_t)S, sizeof(double));
  c->stage_mem_wgrad = kt_calloc((size_t)S, sizeof(double));
  c->stage_mem_transient = kt_calloc((size_t)S, sizeof(double));
  kt_status st = KT_OK;
  if (!counts || !c->stage_mem_act || !c->stage_mem_wgrad || !c->stage_mem_transient)
    st = kt_fail(err, KT_ENOMEM, "out of memory");
  else if (o->partition)
    st = kt_partition_parse(o->partition, S, kt_model_units(&o->model), counts, err);
  else
    st = kt_partition_balanced(&o->model, S, counts, err);
  for (int s = 0, unit = 0; s < S && !st; unit += counts[s], s++)
    st = measure_stage(o, unit, counts[s], &c->stage_mem_act[s], &c->stage_mem_wgrad[s],
                       &c->stage_mem_transient[s], err);
  free(counts);
  return st;
}

void train_memory_report(const train_opts *o, const kt_schedule *s, const kt_train_result *r,
                         kt_buf *out) {
  if (o->synthetic) return;
  kt_costs c;
  kt_costs_default(&c);
  kt_error err;
  kt_metrics pred;
  if (train_activation_bytes(o, kt_schedule_stages(s), &c, &err) ||
      kt_simulate_metrics(s, &c, &pred, &err)) {
    kt_buf_printf(out, "peak activation memory: no prediction (%s)\n", err.msg);
    kt_costs_free(&c);
    return;
  }
  kt_buf_printf(out, "peak activation memory per rank, MiB (%s; predicted from each stage's "
                     "bytes):\n%-5s %10s %10s\n",
                s->name, "rank", "predicted", "measured");
  for (int i = 0; i < r->measured.p && i < pred.p; i++)
    kt_buf_printf(out, "%-5d %10.3f %10.3f\n", i, pred.ranks[i].peak_memory / 1048576.0,
                  r->measured.ranks[i].peak_memory / 1048576.0);
  kt_metrics_free(&pred);
  kt_costs_free(&c);
}
