/* zb-auto: memory-bounded automatic zero-bubble schedule (one chunk per rank).
 *
 * In the spirit of the automatic scheduler of Qi et al. (ICLR 2024, sec. 3):
 * a list scheduler builds every rank's order while it simulates time with the
 * same semantics as src/sim/sim.c, so each decision knows when inputs arrive.
 * At each step the rank whose next action can start earliest commits it:
 *
 *   - F while memory allows (warm-up: as many forwards as fit), I as soon as
 *     its gradient arrives: I first, F first, or I first with a guard that
 *     holds back a forward that would still run when the pending I arrives;
 *   - W when memory is at the limit (it frees M_W), or to fill a gap: "fit"
 *     only when the W ends before the next input can arrive (a lower bound
 *     from the chain of producers), "eager" in any gap;
 *   - optionally the in-flight forwards of rank r are capped at P-r or
 *     2(P-r)-1 (the 1F1B / ZB-H2 warm-up depths).
 *
 * Every variant (3 x 2 x 3 = 18; its makespan comes from the builder's own
 * clock, which follows the simulator exactly), plus the handcrafted zb-h1
 * and zb-h2 when they fit the limit (simulated), competes under the caller's
 * costs: the smallest makespan wins (ties: lower peak memory), and the
 * winner is run through the simulator once more. Memory is accounted as the
 * simulator does (F adds M_B, I turns it into M_W, W frees M_W), a forward
 * is admitted only when max(M_B, M_W) more fits, and every candidate's
 * prefix sums are checked against the limit, so no prefix of any
 * rank's order ever exceeds the limit. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/sim.h"
#include "generators/internal.h"

enum { PRIO_I_FIRST, PRIO_F_FIRST, PRIO_I_GUARD, PRIO_COUNT };
enum { WFILL_FIT, WFILL_EAGER, WFILL_COUNT };
enum { CAP_NONE, CAP_1F1B, CAP_ZBH2, CAP_COUNT };

typedef struct {
  int prio, wfill, cap;
} variant;

typedef struct {
  int op;       /* kt_op, or -1 when undecided (waits on an unknown input) */
  double start; /* INFINITY when undecided */
} decision;

typedef struct {
  kt_schedule *s;
  const kt_costs *c;
  variant v;
  int p, m;
  double comm, limit;
  double *f_end, *i_end;   /* (stage, mb), NAN until committed; stage = rank */
  int *nf, *ni, *nw, *cap; /* per rank */
  double *e, *mem, *first; /* rank free time, conservative memory, first start */
  double makespan;         /* of the last variant built (same times as the simulator) */
  decision *dec;
  int *tree, leaves;       /* tournament tree over ranks: index of the earliest decision */
} builder;

#define AT(b, r, j) ((size_t)(r) * (size_t)(b)->m + (size_t)(j))
#define EPS 1e-9

static double reserve(const kt_costs *c, int stage) {
  double a = kt_cost_mem_act(c, stage), w = kt_cost_mem_wgrad(c, stage);
  return a > w ? a : w;
}

/* Time F(r, nf) can start from its input, NAN while unknown. */
static double f_ready(const builder *b, int r) {
  if (r == 0) return 0;
  double t = b->f_end[AT(b, r - 1, b->nf[r])];
  return isnan(t) ? NAN : t + b->comm;
}

static double i_ready(const builder *b, int r) {
  if (r == b->p - 1) return b->f_end[AT(b, r, b->ni[r])];
  double t = b->i_end[AT(b, r + 1, b->ni[r])];
  return isnan(t) ? NAN : t + b->comm;
}

static double maxd(double a, double b) { return a > b ? a : b; }

/* Lower bounds on when F(r, j) / I(r, j) can end: the known end, or the
 * chain of still-uncommitted producers run as early as their ranks allow.
 * The walk stops after BOUND_DEPTH ranks (then the rank's own free time
 * bounds it), which keeps a decision O(1) for any P. */
#define BOUND_DEPTH 16

static double f_end_bound(const builder *b, int r, int j) {
  int k = r, stop = r - BOUND_DEPTH;
  while (k >= 0 && k > stop && isnan(b->f_end[AT(b, k, j)])) k--;
  double t;
  if (k >= 0 && !isnan(b->f_end[AT(b, k, j)])) t = b->f_end[AT(b, k, j)];
  else k = k < 0 ? 0 : k, t = b->e[k] + kt_cost_tf(b->c, k);
  for (int q = k + 1; q <= r; q++) t = maxd(b->e[q], t + b->comm) + kt_cost_tf(b->c, q);
  return t;
}

static double i_end_bound(const builder *b, int r, int j) {
  int k = r, last = b->p - 1, stop = r + BOUND_DEPTH;
  while (k <= last && k < stop && isnan(b->i_end[AT(b, k, j)])) k++;
  double t;
  if (k <= last && !isnan(b->i_end[AT(b, k, j)])) t = b->i_end[AT(b, k, j)];
  else if (k > last)
    k = last, t = maxd(b->e[last], f_end_bound(b, last, j)) + kt_cost_tb(b->c, last);
  else t = b->e[k] + kt_cost_tb(b->c, k);
  for (int q = k - 1; q >= r; q--) t = maxd(b->e[q], t + b->comm) + kt_cost_tb(b->c, q);
  return t;
}

/* Earliest time the next F / I input of rank r can arrive. */
static double f_lower_bound(const builder *b, int r) {
  return r == 0 ? 0 : f_end_bound(b, r - 1, b->nf[r]) + b->comm;
}

static double i_lower_bound(const builder *b, int r) {
  if (r == b->p - 1) return f_end_bound(b, r, b->ni[r]);
  return i_end_bound(b, r + 1, b->ni[r]) + b->comm;
}

static decision decide(const builder *b, int r) {
  decision d = {-1, INFINITY};
  int nf = b->nf[r], ni = b->ni[r], nw = b->nw[r], m = b->m;
  if (nf == m && ni == m && nw == m) return d;
  double now = b->e[r];
  int f_left = nf < m;
  int f_fits = f_left && nf - ni < b->cap[r] && b->mem[r] + reserve(b->c, r) <= b->limit + EPS;
  int has_i = ni < nf, has_w = nw < ni;
  double tf = f_fits ? f_ready(b, r) : NAN, ti = has_i ? i_ready(b, r) : NAN;
  int f_now = f_fits && !isnan(tf) && tf <= now, i_now = has_i && !isnan(ti) && ti <= now;
  /* guard: a forward that would still run when the pending I arrives waits */
  if (f_now && !i_now && has_i && b->v.prio == PRIO_I_GUARD &&
      now + kt_cost_tf(b->c, r) > i_lower_bound(b, r) + EPS)
    f_now = 0, tf = NAN;
  if (f_now && i_now) {
    d.op = b->v.prio == PRIO_F_FIRST ? KT_OP_F : KT_OP_I;
    d.start = now;
    return d;
  }
  if (f_now || i_now) {
    d.op = f_now ? KT_OP_F : KT_OP_I;
    d.start = now;
    return d;
  }
  if (has_w) {
    int use_w = 0;
    if (!has_i && !f_fits) use_w = 1; /* nothing else can ever run before it */
    else if (f_left && !f_fits && kt_cost_mem_wgrad(b->c, r) > 0) use_w = 1; /* frees memory */
    else if (b->v.wfill == WFILL_EAGER) use_w = 1;
    else if (b->v.wfill == WFILL_FIT) {
      double lb = INFINITY;
      if (has_i) lb = fmin(lb, i_lower_bound(b, r));
      if (f_fits) lb = fmin(lb, f_lower_bound(b, r));
      use_w = now + kt_cost_tw(b->c, r) <= lb + EPS;
    }
    if (use_w) {
      d.op = KT_OP_W;
      d.start = now;
      return d;
    }
  }
  /* wait for the earliest known input */
  if (f_fits && !isnan(tf) && tf < d.start) d.op = KT_OP_F, d.start = tf;
  if (has_i && !isnan(ti) && (ti < d.start || (ti == d.start && b->v.prio != PRIO_F_FIRST)))
    d.op = KT_OP_I, d.start = ti;
  return d;
}

static kt_status commit(builder *b, int r, kt_error *err) {
  decision d = b->dec[r];
  int mb = d.op == KT_OP_F ? b->nf[r] : d.op == KT_OP_I ? b->ni[r] : b->nw[r];
  double end = d.start + kt_cost_op(b->c, r, (kt_op)d.op);
  kt_schedule *s = b->s;
  KT__PUSH(s, r, r, (kt_op)d.op, mb);
  if (isnan(b->first[r])) b->first[r] = d.start;
  b->e[r] = end;
  double act = reserve(b->c, r), wg = kt_cost_mem_wgrad(b->c, r);
  if (d.op == KT_OP_F) {
    b->f_end[AT(b, r, mb)] = end;
    b->mem[r] += act;
    b->nf[r]++;
  } else if (d.op == KT_OP_I) {
    b->i_end[AT(b, r, mb)] = end;
    b->mem[r] += wg - act;
    b->ni[r]++;
  } else {
    b->mem[r] -= wg;
    b->nw[r]++;
  }
  return KT_OK;
}

static int earlier(const builder *b, int x, int y) {
  if (x < 0) return y;
  if (y < 0) return x;
  return b->dec[y].start < b->dec[x].start ? y : x; /* ties: the lower rank */
}

/* Recomputes rank r's decision and its path to the root of the tree. */
static void refresh(builder *b, int r) {
  b->dec[r] = decide(b, r);
  int k = b->leaves + r;
  b->tree[k] = b->dec[r].op >= 0 ? r : -1;
  for (k /= 2; k >= 1; k /= 2) {
    int old = b->tree[k];
    b->tree[k] = earlier(b, b->tree[2 * k], b->tree[2 * k + 1]);
    if (b->tree[k] == old && old != r) break; /* nothing above depends on r */
  }
}

/* Builds one variant into b->s (whose rank lists must be empty). */
static kt_status build_variant(builder *b, kt_error *err) {
  int p = b->p;
  for (int r = 0; r < p; r++) {
    b->nf[r] = b->ni[r] = b->nw[r] = 0;
    b->e[r] = b->mem[r] = 0;
    b->first[r] = NAN;
    b->cap[r] = b->v.cap == CAP_1F1B ? p - r : b->v.cap == CAP_ZBH2 ? 2 * (p - r) - 1 : b->m;
    b->s->ranks[r].n = 0;
  }
  size_t cells = (size_t)p * (size_t)b->m;
  for (size_t k = 0; k < cells; k++) b->f_end[k] = b->i_end[k] = NAN;
  for (int k = 1; k < 2 * b->leaves; k++) b->tree[k] = -1;
  for (int r = 0; r < p; r++) refresh(b, r);
  size_t total = 3 * cells;
  for (size_t step = 0; step < total; step++) { /* one action per step */
    int best = b->tree[1];
    if (best < 0)
      return kt_fail(err, KT_EINVAL, "zb-auto: no rank can proceed after %zu of %zu actions", step,
                     total);
    kt_status st = commit(b, best, err);
    if (st) return st;
    for (int r = best - 1; r <= best + 1; r++)
      if (r >= 0 && r < p) refresh(b, r);
  }
  b->makespan = 0;
  for (int r = 0; r < p; r++) b->makespan = maxd(b->makespan, b->e[r] - b->first[r]);
  return KT_OK;
}

/* Exact peak memory of the order (prefix sums, as the simulator counts). */
static double order_peak(const kt_schedule *s, const kt_costs *c) {
  double peak = 0;
  for (int r = 0; r < s->p; r++) {
    double mem = 0;
    for (size_t i = 0; i < s->ranks[r].n; i++) {
      const kt_action *a = &s->ranks[r].actions[i];
      double act = kt_cost_mem_act(c, a->stage), wg = kt_cost_mem_wgrad(c, a->stage);
      mem += a->op == KT_OP_F ? act : a->op == KT_OP_I ? wg - act : a->op == KT_OP_W ? -wg : -act;
      if (mem > peak) peak = mem;
    }
  }
  return peak;
}

typedef struct {
  kt_schedule best;
  double makespan, peak;
  int have;
} best_so_far;

/* Keeps the candidate when it fits the limit and is the best so far. A
 * negative makespan means unknown: the candidate is simulated. */
static kt_status consider(best_so_far *bs, kt_schedule *cand, const kt_costs *c, double limit,
                          double ms, kt_error *err) {
  double peak = order_peak(cand, c);
  if (peak > limit + EPS * (1 + fabs(limit))) return KT_OK;
  if (ms < 0) {
    kt_metrics met;
    kt_error e2;
    kt_status st = kt_simulate_metrics(cand, c, &met, &e2);
    if (st == KT_ENOMEM) return kt_fail(err, st, "zb-auto: %s", e2.msg);
    if (st) return KT_OK; /* a candidate that cannot run is skipped */
    ms = met.makespan;
    kt_metrics_free(&met);
  }
  double tol = 1e-12 * (1 + fabs(ms));
  if (bs->have && (ms > bs->makespan + tol || (ms > bs->makespan - tol && peak >= bs->peak)))
    return KT_OK;
  kt_schedule tmp = bs->best;
  bs->best = *cand;
  *cand = tmp; /* the old best's storage is reused for the next candidate */
  bs->makespan = ms;
  bs->peak = peak;
  bs->have = 1;
  return KT_OK;
}

static kt_status empty_like(const kt_schedule *s, kt_schedule *out, kt_error *err) {
  kt_status st = kt_schedule_init(out, s->p, s->v, s->m, s->placement, err);
  if (!st) memcpy(out->name, s->name, sizeof out->name);
  return st;
}

static kt_status search(kt_schedule *s, const kt_costs *c, double limit, int with_handcrafted,
                        best_so_far *bs, kt_error *err) {
  int p = s->p, m = s->m;
  size_t cells = (size_t)p * (size_t)m;
  builder b = {.c = c, .p = p, .m = m, .comm = kt_cost_comm(c), .limit = limit};
  b.f_end = malloc(cells * sizeof *b.f_end);
  b.i_end = malloc(cells * sizeof *b.i_end);
  b.nf = kt_calloc((size_t)p, sizeof *b.nf);
  b.ni = kt_calloc((size_t)p, sizeof *b.ni);
  b.nw = kt_calloc((size_t)p, sizeof *b.nw);
  b.cap = kt_calloc((size_t)p, sizeof *b.cap);
  b.e = kt_calloc((size_t)p, sizeof *b.e);
  b.mem = kt_calloc((size_t)p, sizeof *b.mem);
  b.first = kt_calloc((size_t)p, sizeof *b.first);
  b.dec = kt_calloc((size_t)p, sizeof *b.dec);
  for (b.leaves = 1; b.leaves < p; b.leaves *= 2) {}
  b.tree = kt_calloc((size_t)2 * (size_t)b.leaves, sizeof *b.tree);
  kt_schedule cand = {0};
  kt_status st = KT_OK;
  if (!b.f_end || !b.i_end || !b.nf || !b.ni || !b.nw || !b.cap || !b.e || !b.mem ||
      !b.first || !b.dec || !b.tree)
    st = kt_fail(err, KT_ENOMEM, "out of memory building zb-auto (P=%d, M=%d)", p, m);
  if (!st) st = empty_like(s, &cand, err);
  for (int pr = 0; pr < PRIO_COUNT && !st; pr++)
    for (int wf = 0; wf < WFILL_COUNT && !st; wf++)
      for (int cp = 0; cp < CAP_COUNT && !st; cp++) {
        if (cp == CAP_ZBH2 && p == 1) continue;
        b.v = (variant){pr, wf, cp};
        b.s = &cand;
        if (!cand.ranks && (st = empty_like(s, &cand, err))) break;
        if (!(st = build_variant(&b, err))) st = consider(bs, &cand, c, limit, b.makespan, err);
      }
  /* the handcrafted schedules compete when they fit the limit */
  kt_status (*const hand[])(kt_schedule *, const kt_schedule_params *, kt_error *) = {
      kt__gen_zb_h1, kt__gen_zb_h2};
  for (size_t h = 0; h < sizeof hand / sizeof *hand && !st && with_handcrafted; h++) {
    if (!cand.ranks && (st = empty_like(s, &cand, err))) break;
    for (int r = 0; r < p; r++) cand.ranks[r].n = 0;
    kt_schedule_params none = {.p = p, .m = m, .v = 1};
    if (!(st = hand[h](&cand, &none, err))) st = consider(bs, &cand, c, limit, -1, err);
  }
  if (cand.ranks) kt_schedule_free(&cand);
  free(b.f_end);
  free(b.i_end);
  free(b.nf);
  free(b.ni);
  free(b.nw);
  free(b.cap);
  free(b.e);
  free(b.mem);
  free(b.first);
  free(b.dec);
  free(b.tree);
  return st;
}

kt_status kt__zb_auto_build(kt_schedule *s, const struct kt_costs *costs, double mem_limit,
                            int with_handcrafted, kt_error *err) {
  kt_costs unit;
  const kt_costs *c = costs;
  if (!c) {
    kt_costs_default(&unit);
    c = &unit;
  }
  int p = s->p;
  kt_status st = kt_costs_check(c, p, err);
  if (st) return st;
  if (s->v != 1)
    return kt_fail(err, KT_EINVAL, "zb-auto runs one chunk per rank (got V=%d)", s->v);
  double need = 0;
  int need_stage = 0;
  for (int r = 0; r < p; r++) {
    if (reserve(c, r) > need) need = reserve(c, r), need_stage = r;
  }
  double limit = mem_limit;
  if (isnan(limit) || isinf(limit))
    return kt_fail(err, KT_EINVAL, "zb-auto: memory limit %g is not a finite number", limit);
  kt_schedule_params lp = {.p = p, .costs = c, .mem_limit = limit};
  limit = kt_schedule_mem_limit(&lp);
  if (limit + EPS * (1 + need) < need)
    return kt_fail(err, KT_EINVAL,
                   "zb-auto: memory limit %g is below what one micro-batch needs on stage %d "
                   "(%g = max(mem-act, mem-wgrad)); raise --mem-limit to at least %g",
                   limit, need_stage, need, need);
  best_so_far bs = {.have = 0};
  st = search(s, c, limit, with_handcrafted, &bs, err);
  if (!st && !bs.have)
    st = kt_fail(err, KT_EINVAL, "zb-auto: no schedule fits memory limit %g (P=%d, M=%d)", limit,
                 p, s->m);
  if (st) {
    if (bs.have) kt_schedule_free(&bs.best);
    return st;
  }
  /* the winner runs to completion under the simulator (a cheap safety net) */
  if ((st = kt_simulate(&bs.best, c, NULL, err))) {
    kt_schedule_free(&bs.best);
    return st;
  }
  /* hand the winner's lists to s */
  for (int r = 0; r < p; r++) {
    kt_rank_actions tmp = s->ranks[r];
    s->ranks[r] = bs.best.ranks[r];
    bs.best.ranks[r] = tmp;
  }
  kt_schedule_free(&bs.best);
  return KT_OK;
}

kt_status kt__gen_zb_auto(kt_schedule *s, const kt_schedule_params *params, kt_error *err) {
  return kt__zb_auto_build(s, params->costs, params->mem_limit, 1, err);
}
