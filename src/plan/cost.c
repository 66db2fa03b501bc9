/* Planner cost model: parameters, FLOPs, activation bytes and times per layer.
 *
 * Legend: s sequence, b micro-batch, h hidden, a heads, hk = kv_heads*h/a
 * (key/value width), f FFN width, v vocabulary, t tensor-parallel degree.
 * Bytes: bf16 activations (2 bytes), fp32 logits (4 bytes), 1-byte dropout
 * masks, as in Korthikanti et al. 2022 ("Reducing activation recomputation
 * in large transformer models"), whose GPT block keeps sbh(34 + 5as/h).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "plan/plan_internal.h"

/* A block's stash in units of s*h bytes, split into the part that tensor
 * parallelism without sequence parallelism leaves replicated (layer-norm
 * inputs 4, QKV and FC1 inputs 2 + 2, two dropout masks 2) and the rest. */
typedef struct {
  double rep, shard; /* units of s*h bytes */
  double attn;       /* 5as^2 bytes per sample: scores, softmax, its dropout */
} stash;

static double kv_width(double h, double a, double kv) { return h * kv / a; }

static stash block_stash(double s, double h, double a, double kv, double f, int swiglu) {
  double hk = kv_width(h, a, kv);
  /* attention: QKV input 2, Q 2, K and V 4hk/h, proj input 2, dropout mask 1 */
  double attn = 2 + 2 + 4 * hk / h + 2 + 1;
  /* MLP: FC1 input 2, activation inputs and FC2 input 4f/h (GELU; 6f/h for
   * SwiGLU's gate, up and product), dropout mask 1 */
  double mlp = 2 + (swiglu ? 6 : 4) * f / h + 1;
  double total = 4 /* two layer norms */ + attn + mlp; /* GPT: 4 + 11 + 19 = 34 */
  return (stash){.rep = 10, .shard = total - 10, .attn = 5 * a * s * s};
}

/* Bytes a W needs after its I: inputs of the four linears and the gradients
 * of their outputs (32 sbh for GPT, the zero-bubble paper's M_W). Replicated
 * without sequence parallelism: QKV and FC1 inputs, proj and FC2 output grads. */
static stash block_wgrad(double h, double a, double kv, double f, int swiglu) {
  double hk = kv_width(h, a, kv);
  double attn = 2 + 2 * (h + 2 * hk) / h + 2 + 2;
  double mlp = 2 + 2 + (swiglu ? 6 : 4) * f / h;
  return (stash){.rep = 8, .shard = attn + mlp - 8, .attn = 0};
}

/* Per-sample bytes of a stash under (t, sequence parallel). */
static double stash_bytes(stash st, double s, double h, int t, int sp) {
  if (sp || t == 1) return (s * h * (st.rep + st.shard) + st.attn) / t;
  return s * h * (st.rep + st.shard / t) + st.attn / t;
}

double kt_plan_block_activation(double s, double b, double h, double a, int t, int sp,
                                kt_recompute r) {
  if (t < 1) t = 1;
  if (r == KT_RECOMPUTE_FULL) return b * 2 * s * h / (sp ? t : 1);
  stash st = block_stash(s, h, a, a, 4 * h, 0);
  if (r == KT_RECOMPUTE_SELECTIVE) st.attn = 0;
  return b * stash_bytes(st, s, h, t, sp);
}

double kt_plan_state_bytes(double params, const kt_plan_options *o, int ways, int d) {
  if (ways < 1) ways = 1;
  if (d < 1) d = 1;
  double p = params / ways;
  double w = p * o->weight_bytes, g = p * o->grad_bytes, opt = p * o->optimizer_bytes;
  if (o->zero >= 1) opt /= d;
  if (o->zero >= 2) g /= d;
  if (o->zero >= 3) w /= d;
  return w + g + opt;
}

/* ---- the unit chain of a transformer -------------------------------------------- */

kt_status kt__plan_check_shape(const kt_plan_model *m, kt_error *err) {
  if (m->blocks < 1 || m->blocks > KT_PLAN_MAX_LAYERS - 2)
    return kt_fail(err, KT_EINVAL, "model: blocks=%d out of range 1..%d", m->blocks,
                   KT_PLAN_MAX_LAYERS - 2);
  if (m->hidden < 1 || m->heads < 1 || m->kv_heads < 1 || m->ffn < 1 || m->vocab < 1 ||
      m->seq_len < 1)
    return kt_fail(err, KT_EINVAL,
                   "model: sizes must be >= 1 (hidden %d, heads %d, kv_heads %d, "
                   "ffn %d, vocab %d, seq_len %d)",
                   m->hidden, m->heads, m->kv_heads, m->ffn, m->vocab, m->seq_len);
  if (m->hidden % m->heads)
    return kt_fail(err, KT_EINVAL, "model: hidden=%d is not a multiple of heads=%d", m->hidden,
                   m->heads);
  if (m->kv_heads > m->heads || m->heads % m->kv_heads)
    return kt_fail(err, KT_EINVAL, "model: kv_heads=%d must divide heads=%d", m->kv_heads,
                   m->heads);
  return KT_OK;
}

static double block_linear_params(const kt_plan_model *m) {
  double h = m->hidden, f = m->ffn, hk = kv_width(h, m->heads, m->kv_heads);
  return h * (h + 2 * hk) + h * h + (m->swiglu ? 3 : 2) * h * f;
}

kt_status kt__plan_build_layers(kt_plan_model *m, kt_error *err) {
  kt_status st = kt__plan_check_shape(m, err);
  if (st) return st;
  int n = m->blocks + 2;
  m->layers = kt_calloc((size_t)n, sizeof *m->layers);
  if (!m->layers) return kt_fail(err, KT_ENOMEM, "out of memory for %d layers", n);
  m->n_layers = n;
  double s = m->seq_len, h = m->hidden, v = m->vocab, f = m->ffn;
  double hk = kv_width(h, m->heads, m->kv_heads);
  /* GPT style (GELU) has biases and two-parameter layer norms; LLaMA style
   * (SwiGLU) has neither biases nor norm shifts. */
  double bias = m->swiglu ? 0 : (h + 2 * hk) + h + f + h;
  double norms = m->swiglu ? 2 * h : 4 * h;
  kt_plan_layer *e = &m->layers[0], *hd = &m->layers[n - 1];
  *e = (kt_plan_layer){.name = "embed", .kind = KT_LAYER_EMBED};
  e->params = v * h + (m->learned_positions ? s * h : 0);
  e->act_bytes = s * h; /* dropout mask */
  e->out_bytes = 2 * s * h;
  for (int i = 1; i <= m->blocks; i++) {
    kt_plan_layer *l = &m->layers[i];
    *l = (kt_plan_layer){.kind = KT_LAYER_BLOCK};
    snprintf(l->name, sizeof l->name, "block%d", i - 1);
    l->params = block_linear_params(m) + bias + norms;
    l->flops = 2 * s * block_linear_params(m) + 4 * s * s * h;
    l->act_bytes = stash_bytes(block_stash(s, h, m->heads, m->kv_heads, f, m->swiglu), s, h, 1, 0);
    l->wgrad_bytes = stash_bytes(block_wgrad(h, m->heads, m->kv_heads, f, m->swiglu), s, h, 1, 0);
    l->out_bytes = 2 * s * h;
  }
  *hd = (kt_plan_layer){.name = "head", .kind = KT_LAYER_HEAD};
  hd->params = v * h + norms / 2; /* a tied head still holds its copy of the embedding */
  hd->flops = 2 * s * h * v;
  hd->act_bytes = 4 * s * h + 4 * s * v; /* norm and head inputs, fp32 logits */
  hd->wgrad_bytes = 2 * s * h + 2 * s * v;
  return KT_OK;
}

/* ---- per-layer costs under a layout --------------------------------------------- */

/* One tensor-parallel collective (all-reduce, or reduce-scatter/all-gather
 * pairs under sequence parallelism: the same volume) of `bytes` over t ranks. */
static double collective(const kt_plan_cluster *c, int t, int sp, double bytes) {
  if (t <= 1) return 0;
  double bw, lat;
  kt__plan_link(c, t, &bw, &lat);
  double vol = (sp ? 1.0 : 2.0) * (t - 1) / t * bytes;
  return lat + vol / bw;
}

/* What every layer of one shape shares: sizes, the device's rate and the
 * tensor-parallel collectives a pass runs. */
typedef struct {
  const kt_plan_model *m;
  const kt_plan_shape *sh;
  double s, h, v, b, rate;
  int t, sp;
  double tp_block, tp_one; /* a block's collectives per pass; one collective */
} layer_ctx;

static void block_cost(const layer_ctx *x, kt_layer_cost *k) {
  const kt_plan_model *m = x->m;
  double s = x->s, h = x->h, b = x->b;
  int t = x->t, sp = x->sp;
  double lin = 2 * s * block_linear_params(m) * b / t, core = 4 * s * s * h * b / t;
  stash act = block_stash(s, h, m->heads, m->kv_heads, m->ffn, m->swiglu);
  stash wg = block_wgrad(h, m->heads, m->kv_heads, m->ffn, m->swiglu);
  k->flops = lin + core;
  k->f = (lin + core) / x->rate + x->tp_block;
  k->i = (lin + 2 * core) / x->rate + x->tp_block;
  k->tp = 2 * x->tp_block;
  k->w = lin / x->rate;
  k->wgrad = b * stash_bytes(wg, s, h, t, sp);
  if (x->sh->recompute == KT_RECOMPUTE_FULL) {
    k->i += k->f;
    k->tp += x->tp_block;
    k->act = b * 2 * s * h / (sp ? t : 1);
  } else {
    if (x->sh->recompute == KT_RECOMPUTE_SELECTIVE) {
      k->i += core / x->rate;
      act.attn = 0;
    }
    k->act = b * stash_bytes(act, s, h, t, sp);
  }
  k->out_bytes = b * 2 * s * h / (sp ? t : 1);
}

static void embed_cost(const layer_ctx *x, kt_layer_cost *k) {
  double shard = x->sp ? x->t : 1;
  k->f = x->tp_one;
  k->tp = x->tp_one;
  k->act = x->b * x->s * x->h / shard;
  k->out_bytes = x->b * 2 * x->s * x->h / shard;
}

static void head_cost(const layer_ctx *x, kt_layer_cost *k) {
  double s = x->s, h = x->h, v = x->v, b = x->b, shard = x->sp ? x->t : 1;
  double fl = 2 * s * h * v * b / x->t;
  k->flops = fl;
  k->f = fl / x->rate + x->tp_one;
  k->i = fl / x->rate + x->tp_one;
  k->w = fl / x->rate;
  k->tp = 2 * x->tp_one;
  k->act = b * (4 * s * h / shard + 4 * s * v / x->t);
  k->wgrad = b * (2 * s * h / shard + 2 * s * v / x->t);
}

/* A custom layer: its costs given per sample at t = 1, split evenly over t. */
static void custom_cost(const layer_ctx *x, int i, kt_layer_cost *k) {
  const kt_plan_layer *l = &x->m->layers[i];
  double b = x->b;
  int t = x->t, full = x->sh->recompute == KT_RECOMPUTE_FULL;
  k->flops = l->flops * b / t;
  k->f = k->flops / x->rate;
  k->i = k->flops / x->rate + (full ? k->flops / x->rate : 0);
  k->w = k->flops / x->rate;
  k->act = l->act_bytes * b / t;
  if (full && i > 0) k->act = fmin(k->act, x->m->layers[i - 1].out_bytes * b / t);
  k->wgrad = l->wgrad_bytes * b / t;
  k->out_bytes = l->out_bytes * b;
}

kt_status kt_plan_layer_costs(const kt_plan_model *m, const kt_plan_cluster *c,
                              const kt_plan_options *o, const kt_plan_shape *sh,
                              kt_layer_cost *costs, kt_error *err) {
  int t = sh->t, sp = o->sequence_parallel && t > 1;
  double rate = kt_plan_cluster_flops(c);
  if (t < 1 || sh->b < 1) return kt_fail(err, KT_EINVAL, "t=%d, b=%d: must be >= 1", t, sh->b);
  if (m->transformer && (m->heads % t || m->kv_heads % t))
    return kt_fail(err, KT_EINVAL, "tensor parallel t=%d does not divide heads=%d / kv_heads=%d", t,
                   m->heads, m->kv_heads);
  if (!(rate > 0)) return kt_fail(err, KT_EINVAL, "achieved FLOP/s %g: must be > 0", rate);
  layer_ctx x = {.m = m,
                 .sh = sh,
                 .s = m->seq_len,
                 .h = m->hidden,
                 .v = m->vocab,
                 .b = sh->b,
                 .rate = rate,
                 .t = t,
                 .sp = sp};
  /* Under sequence parallelism each block runs four collectives per pass
   * (gather before and scatter after attention and MLP), else two all-reduces. */
  double coll_bytes = 2 * x.s * x.h * x.b;
  x.tp_block = (sp ? 4 : 2) * collective(c, t, sp, coll_bytes);
  x.tp_one = collective(c, t, sp, coll_bytes);
  for (int i = 0; i < m->n_layers; i++) {
    kt_layer_cost *k = &costs[i];
    memset(k, 0, sizeof *k);
    k->params = m->layers[i].params / t;
    switch (m->layers[i].kind) {
      case KT_LAYER_BLOCK: block_cost(&x, k); break;
      case KT_LAYER_EMBED: embed_cost(&x, k); break;
      case KT_LAYER_HEAD: head_cost(&x, k); break;
      default: custom_cost(&x, i, k); break;
    }
  }
  return KT_OK;
}
