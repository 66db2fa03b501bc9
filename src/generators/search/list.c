/* The memory-bounded list scheduler behind zb-auto, in any placement.
 *
 * In the spirit of the automatic scheduler of Qi et al. (ICLR 2024, sec. 3):
 * every rank's order is built while time is simulated with the simulator's
 * semantics, so each decision knows when inputs arrive (or a lower bound
 * from the chain of producers that have not run yet). At each step the rank
 * whose next action can start earliest commits it:
 *
 *   - F while the rank's budget allows, I as soon as its gradient arrives
 *     (I first, F first, or I first with a guard that holds back a forward
 *     that would still run when the pending I arrives); among a rank's
 *     chunks the later stage first (depth first) or the earlier;
 *   - W when the budget blocks a forward (it frees M_W), when nothing else
 *     can ever run before it, or to fill a gap: "fit" only when it ends
 *     before the next input can arrive, "eager" in any gap, "lazy" never,
 *     "balance" when it fits or when idling through the gap would leave
 *     this rank more idle than any rank so far (the idle-balancing rule of
 *     the authors' heuristics: the makespan is the largest span, so idle
 *     time is best spread over the ranks);
 *   - optionally (one chunk per rank) rank r keeps at most P-r or 2(P-r)-1
 *     forwards in flight, the 1F1B and ZB-H2 warm-up depths.
 *
 * Memory is accounted as the simulator counts it, with each activation
 * holding max(M_B, M_W) until its I. An F on a chunk that is not the rank's
 * last for that micro-batch must leave room (pb->head) for one activation
 * of a later chunk. With that rule the oldest unfinished micro-batch can
 * always move (every rank holds only younger activations, admitted while
 * that room existed, plus W's that can run), so a budget of at least
 * kt__search_min_limit never deadlocks, and no rank ever exceeds its budget. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "generators/search/search.h"

typedef struct {
  int op; /* kt_op, or -1 when undecided (waits on an unknown input) */
  int stage;
  double start; /* INFINITY when undecided */
} decision;

struct kt__search_list {
  const kt__search_problem *pb;
  kt__search_rules ru;
  kt_schedule *s;
  kt__search_pair_end *end; /* per (stage, mb) */
  int *nf, *ni, *nw;        /* per stage: ops committed */
  double *e, *mem,
      *first; /* per rank: free time, memory (activations at max(M_B, M_W)), first start */
  double *idle, worst_idle;   /* per rank: idle since its first action; the largest */
  double *held;               /* per rank, V >= 3: activations reserved for later chunks */
  int *cap;                   /* per rank: forwards in flight allowed (one chunk per rank) */
  size_t *cursor;             /* per rank, F then I: next action of rules.follow (when given) */
  int *wq, *wq_head, *wq_len; /* per rank: FIFO of stages with a pending W (V*M slots each) */
  decision *dec;
  int *tree, leaves; /* tournament tree over ranks: the earliest decision */
};

#define EPS 1e-9

kt_status kt__search_list_new(const kt__search_problem *pb, kt__search_list **out, kt_error *err) {
  kt__search_list *ls = kt_calloc(1, sizeof *ls);
  size_t p = (size_t)pb->p, S = (size_t)pb->S, cells = S * (size_t)pb->m;
  if (ls) {
    ls->pb = pb;
    ls->end = malloc(cells * sizeof *ls->end);
    ls->nf = kt_calloc(S, sizeof *ls->nf);
    ls->ni = kt_calloc(S, sizeof *ls->ni);
    ls->nw = kt_calloc(S, sizeof *ls->nw);
    ls->e = kt_calloc(p, sizeof *ls->e);
    ls->mem = kt_calloc(p, sizeof *ls->mem);
    ls->first = kt_calloc(p, sizeof *ls->first);
    ls->idle = kt_calloc(p, sizeof *ls->idle);
    ls->held = kt_calloc(p, sizeof *ls->held);
    ls->cap = kt_calloc(p, sizeof *ls->cap);
    ls->cursor = kt_calloc(2 * p, sizeof *ls->cursor);
    ls->wq = kt_calloc(cells, sizeof *ls->wq);
    ls->wq_head = kt_calloc(p, sizeof *ls->wq_head);
    ls->wq_len = kt_calloc(p, sizeof *ls->wq_len);
    ls->dec = kt_calloc(p, sizeof *ls->dec);
    for (ls->leaves = 1; ls->leaves < pb->p; ls->leaves *= 2) {
    }
    ls->tree = kt_calloc(2 * (size_t)ls->leaves, sizeof *ls->tree);
  }
  if (!ls || !ls->end || !ls->nf || !ls->ni || !ls->nw || !ls->e || !ls->mem || !ls->first ||
      !ls->idle || !ls->held || !ls->cap || !ls->cursor || !ls->wq || !ls->wq_head || !ls->wq_len ||
      !ls->dec || !ls->tree) {
    kt__search_list_free(ls);
    return kt_fail(err, KT_ENOMEM, "out of memory for the list scheduler (P=%d, M=%d)", pb->p,
                   pb->m);
  }
  *out = ls;
  return KT_OK;
}

void kt__search_list_free(kt__search_list *ls) {
  if (!ls) return;
  free(ls->end);
  free(ls->nf);
  free(ls->ni);
  free(ls->nw);
  free(ls->e);
  free(ls->mem);
  free(ls->first);
  free(ls->idle);
  free(ls->held);
  free(ls->cap);
  free(ls->cursor);
  free(ls->wq);
  free(ls->wq_head);
  free(ls->wq_len);
  free(ls->dec);
  free(ls->tree);
  free(ls);
}

static double maxd(double a, double b) { return a > b ? a : b; }

/* Lower bounds on when F / I of (stage, mb) can end: the known end, or the
 * chain of producers not yet run, each as early as its rank allows. The
 * walk stops after BOUND_DEPTH stages, which keeps a decision O(1). */
#define BOUND_DEPTH 16

static double hop(const kt__search_problem *pb, int from, int to) {
  return from == to ? 0 : pb->hop[from < to ? from : to]; /* stages next to each other */
}

static double f_end_bound(const kt__search_list *ls, int st, int j) {
  const kt__search_problem *pb = ls->pb;
  int k = st, stop = st - BOUND_DEPTH;
  while (k >= 0 && k > stop && isnan(ls->end[KT__PAIR(pb, k, j)].f)) k--;
  double t;
  if (k >= 0 && !isnan(ls->end[KT__PAIR(pb, k, j)].f)) t = ls->end[KT__PAIR(pb, k, j)].f;
  else k = k < 0 ? 0 : k, t = ls->e[pb->srank[k]] + pb->tf[k];
  for (int q = k + 1; q <= st; q++)
    t = maxd(ls->e[pb->srank[q]], t + hop(pb, q - 1, q)) + pb->tf[q];
  return t;
}

static double i_end_bound(const kt__search_list *ls, int st, int j) {
  const kt__search_problem *pb = ls->pb;
  int k = st, last = pb->S - 1, stop = st + BOUND_DEPTH;
  while (k <= last && k < stop && isnan(ls->end[KT__PAIR(pb, k, j)].i)) k++;
  double t;
  if (k <= last && !isnan(ls->end[KT__PAIR(pb, k, j)].i)) t = ls->end[KT__PAIR(pb, k, j)].i;
  else if (k > last)
    k = last, t = maxd(ls->e[pb->srank[last]], f_end_bound(ls, last, j)) + pb->tb[last];
  else t = ls->e[pb->srank[k]] + pb->tb[k];
  for (int q = k - 1; q >= st; q--)
    t = maxd(ls->e[pb->srank[q]], t + hop(pb, q + 1, q)) + pb->tb[q];
  return t;
}

/* Earliest time the input of the next F / I of stage st can arrive. */
static double input_bound(const kt__search_list *ls, int st, kt_op op) {
  const kt__search_problem *pb = ls->pb;
  if (op == KT_OP_F) return st == 0 ? 0 : f_end_bound(ls, st - 1, ls->nf[st]) + hop(pb, st - 1, st);
  if (st == pb->S - 1) return f_end_bound(ls, st, ls->ni[st]);
  return i_end_bound(ls, st + 1, ls->ni[st]) + hop(pb, st + 1, st);
}

/* Whether the next F of stage st fits rank r's budget (and cap). With V = 2
 * an F of chunk 0 leaves room for one chunk-1 activation: the oldest
 * micro-batch then always finds it (every younger activation was admitted
 * while it was free). With V >= 3 a micro-batch's first F reserves all its
 * later chunks, which then always fit. */
static int f_admissible(const kt__search_list *ls, int r, int st) {
  const kt__search_problem *pb = ls->pb;
  if (ls->nf[st] >= pb->m) return 0;
  if (pb->v == 1 && ls->nf[st] - ls->ni[st] >= ls->cap[r]) return 0;
  if (pb->v >= 3 && pb->schunk[st] > 0) return 1; /* reserved */
  double need = pb->res[st] + (pb->schunk[st] < pb->v - 1 ? pb->head[r] : 0);
  return ls->mem[r] + ls->held[r] + need <= pb->limit[r] + EPS * (1 + pb->limit[r]);
}

/* The candidates of rank r: per op, the first stage in chunk order whose
 * input is there at `now`, and the one whose known input comes first. */
typedef struct {
  int now_st[2], next_st[2];
  double next_t[2];
  int f_left, f_blocked, i_left;
} candidates;

/* Whether action a is of kind w (0: F, 1: I or B; -1: F, I or B). */
static int of_kind(const kt_action *a, int w) {
  return a->op != KT_OP_W && (w < 0 || (a->op != KT_OP_F) == w);
}

/* The stage of the next action of kind w on rank r in the followed order
 * (strict: the next F or I whatever its kind, w then set), -1 when none.
 * The cursor is left on the action found: what it skipped is of another
 * kind and never wanted by this cursor (otherwise a rank whose followed
 * list has no F left would scan its whole tail at every decision). */
static int followed(const kt__search_list *ls, int r, int *w) {
  const kt_rank_actions *ra = &ls->ru.follow->ranks[r];
  int want = ls->ru.loose ? *w : -1;
  size_t *cur = &ls->cursor[2 * r + (want > 0)], i = *cur;
  while (i < ra->n && !of_kind(&ra->actions[i], want)) i++;
  *cur = i;
  if (i >= ra->n) return -1;
  *w = ra->actions[i].op != KT_OP_F;
  return ra->actions[i].stage;
}

static void gather(const kt__search_list *ls, int r, double now, candidates *cd) {
  const kt__search_problem *pb = ls->pb;
  *cd = (candidates){{-1, -1}, {-1, -1}, {INFINITY, INFINITY}, 0, 0, 0};
  int only[2] = {-1, -1}; /* with a followed order: the one stage allowed per kind */
  if (ls->ru.follow) {
    int w0 = 0, w1 = 1, st = followed(ls, r, &w0);
    if (!ls->ru.loose) {
      if (st < 0) return;
      only[w0] = st, only[1 - w0] = -2;
    } else {
      only[0] = st < 0 ? -2 : st;
      st = followed(ls, r, &w1);
      only[1] = st < 0 ? -2 : st;
    }
  }
  for (int k = 0; k < pb->v; k++) {
    int c = ls->ru.depth ? pb->v - 1 - k : k, st = pb->rstage[r * pb->v + c];
    for (int w = 0; w < 2; w++) { /* 0: F, 1: I */
      if (only[w] != -1 && st != only[w]) continue;
      if (w == 0) {
        if (ls->nf[st] >= pb->m) continue;
        cd->f_left = 1;
        if (!f_admissible(ls, r, st)) {
          cd->f_blocked = 1;
          continue;
        }
      } else if (ls->ni[st] >= ls->nf[st]) {
        continue;
      } else {
        cd->i_left = 1;
      }
      kt_op op = w ? KT_OP_I : KT_OP_F;
      double t = kt__search_input_ready(pb, ls->end, st, op, w ? ls->ni[st] : ls->nf[st]);
      if (isnan(t)) continue;
      if (t <= now && cd->now_st[w] < 0) cd->now_st[w] = st;
      if (t < cd->next_t[w]) cd->next_t[w] = t, cd->next_st[w] = st;
    }
  }
}

/* Whether a W should run now, in a gap before any input. */
static int use_w(const kt__search_list *ls, int r, double now, const candidates *cd) {
  const kt__search_problem *pb = ls->pb;
  int wst = ls->wq[(size_t)r * pb->v * pb->m + ls->wq_head[r]];
  if (!cd->i_left && (!cd->f_left || cd->f_blocked)) return 1; /* nothing else can run first */
  if (cd->f_blocked && pb->wg[wst] > 0) return 1;              /* it frees memory */
  if (ls->ru.wfill == KT__WFILL_EAGER) return 1;
  if (ls->ru.wfill == KT__WFILL_LAZY) return 0;
  double lb = INFINITY;
  for (int c = 0; c < pb->v; c++) {
    int st = pb->rstage[r * pb->v + c];
    if (ls->ni[st] < ls->nf[st]) lb = fmin(lb, input_bound(ls, st, KT_OP_I));
    if (ls->nf[st] < pb->m && f_admissible(ls, r, st)) lb = fmin(lb, input_bound(ls, st, KT_OP_F));
  }
  if (now + pb->tw[wst] <= lb + EPS) return 1;
  return ls->ru.wfill == KT__WFILL_BALANCE && lb - now > ls->worst_idle - ls->idle[r] + EPS;
}

static decision decide(const kt__search_list *ls, int r) {
  const kt__search_problem *pb = ls->pb;
  decision d = {-1, -1, INFINITY};
  double now = ls->e[r];
  candidates cd;
  gather(ls, r, now, &cd);
  int f_now = cd.now_st[0] >= 0, i_now = cd.now_st[1] >= 0;
  /* guard: a forward that would still run when the pending I arrives waits */
  if (f_now && !i_now && cd.i_left && ls->ru.prio == KT__PRIO_I_GUARD) {
    double lb = INFINITY;
    for (int c = 0; c < pb->v; c++) {
      int st = pb->rstage[r * pb->v + c];
      if (ls->ni[st] < ls->nf[st]) lb = fmin(lb, input_bound(ls, st, KT_OP_I));
    }
    if (now + pb->tf[cd.now_st[0]] > lb + EPS) f_now = 0, cd.next_st[0] = -1; /* waits for the I */
  }
  if (f_now || i_now) {
    int f = f_now && (!i_now || ls->ru.prio == KT__PRIO_F_FIRST);
    d.op = f ? KT_OP_F : KT_OP_I;
    d.stage = cd.now_st[f ? 0 : 1];
    d.start = now;
    return d;
  }
  if (ls->wq_len[r] > 0 && use_w(ls, r, now, &cd)) {
    d.op = KT_OP_W;
    d.stage = ls->wq[(size_t)r * pb->v * pb->m + ls->wq_head[r]];
    d.start = now;
    return d;
  }
  /* wait for the earliest known input */
  if (cd.next_st[0] >= 0) d.op = KT_OP_F, d.stage = cd.next_st[0], d.start = cd.next_t[0];
  if (cd.next_st[1] >= 0 &&
      (cd.next_t[1] < d.start || (cd.next_t[1] == d.start && ls->ru.prio != KT__PRIO_F_FIRST)))
    d.op = KT_OP_I, d.stage = cd.next_st[1], d.start = cd.next_t[1];
  if (d.start < now) d.start = now;
  return d;
}

static void commit(kt__search_list *ls, int r) {
  const kt__search_problem *pb = ls->pb;
  decision d = ls->dec[r];
  int st = d.stage;
  int mb = d.op == KT_OP_F ? ls->nf[st] : d.op == KT_OP_I ? ls->ni[st] : ls->nw[st];
  double end = d.start + kt__search_cost(pb, st, (kt_op)d.op, mb);
  kt__append(ls->s, r, st, (kt_op)d.op, mb);
  if (ls->ru.follow && d.op != KT_OP_W) { /* past this op in the followed order */
    const kt_rank_actions *ra = &ls->ru.follow->ranks[r];
    int want = ls->ru.loose ? d.op != KT_OP_F : -1;
    size_t *cur = &ls->cursor[2 * r + (want > 0)];
    while (*cur < ra->n && !of_kind(&ra->actions[*cur], want)) (*cur)++;
    (*cur)++;
  }
  if (isnan(ls->first[r])) ls->first[r] = d.start;
  else if (d.start > ls->e[r]) {
    ls->idle[r] += d.start - ls->e[r];
    if (ls->idle[r] > ls->worst_idle) ls->worst_idle = ls->idle[r];
  }
  ls->e[r] = end;
  size_t slots = (size_t)pb->v * (size_t)pb->m, base = (size_t)r * slots;
  if (d.op == KT_OP_F) {
    ls->end[KT__PAIR(pb, st, mb)].f = end;
    ls->mem[r] += pb->res[st];
    ls->nf[st]++;
    if (pb->v >= 3) ls->held[r] += pb->schunk[st] == 0 ? pb->head[r] : -pb->res[st];
  } else if (d.op == KT_OP_I) {
    ls->end[KT__PAIR(pb, st, mb)].i = end;
    ls->mem[r] += pb->wg[st] - pb->res[st];
    ls->ni[st]++;
    ls->wq[base + (ls->wq_head[r] + ls->wq_len[r]) % slots] = st;
    ls->wq_len[r]++;
  } else {
    ls->mem[r] -= pb->wg[st];
    ls->nw[st]++;
    ls->wq_head[r] = (int)((ls->wq_head[r] + 1) % slots);
    ls->wq_len[r]--;
  }
}

static int earlier(const kt__search_list *ls, int x, int y) {
  if (x < 0) return y;
  if (y < 0) return x;
  return ls->dec[y].start < ls->dec[x].start ? y : x; /* ties: the lower rank */
}

/* Recomputes rank r's decision and its path to the root of the tree. */
static void refresh(kt__search_list *ls, int r) {
  ls->dec[r] = decide(ls, r);
  int k = ls->leaves + r;
  ls->tree[k] = ls->dec[r].op >= 0 ? r : -1;
  for (k /= 2; k >= 1; k /= 2) {
    int old = ls->tree[k];
    ls->tree[k] = earlier(ls, ls->tree[2 * k], ls->tree[2 * k + 1]);
    if (ls->tree[k] == old && old != r) break; /* nothing above depends on r */
  }
}

double kt__search_list_build(kt__search_list *ls, const kt__search_rules *rules, kt_schedule *s,
                             kt_error *err) {
  const kt__search_problem *pb = ls->pb;
  int p = pb->p;
  ls->ru = *rules;
  ls->s = s;
  ls->worst_idle = 0;
  if (kt__search_reserve(s, err)) return -1;
  for (int r = 0; r < p; r++) {
    ls->e[r] = ls->mem[r] = ls->idle[r] = ls->held[r] = 0;
    ls->first[r] = NAN;
    ls->cursor[2 * r] = ls->cursor[2 * r + 1] = 0;
    ls->wq_head[r] = ls->wq_len[r] = 0;
    ls->cap[r] = rules->cap == KT__CAP_1F1B   ? p - r
                 : rules->cap == KT__CAP_ZBH2 ? 2 * (p - r) - 1
                                              : pb->m;
    s->ranks[r].n = 0;
  }
  for (int st = 0; st < pb->S; st++) ls->nf[st] = ls->ni[st] = ls->nw[st] = 0;
  size_t cells = (size_t)pb->S * (size_t)pb->m;
  for (size_t k = 0; k < cells; k++) ls->end[k] = (kt__search_pair_end){NAN, NAN};
  for (int k = 1; k < 2 * ls->leaves; k++) ls->tree[k] = -1;
  for (int r = 0; r < p; r++) refresh(ls, r);
  for (size_t step = 0, total = 3 * cells; step < total; step++) { /* one action per step */
    int best = ls->tree[1];
    if (best < 0) {
      kt_fail(err, KT_EINVAL, "no rank can proceed after %zu of %zu actions", step, total);
      return -1;
    }
    int op = ls->dec[best].op, st = ls->dec[best].stage;
    commit(ls, best);
    refresh(ls, best);
    /* the rank that consumes the result, when it lives elsewhere */
    int to = op == KT_OP_F ? st + 1 : op == KT_OP_I ? st - 1 : -1;
    if (to >= 0 && to < pb->S && pb->srank[to] != best) refresh(ls, pb->srank[to]);
  }
  return kt_step_model_period(&pb->step, ls->first, ls->e, NULL);
}
