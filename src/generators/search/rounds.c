/* The round-based builder (one chunk per rank), after the heuristic of Qi et
 * al. (ICLR 2024, sec. 3.1): warm-up forwards from timing, then rounds of
 * one forward per stage (top down) and one I per stage (bottom up), with
 * W filling the gaps and balancing the idle time between stages.
 *
 * 1. Warm-up: every stage runs forward 0; then, from the last stage up,
 *    stage j runs as many forwards as fit its budget and end before the
 *    first I can reach it (FILL_PAST: may start before it, and end after),
 *    plus depth_delta[j]; every stage keeps fewer than the stage above, so
 *    its inputs exist. Then I 0 on every stage, bottom up.
 * 2. Round i: each stage runs one forward (SKIP_F: a stage two or more
 *    forwards ahead of the next skips it when the next stage's F and I
 *    would end before it could use the slot, or when the wait fits the idle
 *    it may still take), then I i bottom up.
 * 3. Before a forward or an I, W's run while the budget needs room, then
 *    while a W ends before the input arrives; a remaining gap shorter than
 *    a W takes one more W when it would push this stage's idle past the
 *    largest any stage has so far (GREEDY_W: also when it would not).
 * 4. The remaining W's close each stage.
 *
 * The time of each action is computed as it is placed (the simulator's
 * semantics), so the result is exact; the orders are checked against the
 * budget by construction (W's run first when it needs room). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "generators/search/search.h"

typedef struct {
  const kt__search_problem *pb;
  kt_schedule *s;
  int flags;
  int *f, *b, *w;         /* per stage: forwards, I's, W's placed */
  double *e, *mem, *idle; /* per stage: free time, memory, idle after its first op */
  double worst_idle;
  kt__search_pair_end *end;
  kt_error *err;
} rounds;

#define EPS 1e-9

static int put(rounds *rd, int j, kt_op op) {
  const kt__search_problem *pb = rd->pb;
  int mb = op == KT_OP_F ? rd->f[j] : op == KT_OP_I ? rd->b[j] : rd->w[j];
  double ready = kt__search_input_ready(pb, rd->end, j, op, mb);
  if (isnan(ready)) { /* its producer is not placed: this order cannot be built */
    kt_fail(rd->err, KT_EINVAL, "the round-based order needs an input not yet produced");
    return -1;
  }
  double start = rd->e[j] > ready ? rd->e[j] : ready;
  if (rd->f[j] > 0) {
    rd->idle[j] += start - rd->e[j];
    if (rd->idle[j] > rd->worst_idle) rd->worst_idle = rd->idle[j];
  }
  rd->e[j] = start + kt__search_cost(pb, j, op, mb);
  kt__append(rd->s, j, j, op, mb);
  kt__search_pair_end *pe = &rd->end[KT__PAIR(pb, j, mb)];
  if (op == KT_OP_F) pe->f = rd->e[j], rd->mem[j] += pb->res[j], rd->f[j]++;
  else if (op == KT_OP_I) pe->i = rd->e[j], rd->mem[j] += pb->wg[j] - pb->res[j], rd->b[j]++;
  else rd->mem[j] -= pb->wg[j], rd->w[j]++;
  return 0;
}

/* W's until need more fits the budget; -1 when it cannot. */
static int make_room(rounds *rd, int j, double need) {
  const kt__search_problem *pb = rd->pb;
  while (rd->mem[j] + need > pb->limit[j] + EPS * (1 + pb->limit[j])) {
    if (rd->w[j] >= rd->b[j]) {
      kt_fail(rd->err, KT_EINVAL, "the budget of rank %d cannot hold the round-based order", j);
      return -1;
    }
    if (put(rd, j, KT_OP_W)) return -1;
  }
  return 0;
}

/* W's in the gap before an input arriving at `ready` (step 3 above). */
static int fill_gap(rounds *rd, int j, double ready) {
  const kt__search_problem *pb = rd->pb;
  while (rd->w[j] < rd->b[j] && rd->e[j] + pb->tw[j] <= ready + EPS)
    if (put(rd, j, KT_OP_W)) return -1;
  if (rd->w[j] < rd->b[j] && rd->e[j] < ready - EPS) {
    int affordable = ready - rd->e[j] <= rd->worst_idle - rd->idle[j] + EPS;
    if (!affordable || (rd->flags & KT__ROUND_GREEDY_W))
      if (put(rd, j, KT_OP_W)) return -1;
  }
  return 0;
}

static int put_filled(rounds *rd, int j, kt_op op) {
  const kt__search_problem *pb = rd->pb;
  if (make_room(rd, j, op == KT_OP_F ? pb->res[j] : 0)) return -1;
  int mb = op == KT_OP_F ? rd->f[j] : rd->b[j];
  if ((op == KT_OP_F && j > 0) || (op == KT_OP_I && j < pb->S - 1))
    if (fill_gap(rd, j, kt__search_input_ready(pb, rd->end, j, op, mb))) return -1;
  if (op == KT_OP_I && j == 0 && rd->f[0] == pb->m) /* stage 0's I feeds nothing */
    while (rd->w[0] < rd->b[0])
      if (put(rd, 0, KT_OP_W)) return -1;
  return put(rd, j, op);
}

/* Step 1: the warm-up forwards of every stage and I 0. */
static int warm_up(rounds *rd, const int *delta, int *req) {
  const kt__search_problem *pb = rd->pb;
  int S = pb->S, m = pb->m;
  for (int j = 0; j < S; j++)
    if (put(rd, j, KT_OP_F)) return -1;
  double last = 0;
  for (int j = S - 1; j >= 0; j--) {
    req[j] = 0;
    if (j == S - 1) {
      last = rd->end[KT__PAIR(pb, j, 0)].f + pb->tb[j];
      continue;
    }
    double mem = rd->mem[j], t = rd->e[j], arrive = last + pb->hop[j];
    while (rd->f[j] + req[j] < m && mem + pb->res[j] <= pb->limit[j] + EPS * (1 + pb->limit[j])) {
      if ((rd->flags & KT__ROUND_FILL_PAST) ? t + pb->tf[j] > arrive + EPS : t >= arrive - EPS)
        break;
      mem += pb->res[j], t += pb->tf[j], req[j]++;
    }
    if (delta) {
      int room = kt_to_int(floor((pb->limit[j] - rd->mem[j]) / pb->res[j] + EPS), -1, m);
      req[j] += delta[j];
      if (req[j] > room) req[j] = room;
      if (req[j] > m - rd->f[j]) req[j] = m - rd->f[j];
      if (req[j] < 0) req[j] = 0;
    }
    last = (t > arrive ? t : arrive) + pb->tb[j];
  }
  for (int j = 1; j < S;
       j++) { /* fewer than the stage above (unless both finish), so every input exists */
    int above = rd->f[j - 1] + req[j - 1], cap = above - rd->f[j] - (above < m);
    if (req[j] > cap) req[j] = cap > 0 ? cap : 0;
  }
  for (int j = 0; j < S; j++)
    for (int k = 0; k < req[j]; k++)
      if (put(rd, j, KT_OP_F)) return -1;
  for (int j = S - 1; j >= 0; j--)
    if (put_filled(rd, j, KT_OP_I)) return -1;
  return 0;
}

/* SKIP_F: whether stage j (two or more forwards ahead of j+1) leaves this
 * round's forward out. */
static int skips(const rounds *rd, int j) {
  const kt__search_problem *pb = rd->pb;
  double next = rd->e[j + 1] + pb->tf[j + 1] + pb->tb[j + 1] + pb->hop[j];
  if (rd->e[j] >= next) return 1;
  double mem = rd->mem[j] + pb->res[j], extra = 0;
  for (int k = rd->w[j]; mem > pb->limit[j] + EPS * (1 + pb->limit[j]) && k < rd->b[j]; k++)
    extra += pb->tw[j], mem -= pb->wg[j];
  if (rd->e[j] + pb->tf[j] + extra <= next + EPS) return 0;
  return next - rd->e[j] <= rd->worst_idle - rd->idle[j] + EPS;
}

static int run_rounds(rounds *rd, int *want) {
  const kt__search_problem *pb = rd->pb;
  int S = pb->S, m = pb->m;
  for (int i = 1; i < m; i++) {
    for (int j = 0; j < S; j++) {
      want[j] = rd->f[j] < m;
      if (want[j] && (rd->flags & KT__ROUND_SKIP_F) && j + 1 < S && rd->f[j] >= rd->f[j + 1] + 2)
        want[j] = !skips(rd, j);
    }
    for (int j = S - 2; j >= 0; j--)
      if (want[j + 1] < want[j]) want[j] = want[j + 1];
    for (int j = 0; j < S; j++)
      if (want[j] && put_filled(rd, j, KT_OP_F)) return -1;
    for (int j = S - 1; j >= 0; j--)
      if (put_filled(rd, j, KT_OP_I)) return -1;
  }
  for (int j = 0; j < S; j++)
    while (rd->w[j] < m)
      if (put(rd, j, KT_OP_W)) return -1;
  return 0;
}

double kt__search_rounds_build(const kt__search_problem *pb, int flags, const int *depth_delta,
                               kt_schedule *s, kt_error *err) {
  int S = pb->S;
  rounds rd = {.pb = pb, .s = s, .flags = flags, .err = err};
  size_t cells = (size_t)S * (size_t)pb->m;
  rd.f = kt_calloc((size_t)S, sizeof *rd.f);
  rd.b = kt_calloc((size_t)S, sizeof *rd.b);
  rd.w = kt_calloc((size_t)S, sizeof *rd.w);
  rd.e = kt_calloc((size_t)S, sizeof *rd.e);
  rd.mem = kt_calloc((size_t)S, sizeof *rd.mem);
  rd.idle = kt_calloc((size_t)S, sizeof *rd.idle);
  rd.end = malloc(cells * sizeof *rd.end);
  int *scratch = kt_calloc((size_t)S, sizeof *scratch);
  double *first = kt_calloc((size_t)S, sizeof *first); /* each rank's first start */
  double makespan = -1;
  if (!rd.f || !rd.b || !rd.w || !rd.e || !rd.mem || !rd.idle || !rd.end || !scratch || !first) {
    kt_fail(err, KT_ENOMEM, "out of memory building zb-auto (P=%d, M=%d)", pb->p, pb->m);
    goto done;
  }
  if (pb->v != 1) {
    kt_fail(err, KT_EINVAL, "the round-based builder runs one chunk per rank");
    goto done;
  }
  for (size_t k = 0; k < cells; k++) rd.end[k] = (kt__search_pair_end){NAN, NAN};
  for (int r = 0; r < S; r++) s->ranks[r].n = 0;
  if (kt__search_reserve(s, err)) goto done;
  if (warm_up(&rd, depth_delta, scratch) || run_rounds(&rd, scratch)) goto done;
  for (int j = 0; j < S; j++) first[j] = rd.end[KT__PAIR(pb, j, 0)].f - pb->tf[j];
  makespan = kt_step_model_period(&pb->step, first, rd.e, NULL);
done:
  free(rd.f);
  free(rd.b);
  free(rd.w);
  free(rd.e);
  free(rd.mem);
  free(rd.idle);
  free(rd.end);
  free(scratch);
  free(first);
  return makespan;
}
