/* Planner specs: model and cluster JSON, presets with overrides, explicit
 * layer lists, and one-line errors naming the bad field. */
#include "plan_check.h"

static void test_model_json(void) {
  kt_plan_model m;
  kt_error err;
  /* shapes: kv_heads defaults to heads, ffn to 4h */
  NEED(kt_plan_model_parse("{\"name\": \"t\", \"blocks\": 3, \"hidden\": 64, \"heads\": 4, "
                           "\"vocab\": 100, \"seq_len\": 16}",
                           &m, &err) == KT_OK);
  CHECK(m.transformer);
  CHECK_EQ_INT(m.n_layers, 5);
  CHECK_EQ_INT(m.kv_heads, 4);
  CHECK_EQ_INT(m.ffn, 256);
  CHECK(m.layers[0].kind == KT_LAYER_EMBED && m.layers[4].kind == KT_LAYER_HEAD);
  CHECK(!strcmp(m.name, "t"));
  /* params: embedding v*h, blocks 12h^2 + 13h, head v*h + 2h (untied) */
  CHECK_NEAR(kt_plan_model_params(&m), 100 * 64 + 3 * (12 * 64 * 64 + 13 * 64) + 100 * 64 + 128, 0);
  kt_plan_model_free(&m);
  /* "layers" as a count means blocks; a preset with overrides */
  NEED(kt_plan_model_parse("{\"preset\": \"llama-7b\", \"seq_len\": 4096, \"layers\": 16}", &m,
                           &err) == KT_OK);
  CHECK_EQ_INT(m.blocks, 16);
  CHECK_EQ_INT(m.seq_len, 4096);
  CHECK_EQ_INT(m.ffn, 11008);
  CHECK(m.swiglu);
  CHECK(!strcmp(m.name, "llama-7b"));
  kt_plan_model_free(&m);
  /* explicit layers with repeat; out_bytes carries over, wgrad defaults to act */
  NEED(kt_plan_model_parse("{\"layers\": [{\"name\": \"in\", \"params\": 10, \"out_bytes\": 7},"
                           " {\"name\": \"mid\", \"repeat\": 3, \"flops\": 5, \"act_bytes\": 2}]}",
                           &m, &err) == KT_OK);
  CHECK(!m.transformer);
  CHECK_EQ_INT(m.n_layers, 4);
  CHECK_NEAR(m.layers[3].out_bytes, 7, 0);
  CHECK_NEAR(m.layers[2].wgrad_bytes, 2, 0);
  CHECK_NEAR(kt_plan_model_params(&m), 10, 0);
  /* an explicit list has no sequence length to change */
  CHECK(kt_plan_model_set_seq_len(&m, 128, &err) == KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "128");
  kt_plan_model_free(&m);
}

static void test_model_errors(void) {
  static const struct {
    const char *json, *needle;
  } bad[] = {
      {"{\"blocks\": 2, \"hidden\": 60, \"heads\": 7, \"vocab\": 10, \"seq_len\": 8}", "heads=7"},
      {"{\"blocks\": 2, \"hidden\": 64, \"heads\": 4, \"kv_heads\": 3, \"vocab\": 10, "
       "\"seq_len\": 8}",
       "kv_heads=3"},
      {"{\"blocks\": 2, \"hidden\": 64, \"heads\": 4, \"seq_len\": 8}", "vocab"},
      {"{\"blocks\": -2, \"hidden\": 64}", "\"blocks\""},
      {"{\"blocks\": 2.5, \"hidden\": 64}", "2.5"},
      {"{\"blocks\": \"many\"}", "\"blocks\""},
      {"{\"hiden\": 64}", "\"hiden\""},
      {"{\"preset\": \"gpt5\"}", "gpt5"},
      {"{\"ffn_type\": \"relu\"}", "ffn_type"},
      {"{\"layers\": []}", "empty"},
      {"{\"layers\": [{\"flops\": -1}]}", "layer 0"},
      {"{\"layers\": [{\"flop\": 1}]}", "\"flop\""},
      {"{\"layers\": [1, 2]}", "objects"},
      {"[1, 2]", "object"},
      {"{\"blocks\": 2,", "malformed"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    kt_plan_model m;
    kt_error err = {{0}};
    kt_status st = kt_plan_model_parse(bad[i].json, &m, &err);
    CHECK_MSG(st == KT_EINVAL || st == KT_EPARSE, "accepted %s", bad[i].json);
    CHECK_STR_CONTAINS(err.msg, bad[i].needle);
    CHECK(!strchr(err.msg, '\n'));
  }
  kt_plan_model m;
  kt_error err;
  CHECK(kt_plan_model_load("no-such-preset", &m, &err) == KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "no-such-preset");
  CHECK_STR_CONTAINS(err.msg, "llama-7b"); /* lists the presets */
  CHECK(kt_plan_model_load("/nonexistent/model.json", &m, &err) != KT_OK);
  CHECK_STR_CONTAINS(err.msg, "/nonexistent/model.json");
}

static void test_cluster_json(void) {
  kt_plan_cluster c;
  kt_error err;
  kt_plan_cluster_default(&c);
  CHECK_NEAR(kt_plan_cluster_flops(&c), 156e12, 1);
  NEED(kt_plan_cluster_parse("{\"devices\": 16, \"devices_per_node\": 4, \"mem_gb\": 40, "
                             "\"peak_tflops\": 100, \"efficiency\": 0.4, \"inter_bw_gbs\": 12.5, "
                             "\"inter_latency_us\": 20, \"inter_burst_kib\": 64}",
                             &c, &err) == KT_OK);
  CHECK_EQ_INT(c.devices, 16);
  CHECK_EQ_INT(c.devices_per_node, 4);
  CHECK_NEAR(c.mem_bytes, 40e9, 0);
  CHECK_NEAR(kt_plan_cluster_flops(&c), 40e12, 1);
  CHECK_NEAR(c.inter_bw, 12.5e9, 0);
  CHECK_NEAR(c.inter_latency, 20e-6, 1e-18);
  CHECK_NEAR(c.inter_burst, 65536, 0);
  CHECK_NEAR(c.intra_bw, 300e9, 0); /* untouched fields keep their values */
  /* a measured rate (kaiten calibrate, later) overrides peak x efficiency */
  NEED(kt_plan_cluster_parse("{\"achieved_tflops\": 55}", &c, &err) == KT_OK);
  CHECK_NEAR(kt_plan_cluster_flops(&c), 55e12, 1);
  static const struct {
    const char *json, *needle;
  } bad[] = {{"{\"mem_gb\": -1}", "mem_gb"},
             {"{\"devices\": 0}", "devices"},
             {"{\"efficiency\": 1.5}", "efficiency"},
             {"{\"intra_bw_gbs\": 0}", "bandwidths"},
             {"{\"mem_gb\": 10, \"mem_reserved_gb\": 20}", "reserved"},
             {"{\"bandwidth\": 1}", "\"bandwidth\""},
             {"{", "malformed"}};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    kt_plan_cluster_default(&c);
    CHECK_MSG(kt_plan_cluster_parse(bad[i].json, &c, &err) != KT_OK, "accepted %s", bad[i].json);
    CHECK_STR_CONTAINS(err.msg, bad[i].needle);
  }
  CHECK(kt_recompute_from_name("selective") == KT_RECOMPUTE_SELECTIVE);
  CHECK(kt_recompute_from_name("some") == -1);
  CHECK(!strcmp(kt_recompute_name(KT_RECOMPUTE_FULL), "full"));
}

int main(void) {
  test_model_json();
  test_model_errors();
  test_cluster_json();
  return kt_test_done(__FILE__);
}
