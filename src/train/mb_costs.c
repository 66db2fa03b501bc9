/* Each micro-batch's costs as the last step ran them: its tokens and
 * attention work from the data, each stage's F, I/B and W from the
 * measured timeline (the k-th run of (stage, mb, op) is round k). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/session_internal.h"

/* Tokens, documents and the sum of L^2 of one micro-batch of b rows of T. */
static void held(const kt_microbatch *mb, int T, kt_mb_cost *c) {
  if (!mb->pos) {
    c->tokens = mb->b * T, c->documents = mb->b, c->attn_tokens2 = (double)mb->b * T * T;
    return;
  }
  c->tokens = mb->n_tokens, c->documents = 0, c->attn_tokens2 = 0; /* pieces, with chunks */
  for (int i = 0; i < mb->n_tokens;) {
    int L = 1;
    while (i + L < mb->n_tokens && mb->pos[i + L] == mb->pos[i + L - 1] + 1 &&
           (!mb->row || mb->row[i + L] == mb->row[i + L - 1] + 1))
      L++;
    c->documents++, c->attn_tokens2 += (double)L * L;
    i += L;
  }
}

static double own_time(const kt_event *e) {
  double t = e->cpu_time > 0 ? e->cpu_time : e->end - e->start - e->comm_time;
  return t > 0 ? t : 0;
}

/* Adds the timeline's compute events to the costs (n = K M of them). */
static kt_status times(kt_mb_cost *c, int K, int M, int S, const kt_timeline *tl, kt_error *err) {
  int *seen = calloc((size_t)S * M * KT_OP_COUNT, sizeof *seen);
  if (!seen) return kt_fail(err, KT_ENOMEM, "out of memory");
  for (size_t i = 0; i < tl->n_events; i++) {
    const kt_event *e = &tl->events[i];
    if (e->stage < 0 || e->stage >= S || e->mb < 0 || e->mb >= M || e->op >= KT_OP_COUNT) continue;
    int k = seen[((size_t)e->stage * M + e->mb) * KT_OP_COUNT + e->op]++;
    if (k >= K) continue;
    kt_mb_cost *m = &c[k * M + e->mb];
    double *to = e->op == KT_OP_F ? m->tf : e->op == KT_OP_W ? m->tw : m->tb;
    to[e->stage] += own_time(e);
  }
  free(seen);
  return KT_OK;
}

/* Each micro-batch's bytes per stage (the built-in GPT only: else the
 * lists are dropped): what its rows keep on the stage's units. */
static void bytes_held(kt_mb_cost *c, int n, int M, int S, const kt_microbatch *mbs,
                       const kt_runtime_config *rc) {
  const kt_model_config *m = &rc->model;
  int *counts = calloc((size_t)S, sizeof *counts), chunks = m->seq_chunks > 1 ? m->seq_chunks : 1;
  kt_error e2;
  int ok = counts && !rc->synthetic && !rc->make_chunk && m->kind == KT_MODEL_GPT && !m->recompute;
  if (ok && rc->partition) memcpy(counts, rc->partition, (size_t)S * sizeof *counts);
  else if (ok) ok = !kt_partition_balanced(m, S, counts, &e2);
  for (int i = 0; i < n && ok; i++)
    for (int s = 0, unit = 0; s < S && ok; unit += counts[s], s++) {
      double b[4];
      ok = !kt_model_mb_stash_bytes(m, unit, counts[s], rc->micro_batch, &mbs[i], b, &e2);
      int first_chunk = (i % M) % chunks == 0; /* group_forward's keys and values */
      c[i].mem_act[s] = b[0] + (first_chunk ? b[3] : 0);
      c[i].mem_wgrad[s] = b[1], c[i].mem_transient[s] = b[2];
    }
  free(counts);
  for (int i = 0; i < n && !ok; i++) c[i].mem_act = c[i].mem_wgrad = c[i].mem_transient = NULL;
}

#define MB_LISTS 6 /* tf, tb, tw, mem_act, mem_wgrad, mem_transient */

static kt_status record(kt_train_result *out, const kt_microbatch *mbs, int K, int M, int S, int T,
                        const kt_runtime_config *rc, const kt_timeline *tl, kt_error *err) {
  int n = K * M;
  if (out->n_mb_costs != n || out->mb_cost_stages != S) {
    kt__free_mb_costs(out);
    out->mb_costs = calloc((size_t)n, sizeof *out->mb_costs);
    double *d = out->mb_costs ? calloc((size_t)n * MB_LISTS * S, sizeof *d) : NULL;
    if (!d) {
      free(out->mb_costs), out->mb_costs = NULL;
      return kt_fail(err, KT_ENOMEM, "out of memory");
    }
    out->mb_costs[0].tf = d;
    out->n_mb_costs = n, out->mb_cost_stages = S;
  }
  double *d = out->mb_costs[0].tf;
  memset(d, 0, (size_t)n * MB_LISTS * S * sizeof(double));
  for (int i = 0; i < n; i++) {
    kt_mb_cost *c = &out->mb_costs[i];
    c->tf = d + (size_t)i * MB_LISTS * S, c->tb = c->tf + S, c->tw = c->tb + S;
    c->mem_act = c->tw + S, c->mem_wgrad = c->mem_act + S, c->mem_transient = c->mem_wgrad + S;
    c->round = i / M, c->mb = i % M;
    held(&mbs[i], T, c);
  }
  bytes_held(out->mb_costs, n, M, S, mbs, rc);
  return times(out->mb_costs, K, M, S, tl, err);
}

void kt__free_mb_costs(kt_train_result *out) {
  if (out->mb_costs) free(out->mb_costs[0].tf);
  free(out->mb_costs);
  out->mb_costs = NULL, out->n_mb_costs = out->mb_cost_stages = 0;
}

/* Real tokens of a step's n micro-batches: what packed ones hold, else fixed. */
static double step_tokens(const kt_microbatch *mbs, int n, double fixed) {
  double t = 0;
  for (int i = 0; i < n; i++) {
    if (!mbs[i].pos) return fixed;
    t += mbs[i].n_tokens;
  }
  return t;
}

kt_status kt__step_record(kt_train_result *out, const kt_train_config *cfg,
                          const kt_microbatch *mbs, double fixed, const kt_timeline *tl,
                          kt_train_progress *p, kt_error *err) {
  const kt_runtime_config *rc = &cfg->runtime;
  double tokens = fixed;
  if (mbs) {
    int K = rc->grad_accum, M = rc->schedule->m, S = kt_schedule_stages(rc->schedule);
    size_t T = cfg->data->tokens_per_sample ? cfg->data->tokens_per_sample : 1;
    tokens = step_tokens(mbs, rc->data_parallel * K * M, fixed);
    kt_status st = record(out, mbs, K, M, S, (int)T, rc, tl, err);
    if (st) return st;
  }
  out->tokens += tokens;
  p->tokens_per_s = tokens / p->seconds;
  return KT_OK;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The micro-batches a fit reads at most (their pairs' slopes are kept),
 * at least, and the relative miss it allows the median micro-batch. */
#define FIT_MAX 256
#define FIT_LEAST 4
#define FIT_MISS 0.1

double kt_mb_cost_attn_fit(const kt_mb_cost *c, int n, int S, int budget) {
  if (n > FIT_MAX) n = FIT_MAX;
  double r[FIT_MAX], y[FIT_MAX], w[FIT_MAX]; /* L2 / L1 and time / L1 of each; scratch */
  int k = 0;
  for (int i = 0; i < n; i++) {
    double t = 0;
    for (int s = 0; s < S; s++) t += c[i].tf[s] + c[i].tb[s] + c[i].tw[s];
    if (c[i].tokens > 0 && t > 0) r[k] = c[i].attn_tokens2 / c[i].tokens, y[k++] = t / c[i].tokens;
  }
  if (k < FIT_LEAST) return -1;
  double *slope = malloc(sizeof(double) * (size_t)(k * (k - 1) / 2 + 1));
  if (!slope) return -1;
  int n_slopes = 0;
  for (int i = 0; i < k; i++)
    for (int j = i + 1; j < k; j++)
      if (fabs(r[i] - r[j]) > 1e-9 * (r[i] + r[j]))
        slope[n_slopes++] = (y[i] - y[j]) / (r[i] - r[j]);
  if (n_slopes == 0) {
    free(slope);
    return -1;
  }
  qsort(slope, (size_t)n_slopes, sizeof *slope, by_value);
  double b = slope[n_slopes / 2];
  free(slope);
  for (int i = 0; i < k; i++) w[i] = y[i] - b * r[i]; /* the per-token part of each */
  qsort(w, (size_t)k, sizeof *w, by_value);
  double a = w[k / 2];
  /* a part that is not positive, or times the line misses by more than
   * FIT_MISS for half the micro-batches: not the token model's times (an
   * overhead per op, say, on a small model; noise) */
  if (!(a > 0 && b > 0)) return -1;
  for (int i = 0; i < k; i++) w[i] = fabs(y[i] - a - b * r[i]) / (a + b * r[i]);
  qsort(w, (size_t)k, sizeof *w, by_value);
  if (w[k / 2] > FIT_MISS) return -1;
  return round(100 * b * budget / (a + b * budget)) / 100;
}
