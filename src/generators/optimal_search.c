/* The exact search: depth first over orders in slot form, pruned by the
 * lower bound (optimal_bound.c), by dominance and by the table of visited
 * states (optimal_memo.c).
 *
 * Each node picks the rank whose next action could start first and branches
 * on what that action is: one of the ops it could run now, or WAIT (its
 * next action is one whose input has not arrived yet; the ops it could run
 * now are barred until it runs something). Every order lies below exactly
 * one child, so the tree holds each order once. A rank that has not
 * started may also start by waiting for a later result of the stage before
 * it (the model, optimal_internal.h).
 *
 * Once every rank has started, each rank's span is its last end less a
 * fixed start, and an order never loses by starting an op earlier when
 * nothing else moves. So an op X need not be tried next when another op Y
 * of the rank ends before X could start and Y can move before X without
 * breaking the memory limit (a W always; an I unless M_W > M_B; an F when
 * the memory after it leaves room for every later forward of the rank's
 * other stages), and WAIT need not be tried when such a Y ends before any
 * awaited input could arrive. Before that, moving an op earlier can start
 * a later rank earlier, so only the bound prunes. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "generators/optimal_internal.h"

/* One child: an op (type, stage, slot) starting at est, or WAIT. */
typedef struct {
  int type, stage, slot, delay, wait;
  double est, ect;
} option;

#define MAX_OPTIONS 64

typedef struct {
  const kt__opt_problem *pb;
  kt__opt_state st;
  kt__opt_bound_ws ws;
  kt__opt_memo *memo;
  uint16_t *excl; /* per rank: bits chunk * 3 + type that may not run next */
  int *wait_k;    /* per rank not started: its first forward waits for slot >= this */
  int *delay;     /* per rank: the slot of the stage before it its first forward waited for */
  int16_t *seq;   /* per rank (stride cap): its ops so far, stage * 3 + type */
  int *nseq, cap;
  int16_t *best_seq;
  int *best_n, *best_delay, have_best;
  double ub, eps, limit_tol;
  long nodes, max_nodes;
  double deadline;
  int aborted, nstarted, no_delays;
  size_t done, total;
  uint8_t *key;
  double *vals;
} search;

static int type_of(int bits) { return bits % KT__OPT_TYPES; }

static double tol(double t) { return 1e-12 * (1 + fabs(t)); }

/* When the input of (type, s, slot j) is known: its time (plus the hop), else NAN. */
static double input_ready(const search *sc, int type, int s, int j) {
  const kt__opt_problem *pb = sc->pb;
  const kt__opt_state *st = &sc->st;
  size_t m = (size_t)pb->m, at = (size_t)s * m + (size_t)j;
  if (type == KT__OPT_F) {
    if (s == 0) return -INFINITY;
    return st->n[KT__OPT_F][s - 1] > j ? st->end_f[at - m] + pb->hop_f[s - 1] : NAN;
  }
  if (type == KT__OPT_W) return st->n[KT__OPT_I][s] > j ? st->end_i[at] : NAN;
  if (s == pb->S - 1) return st->n[KT__OPT_F][s] > j ? st->end_f[at] : NAN;
  return st->n[KT__OPT_I][s + 1] > j ? st->end_i[at + m] + pb->hop_i[s + 1] : NAN;
}

/* Whether (type, s, slot j), waiting for its input, can get it while rank r
 * runs nothing: no op its input needs is rank r's and still to run. */
static int can_arrive(const search *sc, int r, int type, int s, int j) {
  const kt__opt_problem *pb = sc->pb;
  for (;;) {
    int pt, ps;
    if (type == KT__OPT_F) {
      if (s == 0) return 1;
      pt = KT__OPT_F, ps = s - 1;
    } else if (type == KT__OPT_W) {
      pt = KT__OPT_I, ps = s;
    } else {
      pt = s == pb->S - 1 ? KT__OPT_F : KT__OPT_I, ps = s == pb->S - 1 ? s : s + 1;
    }
    if (sc->st.n[pt][ps] > j) return 1;
    if (pb->srank[ps] == r) return 0;
    type = pt, s = ps;
  }
}

/* Whether op (type, s, slot j) of rank r can move before the rank's next
 * op without breaking the memory limit (module comment). */
static int movable(const search *sc, int r, int type, int s, int j) {
  const kt__opt_problem *pb = sc->pb;
  if (type == KT__OPT_W) return 1;
  if (type == KT__OPT_I) return kt__opt_smem(pb, KT__OPT_I, s, j) <= 0;
  double mem = sc->st.mem[r] + kt__opt_smem(pb, KT__OPT_F, s, j);
  for (int c = 0; c < pb->v; c++) {
    int x = pb->rstage[r * pb->v + c];
    if (x < 0) continue;
    for (int q = sc->st.n[KT__OPT_F][x]; x != s && q < pb->m; q++)
      mem += kt__opt_smem(pb, KT__OPT_F, x, q);
    for (int q = sc->st.n[KT__OPT_I][x]; q < pb->m; q++)
      mem += fmax(0, kt__opt_smem(pb, KT__OPT_I, x, q));
  }
  return mem <= sc->limit_tol;
}

/* The first forward of rank r, not started: one child per distinct start. */
static int first_options(const search *sc, int r, option *o, int *can_wait) {
  const kt__opt_problem *pb = sc->pb;
  int f = pb->first[r], n = 0;
  *can_wait = 0;
  double tf = kt__opt_sdur(pb, KT__OPT_F, f, 0);
  if (kt__opt_smem(pb, KT__OPT_F, f, 0) > sc->limit_tol || (sc->excl[r] & (1u << KT__OPT_F)))
    return 0;
  if (f == 0) {
    o[n++] = (option){KT__OPT_F, f, 0, 0, 0, 0, tf};
    return n;
  }
  int up = f - 1, avail = sc->st.n[KT__OPT_F][up];
  if (sc->no_delays) avail = avail > 0; /* its natural start only */
  *can_wait = avail < pb->m && !sc->no_delays;
  double last = -INFINITY;
  for (int k = sc->wait_k[r]; k < avail && n < MAX_OPTIONS / 2; k++) {
    double t = fmax(0, sc->st.end_f[(size_t)up * (size_t)pb->m + (size_t)k] + pb->hop_f[up]);
    if (t <= last + tol(t)) continue; /* the same start as an earlier slot */
    last = t;
    o[n++] = (option){KT__OPT_F, f, 0, k, 0, t, t + tf};
  }
  return n;
}

/* What started rank r could run next; *wait_head: the least head of an op
 * it could wait for (INFINITY: none). */
static int rank_options(search *sc, int r, option *o, double *wait_head) {
  const kt__opt_problem *pb = sc->pb;
  const kt__opt_state *st = &sc->st;
  int n = 0;
  *wait_head = INFINITY;
  for (int c = 0; c < pb->v; c++) {
    int s = pb->rstage[r * pb->v + c];
    if (s < 0) continue;
    for (int t = 0; t < KT__OPT_TYPES; t++) {
      int j = st->n[t][s];
      if (j >= pb->m || (t != KT__OPT_F && j >= st->n[t - 1][s])) continue;
      if (st->mem[r] + kt__opt_smem(pb, t, s, j) > sc->limit_tol) continue;
      double ready = input_ready(sc, t, s, j);
      if (isnan(ready)) {
        if (can_arrive(sc, r, t, s, j))
          *wait_head = fmin(*wait_head, kt__opt_head(&sc->ws, pb, t, s, j));
        continue;
      }
      if (sc->excl[r] & (1u << (c * KT__OPT_TYPES + t))) continue;
      double est = fmax(st->free_at[r], ready);
      o[n++] = (option){t, s, j, 0, 0, est, est + kt__opt_sdur(pb, t, s, j)};
    }
  }
  return n;
}

/* When the rank is free again after option o: its end, plus the send
 * overhead of the message it posts. */
static double busy_until(const search *sc, const option *o) {
  const kt__opt_problem *pb = sc->pb;
  return o->ect + (o->type == KT__OPT_F   ? pb->so_f[o->stage]
                   : o->type == KT__OPT_I ? pb->so_i[o->stage]
                                          : 0);
}

/* Drops the options a movable op of the same rank dominates (module
 * comment), and says whether WAIT is dominated. */
static int prune_dominated(const search *sc, int r, option *o, int n, double wait_head,
                           int *wait_ok) {
  int keep = 0;
  for (int x = 0; x < n; x++) {
    int dominated = 0;
    double ex = busy_until(sc, &o[x]);
    for (int y = 0; y < n && !dominated; y++) {
      double ey = busy_until(sc, &o[y]);
      if (y == x || ey > o[x].est + tol(o[x].est)) continue;
      if (ey > ex - tol(ex) && !(ey <= ex + tol(ex) && y < x)) continue;
      dominated = movable(sc, r, o[y].type, o[y].stage, o[y].slot);
    }
    if (!dominated) o[keep++] = o[x];
  }
  for (int y = 0; y < keep && *wait_ok; y++)
    if (busy_until(sc, &o[y]) <= wait_head + tol(wait_head) &&
        movable(sc, r, o[y].type, o[y].stage, o[y].slot))
      *wait_ok = 0;
  return keep;
}

static int by_start(const void *a, const void *b) {
  const option *x = a, *y = b;
  if (x->wait != y->wait) return x->wait - y->wait;
  return (x->est > y->est) - (x->est < y->est);
}

/* The children of the node: the rank whose next action could start first,
 * and its options. Returns their number and the rank in *rank. */
static int children(search *sc, option *o, int *rank) {
  const kt__opt_problem *pb = sc->pb;
  option tmp[MAX_OPTIONS];
  double best = INFINITY;
  int n = 0;
  *rank = -1;
  for (int r = 0; r < pb->p; r++) {
    double wait_head = INFINITY;
    int can_wait = 0, k;
    if (sc->st.started[r]) {
      k = rank_options(sc, r, tmp, &wait_head);
      can_wait = wait_head < INFINITY;
    } else {
      k = first_options(sc, r, tmp, &can_wait);
    }
    double first = INFINITY;
    for (int i = 0; i < k; i++) first = fmin(first, tmp[i].est);
    if (!k || first >= best) continue;
    best = first, *rank = r, n = k;
    memcpy(o, tmp, (size_t)k * sizeof *o);
    if (sc->nstarted == pb->p) n = prune_dominated(sc, r, o, n, wait_head, &can_wait);
    if (can_wait) o[n++] = (option){0, 0, 0, 0, 1, INFINITY, INFINITY};
  }
  qsort(o, (size_t)n, sizeof *o, by_start);
  return n;
}

typedef struct {
  double free_at, last_end, start, mem;
  uint16_t excl;
  int started, delay, wait_k;
} undo;

static undo apply(search *sc, int r, const option *x) {
  const kt__opt_problem *pb = sc->pb;
  kt__opt_state *st = &sc->st;
  undo u = {st->free_at[r], st->last_end[r], st->start[r], st->mem[r],
            sc->excl[r],    st->started[r],  sc->delay[r], sc->wait_k[r]};
  if (x->wait) {
    if (!st->started[r]) {
      sc->wait_k[r] = st->n[KT__OPT_F][pb->first[r] - 1];
    } else {
      option o[MAX_OPTIONS];
      double wh;
      int n = rank_options(sc, r, o, &wh);
      for (int i = 0; i < n; i++) {
        int c = 0;
        while (pb->rstage[r * pb->v + c] != o[i].stage) c++;
        sc->excl[r] |= (uint16_t)(1u << (c * KT__OPT_TYPES + o[i].type));
      }
    }
    return u;
  }
  size_t at = (size_t)x->stage * (size_t)pb->m + (size_t)x->slot;
  st->n[x->type][x->stage]++;
  if (x->type == KT__OPT_F) st->end_f[at] = x->ect;
  if (x->type == KT__OPT_I) st->end_i[at] = x->ect;
  double so = x->type == KT__OPT_F   ? pb->so_f[x->stage]
              : x->type == KT__OPT_I ? pb->so_i[x->stage]
                                     : 0;
  st->free_at[r] = x->ect + so;
  st->last_end[r] = x->ect;
  st->mem[r] += kt__opt_smem(pb, x->type, x->stage, x->slot);
  if (!st->started[r]) {
    st->started[r] = 1, st->start[r] = x->est, sc->delay[r] = x->delay;
    sc->nstarted++;
  }
  sc->excl[r] = 0;
  sc->seq[(size_t)r * (size_t)sc->cap + (size_t)sc->nseq[r]++] =
      (int16_t)(x->stage * KT__OPT_TYPES + x->type);
  sc->done++;
  return u;
}

static void unapply(search *sc, int r, const option *x, const undo *u) {
  kt__opt_state *st = &sc->st;
  st->free_at[r] = u->free_at, st->last_end[r] = u->last_end, st->start[r] = u->start;
  st->mem[r] = u->mem, sc->excl[r] = u->excl, sc->delay[r] = u->delay, sc->wait_k[r] = u->wait_k;
  if (x->wait) return;
  if (!u->started) sc->nstarted--;
  st->started[r] = (uint8_t)u->started;
  st->n[x->type][x->stage]--;
  sc->nseq[r]--;
  sc->done--;
}

/* ---- the table of visited states ------------------------------------------ */

/* The state's key (counts and bars) and clocks, each pending result at the
 * earliest its consumer could use it (its rank's clock included). */
static size_t state_values(search *sc, size_t *key_len) {
  const kt__opt_problem *pb = sc->pb;
  const kt__opt_state *st = &sc->st;
  size_t k = 0, v = 0, m = (size_t)pb->m;
  for (int s = 0; s < pb->S; s++)
    for (int t = 0; t < KT__OPT_TYPES; t++) sc->key[k++] = (uint8_t)st->n[t][s];
  for (int r = 0; r < pb->p; r++) {
    sc->key[k++] = (uint8_t)(sc->excl[r] & 0xff), sc->key[k++] = (uint8_t)(sc->excl[r] >> 8);
    sc->vals[v++] = st->free_at[r], sc->vals[v++] = -st->start[r], sc->vals[v++] = st->last_end[r];
  }
  for (int s = 0; s < pb->S; s++) {
    const int *nf = st->n[KT__OPT_F], *ni = st->n[KT__OPT_I], *nw = st->n[KT__OPT_W];
    int last = s == pb->S - 1;
    double ff = st->free_at[pb->srank[last ? s : s + 1]];
    for (int j = last ? ni[s] : nf[s + 1]; j < nf[s]; j++)
      sc->vals[v++] = fmax(st->end_f[(size_t)s * m + (size_t)j] + pb->hop_f[s], ff);
    if (s > 0)
      for (int j = ni[s - 1]; j < ni[s]; j++)
        sc->vals[v++] = fmax(st->end_i[(size_t)s * m + (size_t)j] + pb->hop_i[s],
                             st->free_at[pb->srank[s - 1]]);
    for (int j = nw[s]; j < ni[s]; j++)
      sc->vals[v++] = fmax(st->end_i[(size_t)s * m + (size_t)j], st->free_at[pb->srank[s]]);
  }
  *key_len = k;
  return v;
}

/* ---- the depth-first search ------------------------------------------------ */

static void leaf(search *sc) {
  const kt__opt_problem *pb = sc->pb;
  double ms = kt_step_model_period(&pb->step, sc->st.start, sc->st.last_end, NULL);
  if (!(ms < sc->ub - sc->eps)) return;
  sc->ub = ms;
  sc->have_best = 1;
  memcpy(sc->best_seq, sc->seq, (size_t)pb->p * (size_t)sc->cap * sizeof *sc->seq);
  memcpy(sc->best_n, sc->nseq, (size_t)pb->p * sizeof *sc->nseq);
  memcpy(sc->best_delay, sc->delay, (size_t)pb->p * sizeof *sc->delay);
}

static int out_of_time(search *sc) {
  if (!sc->aborted && sc->max_nodes > 0 && sc->nodes > sc->max_nodes) sc->aborted = 1;
  if (!sc->aborted && (sc->nodes & 1023) == 0 && kt_now() > sc->deadline) sc->aborted = 1;
  return sc->aborted;
}

/* Searches below the current state. When the time runs out, *open_lb takes
 * the least bound of what was left unexplored. */
static void dfs(search *sc, double *open_lb) {
  if (sc->done == sc->total) {
    leaf(sc);
    return;
  }
  sc->nodes++;
  double lb = kt__opt_bound(sc->pb, &sc->st, NULL, &sc->ws);
  if (lb >= sc->ub - sc->eps) return;
  if (out_of_time(sc)) {
    *open_lb = fmin(*open_lb, lb);
    return;
  }
  if (sc->nstarted == sc->pb->p && sc->memo) {
    size_t key_len, n = state_values(sc, &key_len);
    if (kt__opt_memo_seen(sc->memo, sc->key, key_len, sc->vals, n)) return;
  }
  option o[MAX_OPTIONS];
  int r, n = children(sc, o, &r);
  for (int i = 0; i < n; i++) {
    undo u = apply(sc, r, &o[i]);
    if (sc->aborted) { /* what is left: its bound */
      double clb = kt__opt_bound(sc->pb, &sc->st, NULL, &sc->ws);
      if (clb < sc->ub - sc->eps) *open_lb = fmin(*open_lb, clb);
    } else {
      dfs(sc, open_lb);
    }
    unapply(sc, r, &o[i], &u);
  }
}

/* ---- the order: slots to micro-batches -------------------------------------- */

/* Writes the best order into out. Forwards of stage s run in the order
 * perm[s]: the stage before's, except that a rank whose first forward
 * waited for slot k runs that micro-batch first; every backward runs in
 * the last stage's forward order (kaiten/optimal_internal.h). */
static kt_status write_order(const search *sc, kt_schedule *out, kt_error *err) {
  const kt__opt_problem *pb = sc->pb;
  int S = pb->S, m = pb->m;
  int *perm = kt_calloc((size_t)S * (size_t)m, sizeof *perm);
  int *slot = kt_calloc((size_t)S * KT__OPT_TYPES, sizeof *slot);
  if (!perm || !slot) {
    free(perm), free(slot);
    return kt_fail(err, KT_ENOMEM, "optimal: out of memory writing the order");
  }
  for (int j = 0; j < m; j++) perm[j] = j;
  for (int s = 1; s < S; s++) {
    int *cur = perm + (size_t)s * (size_t)m, *prev = cur - m, r = pb->srank[s];
    int k = pb->first[r] == s ? sc->best_delay[r] : 0;
    cur[0] = prev[k];
    for (int j = 0, q = 1; j < m; j++)
      if (j != k) cur[q++] = prev[j];
  }
  const int *back = perm + (size_t)(S - 1) * (size_t)m;
  kt_status st = KT_OK;
  for (int r = 0; r < pb->p; r++) out->ranks[r].n = 0;
  for (int r = 0; r < pb->p && !st; r++)
    for (int i = 0; i < sc->best_n[r] && !st; i++) {
      int code = sc->best_seq[(size_t)r * (size_t)sc->cap + (size_t)i];
      int s = code / KT__OPT_TYPES, t = type_of(code), j = slot[s * KT__OPT_TYPES + t]++;
      int mb = t == KT__OPT_F ? perm[(size_t)s * (size_t)m + (size_t)j] : back[j];
      if (pb->seq) mb = pb->seq[mb]; /* no delays there: every perm is the identity */
      kt_op op = t == KT__OPT_F ? KT_OP_F : t == KT__OPT_I ? KT_OP_I : KT_OP_W;
      if (kt_schedule_push(out, r, s, op, mb))
        st = kt_fail(err, KT_ENOMEM, "optimal: out of memory");
    }
  free(perm), free(slot);
  return st;
}

static void search_free(search *sc) {
  kt__opt_state_free(&sc->st);
  kt__opt_bound_ws_free(&sc->ws);
  kt__opt_memo_free(sc->memo);
  void *arrays[] = {sc->excl,     sc->wait_k, sc->delay,      sc->seq, sc->nseq,
                    sc->best_seq, sc->best_n, sc->best_delay, sc->key, sc->vals};
  for (size_t k = 0; k < sizeof arrays / sizeof *arrays; k++) free(arrays[k]);
}

static kt_status search_init(search *sc, const kt__opt_problem *pb, const kt__opt_search_opts *o,
                             kt_error *err) {
  memset(sc, 0, sizeof *sc);
  sc->pb = pb;
  size_t p = (size_t)pb->p;
  sc->cap = KT__OPT_TYPES * pb->v * pb->m;
  sc->total = (size_t)KT__OPT_TYPES * (size_t)pb->S * (size_t)pb->m;
  kt_status st = kt__opt_state_init(&sc->st, pb, err);
  if (!st) st = kt__opt_bound_ws_init(&sc->ws, pb, err);
  if (st) return st;
  sc->excl = kt_calloc(p, sizeof *sc->excl);
  sc->wait_k = kt_calloc(p, sizeof *sc->wait_k);
  sc->delay = kt_calloc(p, sizeof *sc->delay);
  sc->seq = kt_calloc(p * (size_t)sc->cap, sizeof *sc->seq);
  sc->best_seq = kt_calloc(p * (size_t)sc->cap, sizeof *sc->best_seq);
  sc->nseq = kt_calloc(p, sizeof *sc->nseq);
  sc->best_n = kt_calloc(p, sizeof *sc->best_n);
  sc->best_delay = kt_calloc(p, sizeof *sc->best_delay);
  sc->key = kt_calloc((size_t)KT__OPT_TYPES * (size_t)pb->S + 2 * p, 1);
  sc->vals = kt_calloc(3 * p + 4 * sc->total, sizeof *sc->vals);
  if (o->memo_bytes) sc->memo = kt__opt_memo_new(o->memo_bytes);
  if (!sc->excl || !sc->wait_k || !sc->delay || !sc->seq || !sc->best_seq || !sc->nseq ||
      !sc->best_n || !sc->best_delay || !sc->key || !sc->vals || (o->memo_bytes && !sc->memo))
    return kt_fail(err, KT_ENOMEM, "optimal: out of memory for the search (P=%d, M=%d)", pb->p,
                   pb->m);
  sc->ub = o->upper;
  sc->eps = 1e-9 * (isinf(o->upper) ? 1 : 1 + fabs(o->upper));
  sc->limit_tol = kt_tolerance(pb->limit);
  sc->deadline = kt_now() + o->time_limit;
  sc->max_nodes = o->max_nodes;
  return KT_OK;
}

kt_status kt__opt_search(const kt__opt_problem *pb, const kt__opt_search_opts *o, kt_schedule *out,
                         kt__opt_search_result *res, kt_error *err) {
  search sc;
  double t0 = kt_now();
  kt_status st = search_init(&sc, pb, o, err);
  if (!st) {
    sc.no_delays =
        o->no_delays || pb->seq != NULL; /* one sequence: each rank starts with its first */
    double open_lb = INFINITY, root = kt__opt_bound(pb, &sc.st, NULL, &sc.ws);
    dfs(&sc, &open_lb);
    res->makespan = sc.have_best ? sc.ub : INFINITY;
    res->complete = !sc.aborted;
    /* proven: nothing left below the best, or the least bound left open */
    res->lower = sc.aborted ? fmin(fmax(open_lb, root), sc.ub) : sc.ub;
    res->nodes = sc.nodes;
    res->memo_states = kt__opt_memo_states(sc.memo);
    if (sc.have_best) st = write_order(&sc, out, err);
  }
  res->seconds = kt_now() - t0;
  search_free(&sc);
  return st;
}
