/* kt_train_run's prediction after a new plan between steps: its costs are
 * calibrated on a step of the plan that runs at the end, never on one of
 * the plan before (units moved: each stage's costs changed with them). A
 * synthetic model of 8 units on P=2 runs 7 + 1 units a stage, then 4 + 4
 * for its last two steps: the calibrated F of the two stages must be
 * alike (4 units each), not 7 to 1. */
#include "check.h"
#include "kaiten/generators.h"
#include "kaiten/train.h"

#define STEPS 12
#define SWITCH 10 /* the new partition runs from this step on */

typedef struct {
  const kt_schedule *s;
  int switched;
} replan_ctx;

static kt_status between(void *ctx, kt_runtime *rt, int next, kt_error *err) {
  replan_ctx *c = ctx;
  static const int even[2] = {4, 4};
  if (next != SWITCH) return KT_OK;
  c->switched = 1;
  return kt_runtime_replan(rt, c->s, even, err);
}

int main(void) {
  kt_error err = {{0}};
  kt_schedule s;
  kt_gen_params gp = {.p = 2, .m = 4};
  REQUIRE(kt_generate(KT_SCHED_1F1B, &gp, &s, &err) == KT_OK);
  static const int uneven[2] = {7, 1};
  kt_runtime_config rc;
  kt_runtime_config_default(&rc);
  rc.schedule = &s, rc.synthetic = 1, rc.syn_tf_ms = rc.syn_tb_ms = rc.syn_tw_ms = 2;
  rc.syn_act_bytes = 64, rc.syn_units = 8, rc.syn_grad_bytes = 4 * 12;
  rc.partition = uneven, rc.step_sync = KT_STEP_BARRIER;
  kt_runtime *rt;
  if (kt_runtime_create_threads(&rc, &rt, &err)) fprintf(stderr, "%s\n", err.msg);
  REQUIRE(rt != NULL);
  replan_ctx ctx = {.s = &s};
  kt_train_config tc = {
      .runtime = *kt_runtime_config_of(rt), .steps = STEPS, .ctx = &ctx, .between_steps = between};
  kt_train_result res;
  kt_status st = kt_train_run(rt, &tc, &res, &err);
  if (st) fprintf(stderr, "%s\n", err.msg);
  REQUIRE(st == KT_OK);
  CHECK(ctx.switched);
  CHECK_EQ_INT(kt_runtime_unit_offsets(rt)[1], 4);
  REQUIRE(res.calibrated.stage_tf != NULL);
  double f0 = res.calibrated.stage_tf[0], f1 = res.calibrated.stage_tf[1];
  /* 4 units each: alike (7 to 1 when calibrated on a step before the switch) */
  CHECK_MSG(f0 > 0 && f1 > 0 && f0 < 2 * f1 && f1 < 2 * f0,
            "calibrated F per stage %.3g and %.3g ms: not the 4 + 4 units that run last", 1e3 * f0,
            1e3 * f1);
  kt_train_result_free(&res);
  kt_runtime_destroy(rt);
  kt_schedule_free(&s);
  return kt_test_done(__FILE__);
}
