/* Planner memory model: the source documents' and Korthikanti et al.'s
 * figures, parameter counts of the presets, and per-rank peaks checked
 * against the simulator's memory accounting. */
#include "plan_check.h"
#include "kaiten/generators.h"

static void test_model_states(void) {
  kt_plan_options o;
  kt_plan_options_default(&o);
  CHECK_NEAR(o.weight_bytes + o.grad_bytes + o.optimizer_bytes, 16, 0);
  /* the documents: 7e9 params x 16 bytes / 8 = 14 GB (P=8, or P=4 x D=2 fully sharded) */
  CHECK_NEAR(kt_plan_state_bytes(7e9, &o, 8, 1), 14e9, 1);
  o.zero = 3;
  CHECK_NEAR(kt_plan_state_bytes(7e9, &o, 4, 2), 14e9, 1);
  /* zero 1: only the 12 optimizer bytes are split over D */
  o.zero = 1;
  CHECK_NEAR(kt_plan_state_bytes(7e9, &o, 4, 2), 7e9 / 4 * 4 + 7e9 / 8 * 12, 1);
  o.zero = 2;
  CHECK_NEAR(kt_plan_state_bytes(7e9, &o, 4, 2), 7e9 / 4 * 2 + 7e9 / 8 * 14, 1);
  o.zero = 0; /* without sharding D does not help */
  CHECK_NEAR(kt_plan_state_bytes(7e9, &o, 4, 2), 28e9, 1);
}

static void test_activation_formula(void) {
  /* s=2048, b=1, h=4096, a=32: sbh(34 + 5as/h) = 8388608 * (34 + 80) */
  double s = 2048, b = 1, h = 4096, a = 32, sbh = s * b * h;
  CHECK_NEAR(kt_plan_block_activation(s, b, h, a, 1, 0, KT_RECOMPUTE_NONE), sbh * 114, 0.5);
  CHECK_NEAR(kt_plan_block_activation(s, b, h, a, 1, 0, KT_RECOMPUTE_NONE), 956301312, 0.5);
  /* t=8: sbh(10 + 24/t + 5as/(ht)); with sequence parallelism sbh(34 + 5as/h)/t */
  CHECK_NEAR(kt_plan_block_activation(s, b, h, a, 8, 0, KT_RECOMPUTE_NONE), sbh * 23, 0.5);
  CHECK_NEAR(kt_plan_block_activation(s, b, h, a, 8, 1, KT_RECOMPUTE_NONE), sbh * 114 / 8, 0.5);
  /* selective recomputation drops the 5as/h term */
  CHECK_NEAR(kt_plan_block_activation(s, b, h, a, 1, 0, KT_RECOMPUTE_SELECTIVE), sbh * 34, 0.5);
  CHECK_NEAR(kt_plan_block_activation(s, b, h, a, 8, 0, KT_RECOMPUTE_SELECTIVE), sbh * 13, 0.5);
  CHECK_NEAR(kt_plan_block_activation(s, b, h, a, 8, 1, KT_RECOMPUTE_SELECTIVE), sbh * 34 / 8, 0.5);
  /* full recomputation keeps the block input: 2sbh (/t with sequence parallelism) */
  CHECK_NEAR(kt_plan_block_activation(s, b, h, a, 1, 0, KT_RECOMPUTE_FULL), 2 * sbh, 0.5);
  CHECK_NEAR(kt_plan_block_activation(s, b, h, a, 8, 1, KT_RECOMPUTE_FULL), 2 * sbh / 8, 0.5);
  /* linear in b */
  CHECK_NEAR(kt_plan_block_activation(s, 4, h, a, 2, 1, KT_RECOMPUTE_NONE),
             4 * kt_plan_block_activation(s, 1, h, a, 2, 1, KT_RECOMPUTE_NONE), 1);
}

/* A GPT-shaped model's block costs reproduce the formula and the zero-bubble
 * paper's M_W = 32 sbh; FLOPs are 24sh^2 + 4s^2h per sample forward. */
static void test_layer_costs(void) {
  kt_plan_model m;
  kt_error err;
  NEED(kt_plan_model_parse("{\"blocks\": 4, \"hidden\": 4096, \"heads\": 32, "
                           "\"vocab\": 50000, \"seq_len\": 2048}",
                           &m, &err) == KT_OK);
  kt_plan_cluster c;
  kt_plan_cluster_default(&c);
  kt_plan_options o;
  kt_plan_options_default(&o);
  kt_layer_cost lc[6];
  double s = 2048, h = 4096, sbh = s * h;
  for (int t = 1; t <= 8; t *= 2)
    for (int r = 0; r < KT_RECOMPUTE_COUNT; r++)
      for (int sp = 0; sp <= 1; sp++) {
        o.sequence_parallel = sp;
        kt_plan_shape sh = {.t = t, .b = 2, .recompute = (kt_recompute)r};
        NEED(kt_plan_layer_costs(&m, &c, &o, &sh, lc, &err) == KT_OK);
        CHECK_NEAR(lc[1].act, kt_plan_block_activation(s, 2, h, 32, t, sp && t > 1, sh.recompute),
                   1);
        double mw = t == 1 ? 32 * sbh : sp ? 32 * sbh / t : sbh * (8 + 24.0 / t);
        CHECK_NEAR(lc[2].wgrad, 2 * mw, 1);
        CHECK_NEAR(lc[1].flops, 2 * (24 * s * h * h + 4 * s * s * h) / t, 1e3);
        CHECK_NEAR(lc[1].params * t, 12 * h * h + 13 * h, 1e-6);
        /* I = F (+ attention core twice), W = the weight matmuls; recompute adds to I */
        double rate = kt_plan_cluster_flops(&c), lin = 2 * 2 * s * 12 * h * h / t,
               core = 2 * 4 * s * s * h / t;
        double tp = lc[1].tp / (r == KT_RECOMPUTE_FULL ? 3 : 2);
        CHECK_NEAR(lc[1].w, lin / rate, 1e-12);
        double extra = r == KT_RECOMPUTE_FULL        ? (lin + core) / rate + tp
                       : r == KT_RECOMPUTE_SELECTIVE ? core / rate
                                                     : 0;
        CHECK_NEAR(lc[1].i, (lin + 2 * core) / rate + tp + extra, 1e-12);
        CHECK_NEAR(lc[1].f, (lin + core) / rate + tp, 1e-12);
        CHECK(t == 1 ? lc[1].tp == 0 : lc[1].tp > 0);
      }
  /* head: fp32 logits 4sbv dominate; tensor parallelism splits the vocabulary */
  CHECK_NEAR(lc[5].act, 2 * (4 * sbh / 8 + 4 * s * 50000 / 8), 1);
  kt_plan_model_free(&m);
}

static void test_preset_params(void) {
  static const struct {
    const char *name;
    double params, tol;
  } known[] = {
      {"gpt2-124m", 124439808, 0},   /* HF GPT-2 small, tied head */
      {"llama-7b", 6738415616, 0},   /* LLaMA 7B */
      {"llama-70b", 68976648192, 0}, /* Llama 2 70B (grouped-query attention) */
      {"gpt2-350m", 354823168, 0},   /* GPT-2 medium */
      {"gpt2-1.5b", 1557611200, 0},  /* GPT-2 XL */
      {"zb-1.5b", 1.5e9, 0.03e9},    /* the paper's names, within 2% */
      {"zb-6.2b", 6.2e9, 0.124e9},   {"zb-14.6b", 14.6e9, 0.292e9}, {"zb-28.3b", 28.3e9, 0.566e9},
  };
  for (size_t i = 0; i < sizeof known / sizeof *known; i++) {
    kt_plan_model m;
    kt_error err;
    NEED(kt_plan_model_preset(known[i].name, &m, &err) == KT_OK);
    CHECK_MSG(fabs(kt_plan_model_params(&m) - known[i].params) <= known[i].tol, "%s: %.0f vs %.0f",
              known[i].name, kt_plan_model_params(&m), known[i].params);
    CHECK_EQ_INT(m.n_layers, m.blocks + 2);
    kt_plan_model_free(&m);
  }
}

/* The planner's per-rank peak (from the schedule's order) equals the
 * simulator's peak_memory with the same per-stage bytes, for every schedule. */
static void test_rank_peaks_match_simulator(void) {
  kt_plan_model m;
  kt_error err;
  NEED(kt_plan_model_preset("gpt2-350m", &m, &err) == KT_OK);
  kt_plan_cluster c;
  kt_plan_cluster_default(&c);
  c.mem_bytes = 1e15; /* everything fits: compare the numbers only */
  kt_plan_options o;
  kt_plan_options_default(&o);
  static const struct {
    kt_gen_kind kind;
    int v, m;
  } cases[] = {{KT_SCHED_GPIPE, 1, 6},       {KT_SCHED_1F1B, 1, 8},
               {KT_SCHED_INTERLEAVED, 2, 8}, {KT_SCHED_INTERLEAVED, 3, 4},
               {KT_SCHED_LOOPED_BFS, 2, 5},  {KT_SCHED_ZB_H1, 1, 8},
               {KT_SCHED_ZB_H2, 1, 9},       {KT_SCHED_ZBV, 2, 8}};
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    for (int rc = 0; rc < KT_RECOMPUTE_COUNT; rc++) {
      kt_plan_config cfg = {.p = 4,
                            .d = 2,
                            .t = 1,
                            .v = cases[k].v,
                            .m = cases[k].m,
                            .b = 2,
                            .k = 1,
                            .schedule = cases[k].kind,
                            .recompute = (kt_recompute)rc};
      c.devices = 8;
      kt_plan_result r;
      NEED(kt_plan_evaluate(&m, &c, &o, &cfg, &r, &err) == KT_OK);
      int S = cfg.p * cfg.v, sum = 0, inflight[4], peak = 0;
      double mem[4];
      for (int j = 0; j < S; j++) {
        CHECK(r.partition[j] >= 1);
        sum += r.partition[j];
      }
      CHECK_EQ_INT(sum, m.n_layers);
      NEED(plan_recheck_memory(&m, &c, &o, &r, mem, inflight) == 0);
      for (int q = 0; q < cfg.p; q++) {
        CHECK_MSG(fabs(r.mem_rank[q] - mem[q]) <= 1e-9 * mem[q],
                  "%s V=%d M=%d rank %d: planner %.6g vs simulator %.6g",
                  kt_gen_kind_name(cfg.schedule), cfg.v, cfg.m, q, r.mem_rank[q], mem[q]);
        if (inflight[q] > peak) peak = inflight[q];
      }
      CHECK_EQ_INT(r.peak_inflight, peak);
      kt_plan_result_free(&r);
    }
  }
  /* 1F1B keeps P - r micro-batches on rank r; GPipe keeps all M */
  kt_plan_config cfg = {
      .p = 4, .d = 2, .t = 1, .v = 1, .m = 8, .b = 1, .k = 1, .schedule = KT_SCHED_1F1B};
  kt_plan_result r1, rg;
  NEED(kt_plan_evaluate(&m, &c, &o, &cfg, &r1, &err) == KT_OK);
  cfg.schedule = KT_SCHED_GPIPE;
  NEED(kt_plan_evaluate(&m, &c, &o, &cfg, &rg, &err) == KT_OK);
  CHECK_EQ_INT(r1.peak_inflight, 4);
  CHECK_EQ_INT(rg.peak_inflight, 8);
  CHECK_NEAR((rg.mem_rank[1] - rg.mem_state[1]) / (r1.mem_rank[1] - r1.mem_state[1]), 8.0 / 3,
             1e-12);
  kt_plan_result_free(&r1);
  kt_plan_result_free(&rg);
  kt_plan_model_free(&m);
}

/* A tied head shares the embedding's table on the rank that holds both. */
static void test_tied_head(void) {
  kt_plan_model m;
  kt_error err;
  NEED(kt_plan_model_preset("gpt2-124m", &m, &err) == KT_OK);
  kt_plan_cluster c;
  kt_plan_cluster_default(&c);
  kt_plan_options o;
  kt_plan_options_default(&o);
  kt_plan_config cfg = {
      .p = 1, .d = 8, .t = 1, .v = 1, .m = 4, .b = 1, .k = 1, .schedule = KT_SCHED_1F1B};
  kt_plan_result r;
  NEED(kt_plan_evaluate(&m, &c, &o, &cfg, &r, &err) == KT_OK);
  CHECK_NEAR(r.mem_state[0], 124439808.0 * 16, 1);
  kt_plan_result_free(&r);
  /* zbv puts stage 0 and the last stage on rank 0: one table there; 1f1b keeps two copies */
  cfg = (kt_plan_config){
      .p = 2, .d = 4, .t = 1, .v = 2, .m = 8, .b = 1, .k = 1, .schedule = KT_SCHED_ZBV};
  NEED(kt_plan_evaluate(&m, &c, &o, &cfg, &r, &err) == KT_OK);
  double table = 50257.0 * 768;
  CHECK_NEAR(r.mem_state[0] + r.mem_state[1], (124439808.0) * 16, 1);
  kt_plan_result_free(&r);
  cfg = (kt_plan_config){
      .p = 2, .d = 4, .t = 1, .v = 1, .m = 8, .b = 1, .k = 1, .schedule = KT_SCHED_1F1B};
  NEED(kt_plan_evaluate(&m, &c, &o, &cfg, &r, &err) == KT_OK);
  CHECK_NEAR(r.mem_state[0] + r.mem_state[1], (124439808.0 + table) * 16, 1);
  kt_plan_result_free(&r);
  kt_plan_model_free(&m);
}

int main(void) {
  test_tied_head();
  test_model_states();
  test_activation_formula();
  test_layer_costs();
  test_preset_params();
  test_rank_peaks_match_simulator();
  return kt_test_done(__FILE__);
}
