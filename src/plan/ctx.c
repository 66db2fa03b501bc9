/* Planner evaluation context: the caches that let thousands of candidates
 * share work.
 *
 *   costs      per (t, b, recompute): the per-layer cost table;
 *   schedules  per (kind, P, V, M): the generated schedule and its memory
 *              profile (peak memory on a rank depends only on the order of
 *              its actions, not on their times);
 *   partitions per (S, t, b, recompute): the min-max cut by layer time;
 *   sims       per (kind, P, V, M, per-stage costs up to a common scale):
 *              makespan and busy time, which scale with the costs.
 */
#include <math.h>
#include "kaiten/generators.h"
#include <stdlib.h>
#include <string.h>

#include "plan/plan_internal.h"

/* ---- a small open-addressing map from a 64-bit hash to entries ---------------- */

static void *map_get(const kt__map *mp, uint64_t h, int (*eq)(const void *, const void *),
                     const void *key) {
  if (!mp->cap) return NULL;
  for (size_t i = h & (mp->cap - 1);; i = (i + 1) & (mp->cap - 1)) {
    if (!mp->slots[i].val) return NULL;
    if (mp->slots[i].hash == h && eq(mp->slots[i].val, key)) return mp->slots[i].val;
  }
}

static int map_put(kt__map *mp, uint64_t h, void *val) {
  if ((mp->n + 1) * 2 > mp->cap) {
    size_t cap = mp->cap ? mp->cap * 2 : 64;
    kt__map_slot *slots = kt_calloc(cap, sizeof *slots);
    if (!slots) return -1;
    for (size_t i = 0; i < mp->cap; i++) {
      if (!mp->slots[i].val) continue;
      size_t j = mp->slots[i].hash & (cap - 1);
      while (slots[j].val) j = (j + 1) & (cap - 1);
      slots[j] = mp->slots[i];
    }
    free(mp->slots);
    mp->slots = slots;
    mp->cap = cap;
  }
  size_t j = h & (mp->cap - 1);
  while (mp->slots[j].val) j = (j + 1) & (mp->cap - 1);
  mp->slots[j] = (kt__map_slot){h, val};
  mp->n++;
  return 0;
}

static void map_free(kt__map *mp, void (*free_val)(void *)) {
  for (size_t i = 0; i < mp->cap; i++)
    if (mp->slots[i].val) free_val(mp->slots[i].val);
  free(mp->slots);
  memset(mp, 0, sizeof *mp);
}

/* ---- context ------------------------------------------------------------------ */

kt_status kt__plan_ctx_create(const kt_plan_model *m, const kt_plan_cluster *c,
                              const kt_plan_options *o, kt__plan_ctx **out, kt_error *err) {
  *out = NULL;
  if (!m->n_layers) return kt_fail(err, KT_EINVAL, "model '%s' has no layers", m->name);
  kt_status st = kt_plan_cluster_check(c, err);
  if (st) return st;
  if (o->zero < 0 || o->zero > 3)
    return kt_fail(err, KT_EINVAL, "zero stage %d: expected 0..3", o->zero);
  if (!(o->weight_bytes >= 0 && o->grad_bytes >= 0 && o->optimizer_bytes >= 0))
    return kt_fail(err, KT_EINVAL, "bytes per parameter must be >= 0");
  kt__plan_ctx *x = kt_calloc(1, sizeof *x);
  if (!x) return kt_fail(err, KT_ENOMEM, "out of memory");
  x->m = m, x->c = c, x->o = o;
  x->budget = kt_plan_cluster_budget(c);
  *out = x;
  return KT_OK;
}

static void free_costs(void *p) {
  kt__cost_entry *e = p;
  free(e->costs);
  free(e);
}

static void free_sched(void *p) {
  kt__sched_entry *e = p;
  kt_schedule_free(&e->s);
  free(e->n_snap);
  free(e->snap_off);
  free(e->snaps);
  free(e->rank_inflight);
  free(e);
}

static void free_part(void *p);

static void free_sim(void *p) {
  kt__sim_entry *e = p;
  free(e->vec);
  free(e);
}

void kt__plan_ctx_destroy(kt__plan_ctx *x) {
  if (!x) return;
  map_free(&x->costs, free_costs);
  map_free(&x->scheds, free_sched);
  map_free(&x->parts, free_part);
  map_free(&x->capped, free_part);
  map_free(&x->sims, free_sim);
  free(x);
}

size_t kt__plan_ctx_simulations(const kt__plan_ctx *x) { return x->n_simulations; }

/* ---- per-layer costs ------------------------------------------------------------ */

static int cost_eq(const void *v, const void *k) {
  const kt__cost_entry *a = v, *b = k;
  return a->t == b->t && a->b == b->b && a->r == b->r;
}

const kt__cost_entry *kt__plan_ctx_cost_entry(kt__plan_ctx *x, int t, int b, kt_recompute r,
                                              kt_error *err) {
  kt__cost_entry key = {.t = t, .b = b, .r = r};
  uint64_t h = kt__plan_hash(kt__plan_hash(kt__plan_hash(1, (uint64_t)t), (uint64_t)b), r);
  kt__cost_entry *e = map_get(&x->costs, h, cost_eq, &key);
  if (e) return e;
  int n = x->m->n_layers;
  e = kt_calloc(1, sizeof *e);
  if (e) e->costs = kt_calloc((size_t)n, sizeof *e->costs);
  if (!e || !e->costs) {
    if (e) free(e);
    kt_fail(err, KT_ENOMEM, "out of memory for layer costs");
    return NULL;
  }
  *e = (kt__cost_entry){.t = t, .b = b, .r = r, .costs = e->costs};
  kt_plan_shape sh = {.t = t, .b = b, .recompute = r};
  if (kt_plan_layer_costs(x->m, x->c, x->o, &sh, e->costs, err)) {
    free_costs(e);
    return NULL;
  }
  for (int i = 0; i < n; i++) {
    const kt_layer_cost *k = &e->costs[i];
    double load = k->f + k->i + k->w;
    e->total_load += load;
    if (load > e->max_load) e->max_load = load;
    e->total_params += k->params;
  }
  /* a tied head's table counts once when it shares a rank with the embedding */
  if (x->m->transformer && x->m->tie_embeddings)
    e->total_params -= (double)x->m->vocab * x->m->hidden / t;
  if (map_put(&x->costs, h, e)) {
    free_costs(e);
    kt_fail(err, KT_ENOMEM, "out of memory for the cost cache");
    return NULL;
  }
  return e;
}

const kt_layer_cost *kt__plan_ctx_costs(kt__plan_ctx *x, int t, int b, kt_recompute r,
                                        kt_error *err) {
  const kt__cost_entry *e = kt__plan_ctx_cost_entry(x, t, b, r, err);
  return e ? e->costs : NULL;
}

/* ---- schedules and their memory profiles ----------------------------------------- */

static int sched_eq(const void *v, const void *k) {
  const kt__sched_entry *a = v, *b = k;
  return a->kind == b->kind && a->p == b->p && a->v == b->v && a->m == b->m;
}

/* Adds snapshot cur (2V counts) to the rank's non-dominated set. */
static int add_snapshot(int **snaps, size_t *n, size_t *cap, size_t first, const int *cur,
                        int width) {
  for (size_t i = *n; i-- > first;) { /* newest first: steady states repeat */
    const int *s = *snaps + i * (size_t)width;
    int dominated = 1;
    for (int k = 0; k < width && dominated; k++) dominated = cur[k] <= s[k];
    if (dominated) return 0;
  }
  /* drop the snapshots cur dominates */
  size_t w = first;
  for (size_t i = first; i < *n; i++) {
    int *s = *snaps + i * (size_t)width, covered = 1;
    for (int k = 0; k < width && covered; k++) covered = s[k] <= cur[k];
    if (!covered) {
      if (w != i) memmove(*snaps + w * (size_t)width, s, sizeof(int) * (size_t)width);
      w++;
    }
  }
  *n = w;
  if (kt_grow((void **)snaps, cap, (*n + 1) * (size_t)width, sizeof(int))) return -1;
  memcpy(*snaps + *n * (size_t)width, cur, sizeof(int) * (size_t)width);
  (*n)++;
  return 0;
}

/* Memory profile: for each rank, the non-dominated vectors of (live
 * activations per chunk, pending weight-gradients per chunk) seen after each
 * F and I; the rank's peak for any per-stage byte sizes is the max over them. */
static kt_status build_profile(kt__sched_entry *e, kt_error *err) {
  const kt_schedule *s = &e->s;
  int V = s->v, width = 2 * V;
  size_t cap = 0, n = 0;
  e->n_snap = kt_calloc((size_t)s->p, sizeof *e->n_snap);
  e->snap_off = kt_calloc((size_t)s->p, sizeof *e->snap_off);
  e->rank_inflight = kt_calloc((size_t)s->p, sizeof *e->rank_inflight);
  int *cur = kt_calloc((size_t)width, sizeof *cur);
  if (!e->n_snap || !e->snap_off || !e->rank_inflight || !cur) goto oom;
  for (int r = 0; r < s->p; r++) {
    memset(cur, 0, sizeof(int) * (size_t)width);
    size_t first = n;
    int inflight = 0;
    for (size_t i = 0; i < s->ranks[r].n; i++) {
      const kt_action *a = &s->ranks[r].actions[i];
      int c = kt_stage_chunk(s, a->stage);
      if (c < 0 || c >= V) continue;
      /* the memory rule with unit activations and unit weight-gradient stashes */
      int d_act = (int)kt_action_memory(a->op, 1, 0), d_wg = (int)kt_action_memory(a->op, 0, 1);
      cur[c] += d_act, cur[V + c] += d_wg;
      int grew = d_act > 0 || d_wg > 0; /* an F or an I: a new peak is possible */
      if (!grew) continue;
      int live = 0;
      for (int k = 0; k < width; k++) live += cur[k];
      if (live > inflight) inflight = live;
      if (add_snapshot(&e->snaps, &n, &cap, first, cur, width)) goto oom;
    }
    e->snap_off[r] = first;
    e->n_snap[r] = n - first;
    e->rank_inflight[r] = inflight;
    if (inflight > e->peak_inflight) e->peak_inflight = inflight;
  }
  free(cur);
  return KT_OK;
oom:
  free(cur);
  return kt_fail(err, KT_ENOMEM, "out of memory profiling a schedule");
}

kt__sched_entry *kt__plan_sched_for(kt_gen_kind kind, int p, int v, int m, const kt_costs *c,
                                    double mem_limit, kt_error *err) {
  kt__sched_entry *e = kt_calloc(1, sizeof *e);
  if (!e) {
    kt_fail(err, KT_ENOMEM, "out of memory");
    return NULL;
  }
  *e = (kt__sched_entry){.kind = kind, .p = p, .v = v, .m = m};
  kt_gen_params params = {.p = p, .v = v, .m = m, .costs = c, .mem_limit = mem_limit, .quick = 1};
  e->status = kt_generate(kind, &params, &e->s, err);
  if (!e->status) e->status = build_profile(e, err);
  if (e->status) {
    free_sched(e);
    return NULL;
  }
  return e;
}

void kt__plan_sched_free(kt__sched_entry *e) {
  if (e) free_sched(e);
}

const kt__sched_entry *kt__plan_ctx_schedule(kt__plan_ctx *x, kt_gen_kind kind, int p, int v, int m,
                                             kt_error *err) {
  kt__sched_entry key = {.kind = kind, .p = p, .v = v, .m = m};
  uint64_t h = kt__plan_hash(kt__plan_hash(kt__plan_hash(kt__plan_hash(2, kind), p), v), m);
  kt__sched_entry *e = map_get(&x->scheds, h, sched_eq, &key);
  if (!e) {
    e = kt_calloc(1, sizeof *e);
    if (!e) {
      kt_fail(err, KT_ENOMEM, "out of memory");
      return NULL;
    }
    *e = key;
    kt_gen_params params = {.p = p, .v = v, .m = m};
    e->status = kt_generate(kind, &params, &e->s, &e->err);
    if (!e->status) e->status = build_profile(e, &e->err);
    if (map_put(&x->scheds, h, e)) {
      free_sched(e);
      kt_fail(err, KT_ENOMEM, "out of memory for the schedule cache");
      return NULL;
    }
  }
  if (e->status) {
    kt_fail(err, e->status, "%s", e->err.msg);
    return NULL;
  }
  return e;
}

double kt__plan_rank_activation(const kt__sched_entry *e, int rank, const double *stage_act,
                                const double *stage_wgrad, int *inflight) {
  int V = e->s.v;
  double peak = 0;
  int live_max = 0;
  for (size_t i = 0; i < e->n_snap[rank]; i++) {
    const int *s = e->snaps + (e->snap_off[rank] + i) * (size_t)(2 * V);
    double sum = 0;
    int live = 0;
    for (int c = 0; c < V; c++) {
      int stage = kt_rank_chunk_stage(&e->s, rank, c);
      sum += s[c] * stage_act[stage] + s[V + c] * stage_wgrad[stage];
      live += s[c] + s[V + c];
    }
    if (sum > peak) peak = sum;
    if (live > live_max) live_max = live;
  }
  if (inflight) *inflight = live_max;
  return peak;
}

/* ---- partitions by layer time ------------------------------------------------------- */

static int part_eq(const void *v, const void *k) {
  const kt__part_entry *a = v, *b = k;
  if (a->S != b->S || a->t != b->t || a->b != b->b || a->r != b->r || a->d != b->d ||
      !a->mult != !b->mult)
    return 0;
  return !a->mult || !memcmp(a->mult, b->mult, sizeof(int) * (size_t)a->S);
}

static void free_part(void *p) {
  kt__part_entry *e = p;
  free(e->counts);
  free((int *)e->mult);
  free(e);
}

static kt_status cut(const kt__plan_ctx *x, const kt__cost_entry *ce, kt__part_entry *e,
                     kt_error *err) {
  int n = x->m->n_layers, S = e->S;
  double *buf = kt_calloc((size_t)(3 * n + S), sizeof *buf);
  if (!buf) return kt_fail(err, KT_ENOMEM, "out of memory partitioning");
  double *load = buf, *fixed = buf + n, *act = buf + 2 * n, *mult = buf + 3 * n;
  kt_partition_problem pb = {.n = n, .load = load};
  for (int i = 0; i < n; i++) {
    const kt_layer_cost *k = &ce->costs[i];
    load[i] = k->f + k->i + k->w;
    fixed[i] = kt_plan_state_bytes(k->params, x->o, 1, e->d);
    act[i] = fmax(k->act, k->wgrad);
  }
  if (e->mult) {
    for (int j = 0; j < S; j++) mult[j] = e->mult[j];
    pb.fixed = fixed, pb.act = act, pb.mult = mult, pb.mem_cap = x->budget;
  }
  kt_error why;
  kt_status st = kt_partition_minmax(&pb, S, e->counts, &e->bottleneck, &why);
  free(buf);
  e->ok = st == KT_OK;
  if (st == KT_ENOMEM || (st && !e->mult)) return kt_fail(err, st, "%s", why.msg);
  return KT_OK;
}

const kt__part_entry *kt__plan_ctx_partition(kt__plan_ctx *x, int S, const kt__cost_entry *ce,
                                             int d, const int *mult, kt_error *err) {
  kt__part_entry key = {
      .S = S, .t = ce->t, .b = ce->b, .r = ce->r, .d = mult ? d : 0, .mult = mult};
  uint64_t h =
      kt__plan_hash(kt__plan_hash(kt__plan_hash(kt__plan_hash(3, S), ce->t), ce->b), ce->r);
  h = kt__plan_hash(h, (uint64_t)key.d);
  for (int j = 0; mult && j < S; j++) h = kt__plan_hash(h, (uint64_t)mult[j]);
  kt__map *map = mult ? &x->capped : &x->parts;
  kt__part_entry *e = map_get(map, h, part_eq, &key);
  if (e) return e;
  e = kt_calloc(1, sizeof *e);
  int *copy = mult ? kt_calloc((size_t)S, sizeof *copy) : NULL;
  if (e) *e = key, e->mult = copy, e->counts = kt_calloc((size_t)S, sizeof *e->counts);
  if (!e || !e->counts || (mult && !copy)) {
    if (e) free_part(e);
    else free(copy);
    kt_fail(err, KT_ENOMEM, "out of memory partitioning");
    return NULL;
  }
  if (mult) memcpy(copy, mult, sizeof(int) * (size_t)S);
  kt_status st = cut(x, ce, e, err);
  if (!st && map_put(map, h, e))
    st = kt_fail(err, KT_ENOMEM, "out of memory for the partition cache");
  if (st) {
    free_part(e);
    return NULL;
  }
  return e;
}

/* ---- simulations up to scale --------------------------------------------------------- */

static int sim_eq(const void *v, const void *k) {
  const kt__sim_entry *a = v, *b = k;
  if (a->kind != b->kind || a->p != b->p || a->v != b->v || a->m != b->m || a->len != b->len)
    return 0;
  for (int i = 0; i < a->len; i++)
    if (fabs(a->vec[i] - b->vec[i]) > 1e-12 * (fabs(a->vec[i]) + 1e-300)) return 0;
  return 1;
}

/* The cache key of a simulation: the stage costs relative to the largest
 * stage (*scale), so schedules that differ only in time unit share it. */
static double *sim_key(const kt_schedule *s, kt_gen_kind kind, const kt_costs *c, int *len,
                       double *scale, uint64_t *hash) {
  int S = s->p * s->v;
  *len = 3 * S + 3;
  *scale = 0;
  for (int i = 0; i < S; i++)
    *scale = fmax(*scale, c->stage_tf[i] + c->stage_tb[i] + c->stage_tw[i]);
  if (!(*scale > 0)) *scale = 1;
  double *vec = kt_calloc((size_t)*len, sizeof *vec);
  if (!vec) return NULL;
  uint64_t h =
      kt__plan_hash(kt__plan_hash(kt__plan_hash(kt__plan_hash(4, kind), s->p), s->v), s->m);
  for (int i = 0; i < S; i++) {
    vec[3 * i] = c->stage_tf[i] / *scale;
    vec[3 * i + 1] = c->stage_tb[i] / *scale;
    vec[3 * i + 2] = c->stage_tw[i] / *scale;
  }
  vec[3 * S] = kt_cost_comm(c) / *scale;
  vec[3 * S + 1] = c->t_dp / *scale; /* the step's end */
  vec[3 * S + 2] = (double)c->step_sync;
  for (int i = 0; i < *len; i++) h = kt__plan_hash(h, (uint64_t)llround(vec[i] * 1e9));
  *hash = h;
  return vec;
}

kt_status kt__plan_ctx_simulate(kt__plan_ctx *x, const kt_schedule *s, kt_gen_kind kind,
                                const kt_costs *c, int cacheable, double *makespan, double *busy,
                                kt_error *err) {
  int len;
  double scale;
  uint64_t h;
  double *vec = sim_key(s, kind, c, &len, &scale, &h);
  if (!vec) return kt_fail(err, KT_ENOMEM, "out of memory");
  kt__sim_entry key = {.kind = kind, .p = s->p, .v = s->v, .m = s->m, .len = len, .vec = vec};
  kt__sim_entry *e = cacheable ? map_get(&x->sims, h, sim_eq, &key) : NULL;
  if (e) {
    free(vec);
    *makespan = e->makespan * scale;
    *busy = e->busy * scale;
    return KT_OK;
  }
  double span = 0, total = 0;
  x->n_simulations++;
  /* the round's period (kaiten/sim.h: its step sync and step-end costs)
   * and busy time */
  kt_status st = kt_gen_period(s, c, &span, &total, err);
  if (st || !cacheable || !(e = kt_calloc(1, sizeof *e))) {
    free(vec); /* an uncached result still stands */
    if (!st) *makespan = span, *busy = total;
    return st;
  }
  *makespan = span;
  *busy = total;
  *e = key;
  e->makespan = span / scale;
  e->busy = total / scale;
  if (map_put(&x->sims, h, e)) free_sim(e);
  return KT_OK;
}
