/* A new plan between steps (kt_runtime_replan): another order, and units
 * moved between ranks with their weights and optimizer state, change no
 * arithmetic: the losses and the weights are bitwise those of a run that
 * had the new plan (or the old one) from the start, on the GPT (tied
 * embeddings, clipping, AdamW; D = 1 and 2) and the MLP (SGD with
 * momentum); a synthetic model of units moves them too; a plan is refused
 * while steps are in flight, for another layout or a model without units. */
#include "check.h"
#include "kaiten/generators.h"
#include "kaiten/runtime.h"

#define STEPS 6
#define SWITCH 2 /* the new plan runs from this step on */

static int tokens[64 * 8], targets[64 * 8];

static kt_model_config gpt(void) {
  kt_model_config m;
  kt_model_config_default(&m, KT_MODEL_GPT);
  m.layers = 6; /* 8 units */
  m.hidden = 16;
  m.heads = 2;
  m.seq_len = 8;
  m.tie_embeddings = 1;
  m.seed = 5;
  return m;
}

static kt_model_config mlp(void) {
  kt_model_config m;
  kt_model_config_default(&m, KT_MODEL_MLP);
  m.layers = 8;
  m.hidden = 8;
  m.seed = 9;
  return m;
}

/* The micro-batches of step k (D replicas of M each, b samples). */
static void batch(const kt_model_config *m, int D, int M, int b, int k, kt_microbatch *mbs,
                  float *xy) {
  int T = m->seq_len;
  for (int i = 0; i < D * M; i++) {
    if (m->kind == KT_MODEL_GPT) {
      int at = ((k * 3 + i) % 8) * b * T;
      mbs[i] = (kt_microbatch){.b = b, .tokens = tokens + at, .targets = targets + at};
    } else {
      float *x = xy + (size_t)i * 2 * b * m->hidden;
      for (int j = 0; j < 2 * b * m->hidden; j++)
        x[j] = (float)(((j + 7 * i) % 17) - 8) / 8.0f; /* the same every step */
      mbs[i] = (kt_microbatch){.b = b, .x = x, .y = x + b * m->hidden};
    }
  }
}

typedef struct {
  kt_model_config model;
  kt_optim_config optim;
  int p, m, d;
  kt_gen_kind kind[2];
  const int *part[2]; /* the plan before SWITCH and from it (NULL: balanced) */
} plan_run;

/* Every unit's parameters in order (replica 0), into out (n floats). */
static size_t weights(kt_runtime *rt, float *out) {
  size_t n = 0;
  int S = kt_schedule_stages(kt_runtime_config_of(rt)->schedule);
  for (int s = 0; s < S; s++) {
    size_t k;
    float *p = kt_chunk_params(kt_runtime_chunk(rt, s, 0), &k);
    if (out) memcpy(out + n, p, k * sizeof *p);
    n += k;
  }
  return n;
}

/* Runs STEPS steps (the second plan from SWITCH on): losses and weights. */
static int run(const plan_run *pr, double *loss, float *w, size_t *nw) {
  kt_error err = {{0}};
  kt_schedule s[2];
  for (int i = 0; i < 2; i++) {
    kt_gen_params gp = {.p = pr->p, .m = pr->m};
    if (kt_generate(pr->kind[i], &gp, &s[i], &err)) return fprintf(stderr, "%s\n", err.msg), -1;
  }
  kt_runtime_config rc;
  kt_runtime_config_default(&rc);
  rc.schedule = &s[0], rc.model = pr->model, rc.optim = pr->optim, rc.data_parallel = pr->d;
  rc.partition = pr->part[0], rc.micro_batch = 2;
  kt_runtime *rt;
  int bad = kt_runtime_create_threads(&rc, &rt, &err) != KT_OK;
  static kt_microbatch mbs[64];
  static float xy[64 * 2 * 2 * 8];
  for (int k = 0; !bad && k < STEPS; k++) {
    if (k == SWITCH && kt_runtime_replan(rt, &s[1], pr->part[1], &err)) bad = 1;
    batch(&pr->model, pr->d, pr->m, 2, k, mbs, xy);
    kt_step_result res;
    if (!bad && kt_runtime_step(rt, k, mbs, 1, &res, &err)) bad = 1;
    loss[k] = res.loss;
  }
  if (bad) fprintf(stderr, "run: %s\n", err.msg);
  if (!bad) *nw = weights(rt, w);
  if (rt) kt_runtime_destroy(rt);
  kt_schedule_free(&s[0]);
  kt_schedule_free(&s[1]);
  return bad ? -1 : 0;
}

/* The run switching plans against runs that keep the old or the new one. */
static void bitwise(plan_run pr, const char *what) {
  static float w[3][200000];
  double loss[3][STEPS];
  size_t nw[3] = {0};
  plan_run keep_old = pr, keep_new = pr;
  keep_old.kind[1] = pr.kind[0], keep_old.part[1] = pr.part[0];
  keep_new.kind[0] = pr.kind[1], keep_new.part[0] = pr.part[1];
  REQUIRE_VOID(run(&pr, loss[0], w[0], &nw[0]) == 0);
  REQUIRE_VOID(run(&keep_old, loss[1], w[1], &nw[1]) == 0);
  REQUIRE_VOID(run(&keep_new, loss[2], w[2], &nw[2]) == 0);
  for (int r = 1; r < 3; r++) {
    for (int k = 0; k < STEPS; k++)
      CHECK_MSG(memcmp(&loss[0][k], &loss[r][k], sizeof(double)) == 0,
                "%s: step %d loss %.17g vs %.17g", what, k, loss[0][k], loss[r][k]);
    CHECK_EQ_INT(nw[0], nw[r]);
    CHECK_MSG(nw[0] == nw[r] && memcmp(w[0], w[r], nw[0] * sizeof(float)) == 0,
              "%s: weights differ", what);
  }
  CHECK_MSG(loss[0][STEPS - 1] < loss[0][0], "%s: loss %g then %g", what, loss[0][0],
            loss[0][STEPS - 1]);
}

static void refusals(void) {
  kt_error err = {{0}};
  kt_schedule s, other;
  kt_gen_params gp = {.p = 2, .m = 4};
  REQUIRE_VOID(kt_generate(KT_SCHED_1F1B, &gp, &s, &err) == KT_OK);
  gp.p = 4;
  REQUIRE_VOID(kt_generate(KT_SCHED_1F1B, &gp, &other, &err) == KT_OK);
  kt_runtime_config rc;
  kt_runtime_config_default(&rc);
  rc.schedule = &s, rc.synthetic = 1, rc.syn_tf_ms = rc.syn_tb_ms = rc.syn_tw_ms = 0.1;
  rc.syn_act_bytes = 64, rc.syn_units = 6,
  rc.syn_grad_bytes = 4 * 9; /* 9 floats a stage: 3 a unit */
  kt_runtime *rt;
  REQUIRE_VOID(kt_runtime_create_threads(&rc, &rt, &err) == KT_OK);
  const int *off = kt_runtime_unit_offsets(rt);
  CHECK_EQ_INT(off[1], 3);
  CHECK(kt_runtime_replan(rt, &other, NULL, &err) == KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "P=2");
  int part[2] = {2, 3};
  CHECK(kt_runtime_replan(rt, &s, part, &err) == KT_EINVAL); /* 5 of 6 units */
  /* steps in flight: refused until the last one is taken and flushed */
  CHECK(kt_runtime_submit(rt, 0, NULL, 1, 1, 0, 0, &err) == KT_OK);
  CHECK(kt_runtime_submit(rt, 1, NULL, 1, 1, 0, 0, &err) == KT_OK);
  int moved[2] = {4, 2};
  CHECK(kt_runtime_replan(rt, &s, moved, &err) == KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "between steps");
  kt_step_result res;
  CHECK(kt_runtime_complete(rt, &res, &err) == KT_OK);
  CHECK(kt_runtime_flush(rt, &err) == KT_OK);
  CHECK(kt_runtime_complete(rt, &res, &err) == KT_OK);
  CHECK_MSG(kt_runtime_replan(rt, &s, moved, &err) == KT_OK, "%s", err.msg);
  CHECK_EQ_INT(kt_runtime_unit_offsets(rt)[1], 4);
  size_t n;
  kt_chunk_params(kt_runtime_chunk(rt, 0, 0), &n);
  CHECK_EQ_INT(n, 4 * 3); /* 4 units of 3 gradient floats */
  CHECK(kt_runtime_step(rt, 2, NULL, 1, &res, &err) == KT_OK);
  kt_runtime_destroy(rt);
  rc.syn_units = 0; /* one unit per stage: nothing to move */
  REQUIRE_VOID(kt_runtime_create_threads(&rc, &rt, &err) == KT_OK);
  CHECK(kt_runtime_replan(rt, &s, moved, &err) == KT_EINVAL);
  CHECK(kt_runtime_replan(rt, &s, NULL, &err) == KT_OK); /* an order alone is fine */
  kt_runtime_destroy(rt);
  kt_schedule_free(&s);
  kt_schedule_free(&other);
}

int main(void) {
  for (int i = 0; i < 64 * 8; i++) tokens[i] = (i * 37 + 11) % 256, targets[i] = (i * 53 + 7) % 256;
  static const int p2a[] = {6, 2}, p2b[] = {2, 6}, p4a[] = {1, 1, 1, 5}, p4b[] = {3, 2, 2, 1};
  kt_optim_config adam;
  kt_optim_config_default(&adam);
  adam.lr = 3e-3, adam.grad_clip = 0.5, adam.weight_decay = 0.1;
  plan_run g = {.model = gpt(),
                .optim = adam,
                .p = 2,
                .m = 4,
                .d = 1,
                .kind = {KT_SCHED_1F1B, KT_SCHED_ZB_H1},
                .part = {p2a, p2b}};
  bitwise(g, "gpt P=2");
  g.p = 4, g.part[0] = p4a, g.part[1] = p4b, g.kind[1] = KT_SCHED_GPIPE;
  bitwise(g, "gpt P=4");
  g.p = 2, g.d = 2, g.part[0] = p2a, g.part[1] = p2b;
  bitwise(g, "gpt P=2 D=2");
  kt_optim_config sgd;
  kt_optim_config_default(&sgd);
  sgd.kind = KT_OPTIM_SGD, sgd.lr = 0.05, sgd.momentum = 0.9;
  plan_run m = {.model = mlp(),
                .optim = sgd,
                .p = 4,
                .m = 4,
                .d = 1,
                .kind = {KT_SCHED_ZB_H1, KT_SCHED_1F1B},
                .part = {p4b, p4a}};
  bitwise(m, "mlp P=4");
  refusals();
  return kt_test_done(__FILE__);
}
