/* MLP chunk: units of Linear(H->H) + GELU, the model's last unit linear
 * (a regression head); its output is compared to the target with mean
 * squared error.
 * Legend: B = samples in the micro-batch, H = width.
 *
 * Stash per micro-batch, per unit u of the chunk:
 *   after F: x_u (B, H) input, z_u (B, H) pre-activation
 *   after I: x_u (B, H) input, dz_u (B, H) gradient of the pre-activation
 * With recompute, F keeps only the chunk input x_0 and I recomputes the rest. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn.h"

typedef struct {
  kt__stash stash;
  float *tmp_a, *tmp_b; /* (B, H) scratch */
  float *scratch;       /* recompute: transient forward activations (2 * units * B * H) */
  double last_loss;
} mlp_impl;

#define IMPL(c) ((mlp_impl *)(c)->impl)
#define UNIT_W(c, u) ((c)->params + (c)->unit_offset[u])
#define UNIT_B(c, u) (UNIT_W(c, u) + (size_t)(c)->cfg.hidden * (c)->cfg.hidden)
#define UNIT_DW(c, u) ((c)->grads + (c)->unit_offset[u])
#define UNIT_DB(c, u) (UNIT_DW(c, u) + (size_t)(c)->cfg.hidden * (c)->cfg.hidden)

/* The model's last unit is linear: the regression head. */
static int is_head(const kt_chunk *c, int u) { return c->first_unit + u == c->cfg.layers - 1; }

/* out = act(z) with act = GELU, or the identity on the head */
static void activate(const kt_chunk *c, int u, const float *z, float *out, size_t n) {
  if (is_head(c, u)) memcpy(out, z, n * sizeof(float));
  else kt__gelu_forward(out, z, n);
}

/* z = x W^T + b, out = act(z) */
static void unit_forward(kt_chunk *c, int u, const float *x, float *z, float *out) {
  int B = c->micro_batch, H = c->cfg.hidden;
  const float *bias = UNIT_B(c, u);
  for (int i = 0; i < B; i++) memcpy(z + (size_t)i * H, bias, sizeof(float) * (size_t)H);
  kt__matmul(z, x, UNIT_W(c, u), B, H, H, 0, 1, 1.0f);
  activate(c, u, z, out, (size_t)B * H);
}

/* Full forward of the chunk into the stash layout [x_0 z_0 x_1 z_1 ...]; out
 * receives the last activation. */
static void forward_all(kt_chunk *c, const float *in, float *stash, float *out) {
  size_t BH = (size_t)c->micro_batch * c->cfg.hidden;
  if (stash != in) memcpy(stash, in, BH * sizeof(float));
  for (int u = 0; u < c->n_units; u++) {
    float *x = stash + 2 * (size_t)u * BH, *z = x + BH;
    float *next = u + 1 < c->n_units ? z + BH : out;
    unit_forward(c, u, x, z, next);
  }
}

static kt_status mlp_forward(kt_chunk *c, int mb, const kt_microbatch *data, const float *in,
                             float *out, double *loss, kt_error *err) {
  mlp_impl *m = IMPL(c);
  int B = c->micro_batch, H = c->cfg.hidden;
  size_t BH = (size_t)B * H;
  if (c->is_first) {
    if (!data || !data->x) return kt_fail(err, KT_EINVAL, "mlp: first stage needs inputs");
    in = data->x;
  }
  size_t floats = c->cfg.recompute ? BH : 2 * (size_t)c->n_units * BH;
  float *stash = kt__stash_acquire(&m->stash, c, mb, floats);
  if (!stash) return kt_fail(err, KT_ENOMEM, "mlp: out of memory stashing micro-batch %d", mb);
  float *dst = c->is_last ? m->tmp_a : out;
  if (c->sizes_only) {
    if (loss) *loss = 0;
    return KT_OK;
  }
  if (c->cfg.recompute) {
    /* run through transient scratch, keep only the input */
    forward_all(c, in, m->scratch, dst);
    memcpy(stash, in, BH * sizeof(float));
  } else {
    forward_all(c, in, stash, dst);
  }
  if (c->is_last) {
    if (!data || !data->y) return kt_fail(err, KT_EINVAL, "mlp: last stage needs targets");
    double s = 0;
    for (size_t i = 0; i < BH; i++) {
      double d = (double)dst[i] - data->y[i];
      s += d * d;
    }
    m->last_loss = s / (double)BH;
    if (loss) *loss = m->last_loss;
  }
  return KT_OK;
}

/* Gradient of the loss (mean squared error over B*H) w.r.t. the last output. */
static void loss_grad(const kt_chunk *c, const float *out, const float *y, float *dout) {
  size_t BH = (size_t)c->micro_batch * c->cfg.hidden;
  float scale = 2.0f / (float)BH;
  for (size_t i = 0; i < BH; i++) dout[i] = scale * (out[i] - y[i]);
}

static kt_status mlp_backward_input(kt_chunk *c, int mb, const kt_microbatch *data,
                                    const float *dout, float *din, kt_error *err) {
  mlp_impl *m = IMPL(c);
  int B = c->micro_batch, H = c->cfg.hidden;
  size_t BH = (size_t)B * H;
  if (mb < 0 || mb >= c->n_microbatches || !m->stash.slot[mb])
    return kt_fail(err, KT_ERUNTIME, "mlp: backward for micro-batch %d without its forward", mb);
  float *stash = m->stash.slot[mb];
  if (c->sizes_only && !c->cfg.recompute) return KT_OK;
  if (c->cfg.recompute) {
    stash = kt__stash_acquire(&m->stash, c, mb, 2 * (size_t)c->n_units * BH);
    if (!stash) return kt_fail(err, KT_ENOMEM, "mlp: out of memory recomputing micro-batch %d", mb);
    if (c->sizes_only) return KT_OK;
    forward_all(c, stash, stash, m->tmp_a); /* the input is already in place */
  }
  /* gradient flowing into the last unit's output */
  float *g = m->tmp_a;
  if (c->is_last) {
    if (!data || !data->y) return kt_fail(err, KT_EINVAL, "mlp: last stage needs targets");
    /* recompute the final activation from the stashed z of the last unit */
    const float *zl = stash + (2 * (size_t)(c->n_units - 1) + 1) * BH;
    activate(c, c->n_units - 1, zl, m->tmp_b, BH);
    loss_grad(c, m->tmp_b, data->y, g);
  } else {
    if (!dout) return kt_fail(err, KT_EINVAL, "mlp: backward needs the output gradient");
    memcpy(g, dout, BH * sizeof(float));
  }
  for (int u = c->n_units - 1; u >= 0; u--) {
    float *z = stash + (2 * (size_t)u + 1) * BH; /* becomes dz */
    if (is_head(c, u)) {
      memcpy(z, g, BH * sizeof(float));
    } else { /* dz = gelu'(z) * g, through scratch (the kernel accumulates) */
      memset(m->tmp_b, 0, BH * sizeof(float));
      kt__gelu_backward(m->tmp_b, z, g, BH);
      memcpy(z, m->tmp_b, BH * sizeof(float));
    }
    if (u > 0 || din) {
      float *dx = u > 0 ? g : din;
      kt__matmul(dx, z, UNIT_W(c, u), B, H, H, 0, 0, 0.0f); /* dx = dz W */
    }
  }
  return KT_OK;
}

static kt_status mlp_backward_weight(kt_chunk *c, int mb, kt_error *err) {
  mlp_impl *m = IMPL(c);
  int B = c->micro_batch, H = c->cfg.hidden;
  size_t BH = (size_t)B * H;
  if (mb < 0 || mb >= c->n_microbatches || !m->stash.slot[mb])
    return kt_fail(err, KT_ERUNTIME,
                   "mlp: weight gradient for micro-batch %d without its input gradient", mb);
  const float *stash = m->stash.slot[mb];
  for (int u = 0; u < c->n_units && !c->sizes_only; u++) {
    const float *x = stash + 2 * (size_t)u * BH, *dz = x + BH;
    kt__matmul(UNIT_DW(c, u), dz, x, H, H, B, 1, 0, 1.0f); /* dW += dz^T x */
    float *db = UNIT_DB(c, u);
    for (int i = 0; i < B; i++)
      for (int j = 0; j < H; j++) db[j] += dz[(size_t)i * H + j];
  }
  kt__stash_release(&m->stash, c, mb);
  return KT_OK;
}

static void mlp_destroy(kt_chunk *c) {
  mlp_impl *m = IMPL(c);
  if (m) {
    kt__stash_free(&m->stash);
    free(m->tmp_a);
    free(m->tmp_b);
    free(m->scratch);
    free(m);
  }
  kt__chunk_free_common(c);
}

static const kt_chunk_ops mlp_ops = {mlp_forward, mlp_backward_input, mlp_backward_weight,
                                     mlp_destroy, NULL};

kt_status kt__mlp_chunk_create(const kt_model_config *cfg, int first_unit, int n_units,
                               int micro_batch, int n_microbatches, int sizes_only, kt_chunk **out,
                               kt_error *err) {
  kt_chunk *c;
  kt_status st =
      kt__chunk_alloc(cfg, first_unit, n_units, micro_batch, n_microbatches, sizes_only, &c, err);
  if (st) return st;
  c->ops = &mlp_ops;
  mlp_impl *m = calloc(1, sizeof *m);
  size_t BH = (size_t)micro_batch * cfg->hidden;
  if (m) {
    m->tmp_a = kt__alloc_floats(BH);
    m->tmp_b = kt__alloc_floats(BH);
    if (cfg->recompute) m->scratch = kt__alloc_floats(2 * (size_t)n_units * BH);
  }
  c->impl = m;
  if (!m || !m->tmp_a || !m->tmp_b || (cfg->recompute && !m->scratch) ||
      kt__stash_init(&m->stash, n_microbatches, err)) {
    mlp_destroy(c);
    return kt_fail(err, KT_ENOMEM, "out of memory creating the MLP chunk");
  }
  /* per-unit deterministic init (He): W ~ U(-sqrt(6/H), sqrt(6/H)), b = 0 */
  int H = cfg->hidden;
  float bound = sqrtf(6.0f / (float)H);
  for (int u = 0; u < n_units && !sizes_only; u++) {
    kt__rng r;
    kt__rng_seed(&r, kt__unit_seed(cfg->seed, first_unit + u));
    float *w = UNIT_W(c, u);
    for (size_t i = 0; i < (size_t)H * H; i++) w[i] = (2.0f * kt__rng_uniform(&r) - 1.0f) * bound;
  }
  *out = c;
  return KT_OK;
}
