/* Planner properties over random models, clusters and batches:
 *   - every configuration reported as fitting is within the memory budget,
 *     by the planner's figures and by an independent recomputation with the
 *     simulator; every one evaluated as not fitting exceeds it;
 *   - a configuration that fits when evaluated alone is in the exhaustive
 *     search's list with the same step time (the memory bound never drops a
 *     fitting one), and one that does not fit is not;
 *   - the branch-and-bound top N equals the head of the exhaustive list;
 *   - B = K*M*b*D and P*D*t = N for every configuration. */
#include "plan_check.h"
#include "kaiten/generators.h"

static unsigned long long rng = 0x243f6a8885a308d3ull;
static double urand(void) {
  rng = rng * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(rng >> 11) / 9007199254740992.0;
}
static int irand(int lo, int hi) { return lo + (int)(urand() * (hi - lo + 1)); }

static void random_model(kt_plan_model *m) {
  static const int heads[] = {2, 4, 8};
  char spec[512];
  /* one draw per statement: argument evaluation order is unspecified */
  int a = heads[irand(0, 2)];
  int h = a * 8 * irand(1, 8);
  int kv = urand() < 0.3 ? a / 2 : a;
  int blocks = irand(2, 14);
  int ffn = h * irand(2, 4);
  int vocab = irand(100, 30000);
  int seq = 64 * irand(1, 16);
  int swiglu = urand() < 0.5, tied = urand() < 0.5;
  snprintf(spec, sizeof spec,
           "{\"name\": \"rand\", \"blocks\": %d, \"hidden\": %d, \"heads\": %d, "
           "\"kv_heads\": %d, \"ffn\": %d, \"vocab\": %d, \"seq_len\": %d, \"ffn_type\": \"%s\", "
           "\"tie_embeddings\": %s}",
           blocks, h, a, kv, ffn, vocab, seq, swiglu ? "swiglu" : "gelu", tied ? "true" : "false");
  kt_error err;
  if (kt_plan_model_parse(spec, m, &err)) {
    fprintf(stderr, "bad random spec %s: %s\n", spec, err.msg);
    exit(1);
  }
}

static int same_config(const kt_plan_config *x, const kt_plan_config *y) {
  return x->p == y->p && x->d == y->d && x->t == y->t && x->v == y->v && x->m == y->m &&
         x->b == y->b && x->k == y->k && x->schedule == y->schedule &&
         x->recompute == y->recompute && x->nodes == y->nodes;
}

static const kt_plan_result *find(const kt_plan_report *rep, const kt_plan_config *g) {
  for (int i = 0; i < rep->n; i++)
    if (same_config(&rep->configs[i].cfg, g)) return &rep->configs[i];
  return NULL;
}

/* The planner's memory figures agree with the independent recomputation and
 * the fit verdict follows the budget. */
static void check_memory(const kt_plan_model *m, const kt_plan_cluster *c, const kt_plan_options *o,
                         const kt_plan_result *r) {
  double mem[64], budget = c->mem_bytes - c->mem_reserved, peak = 0;
  int inflight[64];
  NEED(r->cfg.p <= 64 && plan_recheck_memory(m, c, o, r, mem, inflight) == 0);
  for (int k = 0; k < r->cfg.p; k++) {
    CHECK_MSG(fabs(mem[k] - r->mem_rank[k]) <= 1e-9 * mem[k], "rank %d: %.9g vs recomputed %.9g", k,
              r->mem_rank[k], mem[k]);
    peak = fmax(peak, mem[k]);
  }
  CHECK_NEAR(r->mem_peak, peak, 1e-9 * peak);
  CHECK_MSG(r->fits == (peak <= budget), "fits=%d but peak %.6g vs budget %.6g", r->fits, peak,
            budget);
}

static int checked_fit, checked_nofit, checked_lists;

/* A random cluster and options with a memory budget around what the model
 * needs, so fitting and not fitting both occur. */
static void random_setup(const kt_plan_model *m, kt_plan_cluster *c, kt_plan_options *o,
                         kt_plan_search_params *sp) {
  kt_plan_cluster_default(c);
  static const int devs[] = {1, 2, 4, 8, 16};
  c->devices = devs[irand(0, 4)];
  c->devices_per_node = 1 << irand(0, 3);
  c->intra_latency = urand() * 1e-5;
  kt_plan_options_default(o);
  o->zero = irand(0, 3);
  o->sequence_parallel = urand() < 0.7;
  double states = kt_plan_model_params(m) * 16;
  int share = irand(1, c->devices);
  double slack = 1 + 2 * urand();
  c->mem_bytes = states / share * slack + 1e6;
  c->mem_reserved = urand() < 0.3 ? c->mem_bytes * 0.1 : 0;
  kt_plan_search_params_default(sp);
  long pow2 = 1L << irand(0, 5);
  long three = urand() < 0.3 ? 3 : 1;
  sp->global_batch = pow2 * three * c->devices;
  sp->max_microbatches = 64;
  sp->max_chunks = 3;
  sp->top = 0;
}

/* A random configuration of the cluster's devices and the global batch;
 * 0 when the draw does not divide them. */
static int random_config(const kt_plan_cluster *c, const kt_plan_search_params *sp,
                         kt_plan_config *g) {
  *g = (kt_plan_config){.v = 1, .k = 1};
  g->t = 1 << irand(0, 3);
  g->p = 1 << irand(0, 4);
  g->schedule = (kt_gen_kind)irand(0, KT_SCHED_ZBV);
  g->recompute = (kt_recompute)irand(0, 2);
  if (kt_gen_default_chunks(g->schedule) > 1)
    g->v = 2 + (g->schedule != KT_SCHED_ZBV) * irand(0, 1);
  if (c->devices % (g->t * g->p)) return 0;
  g->d = c->devices / (g->t * g->p);
  long per = sp->global_batch / g->d;
  if (sp->global_batch % g->d) return 0;
  g->b = 1 << irand(0, 2);
  if (per % g->b) g->b = 1;
  g->m = (int)(per / g->b);
  while (g->m > 64 || (g->m % 2 == 0 && urand() < 0.4)) g->m /= 2, g->k *= 2;
  return (long)g->k * g->m * g->b * g->d == sp->global_batch;
}

/* Random single configurations: fit verdict, memory, and membership in the
 * exhaustive list. */
static void check_singles(int idx, const kt_plan_model *m, const kt_plan_cluster *c,
                          const kt_plan_options *o, const kt_plan_search_params *sp,
                          const kt_plan_report *all) {
  kt_error err;
  for (int trial = 0; trial < 100; trial++) {
    kt_plan_config g;
    if (!random_config(c, sp, &g)) continue;
    kt_plan_result r;
    if (kt_plan_evaluate(m, c, o, &g, &r, &err)) continue; /* not applicable */
    check_memory(m, c, o, &r);
    const kt_plan_result *in = find(all, &g);
    /* with one rank every schedule runs the same; the search keeps 1f1b only */
    int searched = g.p > 1 || (g.schedule == KT_SCHED_1F1B && g.v == 1);
    if (r.fits && searched) {
      checked_fit++;
      CHECK_MSG(in != NULL, "case %d: a fitting %s P=%d V=%d M=%d is missing from the search", idx,
                kt_gen_kind_name(g.schedule), g.p, g.v, g.m);
      if (in) CHECK_NEAR(in->step_time, r.step_time, 1e-9 * r.step_time);
    } else if (!r.fits) {
      checked_nofit++;
      CHECK(r.mem_peak > c->mem_bytes - c->mem_reserved);
      CHECK(in == NULL);
    }
    kt_plan_result_free(&r);
  }
}

static void one_case(int idx) {
  kt_plan_model m;
  random_model(&m);
  kt_plan_cluster c;
  kt_plan_options o;
  kt_plan_search_params sp;
  random_setup(&m, &c, &o, &sp);
  kt_plan_report all, top;
  kt_error err;
  kt_status st = kt_plan_search(&m, &c, &o, &sp, &all, &err);
  CHECK_MSG(st == KT_OK, "case %d: %s", idx, err.msg);
  if (st) {
    kt_plan_model_free(&m);
    return;
  }
  for (int i = 0; i < all.n; i++) {
    const kt_plan_result *r = &all.configs[i];
    CHECK(r->fits);
    CHECK(r->mem_peak <= c.mem_bytes - c.mem_reserved);
    CHECK_EQ_INT((long)r->cfg.p * r->cfg.d * r->cfg.t, c.devices);
    CHECK_EQ_INT((long)r->cfg.k * r->cfg.m * r->cfg.b * r->cfg.d, sp.global_batch);
    if (i) CHECK(all.configs[i - 1].step_time <= r->step_time * (1 + 1e-9));
    CHECK(r->step_time > 0 && r->bubble_ratio >= -1e-12 && r->bubble_ratio < 1);
    if (i < 6 || urand() < 0.05) check_memory(&m, &c, &o, r);
  }
  /* branch and bound keeps exactly the head of the exhaustive ranking */
  sp.top = 1 + irand(0, 4);
  NEED(kt_plan_search(&m, &c, &o, &sp, &top, &err) == KT_OK);
  CHECK_EQ_INT(top.n, all.n < sp.top ? all.n : sp.top);
  for (int i = 0; i < top.n && i < all.n; i++) {
    CHECK_MSG(same_config(&top.configs[i].cfg, &all.configs[i].cfg), "case %d: top[%d] differs",
              idx, i);
    CHECK_NEAR(top.configs[i].step_time, all.configs[i].step_time, 1e-9 * all.configs[i].step_time);
  }
  checked_lists++;
  kt_plan_report_free(&top);
  check_singles(idx, &m, &c, &o, &sp, &all);
  kt_plan_report_free(&all);
  kt_plan_model_free(&m);
}

int main(void) {
  for (int i = 0; i < 60; i++) one_case(i);
  /* the random cases really exercise both verdicts */
  CHECK(checked_fit > 50);
  CHECK(checked_nofit > 50);
  CHECK(checked_lists == 60);
  printf("checked %d fitting and %d non-fitting single configurations\n", checked_fit,
         checked_nofit);
  return kt_test_done(__FILE__);
}
