/* The lower bound every sim, compare and page states for an order: the
 * analytic bound on its layout within the memory its order was searched
 * under (or its own peak), raised to what its generation proved (zb-auto's
 * exact step), and the analytic bound itself (kt__lower_bound: one sweep
 * of the exact search's bound from the empty state). Nothing here
 * searches: a search's bound comes with the generation that ran it
 * (kt_gen_outcome), or from kt_gen_lower_bound for a caller that asks for
 * one. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "generators/optimal_internal.h"
#include "kaiten/generators.h"

/* Micro-batches of their own costs: the bound of the costs every
 * micro-batch at least has (kt_costs_least: shorter ops and smaller
 * activations only let an order end sooner), raised to the busiest rank's
 * own work (its F and backward of every micro-batch, as given). */
static kt_status mb_lower_bound(const kt_schedule *layout, const kt_costs *c, double mem_limit,
                                double *lb, kt_error *err) {
  kt_costs least;
  kt_status st = kt_costs_least(c, &least, err);
  if (st) return st;
  /* the default limit from the micro-batches' own memory, not the least */
  kt_gen_params lp = {
      .p = layout->p, .v = layout->v, .m = layout->m, .costs = c, .mem_limit = mem_limit};
  st = kt__lower_bound(layout, &least, kt_gen_mem_limit(&lp), 0, lb, err);
  kt_costs_free(&least);
  if (st) return st;
  int S = kt_schedule_stages(layout);
  for (int r = 0; r < layout->p; r++) {
    double work = 0;
    for (int s = 0; s < S; s++)
      for (int j = 0; kt_stage_rank(layout, s) == r && j < layout->m; j++)
        work += kt_cost_tf_mb(c, s, j) + kt_cost_tb_mb(c, s, j) + kt_cost_tw_mb(c, s, j) +
                2 * c->op_overhead;
    *lb = fmax(*lb, work);
  }
  return KT_OK;
}

kt_status kt__lower_bound(const kt_schedule *layout, const kt_costs *c, double mem_limit, int needs,
                          double *lb, kt_error *err) {
  kt_costs unit;
  if (!c) kt_costs_default(&unit), c = &unit;
  kt_status st = kt_costs_check(c, kt_schedule_stages(layout), err);
  if (st) return st;
  if (kt_costs_mb_differ(c)) return mb_lower_bound(layout, c, mem_limit, lb, err);
  kt__opt_problem pb;
  kt__opt_state state;
  kt__opt_bound_ws ws;
  kt_costs plain = *c;
  plain.links = NULL; /* shared links only lengthen a hop: 0 is a hop's least */
  if (c->links) plain.comm = 0, plain.comm_bandwidth = 0;
  if ((st = kt__opt_problem_init(&pb, layout, &plain, mem_limit, needs, err))) return st;
  /* a large layout's sweep keeps the slots its memory rules reach back
   * (1F1B P=1024 M=16384: 2048 of 16384), and every slot again in the rare
   * case a rule reached further */
  size_t window = kt__opt_root_window(&pb);
  if (!(st = kt__opt_state_init(&state, &pb, err))) {
    st = window ? kt__opt_bound_ws_window(&ws, &pb, window, pb.srank[0], err)
                : kt__opt_bound_ws_init(&ws, &pb, err);
    if (!st) *lb = kt__opt_bound(&pb, &state, NULL, &ws); /* nothing run yet */
    if (!st && ws.window_short) {
      kt__opt_bound_ws_free(&ws);
      if (!(st = kt__opt_bound_ws_init(&ws, &pb, err))) *lb = kt__opt_bound(&pb, &state, NULL, &ws);
    }
    if (!st) {
      if (isinf(*lb))
        st = kt_fail(err, KT_EMEMLIMIT,
                     "memory limit %g: no order of P=%d, V=%d, M=%d fits under it", pb.limit, pb.p,
                     pb.v, pb.m);
      kt__opt_bound_ws_free(&ws);
    }
    kt__opt_state_free(&state);
  }
  kt__opt_problem_free(&pb);
  return st;
}

/* What an action of s adds to its rank's memory under the stage costs c:
 * looked up per stage and op once when no micro-batch has its own memory
 * (the walk below goes through every action: 33.5 M at 1F1B P=1024
 * M=16384). */
typedef struct {
  const kt_costs *c;
  int S;
  double *delta; /* stage * KT_OP_COUNT + op -> kt_action_memory, or NULL */
} memory_of;

static void memory_of_init(memory_of *mo, const kt_schedule *s, const kt_costs *c) {
  mo->c = c, mo->S = kt_schedule_stages(s), mo->delta = NULL;
  if (kt_costs_per_mb(c) || mo->S < 1) return;
  mo->delta = malloc((size_t)mo->S * KT_OP_COUNT * sizeof *mo->delta);
  if (!mo->delta) return; /* (each action looks its stage up) */
  for (int st = 0; st < mo->S; st++)
    for (int op = 0; op < KT_OP_COUNT; op++)
      mo->delta[st * KT_OP_COUNT + op] =
          kt_action_memory(op, kt_cost_mem_act(c, st), kt_cost_mem_wgrad(c, st));
}

/* (a compute action's, where the table has no entry for it) */
static double memory_delta_mb(const memory_of *mo, const kt_action *a) {
  return kt_action_memory(a->op, kt_cost_mem_act_mb(mo->c, a->stage, a->mb),
                          kt_cost_mem_wgrad_mb(mo->c, a->stage, a->mb));
}

/* The peak of the memory prefix sums of s's compute actions under the stage
 * costs c (what zb-auto's limit counts); *has_b: s runs a full backward. */
static double order_peak(const kt_schedule *s, const kt_costs *c, int *has_b, int *overlapped) {
  double top = 0;
  int b = 0, over = 0;
  memory_of mo;
  memory_of_init(&mo, s, c);
  const double *delta = mo.delta;
  unsigned S = delta ? (unsigned)mo.S : 0; /* no table: every action its own lookup */
  for (int r = 0; r < s->p; r++) {
    double mem = 0;
    const kt_action *a = s->ranks[r].actions, *end = a + s->ranks[r].n;
    for (; a < end; a++) {
      if (a->op >= KT_OP_COUNT) continue;
      b |= a->op == KT_OP_B;
      over |= a->flags & KT_ACTION_OVERLAP_NEXT;
      mem +=
          (unsigned)a->stage < S ? delta[a->stage * KT_OP_COUNT + a->op] : memory_delta_mb(&mo, a);
      top = mem > top ? mem : top;
    }
  }
  free(mo.delta);
  *has_b = b, *overlapped = over != 0;
  return top;
}

/* Some stage's I holds more than its F (M_W > M_B). */
static int wgrad_above_act(const kt_schedule *s, const kt_costs *c) {
  for (int st = 0; st < kt_schedule_stages(s); st++)
    if (kt_cost_mem_wgrad(c, st) > kt_cost_mem_act(c, st)) return 1;
  return 0;
}

void kt_gen_bound_of(const kt_schedule *s, const kt_costs *c, double limit, double period,
                     const kt_gen_outcome *outcome, kt_gen_bound *out) {
  memset(out, 0, sizeof *out);
  int has_b, overlapped;
  double peak = order_peak(s, c, &has_b, &overlapped);
  if (overlapped && c->overlap > 0) {
    out->why = "--overlap makes an overlapped F&B cell shorter than its two ops";
    return;
  }
  /* a full B frees all at once: with M_W > M_B its split I then W holds
   * more, so the bound counts no memory limit */
  if (has_b && wgrad_above_act(s, c)) limit = INFINITY;
  if (!(limit > 0)) limit = peak > 0 ? peak : INFINITY;
  double lb;
  kt_error err;
  if (kt__lower_bound(s, c, limit, 1, &lb, &err)) {
    out->why = "no bound for this layout and memory";
    return;
  }
  out->has = 1, out->value = lb, out->memory = limit, out->from = "analytic";
  if (outcome && outcome->lower_bound > lb * (1 + 1e-12))
    out->value = outcome->lower_bound, out->from = "search";
  out->exact = outcome && outcome->proven;
  kt_gen_bound_meets(out, period);
}

void kt_gen_bound_meets(kt_gen_bound *b, double period) {
  if (b->has && fabs(b->value - period) <= 1e-9 * (1 + period)) b->exact = 1;
}
