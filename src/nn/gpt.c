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

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  kt__stash inp, act, keep; /* keyed by micro-batch */
  kt__stash group;          /* seq-chunks: per whole micro-batch, each block's q | k | v and
                                 their gradients (2 x (B*T,3C)) */
  size_t act_floats, keep_floats, wgrad_floats, inp_floats; /* B x T rows */
  size_t stream_act;  /* floats of the largest unit act segment */
  kt__gpt_acts *acts; /* per unit views (reused) */
  kt__gpt_scratch s;
  float *stream;        /* one unit's act + keep for a stash-free forward */
  float *ping, *pong;   /* (N,C) unit outputs for a stash-free forward */
  float *din_tmp;       /* (N,C) when the caller passes no din */
  unsigned char *phase; /* per micro-batch: 0 idle, 1 after F, 2 after I */
  kt__gpt_rows *rows;   /* per micro-batch: its rows, set by F */
  int *pos, *row;       /* per micro-batch: (B*T) positions (and whole rows) of packed rows */
  int *chunks_fwd, *chunks_bwd; /* seq-chunks, per whole micro-batch: chunks past F, past I */
  int blocks;                   /* transformer blocks in the chunk */
  int tied_local;               /* tied head and embedding in this one chunk */
} gpt_impl;

enum { IDLE, FORWARD_DONE, INPUT_GRAD_DONE };

#define IMPL(c) ((gpt_impl *)(c)->impl)

static size_t tokens_floats(const kt_chunk *c) {
  return (size_t)c->micro_batch * c->cfg.seq_len; /* ints stored in float slots */
}

static kt__gpt_rows fixed_rows(const kt_chunk *c) {
  kt__gpt_rows r = {.N = c->micro_batch * c->cfg.seq_len, .B = c->micro_batch, .T = c->cfg.seq_len};
  r.att = kt__gpt_att_floats(&r, c->cfg.heads);
  return r;
}

static int seq_chunks(const kt_chunk *c) { return c->cfg.seq_chunks > 1 ? c->cfg.seq_chunks : 1; }

/* Micro-batch mb's rows from its data (packed documents or B x T); the
 * positions are copied, as I and W run after the data may be gone. */
static const kt__gpt_rows *set_rows(kt_chunk *c, int mb, const kt_microbatch *data) {
  gpt_impl *g = IMPL(c);
  kt__gpt_rows *r = &g->rows[mb];
  *r = fixed_rows(c);
  if (data && data->pos) {
    int *pos = g->pos + (size_t)mb * tokens_floats(c);
    memcpy(pos, data->pos, (size_t)data->n_tokens * sizeof(int));
    r->N = data->n_tokens, r->pos = pos;
    if (data->row) {
      int *row = g->row + (size_t)mb * tokens_floats(c);
      memcpy(row, data->row, (size_t)data->n_tokens * sizeof(int));
      r->row = row;
    }
    r->att = kt__gpt_att_floats(r, c->cfg.heads);
  }
  r->dscale = data ? data->loss_scale : 0;
  return r;
}

/* Floats of mb's act, keep and wgrad segments (all units) for rows r. */
static void stash_floats(const kt_chunk *c, const kt__gpt_rows *r, size_t *act, size_t *keep,
                         size_t *wgrad) {
  *act = *keep = *wgrad = 0;
  for (int u = 0; u < c->n_units; u++) {
    int unit = c->first_unit + u;
    *act += kt__gpt_acts_point(NULL, NULL, KT__GPT_ACT, &c->cfg, unit, r);
    *keep += kt__gpt_acts_point(NULL, NULL, KT__GPT_KEEP, &c->cfg, unit, r);
    *wgrad += kt__gpt_acts_point(NULL, NULL, KT__GPT_WGRAD, &c->cfg, unit, r);
  }
}

kt_status kt_model_mb_stash_bytes(const kt_model_config *cfg, int first_unit, int n_units,
                                  int micro_batch, const kt_microbatch *data, double bytes[4],
                                  kt_error *err) {
  if (cfg->kind != KT_MODEL_GPT || cfg->recompute)
    return kt_fail(err, KT_EINVAL, "stash bytes are computed for the GPT without recompute");
  kt__gpt_rows r = {.N = micro_batch * cfg->seq_len, .B = micro_batch, .T = cfg->seq_len};
  if (data && data->pos) r.N = data->n_tokens, r.pos = data->pos, r.row = data->row;
  r.att = kt__gpt_att_floats(&r, cfg->heads);
  double na = 0, nk = 0, nw = 0;
  int blocks = 0;
  for (int u = first_unit; u < first_unit + n_units; u++) {
    na += (double)kt__gpt_acts_point(NULL, NULL, KT__GPT_ACT, cfg, u, &r);
    nk += (double)kt__gpt_acts_point(NULL, NULL, KT__GPT_KEEP, cfg, u, &r);
    nw += (double)kt__gpt_acts_point(NULL, NULL, KT__GPT_WGRAD, cfg, u, &r);
    blocks += kt__gpt_unit_kind(cfg, u) == KT__GPT_BLOCK;
  }
  double f = sizeof(float), whole = (double)micro_batch * cfg->seq_len * 3 * cfg->hidden;
  bytes[0] = (na + nk) * f, bytes[1] = (nk + nw) * f, bytes[2] = fmin(na, nw) * f;
  bytes[3] = cfg->seq_chunks > 1 ? blocks * 2 * whole * f : 0; /* group_forward's */
  return KT_OK;
}

/* Where each unit's weight-gradient segment goes (after all keep):
 * WGRAD_NONE not pointed; WGRAD_EACH a segment a unit, held from I to W;
 * WGRAD_ALTERNATE for a full B, whose W follows each unit's I: two
 * segments, by unit parity, reused down the chunk, so a unit's gradients
 * are written where the unit two later left them, still in cache, rather
 * than into cold stash (unit u's I writes unit u - 1's dout, the other
 * segment; unit u + 1 is done by then). */
enum { WGRAD_NONE, WGRAD_EACH, WGRAD_ALTERNATE };

/* Points the per-unit views of micro-batch mb (rows r) into its act and
 * keep buffers (either may be NULL; wgrad as with_wgrad says) and, with
 * seq-chunks, each block into its whole micro-batch's q | k | v and
 * gradients. */
static void point_views(kt_chunk *c, int mb, const kt__gpt_rows *r, float *act, float *keep,
                        int with_wgrad) {
  gpt_impl *g = IMPL(c);
  size_t ka, kk, kw, ao = 0, ko = 0, wo, seg = 0;
  stash_floats(c, r, &ka, &kk, &kw);
  wo = kk;
  if (with_wgrad == WGRAD_ALTERNATE) {
    for (int u = 0; u < c->n_units; u++) {
      size_t n = kt__gpt_acts_point(NULL, NULL, KT__GPT_WGRAD, &c->cfg, c->first_unit + u, r);
      seg = n > seg ? n : seg;
    }
    if (2 * seg > kw) with_wgrad = WGRAD_EACH; /* too few units to alternate */
  }
  float *grp = r->row ? g->group.slot[mb / seq_chunks(c)] : NULL;
  size_t whole = tokens_floats(c) * 3 * (size_t)c->cfg.hidden;
  for (int u = 0, block = 0; u < c->n_units; u++) {
    int unit = c->first_unit + u;
    kt__gpt_acts *a = &g->acts[u];
    memset(a, 0, sizeof *a);
    size_t na = kt__gpt_acts_point(a, act ? act + ao : NULL, KT__GPT_ACT, &c->cfg, unit, r);
    size_t nk = kt__gpt_acts_point(a, keep ? keep + ko : NULL, KT__GPT_KEEP, &c->cfg, unit, r);
    size_t at = with_wgrad == WGRAD_ALTERNATE ? kk + (size_t)(u & 1) * seg : wo;
    size_t nw = kt__gpt_acts_point(a, keep && with_wgrad ? keep + at : NULL, KT__GPT_WGRAD, &c->cfg,
                                   unit, r);
    ao += na, ko += nk, wo += nw;
    if (grp && kt__gpt_unit_kind(&c->cfg, unit) == KT__GPT_BLOCK) {
      a->gqkv = grp + (size_t)block * 2 * whole;
      a->gdkv = a->gqkv + whole;
      block++;
    }
  }
}

/* Where the chunk input goes: the embed's tokens or the first unit's x
 * (N rows). */
static void put_input(kt_chunk *c, const kt__gpt_rows *r, kt__gpt_acts *a0, const float *in,
                      const int *tokens) {
  if (c->is_first) memcpy(a0->tokens, tokens, (size_t)r->N * sizeof(int));
  else memcpy(a0->x, in, (size_t)r->N * c->cfg.hidden * sizeof(float));
}

/* Forward of all units into the views (act + keep already pointed). */
static kt_status forward_views(kt_chunk *c, const kt__gpt_rows *r, float *out, const int *targets,
                               double *loss, kt_error *err) {
  gpt_impl *g = IMPL(c);
  for (int u = 0; u < c->n_units; u++) {
    float *next = u + 1 < c->n_units ? g->acts[u + 1].x : c->is_last ? NULL : out;
    kt_status st =
        kt__gpt_unit_forward(c, c->first_unit + u, r, &g->acts[u], &g->s, next, targets, loss, err);
    if (st) return st;
  }
  return KT_OK;
}

/* Forward without a stash: one unit at a time through g->stream. The last
 * chunk writes the loss (targets given) and/or the logits (N,V). */
static kt_status forward_streaming(kt_chunk *c, const kt__gpt_rows *r, const float *in,
                                   const int *tokens, float *out, const int *targets, double *loss,
                                   float *logits, kt_error *err) {
  gpt_impl *g = IMPL(c);
  const float *x = in;
  for (int u = 0; u < c->n_units; u++) {
    int unit = c->first_unit + u;
    kt__gpt_acts a;
    memset(&a, 0, sizeof a);
    kt__gpt_acts_point(&a, g->stream, KT__GPT_ACT, &c->cfg, unit, r);
    kt__gpt_acts_point(&a, g->stream + g->stream_act, KT__GPT_KEEP, &c->cfg, unit, r);
    if (kt__gpt_unit_kind(&c->cfg, unit) == KT__GPT_EMBED)
      memcpy(a.tokens, tokens, (size_t)r->N * sizeof(int));
    else a.x = (float *)x; /* read only */
    int last = u + 1 == c->n_units;
    float *dst = kt__gpt_unit_kind(&c->cfg, unit) == KT__GPT_HEAD ? logits
                 : last                                           ? out
                                                                  : (u % 2 ? g->pong : g->ping);
    kt_status st = kt__gpt_unit_forward(c, unit, r, &a, &g->s, dst, targets, loss, err);
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
  if (!data || !data->pos) return KT_OK;
  int n = data->n_tokens, budget = (int)tokens_floats(c), T = c->cfg.seq_len;
  const int *pos = data->pos, *row = data->row;
  if (row && seq_chunks(c) < 2)
    return kt_fail(err, KT_EINVAL, "gpt: a chunk of a micro-batch, the model has no seq_chunks");
  if (n < (row ? 0 : 1) || n > budget)
    return kt_fail(err, KT_EINVAL, "gpt: %d packed tokens, the micro-batch holds %d..%d", n,
                   row ? 0 : 1, budget);
  for (int i = 0; i < n; i++) {
    int p = pos[i], next = i > 0 && p == pos[i - 1] + 1 && (!row || row[i] == row[i - 1] + 1);
    if (!row && p != 0 && !next)
      return kt_fail(err, KT_EINVAL,
                     "gpt: packed position %d at token %d neither starts nor continues a document",
                     p, i);
    if (p < 0 || p >= T)
      return kt_fail(err, KT_EINVAL,
                     "gpt: packed position %d at token %d is past the sequence length %d", p, i, T);
    if (row && (row[i] < p || row[i] >= budget || (i > 0 && row[i] <= row[i - 1])))
      return kt_fail(err, KT_EINVAL,
                     "gpt: row %d of token %d (position %d) is not its place in the micro-batch",
                     row[i], i, p);
  }
  return KT_OK;
}

/* seq-chunks: chunk k of whole micro-batch j runs its F after chunk k - 1's
 * and its I after chunk k + 1's; chunk 0's F sets up the whole micro-batch's
 * q | k | v and gradient buffers, its I frees them. */
static kt_status group_forward(kt_chunk *c, int mb, kt_error *err) {
  gpt_impl *g = IMPL(c);
  int K = seq_chunks(c), j = mb / K, k = mb % K;
  if (c->n_microbatches % K)
    return kt_fail(err, KT_EINVAL, "gpt: %d micro-batches are not whole micro-batches of %d chunks",
                   c->n_microbatches, K);
  if (g->chunks_fwd[j] != k)
    return kt_fail(err, KT_ERUNTIME,
                   "gpt: chunk %d of micro-batch %d runs its forward before chunk %d's", k, j,
                   g->chunks_fwd[j]);
  if (k > 0) return KT_OK;
  size_t n = (size_t)g->blocks * 2 * tokens_floats(c) * 3 * c->cfg.hidden;
  float *b = kt__stash_acquire(&g->group, c, j, n);
  if (!b) return kt_fail(err, KT_ENOMEM, "gpt: out of memory for micro-batch %d's keys", j);
  if (!c->sizes_only) memset(b, 0, n * sizeof(float));
  return KT_OK;
}

static kt_status group_backward(kt_chunk *c, int mb, kt_error *err) {
  gpt_impl *g = IMPL(c);
  int K = seq_chunks(c), j = mb / K, k = mb % K, want = K - 1 - g->chunks_bwd[j];
  if (g->chunks_fwd[j] != K || k != want)
    return kt_fail(err, KT_ERUNTIME,
                   "gpt: chunk %d of micro-batch %d runs its input gradient "
                   "before chunk %d's (after every forward, in reverse)",
                   k, j, want);
  return KT_OK;
}

static void group_done(kt_chunk *c, int mb) {
  gpt_impl *g = IMPL(c);
  int K = seq_chunks(c), j = mb / K;
  if (++g->chunks_bwd[j] < K) return;
  kt__stash_release(&g->group, c, j);
  g->chunks_fwd[j] = g->chunks_bwd[j] = 0;
}

/* Rows past a packed micro-batch's tokens in a boundary buffer: zeros. */
static void zero_tail(const kt_chunk *c, const kt__gpt_rows *r, float *x, size_t elems) {
  size_t used = (size_t)r->N * c->cfg.hidden;
  if (x && used < elems) memset(x + used, 0, (elems - used) * sizeof(float));
}

/* F's work once its stash is taken: with recompute, keep the input (and
 * targets) and run through the streaming buffers; else fill the views. */
static kt_status forward_compute(kt_chunk *c, const kt__gpt_rows *r, float *keep, const float *in,
                                 const int *tokens, const int *targets, float *out, double *loss,
                                 kt_error *err) {
  gpt_impl *g = IMPL(c);
  kt_status st = KT_OK;
  if (c->cfg.recompute) {
    if (c->is_first) memcpy(keep, tokens, (size_t)r->N * sizeof(int));
    else memcpy(keep, in, (size_t)r->N * c->cfg.hidden * sizeof(float));
    if (targets)
      memcpy(keep + g->inp_floats - tokens_floats(c), targets, (size_t)r->N * sizeof(int));
    st = forward_streaming(c, r, in, tokens, out, targets, loss, NULL, err);
  } else {
    put_input(c, r, &g->acts[0], in, tokens);
    if (r->N) st = forward_views(c, r, out, targets, loss, err);
  }
  if (!st) zero_tail(c, r, out, c->out_elems);
  return st;
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
  const kt__gpt_rows *r = set_rows(c, mb, data);
  if (r->row && (st = group_forward(c, mb, err))) return st;
  float *keep;
  size_t want;            /* floats */
  if (c->cfg.recompute) { /* the input (and targets) only */
    want = g->inp_floats;
    keep = kt__stash_acquire(&g->inp, c, mb, want);
  } else {
    size_t na, nk, nw;
    stash_floats(c, r, &na, &nk, &nw);
    want = na + nk;
    float *act = kt__stash_acquire(&g->act, c, mb, na);
    keep = act ? kt__stash_acquire(&g->keep, c, mb, nk) : NULL;
    if (keep) point_views(c, mb, r, act, keep, WGRAD_NONE);
  }
  if (!keep)
    return kt_fail(err, KT_ENOMEM, "gpt: out of memory stashing micro-batch %d (%.2f GiB)", mb,
                   (double)want * sizeof(float) / (1 << 30));
  if (loss) *loss = 0; /* an empty chunk, or sizes only */
  if (!c->sizes_only) st = forward_compute(c, r, keep, in, tokens, targets, out, loss, err);
  if (!st && r->row) g->chunks_fwd[mb / seq_chunks(c)]++;
  g->phase[mb] = st ? IDLE : FORWARD_DONE;
  return st;
}

/* The end of micro-batch mb's I: what only W needs stays stashed. */
static kt_status input_grad_done(kt_chunk *c, int mb, const kt__gpt_rows *r) {
  gpt_impl *g = IMPL(c);
  kt__stash_release(&g->act, c, mb);
  if (r->row) group_done(c, mb);
  g->phase[mb] = INPUT_GRAD_DONE;
  return KT_OK;
}

/* The end of micro-batch mb's W: nothing of it stays stashed. */
static kt_status weight_grad_done(kt_chunk *c, int mb) {
  gpt_impl *g = IMPL(c);
  kt__stash_release(&g->keep, c, mb);
  g->phase[mb] = IDLE;
  return KT_OK;
}

/* Micro-batch mb's I, unit by unit from the last; with weights_too each
 * unit's W right after its I, while the unit's output gradients are still
 * in cache (a full B). */
static kt_status input_grad(kt_chunk *c, int mb, const float *dout, float *din, int weights_too,
                            kt_error *err) {
  gpt_impl *g = IMPL(c);
  kt_status st = check_mb(c, mb, err);
  if (st) return st;
  if (g->phase[mb] != FORWARD_DONE)
    return kt_fail(err, KT_ERUNTIME, "gpt: input gradient of micro-batch %d without its forward",
                   mb);
  if (!c->is_last && !dout)
    return kt_fail(err, KT_EINVAL, "gpt: backward needs the output gradient");
  const kt__gpt_rows *r = &g->rows[mb];
  if (r->row && (st = group_backward(c, mb, err))) return st;
  size_t na, nk, nw;
  stash_floats(c, r, &na, &nk, &nw);
  float *act = kt__stash_acquire(&g->act, c, mb, na);
  float *keep = act ? kt__stash_acquire(&g->keep, c, mb, nk + nw) : NULL;
  if (!keep) return kt_fail(err, KT_ENOMEM, "gpt: out of memory for micro-batch %d", mb);
  point_views(c, mb, r, act, keep, weights_too ? WGRAD_ALTERNATE : WGRAD_EACH);
  if (c->sizes_only) {
    if (c->cfg.recompute) kt__stash_release(&g->inp, c, mb);
    return input_grad_done(c, mb, r);
  }
  if (c->cfg.recompute) {
    const float *saved = g->inp.slot[mb];
    const int *targets = NULL;
    if (c->is_last) targets = (const int *)(saved + g->inp_floats - tokens_floats(c));
    put_input(c, r, &g->acts[0], saved, (const int *)saved);
    st = forward_views(c, r, g->din_tmp, targets, NULL, err);
    kt__stash_release(&g->inp, c, mb);
    if (st) return st;
  }
  kt__gpt_acts *last = &g->acts[c->n_units - 1];
  if (!c->is_last) memcpy(last->dout, dout, (size_t)r->N * c->cfg.hidden * sizeof(float));
  for (int u = c->n_units - 1; u >= 0 && r->N; u--) {
    float *d = u > 0 ? g->acts[u - 1].dout : din ? din : g->din_tmp;
    kt__gpt_unit_backward_input(c, c->first_unit + u, r, &g->acts[u], &g->s, d);
    if (weights_too) kt__gpt_unit_backward_weight(c, c->first_unit + u, r, &g->acts[u], NULL);
  }
  zero_tail(c, r, din, c->in_elems);
  return input_grad_done(c, mb, r);
}

static kt_status gpt_backward_input(kt_chunk *c, int mb, const kt_microbatch *data,
                                    const float *dout, float *din, kt_error *err) {
  (void)data; /* everything needed was stashed by F */
  return input_grad(c, mb, dout, din, 0, err);
}

static kt_status gpt_backward_weight(kt_chunk *c, int mb, kt_error *err) {
  gpt_impl *g = IMPL(c);
  kt_status st = check_mb(c, mb, err);
  if (st) return st;
  if (g->phase[mb] != INPUT_GRAD_DONE)
    return kt_fail(err, KT_ERUNTIME,
                   "gpt: weight gradient of micro-batch %d without its input gradient", mb);
  point_views(c, mb, &g->rows[mb], NULL, g->keep.slot[mb], WGRAD_EACH);
  /* tied in one chunk: both gradients land in dwte, then the head's copy
   * mirrors it, so the two stored copies get identical updates */
  float *dwte = c->grads; /* unit 0 starts with wte */
  for (int u = 0; u < c->n_units && g->rows[mb].N && !c->sizes_only; u++)
    kt__gpt_unit_backward_weight(c, c->first_unit + u, &g->rows[mb], &g->acts[u],
                                 g->tied_local ? dwte : NULL);
  if (g->tied_local && !c->sizes_only) {
    kt__gpt_params p;
    kt__gpt_params_point(&p, c->grads + c->unit_offset[c->n_units - 1], &c->cfg,
                         c->first_unit + c->n_units - 1);
    memcpy(p.headw, dwte, c->tied_elems * sizeof(float));
  }
  return weight_grad_done(c, mb);
}

/* A full B. Each unit's W follows its I, except with the tied head in this
 * chunk, whose two gradients must land in dwte in W's own order (the
 * embedding's, then the head's) to match an I then W bit for bit. */
static kt_status gpt_backward(kt_chunk *c, int mb, const kt_microbatch *data, const float *dout,
                              float *din, kt_error *err) {
  gpt_impl *g = IMPL(c);
  if (g->tied_local || c->sizes_only) {
    kt_status st = gpt_backward_input(c, mb, data, dout, din, err);
    return st ? st : gpt_backward_weight(c, mb, err);
  }
  kt_status st = input_grad(c, mb, dout, din, 1, err);
  return st ? st : weight_grad_done(c, mb);
}

static void gpt_destroy(kt_chunk *c) {
  gpt_impl *g = IMPL(c);
  if (g) {
    kt__stash_free(&g->inp);
    kt__stash_free(&g->act);
    kt__stash_free(&g->keep);
    kt__stash_free(&g->group);
    free(g->row);
    free(g->chunks_fwd);
    free(g->chunks_bwd);
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
    free(g->rows);
    free(g->pos);
    free(g);
  }
  kt__chunk_free_common(c);
}

static const kt_chunk_ops gpt_ops = {gpt_forward, gpt_backward_input, gpt_backward_weight,
                                     gpt_destroy, gpt_backward};

/* Stash offsets per unit and the scratch sizes; allocates everything. */
static kt_status gpt_impl_alloc(kt_chunk *c, kt_error *err) {
  gpt_impl *g = calloc(1, sizeof *g);
  c->impl = g;
  if (!g) return kt_fail(err, KT_ENOMEM, "out of memory creating the GPT chunk");
  int n = c->n_units, B = c->micro_batch, T = c->cfg.seq_len, C = c->cfg.hidden;
  size_t N = (size_t)B * T, n_mb = (size_t)c->n_microbatches, groups = n_mb / seq_chunks(c) + 1;
  g->acts = calloc((size_t)n, sizeof *g->acts);
  g->phase = calloc(n_mb, 1);
  g->rows = calloc(n_mb, sizeof *g->rows);
  g->pos = malloc(n_mb * N * sizeof(int));
  g->row = malloc(n_mb * N * sizeof(int));
  g->chunks_fwd = calloc(groups, sizeof(int));
  g->chunks_bwd = calloc(groups, sizeof(int));
  if (!g->acts || !g->phase || !g->rows || !g->pos || !g->row || !g->chunks_fwd || !g->chunks_bwd)
    return kt_fail(err, KT_ENOMEM, "out of memory creating the GPT chunk");
  kt__gpt_rows whole = fixed_rows(c);
  size_t stream_keep = 0;
  for (int u = 0; u < n; u++) {
    size_t a = kt__gpt_acts_point(NULL, NULL, KT__GPT_ACT, &c->cfg, c->first_unit + u, &whole);
    size_t k = kt__gpt_acts_point(NULL, NULL, KT__GPT_KEEP, &c->cfg, c->first_unit + u, &whole);
    if (a > g->stream_act) g->stream_act = a;
    if (k > stream_keep) stream_keep = k;
    g->blocks += kt__gpt_unit_kind(&c->cfg, c->first_unit + u) == KT__GPT_BLOCK;
  }
  stash_floats(c, &whole, &g->act_floats, &g->keep_floats, &g->wgrad_floats);
  g->inp_floats = (c->is_first ? N : N * C) + (c->is_last ? N : 0);
  g->s.fc = kt__alloc_floats(4 * N * C);
  g->s.dsmall = kt__alloc_floats(N * C);
  /* one T x T of attention scratch (and more) for each thread the chunk will have */
  size_t attn = kt__attention_scratch_floats(T, C / c->cfg.heads);
  g->s.attn = kt__alloc_floats(attn * (size_t)kt_blas_threads());
  g->s.partials = kt__alloc_floats(2 * kt__partials_floats((int)N, 4 * C));
  g->stream = kt__alloc_floats(g->stream_act + stream_keep);
  g->ping = kt__alloc_floats(N * C);
  g->pong = kt__alloc_floats(N * C);
  g->din_tmp = kt__alloc_floats(N * C);
  if (!g->s.fc || !g->s.dsmall || !g->s.attn || !g->s.partials || !g->stream || !g->ping ||
      !g->pong || !g->din_tmp)
    return kt_fail(err, KT_ENOMEM,
                   "out of memory for the GPT chunk's scratch (a micro-batch of %d samples)", B);
  kt_status st = kt__stash_init(&g->inp, c->n_microbatches, err);
  if (!st) st = kt__stash_init(&g->act, c->n_microbatches, err);
  if (!st) st = kt__stash_init(&g->keep, c->n_microbatches, err);
  if (!st) st = kt__stash_init(&g->group, (int)groups, err);
  return st;
}

kt_status kt__gpt_chunk_create(const kt_model_config *cfg, int first_unit, int n_units,
                               int micro_batch, int n_microbatches, int sizes_only, kt_chunk **out,
                               kt_error *err) {
  *out = NULL;
  if (cfg->kind != KT_MODEL_GPT) return kt_fail(err, KT_EINVAL, "gpt: model kind is not gpt");
  kt_chunk *c;
  kt_status st =
      kt__chunk_alloc(cfg, first_unit, n_units, micro_batch, n_microbatches, sizes_only, &c, err);
  if (st) return st;
  c->ops = &gpt_ops;
  st = gpt_impl_alloc(c, err);
  if (st) {
    gpt_destroy(c);
    return st;
  }
  for (int u = 0; u < n_units && !sizes_only; u++)
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
  kt__gpt_rows r = fixed_rows(c);
  kt_status st = forward_streaming(c, &r, in, c->is_first ? data->tokens : NULL, out, targets, loss,
                                   logits, err);
  kt__exec_leave(saved);
  return st;
}
