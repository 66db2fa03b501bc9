/* Stage costs from a measured step (kt_calibrate_costs): each (stage,
 * op)'s mean, the hand-over time between ranks, the time to post a send,
 * and each micro-batch's own costs where they differ by design. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/train.h"
#include "train/session_internal.h"

/* The time a hand-over between ranks took: for every action that sat waiting
 * for a remote input (its rank was idle when the producer finished), the gap
 * between the producer's end and its own start; the median of those, and
 * each link's own (link_comm) where one differs from it by more than a
 * tenth of the step's mean op (a slow link). */
static double calibrate_hop(const kt_timeline *t, const kt_schedule *s, double op_mean,
                            kt_costs *out) {
  size_t n = t->n_events + 1;
  double *gaps = kt_calloc(n, sizeof *gaps), *mine = kt_calloc(n, sizeof *mine), hop = 0;
  int *from = kt_calloc(n, sizeof *from), *to = kt_calloc(n, sizeof *to);
  size_t ng = gaps && mine && from && to ? kt__hop_gaps(t, s, gaps, from, to, NULL) : 0;
  for (size_t i = 0; i < ng; i++) mine[i] = gaps[i];
  hop = kt_median(mine, ng);
  out->comm = hop;
  kt_error err;
  for (int l = 0; l < (s->p == 2 ? 1 : s->p) && s->p > 1 && ng; l++) {
    size_t k = 0;
    for (size_t i = 0; i < ng; i++)
      if (kt_link_index(from[i], to[i], s->p) == l) mine[k++] = gaps[i];
    double own = k ? kt_median(mine, k) : hop;
    if (fabs(own - hop) <= 0.1 * op_mean) continue;
    if (!out->link_comm && kt_costs_links_for(out, s->p, &err)) break;
    out->link_comm[l] = own;
  }
  free(gaps), free(mine), free(from), free(to);
  return hop;
}

/* What posting a send holds its rank: the median of the step's sends (0
 * when it recorded none, e.g. one rank). */
static double calibrate_send(const kt_timeline *t) {
  double *d = kt_calloc(t->n_comm + 1, sizeof *d), o = 0;
  size_t n = 0;
  if (!d) return 0;
  for (size_t i = 0; i < t->n_comm; i++)
    if (t->comm[i].op == KT_OP_SEND_F || t->comm[i].op == KT_OP_SEND_B)
      d[n++] = t->comm[i].end - t->comm[i].start;
  if (n) o = kt_median(d, n);
  free(d);
  return o > 0 ? o : 0;
}

/* Micro-batches of their own costs (variable-length data): each (stage,
 * micro-batch)'s mean F, I (or B) and W where some stage's micro-batches'
 * forwards differ by more than a quarter; nothing where they are alike.
 * Only for a run whose micro-batches differ by design (a measured step's
 * noise alone must not give the prediction one list per micro-batch). */
#define MB_SPREAD 1.25
kt_status kt__calibrate_mb(const kt_timeline *t, const kt_schedule *s, kt_costs *out,
                           kt_error *err) {
  int S = kt_schedule_stages(s), M = s->m;
  size_t cells = (size_t)S * (size_t)M;
  double *sum = kt_calloc(cells * KT_OP_COUNT, sizeof(double)),
         *vals = kt_calloc(cells, sizeof(double));
  size_t *count = kt_calloc(cells * KT_OP_COUNT, sizeof(size_t));
  kt_status st =
      sum && vals && count ? KT_OK : kt_fail(err, KT_ENOMEM, "out of memory calibrating costs");
  for (size_t i = 0; !st && i < t->n_events; i++) {
    const kt_event *e = &t->events[i];
    if (e->stage < 0 || e->stage >= S || e->op >= KT_OP_COUNT || e->mb < 0) continue;
    size_t k = ((size_t)e->stage * (size_t)M + (size_t)(e->mb % M)) * KT_OP_COUNT + e->op;
    sum[k] += e->end - e->start, count[k]++;
  }
#define MEAN(x, op) \
  (count[(x)*KT_OP_COUNT + (op)] \
       ? sum[(x)*KT_OP_COUNT + (op)] / (double)count[(x)*KT_OP_COUNT + (op)] \
       : 0)
  int differ = 0;
  for (int st_ = 0; !st && st_ < S; st_++) {
    double lo = INFINITY, hi = 0;
    for (int j = 0; j < M; j++) {
      double f = MEAN((size_t)st_ * (size_t)M + (size_t)j, KT_OP_F);
      lo = fmin(lo, f), hi = fmax(hi, f);
    }
    differ |= hi > MB_SPREAD * lo;
  }
  const kt_op ops[] = {KT_OP_F, KT_OP_I, KT_OP_W};
  const char *const fields[] = {"tf", "tb", "tw"};
  for (int f = 0; !st && differ && f < 3; f++) {
    for (size_t x = 0; x < cells; x++) {
      int split = count[x * KT_OP_COUNT + KT_OP_I] || count[x * KT_OP_COUNT + KT_OP_W];
      vals[x] = split || ops[f] == KT_OP_F ? MEAN(x, ops[f])
                : ops[f] == KT_OP_I        ? MEAN(x, KT_OP_B)
                                           : 0;
    }
    st = kt_costs_set_mb(out, fields[f], vals, S, M, err);
  }
#undef MEAN
  free(sum), free(vals), free(count);
  return st;
}

kt_status kt_calibrate_costs(const kt_timeline *measured, const kt_schedule *s, kt_costs *out,
                             kt_error *err) {
  int S = kt_schedule_stages(s);
  kt_costs_default(out);
  out->mem_act = 0;
  out->n_stages = S;
  out->stage_tf = kt_calloc((size_t)S, sizeof(double));
  out->stage_tb = kt_calloc((size_t)S, sizeof(double));
  out->stage_tw = kt_calloc((size_t)S, sizeof(double));
  /* the mean of each (stage, op), so the prediction does the step's total work */
  double *sum = kt_calloc((size_t)S * KT_OP_COUNT, sizeof(double));
  size_t *count = kt_calloc((size_t)S * KT_OP_COUNT, sizeof(size_t));
  if (!out->stage_tf || !out->stage_tb || !out->stage_tw || !sum || !count) {
    free(sum);
    free(count);
    kt_costs_free(out);
    return kt_fail(err, KT_ENOMEM, "out of memory calibrating costs");
  }
  for (size_t i = 0; i < measured->n_events; i++) {
    const kt_event *e = &measured->events[i];
    if (e->stage < 0 || e->stage >= S || e->op >= KT_OP_COUNT) continue;
    sum[(size_t)e->stage * KT_OP_COUNT + e->op] += e->end - e->start;
    count[(size_t)e->stage * KT_OP_COUNT + e->op]++;
  }
  for (int st = 0; st < S; st++) {
    double mean[KT_OP_COUNT];
    for (int op = 0; op < KT_OP_COUNT; op++) {
      size_t k = (size_t)st * KT_OP_COUNT + (size_t)op;
      mean[op] = count[k] ? sum[k] / (double)count[k] : 0;
    }
    out->stage_tf[st] = mean[KT_OP_F];
    if (count[(size_t)st * KT_OP_COUNT + KT_OP_I] || count[(size_t)st * KT_OP_COUNT + KT_OP_W]) {
      out->stage_tb[st] = mean[KT_OP_I];
      out->stage_tw[st] = mean[KT_OP_W];
    } else {
      out->stage_tb[st] = mean[KT_OP_B]; /* a full backward: its split is not observable */
      out->stage_tw[st] = 0;
    }
  }
  free(sum);
  free(count);
  out->tf = out->stage_tf[0];
  out->tb = out->stage_tb[0];
  out->tw = out->stage_tw[0];
  double ops = 0;
  int n_ops = 0;
  for (int st = 0; st < S; st++) ops += out->stage_tf[st] + out->stage_tb[st], n_ops += 2;
  calibrate_hop(measured, s, n_ops ? ops / n_ops : 0, out);
  out->send_overhead = calibrate_send(measured);
  return KT_OK;
}
