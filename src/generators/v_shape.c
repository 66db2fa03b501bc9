/* v-half and v-min: V-shaped schedules with controllable memory (Qi et al.,
 * "Pipeline Parallelism with Controllable Memory", arXiv 2405.15362),
 * two chunks per rank in v placement.
 *
 * Construction (unit time slots, costs ignored): every rank repeats a
 * building block of 6 slots per micro-batch, four of them at fixed offsets
 * from the block's start, for rank r (n = P):
 *
 *            F(stage r)  F(stage 2n-1-r)   I(stage 2n-1-r)      I(stage r)
 *   v-min    r           2n-1-r            2n+g+r               4n+g-1-r     g = 2 if 3 | n else 0
 *   v-half   2r          3n-2-r            3n+g+2r-1            6n+g-r-2     g = 3 if 2 | n else 0
 *
 * An activation lives from its F to its I: in total about 4n slots (v-min)
 * or 6n (v-half) per micro-batch, i.e. about 2n/3 or n of them at once
 * against 1F1B's 2n (one third and one half of its memory). W's take the
 * free slots, oldest first. Then the warm-up and the cool-down are
 * squeezed: in time order each op moves to the earliest free slot after
 * its dependencies where the rank's peak does not grow (with the W's, then
 * without them and the W's placed again, the up chunk's W's first). The
 * order of each rank is its slots in time order.
 *
 * Without costs that is the schedule. With costs (even unit ones) the
 * search is cost-aware: under the caller's costs the order is refined along its
 * critical path (search/refine.c) with every rank kept within the memory the
 * construction gives it, and the round-based and list-scheduled orders
 * under the same budgets compete; the fastest wins. So the peak memory of
 * every rank is at most the construction's (docs/schedules.md tabulates it)
 * and the makespan at most the construction's. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "generators/search/search.h"

enum { T_F0, T_F1, T_I1, T_I0, T_W, T_W2, N_TYPES }; /* F0/I0: stage r; F1/I1: stage 2n-1-r */

typedef struct {
  int p, m;
  int *t[N_TYPES]; /* per type: p lists of up to 2m slot times, rank-major */
  int *n;          /* p * N_TYPES: length of each list */
  int types;       /* 4, 5 (one W list) or 6 (a W list per chunk) */
} pattern;

#define LIST(pt, k, r) ((pt)->t[k] + (size_t)(r)*2 * (size_t)(pt)->m)
#define LEN(pt, k, r) ((pt)->n[(size_t)(r)*N_TYPES + (size_t)(k)])

static int imax(int a, int b) { return a > b ? a : b; }

static void init_offsets(pattern *pt, int half) {
  int n = pt->p, g = half ? (n % 2 == 0 ? 3 : 0) : (n % 3 == 0 ? 2 : 0);
  for (int r = 0; r < n; r++) {
    int off[4];
    if (half)
      off[0] = 2 * r, off[1] = 3 * n - r - 2, off[2] = 3 * n + g + 2 * r - 1,
      off[3] = 6 * n + g - r - 2;
    else off[0] = r, off[1] = 2 * n - 1 - r, off[2] = 2 * n + g + r, off[3] = 4 * n + g - 1 - r;
    for (int k = 0; k < 4; k++) {
      for (int j = 0; j < pt->m; j++) LIST(pt, k, r)[j] = off[k] + 6 * j;
      LEN(pt, k, r) = pt->m;
    }
    LEN(pt, T_W, r) = LEN(pt, T_W2, r) = 0;
  }
  pt->types = 4;
}

/* The next event of rank r at or after the cursors: its type (ties: the
 * lower type), or -1 when none is left. */
static int next_event(const pattern *pt, int r, const int *cur, int *time) {
  int best = -1;
  for (int k = 0; k < pt->types; k++)
    if (cur[k] < LEN(pt, k, r) && (best < 0 || LIST(pt, k, r)[cur[k]] < *time))
      best = k, *time = LIST(pt, k, r)[cur[k]];
  return best;
}

/* The highest slot any op of the first `types` types holds, or -1: each
 * list's last (every list is in slot order: an op never moves before the
 * one ahead of it in its list, nor past the one after it). */
static int top_slot(const pattern *pt, int types) {
  int top = -1;
  for (int r = 0; r < pt->p; r++)
    for (int k = 0; k < types; k++)
      if (LEN(pt, k, r) > 0) top = imax(top, LIST(pt, k, r)[LEN(pt, k, r) - 1]);
  return top;
}

/* Rank r's ops of the first `types` types by slot: row[t] = j * 8 + type
 * (row all -1 on entry, of at least top_slot + 1 entries). Returns the
 * number of ops, or -1 (row cleared again) when two share a slot. */
static int rank_row(const pattern *pt, int r, int types, int *row) {
  int n = 0;
  for (int k = 0; k < types; k++)
    for (int j = 0; j < LEN(pt, k, r); j++, n++) {
      int t = LIST(pt, k, r)[j];
      if (row[t] >= 0) {
        for (int c = 0; c < types; c++)
          for (int i = 0; i < LEN(pt, c, r); i++) row[LIST(pt, c, r)[i]] = -1;
        return -1;
      }
      row[t] = j * 8 + k;
    }
  return n;
}

/* The W placement's two steps: a free slot i takes the oldest pending W
 * (the up chunk's first when split), and the W's still pending at the end
 * follow the last op (from slot i + 1 on). */
static void w_into(pattern *pt, int r, int *pending, int i) {
  for (int w = 0; w < 2; w++)
    if (pending[w]) {
      LIST(pt, T_W + w, r)[LEN(pt, T_W + w, r)++] = i;
      pending[w]--;
      return;
    }
}

static void w_after(pattern *pt, int r, int *pending, int i) {
  for (int w = 0; w < 2; w++)
    while (pending[w]--) LIST(pt, T_W + w, r)[LEN(pt, T_W + w, r)++] = ++i;
}

/* W's into rank r's free slots, oldest first (split: the W's of the up
 * chunk's I's before those of the down chunk's, in two lists): the walk
 * over the slots when no two ops share one (row: scratch as for rank_row). */
static int place_w_fast(pattern *pt, int r, int split, int *row) {
  int ops = rank_row(pt, r, 4, row), pending[2] = {0}, i = 0;
  if (ops < 0) return -1;
  LEN(pt, T_W, r) = LEN(pt, T_W2, r) = 0;
  for (int seen = 0; seen < ops; i++) {
    if (row[i] < 0) {
      w_into(pt, r, pending, i);
      continue;
    }
    int k = row[i] & 7;
    row[i] = -1, seen++;
    if (k == T_I1 || k == T_I0) pending[split && k == T_I0]++;
  }
  w_after(pt, r, pending, i);
  return 0;
}

/* The same by a cursor over each list, which also copes with ops that
 * share a slot (the later one runs one slot on). */
static void place_w_walk(pattern *pt, int r, int split) {
  int cur[N_TYPES] = {0}, pending[2] = {0}, i = 0;
  int saved = pt->types;
  pt->types = 4;
  LEN(pt, T_W, r) = LEN(pt, T_W2, r) = 0;
  for (;; i++) {
    int time = 0, k = next_event(pt, r, cur, &time);
    if (k < 0) break;
    if (time > i) {
      w_into(pt, r, pending, i);
      continue;
    }
    cur[k]++; /* (slots never collide; time < i keeps a collision from looping) */
    if (k == T_I1 || k == T_I0) pending[split && k == T_I0]++;
  }
  w_after(pt, r, pending, i);
  pt->types = saved;
}

/* W's for every rank (see place_w_fast). -1 on ENOMEM. */
static int place_all_w(pattern *pt, int split) {
  int saved = pt->types;
  pt->types = 4;
  int top = top_slot(pt, 4);
  int *row = malloc((size_t)(top + 2) * sizeof *row);
  if (!row) return -1;
  memset(row, -1, (size_t)(top + 2) * sizeof *row);
  for (int r = 0; r < pt->p; r++)
    if (place_w_fast(pt, r, split, row)) place_w_walk(pt, r, split);
  free(row);
  pt->types = saved;
  return 0;
}

/* One slot's effect on a rank's pending activations: an F adds one, a W
 * frees one; without W lists (has_w 0) an I leaves one W pending, which the
 * next free slot runs. */
static void step(int type, int has_w, int *level, int *pending) {
  if (type < 0) {
    if (!has_w && *pending) (*level)--, (*pending)--;
  } else if (type <= T_F1) {
    (*level)++;
  } else if (type <= T_I0) {
    if (!has_w) (*pending)++;
  } else {
    (*level)--;
  }
}

/* Every rank's slots (the op type in each, -1 when free) and the level and
 * pending W's after each, so a move is checked by walking only the slots
 * it changes. */
typedef struct {
  int slots, has_w;
  signed char *occ;
  int *lvl, *pend;
} levels;

/* Recomputes rank r's levels from slot `from` on, until they agree with the
 * old ones again after slot `past`. Returns the highest level it saw. */
static int relevel(levels *L, int r, int from, int past) {
  size_t base = (size_t)r * (size_t)L->slots;
  int level = from > 0 ? L->lvl[base + from - 1] : 0,
      pending = from > 0 ? L->pend[base + from - 1] : 0;
  int high = 0;
  for (int i = from; i < L->slots; i++) {
    step(L->occ[base + i], L->has_w, &level, &pending);
    high = imax(high, level);
    if (i > past && level == L->lvl[base + i] && pending == L->pend[base + i]) break;
    L->lvl[base + i] = level, L->pend[base + i] = pending;
  }
  return high;
}

/* With W lists an op's effect on the level is fixed (F +1, I 0, W -1) and
 * moving it from slot T to t only shifts the levels of [t, T) by that: two
 * loops over a contiguous row, which the compiler vectorises (most of the
 * squeeze's time went to walking these slot by slot). */
static int level_delta(int k) { return k <= T_F1 ? 1 : k <= T_I0 ? 0 : -1; }

static int row_max(const int *lvl, int from, int to) {
  int high = INT_MIN;
  for (int i = from; i < to; i++) high = imax(high, lvl[i]);
  return high;
}

/* The levels after moving a type-k op of rank r from slot T to t. */
static void moved(levels *L, int r, int t, int T, int k) {
  if (!L->has_w) {
    relevel(L, r, t, T);
    return;
  }
  int *lvl = L->lvl + (size_t)r * (size_t)L->slots, d = level_delta(k);
  for (int i = t; i < T; i++) lvl[i] += d;
}

/* Whether moving a type-k op of rank r from slot T to the free slot t
 * keeps every level of the rank at or below peak. */
static int move_fits(const levels *L, int r, int t, int T, int k, int peak) {
  size_t base = (size_t)r * (size_t)L->slots;
  if (L->has_w) return level_delta(k) <= 0 || row_max(L->lvl + base, t, T) + 1 <= peak;
  int level = t > 0 ? L->lvl[base + t - 1] : 0, pending = t > 0 ? L->pend[base + t - 1] : 0;
  for (int i = t; i < L->slots; i++) {
    step(i == t ? k : i == T ? -1 : L->occ[base + i], L->has_w, &level, &pending);
    if (level > peak) return 0;
    if (i > T && level == L->lvl[base + i] && pending == L->pend[base + i]) return 1;
  }
  return 1;
}

/* One op of the pattern: rank, type, micro-batch (its index in the list). */
typedef struct {
  int time, r, k, j;
} event;

/* The first index of an ascending list whose slot is at least t. */
static int first_at(const int *list, int len, int t) {
  int lo = 0, hi = len;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (list[mid] < t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* j, or the end of the cut [c[0], c[1]) when j is its start. */
static int past_cut(int j, const int *c) { return j == c[0] ? c[1] : j; }

/* The ops in slots up to lo and from hi on, in time order (ties: rank,
 * type, micro-batch): a counting sort over the slot times, which are small
 * integers. Every list is ascending, so the slots between are skipped
 * without visiting them (lo = INT_MAX: every op). n set; NULL on ENOMEM. */
static event *events(const pattern *pt, int lo, int hi, size_t *n) {
  size_t total = 0;
  int top = top_slot(pt, pt->types);
  /* each list's ops in [0, a) and [b, len) */
  int *cut = malloc((size_t)pt->p * N_TYPES * 2 * sizeof *cut);
  if (!cut) return NULL;
  for (int r = 0; r < pt->p; r++)
    for (int k = 0; k < pt->types; k++) {
      const int *list = LIST(pt, k, r);
      int len = LEN(pt, k, r), a = lo >= top ? len : first_at(list, len, lo + 1);
      int b = hi > top ? len : first_at(list, len, hi);
      if (b < a) b = a;
      cut[(r * N_TYPES + k) * 2] = a, cut[(r * N_TYPES + k) * 2 + 1] = b;
      total += (size_t)(a + len - b);
    }
  event *ev = malloc((total ? total : 1) * sizeof *ev);
  size_t *at = kt_calloc((size_t)top + 3, sizeof *at);
  if (!ev || !at) {
    free(ev), free(at), free(cut);
    return NULL;
  }
  for (int r = 0; r < pt->p; r++)
    for (int k = 0; k < pt->types; k++) {
      const int *list = LIST(pt, k, r), *c = &cut[(r * N_TYPES + k) * 2];
      for (int j = past_cut(0, c); j < LEN(pt, k, r); j = past_cut(j + 1, c)) at[list[j] + 1]++;
    }
  for (int t = 1; t <= top + 1; t++) at[t] += at[t - 1];
  for (int r = 0; r < pt->p; r++) /* in (rank, type, mb) order: stable within a slot */
    for (int k = 0; k < pt->types; k++) {
      const int *list = LIST(pt, k, r), *c = &cut[(r * N_TYPES + k) * 2];
      for (int j = past_cut(0, c); j < LEN(pt, k, r); j = past_cut(j + 1, c))
        ev[at[list[j]]++] = (event){list[j], r, k, j};
    }
  free(at), free(cut);
  *n = total;
  return ev;
}

/* The k-th smallest (1-based) of two ascending lists, or their largest
 * when they hold fewer; -1 when both are empty. A binary search on how many
 * come from a: the W's of a long cool-down would make a merge quadratic. */
static int kth_of_two(const int *a, int na, const int *b, int nb, int k) {
  if (k > na + nb) k = na + nb;
  if (k <= 0) return -1;
  int lo = k > nb ? k - nb : 0, hi = k < na ? k : na;
  while (lo < hi) { /* the fewest taken from a such that a's next is not below b's last taken */
    int i = lo + (hi - lo) / 2;
    if (a[i] < b[k - i - 1]) lo = i + 1;
    else hi = i;
  }
  return imax(lo > 0 ? a[lo - 1] : -1, k - lo > 0 ? b[k - lo - 1] : -1);
}

/* The slot the op's dependencies end in (its earliest start is one later):
 * F of the down chunk after rank r-1's, of the up chunk after rank r+1's;
 * the I's the other way; within a rank F0, F1, I1, I0 of one micro-batch in
 * that order; a W after the j-th I of the rank; each list in order. */
static int deps_slot(const pattern *pt, const event *e) {
  int r = e->r, k = e->k, j = e->j, d = -1;
  if ((k == T_F0 || k == T_I1) && r > 0) d = LIST(pt, k, r - 1)[j];
  if ((k == T_F1 || k == T_I0) && r < pt->p - 1) d = imax(d, LIST(pt, k, r + 1)[j]);
  if (k > T_F0 && k < T_W) d = imax(d, LIST(pt, k - 1, r)[j]);
  if (k == T_W) /* the j-th backward of the rank, either chunk */
    d = imax(d, kth_of_two(LIST(pt, T_I1, r), LEN(pt, T_I1, r), LIST(pt, T_I0, r), LEN(pt, T_I0, r),
                           j + 1));
  if (j > 0) d = imax(d, LIST(pt, k, r)[j - 1]);
  return d;
}

/* Recomputes every slot as the earliest after its dependencies and the
 * rank's previous op (unit costs), keeping the order. In place: in time
 * order every dependency of an op has its new slot already. -1 on ENOMEM. */
static int compact(pattern *pt) {
  size_t n;
  event *ev = events(pt, INT_MAX, INT_MAX, &n);
  int *next = kt_calloc((size_t)pt->p, sizeof *next); /* each rank's first free slot */
  if (!ev || !next) {
    free(ev), free(next);
    return -1;
  }
  for (size_t i = 0; i < n; i++) {
    const event *e = &ev[i];
    int r = e->r, k = e->k, j = e->j, d = next[r];
    if ((k == T_F0 || k == T_I1) && r > 0) d = imax(d, LIST(pt, k, r - 1)[j] + 1);
    if ((k == T_F1 || k == T_I0) && r < pt->p - 1) d = imax(d, LIST(pt, k, r + 1)[j] + 1);
    if (k > T_F0 && k < T_W) d = imax(d, LIST(pt, k - 1, r)[j] + 1);
    if (j > 0) d = imax(d, LIST(pt, k, r)[j - 1] + 1);
    LIST(pt, k, r)[j] = d;
    next[r] = d + 1;
  }
  free(ev), free(next);
  return 0;
}

/* The squeeze: in time order, each op of the warm-up (with_w) and of the
 * cool-down moves to the earliest free slot after its dependencies where
 * the rank's peak does not grow. Then W's are placed (without with_w) and
 * everything is compacted. -1 on ENOMEM. */
static int squeeze(pattern *pt, int with_w) {
  pt->types = with_w ? 5 : 4;
  if (with_w && place_all_w(pt, 0)) return -1;
  /* In time order, ops before rank 0's first I of stage 0 (the warm-up)
   * and from the first last forward on (the cool-down) may move; the
   * steady state between (most ops) is kept and never listed. */
  int t1 = LIST(pt, T_I0, 0)[0], t2 = INT_MAX;
  for (int r = 0; r < pt->p; r++) {
    int t = LIST(pt, T_F0, r)[pt->m - 1];
    if ((t > t1 || (t == t1 && r > 0)) && t < t2) t2 = t;
  }
  size_t n;
  event *ev = events(pt, t1, t2, &n);
  /* ops only move earlier, and past the last one the levels only fall */
  int slots = top_slot(pt, pt->types) + 2;
  unsigned char *busy = kt_calloc((size_t)pt->p * (size_t)slots, 1);
  levels L = {slots, with_w, malloc((size_t)pt->p * (size_t)slots),
              malloc((size_t)pt->p * (size_t)slots * sizeof(int)),
              malloc((size_t)pt->p * (size_t)slots * sizeof(int))};
  if (!ev || !busy || !L.occ || !L.lvl || !L.pend) {
    free(ev), free(busy), free(L.occ), free(L.lvl), free(L.pend);
    return -1;
  }
  memset(L.occ, -1, (size_t)pt->p * (size_t)slots);
  /* busy: every op's slot from the start, so the steady state (most ops,
   * none of which moves) is never visited in time order: a move only looks
   * at slots before the op's own, where every op still to come is later.
   * Counts, as two ops may share a slot. Both rows filled a rank at a time. */
  int peak = 0;
  for (int r = 0; r < pt->p; r++) {
    size_t base = (size_t)r * (size_t)slots;
    for (int k = 0; k < pt->types; k++)
      for (int j = 0; j < LEN(pt, k, r); j++) {
        int t = LIST(pt, k, r)[j];
        busy[base + (size_t)t]++;
        L.occ[base + (size_t)t] = (signed char)k;
      }
    peak = imax(peak, relevel(&L, r, 0, slots));
  }
  int phase = 0;
  for (size_t i = 0; i < n; i++) {
    const event *e = &ev[i];
    if (e->k == T_I0 && e->r == 0 && phase == 0) phase = 1; /* rank 0's first I of stage 0 */
    int keep = phase == 1 || (phase == 0 && !with_w);
    if (phase == 1 && e->k == T_F0 && e->j == pt->m - 1)
      phase = 2; /* the last forward starts the cool-down */
    if (keep) continue;
    unsigned char *occ = busy + (size_t)e->r * (size_t)slots;
    for (int t = deps_slot(pt, e) + 1; t < e->time; t++) {
      if (occ[t] || !move_fits(&L, e->r, t, e->time, e->k, peak)) continue;
      LIST(pt, e->k, e->r)[e->j] = t; /* moved: its old slot is free now */
      occ[e->time]--, occ[t] = 1;
      size_t base = (size_t)e->r * (size_t)slots;
      L.occ[base + (size_t)e->time] = -1, L.occ[base + (size_t)t] = (signed char)e->k;
      moved(&L, e->r, t, e->time, e->k);
      break;
    }
  }
  free(ev), free(busy), free(L.occ), free(L.lvl), free(L.pend);
  if (!with_w) {
    pt->types = 5;
    if (place_all_w(pt, 0)) return -1;
  }
  return compact(pt);
}

static void append(kt_schedule *s, int r, int k, int j) {
  int down = r, up = 2 * s->p - 1 - r;
  int stage = k == T_F0 || k == T_I0 || k == T_W2 ? down : up;
  kt_op op = k <= T_F1 ? KT_OP_F : k <= T_I0 ? KT_OP_I : KT_OP_W;
  kt__append(s, r, stage, op, j);
}

/* Every rank's ops into s in slot order (a rank at a time through its slot
 * row; in global time order when two ops of a rank share a slot). -1 on
 * ENOMEM. */
static int emit(kt_schedule *s, const pattern *pt) {
  int top = top_slot(pt, pt->types);
  int *row = malloc((size_t)(top + 2) * sizeof *row);
  if (!row) return -1;
  memset(row, -1, (size_t)(top + 2) * sizeof *row);
  int shared = 0;
  for (int r = 0; r < pt->p && !shared; r++) {
    s->ranks[r].n = 0;
    int ops = rank_row(pt, r, pt->types, row);
    shared = ops < 0;
    for (int t = 0, seen = 0; seen < ops; t++)
      if (row[t] >= 0) append(s, r, row[t] & 7, row[t] >> 3), row[t] = -1, seen++;
  }
  free(row);
  if (!shared) return 0;
  size_t n;
  event *ev = events(pt, INT_MAX, INT_MAX, &n);
  if (!ev) return -1;
  for (int r = 0; r < pt->p; r++) s->ranks[r].n = 0;
  for (size_t i = 0; i < n; i++) append(s, ev[i].r, ev[i].k, ev[i].j);
  free(ev);
  return 0;
}

/* The whole construction into s (its lists emptied first). */
kt_status kt__v_shape_direct(kt_schedule *s, int half, kt_error *err) {
  int p = s->p, m = s->m;
  pattern pt = {.p = p, .m = m};
  pt.n = kt_calloc((size_t)p * N_TYPES, sizeof *pt.n);
  int ok = pt.n != NULL;
  for (int k = 0; k < N_TYPES && ok; k++)
    ok = (pt.t[k] = malloc((size_t)p * 2 * (size_t)m * sizeof(int))) != NULL;
  kt_status st = KT_OK;
  if (ok) {
    init_offsets(&pt, half);
    ok = !squeeze(&pt, 1);
    pt.types = 4;
    ok = ok && !squeeze(&pt, 0);
    pt.types = 4;
    ok = ok && !place_all_w(&pt, 1);
    pt.types = N_TYPES;
  }
  if (!ok || kt__search_reserve(s, err) || emit(s, &pt))
    st = kt_fail(err, KT_ENOMEM, "out of memory building %s (P=%d, M=%d)", s->name, p, m);
  for (int k = 0; k < N_TYPES; k++) free(pt.t[k]);
  free(pt.n);
  return st;
}

/* Whether rank list a repeats at index c: the PERIOD ops before c and the
 * PERIOD from c on are the same stages and ops, one micro-batch later. */
enum { PERIOD = 6 }; /* a micro-batch's F, I and W on each of the two chunks */

static int repeats_at(const kt_action *a, size_t c) {
  for (size_t i = 0; i < PERIOD; i++) {
    const kt_action *x = &a[c - PERIOD + i], *y = &a[c + i];
    if (x->stage != y->stage || x->op != y->op || y->mb != x->mb + 1) return 0;
  }
  return 1;
}

/* Rank r of s0 (M0 micro-batches) into s (M > M0): its ops up to a cut in
 * the steady state, the period before the cut M - M0 more times (each a
 * micro-batch later), then the rest M - M0 micro-batches later. 0 when the
 * second half of the list has no repeating period. */
static int extend_rank(kt_schedule *s, const kt_schedule *s0, int r) {
  const kt_action *a = s0->ranks[r].actions;
  size_t n0 = s0->ranks[r].n, c = n0 / 2 > PERIOD ? n0 / 2 : PERIOD;
  while (c + PERIOD <= n0 && !repeats_at(a, c)) c++;
  if (c + PERIOD > n0) return 0;
  kt_rank_actions *b = &s->ranks[r];
  int extra = s->m - s0->m;
  memcpy(b->actions, a, c * sizeof *a);
  b->n = c;
  for (int t = 1; t <= extra; t++)
    for (size_t i = c - PERIOD; i < c; i++) b->actions[b->n] = a[i], b->actions[b->n++].mb += t;
  for (size_t i = c; i < n0; i++) b->actions[b->n] = a[i], b->actions[b->n++].mb += extra;
  return 1;
}

/* The construction's steady state repeats: past the warm-up every rank runs
 * the same ops block after block, a micro-batch later each time, until the
 * cool-down, whose shape depends on P only. So a long run is built at
 * M0 = 2P + 8 and each rank's list stretched by repeating its period
 * (tests/test_memory_schedules.c checks it equals the direct construction
 * over a grid of P and M); where no period shows, the direct one. The
 * construction's cost then grows with P, not M. */
static kt_status construct(kt_schedule *s, int half, kt_error *err) {
  int m0 = 2 * s->p + 8;
  if (s->m <= m0) return kt__v_shape_direct(s, half, err);
  kt_schedule s0;
  kt_status st = kt_schedule_init_like(&s0, s, m0, err);
  if (!st) st = kt__v_shape_direct(&s0, half, err);
  if (!st) st = kt__search_reserve(s, err);
  int ok = !st;
  for (int r = 0; ok && r < s->p; r++) ok = extend_rank(s, &s0, r);
  if (!st && !ok) st = kt__v_shape_direct(s, half, err);
  kt_schedule_free(&s0);
  return st;
}

/* The construction, then the cost-aware search under its memory. */
static kt_status generate(kt_schedule *s, const kt_gen_params *params, int half, kt_error *err) {
  kt_status st = construct(s, half, err);
  if (st || !params->costs) return st; /* no costs: the construction itself */
  return kt__search_tune(s, params, 0, err);
}

kt_status kt__gen_v_half(kt_schedule *s, const kt_gen_params *params, kt_error *err) {
  return generate(s, params, 1, err);
}

kt_status kt__gen_v_min(kt_schedule *s, const kt_gen_params *params, kt_error *err) {
  return generate(s, params, 0, err);
}
