/* Fuzz target: the JSON inputs of the planner and the simulator. The same
 * text goes to the model spec, cluster spec and cost file parsers. */
#include "fuzz_common.h"
#include "kaiten/plan.h"
#include "kaiten/sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *json = fuzz_cstr(data, size);
  kt_error err;

  kt_plan_model model;
  if (kt_plan_model_parse(json, &model, &err) == KT_OK) {
    (void)kt_plan_model_params(&model);
    kt_plan_model_free(&model);
  }

  kt_plan_cluster cluster;
  kt_plan_cluster_default(&cluster);
  if (kt_plan_cluster_parse(json, &cluster, &err) == KT_OK &&
      kt_plan_cluster_check(&cluster, &err) == KT_OK)
    (void)kt_plan_cluster_flops(&cluster);

  kt_costs costs;
  kt_costs_default(&costs);
  if (kt_costs_parse_json(&costs, json, "fuzz", &err) == KT_OK &&
      kt_costs_check(&costs, costs.n_stages ? costs.n_stages : 1, &err) == KT_OK) {
    for (int s = 0; s < costs.n_stages; s++)
      for (int op = 0; op < KT_OP_COUNT; op++) (void)kt_cost_op(&costs, s, (kt_op)op);
    (void)kt_cost_comm(&costs);
  }
  kt_costs_free(&costs);
  free(json);
  return 0;
}
