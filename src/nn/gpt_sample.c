/* Text generation from a full set of GPT chunks: forward over the last T
 * tokens of the context, temperature and top-k sampling of the next token.
 * Legend: B = samples in the chunks' micro-batch, T = time, C = channels,
 * V = vocabulary. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/gpt.h"

static kt_status check_chunks(kt_chunk *const *chunks, int n_chunks, kt_error *err) {
  if (n_chunks < 1 || !chunks) return kt_fail(err, KT_EINVAL, "sample: no chunks");
  const kt_model_config *cfg = &chunks[0]->cfg;
  if (cfg->kind != KT_MODEL_GPT) return kt_fail(err, KT_EINVAL, "sample: the model is not gpt");
  int next = 0;
  for (int i = 0; i < n_chunks; i++) {
    const kt_chunk *c = chunks[i];
    if (c->cfg.kind != KT_MODEL_GPT || c->cfg.layers != cfg->layers ||
        c->cfg.hidden != cfg->hidden || c->cfg.seq_len != cfg->seq_len ||
        c->cfg.vocab != cfg->vocab || c->micro_batch != chunks[0]->micro_batch)
      return kt_fail(err, KT_EINVAL, "sample: chunk %d belongs to another model", i);
    if (c->first_unit != next)
      return kt_fail(err, KT_EINVAL, "sample: chunk %d starts at unit %d, expected %d", i,
                     c->first_unit, next);
    next += c->n_units;
  }
  if (next != kt_model_units(cfg))
    return kt_fail(err, KT_EINVAL, "sample: the chunks cover %d of %d units", next,
                   kt_model_units(cfg));
  return KT_OK;
}

typedef struct {
  float logit;
  int token;
} candidate;

static int by_logit_desc(const void *a, const void *b) {
  const candidate *x = a, *y = b;
  if (x->logit != y->logit) return x->logit < y->logit ? 1 : -1;
  return x->token - y->token;
}

/* Draws the next token from one row of logits (V). */
static int pick(const float *logits, int V, const kt_sample_params *p, candidate *cand,
                kt__rng *rng) {
  for (int i = 0; i < V; i++) cand[i] = (candidate){logits[i], i};
  qsort(cand, (size_t)V, sizeof *cand, by_logit_desc);
  if (p->temperature <= 0.0f) return cand[0].token;
  int k = p->top_k > 0 && p->top_k < V ? p->top_k : V;
  double sum = 0.0;
  for (int i = 0; i < k; i++) sum += exp((double)(cand[i].logit - cand[0].logit) / p->temperature);
  double r = (double)kt__rng_uniform(rng) * sum, acc = 0.0;
  for (int i = 0; i < k; i++) {
    acc += exp((double)(cand[i].logit - cand[0].logit) / p->temperature);
    if (r < acc) return cand[i].token;
  }
  return cand[k - 1].token;
}

kt_status kt_gpt_sample(kt_chunk *const *chunks, int n_chunks, const int *prompt, int n_prompt,
                        int n_new, const kt_sample_params *params, int *out, kt_error *err) {
  kt_status st = check_chunks(chunks, n_chunks, err);
  if (st) return st;
  const kt_model_config *cfg = &chunks[0]->cfg;
  int B = chunks[0]->micro_batch, T = cfg->seq_len, C = cfg->hidden, V = cfg->vocab;
  if (n_prompt < 0 || n_new < 0 || (n_prompt > 0 && !prompt) || (n_new > 0 && !out))
    return kt_fail(err, KT_EINVAL, "sample: bad prompt or output");
  for (int i = 0; i < n_prompt; i++)
    if (prompt[i] < 0 || prompt[i] >= V)
      return kt_fail(err, KT_EINVAL, "sample: prompt token %d at %d is outside 0..%d", prompt[i], i,
                     V - 1);
  kt_sample_params defaults = {1.0f, 0, 1};
  const kt_sample_params *p = params ? params : &defaults;
  size_t N = (size_t)B * T, ctx_len = (size_t)n_prompt + (size_t)n_new + 1;
  int *ctx = malloc(ctx_len * sizeof(int));
  int *tokens = calloc(N, sizeof(int));
  float *bufs[2] = {kt__alloc_floats(N * C), kt__alloc_floats(N * C)};
  float *logits = kt__alloc_floats(N * V);
  candidate *cand = malloc((size_t)V * sizeof *cand);
  if (!ctx || !tokens || !bufs[0] || !bufs[1] || !logits || !cand) {
    st = kt_fail(err, KT_ENOMEM, "sample: out of memory");
    goto done;
  }
  int len = n_prompt;
  if (n_prompt > 0) memcpy(ctx, prompt, (size_t)n_prompt * sizeof(int));
  else ctx[len++] = V > 10 ? 10 : 0;
  kt__rng rng;
  kt__rng_seed(&rng, p->seed);
  for (int step = 0; step < n_new; step++) {
    int start = len > T ? len - T : 0, n = len - start;
    memset(tokens, 0, N * sizeof(int));
    memcpy(tokens, ctx + start, (size_t)n * sizeof(int));
    kt_microbatch mb = {.b = B, .tokens = tokens};
    const float *in = NULL;
    for (int i = 0; i < n_chunks && !st; i++) {
      float *o = chunks[i]->is_last ? NULL : bufs[i % 2];
      st = kt_gpt_chunk_eval(chunks[i], &mb, in, o, NULL, chunks[i]->is_last ? logits : NULL, err);
      in = o;
    }
    if (st) goto done;
    int next = pick(logits + (size_t)(n - 1) * V, V, p, cand, &rng);
    ctx[len++] = next;
    out[step] = next;
  }
done:
  free(ctx);
  free(tokens);
  free(bufs[0]);
  free(bufs[1]);
  free(logits);
  free(cand);
  return st;
}
