/* What the runtime measures of an action's own time (cpu_time: the thread's
 * CPU time for a real model, the sleep of a synthetic one) and the
 * straggler fault (slow_rank, slow_factor): the slow rank's actions take
 * that many times their time, measured on the rank itself; the others are
 * untouched. Bad values are refused naming them. */
#include "check.h"
#include "kaiten/generators.h"
#include "kaiten/runtime.h"

/* Mean cpu_time and mean duration (minus the wait for input) of rank r's
 * events of the last step. */
static void rank_means(const kt_timeline *tl, int r, double *cpu, double *wall) {
  double c = 0, w = 0;
  int n = 0;
  for (size_t i = 0; i < tl->n_events; i++) {
    const kt_event *e = &tl->events[i];
    if (e->rank != r) continue;
    c += e->cpu_time, w += e->end - e->start, n++;
  }
  *cpu = n ? c / n : 0, *wall = n ? w / n : 0;
}

static kt_runtime *make(const kt_schedule *s, int synthetic, int slow_rank, double factor,
                        kt_error *err) {
  kt_runtime_config cfg;
  kt_runtime_config_default(&cfg);
  cfg.schedule = s;
  cfg.synthetic = synthetic;
  cfg.syn_tf_ms = cfg.syn_tb_ms = cfg.syn_tw_ms = 2;
  cfg.syn_act_bytes = 64;
  kt_model_config_default(&cfg.model, KT_MODEL_MLP);
  cfg.model.layers = 4;
  cfg.model.hidden = 512;
  cfg.micro_batch = 64;
  cfg.slow_rank = slow_rank;
  cfg.slow_factor = factor;
  cfg.pin_threads = 0;
  kt_runtime *rt = NULL;
  if (kt_runtime_create_threads(&cfg, &rt, err)) return NULL;
  return rt;
}

/* Steps twice (the first warms up) and returns rank r's means. */
static int measure(kt_runtime *rt, int r, int m, double *cpu, double *wall, kt_error *err) {
  static float x[64 * 512 * 8], y[64 * 512 * 8];
  for (size_t i = 0; i < sizeof x / sizeof *x; i++)
    x[i] = (float)((i * 7919) % 13) / 13.0f, y[i] = 0.5f;
  kt_microbatch mbs[8];
  for (int j = 0; j < m; j++)
    mbs[j] = (kt_microbatch){.b = 64, .x = x + (size_t)j * 64 * 512, .y = y + (size_t)j * 64 * 512};
  kt_step_result res;
  for (int step = 0; step < 2; step++)
    if (kt_runtime_step(rt, step, mbs, 1, &res, err)) return -1;
  rank_means(kt_runtime_timeline(rt), r, cpu, wall);
  return 0;
}

int main(void) {
  kt_blas_choose_core();
  /* the CPU time of an action is its thread's: BLAS must not hand work to
   * helper threads (train runs one BLAS thread per rank when ranks fill
   * the cores, the case where a thread waits for a core) */
  kt_blas_set_threads(1);
  kt_error err;
  kt_schedule s;
  kt_gen_params params = {.p = 2, .m = 4};
  REQUIRE(kt_generate(KT_SCHED_1F1B, &params, &s, &err) == KT_OK);
  double cpu0, wall0, cpu1, wall1;

  /* synthetic: 2 ms per action (a B is 4 ms) on rank 0; 2.5x on rank 1.
   * CPU times are exact; the wall time can only grow on a loaded machine,
   * so its upper bound gets three tries */
  for (int try = 1; try <= 3; try++) {
    kt_runtime *rt = make(&s, 1, 1, 2.5, &err);
    REQUIRE(rt != NULL);
    REQUIRE(measure(rt, 0, 4, &cpu0, &wall0, &err) == 0);
    REQUIRE(measure(rt, 1, 4, &cpu1, &wall1, &err) == 0);
    kt_runtime_destroy(rt);
    CHECK_NEAR(cpu0, 3e-3, 1e-9); /* F 2 ms, B 4 ms: a mean of 3 ms */
    CHECK_NEAR(cpu1, 2.5 * 3e-3, 1e-9);
    CHECK_MSG(wall1 >= 0.98 * cpu1, "rank 1 takes %.4g s for %.4g", wall1, cpu1);
    if (wall1 < cpu1 + 5e-3 || try == 3) {
      CHECK_MSG(wall1 < cpu1 + 5e-3, "rank 1 takes %.4g s for %.4g", wall1, cpu1);
      break;
    }
  }

  /* a real model: cpu_time is the thread's CPU time, within the wall time;
   * the straggler burns 3x its own. Two runs on a shared machine: the same
   * work's CPU time varies (caches, clock), so the bounds are loose and the
   * ratios get three tries; the synthetic case above is exact */
  for (int try = 1; try <= 3; try++) {
    double base_cpu, base_wall, slow_cpu, slow_wall;
    kt_runtime *rt = make(&s, 0, -1, 1, &err);
    REQUIRE(rt != NULL);
    REQUIRE(measure(rt, 1, 4, &base_cpu, &base_wall, &err) == 0);
    kt_runtime_destroy(rt);
    CHECK(base_cpu > 0);
    CHECK_MSG(base_cpu <= base_wall * 1.02 + 1e-4, "cpu %.4g s over wall %.4g s", base_cpu,
              base_wall);
    rt = make(&s, 0, 1, 3, &err);
    REQUIRE(rt != NULL);
    REQUIRE(measure(rt, 1, 4, &slow_cpu, &slow_wall, &err) == 0);
    REQUIRE(measure(rt, 0, 4, &cpu0, &wall0, &err) == 0);
    kt_runtime_destroy(rt);
    CHECK_MSG(slow_wall >= 0.98 * slow_cpu, "slow rank's wall %.4g s under its cpu %.4g s",
              slow_wall, slow_cpu);
    int ratios = slow_cpu > 2 * base_cpu && slow_cpu < 4.5 * base_cpu && cpu0 < 1.6 * base_cpu;
    if (ratios || try == 3) {
      CHECK_MSG(slow_cpu > 2 * base_cpu && slow_cpu < 4.5 * base_cpu,
                "slow rank's cpu %.4g s vs %.4g s unslowed: expected 3x", slow_cpu, base_cpu);
      CHECK_MSG(cpu0 < 1.6 * base_cpu, "rank 0 slowed too: %.4g s", cpu0);
      break;
    }
  }

  /* bad values name themselves */
  CHECK(make(&s, 1, 2, 2, &err) == NULL);
  CHECK_STR_CONTAINS(err.msg, "slow rank 2");
  CHECK(make(&s, 1, 0, 0.5, &err) == NULL);
  CHECK_STR_CONTAINS(err.msg, "slow factor 0.5");
  kt_schedule_free(&s);
  return kt_test_done(__FILE__);
}
