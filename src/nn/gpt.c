/* GPT chunk: any contiguous range of units (embed, blocks, head) run as one
 * pipeline stage, with the activation stash split so that zero-bubble
 * schedules can run backward_input and backward_weight apart.
 * Legend: B = samples in the micro-batch, T = time, C = channels, N = B * T.
 *
 * Stash per micro-batch (see gpt.h for the segments):
 *   F: act (all units' act fields) + keep (all units' keep fields)
 *   I: keep grows by wgrad (input gradients and bias / LayerNorm partials
 *      that W needs); act is released
 *   W: weight gradients from keep + wgrad; keep is released
 * With recompute, F keeps only the chunk input (and the targets on the last
 * stage) in `inp`; I recomputes the forward into act + keep first. */
#include "nn/gpt.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
  kt__stash inp, act, keep;   /* keyed by micro-batch */
  size_t *act_off, *keep_off; /* per unit: offsets into act / keep buffers */
  size_t *wgrad_off;          /* per unit: offsets into the keep buffer, after all keep */
  size_t act_floats, keep_floats, wgrad_floats, inp_floats;
  size_t stream_act;  /* floats of the largest unit act segment */
  kt__gpt_acts *acts; /* per unit views (reused) */
  kt__gpt_scratch s;
  float *stream;        /* one unit's act + keep for a stash-free forward */
  float *ping, *pong;   /* (N,C) unit outputs for a stash-free forward */
  float *din_tmp;       /* (N,C) when the caller passes no din */
  unsigned char *phase; /* per micro-batch: 0 idle, 1 after F, 2 after I */
  int tied_local;       /* tied head and embedding in this one chunk */
} gpt_impl;

enum { IDLE, FORWARD_DONE, INPUT_GRAD_DONE };

#define IMPL(c) ((gpt_impl *)(c)->impl)

static size_t tokens_floats(const kt_chunk *c) {
  return (size_t)c->micro_batch * c->cfg.seq_len; /* ints stored in float slots */
}

/* Points the per-unit views into a micro-batch's act and keep buffers
 * (either may be NULL; wgrad only when with_wgrad). */
static void point_views(kt_chunk *c, float *act, float *keep, int with_wgrad) {
  gpt_impl *g = IMPL(c);
  for (int u = 0; u < c->n_units; u++) {
    int unit = c->first_unit + u;
    kt__gpt_acts *a = &g->acts[u];
    memset(a, 0, sizeof *a);
    if (act) kt__gpt_acts_point(a, act + g->act_off[u], KT__GPT_ACT, &c->cfg, unit, c->micro_batch);
    if (keep) {
      kt__gpt_acts_point(a, keep + g->keep_off[u], KT__GPT_KEEP, &c->cfg, unit, c->micro_batch);
      if (with_wgrad)
        kt__gpt_acts_point(a, keep + g->wgrad_off[u], KT__GPT_WGRAD, &c->cfg, unit, c->micro_batch);
    }
  }
}

/* Where the chunk input goes: the embed's tokens or the first unit's x. */
static void put_input(kt_chunk *c, kt__gpt_acts *a0, const float *in, const int *tokens) {
  if (c->is_first)
    memcpy(a0->tokens, tokens, tokens_floats(c) * sizeof(int));
  else
    memcpy(a0->x, in, c->in_elems * sizeof(float));
}

/* Forward of all units into the views (act + keep already pointed). */
static kt_status forward_views(kt_chunk *c, float *out, const int *targets, double *loss,
                               kt_error *err) {
  gpt_impl *g = IMPL(c);
  for (int u = 0; u < c->n_units; u++) {
    float *next = u + 1 < c->n_units ? g->acts[u + 1].x : c->is_last ? NULL : out;
    kt_status st =
        kt__gpt_unit_forward(c, c->first_unit + u, &g->acts[u], &g->s, next, targets, loss, err);
    if (st) return st;
  }
  return KT_OK;
}

/* Forward without a stash: one unit at a time through g->stream. The last
 * chunk writes the loss (targets given) and/or the logits (N,V). */
static kt_status forward_streaming(kt_chunk *c, const float *in, const int *tokens, float *out,
                                   const int *targets, double *loss, float *logits, kt_error *err) {
  gpt_impl *g = IMPL(c);
  const float *x = in;
  for (int u = 0; u < c->n_units; u++) {
    int unit = c->first_unit + u;
    kt__gpt_acts a;
    memset(&a, 0, sizeof a);
    kt__gpt_acts_point(&a, g->stream, KT__GPT_ACT, &c->cfg, unit, c->micro_batch);
    kt__gpt_acts_point(&a, g->stream + g->stream_act, KT__GPT_KEEP, &c->cfg, unit, c->micro_batch);
    if (kt__gpt_unit_kind(&c->cfg, unit) == KT__GPT_EMBED)
      memcpy(a.tokens, tokens, tokens_floats(c) * sizeof(int));
    else
      a.x = (float *)x; /* read only */
    int last = u + 1 == c->n_units;
    float *dst = kt__gpt_unit_kind(&c->cfg, unit) == KT__GPT_HEAD ? logits
                 : last                                           ? out
                                                                  : (u % 2 ? g->pong : g->ping);
    kt_status st = kt__gpt_unit_forward(c, unit, &a, &g->s, dst, targets, loss, err);
    if (st) return st;
    x = dst;
  }
  return KT_OK;
}

static kt_status check_mb(const kt_chunk *c, int mb, kt_error *err) {
  if (mb < 0 || mb >= c->n_microbatches)
    return kt_fail(err, KT_EINVAL, "gpt: micro-batch %d outside 0..%d", mb, c->n_microbatches - 1);
  return KT_OK;
}

static kt_status check_data(const kt_chunk *c, const kt_microbatch *data, const float *in,
                            kt_error *err) {
  if (c->is_first && (!data || !data->tokens))
    return kt_fail(err, KT_EINVAL, "gpt: the first stage needs the micro-batch's tokens");
  if (c->is_last && (!data || !data->targets))
    return kt_fail(err, KT_EINVAL, "gpt: the last stage needs the micro-batch's targets");
  if (!c->is_first && !in) return kt_fail(err, KT_EINVAL, "gpt: forward needs the stage input");
  if (data && data->b && data->b != c->micro_batch)
    return kt_fail(err, KT_EINVAL, "gpt: micro-batch of %d samples, the chunk was built for %d",
                   data->b, c->micro_batch);
  return KT_OK;
}

static kt_status gpt_forward(kt_chunk *c, int mb, const kt_microbatch *data, const float *in,
                             float *out, double *loss, kt_error *err) {
  gpt_impl *g = IMPL(c);
  kt_status st = check_mb(c, mb, err);
  if (!st) st = check_data(c, data, in, err);
  if (st) return st;
  if (!c->is_last && !out) return kt_fail(err, KT_EINVAL, "gpt: forward needs an output buffer");
  const int *tokens = c->is_first ? data->tokens : NULL;
  const int *targets = c->is_last ? data->targets : NULL;
  if (c->cfg.recompute) {
    /* keep the input (and targets) only; run through the streaming buffers */
    float *keep = kt__stash_acquire(&g->inp, c, mb, g->inp_floats);
    if (!keep) return kt_fail(err, KT_ENOMEM, "gpt: out of memory stashing micro-batch %d", mb);
    if (c->is_first)
      memcpy(keep, tokens, tokens_floats(c) * sizeof(int));
    else
      memcpy(keep, in, c->in_elems * sizeof(float));
    if (targets)
      memcpy(keep + g->inp_floats - tokens_floats(c), targets, tokens_floats(c) * sizeof(int));
    st = forward_streaming(c, in, tokens, out, targets, loss, NULL, err);
  } else {
    float *act = kt__stash_acquire(&g->act, c, mb, g->act_floats);
    float *keep = act ? kt__stash_acquire(&g->keep, c, mb, g->keep_floats) : NULL;
    if (!keep) return kt_fail(err, KT_ENOMEM, "gpt: out of memory stashing micro-batch %d", mb);
    point_views(c, act, keep, 0);
    put_input(c, &g->acts[0], in, tokens);
    st = forward_views(c, out, targets, loss, err);
  }
  g->phase[mb] = st ? IDLE : FORWARD_DONE;
  return st;
}

static kt_status gpt_backward_input(kt_chunk *c, int mb, const kt_microbatch *data,
                                    const float *dout, float *din, kt_error *err) {
  gpt_impl *g = IMPL(c);
  (void)data; /* everything needed was stashed by F */
  kt_status st = check_mb(c, mb, err);
  if (st) return st;
  if (g->phase[mb] != FORWARD_DONE)
    return kt_fail(err, KT_ERUNTIME, "gpt: input gradient of micro-batch %d without its forward",
                   mb);
  if (!c->is_last && !dout)
    return kt_fail(err, KT_EINVAL, "gpt: backward needs the output gradient");
  size_t kw = g->keep_floats + g->wgrad_floats;
  float *act = kt__stash_acquire(&g->act, c, mb, g->act_floats);
  float *keep = act ? kt__stash_acquire(&g->keep, c, mb, kw) : NULL;
  if (!keep) return kt_fail(err, KT_ENOMEM, "gpt: out of memory for micro-batch %d", mb);
  point_views(c, act, keep, 1);
  if (c->cfg.recompute) {
    const float *saved = g->inp.slot[mb];
    const int *targets = NULL;
    if (c->is_last) targets = (const int *)(saved + g->inp_floats - tokens_floats(c));
    put_input(c, &g->acts[0], saved, (const int *)saved);
    st = forward_views(c, g->din_tmp, targets, NULL, err);
    kt__stash_release(&g->inp, c, mb);
    if (st) return st;
  }
  kt__gpt_acts *last = &g->acts[c->n_units - 1];
  if (!c->is_last) memcpy(last->dout, dout, c->out_elems * sizeof(float));
  for (int u = c->n_units - 1; u >= 0; u--) {
    float *d = u > 0 ? g->acts[u - 1].dout : din ? din : g->din_tmp;
    kt__gpt_unit_backward_input(c, c->first_unit + u, &g->acts[u], &g->s, d);
  }
  kt__stash_release(&g->act, c, mb);
  g->phase[mb] = INPUT_GRAD_DONE;
  return KT_OK;
}

static kt_status gpt_backward_weight(kt_chunk *c, int mb, kt_error *err) {
  gpt_impl *g = IMPL(c);
  kt_status st = check_mb(c, mb, err);
  if (st) return st;
  if (g->phase[mb] != INPUT_GRAD_DONE)
    return kt_fail(err, KT_ERUNTIME,
                   "gpt: weight gradient of micro-batch %d without its input gradient", mb);
  point_views(c, NULL, g->keep.slot[mb], 1);
  /* tied in one chunk: both gradients land in dwte, then the head's copy
   * mirrors it, so the two stored copies get identical updates */
  float *dwte = c->grads; /* unit 0 starts with wte */
  for (int u = 0; u < c->n_units; u++)
    kt__gpt_unit_backward_weight(c, c->first_unit + u, &g->acts[u], g->tied_local ? dwte : NULL);
  if (g->tied_local) {
    kt__gpt_params p;
    kt__gpt_params_point(&p, c->grads + c->unit_offset[c->n_units - 1], &c->cfg,
                         c->first_unit + c->n_units - 1);
    memcpy(p.headw, dwte, c->tied_elems * sizeof(float));
  }
  kt__stash_release(&g->keep, c, mb);
  g->phase[mb] = IDLE;
  return KT_OK;
}

static void gpt_destroy(kt_chunk *c) {
  gpt_impl *g = IMPL(c);
  if (g) {
    kt__stash_free(&g->inp);
    kt__stash_free(&g->act);
    kt__stash_free(&g->keep);
    free(g->act_off);
    free(g->keep_off);
    free(g->wgrad_off);
    free(g->acts);
    free(g->s.fc);
    free(g->s.dsmall);
    free(g->s.attn);
    free(g->s.partials);
    free(g->stream);
    free(g->ping);
    free(g->pong);
    free(g->din_tmp);
    free(g->phase);
    free(g);
  }
  kt__chunk_free_common(c);
}

static const kt_chunk_ops gpt_ops = {gpt_forward, gpt_backward_input, gpt_backward_weight,
                                     gpt_destroy};

/* Stash offsets per unit and the scratch sizes; allocates everything. */
static kt_status gpt_impl_alloc(kt_chunk *c, kt_error *err) {
  gpt_impl *g = calloc(1, sizeof *g);
  c->impl = g;
  if (!g) return kt_fail(err, KT_ENOMEM, "out of memory creating the GPT chunk");
  int n = c->n_units, B = c->micro_batch, T = c->cfg.seq_len, C = c->cfg.hidden;
  size_t N = (size_t)B * T;
  g->act_off = calloc((size_t)n, sizeof(size_t));
  g->keep_off = calloc((size_t)n, sizeof(size_t));
  g->wgrad_off = calloc((size_t)n, sizeof(size_t));
  g->acts = calloc((size_t)n, sizeof *g->acts);
  g->phase = calloc((size_t)c->n_microbatches, 1);
  if (!g->act_off || !g->keep_off || !g->wgrad_off || !g->acts || !g->phase)
    return kt_fail(err, KT_ENOMEM, "out of memory creating the GPT chunk");
  size_t stream_keep = 0;
  for (int u = 0; u < n; u++) {
    size_t a = kt__gpt_acts_point(NULL, NULL, KT__GPT_ACT, &c->cfg, c->first_unit + u, B);
    size_t k = kt__gpt_acts_point(NULL, NULL, KT__GPT_KEEP, &c->cfg, c->first_unit + u, B);
    g->act_off[u] = g->act_floats;
    g->keep_off[u] = g->keep_floats;
    g->act_floats += a;
    g->keep_floats += k;
    if (a > g->stream_act) g->stream_act = a;
    if (k > stream_keep) stream_keep = k;
  }
  for (int u = 0; u < n; u++) {
    g->wgrad_off[u] = g->keep_floats + g->wgrad_floats;
    g->wgrad_floats += kt__gpt_acts_point(NULL, NULL, KT__GPT_WGRAD, &c->cfg, c->first_unit + u, B);
  }
  g->inp_floats = (c->is_first ? N : N * C) + (c->is_last ? N : 0);
  g->s.fc = malloc(4 * N * C * sizeof(float));
  g->s.dsmall = malloc(N * C * sizeof(float));
  /* one T x T of attention scratch for each thread the chunk will have */
  g->s.attn = malloc(kt__attention_scratch_floats(T) * (size_t)kt_blas_threads() * sizeof(float));
  g->s.partials = malloc(2 * kt__partials_floats((int)N, 4 * C) * sizeof(float));
  g->stream = malloc((g->stream_act + stream_keep) * sizeof(float));
  g->ping = malloc(N * C * sizeof(float));
  g->pong = malloc(N * C * sizeof(float));
  g->din_tmp = malloc(N * C * sizeof(float));
  if (!g->s.fc || !g->s.dsmall || !g->s.attn || !g->s.partials || !g->stream || !g->ping || !g->pong ||
      !g->din_tmp)
    return kt_fail(err, KT_ENOMEM, "out of memory for the GPT chunk's scratch (micro-batch %d)", B);
  kt_status st = kt__stash_init(&g->inp, c->n_microbatches, err);
  if (!st) st = kt__stash_init(&g->act, c->n_microbatches, err);
  if (!st) st = kt__stash_init(&g->keep, c->n_microbatches, err);
  return st;
}

kt_status kt__gpt_chunk_create(const kt_model_config *cfg, int first_unit, int n_units,
                               int micro_batch, int n_microbatches, kt_chunk **out, kt_error *err) {
  *out = NULL;
  if (cfg->kind != KT_MODEL_GPT) return kt_fail(err, KT_EINVAL, "gpt: model kind is not gpt");
  kt_chunk *c;
  kt_status st = kt__chunk_alloc(cfg, first_unit, n_units, micro_batch, n_microbatches, &c, err);
  if (st) return st;
  c->ops = &gpt_ops;
  st = gpt_impl_alloc(c, err);
  if (st) {
    gpt_destroy(c);
    return st;
  }
  for (int u = 0; u < n_units; u++)
    kt__gpt_params_init(c->params + c->unit_offset[u], cfg, first_unit + u);
  if (cfg->tie_embeddings && (c->is_first || c->is_last)) {
    kt__gpt_params p;
    int u = c->is_first ? 0 : n_units - 1;
    kt__gpt_params_point(&p, c->params + c->unit_offset[u], cfg, first_unit + u);
    c->tied = c->is_first ? p.wte : p.headw;
    c->tied_grad = c->grads + (c->tied - c->params);
    c->tied_elems = (size_t)cfg->vocab * cfg->hidden;
    IMPL(c)->tied_local = c->is_first && c->is_last;
  }
  *out = c;
  return KT_OK;
}

kt_status kt_gpt_chunk_eval(kt_chunk *c, const kt_microbatch *data, const float *in, float *out,
                            double *loss, float *logits, kt_error *err) {
  if (!c || c->cfg.kind != KT_MODEL_GPT)
    return kt_fail(err, KT_EINVAL, "gpt: evaluation needs a gpt chunk");
  if (c->is_first && (!data || !data->tokens))
    return kt_fail(err, KT_EINVAL, "gpt: the first stage needs the micro-batch's tokens");
  if (!c->is_first && !in) return kt_fail(err, KT_EINVAL, "gpt: evaluation needs the stage input");
  if (!c->is_last && !out) return kt_fail(err, KT_EINVAL, "gpt: evaluation needs an output buffer");
  const int *targets = c->is_last && data ? data->targets : NULL;
  if (c->is_last && !targets && !logits)
    return kt_fail(err, KT_EINVAL, "gpt: the last stage evaluates a loss (targets) or logits");
  kt__exec saved = kt__chunk_enter(c);
  kt_status st = forward_streaming(c, in, c->is_first ? data->tokens : NULL, out, targets, loss,
                                   logits, err);
  kt__exec_leave(saved);
  return st;
}
