/* The searched schedules' shared ground: a cost table flattened per stage,
 * per-rank memory budgets, and a fast evaluation of an order with the
 * simulator's semantics (kt_simulate builds a whole timeline; a search
 * only needs the makespan, many times). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "generators/search/search.h"
#include "kaiten/sim.h"

/* Each micro-batch's own costs (pb->mtf ...) where they differ. */
static kt_status per_mb_init(kt__search_problem *pb, const kt_costs *c, kt_error *err) {
  if (!kt_costs_mb_differ(c)) return KT_OK;
  size_t cells = (size_t)pb->S * (size_t)pb->m;
  double **arrays[] = {&pb->mtf, &pb->mtb, &pb->mtw, &pb->mact, &pb->mwg};
  for (size_t k = 0; k < sizeof arrays / sizeof *arrays; k++)
    if (!(*arrays[k] = malloc(cells * sizeof(double))))
      return kt_fail(err, KT_ENOMEM, "out of memory for per-micro-batch costs");
  double o = c->op_overhead;
  for (int st = 0; st < pb->S; st++)
    for (int j = 0; j < pb->m; j++) {
      size_t x = KT__PAIR(pb, st, j);
      pb->mtf[x] = kt_cost_tf_mb(c, st, j) + o, pb->mtb[x] = kt_cost_tb_mb(c, st, j) + o;
      pb->mtw[x] = kt_cost_tw_mb(c, st, j) + o;
      pb->mact[x] = kt_cost_mem_act_mb(c, st, j), pb->mwg[x] = kt_cost_mem_wgrad_mb(c, st, j);
    }
  return KT_OK;
}

kt_status kt__search_problem_init(kt__search_problem *pb, const kt_schedule *s, const kt_costs *c,
                                  double limit, kt_error *err) {
  kt_costs unit;
  if (!c) {
    kt_costs_default(&unit);
    c = &unit;
  }
  memset(pb, 0, sizeof *pb);
  int S = kt_schedule_stages(s), p = s->p;
  pb->p = p, pb->v = s->v, pb->m = s->m, pb->S = S;
  pb->comm = kt_cost_comm(c);
  pb->srank = kt_calloc((size_t)S, sizeof *pb->srank);
  pb->schunk = kt_calloc((size_t)S, sizeof *pb->schunk);
  pb->rstage = kt_calloc((size_t)S, sizeof *pb->rstage);
  double **per_stage[] = {&pb->tf, &pb->tb, &pb->tw, &pb->act, &pb->wg, &pb->res};
  for (size_t k = 0; k < sizeof per_stage / sizeof *per_stage; k++)
    *per_stage[k] = kt_calloc((size_t)S, sizeof(double));
  pb->hop = kt_calloc((size_t)S, sizeof *pb->hop);
  pb->head = kt_calloc((size_t)p, sizeof *pb->head);
  pb->limit = kt_calloc((size_t)p, sizeof *pb->limit);
  if (!pb->srank || !pb->schunk || !pb->rstage || !pb->tf || !pb->tb || !pb->tw || !pb->act ||
      !pb->wg || !pb->res || !pb->head || !pb->limit || !pb->hop) {
    kt__search_problem_free(pb);
    return kt_fail(err, KT_ENOMEM, "out of memory for a cost table of %d stages", S);
  }
  double most = 0;
  for (int st = 0; st < S; st++) {
    pb->srank[st] = kt_stage_rank(s, st);
    pb->schunk[st] = kt_stage_chunk(s, st);
    pb->rstage[pb->srank[st] * s->v + pb->schunk[st]] = st;
    /* a per-action overhead searches as part of F, I and W (a B's second
     * share makes its estimate high; kt_gen_span then leaves the fast
     * path, so spans stay exact) */
    double o = c->op_overhead;
    pb->tf[st] = kt_cost_tf(c, st) + o, pb->tb[st] = kt_cost_tb(c, st) + o;
    pb->tw[st] = kt_cost_tw(c, st) + o;
    pb->act[st] = kt_cost_mem_act(c, st), pb->wg[st] = kt_cost_mem_wgrad(c, st);
    pb->res[st] = fmax(pb->act[st], pb->wg[st]);
    most = fmax(most, pb->res[st]);
  }
  for (int st = 0; st + 1 < S; st++)
    pb->hop[st] = kt_cost_link(c, pb->srank[st], pb->srank[st + 1]);
  for (int r = 0; r < p; r++) {
    for (int ch = 1; ch < s->v; ch++) /* V = 2: room for one; V >= 3: the whole rest */
      pb->head[r] = s->v == 2 ? fmax(pb->head[r], pb->res[pb->rstage[r * s->v + ch]])
                              : pb->head[r] + pb->res[pb->rstage[r * s->v + ch]];
    pb->limit[r] = limit > 0 ? limit : (double)p * s->v * most;
  }
  kt_status st = per_mb_init(pb, c, err);
  if (!st) st = kt_step_model_init(&pb->step, s, c, err);
  if (st) kt__search_problem_free(pb);
  return st;
}

void kt__search_problem_free(kt__search_problem *pb) {
  free(pb->srank);
  free(pb->schunk);
  free(pb->rstage);
  free(pb->tf);
  free(pb->tb);
  free(pb->tw);
  free(pb->act);
  free(pb->wg);
  free(pb->res);
  free(pb->mtf), free(pb->mtb), free(pb->mtw), free(pb->mact), free(pb->mwg);
  free(pb->head);
  free(pb->limit);
  free(pb->hop);
  kt_step_model_free(&pb->step);
  memset(pb, 0, sizeof *pb);
}

double kt__search_min_limit(const kt__search_problem *pb, int *rank) {
  double need = 0;
  int at = 0;
  for (int r = 0; r < pb->p; r++) {
    double n = pb->res[pb->rstage[r * pb->v]] + pb->head[r];
    if (n > need) need = n, at = r;
  }
  if (rank) *rank = at;
  return need;
}

kt_status kt__search_reserve(kt_schedule *s, kt_error *err) {
  return kt__reserve_actions(s, 3 * (size_t)s->v * (size_t)s->m, err);
}

kt_status kt__search_eval_init(kt__search_eval *ev, const kt__search_problem *pb, kt_error *err) {
  memset(ev, 0, sizeof *ev);
  size_t p = (size_t)pb->p;
  ev->end = malloc((size_t)pb->S * (size_t)pb->m * sizeof *ev->end);
  ev->start = kt_calloc(p, sizeof *ev->start);
  ev->stop = kt_calloc(p, sizeof *ev->stop);
  ev->free_at = kt_calloc(p, sizeof *ev->free_at);
  ev->pos = kt_calloc(p, sizeof *ev->pos);
  int queue_failed = kt_rank_queue_init(&ev->work, pb->p);
  ev->cutoff = INFINITY;
  if (!ev->end || !ev->start || !ev->stop || !ev->free_at || !ev->pos || queue_failed) {
    kt__search_eval_free(ev);
    return kt_fail(err, KT_ENOMEM, "out of memory evaluating schedules (P=%d, M=%d)", pb->p, pb->m);
  }
  return KT_OK;
}

void kt__search_eval_free(kt__search_eval *ev) {
  free(ev->end);
  free(ev->start);
  free(ev->stop);
  free(ev->free_at);
  free(ev->pos);
  kt_rank_queue_free(&ev->work);
  memset(ev, 0, sizeof *ev);
}

/* Runs rank r's actions while their inputs are known, waking each rank a
 * result is for (its next action may have become ready). */
static void advance(const kt__search_problem *pb, kt__search_eval *ev, const kt_schedule *s,
                    int r) {
  const kt_rank_actions *ra = &s->ranks[r];
  while (ev->pos[r] < ra->n) {
    const kt_action *a = &ra->actions[ev->pos[r]];
    kt_op op = a->op == KT_OP_B ? KT_OP_I : (kt_op)a->op;
    double ready = kt__search_input_ready(pb, ev->end, a->stage, op, a->mb);
    if (isnan(ready)) return;
    double start = ready > ev->free_at[r] ? ready : ev->free_at[r];
    double end = start + kt__search_cost(pb, a->stage, (kt_op)a->op, a->mb);
    kt__search_pair_end *pe = &ev->end[KT__PAIR(pb, a->stage, a->mb)];
    if (op == KT_OP_F) pe->f = end;
    else if (op == KT_OP_I) pe->i = end;
    int to = op == KT_OP_W
                 ? -1
                 : kt_output_consumer(op == KT_OP_F ? KT_OUT_F : KT_OUT_BI, a->stage, pb->S);
    int consumer = to >= 0 ? pb->srank[to] : -1;
    if (ev->pos[r] == 0) ev->start[r] = start;
    if (ev->at) ev->at[r][ev->pos[r]] = start;
    ev->free_at[r] = ev->stop[r] = end;
    ev->pos[r]++;
    if (end - ev->start[r] > ev->cutoff) return; /* the caller stops (kt__search_evaluate) */
    if (consumer != r) kt_rank_queue_wake(&ev->work, consumer);
  }
}

double kt__search_evaluate(const kt__search_problem *pb, kt__search_eval *ev,
                           const kt_schedule *s) {
  size_t cells = (size_t)pb->S * (size_t)pb->m;
  for (size_t k = 0; k < cells; k++) ev->end[k] = (kt__search_pair_end){NAN, NAN};
  int p = pb->p;
  for (int r = 0; r < p; r++) ev->pos[r] = 0, ev->free_at[r] = 0, ev->start[r] = ev->stop[r] = 0;
  kt_rank_queue_fill(&ev->work); /* also when the last call stopped early */
  for (int r; (r = kt_rank_queue_next(&ev->work)) >= 0;) {
    advance(pb, ev, s, r);
    if (ev->pos[r] > 0 && kt__search_rank_cost(pb, ev->start[r], ev->stop[r], r) > ev->cutoff)
      return INFINITY;
  }
  for (int r = 0; r < p; r++)
    if (ev->pos[r] < s->ranks[r].n) return -1;
  return kt_step_model_period(&pb->step, ev->start, ev->stop, NULL);
}

void kt__search_move(kt_action *a, size_t from, size_t to) {
  kt_action x = a[from];
  if (from > to) memmove(a + to + 1, a + to, (from - to) * sizeof *a);
  else memmove(a + from, a + from + 1, (to - from) * sizeof *a);
  a[to] = x;
}

/* The highest memory prefix sum of rank r's list; stops early (returning
 * it) once it passes stop. */
static double rank_peak(const kt__search_problem *pb, const kt_rank_actions *ra, double stop) {
  double mem = 0, high = 0;
  for (size_t i = 0; i < ra->n && high <= stop; i++) {
    const kt_action *a = &ra->actions[i];
    mem += pb->mact ? kt_action_memory(a->op, pb->mact[KT__PAIR(pb, a->stage, a->mb)],
                                       pb->mwg[KT__PAIR(pb, a->stage, a->mb)])
                    : kt_action_memory(a->op, pb->act[a->stage], pb->wg[a->stage]);
    if (mem > high) high = mem;
  }
  return high;
}

static double budget(const kt__search_problem *pb, int r) { return kt_tolerance(pb->limit[r]); }

int kt__search_rank_fits(const kt__search_problem *pb, const kt_rank_actions *ra, int r) {
  return rank_peak(pb, ra, budget(pb, r)) <= budget(pb, r);
}

int kt__search_fits(const kt__search_problem *pb, const kt_schedule *s, double *peak) {
  int ok = 1;
  double top = 0;
  for (int r = 0; r < s->p; r++) {
    double high = rank_peak(pb, &s->ranks[r], INFINITY);
    if (high > budget(pb, r)) ok = 0;
    if (high > top) top = high;
  }
  if (peak) *peak = top;
  return ok;
}

/* Whether the search's evaluation (kt__search_evaluate) is the simulator's
 * timing for s under c: compute actions inside the schedule's stages and
 * micro-batches, no overlapped pairs, no links, no send or op overhead, no
 * per-action times. */
static int fast_path_applies(const kt_schedule *s, const kt_costs *c) {
  if (c && (c->links || c->send_overhead > 0 || c->op_overhead > 0 || c->action_time)) return 0;
  int S = kt_schedule_stages(s);
  for (int r = 0; r < s->p; r++)
    for (size_t i = 0; i < s->ranks[r].n; i++) {
      const kt_action *a = &s->ranks[r].actions[i];
      if (a->op >= KT_OP_COUNT || (a->flags & KT_ACTION_OVERLAP_NEXT) || a->stage < 0 ||
          a->stage >= S || a->mb < 0 || a->mb >= s->m)
        return 0;
    }
  return 1;
}

/* The simulator's answer: its metrics' period and busy time (and its own
 * errors, a deadlock report naming the blocked ranks among them). */
static kt_status simulated_period(const kt_schedule *s, const kt_costs *c, double *period,
                                  double *busy, kt_error *err) {
  kt_metrics m;
  kt_status st = kt_simulate_metrics(s, c, &m, err);
  if (st) return st;
  *period = m.period;
  *busy = m.total_busy;
  kt_metrics_free(&m);
  return KT_OK;
}

kt_status kt_gen_period(const kt_schedule *s, const kt_costs *c, double *period, double *busy,
                        kt_error *err) {
  if (!fast_path_applies(s, c)) return simulated_period(s, c, period, busy, err);
  kt__search_problem pb;
  kt__search_eval ev;
  kt_status st = kt__search_problem_init(&pb, s, c, 0, err);
  if (st) return st;
  if ((st = kt__search_eval_init(&ev, &pb, err))) {
    kt__search_problem_free(&pb);
    return st;
  }
  int exact = 0;
  /* a deadlock, or a period the one step does not settle, is the simulator's */
  if (kt__search_evaluate(&pb, &ev, s) >= 0) {
    for (int r = 0; r < s->p; r++)
      if (!s->ranks[r].n) ev.start[r] = ev.stop[r] = 0;
    *period = kt_step_model_period(&pb.step, ev.start, ev.stop, &exact);
    double total = 0;
    for (int r = 0; r < s->p; r++)
      for (size_t i = 0; i < s->ranks[r].n; i++)
        total += kt__search_cost(&pb, s->ranks[r].actions[i].stage,
                                 (kt_op)s->ranks[r].actions[i].op, s->ranks[r].actions[i].mb);
    *busy = total;
  }
  kt__search_eval_free(&ev);
  kt__search_problem_free(&pb);
  return exact ? KT_OK : simulated_period(s, c, period, busy, err);
}
