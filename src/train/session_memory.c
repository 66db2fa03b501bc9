/* A session's memory: the model's activation bytes per micro-batch on each
 * stage, measured by running the stage's chunk once (what a memory limit
 * in bytes is a budget on), and the schedule's predicted peak per rank from
 * them, to set beside the measured one. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/session_internal.h"

/* One stage: its chunk on a zero micro-batch of b samples; bytes held
 * after F and after I, and the most an op holds above that. */
static kt_status measure_stage(const kt_model_config *m, int b, int first_unit, int n_units,
                               double *act, double *wg, double *transient, kt_error *err) {
  kt_chunk *c;
  /* the bytes depend on the shapes alone */
  kt_status st = kt_chunk_create_sizes_only(m, first_unit, n_units, b, 1, &c, err);
  if (st) return st;
  size_t per_sample = m->kind == KT_MODEL_GPT ? (size_t)m->seq_len : (size_t)m->hidden;
  float *x = kt_calloc((size_t)b * per_sample, sizeof *x);
  float *y = kt_calloc((size_t)b * per_sample, sizeof *y);
  int *tokens = kt_calloc((size_t)b * per_sample, sizeof *tokens);
  float *in = kt_calloc(kt_chunk_in_elems(c) + 1, sizeof *in),
        *din = kt_calloc(kt_chunk_in_elems(c) + 1, sizeof *din);
  float *out = kt_calloc(kt_chunk_out_elems(c) + 1, sizeof *out),
        *dout = kt_calloc(kt_chunk_out_elems(c) + 1, sizeof *dout);
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
  else st = kt_partition_balanced(&p->model, S, counts, err);
  for (int s = 0, unit = 0; s < S && !st; unit += counts[s], s++) {
    st = measure_stage(&p->model, p->micro_batch, unit, counts[s], &c->stage_mem_act[s],
                       &c->stage_mem_wgrad[s], &c->stage_mem_transient[s], err);
    if (st == KT_ENOMEM) { /* say which run cannot fit, and what to lower */
      char why[KT_ERROR_LEN];
      snprintf(why, sizeof why, "%s", err->msg);
      st = kt_fail(err, KT_ENOMEM,
                   "stage %d cannot hold one micro-batch of %d samples in this machine's memory "
                   "(%s): lower --micro-batch-size or add --recompute",
                   s, p->micro_batch, why);
    }
  }
  free(counts);
  return st;
}

/* 1F1B's predicted peak (the largest rank's, bytes) on the model at P, M:
 * stage bytes c of P stages. */
static kt_status peak_of_1f1b(const kt_costs *c, int P, int M, double *peak, kt_error *err) {
  kt_schedule one;
  kt_gen_params sp = {.p = P, .m = M};
  kt_status st = kt_generate(KT_SCHED_1F1B, &sp, &one, err);
  kt_metrics m;
  if (!st) st = kt_simulate_metrics(&one, c, &m, err);
  if (!st) {
    *peak = 0;
    for (int r = 0; r < m.p; r++) *peak = fmax(*peak, m.ranks[r].peak_memory);
    kt_metrics_free(&m);
  }
  if (one.ranks) kt_schedule_free(&one);
  return st;
}

kt_status kt__session_memory(kt_session *s, int S, int P, int M, kt_error *err) {
  if (S > kt_model_units(&s->p.model)) return KT_OK; /* the runtime says why it cannot run */
  kt_status st = kt_session_activation_bytes(&s->p, S, &s->mem, err);
  if (st || S == P) return st ? st : peak_of_1f1b(&s->mem, P, M, &s->peak_1f1b, err);
  /* V chunks per rank: 1F1B runs P stages of the same model, balanced */
  kt_session_params q = s->p;
  q.partition = NULL;
  kt_costs one;
  kt_costs_default(&one);
  st = kt_session_activation_bytes(&q, P, &one, err);
  if (!st) st = peak_of_1f1b(&one, P, M, &s->peak_1f1b, err);
  kt_costs_free(&one);
  return st;
}

/* What the order may keep under the caller's limit: a limit in bytes or
 * as a fraction of 1F1B's peak is on the whole peak, so less the largest
 * scratch an op holds while it runs (the generators count what actions
 * keep); in activations, that many micro-batches of the largest rank's. */
static double keep_bytes(const kt_session *s, const kt_gen_params *one, double scratch) {
  const kt_session_params *p = &s->p;
  if (p->mem_limit.kind == KT_MEM_BYTES) return p->mem_limit.value - scratch;
  if (p->mem_limit.kind == KT_MEM_FRACTION) return p->mem_limit.value * s->peak_1f1b - scratch;
  return p->mem_limit.value * kt_gen_1f1b_peak(p->kind, one) / fmin(p->p, p->m);
}

kt_status kt__session_mem_limit(const kt_session *s, int v, const kt_costs *gen, double *out,
                                kt_error *err) {
  const kt_session_params *p = &s->p;
  kt_gen_params one = {.p = p->p, .m = p->m, .v = v, .costs = gen};
  *out = 0;
  if (p->mem_limit.kind == KT_MEM_UNITS && p->mem_limit.value <= 0) return KT_OK; /* none */
  if (!s->mem.n_stages) { /* a synthetic model's activation units */
    *out = p->mem_limit.value;
    if (p->mem_limit.kind == KT_MEM_FRACTION) *out *= kt_gen_1f1b_peak(p->kind, &one);
    return KT_OK;
  }
  double scratch = 0;
  for (int i = 0; i < s->mem.n_stages; i++) scratch = fmax(scratch, s->mem.stage_mem_transient[i]);
  double keep = keep_bytes(s, &one, scratch), need = kt_gen_min_mem_limit(p->kind, &one);
  if (!(s->peak_1f1b > 0) || need < 0)
    return kt_fail(err, KT_EINVAL, "%s: no memory limit applies on this model",
                   kt_gen_kind_name(p->kind));
  if (keep < need) {
    double least = ceil(100 * (need + scratch) / s->peak_1f1b - 1e-9) / 100;
    return kt_fail(err, KT_EINVAL,
                   "%s: a memory limit that keeps %.2f MiB of activations (%.3gx of 1F1B's "
                   "predicted peak, %.2f MiB on this model, with an op's scratch) is below what "
                   "any of its orders needs; the smallest it can keep to is %.2fx (one "
                   "micro-batch's activations on a rank and an op's scratch)",
                   kt_gen_kind_name(p->kind), fmax(keep, 0) / 1048576.0,
                   (keep + scratch) / s->peak_1f1b, s->peak_1f1b / 1048576.0, least);
  }
  *out = keep;
  return KT_OK;
}

/* The last step's own bytes per (stage, micro-batch) in c, where the run
 * recorded them (kt_mb_cost: packed documents and seq-chunks hold less
 * than the full micro-batch the stage bytes were measured on): each
 * micro-batch its largest over the step's rounds, each stage's scratch its
 * micro-batches' largest. */
static kt_status own_bytes(const kt_session *s, kt_costs *c, kt_error *err) {
  const kt_train_result *r = &s->result.train;
  int S = kt_schedule_stages(&s->sched), M = s->sched.m;
  if (!r->mb_costs || !r->mb_costs[0].mem_act || r->mb_cost_stages != S || r->n_mb_costs < M ||
      r->n_mb_costs % M || c->n_stages != S || !c->stage_mem_transient)
    return KT_OK;
  double *v = kt_calloc((size_t)2 * S * M, sizeof *v), *act = v, *wg = v ? v + S * M : NULL;
  if (!v) return kt_fail(err, KT_ENOMEM, "out of memory");
  for (int s0 = 0; s0 < S; s0++) c->stage_mem_transient[s0] = 0;
  for (int i = 0; i < r->n_mb_costs; i++)
    for (int s0 = 0; s0 < S; s0++) {
      const kt_mb_cost *m = &r->mb_costs[i];
      size_t at = (size_t)s0 * M + (size_t)(i % M);
      act[at] = fmax(act[at], m->mem_act[s0]), wg[at] = fmax(wg[at], m->mem_wgrad[s0]);
      c->stage_mem_transient[s0] = fmax(c->stage_mem_transient[s0], m->mem_transient[s0]);
    }
  kt_status st = kt_costs_set_mb(c, "mem-act", act, S, M, err);
  if (!st) st = kt_costs_set_mb(c, "mem-wgrad", wg, S, M, err);
  free(v);
  return st;
}

kt_status kt_session_predict_memory(kt_session *s, double *peak, kt_error *err) {
  kt_costs c;
  kt_costs_default(&c);
  kt_metrics pred;
  kt_status st = s->mem.n_stages
                     ? kt_costs_copy(&c, &s->mem) ? kt_fail(err, KT_ENOMEM, "out of memory") : KT_OK
                     : kt_session_activation_bytes(&s->p, kt_schedule_stages(&s->sched), &c, err);
  if (!st) st = own_bytes(s, &c, err);
  if (!st) st = kt_simulate_metrics(&s->sched, &c, &pred, err);
  kt_costs_free(&c);
  if (st) return st;
  for (int r = 0; r < s->sched.p; r++) peak[r] = r < pred.p ? pred.ranks[r].peak_memory : 0;
  kt_metrics_free(&pred);
  return KT_OK;
}

/* Linux's MemAvailable in bytes; 0 where it cannot be read. */
static double mem_available(void) {
  FILE *f = fopen("/proc/meminfo", "r");
  if (!f) return 0;
  char line[160];
  double kib = 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "MemAvailable: %lf kB", &kib) == 1) break;
  fclose(f);
  return kib * 1024;
}

kt_status kt__session_memory_fits(kt_session *s, kt_error *err) {
  const kt_session_params *p = &s->p;
  double avail = mem_available();
  /* packed documents hold less than the full micro-batches measured (their
   * attention is per document): the prediction is no lower bound there */
  if (p->use_mpi || p->doc_lengths || !s->mem.n_stages || !(avail > 0)) return KT_OK;
  int P = s->sched.p, D = p->data_parallel > 1 ? p->data_parallel : 1;
  double *peak = kt_calloc((size_t)P, sizeof *peak), act = 0, weights = 0;
  if (!peak) return kt_fail(err, KT_ENOMEM, "out of memory");
  kt_status st = kt_session_predict_memory(s, peak, err);
  for (int r = 0; r < P && !st; r++) act += D * peak[r];
  free(peak);
  if (st) return st;
  for (int u = 0; u < kt_model_units(&p->model); u++)
    weights += 2.0 * D * sizeof(float) * (double)kt_model_unit_params(&p->model, u);
  if (act + weights <= avail) return KT_OK;
  double gib = 1024.0 * 1024 * 1024;
  return kt_fail(
      err, KT_ENOMEM,
      "the run needs at least %.1f GiB (activations at the schedule's predicted peak, "
      "%.1f GiB over %d rank%s; parameters and gradients, %.1f GiB) and this machine has "
      "%.1f GiB available: lower --micro-batch-size, keep fewer micro-batches in flight "
      "(1f1b, --mem-limit) or add --recompute",
      (act + weights) / gib, act / gib, P * D, P * D > 1 ? "s" : "", weights / gib, avail / gib);
}
