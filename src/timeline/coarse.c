/* Coarse timelines: a run too large to keep every event (tens of millions
 * of actions) is streamed into fixed time bins per rank, and the result is
 * an ordinary kt_timeline that every renderer draws. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/schedule.h"
#include "kaiten/timeline.h"

kt_status kt_coarse_init(kt_timeline_coarse *c, int p, double t0, double t1, int bins, int dominant,
                         kt_error *err) {
  memset(c, 0, sizeof *c);
  if (p < 1 || bins < 1 || !(t1 > t0))
    return kt_fail(err, KT_EINVAL, "coarse timeline: %d ranks, %d bins over [%g, %g]", p, bins, t0,
                   t1);
  c->p = p, c->bins = bins, c->dominant = dominant, c->t0 = t0, c->bin = (t1 - t0) / bins;
  size_t cells = (size_t)p * (size_t)bins;
  c->busy = kt_calloc(cells * KT_OP_COUNT, sizeof *c->busy);
  c->mem = kt_calloc(cells, sizeof *c->mem);
  c->level = kt_calloc((size_t)p, sizeof *c->level);
  c->mem_bin = kt_calloc((size_t)p, sizeof *c->mem_bin);
  if (!c->busy || !c->mem || !c->level || !c->mem_bin) {
    kt_coarse_free(c);
    return kt_fail(err, KT_ENOMEM, "out of memory for a %d x %d coarse timeline", p, bins);
  }
  return KT_OK;
}

void kt_coarse_free(kt_timeline_coarse *c) {
  free(c->busy);
  free(c->mem);
  free(c->level);
  free(c->mem_bin);
  memset(c, 0, sizeof *c);
}

static int bin_of(const kt_timeline_coarse *c, double t) {
  double k = floor((t - c->t0) / c->bin);
  return kt_to_int(k, 0, c->bins - 1); /* NaN: the last */
}

void kt_coarse_add_event(void *ctx, const kt_event *e) {
  kt_timeline_coarse *c = ctx;
  if (e->rank < 0 || e->rank >= c->p || e->op >= KT_OP_COUNT || !(e->end > e->start)) return;
  double *row = c->busy + (size_t)e->rank * (size_t)c->bins * KT_OP_COUNT;
  for (int k = bin_of(c, e->start), k1 = bin_of(c, e->end); k <= k1; k++) {
    double lo = c->t0 + k * c->bin, hi = lo + c->bin;
    double part = fmin(e->end, hi) - fmax(e->start, lo);
    if (part > 0) row[(size_t)k * KT_OP_COUNT + e->op] += part;
  }
}

/* Bins from the rank's last sample up to k hold the level it left. */
static void carry_level(kt_timeline_coarse *c, int rank, int k) {
  double *m = c->mem + (size_t)rank * (size_t)c->bins;
  for (int j = c->mem_bin[rank] + 1; j <= k && j < c->bins; j++)
    if (c->level[rank] > m[j]) m[j] = c->level[rank];
}

void kt_coarse_add_mem(void *ctx, int rank, double t, double value) {
  kt_timeline_coarse *c = ctx;
  if (rank < 0 || rank >= c->p) return;
  int k = bin_of(c, t);
  carry_level(c, rank, k);
  double *m = c->mem + (size_t)rank * (size_t)c->bins;
  if (value > m[k]) m[k] = value;
  if (k > c->mem_bin[rank]) c->mem_bin[rank] = k;
  c->level[rank] = value;
}

/* One rank's bin: its ops laid end to end from the bin's start, or (dominant)
 * one bin-wide event of the op that used most of it when the rank was busy
 * for at least half of it. */
static kt_status emit_bin(const kt_timeline_coarse *c, int r, int k, kt_timeline *out) {
  const double *b = c->busy + ((size_t)r * (size_t)c->bins + (size_t)k) * KT_OP_COUNT;
  double x = c->t0 + k * c->bin, total = 0;
  int top = 0;
  for (int op = 0; op < KT_OP_COUNT; op++) {
    total += b[op];
    if (b[op] > b[top]) top = op;
  }
  kt_event e = {.rank = r, .stage = r, .mb = 0};
  if (c->dominant) {
    if (total < 0.5 * c->bin) return KT_OK;
    e.op = (uint8_t)top, e.start = x, e.end = x + c->bin;
    return kt_timeline_add_event(out, &e);
  }
  for (int op = 0; op < KT_OP_COUNT; op++) {
    if (b[op] <= 0) continue;
    e.op = (uint8_t)op, e.start = x, e.end = x + b[op];
    if (kt_timeline_add_event(out, &e)) return KT_ENOMEM;
    x += b[op];
  }
  return KT_OK;
}

kt_status kt_coarse_finish(kt_timeline_coarse *c, const char *time_unit, const char *mem_unit,
                           kt_timeline *out, kt_error *err) {
  kt_timeline_init(out, c->p, time_unit, mem_unit);
  kt_status st = KT_OK;
  for (int r = 0; r < c->p && !st; r++) {
    carry_level(c, r, c->bins - 1);
    const double *m = c->mem + (size_t)r * (size_t)c->bins;
    for (int k = 0; k < c->bins && !st; k++) {
      st = emit_bin(c, r, k, out);
      if (!st && (k == 0 || m[k] != m[k - 1]))
        st = kt_timeline_add_mem(out, r, c->t0 + k * c->bin, m[k]);
    }
  }
  kt_coarse_free(c);
  if (!st) return KT_OK;
  kt_timeline_free(out);
  return kt_fail(err, KT_ENOMEM, "out of memory building a coarse timeline");
}
