/* Planner search: enumerate (P, D, t, V, M, b, K, schedule, recompute) with
 * P*D*t = N and K*M*b*D = B, drop what cannot fit, and evaluate the rest in
 * order of a lower bound on the step time (branch and bound): once the N-th
 * best simulated step time is below the next bound, no remaining candidate
 * can enter the top N.
 *
 * Bound: every rank runs M micro-batches through its stages in each of the K
 * rounds, so a round takes at least M * max(total load / P, the min-max
 * stage load of S = P*V stages), and the gradient sync moves at least 1/P of
 * the parameters.
 */
#include <math.h>
#include "kaiten/generators.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan_internal.h"

void kt_plan_search_params_default(kt_plan_search_params *sp) {
  memset(sp, 0, sizeof *sp);
  sp->max_microbatches = 1024;
  sp->max_chunks = 4;
  sp->top = 10;
}

void kt_plan_report_free(kt_plan_report *r) {
  for (int i = 0; i < r->n; i++) kt_plan_result_free(&r->configs[i]);
  free(r->configs);
  memset(r, 0, sizeof *r);
}

typedef struct {
  kt_plan_config cfg;
  double lb, mem_lb;
} candidate;

typedef struct {
  candidate *items;
  size_t n, cap;
} cand_list;

static int push_cand(cand_list *l, const candidate *c) {
  if (kt_grow((void **)&l->items, &l->cap, l->n + 1, sizeof *c)) return -1;
  l->items[l->n++] = *c;
  return 0;
}

static int cmp_lb(const void *a, const void *b) {
  const candidate *x = a, *y = b;
  return x->lb < y->lb ? -1 : x->lb > y->lb;
}

/* Step times within this relative distance rank as equal: the same layout
 * reached through a cached simulation differs in the last bits. */
#define TIE 1e-9

/* Order on results: step time, then the smaller peak memory (headroom for
 * the same speed), then the simpler layout. */
static int cmp_result(const kt_plan_result *x, const kt_plan_result *y) {
  if (fabs(x->step_time - y->step_time) > TIE * fmax(x->step_time, y->step_time))
    return x->step_time < y->step_time ? -1 : 1;
  if (fabs(x->mem_peak - y->mem_peak) > TIE * fmax(x->mem_peak, y->mem_peak))
    return x->mem_peak < y->mem_peak ? -1 : 1;
  const int a[] = {x->cfg.p,         x->cfg.t, x->cfg.v,  x->cfg.schedule,
                   x->cfg.recompute, x->cfg.k, -x->cfg.m, x->cfg.b};
  const int b[] = {y->cfg.p,         y->cfg.t, y->cfg.v,  y->cfg.schedule,
                   y->cfg.recompute, y->cfg.k, -y->cfg.m, y->cfg.b};
  for (size_t i = 0; i < sizeof a / sizeof *a; i++)
    if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
  return 0;
}

static int cmp_result_q(const void *a, const void *b) { return cmp_result(a, b); }

static unsigned default_schedules(void) { return (1u << KT_SCHED_COUNT) - 1; }

/* zb-auto and zbv-auto are generated for each configuration's costs and
 * memory, which makes them far dearer to evaluate than a cached schedule
 * (evaluated everywhere the bound allows they take seconds): next to other
 * schedules they are tried on the layouts of the AUTO_LAYOUTS best results
 * of the others (see try_auto). The search keeps at least that many
 * results until then, so the top N is still the head of the exhaustive
 * ranking. */
static const unsigned auto_kinds = 1u << KT_SCHED_ZB_AUTO | 1u << KT_SCHED_ZBV_AUTO;
#define AUTO_LAYOUTS 3

typedef struct {
  kt__plan_ctx *x;
  const kt_plan_search_params *sp;
  cand_list cands;
  kt_plan_report *rep;
  unsigned schedules, recomputes;
  int top; /* results kept while searching: sp->top, at least AUTO_LAYOUTS with zb-auto */
} search;

/* Candidates for one (t, P, D, b, M, K): every schedule, V and recompute. */
static kt_status add_layouts(search *s, kt_plan_config base, kt_error *err) {
  const kt_plan_config *pin = &s->sp->pin;
  unsigned wanted = s->schedules & ~auto_kinds ? s->schedules & ~auto_kinds : s->schedules;
  for (int kind = 0; kind < KT_SCHED_COUNT; kind++) {
    if (!(wanted >> kind & 1)) continue;
    /* with one rank every schedule is the same: keep 1f1b unless one is asked */
    if (base.p == 1 && kind != KT_SCHED_1F1B && s->schedules != 1u << kind) continue;
    int defv = kt_gen_default_chunks((kt_gen_kind)kind);
    int vlo = defv, vhi = defv;
    if (kind == KT_SCHED_INTERLEAVED || kind == KT_SCHED_LOOPED_BFS ||
        kind == KT_SCHED_INTERLEAVED_ZB)
      vlo = 2, vhi = s->sp->max_chunks;
    if (kind == KT_SCHED_ZB_AUTO) vlo = 1, vhi = s->sp->max_chunks; /* loop placement, any V */
    if (pin->v > 0) {
      if (pin->v < vlo || pin->v > vhi) continue;
      vlo = vhi = pin->v;
    }
    for (int v = vlo; v <= vhi; v++) {
      if ((long)base.p * v > s->x->m->n_layers) break;
      if (kind == KT_SCHED_INTERLEAVED && base.m < base.p) continue;
      if (kind == KT_SCHED_ZBV && base.m < 2 * base.p) continue;
      for (int r = 0; r < KT_RECOMPUTE_COUNT; r++) {
        if (!(s->recomputes >> r & 1)) continue;
        /* explicit layers have no attention core: selective is none again */
        if (r == KT_RECOMPUTE_SELECTIVE && !s->x->m->transformer && s->recomputes != 1u << r)
          continue;
        candidate c = {.cfg = base};
        c.cfg.schedule = (kt_gen_kind)kind;
        c.cfg.v = v;
        c.cfg.recompute = (kt_recompute)r;
        const kt__cost_entry *ce =
            kt__plan_ctx_cost_entry(s->x, base.t, base.b, c.cfg.recompute, err);
        if (!ce) return KT_EINVAL;
        /* any cut has a stage at least as loaded as the min-max cut */
        const kt__part_entry *pe = kt__plan_ctx_partition(s->x, base.p * v, ce, 0, NULL, err);
        if (!pe) return KT_EINVAL;
        double round = base.m * fmax(ce->total_load / base.p, pe->bottleneck);
        c.lb = base.k * round + kt__plan_dp_time(s->x, &c.cfg, ce->total_params / base.p);
        c.mem_lb = kt_plan_state_bytes(ce->total_params / base.p, s->x->o, 1, base.d);
        s->rep->enumerated++;
        if (c.mem_lb > s->x->budget) {
          s->rep->pruned_memory++;
          if (!(s->rep->min_memory > 0) || c.mem_lb < s->rep->min_memory)
            s->rep->min_memory = c.mem_lb;
          continue;
        }
        if (push_cand(&s->cands, &c)) return kt_fail(err, KT_ENOMEM, "out of memory");
      }
    }
  }
  return KT_OK;
}

static int pinned_ok(int pin, long v) { return pin <= 0 || pin == v; }

/* Divisors of n in increasing order (caller frees); NULL on failure. */
static long *divisors(long n, size_t *count) {
  long *small = NULL, *large = NULL;
  size_t ns = 0, nl = 0, cs = 0, cl = 0;
  for (long i = 1; i <= n / i; i++) {
    if (n % i) continue;
    if (kt_grow((void **)&small, &cs, ns + 1, sizeof *small)) goto fail;
    small[ns++] = i;
    if (i != n / i) {
      if (kt_grow((void **)&large, &cl, nl + 1, sizeof *large)) goto fail;
      large[nl++] = n / i;
    }
  }
  if (kt_grow((void **)&small, &cs, ns + nl, sizeof *small)) goto fail;
  for (size_t i = 0; i < nl; i++) small[ns + i] = large[nl - 1 - i];
  free(large);
  *count = ns + nl;
  return small;
fail:
  free(small);
  free(large);
  return NULL;
}

static kt_status enumerate(search *s, kt_error *err) {
  const kt_plan_cluster *c = s->x->c;
  const kt_plan_model *m = s->x->m;
  const kt_plan_config *pin = &s->sp->pin;
  long N = c->devices, B = s->sp->global_batch;
  for (int t = 1; t <= c->devices_per_node && t <= N; t++) {
    if (N % t || !pinned_ok(pin->t, t)) continue;
    if (m->transformer && (m->heads % t || m->kv_heads % t)) continue;
    for (int p = 1; p <= N / t && p <= m->n_layers; p++) {
      if ((N / t) % p || !pinned_ok(pin->p, p)) continue;
      int d = (int)(N / t / p);
      if (!pinned_ok(pin->d, d) || B % d) continue;
      size_t nb;
      long *bs = divisors(B / d, &nb);
      if (!bs) return kt_fail(err, KT_ENOMEM, "out of memory");
      kt_status st = KT_OK;
      for (size_t ib = 0; !st && ib < nb; ib++) {
        long b = bs[ib], rounds = B / d / b; /* M * K */
        if (!pinned_ok(pin->b, b) || b > INT32_MAX) continue;
        for (size_t im = 0; !st && im < nb && bs[im] <= rounds; im++) {
          long mb = bs[im], k = rounds / mb; /* divisors of rounds divide B/d too */
          if (rounds % mb || mb > s->sp->max_microbatches || !pinned_ok(pin->m, mb) ||
              !pinned_ok(pin->k, k) || k > INT32_MAX)
            continue;
          kt_plan_config base = {
              .p = p, .d = d, .t = t, .v = 1, .m = (int)mb, .b = (int)b, .k = (int)k};
          /* the node layout matters only when both axes exist and the job spans nodes */
          unsigned want = s->sp->node_layouts ? s->sp->node_layouts : (1u << KT_NODES_COUNT) - 1;
          int both = p > 1 && d > 1 && (long)t * p * d > s->x->c->devices_per_node;
          for (int n = 0; !st && n < KT_NODES_COUNT; n++) {
            if (!(want >> n & 1) || (!both && n != KT_NODES_DP_INSIDE && want != 1u << n)) continue;
            if (!both && n == KT_NODES_PP_INSIDE && (want & 1u)) continue;
            base.nodes = (kt_node_layout)n;
            st = add_layouts(s, base, err);
          }
        }
      }
      free(bs);
      if (st) return st;
    }
  }
  return KT_OK;
}

/* Why nothing was enumerated: the first pin that contradicts N or B. */
static kt_status explain_empty(const search *s, kt_error *err) {
  const kt_plan_config *pin = &s->sp->pin;
  long N = s->x->c->devices, B = s->sp->global_batch;
  /* products in double: pins can be as large as the CLI allows */
  double fixed =
      (double)(pin->p > 0 ? pin->p : 1) * (pin->d > 0 ? pin->d : 1) * (pin->t > 0 ? pin->t : 1);
  if (fixed > N || fmod((double)N, fixed) != 0)
    return kt_fail(err, KT_EINVAL, "the pinned P*D*t = %.0f does not divide the %ld devices", fixed,
                   N);
  if (pin->p > 0 && pin->d > 0 && pin->t > 0 && fixed != N)
    return kt_fail(err, KT_EINVAL, "P*D*t = %d*%d*%d = %.0f, but there are %ld devices", pin->p,
                   pin->d, pin->t, fixed, N);
  if (pin->t > s->x->c->devices_per_node)
    return kt_fail(err, KT_EINVAL, "tensor-parallel degree t=%d: larger than a node (%d devices)",
                   pin->t, s->x->c->devices_per_node);
  if (pin->t > 0 && s->x->m->transformer && (s->x->m->heads % pin->t || s->x->m->kv_heads % pin->t))
    return kt_fail(err, KT_EINVAL,
                   "tensor-parallel degree t=%d does not divide the model's %d heads", pin->t,
                   s->x->m->heads);
  if (pin->p > s->x->m->n_layers)
    return kt_fail(err, KT_EINVAL, "pipeline P=%d: more stages than the model's %d layers", pin->p,
                   s->x->m->n_layers);
  double per = (double)(pin->m > 0 ? pin->m : 1) * (pin->b > 0 ? pin->b : 1) *
               (pin->k > 0 ? pin->k : 1) * (pin->d > 0 ? pin->d : 1);
  if (per > B || fmod((double)B, per) != 0)
    return kt_fail(err, KT_EINVAL,
                   "global batch %ld is not a multiple of the pinned K*M*b*D = %.0f", B, per);
  return kt_fail(err, KT_EINVAL,
                 "no layout satisfies B = K*M*b*D = %ld on %ld devices with the given pins and "
                 "schedules (M <= %d)",
                 B, N, s->sp->max_microbatches);
}

/* Step times and memories this close make no difference to a user (the
 * table shows four significant digits): a layout cut into more rounds
 * differs only in the last digits of the simulated fill and drain. */
#define SAME 1e-4

/* Same step, cut differently: equal step time and memory, and the same
 * layout but for M/K (or the schedule, with one rank). */
static int equivalent(const kt_plan_result *x, const kt_plan_result *y) {
  const kt_plan_config *a = &x->cfg, *b = &y->cfg;
  return a->p == b->p && a->d == b->d && a->t == b->t && a->v == b->v && a->b == b->b &&
         a->recompute == b->recompute && a->nodes == b->nodes &&
         (a->schedule == b->schedule || a->p == 1) &&
         fabs(x->step_time - y->step_time) <= SAME * fmax(x->step_time, y->step_time) &&
         fabs(x->mem_peak - y->mem_peak) <= SAME * fmax(x->mem_peak, y->mem_peak);
}

/* Folds r into an equivalent kept result (the better-ranked of the two
 * stands for both). 1 when it did (r is consumed), 0 when there is none. */
static int fold(kt_plan_report *rep, kt_plan_result *r) {
  for (int i = 0; i < rep->n; i++) {
    kt_plan_result *e = &rep->configs[i];
    if (!equivalent(e, r)) continue;
    int lo = e->m_min < r->cfg.m ? e->m_min : r->cfg.m,
        hi = e->m_max > r->cfg.m ? e->m_max : r->cfg.m;
    int n = e->equivalent + 1;
    if (cmp_result(r, e) < 0) { /* r ranks first: it stands for both */
      kt_plan_result_free(e);
      *e = *r;
    } else {
      kt_plan_result_free(r);
    }
    e->m_min = lo, e->m_max = hi, e->equivalent = n;
    for (; i > 0 && cmp_result(&rep->configs[i], &rep->configs[i - 1]) < 0; i--) {
      kt_plan_result t = rep->configs[i];
      rep->configs[i] = rep->configs[i - 1];
      rep->configs[i - 1] = t;
    }
    return 1;
  }
  return 0;
}

/* Inserts r into the sorted top list (takes ownership). */
static int keep(kt_plan_report *rep, size_t *cap, int top, int collapse, kt_plan_result *r) {
  r->m_min = r->m_max = r->cfg.m;
  if (collapse && fold(rep, r)) return 0;
  if (top > 0 && rep->n == top) {
    if (cmp_result(r, &rep->configs[top - 1]) >= 0) {
      kt_plan_result_free(r);
      return 0;
    }
    kt_plan_result_free(&rep->configs[--rep->n]);
  }
  if (kt_grow((void **)&rep->configs, cap, (size_t)rep->n + 1, sizeof *r)) {
    kt_plan_result_free(r);
    return -1;
  }
  int i = rep->n;
  if (top > 0)
    while (i > 0 && cmp_result(r, &rep->configs[i - 1]) < 0) {
      rep->configs[i] = rep->configs[i - 1];
      i--;
    }
  rep->configs[i] = *r;
  rep->n++;
  return 0;
}

/* Evaluates one candidate and keeps it when it enters the top list; the
 * counters of rep are updated. KT_OK, or ENOMEM. */
static kt_status evaluate_one(search *s, const kt_plan_config *cfg, size_t *cap, kt_error *err) {
  const kt_plan_search_params *sp = s->sp;
  kt_plan_report *rep = s->rep;
  kt_plan_result r;
  kt_error why;
  int cut = 0;
  double cutoff =
      s->top > 0 && rep->n == s->top ? rep->configs[s->top - 1].step_time * (1 + TIE) : INFINITY;
  kt_status st = kt__plan_ctx_evaluate(s->x, cfg, cutoff, &r, &cut, &why);
  if (st == KT_ENOMEM) return kt_fail(err, st, "%s", why.msg);
  if (st) { /* the schedule generator rejects this layout */
    if (!rep->not_applicable++)
      snprintf(rep->not_applicable_reason, sizeof rep->not_applicable_reason, "%s", why.msg);
    return KT_OK;
  }
  if (!cut) rep->evaluated++;
  if (!(rep->min_memory > 0) || r.mem_peak < rep->min_memory) rep->min_memory = r.mem_peak;
  if (!r.fits || cut) {
    if (cut) rep->pruned_time++;
    else rep->no_fit++;
    kt_plan_result_free(&r);
    return KT_OK;
  }
  if (sp->max_bubble > 0 && r.bubble_ratio > sp->max_bubble) {
    rep->over_bubble++;
    kt_plan_result_free(&r);
    return KT_OK;
  }
  if (keep(rep, cap, s->top, s->sp->collapse, &r))
    return kt_fail(err, KT_ENOMEM, "out of memory keeping results");
  return KT_OK;
}

/* zb-auto (in the layout's V, loop placement) and zbv-auto on the layouts of
 * the best AUTO_LAYOUTS results so far. */
static kt_status try_auto(search *s, size_t *cap, kt_error *err) {
  unsigned asked = s->schedules & auto_kinds;
  if (!asked || !(s->schedules & ~auto_kinds)) return KT_OK; /* none, or enumerated already */
  int n = s->rep->n < AUTO_LAYOUTS ? s->rep->n : AUTO_LAYOUTS;
  kt_plan_config layouts[AUTO_LAYOUTS];
  for (int i = 0; i < n; i++) layouts[i] = s->rep->configs[i].cfg;
  kt_status st = KT_OK;
  for (int i = 0; i < n && !st; i++)
    for (int kind = 0; kind < KT_SCHED_COUNT && !st; kind++) {
      if (!(asked >> kind & 1)) continue;
      kt_plan_config cfg = layouts[i];
      cfg.schedule = (kt_gen_kind)kind;
      if (kind == KT_SCHED_ZBV_AUTO) cfg.v = 2;
      else if (kt_gen_kind_placement(layouts[i].schedule) == KT_PLACEMENT_V) cfg.v = 1;
      if (s->sp->pin.v > 0 && cfg.v != s->sp->pin.v) continue;
      if ((long)cfg.p * cfg.v > s->x->m->n_layers) continue;
      int seen = 0; /* a layout twice in the top list (two schedules) is tried once */
      for (int k = 0; k < i && !seen; k++)
        seen = layouts[k].p == cfg.p && layouts[k].d == cfg.d && layouts[k].t == cfg.t &&
               layouts[k].m == cfg.m && layouts[k].b == cfg.b && layouts[k].k == cfg.k &&
               layouts[k].recompute == cfg.recompute &&
               (kind == KT_SCHED_ZBV_AUTO || layouts[k].v == layouts[i].v);
      if (seen) continue;
      s->rep->enumerated++;
      st = evaluate_one(s, &cfg, cap, err);
    }
  return st;
}

kt_status kt_plan_search(const kt_plan_model *m, const kt_plan_cluster *c, const kt_plan_options *o,
                         const kt_plan_search_params *sp, kt_plan_report *rep, kt_error *err) {
  memset(rep, 0, sizeof *rep);
  double t0 = kt_now();
  if (sp->global_batch < 1 || sp->global_batch > 1000000000000L)
    return kt_fail(err, KT_EINVAL, "global batch %ld: expected 1..1e12", sp->global_batch);
  if (sp->max_microbatches < 1 || sp->max_chunks < 2 || sp->top < 0)
    return kt_fail(err, KT_EINVAL, "search limits out of range (max M %d, max V %d, top %d)",
                   sp->max_microbatches, sp->max_chunks, sp->top);
  search s = {.sp = sp, .rep = rep, .top = sp->top};
  s.schedules = sp->schedules ? sp->schedules : default_schedules();
  if (s.top > 0 && s.top < AUTO_LAYOUTS && (s.schedules & auto_kinds) &&
      (s.schedules & ~auto_kinds))
    s.top = AUTO_LAYOUTS;
  s.recomputes = sp->recomputes ? sp->recomputes : (1u << KT_RECOMPUTE_COUNT) - 1;
  kt_status st = kt__plan_ctx_create(m, c, o, &s.x, err);
  if (st) return st;
  st = enumerate(&s, err);
  if (!st && rep->enumerated == 0) st = explain_empty(&s, err);
  if (st) goto done;
  if (s.cands.n > 1) qsort(s.cands.items, s.cands.n, sizeof *s.cands.items, cmp_lb);
  size_t cap = 0;
  for (size_t i = 0; i < s.cands.n; i++) {
    const candidate *cd = &s.cands.items[i];
    if (s.top > 0 && rep->n == s.top && cd->lb > rep->configs[s.top - 1].step_time * (1 + TIE)) {
      rep->pruned_time += s.cands.n - i;
      break;
    }
    if ((st = evaluate_one(&s, &cd->cfg, &cap, err))) goto done;
  }
  if (sp->top == 0 && rep->n > 1)
    qsort(rep->configs, (size_t)rep->n, sizeof *rep->configs, cmp_result_q);
  if ((st = try_auto(&s, &cap, err))) goto done;
  if (sp->top == 0 && rep->n > 1)
    qsort(rep->configs, (size_t)rep->n, sizeof *rep->configs, cmp_result_q);
  while (sp->top > 0 && rep->n > sp->top) kt_plan_result_free(&rep->configs[--rep->n]);
  rep->simulations = kt__plan_ctx_simulations(s.x);
done:
  free(s.cands.items);
  kt__plan_ctx_destroy(s.x);
  if (st) kt_plan_report_free(rep);
  rep->seconds = kt_now() - t0;
  return st;
}
