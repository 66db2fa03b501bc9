/* interleaved-zb: zero bubble with V chunks per rank in loop placement, the
 * ZB-H1 pattern over interleaved chunks (the schedule PyTorch calls
 * ScheduleInterleavedZeroBubble, "ZB1P" in Qi et al.).
 *
 * Micro-batches are taken in R = max(1, floor(M/P)) rounds of (nearly) equal
 * size G (G = M/R when R divides M, as PyTorch requires; otherwise the
 * first M mod R rounds hold one more). Within a round a rank runs the whole
 * round through chunk 0, then chunk 1, ... for forwards, and through chunk
 * V-1, V-2, ... for backwards. Rank r runs
 *
 *   warm-up  min((V-1)*G + P-1-r, V*M) forwards;
 *   steady   one forward, one I, and from the (r+1)-th step on the oldest W;
 *   drain    one I and (from the (r+1)-th step on) the oldest W;
 *   then the remaining W.
 *
 * Holding r W's back fills the bubble of the 1F1B warm-up, as in ZB-H1.
 * With uneven rounds the standard warm-up can wait on a forward queued
 * behind a backward upstream, so every rank's warm-up grows by the
 * smallest common amount that runs to completion (checked by simulation). */
#include <stdlib.h>

#include "kaiten/sim.h"
#include "generators/internal.h"

/* Round sizes: R rounds over m micro-batches, the larger ones first. */
typedef struct {
  int rounds, m;
} rounding;

static int round_size(const rounding *rd, int g) {
  return rd->m / rd->rounds + (g < rd->m % rd->rounds);
}

/* The chunk and micro-batch of the k-th forward (backward: chunks reversed). */
static void slot(const rounding *rd, int v, int k, int backward, int *chunk, int *mb) {
  int g = 0, start = 0;
  while (k >= v * round_size(rd, g)) {
    k -= v * round_size(rd, g);
    start += round_size(rd, g);
    g++;
  }
  int size = round_size(rd, g), c = k / size;
  *chunk = backward ? v - 1 - c : c;
  *mb = start + k % size;
}

typedef struct {
  kt_schedule *s;
  const rounding *rd;
  int r, nf, ni, nw;
} rank_cursor;

static kt_status emit(rank_cursor *c, kt_op op, kt_error *err) {
  kt_schedule *s = c->s;
  int chunk, mb, *n = op == KT_OP_F ? &c->nf : op == KT_OP_I ? &c->ni : &c->nw;
  slot(c->rd, s->v, *n, op != KT_OP_F, &chunk, &mb);
  (*n)++;
  int r = c->r;
  KT__PUSH(s, r, kt_rank_chunk_stage(s, r, chunk), op, mb);
  return KT_OK;
}

static kt_status build(kt_schedule *s, const rounding *rd, int extra, kt_error *err) {
  int p = s->p, v = s->v, total = v * s->m;
  for (int r = 0; r < p; r++) {
    s->ranks[r].n = 0;
    rank_cursor c = {s, rd, r, 0, 0, 0};
    int warm = (v - 1) * round_size(rd, 0) + p - 1 - r + extra;
    if (warm > total) warm = total;
    kt_status st = KT_OK;
    while (!st && c.nf < warm) st = emit(&c, KT_OP_F, err);
    for (int step = 0; !st && c.ni < total; step++) {
      if (c.nf < total) st = emit(&c, KT_OP_F, err);
      if (!st) st = emit(&c, KT_OP_I, err);
      if (!st && step >= r) st = emit(&c, KT_OP_W, err);
    }
    while (!st && c.nw < total) st = emit(&c, KT_OP_W, err);
    if (st) return st;
  }
  return KT_OK;
}

kt_status kt__gen_interleaved_zb(kt_schedule *s, const kt_gen_params *params, kt_error *err) {
  (void)params;
  if (s->v < 2)
    return kt_fail(err, KT_EINVAL,
                   "interleaved-zb needs V >= 2 chunks per rank (got V=%d); "
                   "with one chunk use zb-h1",
                   s->v);
  rounding rd = {s->m / s->p > 1 ? s->m / s->p : 1, s->m};
  for (int extra = 0; extra <= s->v * s->m; extra++) {
    kt_status st = build(s, &rd, extra, err);
    if (st || s->m % rd.rounds == 0) return st;
    kt_error ignored;
    st = kt_simulate(s, NULL, NULL, &ignored);
    if (st == KT_OK) return KT_OK;
    if (st != KT_EDEADLOCK) return kt_fail(err, st, "interleaved-zb: %s", ignored.msg);
  }
  return kt_fail(err, KT_EINVAL, "interleaved-zb: no deadlock-free warm-up for P=%d V=%d M=%d",
                 s->p, s->v, s->m);
}
