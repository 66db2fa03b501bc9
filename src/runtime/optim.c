/* End of an optimizer step on one worker: tied-embedding gradients summed,
 * data-parallel all-reduce, one scaling by 1/(K*M*D), global-norm clipping,
 * then SGD or AdamW. Also the learning-rate schedule. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/internal.h"

static const char *const optim_names[] = {"sgd", "adamw"};
_Static_assert(sizeof optim_names / sizeof *optim_names == KT_OPTIM_COUNT, "optimizer table");

const char *kt_optim_name(kt_optim_kind k) {
  return (unsigned)k < KT_OPTIM_COUNT ? optim_names[k] : "?";
}

int kt_optim_from_name(const char *name) {
  return kt_name_index(name, optim_names, KT_OPTIM_COUNT);
}

void kt_optim_config_default(kt_optim_config *o) {
  memset(o, 0, sizeof *o);
  o->kind = KT_OPTIM_ADAMW;
  o->lr = 1e-3;
  o->beta1 = 0.9;
  o->beta2 = 0.95;
  o->eps = 1e-8;
  o->weight_decay = 0.0;
  o->min_lr_ratio = 0.1;
}

double kt_optim_lr(const kt_optim_config *o, int step) {
  if (o->warmup_steps > 0 && step < o->warmup_steps)
    return o->lr * (double)(step + 1) / (double)o->warmup_steps;
  if (o->decay_steps <= 0) return o->lr;
  int span = o->decay_steps - o->warmup_steps;
  if (span <= 0) return o->lr;
  double progress = (double)(step - o->warmup_steps) / span;
  if (progress > 1) progress = 1;
  double min_lr = o->lr * o->min_lr_ratio;
  return min_lr + 0.5 * (o->lr - min_lr) * (1 + cos(M_PI * progress));
}

/* Weight decay applies to matrices and embeddings, not to biases and
 * LayerNorm gains (the usual AdamW set); to every parameter of a chunk of
 * the caller's own. */
static kt_status build_decay_mask(kt__worker *w, int c, kt_error *err) {
  kt_chunk *ch = w->chunk[c];
  size_t n_params;
  kt_chunk_params(ch, &n_params);
  w->decay[c] = kt_calloc(n_params ? n_params : 1, 1);
  if (!w->decay[c]) return kt_fail(err, KT_ENOMEM, "out of memory");
  if (w->rt->cfg.synthetic) return KT_OK;
  if (w->rt->cfg.make_chunk) { /* a model of the caller's own: every parameter decays */
    memset(w->decay[c], 1, n_params);
    return KT_OK;
  }
  int first, n_units;
  const size_t *offset = kt_chunk_unit_offsets(ch, &first, &n_units);
  for (int u = 0; u < n_units; u++) {
    kt_param_tensor t[32];
    int n = kt_model_unit_tensors(kt_chunk_config(ch), first + u, t, 32);
    for (int i = 0; i < n && i < 32; i++)
      if (t[i].matrix) memset(w->decay[c] + offset[u] + t[i].offset, 1, t[i].size);
  }
  return KT_OK;
}

kt_status kt__optim_decay_masks(kt__worker *w, kt_error *err) {
  w->decay = kt_calloc((size_t)w->rt->V, sizeof *w->decay);
  if (!w->decay) return kt_fail(err, KT_ENOMEM, "out of memory");
  for (int c = 0; c < w->rt->V; c++) {
    kt_status st = build_decay_mask(w, c, err);
    if (st) return st;
  }
  return KT_OK;
}

kt_status kt__optim_alloc_state(kt__worker *w, kt_error *err) {
  const kt_optim_config *o = &w->rt->cfg.optim;
  kt_status st = kt__optim_decay_masks(w, err);
  if (st) return st;
  for (int c = 0; c < w->rt->V; c++) {
    size_t n;
    kt_chunk_params(w->chunk[c], &n);
    size_t per = o->kind == KT_OPTIM_ADAMW ? 2 : (o->momentum != 0 ? 1 : 0);
    w->opt_n[c] = per * n;
    if (per == 0) continue;
    w->opt_state[c] = kt_calloc(per * n, sizeof(float));
    if (!w->opt_state[c]) return kt_fail(err, KT_ENOMEM, "out of memory for optimizer state");
  }
  return KT_OK;
}

/* Sums the two copies of a tied embedding's gradient (first and last stage). */
static kt_status sum_tied(kt__worker *w, kt_error *err) {
  kt_runtime *rt = w->rt;
  int first_owner = kt__stage_world_rank(rt, 0, w->replica);
  int last_owner = kt__stage_world_rank(rt, rt->S - 1, w->replica);
  kt_chunk *mine = NULL;
  float *first = NULL, *last = NULL, *mine_grad = NULL; /* the tied copies' gradients */
  size_t elems = 0;
  for (int c = 0; c < rt->V; c++) {
    kt_chunk *ch = w->chunk[c];
    float *grad;
    size_t n = kt_chunk_tied(ch, NULL, &grad);
    if (!n || (kt_chunk_is_first(ch) && kt_chunk_is_last(ch))) continue;
    if (kt_chunk_is_first(ch)) first = grad;
    if (kt_chunk_is_last(ch)) last = grad;
    mine = ch, mine_grad = grad, elems = n;
  }
  if (!mine) return KT_OK;
  if (first && last) { /* both copies on this rank (v placement, P = 1 with V > 1) */
    for (size_t i = 0; i < elems; i++) {
      float s = first[i] + last[i];
      first[i] = last[i] = s;
    }
    return KT_OK;
  }
  int peer = kt_chunk_is_first(mine) ? last_owner : first_owner;
  size_t bytes = elems * sizeof(float);
  float *tmp = malloc(bytes ? bytes : 1);
  if (!tmp) return kt_fail(err, KT_ENOMEM, "out of memory summing tied gradients");
  uint64_t tag = KT_TAG_COLLECTIVE | 0x100;
  kt_status st = kt_transport_send(w->t, peer, tag, mine_grad, bytes, err);
  if (!st) st = kt_transport_recv(w->t, peer, tag, tmp, bytes, err);
  if (!st) /* a + b == b + a in floating point: both copies stay identical */
    for (size_t i = 0; i < elems; i++) mine_grad[i] += tmp[i];
  free(tmp);
  return st;
}

static void sgd_update(float *restrict p, const float *restrict g, float *restrict v, size_t n,
                       float lr, float momentum, float clip) {
  if (!v) {
    for (size_t i = 0; i < n; i++) p[i] -= lr * (g[i] * clip);
    return;
  }
  for (size_t i = 0; i < n; i++) {
    v[i] = momentum * v[i] + g[i] * clip;
    p[i] -= lr * v[i];
  }
}

/* AdamW with decoupled weight decay; bias corrections folded into two
 * multipliers so the loop has one square root and one division. */
static void adamw_update(float *restrict p, const float *restrict g, float *restrict m,
                         float *restrict v, const unsigned char *restrict decay, size_t n, float lr,
                         float b1, float b2, float eps, float wd, float clip, float inv_c1,
                         float inv_c2) {
  for (size_t i = 0; i < n; i++) {
    float gi = g[i] * clip;
    float mi = b1 * m[i] + (1 - b1) * gi;
    float vi = b2 * v[i] + (1 - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] -= lr * (mi * inv_c1 / (sqrtf(vi * inv_c2) + eps) + (decay[i] ? wd : 0.0f) * p[i]);
  }
}

/* The passes over a chunk's parameters run on its compute threads in
 * blocks of PASS_BLOCK floats: every element's arithmetic is its own, so
 * the bits do not depend on the threads. */
#define PASS_BLOCK ((size_t)1 << 16)

typedef struct {
  float *p, *m, *v;
  const float *g;
  const unsigned char *decay;
  float lr, b1, b2, eps, wd, clip, inv_c1, inv_c2, momentum;
  int adamw;
  /* run ahead: the copy for a rollback (the worker's keep_*), taken block
   * by block just before the block's update reads the same lines */
  float *keep_p, *keep_g, *keep_m, *keep_v;
} update_job;

static void keep_range(const update_job *j, size_t lo, size_t n) {
  memcpy(j->keep_p + lo, j->p + lo, n * sizeof(float));
  memcpy(j->keep_g + lo, j->g + lo, n * sizeof(float));
  if (j->m) memcpy(j->keep_m + lo, j->m + lo, n * sizeof(float));
  if (j->v) memcpy(j->keep_v + lo, j->v + lo, n * sizeof(float));
}

static void update_range(void *ctx, size_t lo, size_t hi) {
  const update_job *j = ctx;
  size_t n = hi - lo;
  if (j->keep_p) keep_range(j, lo, n);
  if (!j->adamw) {
    sgd_update(j->p + lo, j->g + lo, j->m ? j->m + lo : NULL, n, j->lr, j->momentum, j->clip);
    return;
  }
  adamw_update(j->p + lo, j->g + lo, j->m + lo, j->v + lo, j->decay + lo, n, j->lr, j->b1, j->b2,
               j->eps, j->wd, j->clip, j->inv_c1, j->inv_c2);
}

static void update_chunk(kt__worker *w, int c, const float *grads, double lr, float clip_scale,
                         int t, int keep) {
  const kt_optim_config *o = &w->rt->cfg.optim;
  kt_chunk *ch = w->chunk[c];
  size_t n;
  float *params = kt_chunk_params(ch, &n);
  if (!grads) grads = kt_chunk_grads(ch, NULL);
  update_job j = {.p = params,
                  .g = grads,
                  .m = w->opt_state[c],
                  .lr = (float)lr,
                  .clip = clip_scale,
                  .momentum = (float)o->momentum,
                  .adamw = o->kind == KT_OPTIM_ADAMW};
  if (j.adamw) {
    j.v = j.m + n, j.decay = w->decay[c];
    j.b1 = (float)o->beta1, j.b2 = (float)o->beta2, j.eps = (float)o->eps;
    j.wd = (float)o->weight_decay;
    j.inv_c1 = (float)(1.0 / (1.0 - pow(o->beta1, t)));
    j.inv_c2 = (float)(1.0 / (1.0 - pow(o->beta2, t)));
  }
  if (keep) { /* keep_opt is laid out as opt_state: m, then v */
    j.keep_p = w->keep_params[c], j.keep_g = w->keep_grads[c];
    j.keep_m = w->keep_opt[c], j.keep_v = j.v ? w->keep_opt[c] + n : NULL;
  }
  kt_chunk_parallel(ch, n, PASS_BLOCK, update_range, &j);
}

/* Squares are summed in eight lanes, each over every eighth element of a
 * run, the lanes added in a fixed order at the end: the loop vectorises,
 * and a unit's sum has the same bits whatever thread runs it. */
#define LANES 8
#define SCALE_RUN 1024 /* floats scaled before their squares are read, in L1 */

static void add_squares(double *restrict lane, const float *restrict g, size_t n) {
  size_t i = 0;
  for (; i + LANES <= n; i += LANES)
    for (int k = 0; k < LANES; k++) lane[k] += (double)g[i + k] * g[i + k];
  for (; i < n; i++) lane[0] += (double)g[i] * g[i];
}

static double fold_lanes(const double *lane) {
  return ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
}

static double sum_squares(const float *g, size_t n) {
  double lane[LANES] = {0};
  add_squares(lane, g, n);
  return fold_lanes(lane);
}

/* g *= s, and the sum of the scaled squares; runs of SCALE_RUN (a multiple
 * of LANES) keep the lanes as sum_squares's. A square of a finite float
 * does not overflow a double, so the sum is finite iff every g is. */
static double scale_sum_squares(float *restrict g, size_t n, float s) {
  double lane[LANES] = {0};
  for (size_t i = 0; i < n; i += SCALE_RUN) {
    size_t m = n - i < SCALE_RUN ? n - i : SCALE_RUN;
    for (size_t k = 0; k < m; k++) g[i + k] *= s;
    add_squares(lane, g + i, m);
  }
  return fold_lanes(lane);
}

/* The LM head's copy of a tied embedding is the same parameter as wte: its
 * gradient (equal to wte's after the sum) is left out of the global norm. */
static double tied_head_copy_sq(kt_chunk *ch) {
  const kt_model_config *cfg = kt_chunk_config(ch);
  if (cfg->kind != KT_MODEL_GPT || !cfg->tie_embeddings || !kt_chunk_is_last(ch)) return 0;
  int head = cfg->layers + 1, first;
  const size_t *offset = kt_chunk_unit_offsets(ch, &first, NULL);
  kt_param_tensor t[16];
  int n = kt_model_unit_tensors(cfg, head, t, 16);
  for (int i = 0; i < n && i < 16; i++)
    if (!strcmp(t[i].name, "headw"))
      return sum_squares(kt_chunk_grads(ch, NULL) + offset[head - first] + t[i].offset, t[i].size);
  return 0;
}

void kt__step_grad_flags(kt__worker *w, unsigned char *flags) {
  kt_runtime *rt = w->rt;
  memset(flags, 0, (size_t)rt->S);
  for (int c = 0; c < rt->V; c++) {
    int stage = kt_rank_chunk_stage(&rt->sched_copy, w->stage_rank, c);
    if (stage >= 0) flags[stage] |= w->grad_bad[c];
  }
}

/* Collectives are timed apart (*sync): they wait for the other ranks. */
kt_status kt__step_reduce(kt__worker *w, double *sync, kt_error *err) {
  kt_runtime *rt = w->rt;
  double t0 = kt_now();
  kt_status st = sum_tied(w, err);
  *sync += kt_now() - t0;
  for (int c = 0; c < rt->V && !st && rt->D > 1; c++) {
    size_t n;
    float *g = kt_chunk_grads(w->chunk[c], &n);
    t0 = kt_now();
    st = kt_allreduce(w->t, KT_GROUP_DATA, g, n, err);
    *sync += kt_now() - t0;
  }
  return st;
}

typedef struct {
  float *grads;
  const size_t *off;
  double *parts;
  float scale;
} unit_sq_job;

static void unit_sq_range(void *ctx, size_t lo, size_t hi) {
  const unit_sq_job *j = ctx;
  for (size_t u = lo; u < hi; u++)
    j->parts[u] = scale_sum_squares(j->grads + j->off[u], j->off[u + 1] - j->off[u], j->scale);
}

/* Every parameter once: the last stage's tied copy is left out. A chunk
 * of model units adds each unit's sum to its part (the same whatever
 * chunk holds the unit); one without units (synthetic, the caller's own)
 * its whole sum to its stage's. */
double kt__step_norm_parts(kt__worker *w, double *parts) {
  kt_runtime *rt = w->rt;
  float scale = 1.0f / (float)((double)rt->K * rt->M * rt->D);
  double local = 0;
  memset(parts, 0, sizeof *parts * (size_t)rt->n_parts);
  for (int c = 0; c < rt->V; c++) {
    kt_chunk *ch = w->chunk[c];
    size_t n;
    float *grads = kt_chunk_grads(ch, &n);
    int stage = kt_rank_chunk_stage(&rt->sched_copy, w->stage_rank, c), first = 0, units = 0;
    const size_t *off = kt_chunk_unit_offsets(ch, &first, &units);
    double sum;
    if (stage < 0 || rt->cfg.synthetic || rt->cfg.make_chunk || units < 1) {
      sum = scale_sum_squares(grads, n, scale);
      if (stage >= 0) local += parts[stage] = sum;
    } else {
      unit_sq_job j = {grads, off, parts + first, scale}; /* a unit's sum on one thread, in order */
      kt_chunk_parallel(ch, (size_t)units, 1, unit_sq_range, &j);
      sum = 0;
      for (int u = 0; u < units; u++) sum += parts[first + u];
      parts[first + units - 1] -= tied_head_copy_sq(ch); /* the head is the last unit */
      for (int u = 0; u < units; u++) local += parts[first + u];
    }
    w->grad_bad[c] = !isfinite(sum);
  }
  return local;
}

void kt__step_update(kt__worker *w, int step, float clip, float *const *grads) {
  double lr = kt_optim_lr(&w->rt->cfg.optim, step);
  for (int c = 0; c < w->rt->V; c++)
    update_chunk(w, c, grads ? grads[c] : NULL, lr, clip, step + 1, 0);
}

void kt__step_update_keeping(kt__worker *w, int step) {
  double lr = kt_optim_lr(&w->rt->cfg.optim, step);
  for (int c = 0; c < w->rt->V; c++) update_chunk(w, c, NULL, lr, 1.0f, step + 1, 1);
}
