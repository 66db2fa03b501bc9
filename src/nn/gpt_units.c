/* GPT units: parameter and activation layouts (one size table each, used by
 * forward, backward and initialisation alike), initialisation, and the
 * forward / input-gradient / weight-gradient passes of the three unit kinds.
 * Legend: B = batch, T = time, C = channels, NH = heads, V = vocabulary,
 * N = B * T rows. */
#include <math.h>
#include <string.h>

#include "nn/gpt.h"

/* Every tensor of a table starts on a 64-byte boundary. */
#define ALIGN_FLOATS 16
#define MAX_FIELDS 16

typedef struct {
  float **ptr;
  size_t n;         /* floats */
  const char *name; /* parameters only */
} field;

static size_t align_up(size_t n) { return (n + ALIGN_FLOATS - 1) / ALIGN_FLOATS * ALIGN_FLOATS; }

/* Sums a table's sizes and, with base non-NULL, points its fields into base. */
static size_t layout(const field *f, int n, float *base, int aligned) {
  size_t off = 0;
  for (int i = 0; i < n; i++) {
    if (base) *f[i].ptr = base + off;
    off += aligned ? align_up(f[i].n) : f[i].n;
  }
  return off;
}

kt__gpt_kind kt__gpt_unit_kind(const kt_model_config *cfg, int unit) {
  if (unit == 0) return KT__GPT_EMBED;
  return unit == cfg->layers + 1 ? KT__GPT_HEAD : KT__GPT_BLOCK;
}

/* The parameter table; sizes must sum to kt_model_unit_params (packed). */
static int params_fields(kt__gpt_params *p, const kt_model_config *cfg, int unit, field *f) {
  size_t C = (size_t)cfg->hidden, V = (size_t)cfg->vocab, T = (size_t)cfg->seq_len;
  int n = 0;
  switch (kt__gpt_unit_kind(cfg, unit)) {
    case KT__GPT_EMBED:
      f[n++] = (field){&p->wte, V * C, "wte"};
      f[n++] = (field){&p->wpe, T * C, "wpe"};
      break;
    case KT__GPT_BLOCK:
      f[n++] = (field){&p->ln1w, C, "ln1w"};
      f[n++] = (field){&p->ln1b, C, "ln1b"};
      f[n++] = (field){&p->qkvw, 3 * C * C, "qkvw"};
      f[n++] = (field){&p->qkvb, 3 * C, "qkvb"};
      f[n++] = (field){&p->attprojw, C * C, "attprojw"};
      f[n++] = (field){&p->attprojb, C, "attprojb"};
      f[n++] = (field){&p->ln2w, C, "ln2w"};
      f[n++] = (field){&p->ln2b, C, "ln2b"};
      f[n++] = (field){&p->fcw, 4 * C * C, "fcw"};
      f[n++] = (field){&p->fcb, 4 * C, "fcb"};
      f[n++] = (field){&p->fcprojw, 4 * C * C, "fcprojw"};
      f[n++] = (field){&p->fcprojb, C, "fcprojb"};
      break;
    case KT__GPT_HEAD:
      f[n++] = (field){&p->lnfw, C, "lnfw"};
      f[n++] = (field){&p->lnfb, C, "lnfb"};
      f[n++] = (field){&p->headw, V * C, "headw"};
      break;
  }
  return n;
}

void kt__gpt_params_point(kt__gpt_params *p, float *base, const kt_model_config *cfg, int unit) {
  field f[MAX_FIELDS];
  memset(p, 0, sizeof *p);
  layout(f, params_fields(p, cfg, unit, f), base, 0);
}

int kt_gpt_unit_tensors(const kt_model_config *cfg, int unit, kt_param_tensor *out, int max) {
  field f[MAX_FIELDS];
  kt__gpt_params p;
  int n = params_fields(&p, cfg, unit, f);
  size_t off = 0;
  for (int i = 0; i < n && i < max; i++) {
    const char *name = f[i].name;
    int matrix = strncmp(name, "ln", 2) && name[strlen(name) - 1] != 'b'; /* not gains, biases */
    out[i] = (kt_param_tensor){name, off, f[i].n, matrix};
    off += f[i].n;
  }
  return n;
}

static field act(float **ptr, size_t n) { return (field){ptr, n, NULL}; }

/* The activation table of one segment. */
static int acts_fields(kt__gpt_acts *a, int seg, const kt_model_config *cfg, int unit,
                       const kt__gpt_rows *r, field *f) {
  size_t C = (size_t)cfg->hidden, V = (size_t)cfg->vocab, N = (size_t)r->N;
  int n = 0;
  switch (kt__gpt_unit_kind(cfg, unit)) {
    case KT__GPT_EMBED:
      if (seg == KT__GPT_KEEP) f[n++] = act(&a->tokens, N);
      if (seg == KT__GPT_WGRAD) f[n++] = act(&a->dout, N * C);
      break;
    case KT__GPT_BLOCK:
      if (seg == KT__GPT_ACT) {
        f[n++] = act(&a->x, N * C);
        f[n++] = act(&a->ln1_mean, N);
        f[n++] = act(&a->ln1_rstd, N);
        f[n++] = act(&a->qkv, 3 * N * C);
        f[n++] = act(&a->att, r->att);
        f[n++] = act(&a->res2, N * C);
        f[n++] = act(&a->ln2_mean, N);
        f[n++] = act(&a->ln2_rstd, N);
        f[n++] = act(&a->gelu_grad, 4 * N * C);
      } else if (seg == KT__GPT_KEEP) {
        f[n++] = act(&a->ln1, N * C);
        f[n++] = act(&a->atty, N * C);
        f[n++] = act(&a->ln2, N * C);
        f[n++] = act(&a->fch_gelu, 4 * N * C);
      } else {
        f[n++] = act(&a->dout, N * C);
        f[n++] = act(&a->dres2, N * C);
        f[n++] = act(&a->dfch, 4 * N * C);
        f[n++] = act(&a->dqkv, 3 * N * C);
        f[n++] = act(&a->dln1w, C);
        f[n++] = act(&a->dln1b, C);
        f[n++] = act(&a->dqkvb, 3 * C);
        f[n++] = act(&a->dattprojb, C);
        f[n++] = act(&a->dln2w, C);
        f[n++] = act(&a->dln2b, C);
        f[n++] = act(&a->dfcb, 4 * C);
        f[n++] = act(&a->dfcprojb, C);
      }
      break;
    case KT__GPT_HEAD:
      if (seg == KT__GPT_ACT) {
        f[n++] = act(&a->x, N * C);
        f[n++] = act(&a->lnf_mean, N);
        f[n++] = act(&a->lnf_rstd, N);
      } else if (seg == KT__GPT_KEEP) {
        f[n++] = act(&a->lnf, N * C);
        f[n++] = act(&a->dlogits, N * V);
      } else {
        f[n++] = act(&a->dlnfw, C);
        f[n++] = act(&a->dlnfb, C);
      }
      break;
  }
  return n;
}

size_t kt__gpt_acts_point(kt__gpt_acts *a, float *base, int seg, const kt_model_config *cfg,
                          int unit, const kt__gpt_rows *r) {
  field f[MAX_FIELDS];
  kt__gpt_acts unused;
  return layout(f, acts_fields(a ? a : &unused, seg, cfg, unit, r, f), base, 1);
}

size_t kt__gpt_att_floats(const kt__gpt_rows *r, int NH) {
  if (!r->pos) return (size_t)r->N * NH * r->T;
  size_t n = 0;
  for (int i = 0; i < r->N;) {
    int L = kt__doc_length(r->pos, r->row, i, r->N);
    n += (size_t)L * (size_t)(r->pos[i + L - 1] + 1); /* rows x keys up to the last */
    i += L;
  }
  return n * NH;
}

static void fill_normal(float *w, size_t n, float std, kt__rng *r) {
  for (size_t i = 0; i < n; i++) w[i] = std * kt__rng_normal(r);
}

static void fill_const(float *w, size_t n, float value) {
  for (size_t i = 0; i < n; i++) w[i] = value;
}

/* GPT-2 initialisation: weights N(0, 0.02), the two residual projections
 * N(0, 0.02 / sqrt(2L)), biases 0, LayerNorm gains 1. Each unit draws from
 * its own stream, so any partition initialises identically; a tied head
 * draws the token embedding's stream and is its exact copy. */
void kt__gpt_params_init(float *base, const kt_model_config *cfg, int unit) {
  size_t C = (size_t)cfg->hidden, V = (size_t)cfg->vocab, T = (size_t)cfg->seq_len;
  float std = 0.02f, resid_std = 0.02f / sqrtf(2.0f * (float)cfg->layers);
  kt__gpt_params p;
  kt__gpt_params_point(&p, base, cfg, unit);
  kt__rng r;
  kt__rng_seed(&r, kt__unit_seed(cfg->seed, unit));
  switch (kt__gpt_unit_kind(cfg, unit)) {
    case KT__GPT_EMBED:
      fill_normal(p.wte, V * C, std, &r);
      fill_normal(p.wpe, T * C, std, &r);
      break;
    case KT__GPT_BLOCK:
      fill_const(p.ln1w, C, 1.0f);
      fill_const(p.ln1b, C, 0.0f);
      fill_normal(p.qkvw, 3 * C * C, std, &r);
      fill_const(p.qkvb, 3 * C, 0.0f);
      fill_normal(p.attprojw, C * C, resid_std, &r);
      fill_const(p.attprojb, C, 0.0f);
      fill_const(p.ln2w, C, 1.0f);
      fill_const(p.ln2b, C, 0.0f);
      fill_normal(p.fcw, 4 * C * C, std, &r);
      fill_const(p.fcb, 4 * C, 0.0f);
      fill_normal(p.fcprojw, 4 * C * C, resid_std, &r);
      fill_const(p.fcprojb, C, 0.0f);
      break;
    case KT__GPT_HEAD:
      fill_const(p.lnfw, C, 1.0f);
      fill_const(p.lnfb, C, 0.0f);
      if (cfg->tie_embeddings) kt__rng_seed(&r, kt__unit_seed(cfg->seed, 0));
      fill_normal(p.headw, V * C, std, &r);
      break;
  }
}

static void params_of(const kt_chunk *c, int unit, kt__gpt_params *p, float *buf) {
  kt__gpt_params_point(p, buf + c->unit_offset[unit - c->first_unit], &c->cfg, unit);
}

static int reference_kernels; /* kt__gpt_set_reference */

void kt__gpt_set_reference(int on) { reference_kernels = on; }
int kt__gpt_reference(void) { return reference_kernels; }

/* A block's forward on the serial kernels as first written: the bias laid
 * down before each matmul, GELU apart, attention over all T x T. */
static void block_forward_reference(const kt__gpt_params *p, kt__gpt_acts *a, kt__gpt_scratch *s,
                                    float *out, const kt__gpt_rows *r, int C, int NH) {
  int N = r->N;
  kt__layernorm_forward(a->ln1, a->ln1_mean, a->ln1_rstd, a->x, p->ln1w, p->ln1b, N, C);
  kt__matmul_forward(a->qkv, a->ln1, p->qkvw, p->qkvb, N, C, 3 * C);
  if (r->row)
    kt__attention_forward_chunked(a->atty, a->att, s->attn, a->gqkv, a->qkv, r->pos, r->row, N,
                                  r->T, C, NH);
  else if (r->pos)
    kt__attention_forward_packed(a->atty, a->att, s->attn, a->qkv, r->pos, N, C, NH, 1);
  else kt__attention_forward(a->atty, a->att, s->attn, a->qkv, r->B, r->T, C, NH);
  kt__matmul_residual_forward(a->res2, a->atty, p->attprojw, p->attprojb, a->x, N, C, C);
  kt__layernorm_forward(a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, p->ln2w, p->ln2b, N, C);
  kt__matmul_forward(s->fc, a->ln2, p->fcw, p->fcb, N, C, 4 * C);
  kt__gelu_forward_grad(a->fch_gelu, a->gelu_grad, s->fc, (size_t)N * 4 * C);
  kt__matmul_residual_forward(out, a->fch_gelu, p->fcprojw, p->fcprojb, a->res2, N, 4 * C, C);
}

/* The same on the chunk's threads: each product's bias, residual and
 * GELU in its epilogue, attention blocked by query rows. */
static void block_forward(const kt__gpt_params *p, kt__gpt_acts *a, kt__gpt_scratch *s, float *out,
                          const kt__gpt_rows *r, int C, int NH) {
  int N = r->N;
  kt__layernorm_forward_par(a->ln1, a->ln1_mean, a->ln1_rstd, a->x, p->ln1w, p->ln1b, N, C);
  kt__matmul_forward_par(a->qkv, a->ln1, p->qkvw, p->qkvb, N, C, 3 * C);
  if (r->row)
    kt__attention_forward_chunked(a->atty, a->att, s->attn, a->gqkv, a->qkv, r->pos, r->row, N,
                                  r->T, C, NH);
  else if (r->pos)
    kt__attention_forward_packed(a->atty, a->att, s->attn, a->qkv, r->pos, N, C, NH, 0);
  else
    kt__attention_forward_blocked(a->atty, a->att, s->attn, a->qkv, r->B, r->T, C, NH, KT__ATT_QB);
  kt__matmul_residual_forward_par(a->res2, a->atty, p->attprojw, p->attprojb, a->x, N, C, C);
  kt__layernorm_forward_par(a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, p->ln2w, p->ln2b, N, C);
  kt__matmul_bias_gelu_forward_par(a->fch_gelu, a->gelu_grad, a->ln2, p->fcw, p->fcb, N, C, 4 * C);
  kt__matmul_residual_forward_par(out, a->fch_gelu, p->fcprojw, p->fcprojb, a->res2, N, 4 * C, C);
}

static void embed_forward(float *out, const kt__gpt_params *p, const int *tokens,
                          const kt__gpt_rows *r, int C, int reference) {
  if (r->pos && reference) kt__encoder_forward_pos(out, tokens, r->pos, p->wte, p->wpe, r->N, C);
  else if (r->pos) kt__encoder_forward_pos_par(out, tokens, r->pos, p->wte, p->wpe, r->N, C);
  else if (reference) kt__encoder_forward(out, tokens, p->wte, p->wpe, r->B, r->T, C);
  else kt__encoder_forward_par(out, tokens, p->wte, p->wpe, r->B, r->T, C);
}

/* The head's loss: summed over the rows, each weighed by r->dscale (1 / N
 * when 0). */
static kt_status head_loss(float *dlogits, const int *targets, const kt__gpt_rows *r, int V,
                           int reference, double *loss, kt_error *err) {
  int N = r->N;
  for (int i = 0; i < N; i++)
    if (targets[i] < 0 || targets[i] >= V)
      return kt_fail(err, KT_EINVAL, "gpt: target %d at position %d is outside 0..%d", targets[i],
                     i, V - 1);
  float ds = r->dscale > 0 ? (float)r->dscale : 1.0f / N;
  double sum = reference ? kt__crossentropy_forward(dlogits, dlogits, targets, N, V, ds)
                         : kt__crossentropy_forward_par(dlogits, dlogits, targets, N, V, ds);
  if (loss) *loss = r->dscale > 0 ? sum * r->dscale : sum / N;
  return KT_OK;
}

kt_status kt__gpt_unit_forward(const kt_chunk *c, int unit, const kt__gpt_rows *r, kt__gpt_acts *a,
                               kt__gpt_scratch *s, float *out, const int *targets, double *loss,
                               kt_error *err) {
  int C = c->cfg.hidden, V = c->cfg.vocab;
  int NH = c->cfg.heads, N = r->N, reference = reference_kernels;
  kt__gpt_params p;
  params_of(c, unit, &p, c->params);
  switch (kt__gpt_unit_kind(&c->cfg, unit)) {
    case KT__GPT_EMBED: {
      const int *tokens = (const int *)a->tokens;
      for (int i = 0; i < N; i++)
        if (tokens[i] < 0 || tokens[i] >= V)
          return kt_fail(err, KT_EINVAL, "gpt: token %d at position %d is outside 0..%d", tokens[i],
                         i, V - 1);
      embed_forward(out, &p, tokens, r, C, reference);
      break;
    }
    case KT__GPT_BLOCK:
      if (reference) block_forward_reference(&p, a, s, out, r, C, NH);
      else block_forward(&p, a, s, out, r, C, NH);
      break;
    case KT__GPT_HEAD:
      if (reference)
        kt__layernorm_forward(a->lnf, a->lnf_mean, a->lnf_rstd, a->x, p.lnfw, p.lnfb, N, C);
      else kt__layernorm_forward_par(a->lnf, a->lnf_mean, a->lnf_rstd, a->x, p.lnfw, p.lnfb, N, C);
      kt__matmul_forward(a->dlogits, a->lnf, p.headw, NULL, N, C, V);
      if (out) memcpy(out, a->dlogits, sizeof(float) * (size_t)N * V);
      if (targets) return head_loss(a->dlogits, targets, r, V, reference, loss, err);
      break;
  }
  return KT_OK;
}

static void zero(float *x, size_t n) { memset(x, 0, n * sizeof(float)); }

/* A block's input gradient on the serial kernels as first written. */
static void block_backward_reference(const kt__gpt_params *p, kt__gpt_acts *a, kt__gpt_scratch *s,
                                     float *din, const kt__gpt_rows *r, int C, int NH) {
  int N = r->N;
  float *dln = s->dsmall; /* (N,C) gradient of a LayerNorm output, then of atty */
  /* MLP: out = res2 + fcproj(gelu(fc(ln2(res2)))) */
  kt__matmul_backward_input(a->dfch, a->dout, p->fcprojw, N, 4 * C, C, 0);
  kt__bias_backward(a->dfcprojb, a->dout, N, C);
  kt__gelu_backward_saved(a->dfch, a->dfcb, a->gelu_grad, N, 4 * C);
  kt__matmul_backward_input(dln, a->dfch, p->fcw, N, C, 4 * C, 0);
  kt__layernorm_backward(a->dres2, a->dln2w, a->dln2b, a->dout, dln, a->res2, p->ln2w, a->ln2_mean,
                         a->ln2_rstd, N, C);
  /* attention: res2 = x + attproj(attention(qkv(ln1(x)))) */
  kt__bias_backward(a->dattprojb, a->dres2, N, C);
  kt__matmul_backward_input(dln, a->dres2, p->attprojw, N, C, C, 0);
  if (r->row)
    kt__attention_backward_chunked(a->dqkv, a->gdkv, s->attn, dln, a->gqkv, a->att, r->pos, r->row,
                                   N, r->T, C, NH);
  else if (r->pos)
    kt__attention_backward_packed(a->dqkv, s->attn, dln, a->qkv, a->att, r->pos, N, C, NH, 1);
  else kt__attention_backward(a->dqkv, s->attn, dln, a->qkv, a->att, r->B, r->T, C, NH);
  kt__bias_backward(a->dqkvb, a->dqkv, N, 3 * C);
  kt__matmul_backward_input(dln, a->dqkv, p->qkvw, N, C, 3 * C, 0);
  kt__layernorm_backward(din, a->dln1w, a->dln1b, a->dres2, dln, a->x, p->ln1w, a->ln1_mean,
                         a->ln1_rstd, N, C);
}

/* The same on the chunk's threads, attention blocked. */
static void block_backward(const kt__gpt_params *p, kt__gpt_acts *a, kt__gpt_scratch *s, float *din,
                           const kt__gpt_rows *r, int C, int NH) {
  int N = r->N;
  float *dln = s->dsmall, *part = s->partials;
  kt__matmul_backward_input(a->dfch, a->dout, p->fcprojw, N, 4 * C, C, 0);
  kt__bias_backward_par(a->dfcprojb, part, a->dout, N, C);
  kt__gelu_backward_saved_par(a->dfch, a->dfcb, part, a->gelu_grad, N, 4 * C);
  kt__matmul_backward_input(dln, a->dfch, p->fcw, N, C, 4 * C, 0);
  kt__layernorm_backward_par(a->dres2, a->dln2w, a->dln2b, part, a->dout, dln, a->res2, p->ln2w,
                             a->ln2_mean, a->ln2_rstd, N, C);
  kt__bias_backward_par(a->dattprojb, part, a->dres2, N, C);
  kt__matmul_backward_input(dln, a->dres2, p->attprojw, N, C, C, 0);
  if (r->row)
    kt__attention_backward_chunked(a->dqkv, a->gdkv, s->attn, dln, a->gqkv, a->att, r->pos, r->row,
                                   N, r->T, C, NH);
  else if (r->pos)
    kt__attention_backward_packed(a->dqkv, s->attn, dln, a->qkv, a->att, r->pos, N, C, NH, 0);
  else
    kt__attention_backward_blocked(a->dqkv, s->attn, dln, a->qkv, a->att, r->B, r->T, C, NH,
                                   KT__ATT_QB);
  kt__bias_backward_par(a->dqkvb, part, a->dqkv, N, 3 * C);
  kt__matmul_backward_input(dln, a->dqkv, p->qkvw, N, C, 3 * C, 0);
  kt__layernorm_backward_par(din, a->dln1w, a->dln1b, part, a->dres2, dln, a->x, p->ln1w,
                             a->ln1_mean, a->ln1_rstd, N, C);
}

void kt__gpt_unit_backward_input(const kt_chunk *c, int unit, const kt__gpt_rows *r,
                                 kt__gpt_acts *a, kt__gpt_scratch *s, float *din) {
  int C = c->cfg.hidden, V = c->cfg.vocab;
  int NH = c->cfg.heads, N = r->N;
  kt__gpt_params p;
  params_of(c, unit, &p, c->params);
  switch (kt__gpt_unit_kind(&c->cfg, unit)) {
    case KT__GPT_EMBED: /* nothing upstream; dout is kept for the weight gradient */ break;
    case KT__GPT_BLOCK: {
      float *partials[] = {a->dln1w, a->dln1b, a->dattprojb, a->dln2w, a->dln2b, a->dfcprojb};
      for (int i = 0; i < 6; i++) zero(partials[i], C);
      zero(a->dqkvb, 3 * (size_t)C);
      zero(a->dfcb, 4 * (size_t)C);
      if (reference_kernels) block_backward_reference(&p, a, s, din, r, C, NH);
      else block_backward(&p, a, s, din, r, C, NH);
      break;
    }
    case KT__GPT_HEAD:
      zero(a->dlnfw, C);
      zero(a->dlnfb, C);
      kt__matmul_backward_input(s->dsmall, a->dlogits, p.headw, N, C, V, 0);
      if (reference_kernels)
        kt__layernorm_backward(din, a->dlnfw, a->dlnfb, NULL, s->dsmall, a->x, p.lnfw, a->lnf_mean,
                               a->lnf_rstd, N, C);
      else
        kt__layernorm_backward_par(din, a->dlnfw, a->dlnfb, s->partials, NULL, s->dsmall, a->x,
                                   p.lnfw, a->lnf_mean, a->lnf_rstd, N, C);
      break;
  }
}

static void add(float *dst, const float *src, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] += src[i];
}

void kt__gpt_unit_backward_weight(const kt_chunk *c, int unit, const kt__gpt_rows *r,
                                  const kt__gpt_acts *a, float *dheadw) {
  int C = c->cfg.hidden, V = c->cfg.vocab, N = r->N;
  kt__gpt_params g;
  params_of(c, unit, &g, c->grads);
  switch (kt__gpt_unit_kind(&c->cfg, unit)) {
    case KT__GPT_EMBED:
      if (r->pos)
        kt__encoder_backward_pos(g.wte, g.wpe, a->dout, (const int *)a->tokens, r->pos, N, C);
      else kt__encoder_backward(g.wte, g.wpe, a->dout, (const int *)a->tokens, r->B, r->T, C);
      break;
    case KT__GPT_BLOCK:
      kt__matmul_backward_weight(g.fcprojw, a->dout, a->fch_gelu, N, 4 * C, C);
      kt__matmul_backward_weight(g.fcw, a->dfch, a->ln2, N, C, 4 * C);
      kt__matmul_backward_weight(g.attprojw, a->dres2, a->atty, N, C, C);
      kt__matmul_backward_weight(g.qkvw, a->dqkv, a->ln1, N, C, 3 * C);
      add(g.ln1w, a->dln1w, C);
      add(g.ln1b, a->dln1b, C);
      add(g.qkvb, a->dqkvb, 3 * (size_t)C);
      add(g.attprojb, a->dattprojb, C);
      add(g.ln2w, a->dln2w, C);
      add(g.ln2b, a->dln2b, C);
      add(g.fcb, a->dfcb, 4 * (size_t)C);
      add(g.fcprojb, a->dfcprojb, C);
      break;
    case KT__GPT_HEAD:
      kt__matmul_backward_weight(dheadw ? dheadw : g.headw, a->dlogits, a->lnf, N, C, V);
      add(g.lnfw, a->dlnfw, C);
      add(g.lnfb, a->dlnfb, C);
      break;
  }
}
