/* Balanced's order of micro-batches: a few orders that know which
 * micro-batch is heavy (heaviest first, last, in the middle, heavy and
 * light alternating), then swaps of pairs while they shorten the step;
 * every order judged by the simulated period of the schedule generated
 * for its costs, an order whose peak memory passes the limit only when
 * none fits. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "packing/internal.h"

typedef struct {
  kt_pack *pk;
  const kt_token_model *model;
  const kt_costs *base;
  kt_gen_kind kind;
  kt_gen_params params;
  const kt_schedule *fixed; /* the schedule every order runs (NULL: kind generated for it) */
  int S, evals, left;
  double best_period;
  int best_over; /* the best order passes the memory limit */
  int *best;     /* [m] */
} order_search;

/* Simulates the order pk->order: 1 when it beats the best so far (kept). */
static int judge(order_search *os, kt_error *err, kt_status *st) {
  if (os->left <= 0 || *st) return 0;
  os->left--;
  kt_costs c;
  kt_schedule s;
  kt_metrics met;
  if ((*st = kt_pack_costs(os->pk, os->model, os->base, os->S, &c, err))) return 0;
  kt_gen_params gp = os->params;
  gp.costs = &c, gp.outcome = NULL;
  if (os->fixed) *st = kt_simulate_metrics(os->fixed, &c, &met, err);
  else if (!(*st = kt_generate(os->kind, &gp, &s, err))) {
    *st = kt_simulate_metrics(&s, &c, &met, err);
    kt_schedule_free(&s);
  }
  kt_costs_free(&c);
  if (*st) return 0;
  double peak = 0;
  for (int r = 0; r < met.p; r++) peak = fmax(peak, met.ranks[r].peak_memory);
  double period = met.period;
  kt_metrics_free(&met);
  int over = os->params.mem_limit > 0 && peak > os->params.mem_limit * (1 + 1e-9);
  int better = os->best_period < 0 || over < os->best_over ||
               (over == os->best_over && period < os->best_period * (1 - 1e-12));
  if (better) {
    os->best_period = period, os->best_over = over;
    memcpy(os->best, os->pk->order, sizeof(int) * (size_t)os->pk->m);
  }
  return better;
}

typedef struct {
  double load;
  int k;
} heavy;

static int heavier_first(const void *a, const void *b) {
  const heavy *x = a, *y = b;
  if (x->load != y->load) return x->load < y->load ? 1 : -1;
  return x->k - y->k;
}

/* The starting orders from the micro-batches sorted heaviest first (h). */
static void starts(order_search *os, const heavy *h, kt_error *err, kt_status *st) {
  kt_pack *pk = os->pk;
  int m = pk->m;
  for (int form = 0; form < 4 && !*st; form++) {
    for (int k = 0; k < m; k++) {
      int at;
      if (form == 0) at = k;                                      /* heaviest first */
      else if (form == 1) at = m - 1 - k;                         /* heaviest last */
      else if (form == 2) at = k % 2 ? k / 2 : m - 1 - k / 2;     /* heavy and light alternate */
      else at = (m / 2 + (k % 2 ? -(k + 1) / 2 : k / 2) + m) % m; /* heaviest in the middle */
      pk->order[at] = h[k].k;
    }
    judge(os, err, st);
  }
}

/* Swaps of two positions while one shortens the step. */
static void swaps(order_search *os, kt_error *err, kt_status *st) {
  kt_pack *pk = os->pk;
  for (int improved = 1; improved && os->left > 0 && !*st;) {
    improved = 0;
    for (int a = 0; a < pk->m && os->left > 0 && !*st; a++)
      for (int b = a + 1; b < pk->m && os->left > 0 && !*st; b++) {
        memcpy(pk->order, os->best, sizeof(int) * (size_t)pk->m);
        int t = pk->order[a];
        pk->order[a] = pk->order[b], pk->order[b] = t;
        improved |= judge(os, err, st);
      }
  }
}

/* The search: the packing's own order, the starting orders, then swaps. */
static kt_status search(order_search *os, kt_error *err) {
  kt_pack *pk = os->pk;
  os->best = malloc(sizeof(int) * (size_t)pk->m);
  heavy *h = malloc(sizeof(heavy) * (size_t)pk->m);
  if (!os->best || !h) {
    free(os->best), free(h);
    return kt_fail(err, KT_ENOMEM, "out of memory ordering %d micro-batches", pk->m);
  }
  kt_status st = KT_OK;
  judge(os, err, &st); /* the packing's own order */
  for (int k = 0; k < pk->m; k++)
    h[k] = (heavy){kt__pack_load(os->model, pk->tokens[k], pk->sq[k]), k};
  qsort(h, (size_t)pk->m, sizeof *h, heavier_first);
  starts(os, h, err, &st);
  swaps(os, err, &st);
  if (!st) {
    memcpy(pk->order, os->best, sizeof(int) * (size_t)pk->m);
    pk->period = os->best_period;
  }
  free(os->best), free(h);
  return st;
}

kt_status kt_pack_order(kt_pack *pk, const kt_token_model *model, const kt_costs *base,
                        kt_gen_kind kind, const kt_gen_params *params, int evals, kt_error *err) {
  if ((unsigned)kind >= KT_SCHED_COUNT)
    return kt_fail(err, KT_EINVAL, "schedule %d: unknown", (int)kind);
  order_search os = {.pk = pk,
                     .model = model,
                     .base = base,
                     .kind = kind,
                     .params = *params,
                     .evals = evals,
                     .left = evals > 0 ? evals : 1,
                     .best_period = -1};
  os.params.m = pk->m;
  int v = params->v > 0 ? params->v : kt_gen_default_chunks(kind);
  os.S = params->p * (v > 0 ? v : 1);
  return search(&os, err);
}

kt_status kt_pack_order_for(kt_pack *pk, const kt_token_model *model, const kt_costs *base,
                            const kt_schedule *s, double mem_limit, int evals, kt_error *err) {
  if (s->m != pk->m)
    return kt_fail(err, KT_EINVAL, "the schedule runs %d micro-batches, the packing has %d", s->m,
                   pk->m);
  order_search os = {.pk = pk,
                     .model = model,
                     .base = base,
                     .params = {.mem_limit = mem_limit},
                     .fixed = s,
                     .S = kt_schedule_stages(s),
                     .evals = evals,
                     .left = evals > 0 ? evals : 1,
                     .best_period = -1};
  return search(&os, err);
}
