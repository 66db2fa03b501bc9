/* What must run on a rank before each of its ops, whatever the order: the
 * exact search's bound (optimal_bound.c) starts an op no sooner than these
 * predecessors could all have run on the rank's one machine.
 *
 * Slot x of an op on a rank needs slot x of the ops before it in the
 * micro-batch's chain that the rank also runs (I of chunk 0 needs F and I
 * of chunk 1 in v placement), and the earlier slots of its own kind. The
 * memory limit adds more: right after a forward (or an I that holds more
 * than it frees) the rank holds what its counts say, so enough I's and W's
 * must have run first; and a forward of another chunk that would come
 * after it could then not fit at all, so it must come first. With every
 * count of I and W as high as the chain allows, a count below q never
 * fits: slots 0..q-1 precede the op. Counts only grow, so the table is a
 * fixed point of these rules. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "generators/optimal_internal.h"

/* the table's entry for op (c, t, slot j) of rank r */
#define NEED(pb, r, c, t, j) \
  ((pb)->need + ((((size_t)(r) * (size_t)(pb)->v + (size_t)(c)) * KT__OPT_TYPES + (size_t)(t)) * \
                     (size_t)(pb)->m + \
                 (size_t)(j)) * \
                    (size_t)(pb)->nk)

/* same[k]: 1 when slot x of (c, t) needs slot x of kind k = c' * 3 + t' of
 * the same rank through its chain (itself excluded). */
static void chain_of(const kt__opt_problem *pb, int r, int c, int t, uint8_t *same) {
  memset(same, 0, (size_t)pb->nk);
  int s = pb->rstage[r * pb->v + c];
  for (;;) {
    if (t == KT__OPT_F) {
      if (s == 0) return;
      s--;
    } else if (t == KT__OPT_W) {
      t = KT__OPT_I;
    } else if (s == pb->S - 1) {
      t = KT__OPT_F;
    } else {
      s++;
    }
    int c2 = pb->srank[s] == r ? pb->schunk[s] : -1;
    if (c2 >= 0) same[c2 * KT__OPT_TYPES + t] = 1;
  }
}

/* The rank's memory with counts n (kinds c * 3 + t). */
static double held(const kt__opt_problem *pb, int r, const int *n) {
  double m = 0;
  for (int c = 0; c < pb->v; c++) {
    int s = pb->rstage[r * pb->v + c];
    if (s < 0) continue;
    const int *k = n + c * KT__OPT_TYPES;
    m += pb->act[s] * (k[KT__OPT_F] - k[KT__OPT_I]) + pb->wg[s] * (k[KT__OPT_I] - k[KT__OPT_W]);
  }
  return m;
}

typedef struct {
  const kt__opt_problem *pb;
  int r, nk;
  uint8_t *same; /* nk * nk: same[k * nk + k2] */
} rank_rules;

/* Lowers n[k] to at most cap (never below lo[k]); 1 when it moved. */
static int lower_to(int *n, const int *lo, int k, int cap) {
  if (cap < lo[k]) cap = lo[k];
  if (cap >= n[k]) return 0;
  n[k] = cap;
  return 1;
}

/* The least memory the rank can hold with every count between lo and hi
 * (a kind's count never above a kind it needs slot by slot, an I's never
 * above its F's, a W's never above its I's); n receives the counts. A
 * micro-batch whose F, I and W have all run holds nothing, so the least
 * is at as many I's and W's as allowed, then as few forwards as those
 * leave possible. */
static double least_held(const rank_rules *rr, const int *lo, const int *hi, int *n) {
  int nk = rr->nk, changed = 1;
  for (int k = 0; k < nk; k++) n[k] = hi[k];
  while (changed) { /* every kind as far as what it needs has got */
    changed = 0;
    for (int k = 0; k < nk; k++) {
      if (k % KT__OPT_TYPES != KT__OPT_F) changed |= lower_to(n, lo, k, n[k - 1]);
      for (int k2 = 0; k2 < nk; k2++)
        if (rr->same[k * nk + k2]) changed |= lower_to(n, lo, k, n[k2]);
    }
  }
  for (changed = 1; changed;) { /* forwards down to what the rest needs */
    changed = 0;
    for (int k = 0; k < nk; k += KT__OPT_TYPES) {
      int least = n[k + KT__OPT_I];
      for (int k2 = 0; k2 < nk; k2++)
        if (rr->same[k2 * nk + k] && n[k2] > least) least = n[k2];
      changed |= lower_to(n, lo, k, least);
    }
  }
  return held(rr->pb, rr->r, n);
}

/* Whether the rank's I's and W's only free memory (M_W <= M_B): the
 * memory rules assume it. */
static int frees_only(const kt__opt_problem *pb, int r) {
  for (int c = 0; c < pb->v; c++) {
    int s = pb->rstage[r * pb->v + c];
    if (s >= 0 && pb->wg[s] > pb->act[s]) return 0;
  }
  return 1;
}

/* The least count of kind k the rank must have run for its memory to fit
 * under limit with counts between lo and hi (the largest count allowed
 * when none does: the caller then knows the op cannot fit). */
static int least_count(const rank_rules *rr, const int *lo, const int *hi, int k, double limit) {
  int n[3 * 2], h2[3 * 2];
  least_held(rr, lo, hi, n);
  int most = n[k];
  memcpy(h2, hi, sizeof h2);
  /* a higher cap on kind k lets as much run or more, so what is held can
   * only fall as q grows: the least q that fits, by bisection */
  int a = lo[k], b = most; /* the answer is in [a, b] */
  while (a < b) {
    int q = a + (b - a) / 2;
    h2[k] = q;
    if (least_held(rr, lo, h2, n) <= limit) b = q;
    else a = q + 1;
  }
  return a;
}

/* Raises need (op of kind kx, slot j) by the memory rules. 0, or -1 when
 * the op can never fit. */
static int memory_rules(const rank_rules *rr, int kx, int j, int *need, double limit) {
  const kt__opt_problem *pb = rr->pb;
  int nk = rr->nk, lo[3 * 2], hi[3 * 2], n[3 * 2];
  if (kx % KT__OPT_TYPES != KT__OPT_F) return 0; /* an I or W frees (frees_only) */
  /* right after the op: it has run, nothing after it in its kind or chain */
  for (int k = 0; k < nk; k++) {
    lo[k] = need[k], hi[k] = pb->m;
    if (rr->same[k * nk + kx]) hi[k] = j;
  }
  lo[kx] = hi[kx] = j + 1;
  if (least_held(rr, lo, hi, n) > limit) return -1;
  for (int k = 0; k < nk; k++)
    if (k % KT__OPT_TYPES != KT__OPT_F) {
      int q = least_count(rr, lo, hi, k, limit);
      if (q > need[k]) need[k] = q;
    }
  /* a forward of another chunk after this op that could then not fit */
  for (int k = 0; k < nk; k += KT__OPT_TYPES) {
    if (k == kx) continue;
    /* (slots before the op's only: the bound's sweep reaches them first) */
    for (int x = j - 1; x >= need[k]; x--) {
      if (rr->same[k * nk + kx]) continue; /* it comes after the op anyway */
      int lo2[3 * 2], hi2[3 * 2];
      for (int k2 = 0; k2 < nk; k2++) {
        lo2[k2] = need[k2], hi2[k2] = pb->m;
        if (rr->same[k * nk + k2] && lo2[k2] < x + 1) lo2[k2] = x + 1;
        if (rr->same[k2 * nk + k]) hi2[k2] = x;
      }
      if (lo2[kx] < j + 1) lo2[kx] = j + 1;
      lo2[k] = hi2[k] = x + 1;
      if (least_held(rr, lo2, hi2, n) > limit) {
        need[k] = x + 1;
        break;
      }
    }
  }
  return 0;
}

/* One pass of the rules over rank r; 1 when something grew, -1 when an op
 * can never fit. */
static int rank_pass(const rank_rules *rr, double limit, int memory) {
  const kt__opt_problem *pb = rr->pb;
  int nk = rr->nk, grew = 0;
  for (int kx = 0; kx < nk; kx++) {
    int c = kx / KT__OPT_TYPES, t = kx % KT__OPT_TYPES;
    if (pb->rstage[rr->r * pb->v + c] < 0) continue;
    for (int j = 0; j < pb->m; j++) {
      int *need = NEED(pb, rr->r, c, t, j), before[3 * 2];
      memcpy(before, need, (size_t)nk * sizeof *need);
      if (need[kx] < j) need[kx] = j;
      for (int k = 0; k < nk; k++)
        if (rr->same[kx * nk + k] && need[k] < j + 1) need[k] = j + 1;
      if (memory && memory_rules(rr, kx, j, need, limit) < 0) return -1;
      for (int k = 0; k < nk; k++) { /* what the ops before it need */
        if (!need[k]) continue;
        const int *y = NEED(pb, rr->r, k / KT__OPT_TYPES, k % KT__OPT_TYPES, need[k] - 1);
        if (y == need) continue;
        for (int k2 = 0; k2 < nk; k2++)
          if (y[k2] > need[k2]) need[k2] = y[k2];
      }
      if (need[kx] > j) return -1; /* it would have to run before itself */
      grew |= memcmp(before, need, (size_t)nk * sizeof *need) != 0;
    }
  }
  return grew;
}

/* The table's size limit: ranks with up to 96 ops (V = 2, M = 16), where
 * the bound's per-op predecessor walk stays cheap. */
#define MAX_RANK_OPS 96

/* Whether ranks q and r get the same table: the same chains and the same
 * memory per chunk (the rules read nothing else). */
static int same_rules(const kt__opt_problem *pb, const uint8_t *same, int q, int r) {
  size_t nn = (size_t)pb->nk * (size_t)pb->nk;
  if (memcmp(same + (size_t)q * nn, same + (size_t)r * nn, nn)) return 0;
  for (int c = 0; c < pb->v; c++) {
    int sq = pb->rstage[q * pb->v + c], sr = pb->rstage[r * pb->v + c];
    if ((sq < 0) != (sr < 0)) return 0;
    if (sq >= 0 && (pb->act[sq] != pb->act[sr] || pb->wg[sq] != pb->wg[sr])) return 0;
  }
  return 1;
}

kt_status kt__opt_needs_init(kt__opt_problem *pb, kt_error *err) {
  pb->nk = KT__OPT_TYPES * pb->v;
  if (pb->v > 2 || pb->nk * pb->m > MAX_RANK_OPS) return KT_OK;
  size_t nn = (size_t)pb->nk * (size_t)pb->nk;
  size_t per_rank = (size_t)pb->v * KT__OPT_TYPES * (size_t)pb->m * (size_t)pb->nk;
  pb->need = kt_calloc((size_t)pb->p * per_rank, sizeof *pb->need);
  uint8_t *same = kt_calloc((size_t)pb->p * nn, 1);
  int *failed = kt_calloc((size_t)pb->p, sizeof *failed);
  if (!pb->need || !same || !failed) {
    free(same);
    free(failed);
    return kt_fail(err, KT_ENOMEM, "optimal: out of memory for the predecessor table");
  }
  double limit = kt_tolerance(pb->limit);
  for (int r = 0; r < pb->p; r++) {
    uint8_t *mine = same + (size_t)r * nn;
    rank_rules rr = {pb, r, pb->nk, mine};
    for (int k = 0; k < pb->nk; k++)
      if (pb->rstage[r * pb->v + k / KT__OPT_TYPES] >= 0)
        chain_of(pb, r, k / KT__OPT_TYPES, k % KT__OPT_TYPES, mine + k * pb->nk);
    int q = 0; /* most ranks repeat an earlier one's rules (uniform memory) */
    while (q < r && !same_rules(pb, same, q, r)) q++;
    if (q < r) {
      memcpy(pb->need + (size_t)r * per_rank, pb->need + (size_t)q * per_rank,
             per_rank * sizeof *pb->need);
      failed[r] = failed[q];
    } else {
      int memory = frees_only(pb, r), g;
      while ((g = rank_pass(&rr, limit, memory)) > 0) continue;
      failed[r] = g < 0;
    }
    if (failed[r]) pb->infeasible = 1;
  }
  free(same);
  free(failed);
  return KT_OK;
}
