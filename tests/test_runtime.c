/* Runtime on threads, MLP model: gradients and losses of every schedule equal
 * the unpipelined model's; runs are bitwise reproducible; measured in-flight
 * counts equal the simulator's; the watchdog names a hung peer. */
#include "check.h"
#include "kaiten/generators.h"
#include "kaiten/runtime.h"
#include "kaiten/sim.h"

#define UNITS 8
#define H 16
#define BATCH 40 /* samples per replica per step (M = 1, 4, 8 and 10 divide it) */

static float X[4][BATCH * H], Y[4][BATCH * H]; /* per replica */

static void make_data(int steps_seed) {
  unsigned s = 12345u + (unsigned)steps_seed;
  for (int d = 0; d < 4; d++)
    for (int i = 0; i < BATCH * H; i++) {
      s = s * 1103515245u + 12345u;
      X[d][i] = ((float)((s >> 8) & 0xFFFF) / 32768.0f) - 1.0f;
      Y[d][i] = 0.5f * X[d][(i + 5) % (BATCH * H)] - 0.25f;
    }
}

/* Micro-batches for D replicas, K = 1, M micro-batches of BATCH/M samples. */
static void split(kt_microbatch *mbs, int D, int M) {
  int b = BATCH / M;
  for (int d = 0; d < D; d++)
    for (int j = 0; j < M; j++)
      mbs[d * M + j] =
          (kt_microbatch){.b = b, .x = X[d] + (size_t)j * b * H, .y = Y[d] + (size_t)j * b * H};
}

typedef struct {
  double loss[6];
  float grad[UNITS * (H * H + H)];
  double grad_norm;
} run_result;

static kt_model_config model(void) {
  kt_model_config m;
  kt_model_config_default(&m, KT_MODEL_MLP);
  m.layers = UNITS;
  m.hidden = H;
  m.seed = 7;
  return m;
}

/* One gradient step (no update) then `steps` SGD steps; returns 0 on success. */
static int run(const kt_schedule *s, int D, int steps, run_result *out, kt_error *err) {
  memset(out, 0, sizeof *out);
  kt_runtime_config cfg;
  kt_runtime_config_default(&cfg);
  cfg.schedule = s;
  cfg.data_parallel = D;
  cfg.micro_batch = BATCH / s->m;
  cfg.model = model();
  cfg.optim.kind = KT_OPTIM_SGD;
  cfg.optim.lr = 0.05;
  cfg.timeout = 20;
  kt_runtime *rt;
  if (kt_runtime_create_threads(&cfg, &rt, err)) return -1;
  kt_microbatch mbs[4 * BATCH];
  split(mbs, D, s->m);
  kt_step_result res;
  if (kt_runtime_step(rt, 0, mbs, 0, &res, err)) goto fail;
  out->grad_norm = res.grad_norm;
  const int *off = kt_runtime_unit_offsets(rt);
  for (int st = 0; st < s->p * s->v; st++) {
    kt_chunk *c = kt_runtime_chunk(rt, st, 0);
    size_t base = (size_t)off[st] * (H * H + H);
    size_t n;
    const float *g = kt_chunk_grads(c, &n);
    memcpy(out->grad + base, g, n * sizeof(float));
  }
  for (int i = 0; i < steps; i++) {
    if (kt_runtime_step(rt, i, mbs, 1, &res, err)) goto fail;
    out->loss[i] = res.loss;
  }
  kt_runtime_destroy(rt);
  return 0;
fail:
  kt_runtime_destroy(rt);
  return -1;
}

int main(void) {
  kt_blas_choose_core(); /* as kaiten's main does */
  kt_error err;
  make_data(0);
  const size_t NG = UNITS * (H * H + H);
  /* reference: one stage, whole batch in one micro-batch */
  kt_schedule ref_s;
  kt_gen_params rp = {.p = 1, .m = 1};
  REQUIRE(kt_generate(KT_SCHED_GPIPE, &rp, &ref_s, &err) == KT_OK);
  static run_result ref, got, again;
  REQUIRE(run(&ref_s, 1, 5, &ref, &err) == 0);
  kt_schedule_free(&ref_s);
  CHECK(ref.grad_norm > 0);
  CHECK(ref.loss[4] < ref.loss[0]);

  /* M = 5 and 10: not multiples of P = 2 or 4 (interleaved builds uneven groups) */
  int ps[] = {1, 2, 4}, ms[] = {1, 4, 5, 8, 10}, tested = 0;
  for (int k = 0; k < KT_SCHED_COUNT; k++)
    for (int pi = 0; pi < 3; pi++)
      for (int mi = 0; mi < 5; mi++) {
        kt_schedule s;
        kt_gen_params params = {.p = ps[pi], .m = ms[mi]};
        if (kt_generate((kt_gen_kind)k, &params, &s, &err)) continue;
        if (s.p * s.v > UNITS) {
          kt_schedule_free(&s);
          continue;
        }
        int rc = run(&s, 1, 5, &got, &err);
        CHECK_MSG(rc == 0, "%s P=%d M=%d: %s", s.name, s.p, s.m, err.msg);
        if (rc == 0) {
          tested++;
          double e = kt_test_rel_err(got.grad, ref.grad, NG);
          CHECK_MSG(e < 1e-5, "%s P=%d V=%d M=%d gradient rel err %.3g", s.name, s.p, s.v, s.m, e);
          for (int i = 0; i < 5; i++)
            CHECK_MSG(fabs(got.loss[i] - ref.loss[i]) <= 1e-5 * fabs(ref.loss[i]),
                      "%s P=%d M=%d step %d loss %.9g vs %.9g", s.name, s.p, s.m, i, got.loss[i],
                      ref.loss[i]);
        }
        kt_schedule_free(&s);
      }
  CHECK(tested >= 60);

  /* PyTorch's schedule files (imported, V and loop placements, both notations)
   * and an explicit placement train exactly like the unpipelined model */
  {
    const char *files[] = {"dualpipev_4rank_10mb.csv", "zb1p_2rank_2stagep_compute.csv",
                           "zb1p_2rank_2stagep_compute_legacy.csv", NULL};
    for (int f = 0; f < 4; f++) {
      kt_schedule s;
      if (files[f]) {
        REQUIRE(kt_schedule_parse_file(kt_test_data_path(files[f]), &s, &err) == KT_OK);
      } else {
        REQUIRE(kt_schedule_parse("0F0,1F0,0F1,1F1,1B0,0B0,1B1,0B1\n"
                                  "2F0,3F0,3B0,2B0,2F1,3F1,3B1,2B1\n",
                                  &s, &err) == KT_OK);
        CHECK_EQ_INT(s.placement, KT_PLACEMENT_EXPLICIT);
      }
      int rc = run(&s, 1, 5, &got, &err);
      CHECK_MSG(rc == 0, "%s: %s", files[f] ? files[f] : "explicit", err.msg);
      if (rc == 0) {
        double e = kt_test_rel_err(got.grad, ref.grad, NG);
        CHECK_MSG(e < 1e-5, "%s gradient rel err %.3g", files[f] ? files[f] : "explicit", e);
        for (int i = 0; i < 5; i++)
          CHECK_MSG(fabs(got.loss[i] - ref.loss[i]) <= 1e-5 * fabs(ref.loss[i]),
                    "%s step %d loss %.9g vs %.9g", files[f] ? files[f] : "explicit", i,
                    got.loss[i], ref.loss[i]);
      }
      kt_schedule_free(&s);
    }
  }

  /* bitwise reproducible, and the measured in-flight counts match the simulator */
  {
    kt_schedule s;
    kt_gen_params params = {.p = 4, .m = 8};
    REQUIRE(kt_generate(KT_SCHED_ZB_H2, &params, &s, &err) == KT_OK);
    REQUIRE(run(&s, 1, 3, &got, &err) == 0);
    REQUIRE(run(&s, 1, 3, &again, &err) == 0);
    CHECK(memcmp(got.grad, again.grad, sizeof got.grad) == 0);
    CHECK(memcmp(got.loss, again.loss, sizeof got.loss) == 0);
    kt_schedule_free(&s);
  }
  for (int k = 0; k < KT_SCHED_COUNT; k++) {
    kt_schedule s;
    kt_gen_params params = {.p = 4, .m = 8};
    if (kt_generate((kt_gen_kind)k, &params, &s, &err)) continue;
    if (s.p * s.v > UNITS) {
      kt_schedule_free(&s);
      continue;
    }
    kt_runtime_config cfg;
    kt_runtime_config_default(&cfg);
    cfg.schedule = &s;
    cfg.micro_batch = 1;
    cfg.model = model();
    kt_runtime *rt;
    REQUIRE(kt_runtime_create_threads(&cfg, &rt, &err) == KT_OK);
    kt_microbatch mbs[BATCH];
    split(mbs, 1, 8);
    kt_step_result res;
    REQUIRE(kt_runtime_step(rt, 0, mbs, 1, &res, &err) == KT_OK);
    kt_metrics measured, predicted;
    REQUIRE(kt_timeline_metrics(kt_runtime_timeline(rt), &measured, &err) == KT_OK);
    REQUIRE(kt_simulate_metrics(&s, NULL, &predicted, &err) == KT_OK);
    for (int r = 0; r < 4; r++)
      CHECK_MSG(measured.ranks[r].peak_inflight == predicted.ranks[r].peak_inflight,
                "%s rank %d in flight measured %d predicted %d", s.name, r,
                measured.ranks[r].peak_inflight, predicted.ranks[r].peak_inflight);
    kt_metrics_free(&measured);
    kt_metrics_free(&predicted);
    kt_runtime_destroy(rt);
    kt_schedule_free(&s);
  }

  /* data parallel on threads: D replicas on their own shards equal the
   * unpipelined model on the union of the shards */
  {
    static float XA[2 * BATCH * H], YA[2 * BATCH * H];
    memcpy(XA, X[0], sizeof X[0]);
    memcpy(XA + BATCH * H, X[1], sizeof X[1]);
    memcpy(YA, Y[0], sizeof Y[0]);
    memcpy(YA + BATCH * H, Y[1], sizeof Y[1]);
    kt_schedule s1;
    kt_gen_params p1 = {.p = 1, .m = 1};
    REQUIRE(kt_generate(KT_SCHED_GPIPE, &p1, &s1, &err) == KT_OK);
    kt_runtime_config cfg;
    kt_runtime_config_default(&cfg);
    cfg.schedule = &s1;
    cfg.micro_batch = 2 * BATCH;
    cfg.model = model();
    kt_runtime *rt;
    REQUIRE(kt_runtime_create_threads(&cfg, &rt, &err) == KT_OK);
    kt_microbatch whole = {.b = 2 * BATCH, .x = XA, .y = YA};
    kt_step_result res;
    REQUIRE(kt_runtime_step(rt, 0, &whole, 0, &res, &err) == KT_OK);
    static float gref[UNITS * (H * H + H)];
    memcpy(gref, kt_chunk_grads(kt_runtime_chunk(rt, 0, 0), NULL), sizeof gref);
    double loss_ref = res.loss;
    kt_runtime_destroy(rt);
    kt_schedule_free(&s1);
    kt_schedule s;
    kt_gen_params params = {.p = 2, .m = 4};
    REQUIRE(kt_generate(KT_SCHED_1F1B, &params, &s, &err) == KT_OK);
    REQUIRE(run(&s, 2, 1, &got, &err) == 0);
    double e = kt_test_rel_err(got.grad, gref, NG);
    CHECK_MSG(e < 1e-5, "D=2 gradient rel err %.3g", e);
    (void)loss_ref;
    kt_schedule_free(&s);
  }

  /* the watchdog with a hung peer: tests/test_faults.sh (KAITEN_TEST_HANG) */
  return kt_test_done(__FILE__);
}
