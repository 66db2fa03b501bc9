/* The round-based builder for two chunks per rank in v placement, after the
 * ZB-V heuristic of Qi et al. (ICLR 2024, sec. 6). Rank r holds stage r
 * (the forward comes from rank r-1: lane 0, "down") and stage 2P-1-r (the
 * forward comes from rank r+1: lane 1, "up"). Backwards run the other way:
 * the I of stage 2P-1-r comes from rank r-1 (lane 0), the I of stage r from
 * rank r+1 (lane 1).
 *
 * 1. Warm-up: forward 0 on stage r of every rank; then from the last rank
 *    up, rank r runs stage-r forwards (one more on every rank above it too,
 *    so their chain stays complete) while they end before its first
 *    stage-(2P-1-r) forward can start and its budget keeps room for 2r+2
 *    more activations; then that forward. Each rank then evens out its
 *    forward counts with the rank above, alternating lanes.
 * 2. 2M rounds: every rank runs one I (lane 1 when its input is there,
 *    else lane 0; lane-1 ranks bottom up, then lane-0 ranks top down), then
 *    one forward (lane 1 when its input is there, else lane 0).
 * 3. Before each, W's run while the budget needs room and while a W ends
 *    before the input arrives; a shorter remaining gap takes one more W
 *    when idling through it would leave the rank more idle than the most
 *    idle rank (always before a lane-1 I; before a lane-0 I with FILL_I,
 *    before a forward with FILL_F).
 * 4. The run repeats with each rank allowed the idle it had the last time
 *    (the largest idle then minus its own) while that lowers the largest. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "generators/search/search.h"

typedef struct {
  const kt__search_problem *pb;
  kt_schedule *s;
  int flags, p, m;
  int *nf, *ni, *nw;          /* per stage */
  int *wq, *wq_head, *wq_len; /* per rank: FIFO of stages with a pending W (2M slots) */
  double *e, *mem, *idle;     /* per rank */
  double worst_idle;          /* the largest of idle[] (idle only grows within a run) */
  int *started;
  const double *approved; /* NULL on the first run */
  double max_approved;
  kt__search_pair_end *end;
  kt_error *err;
} vrounds;

#define EPS 1e-9

/* The stage of rank r's forward (F) or I in a lane. */
static int lane_stage(const vrounds *v, int r, kt_op op, int lane) {
  int down = r, up = 2 * v->p - 1 - r;
  if (op == KT_OP_F) return lane ? up : down;
  return lane ? down : up;
}

static double idle_allowed(const vrounds *v, int r) {
  double w = v->worst_idle;
  if (v->approved && v->max_approved - v->approved[r] > w) w = v->max_approved - v->approved[r];
  return w - v->idle[r];
}

static int put(vrounds *v, int r, int st, kt_op op) {
  const kt__search_problem *pb = v->pb;
  size_t slots = 2 * (size_t)v->m;
  if (op == KT_OP_W) st = v->wq[(size_t)r * slots + (size_t)v->wq_head[r]];
  int mb = op == KT_OP_F ? v->nf[st] : op == KT_OP_I ? v->ni[st] : v->nw[st];
  double ready = kt__search_input_ready(pb, v->end, st, op, mb);
  if (isnan(ready) || mb >= v->m) {
    kt_fail(v->err, KT_EINVAL, "the v-shape round-based order needs an input not yet produced");
    return -1;
  }
  double start = fmax(v->e[r], ready);
  if (v->started[r] && (v->idle[r] += start - v->e[r]) > v->worst_idle) v->worst_idle = v->idle[r];
  v->started[r] = 1;
  v->e[r] = start + kt__search_cost(pb, st, op, mb);
  kt__append(v->s, r, st, op, mb);
  kt__search_pair_end *pe = &v->end[KT__PAIR(pb, st, mb)];
  if (op == KT_OP_F) {
    pe->f = v->e[r], v->mem[r] += pb->res[st], v->nf[st]++;
  } else if (op == KT_OP_I) {
    pe->i = v->e[r], v->mem[r] += pb->wg[st] - pb->res[st], v->ni[st]++;
    v->wq[(size_t)r * slots + (size_t)(v->wq_head[r] + v->wq_len[r]) % slots] = st;
    v->wq_len[r]++;
  } else {
    v->mem[r] -= pb->wg[st], v->nw[st]++;
    v->wq_head[r] = (int)((size_t)(v->wq_head[r] + 1) % slots);
    v->wq_len[r]--;
  }
  return 0;
}

static int room(vrounds *v, int r, double need) {
  const kt__search_problem *pb = v->pb;
  while (v->mem[r] + need > pb->limit[r] + EPS * (1 + pb->limit[r])) {
    if (!v->wq_len[r]) {
      kt_fail(v->err, KT_EINVAL, "the budget of rank %d cannot hold the v-shape round order", r);
      return -1;
    }
    if (put(v, r, -1, KT_OP_W)) return -1;
  }
  return 0;
}

/* Step 3 before op on stage st of rank r; `always` takes the extra W. */
static int put_filled(vrounds *v, int r, int st, kt_op op, int always) {
  const kt__search_problem *pb = v->pb;
  if (room(v, r, op == KT_OP_F ? pb->res[st] : 0)) return -1;
  int mb = op == KT_OP_F ? v->nf[st] : v->ni[st];
  int from = op == KT_OP_F ? st - 1 : st + 1; /* the producer's stage */
  int cross =
      from >= 0 && from < pb->S && pb->srank[from] != r && !(op == KT_OP_I && st == pb->S - 1);
  if (cross) {
    double ready = kt__search_input_ready(pb, v->end, st, op, mb);
    if (isnan(ready)) return put(v, r, st, op); /* reports it */
    while (v->wq_len[r] &&
           v->e[r] + pb->tw[v->wq[(size_t)r * 2 * v->m + v->wq_head[r]]] <= ready + EPS)
      if (put(v, r, -1, KT_OP_W)) return -1;
    if (v->wq_len[r] && ready - v->e[r] > idle_allowed(v, r) + EPS && always)
      if (put(v, r, -1, KT_OP_W)) return -1;
  }
  return put(v, r, st, op);
}

static int placed_f(const vrounds *v, int st, int mb) {
  return mb < v->m && !isnan(v->end[KT__PAIR(v->pb, st, mb)].f);
}

static int placed_i(const vrounds *v, int st, int mb) {
  return mb < v->m && !isnan(v->end[KT__PAIR(v->pb, st, mb)].i);
}

static int warm_up(vrounds *v) {
  const kt__search_problem *pb = v->pb;
  int p = v->p;
  for (int r = 0; r < p; r++)
    if (put(v, r, r, KT_OP_F)) return -1;
  for (int r = p - 1; r >= 0; r--) {
    int up = 2 * p - 1 - r;
    if (r < p - 1) {
      double arrive = v->end[KT__PAIR(pb, up - 1, 0)].f + pb->hop[up - 1];
      while (v->mem[r] + pb->res[r] * (2 + 2 * r) <= pb->limit[r] + EPS * (1 + pb->limit[r]) &&
             v->e[r] + pb->tf[r] <= arrive + EPS && v->nf[r] < v->m)
        for (int q = 0; q <= r; q++)
          if (put(v, q, q, KT_OP_F)) return -1;
    }
    if (put(v, r, up, KT_OP_F)) return -1;
  }
  int lane = 0;
  for (int r = 1; r < p; r++) {
    int up = 2 * p - 1 - r, up_above = up + 1;
    for (int guard = 0;
         guard < 4 * v->m && (v->nf[r] + v->nf[up] < v->nf[r - 1] + v->nf[up_above] ||
                              (v->nf[up] <= v->nf[up_above] && v->nf[up_above] < v->m));
         guard++) {
      for (int q = p - 1; q >= r; q--) {
        int st = lane_stage(v, q, KT_OP_F, lane);
        if (v->nf[st] < v->m && room(v, q, pb->res[st])) return -1;
        if (v->nf[st] < v->m && put(v, q, st, KT_OP_F)) return -1;
      }
      lane = 1 - lane;
    }
  }
  return 0;
}

/* One round's I on every rank (step 2). */
static int round_i(vrounds *v, int *lane) {
  int p = v->p;
  for (int r = 0; r < p; r++) {
    int down = r, up = 2 * p - 1 - r;
    if (v->ni[down] >= v->ni[up]) lane[r] = 0;
    else if (r == p - 1) lane[r] = 1;
    else lane[r] = placed_i(v, down + 1, v->ni[down]) || v->ni[up] >= v->m;
  }
  for (int pass = 0; pass < 2; pass++)
    for (int k = 0; k < p; k++) {
      int r = pass == 0 ? p - 1 - k : k; /* lane 1 bottom up, then lane 0 top down */
      if (lane[r] != 1 - pass) continue;
      int st = lane_stage(v, r, KT_OP_I, lane[r]);
      if (v->ni[st] >= v->m) continue;
      int always = lane[r] == 1 || (v->flags & KT__VROUND_FILL_I);
      if (put_filled(v, r, st, KT_OP_I, always)) return -1;
    }
  return 0;
}

static int round_f(vrounds *v) {
  int p = v->p;
  for (int r = 0; r < p; r++) {
    int down = r, up = 2 * p - 1 - r, st = -1;
    if (v->nf[up] >= v->m) continue;
    if (v->nf[up] >= v->nf[down]) st = down;
    else if (r == p - 1) st = up;
    else if (placed_f(v, up - 1, v->nf[up])) st = up;
    else if (v->nf[down] < v->m && (r == 0 || placed_f(v, down - 1, v->nf[down]))) st = down;
    if (st < 0 || v->nf[st] >= v->m) continue;
    if (put_filled(v, r, st, KT_OP_F, (v->flags & KT__VROUND_FILL_F) != 0)) return -1;
  }
  return 0;
}

/* One run; the largest idle, or -1. */
static double run(vrounds *v, int *lane) {
  const kt__search_problem *pb = v->pb;
  int p = v->p;
  size_t cells = (size_t)pb->S * (size_t)v->m;
  for (size_t k = 0; k < cells; k++) v->end[k] = (kt__search_pair_end){NAN, NAN};
  for (int st = 0; st < pb->S; st++) v->nf[st] = v->ni[st] = v->nw[st] = 0;
  for (int r = 0; r < p; r++) {
    v->wq_head[r] = v->wq_len[r] = v->started[r] = 0;
    v->e[r] = v->mem[r] = v->idle[r] = 0;
    v->s->ranks[r].n = 0;
  }
  v->worst_idle = 0;
  if (warm_up(v)) return -1;
  for (int round = 0; round < 2 * v->m; round++) {
    for (int r = 0; r < p; r++)
      if (room(v, r, 0)) return -1;
    if (round_i(v, lane) || round_f(v)) return -1;
  }
  for (int r = 0; r < p; r++)
    while (v->wq_len[r])
      if (put(v, r, -1, KT_OP_W)) return -1;
  double worst = 0;
  for (int r = 0; r < p; r++) {
    if (v->s->ranks[r].n != 6 * (size_t)v->m) {
      kt_fail(v->err, KT_EINVAL, "the v-shape round order left rank %d incomplete", r);
      return -1;
    }
    worst = fmax(worst, v->idle[r]);
  }
  return worst;
}

/* The run's per-stage and per-rank arrays; 0, or -1 when out of memory
 * (vrounds_free frees what was allocated either way). */
static int vrounds_alloc(vrounds *v) {
  size_t S = (size_t)v->pb->S, p = (size_t)v->p, cells = S * (size_t)v->m;
  v->nf = kt_calloc(S, sizeof *v->nf);
  v->ni = kt_calloc(S, sizeof *v->ni);
  v->nw = kt_calloc(S, sizeof *v->nw);
  v->wq = kt_calloc(cells, sizeof *v->wq);
  v->wq_head = kt_calloc(p, sizeof *v->wq_head);
  v->wq_len = kt_calloc(p, sizeof *v->wq_len);
  v->e = kt_calloc(p, sizeof *v->e);
  v->mem = kt_calloc(p, sizeof *v->mem);
  v->idle = kt_calloc(p, sizeof *v->idle);
  v->started = kt_calloc(p, sizeof *v->started);
  v->end = malloc(cells * sizeof *v->end);
  int ok = v->nf && v->ni && v->nw && v->wq && v->wq_head && v->wq_len && v->e && v->mem &&
           v->idle && v->started && v->end;
  return ok ? 0 : -1;
}

static void vrounds_free(vrounds *v) {
  free(v->nf);
  free(v->ni);
  free(v->nw);
  free(v->wq);
  free(v->wq_head);
  free(v->wq_len);
  free(v->e);
  free(v->mem);
  free(v->idle);
  free(v->started);
  free(v->end);
}

int kt__search_v_rounds_build(const kt__search_problem *pb, int flags, kt_schedule *s,
                              kt_error *err) {
  int p = pb->p, m = pb->m;
  vrounds v = {.pb = pb, .s = s, .flags = flags, .p = p, .m = m, .err = err};
  int alloc_failed = vrounds_alloc(&v);
  double *best_idle = kt_calloc((size_t)p, sizeof *best_idle);
  int *lane = kt_calloc((size_t)p, sizeof *lane), rc = -1;
  kt_schedule keep = {0};
  if (alloc_failed || !best_idle || !lane) {
    kt_fail(err, KT_ENOMEM, "out of memory building zbv-auto (P=%d, M=%d)", p, m);
    goto done;
  }
  if (pb->v != 2 || pb->srank[pb->S - 1] != 0) {
    kt_fail(err, KT_EINVAL, "the v-shape round-based builder needs v placement");
    goto done;
  }
  if (kt__search_reserve(s, err) || kt_schedule_init_like(&keep, s, m, err) ||
      kt__search_reserve(&keep, err))
    goto done;
  double best = -1;
  for (int tries = 0; tries < 8; tries++) {
    double worst = run(&v, lane);
    if (worst < 0 || (best >= 0 && worst >= best - EPS)) break;
    best = worst;
    kt_schedule_swap_lists(&keep, s); /* keep this order and its idle */
    for (int r = 0; r < p; r++) best_idle[r] = v.idle[r];
    v.approved = best_idle;
    v.max_approved = 0;
    for (int r = 0; r < p; r++) v.max_approved = fmax(v.max_approved, best_idle[r]);
  }
  if (best >= 0) {
    kt_schedule_swap_lists(&keep, s); /* the best order back into s */
    rc = 0;
  }
done:
  if (keep.ranks) kt_schedule_free(&keep);
  vrounds_free(&v);
  free(best_idle);
  free(lane);
  return rc;
}
