/* Planner search: the source documents' Example 9.4.2 (8 devices, P=4, D=2,
 * 512 samples per replica, b=2, bubble <= 15%) under the time model, and the
 * search's own invariants. */
#include "plan_check.h"
#include "kaiten/generators.h"

/* Eight identical layers, no embedding or head, no latency: stages are
 * uniform, so the simulated bubble must be the closed form. */
static const char *uniform_spec =
    "{\"name\": \"uniform8\", \"layers\": [{\"name\": \"L\", \"repeat\": 8, \"params\": 1e6, "
    "\"flops\": 1e12, \"act_bytes\": 1e6, \"wgrad_bytes\": 5e5}]}";

static void cluster_8(kt_plan_cluster *c) {
  kt_plan_cluster_default(c);
  c->devices = 8;
  c->mem_bytes = 80e9;
  c->intra_latency = c->inter_latency = 0;
}

static const kt_plan_result *find_m(const kt_plan_report *rep, int m) {
  for (int i = 0; i < rep->n; i++)
    if (rep->configs[i].cfg.m == m) return &rep->configs[i];
  return NULL;
}

/* The documents' constraints: P=4, D=2, b=2, 1F1B, B = 2 x 512. */
static void example_params(kt_plan_search_params *sp) {
  kt_plan_search_params_default(sp);
  sp->global_batch = 1024;
  sp->pin = (kt_plan_config){.p = 4, .d = 2, .b = 2};
  sp->schedules = 1u << KT_SCHED_1F1B;
  sp->recomputes = 1u << KT_RECOMPUTE_NONE;
  sp->top = 0;
}

static void test_example_uniform(void) {
  kt_plan_model m;
  kt_plan_cluster c;
  kt_plan_options o;
  kt_error err;
  NEED(kt_plan_model_parse(uniform_spec, &m, &err) == KT_OK);
  cluster_8(&c);
  kt_plan_options_default(&o);
  kt_plan_search_params sp;
  kt_plan_report rep;

  /* --microbatches 16: K = 16 and the bubble is 3/19 = 15.8% */
  example_params(&sp);
  sp.pin.m = 16;
  NEED(kt_plan_search(&m, &c, &o, &sp, &rep, &err) == KT_OK);
  NEED(rep.n == 1);
  const kt_plan_result *r = &rep.configs[0];
  CHECK_EQ_INT(r->cfg.k, 16);
  CHECK_EQ_INT(r->cfg.t, 1);
  CHECK_NEAR(r->bubble_ratio, 3.0 / 19, 1e-12);
  /* the round is (M + P - 1) slots of F + B, each stage 2 layers x b=2 samples */
  double slot = 3 * 2 * 2 * 1e12 / kt_plan_cluster_flops(&c);
  CHECK_NEAR(r->round_time, 19 * slot, 1e-12 * r->round_time);
  CHECK_NEAR(r->step_time, 16 * r->round_time + r->dp_time, 1e-12 * r->step_time);
  for (int j = 0; j < 4; j++) CHECK_EQ_INT(r->partition[j], 2);
  kt_plan_report_free(&rep);

  /* M free: every divisor of 256 is a candidate; fewer, longer rounds win */
  example_params(&sp);
  NEED(kt_plan_search(&m, &c, &o, &sp, &rep, &err) == KT_OK);
  CHECK_EQ_INT(rep.n, 9); /* M = 1, 2, ..., 256 */
  NEED(rep.n == 9);
  CHECK_EQ_INT(rep.configs[0].cfg.m, 256);
  CHECK_EQ_INT(rep.configs[0].cfg.k, 1);
  CHECK_NEAR(rep.configs[0].bubble_ratio, 3.0 / 259, 1e-12);
  for (int i = 0; i < rep.n; i++) {
    const kt_plan_result *x = &rep.configs[i];
    CHECK_EQ_INT(x->cfg.m, 256 >> i); /* sorted: larger M first */
    CHECK_NEAR(x->bubble_ratio, 3.0 / (x->cfg.m + 3), 1e-12);
    CHECK_EQ_INT((long)x->cfg.k * x->cfg.m * x->cfg.b * x->cfg.d, 1024);
  }
  /* the documents' pick (M=16, K=16) is 5th: K rounds of (M+3) slots vs 259 slots */
  const kt_plan_result *doc = find_m(&rep, 16);
  NEED(doc != NULL);
  CHECK_NEAR(doc->step_time / rep.configs[0].step_time, 16.0 * 19 / 259, 1e-6);
  kt_plan_report_free(&rep);

  /* bubble <= 15%: M=16 (15.8%) is dropped, M=32 (3/35) is the smallest kept */
  example_params(&sp);
  sp.max_bubble = 0.15;
  NEED(kt_plan_search(&m, &c, &o, &sp, &rep, &err) == KT_OK);
  CHECK_EQ_INT(rep.n, 4);
  CHECK_EQ_INT(rep.over_bubble, 5);
  CHECK(find_m(&rep, 16) == NULL);
  CHECK(find_m(&rep, 32) != NULL);
  kt_plan_report_free(&rep);
  kt_plan_model_free(&m);
}

/* The same constraints with a real model (llama-7b at the documents' T=1024):
 * the embedding and LM head unbalance the end stages, so the bubble is above
 * the closed form, and still M=256, K=1 is best by a wide margin. */
static void test_example_llama(void) {
  kt_plan_model m;
  kt_plan_cluster c;
  kt_plan_options o;
  kt_error err;
  NEED(kt_plan_model_preset("llama-7b", &m, &err) == KT_OK);
  NEED(kt_plan_model_set_seq_len(&m, 1024, &err) == KT_OK);
  kt_plan_cluster_default(&c);
  kt_plan_options_default(&o);
  kt_plan_search_params sp;
  kt_plan_report rep;
  example_params(&sp);
  NEED(kt_plan_search(&m, &c, &o, &sp, &rep, &err) == KT_OK);
  NEED(rep.n >= 5);
  const kt_plan_result *best = &rep.configs[0], *doc = find_m(&rep, 16);
  NEED(doc != NULL);
  CHECK_EQ_INT(best->cfg.m, 256);
  CHECK_EQ_INT(best->cfg.k, 1);
  CHECK_EQ_INT(doc->cfg.k, 16);
  CHECK(doc->bubble_ratio > 3.0 / 19 + 0.01); /* imbalance adds idle time */
  CHECK(doc->bubble_ratio < 0.25);
  CHECK(doc->step_time / best->step_time > 1.10);
  CHECK(best->imbalance > 0.03 && best->imbalance < 0.10);
  /* partition: embedding + 8 blocks, 8, 8, 8 blocks + head */
  CHECK_EQ_INT(best->partition[0], 9);
  CHECK_EQ_INT(best->partition[1], 8);
  CHECK_EQ_INT(best->partition[3], 9);
  /* memory: stage 0 holds (embedding + 8 blocks) x 16 bytes = 28.0 GB of model
   * state and 1F1B's 4 in-flight micro-batches of activations */
  CHECK_NEAR(best->mem_state[0], (131072000.0 + 8 * 202383360.0) * 16, 1);
  CHECK_EQ_INT(best->peak_inflight, 4);
  CHECK(best->mem_peak < 80e9);
  double act0 = best->mem_rank[0] - best->mem_state[0];
  CHECK(act0 > 15e9 && act0 < 25e9); /* the documents estimate ~17 GB */
  kt_plan_report_free(&rep);

  /* sharding everything over D (zero 3): the documents' 16N/(P*k) = 14 GB */
  o.zero = 3;
  example_params(&sp);
  sp.pin.m = 16;
  NEED(kt_plan_search(&m, &c, &o, &sp, &rep, &err) == KT_OK);
  NEED(rep.n == 1);
  CHECK_NEAR(rep.configs[0].mem_state[0] / 1e9, 14.0, 0.01);
  kt_plan_report_free(&rep);
  o.zero = 0;

  /* free search over everything: clearly better than the documents' layout */
  kt_plan_search_params_default(&sp);
  sp.global_batch = 1024;
  sp.top = 3;
  NEED(kt_plan_search(&m, &c, &o, &sp, &rep, &err) == KT_OK);
  NEED(rep.n == 3);
  kt_plan_config pinned = {
      .p = 4, .d = 2, .t = 1, .v = 1, .m = 16, .b = 2, .k = 16, .schedule = KT_SCHED_1F1B};
  kt_plan_result docr;
  NEED(kt_plan_evaluate(&m, &c, &o, &pinned, &docr, &err) == KT_OK);
  CHECK(docr.fits);
  CHECK(rep.configs[0].step_time < 0.87 * docr.step_time);
  for (int i = 0; i < rep.n; i++) {
    const kt_plan_config *g = &rep.configs[i].cfg;
    CHECK_EQ_INT(g->p * g->d * g->t, 8);
    CHECK_EQ_INT((long)g->k * g->m * g->b * g->d, 1024);
    CHECK(rep.configs[i].mem_peak <= 80e9);
    if (i) /* ties within 1e-9 rank by layout */
      CHECK_MSG(rep.configs[i - 1].step_time <= rep.configs[i].step_time * (1 + 1e-9),
                "%.17g %.17g", rep.configs[i - 1].step_time, rep.configs[i].step_time);
  }
  kt_plan_result_free(&docr);
  kt_plan_report_free(&rep);
  kt_plan_model_free(&m);
}

/* Contradicting pins are refused with a reason naming the numbers. */
static void test_bad_pins(void) {
  kt_plan_model m;
  kt_plan_cluster c;
  kt_plan_options o;
  kt_error err;
  NEED(kt_plan_model_preset("gpt2-124m", &m, &err) == KT_OK);
  cluster_8(&c);
  kt_plan_options_default(&o);
  kt_plan_search_params sp;
  kt_plan_report rep;
  kt_plan_search_params_default(&sp);
  sp.global_batch = 64;
  sp.pin = (kt_plan_config){.p = 4, .d = 4, .t = 1};
  CHECK(kt_plan_search(&m, &c, &o, &sp, &rep, &err) == KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "16");
  sp.pin = (kt_plan_config){.d = 8, .b = 3};
  CHECK(kt_plan_search(&m, &c, &o, &sp, &rep, &err) == KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "64");
  sp.pin = (kt_plan_config){.t = 5};
  CHECK(kt_plan_search(&m, &c, &o, &sp, &rep, &err) == KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "5");
  sp.pin = (kt_plan_config){0};
  sp.global_batch = 0;
  CHECK(kt_plan_search(&m, &c, &o, &sp, &rep, &err) == KT_EINVAL);
  /* a single configuration: sizes that do not match are refused */
  kt_plan_config bad = {.p = 4, .d = 1, .t = 1, .v = 1, .m = 4, .b = 1, .k = 1};
  kt_plan_result r;
  CHECK(kt_plan_evaluate(&m, &c, &o, &bad, &r, &err) == KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "8 devices");
  bad = (kt_plan_config){
      .p = 8, .d = 1, .t = 1, .v = 1, .m = 4, .b = 1, .k = 1, .schedule = KT_SCHED_INTERLEAVED};
  CHECK(kt_plan_evaluate(&m, &c, &o, &bad, &r, &err) == KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "V >= 2");
  bad.v = 2;
  CHECK(kt_plan_evaluate(&m, &c, &o, &bad, &r, &err) == KT_EINVAL); /* 16 stages, 14 layers */
  CHECK_STR_CONTAINS(err.msg, "14 layers");
  kt_plan_model_free(&m);
}

/* Nothing fits: the report is empty and says how small the smallest was. */
static void test_nothing_fits(void) {
  kt_plan_model m;
  kt_plan_cluster c;
  kt_plan_options o;
  kt_error err;
  NEED(kt_plan_model_preset("llama-70b", &m, &err) == KT_OK);
  cluster_8(&c);
  kt_plan_options_default(&o);
  kt_plan_search_params sp;
  kt_plan_search_params_default(&sp);
  sp.global_batch = 64;
  kt_plan_report rep;
  NEED(kt_plan_search(&m, &c, &o, &sp, &rep, &err) == KT_OK);
  CHECK_EQ_INT(rep.n, 0);
  CHECK(rep.min_memory > 80e9);
  CHECK(rep.min_memory < 69e9 * 16 / 8 * 1.5); /* the bound is near 1/8 of all states */
  kt_plan_report_free(&rep);
  kt_plan_model_free(&m);
}

int main(void) {
  test_example_uniform();
  test_example_llama();
  test_bad_pins();
  test_nothing_fits();
  return kt_test_done(__FILE__);
}
