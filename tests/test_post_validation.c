/* Post-validation on the runtime (kaiten/runtime.h): steps submitted to run
 * ahead of their check, each followed by the next one or a flush, give
 * bitwise the losses, norms and weights of the same steps run with a
 * barrier, on the GPT with tied embeddings (the tie's exchange at every
 * step's end) at P=2 and P=4 with D=2 replicas:
 *   - with clipping that applies on some steps and not on others, the
 *     updates that ran ahead are rolled back (rollbacks >= 1);
 *   - with a NaN injected once into one rank's gradients (that step not
 *     applied, the next one run again);
 *   - a stop after a non-finite step (stop_on_nonfinite) cancels the step
 *     after it, which leaves the weights from before the bad one.
 * It runs under ThreadSanitizer with the other thread-runtime tests. */
#include "check.h"
#include "kaiten/generators.h"
#include "kaiten/runtime.h"

#define STEPS 12
#define BATCH 8
#define T 8

static int tokens[2][STEPS][BATCH * T], targets[2][STEPS][BATCH * T];

static void make_data(void) {
  unsigned s = 99;
  for (int d = 0; d < 2; d++)
    for (int k = 0; k < STEPS; k++)
      for (int i = 0; i < BATCH * T; i++) {
        s = s * 1103515245u + 12345u;
        tokens[d][k][i] = (int)((s >> 8) % 64);
        targets[d][k][i] = (int)((s >> 16) % 64);
      }
}

typedef struct {
  double loss[STEPS], norm[STEPS];
  int nonfinite[STEPS], rollbacks, cancelled, done;
  float *params; /* every stage's, replica 0, stage order */
  size_t n_params;
} run_out;

static void step_data(kt_microbatch *mbs, int D, int M, int step) {
  int b = BATCH / M;
  for (int d = 0; d < D; d++)
    for (int j = 0; j < M; j++)
      mbs[d * M + j] = (kt_microbatch){
          .b = b, .tokens = tokens[d][step] + j * b * T, .targets = targets[d][step] + j * b * T};
}

static void keep_params(kt_runtime *rt, int S, run_out *o) {
  o->n_params = 0;
  for (int s = 0; s < S; s++) {
    size_t n;
    kt_chunk_params(kt_runtime_chunk(rt, s, 0), &n);
    o->n_params += n;
  }
  o->params = malloc(o->n_params * sizeof(float));
  size_t at = 0;
  for (int s = 0; s < S && o->params; s++) {
    size_t n;
    const float *p = kt_chunk_params(kt_runtime_chunk(rt, s, 0), &n);
    memcpy(o->params + at, p, n * sizeof(float));
    at += n;
  }
}

/* STEPS steps of kind on P ranks, D replicas: ahead = run ahead of the check. */
static int run(kt_gen_kind kind, int P, int D, int ahead, double clip, int nan_step,
               int stop_nonfinite, run_out *o) {
  memset(o, 0, sizeof *o);
  kt_gen_params gp = {.p = P, .m = 4};
  kt_schedule s;
  kt_error err = {{0}};
  if (kt_generate(kind, &gp, &s, &err)) return fprintf(stderr, "%s\n", err.msg), -1;
  kt_runtime_config rc;
  kt_runtime_config_default(&rc);
  rc.schedule = &s;
  rc.data_parallel = D;
  rc.micro_batch = BATCH / s.m;
  kt_model_config_default(&rc.model, KT_MODEL_GPT);
  rc.model.layers = 2, rc.model.hidden = 16, rc.model.heads = 2, rc.model.seq_len = T;
  rc.model.vocab = 64, rc.model.tie_embeddings = 1, rc.model.seed = 5;
  rc.optim.grad_clip = clip;
  rc.nan_step = nan_step, rc.nan_rank = P - 1;
  rc.step_sync = ahead ? KT_STEP_OVERLAP : KT_STEP_BARRIER;
  rc.timeout = 30;
  kt_runtime *rt;
  if (kt_runtime_create_threads(&rc, &rt, &err)) {
    kt_schedule_free(&s);
    return fprintf(stderr, "%s\n", err.msg), -1;
  }
  kt_microbatch mbs[STEPS][2 * 4];
  kt_status st = KT_OK;
  int next = 0, taken = 0;
  while (!st && taken < STEPS) {
    /* ahead: two steps in flight (the next is there when a rank ends one);
     * a barrier: one at a time */
    while (!st && next < STEPS && next - taken < (ahead ? 2 : 1)) {
      step_data(mbs[next], D, s.m, next);
      st = kt_runtime_submit(rt, next, mbs[next], 1, ahead && next + 1 < STEPS, stop_nonfinite, 0,
                             &err);
      next++;
    }
    kt_step_result res;
    if (!st) st = kt_runtime_complete(rt, &res, &err);
    if (st) break;
    if (res.cancelled) {
      o->cancelled++;
    } else {
      o->loss[res.step] = res.loss, o->norm[res.step] = res.grad_norm;
      o->nonfinite[res.step] = res.nonfinite;
      o->rollbacks += res.rollbacks;
      o->done++;
    }
    taken++;
    if (res.nonfinite && stop_nonfinite) {
      while (!st && taken < next) { /* what is in flight ends (cancelled) */
        if (ahead && next == taken + 1) st = kt_runtime_flush(rt, &err);
        if (!st) st = kt_runtime_complete(rt, &res, &err);
        if (!st) o->cancelled += res.cancelled, taken++;
      }
      break;
    }
  }
  if (st) fprintf(stderr, "run: %s\n", err.msg);
  else keep_params(rt, kt_schedule_stages(&s), o);
  kt_runtime_destroy(rt);
  kt_schedule_free(&s);
  return st ? -1 : 0;
}

static void same(const run_out *a, const run_out *b, const char *what) {
  CHECK_MSG(a->done == b->done, "%s: %d and %d steps", what, a->done, b->done);
  int differ = -1;
  for (int k = 0; k < a->done && differ < 0; k++)
    if (memcmp(&a->loss[k], &b->loss[k], sizeof(double)) ||
        memcmp(&a->norm[k], &b->norm[k], sizeof(double)) || a->nonfinite[k] != b->nonfinite[k])
      differ = k;
  CHECK_MSG(differ < 0, "%s: step %d: loss %.17g vs %.17g, norm %.17g vs %.17g", what, differ,
            differ >= 0 ? a->loss[differ] : 0, differ >= 0 ? b->loss[differ] : 0,
            differ >= 0 ? a->norm[differ] : 0, differ >= 0 ? b->norm[differ] : 0);
  CHECK_MSG(a->n_params == b->n_params && a->params && b->params &&
                !memcmp(a->params, b->params, a->n_params * sizeof(float)),
            "%s: the weights differ", what);
}

static void free_out(run_out *o) { free(o->params); }

static void pair(kt_gen_kind kind, int P, int D, double clip, int nan_step, int stop,
                 int want_rollbacks, const char *what) {
  run_out a, b;
  if (run(kind, P, D, 1, clip, nan_step, stop, &a) ||
      run(kind, P, D, 0, clip, nan_step, stop, &b)) {
    CHECK_MSG(0, "%s: a run failed", what);
    return;
  }
  same(&a, &b, what);
  CHECK_MSG(b.rollbacks == 0, "%s: a barrier rolled back %d times", what, b.rollbacks);
  if (want_rollbacks) CHECK_MSG(a.rollbacks >= 1, "%s: no rollback", what);
  printf("%-40s %d steps, %d rollbacks, %d cancelled; norms", what, a.done, a.rollbacks,
         a.cancelled);
  for (int k = 0; k < a.done; k++) printf(" %.3g", a.norm[k]);
  printf("\n");
  if (stop)
    CHECK_MSG(a.done == nan_step + 1 && a.cancelled == 1 && b.cancelled == 0,
              "%s: %d steps done, %d cancelled (barrier %d)", what, a.done, a.cancelled,
              b.cancelled);
  free_out(&a), free_out(&b);
}

int main(void) {
  make_data();
  /* the norms of these runs are 0.72..1.08 (D = 1) and 0.56..0.79 (D = 2)
   * over the steps: clips of 0.9 and 0.7 apply on some steps and not on
   * others */
  pair(KT_SCHED_1F1B, 2, 1, 0, -1, 0, 0, "1f1b P=2, no clipping");
  pair(KT_SCHED_1F1B, 2, 1, 0.9, -1, 0, 1, "1f1b P=2, clipping on some steps");
  pair(KT_SCHED_ZB_H1, 4, 1, 0.9, -1, 0, 1, "zb-h1 P=4, clipping on some steps");
  pair(KT_SCHED_1F1B, 2, 2, 0.7, -1, 0, 1, "1f1b P=2 D=2, clipping on some steps");
  pair(KT_SCHED_ZB_H1, 4, 1, 0, 5, 0, 1, "zb-h1 P=4, a NaN at step 6");
  pair(KT_SCHED_1F1B, 2, 1, 0, 5, 1, 0, "1f1b P=2, a NaN stops the run");
  return kt_test_done(__FILE__);
}
