/* Finite-difference check of the MLP chunk's gradients (whole model in one
 * chunk, and split in two), with and without recompute; a sizes-only chunk
 * holds the same stash bytes after F, I and W and computes nothing. */
#include "check.h"
#include "kaiten/model_impl.h"
#include "kaiten/model.h"

#define H 6
#define L 3
#define B 4

static float X[B * H], Y[B * H];

static double loss_of(kt_chunk *c, kt_microbatch *mb) {
  double loss;
  kt_error err;
  c->ops->forward(c, 0, mb, NULL, NULL, &loss, &err);
  c->ops->backward_input(c, 0, mb, NULL, NULL, &err); /* frees nothing yet */
  c->ops->backward_weight(c, 0, &err);                /* releases the stash */
  return loss;
}

/* Stash bytes (now, peak) after F, I and W of one micro-batch; *touched:
 * whether a gradient or the loss came out non-zero. Non-zero on failure. */
static int stash_after_ops(const kt_model_config *cfg, int sizes_only, kt_microbatch *mb,
                           size_t bytes[6], int *touched) {
  kt_chunk *c;
  kt_error err;
  REQUIRE((sizes_only ? kt_chunk_create_sizes_only(cfg, 0, L, B, 1, &c, &err)
                      : kt_chunk_create(cfg, 0, L, B, 1, &c, &err)) == KT_OK);
  for (size_t i = 0; i < c->n_params; i++) c->grads[i] = 0.0f;
  double loss = 0;
  REQUIRE(kt_chunk_forward(c, 0, mb, NULL, NULL, &loss, &err) == KT_OK);
  bytes[0] = kt_chunk_stash_bytes(c), bytes[1] = kt_chunk_peak_stash_bytes(c);
  REQUIRE(kt_chunk_backward_input(c, 0, mb, NULL, NULL, &err) == KT_OK);
  bytes[2] = kt_chunk_stash_bytes(c), bytes[3] = kt_chunk_peak_stash_bytes(c);
  REQUIRE(kt_chunk_backward_weight(c, 0, &err) == KT_OK);
  bytes[4] = kt_chunk_stash_bytes(c), bytes[5] = kt_chunk_peak_stash_bytes(c);
  *touched = loss != 0;
  for (size_t i = 0; i < c->n_params; i++) *touched |= c->grads[i] != 0.0f;
  kt_chunk_destroy(c);
  return 0;
}

int main(void) {
  for (int i = 0; i < B * H; i++) {
    X[i] = sinf(0.7f * i) * 0.9f;
    Y[i] = cosf(0.3f * i) * 0.5f;
  }
  kt_microbatch mb = {.b = B, .x = X, .y = Y};
  for (int rc = 0; rc < 2; rc++) {
    kt_model_config cfg;
    kt_model_config_default(&cfg, KT_MODEL_MLP);
    cfg.layers = L;
    cfg.hidden = H;
    cfg.recompute = rc;
    kt_chunk *c;
    kt_error err;
    REQUIRE(kt_chunk_create(&cfg, 0, L, B, 1, &c, &err) == KT_OK);
    kt_chunk_zero_grad(c);
    double loss;
    REQUIRE(c->ops->forward(c, 0, &mb, NULL, NULL, &loss, &err) == KT_OK);
    REQUIRE(c->ops->backward_input(c, 0, &mb, NULL, NULL, &err) == KT_OK);
    REQUIRE(c->ops->backward_weight(c, 0, &err) == KT_OK);
    float *g = malloc(c->n_params * sizeof(float));
    memcpy(g, c->grads, c->n_params * sizeof(float));
    double worst = 0;
    for (size_t i = 0; i < c->n_params; i++) {
      float keep = c->params[i];
      float h = 1e-2f;
      c->params[i] = keep + h;
      double lp = loss_of(c, &mb);
      c->params[i] = keep - h;
      double lm = loss_of(c, &mb);
      c->params[i] = keep;
      double fd = (lp - lm) / (2 * h);
      double e = fabs(fd - g[i]) / (fabs(fd) + fabs(g[i]) + 1e-3);
      if (e > worst) worst = e;
    }
    CHECK_MSG(worst < 2e-2, "recompute=%d worst relative error %.3g", rc, worst);
    printf("recompute=%d: worst relative error %.3g over %zu parameters\n", rc, worst, c->n_params);
    size_t real[6], dry[6];
    int real_touched, dry_touched;
    REQUIRE(!stash_after_ops(&cfg, 0, &mb, real, &real_touched));
    REQUIRE(!stash_after_ops(&cfg, 1, &mb, dry, &dry_touched));
    for (int k = 0; k < 6; k++)
      CHECK_MSG(real[k] == dry[k],
                "recompute=%d: stash byte count %d: %zu computing, %zu sizes only", rc, k, real[k],
                dry[k]);
    CHECK(real[1] > 0 && real_touched && !dry_touched);
    free(g);
    kt_chunk_destroy(c);
  }
  return kt_test_done(__FILE__);
}
