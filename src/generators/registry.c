/* Schedule registry: names, aliases, default chunk counts, closed forms, dispatch. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kaiten/sim.h"
#include "generators/search/search.h"

typedef struct {
  const char *name;
  const char *alias;
  int default_v;
  int any_v; /* 1: any V >= 1 in its placement (else default_v only, or >= 2 for loop) */
  kt_placement placement;
  kt__generator_fn fn;
  /* 1: its backward runs as I and W (3 actions a chunk and micro-batch,
   * else 2); 2: at most 2P - 1 of a rank's backwards split (DualPipeV) */
  int split;
} kind_info;

static const kind_info kinds[] = {
    [KT_SCHED_GPIPE] = {"gpipe", NULL, 1, 0, KT_PLACEMENT_LOOP, kt__gen_gpipe, 0},
    [KT_SCHED_1F1B] = {"1f1b", NULL, 1, 0, KT_PLACEMENT_LOOP, kt__gen_1f1b, 0},
    [KT_SCHED_INTERLEAVED] = {"interleaved", "interleaved-1f1b", 2, 0, KT_PLACEMENT_LOOP,
                              kt__gen_interleaved, 0},
    [KT_SCHED_LOOPED_BFS] = {"looped-bfs", NULL, 2, 0, KT_PLACEMENT_LOOP, kt__gen_looped_bfs, 0},
    [KT_SCHED_ZB_H1] = {"zb-h1", NULL, 1, 0, KT_PLACEMENT_LOOP, kt__gen_zb_h1, 1},
    [KT_SCHED_ZB_H2] = {"zb-h2", NULL, 1, 0, KT_PLACEMENT_LOOP, kt__gen_zb_h2, 1},
    [KT_SCHED_ZBV] = {"zbv", NULL, 2, 0, KT_PLACEMENT_V, kt__gen_zbv, 1},
    [KT_SCHED_DUALPIPEV] = {"dualpipev", NULL, 2, 0, KT_PLACEMENT_V, kt__gen_dualpipev, 2},
    [KT_SCHED_ZB_AUTO] = {"zb-auto", NULL, 1, 1, KT_PLACEMENT_LOOP, kt__gen_zb_auto, 1},
    [KT_SCHED_ZBV_AUTO] = {"zbv-auto", NULL, 2, 0, KT_PLACEMENT_V, kt__gen_zbv_auto, 1},
    [KT_SCHED_INTERLEAVED_ZB] = {"interleaved-zb", NULL, 2, 0, KT_PLACEMENT_LOOP,
                                 kt__gen_interleaved_zb, 1},
    [KT_SCHED_V_HALF] = {"v-half", NULL, 2, 0, KT_PLACEMENT_V, kt__gen_v_half, 1},
    [KT_SCHED_V_MIN] = {"v-min", NULL, 2, 0, KT_PLACEMENT_V, kt__gen_v_min, 1},
};
_Static_assert(sizeof kinds / sizeof *kinds == KT_SCHED_COUNT, "schedule table out of sync");

const char *kt_gen_kind_name(kt_gen_kind k) {
  return (unsigned)k < KT_SCHED_COUNT ? kinds[k].name : "?";
}

int kt_gen_kind_from_name(const char *name) {
  if (!name) return -1;
  for (int k = 0; k < KT_SCHED_COUNT; k++)
    if (!strcmp(name, kinds[k].name) || (kinds[k].alias && !strcmp(name, kinds[k].alias))) return k;
  return -1;
}

const char *kt_gen_kind_list(void) {
  static char list[256];
  if (!list[0]) {
    size_t n = 0;
    for (int k = 0; k < KT_SCHED_COUNT; k++)
      n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", k ? ", " : "", kinds[k].name);
  }
  return list;
}

int kt_gen_default_chunks(kt_gen_kind k) {
  return (unsigned)k < KT_SCHED_COUNT ? kinds[k].default_v : 1;
}

kt_placement kt_gen_kind_placement(kt_gen_kind k) {
  return (unsigned)k < KT_SCHED_COUNT ? kinds[k].placement : KT_PLACEMENT_LOOP;
}

/* Closed forms under uniform per-stage costs and T_comm = 0. Each zero-bubble
 * form is the idle time I of one rank (every rank has the same busy time
 * V*M*(TF+TB+TW), so bubble = I / (V*M*(TF+TB+TW) + I)); they were derived
 * from the critical paths of the generated orders and are checked against
 * the simulator in tests/test_zero_bubble.c. n = P-1. */
static double zb_idle(kt_gen_kind k, int p, double f, double b, double w) {
  double n = p - 1;
  if (p == 1) return 0;
  switch (k) {
    case KT_SCHED_ZB_H1:          /* the paper's (P-1)(TF+TB-TW) when TW <= TF */
    case KT_SCHED_INTERLEAVED_ZB: /* the same per stage, for any V (M >= P) */
      return n * (b + fmax(0, f - w));
    case KT_SCHED_ZB_H2: /* the paper's (P-1)(TF+TB-2TW) when TB-TF <= max(0, TF+TB-2TW) */
      return n * fmax(fmax(0, f + b - 2 * w), b - f);
    case KT_SCHED_ZBV: {
      double forms[] = {0,
                        n * (2 * f - b - w),
                        2 * n * (b - w),
                        n * (b - f),
                        (n - 1) * (f - b),
                        (n - 1) * (w - f),
                        b + (n - 1) * w - n * f,
                        (2 * n - 1) * f + b - 2 * n * w,
                        2 * n * f - (2 * n + 1) * w};
      double idle = 0;
      for (size_t i = 0; i < sizeof forms / sizeof *forms; i++) idle = fmax(idle, forms[i]);
      return idle;
    }
    case KT_SCHED_DUALPIPEV: return n * fmax(0, b - w) + fmax(2 * n * f, (n - 1) * f + n * b);
    default: return -1;
  }
}

double kt_gen_closed_form_bubble(kt_gen_kind k, int p, int v, int m, double tf, double tb,
                                 double tw, const char **expr) {
  const char *e = NULL;
  double r = -1, P = p, M = m, V = v;
  switch (k) {
    case KT_SCHED_GPIPE:
    case KT_SCHED_1F1B:
      e = "(P-1)/(M+P-1)";
      r = (P - 1) / (M + P - 1);
      break;
    case KT_SCHED_INTERLEAVED:
    case KT_SCHED_LOOPED_BFS:
      if (m < p) break; /* looped-bfs: each chunk then waits for its own first micro-batch */
      e = "(P-1)/(V*M+P-1)";
      r = (P - 1) / (V * M + P - 1);
      break;
    case KT_SCHED_ZB_H1:
      if (m < p) break;
      e = "I/(M(TF+TB+TW)+I), I=(P-1)(TB+max(0,TF-TW))";
      break;
    case KT_SCHED_ZB_H2:
      if (m < 2 * p) break;
      e = "I/(M(TF+TB+TW)+I), I=(P-1)max(0,TF+TB-2TW,TB-TF)";
      break;
    case KT_SCHED_ZBV:
      if (m < 2 * p || v != 2) break;
      e = "I/(2M(TF+TB+TW)+I), I=max(0,n(2TF-TB-TW),2n(TB-TW),n(TB-TF),(n-1)(TF-TB),"
          "(n-1)(TW-TF),TB+(n-1)TW-nTF,(2n-1)TF+TB-2nTW,2nTF-(2n+1)TW), n=P-1";
      break;
    case KT_SCHED_DUALPIPEV:
      if (m < 2 * p || v != 2) break;
      e = "I/(2M(TF+TB+TW)+I), I=n*max(0,TB-TW)+max(2n*TF,(n-1)TF+n*TB), n=P-1";
      break;
    case KT_SCHED_INTERLEAVED_ZB:
      if (m < p || v < 2) break;
      e = "I/(V*M(TF+TB+TW)+I), I=(P-1)(TB+max(0,TF-TW))";
      break;
    default: break;
  }
  if (e && r < 0) {
    double idle = zb_idle(k, p, tf, tb, tw), busy = V * M * (tf + tb + tw);
    r = idle > 0 ? idle / (busy + idle) : 0;
  }
  if (expr) *expr = e;
  return r;
}

const char *kt_gen_closed_form_why_not(kt_gen_kind k, int p, int v, int m) {
  const char *e = NULL;
  if (kt_gen_closed_form_bubble(k, p, v, m, 1, 1, 1, &e) >= 0) return NULL;
  switch (k) {
    case KT_SCHED_ZB_AUTO:
    case KT_SCHED_ZBV_AUTO: return "a search under a memory limit has no formula";
    case KT_SCHED_V_HALF:
    case KT_SCHED_V_MIN: return "its order adapts to the costs";
    case KT_SCHED_INTERLEAVED:
    case KT_SCHED_LOOPED_BFS:
    case KT_SCHED_ZB_H1:
    case KT_SCHED_INTERLEAVED_ZB: return "it holds for M >= P";
    case KT_SCHED_ZB_H2: return "it holds for M >= 2P";
    case KT_SCHED_ZBV:
    case KT_SCHED_DUALPIPEV: return "it holds for M >= 2P with V = 2";
    default: return "none is known for these sizes";
  }
}

double kt_gen_closed_form_peak_memory(kt_gen_kind k, int p, int v, int m, double mem_act,
                                      double mem_wgrad, const char **expr) {
  const char *e = NULL;
  double r = -1, P = p, M = m, V = v, a = mem_act;
  int zb_ok = mem_wgrad <= mem_act; /* W keeps part of what F stored */
  switch (k) {
    case KT_SCHED_GPIPE: e = "M*MB", r = M * a; break;
    case KT_SCHED_1F1B: e = "min(P,M)*MB", r = fmin(P, M) * a; break;
    case KT_SCHED_LOOPED_BFS: e = "V*M*MB", r = V * M * a; break;
    case KT_SCHED_INTERLEAVED:
      if (m % p == 0) e = "min(V*M,(V+1)P-1)*MB", r = fmin(V * M, (V + 1) * P - 1) * a;
      break;
    case KT_SCHED_ZB_H1:
      if (m >= p && zb_ok) e = "P*MB (rank r: (P-r)MB+r*MW)", r = P * a;
      break;
    case KT_SCHED_ZB_H2:
      if (m >= 2 * p && zb_ok) e = "(2P-1)MB (rank r: (2P-1-2r)MB+2r*MW)", r = (2 * P - 1) * a;
      break;
    case KT_SCHED_ZBV:
      if (m >= 2 * p && v == 2 && zb_ok) e = "2P*MB (every rank)", r = 2 * P * a;
      break;
    case KT_SCHED_DUALPIPEV:
      if (m >= 2 * p && v == 2 && zb_ok) e = "(2P+1)MB (every rank)", r = (2 * P + 1) * a;
      break;
    case KT_SCHED_INTERLEAVED_ZB: { /* G micro-batches per round, R = max(1, floor(M/P)) rounds */
      int rounds = m / p > 1 ? m / p : 1, g = m / rounds + (m % rounds > 0);
      if (v >= 2 && zb_ok)
        e = "min((V-1)G+P, V*M)*MB, G=ceil(M/R), R=max(1,floor(M/P)) (rank 0; rank r: "
            "min((V-1)G+P-r, V*M)*MB+r*MW)",
        r = fmin((V - 1) * g + P, V * M) * a;
      break;
    }
    default: break;
  }
  if (expr) *expr = e;
  return r;
}

double kt_gen_mem_limit(const kt_gen_params *params) {
  if (params->mem_limit > 0) return params->mem_limit;
  kt_costs unit;
  const kt_costs *c = params->costs;
  if (!c) {
    kt_costs_default(&unit);
    c = &unit;
  }
  int v = params->v > 0 ? params->v : 1;
  double need = 0;
  for (int s = 0; s < params->p * v; s++) {
    need = fmax(need, kt_cost_mem_act(c, s));
    need = fmax(need, kt_cost_mem_wgrad(c, s));
  }
  return (double)params->p * v * need;
}

double kt_gen_1f1b_peak(kt_gen_kind kind, const kt_gen_params *params) {
  kt_costs unit;
  const kt_costs *c = params->costs;
  if (!c) {
    kt_costs_default(&unit);
    c = &unit;
  }
  int p = params->p, v = params->v > 0 ? params->v : kt_gen_default_chunks(kind);
  int vshape = kt_gen_kind_placement(kind) == KT_PLACEMENT_V;
  double rank_most = 0;
  for (int r = 0; r < p; r++) {
    double sum = 0;
    for (int ch = 0; ch < v; ch++)
      sum += kt_cost_mem_act(c, vshape && ch == 1 ? 2 * p - 1 - r : ch * p + r);
    rank_most = fmax(rank_most, sum);
  }
  return fmin(p, params->m) * rank_most;
}

double kt_gen_min_mem_limit(kt_gen_kind kind, const kt_gen_params *params) {
  if (kind != KT_SCHED_ZB_AUTO && kind != KT_SCHED_ZBV_AUTO) return -1;
  int v = params->v > 0 ? params->v : kinds[kind].default_v;
  kt_schedule layout;
  kt_error err;
  if (params->p < 1 || params->m < 1 ||
      kt_schedule_init(&layout, params->p, v, params->m, kinds[kind].placement, &err))
    return -1;
  kt__search_problem pb;
  double need = -1;
  if (!kt__search_problem_init(&pb, &layout, params->costs, 0, &err)) {
    need = kt__search_min_limit(&pb, NULL);
    kt__search_problem_free(&pb);
  }
  kt_schedule_free(&layout);
  return need;
}

kt_status kt__reserve_actions(kt_schedule *s, size_t per_rank, kt_error *err) {
  if (kt_schedule_reserve(s, per_rank))
    return kt_fail(err, KT_ENOMEM, "out of memory for %zu actions per rank", per_rank);
  return KT_OK;
}

kt_status kt_gen_check_mem_limit(kt_gen_kind kind, double mem_limit, kt_error *err) {
  if (!isfinite(mem_limit))
    return kt_fail(err, KT_EINVAL, "memory limit %g: expected a finite number", mem_limit);
  if (mem_limit <= 0 || kind == KT_SCHED_ZB_AUTO || kind == KT_SCHED_ZBV_AUTO) return KT_OK;
  return kt_fail(err, KT_EINVAL,
                 "%s cannot keep to a memory limit: its order sets its memory "
                 "(zb-auto and zbv-auto search for an order within one)",
                 (unsigned)kind < KT_SCHED_COUNT ? kinds[kind].name : "this schedule");
}

kt_status kt_generate(kt_gen_kind kind, const kt_gen_params *params, kt_schedule *out,
                      kt_error *err) {
  memset(out, 0, sizeof *out);
  if ((unsigned)kind >= KT_SCHED_COUNT)
    return kt_fail(err, KT_EINVAL, "unknown schedule kind %d", (int)kind);
  const kind_info *ki = &kinds[kind];
  int v = params->v > 0 ? params->v : ki->default_v;
  if (params->p < 1) return kt_fail(err, KT_EINVAL, "P=%d: need at least 1 rank", params->p);
  if (params->m < 1) return kt_fail(err, KT_EINVAL, "M=%d: need at least 1 micro-batch", params->m);
  if (!isfinite(params->mem_limit))
    return kt_fail(err, KT_EINVAL, "memory limit %g: expected a finite number", params->mem_limit);
  /* every value in range, so that no sum of the search or the bound overflows */
  kt_status st =
      params->costs ? kt_costs_check(params->costs, params->costs->n_stages, err) : KT_OK;
  if (st) return st;
  if (ki->placement == KT_PLACEMENT_V && v != 2)
    return kt_fail(err, KT_EINVAL, "%s needs exactly 2 chunks per rank in v placement (got V=%d)",
                   ki->name, v);
  if (ki->default_v == 1 && !ki->any_v && v != 1)
    return kt_fail(err, KT_EINVAL,
                   "%s runs one chunk per rank (got V=%d); for several chunks use interleaved, "
                   "interleaved-zb, looped-bfs or zb-auto -v V",
                   ki->name, v);
  st = kt_schedule_init(out, params->p, v, params->m, ki->placement, err);
  if (st) return st;
  snprintf(out->name, sizeof out->name, "%s", ki->name);
  /* every schedule holds an F and a backward (I and W) of each of its
   * rank's chunks per micro-batch: room for them up front, so KT__PUSH
   * stores in place */
  size_t per_rank = (ki->split == 1 ? 3 : 2) * (size_t)v * (size_t)params->m;
  st = kt__reserve_actions(out, per_rank + (ki->split == 2 ? 2 * (size_t)params->p : 0), err);
  if (!st) st = ki->fn(out, params, err);
  if (st) kt_schedule_free(out);
  return st;
}
