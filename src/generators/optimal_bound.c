/* The exact search's lower bound on the makespan of every completion of
 * a state (its problem and state: optimal_problem.c).
 *
 * The bound relaxes each rank to one machine on its own. An op cannot start
 * before its head: the end of the op it waits for (plus the hop), the end
 * of the op of the same stage one slot before (a stage's ops of one kind
 * run in slot order on one rank), and, for a forward, the end of the I (or
 * W) that must have freed the memory it needs. The rank's last action ends
 * no sooner than any op's end plus its tail, the least time the ops it
 * leads to on the same rank still take. Preemptive single-machine
 * scheduling with heads and tails (Jackson's rule: run the released op with
 * the longest tail) gives the least such end; every order's rank runs
 * its ops in one feasible single-machine schedule, so the bound holds.
 * Under a micro-batch sequence (optimal_mb.c) each slot's op takes its
 * micro-batch's own time; tails and the memory rules keep the stage's
 * least (a relaxation). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "generators/optimal_internal.h"
#include "kaiten/sim.h"

#define NONE (-INFINITY)

/* fmax without its NaN rules (no NaN reaches here): inlined, where fmax is
 * a library call in the bound's inner loops. */
static inline double maxd(double a, double b) { return a > b ? a : b; }
#define HX KT__OPT_HX

static kt_status alloc_fail(kt_error *err, const kt__opt_problem *pb) {
  return kt_fail(err, KT_ENOMEM, "optimal: out of memory (P=%d, V=%d, M=%d)", pb->p, pb->v, pb->m);
}

int kt__opt_window_test;

/* slots: every slot (m, slot_mask SIZE_MAX), or a window's power of two. */
static kt_status ws_init(kt__opt_bound_ws *ws, const kt__opt_problem *pb, size_t slots,
                         int keep_rank, kt_error *err) {
  memset(ws, 0, sizeof *ws);
  int window = slots < (size_t)pb->m, w_frees = 0;
  for (int s = 0; s < pb->S; s++) w_frees |= pb->wg[s] > 0;
  ws->keep_rank = window ? keep_rank : -1;
  size_t jobs = KT__OPT_TYPES * (size_t)pb->v * (size_t)pb->m;
  int ok = 1;
  for (int t = 0; t < KT__OPT_TYPES; t++) {
    /* a window's F rows (and W's when no W frees memory): this slot and
     * the one before; in cache, where a window of every kind was 48 MB at
     * 1F1B P=1024 M=16384 */
    size_t rows = !window ? slots : t == KT__OPT_F || (t == KT__OPT_W && !w_frees) ? 2 : slots;
    ws->slot_mask[t] = window ? rows - 1 : SIZE_MAX;
    size_t cells = (size_t)pb->S * rows;
    ok &= (ws->head[t] = kt_calloc(cells, sizeof(double))) != NULL;
    if (ws->head[t]) kt_advise_huge(ws->head[t], cells * sizeof(double));
    if (window)
      ok &= (ws->keep[t] = kt_calloc((size_t)pb->v * (size_t)pb->m, sizeof(double))) != NULL;
  }
  ws->eff_free = kt_calloc((size_t)pb->p, sizeof(double));
  ws->jobs = kt_calloc(jobs, sizeof *ws->jobs);
  ws->heap_key = kt_calloc(jobs, sizeof(double));
  ws->heap_job = kt_calloc(jobs, sizeof(int));
  if (!ok || !ws->eff_free || !ws->jobs || !ws->heap_key || !ws->heap_job) {
    kt__opt_bound_ws_free(ws);
    return alloc_fail(err, pb);
  }
  return KT_OK;
}

kt_status kt__opt_bound_ws_init(kt__opt_bound_ws *ws, const kt__opt_problem *pb, kt_error *err) {
  return ws_init(ws, pb, (size_t)pb->m, -1, err);
}

kt_status kt__opt_bound_ws_window(kt__opt_bound_ws *ws, const kt__opt_problem *pb, size_t slots,
                                  int keep_rank, kt_error *err) {
  return ws_init(ws, pb, slots, keep_rank, err);
}

void kt__opt_bound_ws_free(kt__opt_bound_ws *ws) {
  for (int t = 0; t < KT__OPT_TYPES; t++) free(ws->head[t]), free(ws->keep[t]);
  void *arrays[] = {ws->eff_free, ws->jobs, ws->heap_key, ws->heap_job};
  for (size_t k = 0; k < sizeof arrays / sizeof *arrays; k++) free(arrays[k]);
  memset(ws, 0, sizeof *ws);
}

/* The limit with the tolerance kt__search_fits allows. */
static double limit_tol(const kt__opt_problem *pb) { return kt_tolerance(pb->limit); }

/* Slots of I and W of stage s that must have ended before its forward of
 * slot j can run: the stage alone holds (j+1)*M_B less what its I's and
 * W's freed, and its other stages hold nothing less than 0. -1 when no
 * slot is needed; *impossible when no order can run it. */
static void memory_needs(const kt__opt_problem *pb, int s, int j, int *need_i, int *need_w,
                         int *impossible) {
  double a = pb->act[s], w = pb->wg[s], need = (j + 1) * a - limit_tol(pb);
  *need_i = *need_w = -1;
  if (need <= 0 || a <= 0) return;
  /* counts above j + 1 all mean "impossible": clamped there */
  int qi = kt_to_int(ceil(need / a - 1e-9), 0, j + 1), qw = 0;
  if (w > a) qw = qi; /* an I then holds more: only a W frees */
  else if (w > 0 && need - j * (a - w) > 0)
    qw = kt_to_int(ceil((need - j * (a - w)) / w - 1e-9), 0, j + 1);
  if (qi > j || qw > j) *impossible = 1;
  *need_i = qi - 1, *need_w = qw - 1;
}

/* How many ops of a kind stage s has run: none at all in the empty state
 * (root, a constant where the sweep below is inlined). The sweep every sim
 * and compare computes then reads no count: 29% fewer instructions at 1F1B
 * P=1024 M=4096. */
#define RAN(t, s) (root ? 0 : st->n[t][s])

/* When (type, s, slot j) can start at the earliest, given the heads of the
 * ops before it in the sweep and what already ran. cut: a stage whose
 * forward input counts as ready at once (-1: none). */
static inline __attribute__((always_inline)) double op_head(const kt__opt_problem *pb,
                                                            const kt__opt_state *st,
                                                            kt__opt_bound_ws *ws, int type, int s,
                                                            int j, int cut, int root) {
  size_t m = (size_t)pb->m, at = (size_t)s * m + (size_t)j;
  double h = ws->eff_free[pb->srank[s]];
  double *hd = ws->head[type];
  if (j > RAN(type, s))
    h = maxd(h, hd[HX(ws, pb, type, s, j - 1)] + kt__opt_sdur(pb, type, s, j - 1));
  double in = NONE;
  if (type == KT__OPT_F && s > 0 && s != cut) {
    in = (j < RAN(KT__OPT_F, s - 1) ? st->end_f[at - m]
                                    : ws->head[KT__OPT_F][HX(ws, pb, KT__OPT_F, s - 1, j)] +
                                          kt__opt_sdur(pb, KT__OPT_F, s - 1, j)) +
         pb->hop_f[s - 1];
  } else if (type == KT__OPT_I && s == pb->S - 1) {
    in = j < RAN(KT__OPT_F, s)
             ? st->end_f[at]
             : ws->head[KT__OPT_F][HX(ws, pb, KT__OPT_F, s, j)] + kt__opt_sdur(pb, KT__OPT_F, s, j);
  } else if (type == KT__OPT_I) {
    in = (j < RAN(KT__OPT_I, s + 1) ? st->end_i[at + m]
                                    : ws->head[KT__OPT_I][HX(ws, pb, KT__OPT_I, s + 1, j)] +
                                          kt__opt_sdur(pb, KT__OPT_I, s + 1, j)) +
         pb->hop_i[s + 1];
  } else if (type == KT__OPT_W) {
    in = j < RAN(KT__OPT_I, s)
             ? st->end_i[at]
             : ws->head[KT__OPT_I][HX(ws, pb, KT__OPT_I, s, j)] + kt__opt_sdur(pb, KT__OPT_I, s, j);
  }
  return maxd(h, in);
}

/* The end of slot q of (type, s): ended, or its head plus its duration. */
static inline __attribute__((always_inline)) double slot_end(const kt__opt_problem *pb,
                                                             const kt__opt_state *st,
                                                             const kt__opt_bound_ws *ws, int type,
                                                             int s, int q, int root) {
  if (q < RAN(type, s)) /* W ends: past */
    return type == KT__OPT_I ? st->end_i[(size_t)s * (size_t)pb->m + (size_t)q] : NONE;
  return ws->head[type][HX(ws, pb, type, s, q)] + kt__opt_sdur(pb, type, s, q);
}

/* The earliest rank r can have run the ops counted in need (per kind of
 * the rank, kt__opt_need's layout) that have not run yet: their heads on
 * one machine, in order of head. The time only grows as ops are added: once
 * it reaches `enough` the rest is not run (the result is then >= enough). */
static double run_counts(const kt__opt_problem *pb, const kt__opt_state *st,
                         const kt__opt_bound_ws *ws, int r, const int *need, double enough) {
  int nk = pb->nk, pos[KT__OPT_TYPES * 2], stage[KT__OPT_TYPES * 2];
  for (int k = 0; k < nk; k++) {
    stage[k] = pb->rstage[r * pb->v + k / KT__OPT_TYPES];
    pos[k] = stage[k] < 0 ? need[k] : st->n[k % KT__OPT_TYPES][stage[k]];
  }
  double done = NONE;
  for (;;) {
    int best = -1;
    double at = INFINITY;
    for (int k = 0; k < nk; k++)
      if (pos[k] < need[k]) {
        double h = ws->head[k % KT__OPT_TYPES][HX(ws, pb, k % KT__OPT_TYPES, stage[k], pos[k])];
        if (h < at) at = h, best = k;
      }
    if (best < 0) return done;
    done = maxd(done, at) + kt__opt_sdur(pb, best % KT__OPT_TYPES, stage[best], pos[best]);
    if (done >= enough) return done;
    pos[best]++;
  }
}

/* A quick floor under run_counts for one stage's counts (one chunk per
 * rank): each kind's last op counted ends no sooner than its head plus its
 * duration. */
static double last_end_of(const kt__opt_problem *pb, const kt__opt_state *st,
                          const kt__opt_bound_ws *ws, int s, const int *n) {
  double e = NONE;
  for (int t = 0; t < KT__OPT_TYPES; t++)
    if (n[t] > st->n[t][s])
      e = maxd(e, ws->head[t][HX(ws, pb, t, s, n[t] - 1)] + kt__opt_sdur(pb, t, s, n[t] - 1));
  return e;
}

/* The earliest the rank can have run every op that must precede (t, s, j)
 * (kt__opt_need). With one stage per rank, a forward's memory can be freed
 * by I's or by W's: the cheapest mix counts (each mix's ops run on one
 * machine). */
static double after_needs(const kt__opt_problem *pb, const kt__opt_state *st,
                          const kt__opt_bound_ws *ws, int t, int s, int j) {
  int r = pb->srank[s];
  const int *need = kt__opt_need(pb, r, pb->schunk[s], t, j);
  double h = run_counts(pb, st, ws, r, need, INFINITY), a = pb->act[s], w = pb->wg[s];
  if (t != KT__OPT_F || pb->v != 1 || w > a || (j + 1) * a <= limit_tol(pb)) return h;
  double cheapest = INFINITY;
  /* only the least mix counts, and only above h: a mix whose last op of a
   * kind ends no sooner than the cheapest so far is skipped, and none is
   * looked at once one ends by h */
  for (int ni = need[KT__OPT_I]; ni <= j && cheapest > h; ni++) {
    double over = (j + 1) * a - ni * (a - w) - limit_tol(pb);
    int nw = need[KT__OPT_W];
    if (over > 0 && w <= 0) continue;
    if (over > 0 && ceil(over / w - 1e-9) > nw) nw = kt_to_int(ceil(over / w - 1e-9), 0, j + 1);
    if (nw > ni) continue;
    int mix[KT__OPT_TYPES] = {need[KT__OPT_F] > j ? need[KT__OPT_F] : j, ni, nw};
    if (last_end_of(pb, st, ws, s, mix) >= cheapest) continue;
    cheapest = fmin(cheapest, run_counts(pb, st, ws, r, mix, cheapest));
  }
  return maxd(h, cheapest);
}

/* Stores the head of (t, s, slot j), and keeps it aside for keep_rank's
 * bound when only a window of slots stays. */
static inline void keep_head(const kt__opt_problem *pb, kt__opt_bound_ws *ws, int t, int s, int j,
                             double h) {
  ws->head[t][HX(ws, pb, t, s, j)] = h;
  if (ws->keep_rank >= 0 && pb->srank[s] == ws->keep_rank)
    ws->keep[t][(size_t)pb->schunk[s] * (size_t)pb->m + (size_t)j] = h;
}

/* A memory rule of slot j reads slot q: past a window's reach, the sweep
 * is marked short (its bound is computed again on every slot). */
static inline void window_reach(kt__opt_bound_ws *ws, int t, int j, int q) {
  if (q >= 0 && (size_t)(j - q) > ws->slot_mask[t]) ws->window_short = 1;
}

/* The W slot an I of slot j waits for on a stage of M_W w: after it the
 * stage holds (j+1-W's run) M_W at least. -1 none, -2 none can free enough. */
static int i_needs(const kt__opt_problem *pb, kt__opt_bound_ws *ws, double w, int j) {
  double over = (j + 1) * w - limit_tol(pb);
  int q = -1;
  if (w > 0 && over > 0) q = kt_to_int(ceil(over / w - 1e-9), 0, j + 1) - 1;
  window_reach(ws, KT__OPT_W, j, q);
  return q >= j ? -2 : q;
}

/* Heads of every op not yet run, slot by slot (a memory edge reaches back
 * to an earlier slot only). 0, or -1 when the memory limit can never be met. */
static inline __attribute__((always_inline)) int sweep_in(const kt__opt_problem *pb,
                                                          const kt__opt_state *st,
                                                          kt__opt_bound_ws *ws, int cut, int needs,
                                                          int root) {
  /* with one stage per rank the stages before the cut lead to nothing
   * the cut's rank waits for: they are left out */
  int S = pb->S, impossible = 0, from = cut >= 0 && pb->v == 1 ? cut : 0;
  for (int j = 0; j < pb->m; j++) {
    /* a slot's memory rules depend on the stage through its M_B and M_W
     * only: worked out again only when they change from the stage before
     * (alike stages: once a slot; NaN: nothing worked out yet) */
    double rule_a = NAN, rule_w = NAN;
    int qi = -1, qw = -1;
    for (int s = from; s < S; s++) {
      if (j < RAN(KT__OPT_F, s)) continue;
      double h = op_head(pb, st, ws, KT__OPT_F, s, j, cut, root);
      if (needs) {
        h = maxd(h, after_needs(pb, st, ws, KT__OPT_F, s, j));
      } else {
        if (pb->act[s] != rule_a || pb->wg[s] != rule_w) {
          rule_a = pb->act[s], rule_w = pb->wg[s];
          memory_needs(pb, s, j, &qi, &qw, &impossible);
          window_reach(ws, KT__OPT_I, j, qi), window_reach(ws, KT__OPT_W, j, qw);
        }
        if (impossible) return -1; /* its slots lie past this one: not filled in yet */
        if (qi >= 0) h = maxd(h, slot_end(pb, st, ws, KT__OPT_I, s, qi, root));
        if (qw >= 0) h = maxd(h, slot_end(pb, st, ws, KT__OPT_W, s, qw, root));
      }
      keep_head(pb, ws, KT__OPT_F, s, j, h);
    }
    rule_w = NAN;
    int qw_i = -1; /* the W an I waits for, -1 none, -2 none can free enough */
    for (int s = S - 1; s >= from; s--) {
      if (j < RAN(KT__OPT_I, s)) continue;
      double h = op_head(pb, st, ws, KT__OPT_I, s, j, cut, root);
      if (needs) h = maxd(h, after_needs(pb, st, ws, KT__OPT_I, s, j));
      /* after I(s, j) the stage holds (j+1-W's run) M_W at least */
      if (pb->wg[s] != rule_w) qw_i = i_needs(pb, ws, rule_w = pb->wg[s], j);
      if (qw_i == -2) impossible = 1;
      else if (qw_i >= 0) h = maxd(h, slot_end(pb, st, ws, KT__OPT_W, s, qw_i, root));
      keep_head(pb, ws, KT__OPT_I, s, j, h);
    }
    for (int s = from; s < S; s++) {
      if (j < RAN(KT__OPT_W, s)) continue;
      double h = op_head(pb, st, ws, KT__OPT_W, s, j, cut, root);
      if (needs) h = maxd(h, after_needs(pb, st, ws, KT__OPT_W, s, j));
      keep_head(pb, ws, KT__OPT_W, s, j, h);
    }
  }
  return impossible ? -1 : 0;
}

static int sweep_root(const kt__opt_problem *pb, const kt__opt_state *st, kt__opt_bound_ws *ws,
                      int cut, int needs) {
  return sweep_in(pb, st, ws, cut, needs, 1);
}

/* Slot j's row of kind t's heads. */
static inline double *head_row(const kt__opt_problem *pb, kt__opt_bound_ws *ws, int t, int j) {
  return ws->head[t] + HX(ws, pb, t, 0, j);
}

/* Stores a head the sweep below computed in its row (and keeps it aside
 * as keep_head does). */
static inline void put_head(const kt__opt_problem *pb, kt__opt_bound_ws *ws, double *row, int t,
                            int s, int j, double h) {
  row[s] = h;
  if (ws->keep_rank >= 0 && pb->srank[s] == ws->keep_rank)
    ws->keep[t][(size_t)pb->schunk[s] * (size_t)pb->m + (size_t)j] = h;
}

int kt__opt_sweep_general;

/* sweep_in from the empty state without a cut, the predecessor table or
 * per-slot durations (the bound every sim and compare states): the same
 * heads from the same sums in the same order, bit for bit, each kind's
 * rows of a slot looked up once rather than per op. */
static int sweep_rows(const kt__opt_problem *pb, kt__opt_bound_ws *ws) {
  int S = pb->S, impossible = 0;
  const double *tf = pb->tf, *tb = pb->tb, *tw = pb->tw, *eff = ws->eff_free;
  for (int j = 0; j < pb->m; j++) {
    double *f = head_row(pb, ws, KT__OPT_F, j), *in = head_row(pb, ws, KT__OPT_I, j);
    double *w = head_row(pb, ws, KT__OPT_W, j);
    /* the slot before (read only when there is one) */
    const double *fp = j ? head_row(pb, ws, KT__OPT_F, j - 1) : f;
    const double *ip = j ? head_row(pb, ws, KT__OPT_I, j - 1) : in;
    const double *wp = j ? head_row(pb, ws, KT__OPT_W, j - 1) : w, *ri = NULL, *rw = NULL;
    double rule_a = NAN, rule_w = NAN;
    int qi = -1, qw = -1;
    for (int s = 0; s < S; s++) {
      double h = eff[pb->srank[s]];
      if (j > 0) h = maxd(h, fp[s] + tf[s]);
      if (s > 0) h = maxd(h, f[s - 1] + tf[s - 1] + pb->hop_f[s - 1]);
      if (pb->act[s] != rule_a || pb->wg[s] != rule_w) {
        rule_a = pb->act[s], rule_w = pb->wg[s];
        memory_needs(pb, s, j, &qi, &qw, &impossible);
        window_reach(ws, KT__OPT_I, j, qi), window_reach(ws, KT__OPT_W, j, qw);
        ri = qi >= 0 ? head_row(pb, ws, KT__OPT_I, qi) : NULL;
        rw = qw >= 0 ? head_row(pb, ws, KT__OPT_W, qw) : NULL;
      }
      if (impossible) return -1;
      if (ri) h = maxd(h, ri[s] + tb[s]);
      if (rw) h = maxd(h, rw[s] + tw[s]);
      put_head(pb, ws, f, KT__OPT_F, s, j, h);
    }
    rule_w = NAN;
    int qw_i = -1;
    for (int s = S - 1; s >= 0; s--) {
      double h = eff[pb->srank[s]];
      if (j > 0) h = maxd(h, ip[s] + tb[s]);
      h = maxd(h, s == S - 1 ? f[s] + tf[s] : in[s + 1] + tb[s + 1] + pb->hop_i[s + 1]);
      if (pb->wg[s] != rule_w) {
        qw_i = i_needs(pb, ws, rule_w = pb->wg[s], j);
        rw = qw_i >= 0 ? head_row(pb, ws, KT__OPT_W, qw_i) : NULL;
      }
      if (qw_i == -2) impossible = 1;
      else if (rw) h = maxd(h, rw[s] + tw[s]);
      put_head(pb, ws, in, KT__OPT_I, s, j, h);
    }
    for (int s = 0; s < S; s++) {
      double h = eff[pb->srank[s]];
      if (j > 0) h = maxd(h, wp[s] + tw[s]);
      put_head(pb, ws, w, KT__OPT_W, s, j, maxd(h, in[s] + tb[s]));
    }
  }
  return impossible ? -1 : 0;
}

static int sweep_any(const kt__opt_problem *pb, const kt__opt_state *st, kt__opt_bound_ws *ws,
                     int cut, int needs) {
  return sweep_in(pb, st, ws, cut, needs, 0);
}

/* The sweep (sweep_in), its counts left out when nothing has run. */
static int sweep(const kt__opt_problem *pb, const kt__opt_state *st, kt__opt_bound_ws *ws, int cut,
                 int needs) {
  for (int t = 0; t < KT__OPT_TYPES; t++)
    for (int s = 0; s < pb->S; s++)
      if (st->n[t][s]) return sweep_any(pb, st, ws, cut, needs);
  if (cut < 0 && !needs && !pb->seq && !kt__opt_sweep_general) return sweep_rows(pb, ws);
  return sweep_root(pb, st, ws, cut, needs);
}

/* The head of (t, s, slot j) on the rank a single-machine bound is for:
 * kept aside when only a window of slots stays (keep_rank's). */
static inline double job_head(const kt__opt_problem *pb, const kt__opt_bound_ws *ws, int t, int s,
                              int j) {
  if (ws->keep_rank >= 0) return ws->keep[t][(size_t)pb->schunk[s] * (size_t)pb->m + (size_t)j];
  return ws->head[t][HX(ws, pb, t, s, j)];
}

/* The bound below, its jobs sorted by qsort (ranks of many chunks). */
static double jackson_unsorted(const kt__opt_problem *pb, const kt__opt_state *st,
                               kt__opt_bound_ws *ws, int r) {
  int n = 0;
  for (int c = 0; c < pb->v; c++) {
    int s = pb->rstage[r * pb->v + c];
    for (int t = 0; s >= 0 && t < KT__OPT_TYPES; t++)
      for (int j = st->n[t][s]; j < pb->m; j++)
        ws->jobs[n++] = (struct kt__opt_job){job_head(pb, ws, t, s, j), kt__opt_sdur(pb, t, s, j),
                                             pb->tail[t][s]};
  }
  return n ? maxd(kt__opt_jackson(ws, n, 0), st->last_end[r]) : st->last_end[r];
}

/* The single-machine bound on the end of rank r's last action. */
static double rank_end_bound(const kt__opt_problem *pb, const kt__opt_state *st,
                             kt__opt_bound_ws *ws, int r) {
  if (ws->keep_rank >= 0 && r != ws->keep_rank) { /* its heads were not kept */
    ws->window_short = 1;
    return st->last_end[r];
  }
  /* each (stage, op) run's heads grow slot by slot: merged, the jobs come
   * out in order of head without a sort */
  enum { MAX_RUNS = KT__OPT_TYPES * 8 };
  int n = 0, runs = 0, run_s[MAX_RUNS], run_t[MAX_RUNS], pos[MAX_RUNS];
  for (int c = 0; c < pb->v; c++) {
    int s = pb->rstage[r * pb->v + c];
    for (int t = 0; s >= 0 && t < KT__OPT_TYPES; t++) {
      if (runs == MAX_RUNS) return jackson_unsorted(pb, st, ws, r);
      run_s[runs] = s, run_t[runs] = t, pos[runs++] = st->n[t][s];
    }
  }
  for (;;) {
    int best = -1;
    double at = INFINITY;
    for (int k = 0; k < runs; k++)
      if (pos[k] < pb->m) {
        double h = job_head(pb, ws, run_t[k], run_s[k], pos[k]);
        if (best < 0 || h < at) at = h, best = k;
      }
    if (best < 0) break;
    int s = run_s[best], t = run_t[best];
    ws->jobs[n++] = (struct kt__opt_job){at, kt__opt_sdur(pb, t, s, pos[best]), pb->tail[t][s]};
    pos[best]++;
  }
  return n ? maxd(kt__opt_jackson(ws, n, 1), st->last_end[r]) : st->last_end[r];
}

/* Sizes up to which a rank not started gets a sweep of its own. */
#define RELATIVE_CELLS 4096

size_t kt__opt_root_window(const kt__opt_problem *pb) {
  if (kt__opt_window_test < 0 || pb->need || pb->seq || pb->step.sync == KT_STEP_BARRIER ||
      (size_t)pb->S * (size_t)pb->m <= RELATIVE_CELLS)
    return 0;
  if (kt__opt_window_test > 0) return (size_t)kt__opt_window_test;
  /* a forward's rule reaches back about limit/M_B slots, a W's about
   * limit/M_W (memory_needs; the sweep's I rule): a few more for rounding,
   * and the slot before */
  double reach = 0, limit = limit_tol(pb);
  for (int s = 0; isfinite(limit) && s < pb->S; s++) {
    if (pb->act[s] > 0) reach = maxd(reach, limit / pb->act[s]);
    if (pb->wg[s] > 0) reach = maxd(reach, limit / pb->wg[s]);
  }
  size_t slots = 2;
  while (slots < (size_t)pb->m && (double)slots < reach + 4) slots *= 2;
  return slots < (size_t)pb->m ? slots : 0;
}

/* What rank r still has to run. */
static double rank_work(const kt__opt_problem *pb, const kt__opt_state *st, int r) {
  double w = 0;
  for (int c = 0; c < pb->v; c++) {
    int s = pb->rstage[r * pb->v + c];
    if (s >= 0)
      for (int t = 0; t < KT__OPT_TYPES; t++) {
        if (!pb->seq) w += (pb->m - st->n[t][s]) * kt__opt_dur(pb, t, s);
        for (int j = st->n[t][s]; pb->seq && j < pb->m; j++) w += kt__opt_sdur(pb, t, s, j);
      }
  }
  return w;
}

/* What the step's end adds to rank r's span (without a barrier), or to
 * the latest end (with one): the tie left out, which only adds. */
static double step_end(const kt__opt_problem *pb, int r) {
  const kt_step_model *m = &pb->step;
  if (m->sync == KT_STEP_BARRIER) return m->t_dp + m->t_norm + m->max_update;
  return m->t_dp + m->update[r];
}

double kt__opt_bound(const kt__opt_problem *pb, const kt__opt_state *st, const double *ready_at,
                     kt__opt_bound_ws *ws) {
  double lb = 0;
  int barrier = pb->step.sync == KT_STEP_BARRIER;
  /* a rank not started yet: its span counted from its own first forward
   * (the ranks after it have not started either); on large problems (one
   * sweep per rank would cost P sweeps) its work alone. Under a barrier
   * the step is counted from rank 0's first action, which starts at 0:
   * the one sweep below bounds every rank's end. */
  int relative = (size_t)pb->S * (size_t)pb->m <= RELATIVE_CELLS;
  for (int r = pb->p - 1; r >= 0 && !barrier; r--) {
    if (st->started[r] || pb->first[r] == 0) continue;
    if (!relative) {
      lb = maxd(lb, rank_work(pb, st, r) + step_end(pb, r));
      continue;
    }
    /* its own frame: its first forward at 0, no other rank's clock; the
     * memory rule per op (memory_needs), not the rank's predecessor table:
     * these P sweeps cost P times the one below, and on the oracle grids and
     * the exact corpus the table here never raised the bound (at P=8, M=32
     * it made the bound 30x slower) */
    for (int k = 0; k < pb->p; k++) ws->eff_free[k] = k == r ? 0 : NONE;
    if (sweep(pb, st, ws, pb->first[r], 0) < 0) return INFINITY;
    lb = maxd(lb, rank_end_bound(pb, st, ws, r) + step_end(pb, r));
  }
  for (int k = 0; k < pb->p; k++) {
    ws->eff_free[k] = st->started[k] ? st->free_at[k] : NONE;
    if (ready_at && ready_at[k] > ws->eff_free[k]) ws->eff_free[k] = ready_at[k];
  }
  if (!st->started[0] && pb->first[0] == 0) ws->eff_free[0] = 0;
  if (pb->infeasible || sweep(pb, st, ws, -1, pb->need != NULL) < 0) return INFINITY;
  for (int r = 0; r < pb->p; r++)
    if (barrier) lb = maxd(lb, rank_end_bound(pb, st, ws, r) + step_end(pb, r));
    else if (st->started[r] || pb->first[r] == 0)
      lb = maxd(lb, rank_end_bound(pb, st, ws, r) - st->start[r] + step_end(pb, r));
  return lb;
}

int kt__optimal_reach(const kt_schedule *s) {
  int v1 = s->v == 1 && s->placement == KT_PLACEMENT_LOOP;
  int v2 = s->v == 2 && s->placement == KT_PLACEMENT_V;
  return (v1 || v2) && kt_schedule_even(s) && s->p <= 4 && s->m <= 6;
}
