/* Model registry, configuration checks, chunk allocation and partitions. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/costs.h"
#include "nn/nn.h"

static const char *const kind_names[] = {"mlp", "gpt"};
_Static_assert(sizeof kind_names / sizeof *kind_names == KT_MODEL_COUNT, "model table out of sync");

const char *kt_model_kind_name(kt_model_kind k) {
  return (unsigned)k < KT_MODEL_COUNT ? kind_names[k] : "?";
}

int kt_model_kind_from_name(const char *name) {
  return kt_name_index(name, kind_names, KT_MODEL_COUNT);
}

void kt_model_config_default(kt_model_config *cfg, kt_model_kind kind) {
  memset(cfg, 0, sizeof *cfg);
  cfg->kind = kind;
  cfg->seed = 1;
  if (kind == KT_MODEL_MLP) {
    cfg->layers = 8;
    cfg->hidden = 64;
  } else {
    cfg->layers = 4;
    cfg->hidden = 64;
    cfg->heads = 4;
    cfg->seq_len = 64;
    cfg->vocab = 256;
  }
}

kt_status kt_model_config_check(const kt_model_config *cfg, kt_error *err) {
  if ((unsigned)cfg->kind >= KT_MODEL_COUNT)
    return kt_fail(err, KT_EINVAL, "unknown model kind %d", (int)cfg->kind);
  if (cfg->layers < 1 || cfg->layers > 4096)
    return kt_fail(err, KT_EINVAL, "layers %d: expected 1..4096", cfg->layers);
  if (cfg->hidden < 1 || cfg->hidden > 65536)
    return kt_fail(err, KT_EINVAL, "hidden width %d: expected 1..65536", cfg->hidden);
  if (cfg->kind == KT_MODEL_GPT) {
    if (cfg->heads < 1 || cfg->hidden % cfg->heads)
      return kt_fail(err, KT_EINVAL, "heads %d must divide the hidden width %d", cfg->heads,
                     cfg->hidden);
    if (cfg->seq_len < 1 || cfg->seq_len > 65536)
      return kt_fail(err, KT_EINVAL, "sequence length %d: expected 1..65536", cfg->seq_len);
    if (cfg->vocab < 2 || cfg->vocab > 1 << 20)
      return kt_fail(err, KT_EINVAL, "vocabulary %d: expected 2..1048576", cfg->vocab);
    if (cfg->seq_chunks < 0 || cfg->seq_chunks > cfg->seq_len)
      return kt_fail(err, KT_EINVAL, "sequence chunks %d: expected 1..%d (the sequence length)",
                     cfg->seq_chunks, cfg->seq_len);
    if (cfg->seq_chunks > 1 && cfg->recompute)
      return kt_fail(err, KT_EINVAL, "sequence chunks %d: not with recompute", cfg->seq_chunks);
  }
  return KT_OK;
}

int kt_model_units(const kt_model_config *cfg) {
  return cfg->kind == KT_MODEL_GPT ? cfg->layers + 2 : cfg->layers;
}

size_t kt_model_boundary_elems(const kt_model_config *cfg) {
  return cfg->kind == KT_MODEL_GPT ? (size_t)cfg->seq_len * cfg->hidden : (size_t)cfg->hidden;
}

size_t kt_model_unit_params(const kt_model_config *cfg, int unit) {
  size_t C = (size_t)cfg->hidden;
  if (cfg->kind == KT_MODEL_MLP) return C * C + C;
  size_t V = (size_t)cfg->vocab, T = (size_t)cfg->seq_len;
  if (unit == 0) return V * C + T * C;               /* wte, wpe */
  if (unit == cfg->layers + 1) return 2 * C + V * C; /* lnf, head (a copy of wte when tied) */
  /* ln1 (2C), qkv (3C*C + 3C), proj (C*C + C), ln2 (2C), fc (4C*C + 4C), fcproj (4C*C + C) */
  return 12 * C * C + 13 * C;
}

double kt_model_unit_flops(const kt_model_config *cfg, int unit) {
  double C = cfg->hidden;
  if (cfg->kind == KT_MODEL_MLP) return 2 * C * C;
  double T = cfg->seq_len, V = cfg->vocab;
  if (unit == 0) return T * C;                                    /* a gather and an add */
  if (unit == cfg->layers + 1) return 2 * T * C * V + 10 * T * V; /* head + softmax */
  return T * (24 * C * C + 4 * T * C);                            /* matmuls + attention */
}

kt_status kt__chunk_alloc(const kt_model_config *cfg, int first_unit, int n_units, int micro_batch,
                          int n_microbatches, int sizes_only, kt_chunk **out, kt_error *err) {
  *out = NULL;
  kt_status st = kt_model_config_check(cfg, err);
  if (st) return st;
  int units = kt_model_units(cfg);
  if (first_unit < 0 || n_units < 1 || first_unit + n_units > units)
    return kt_fail(err, KT_EINVAL, "units %d..%d out of the model's 0..%d", first_unit,
                   first_unit + n_units - 1, units - 1);
  if (micro_batch < 1) return kt_fail(err, KT_EINVAL, "micro-batch size %d < 1", micro_batch);
  if (n_microbatches < 1) return kt_fail(err, KT_EINVAL, "micro-batches %d < 1", n_microbatches);
  kt_chunk *c = calloc(1, sizeof *c);
  if (!c) return kt_fail(err, KT_ENOMEM, "out of memory");
  c->cfg = *cfg;
  c->first_unit = first_unit;
  c->n_units = n_units;
  c->is_first = first_unit == 0;
  c->is_last = first_unit + n_units == units;
  c->micro_batch = micro_batch;
  c->n_microbatches = n_microbatches;
  c->sizes_only = sizes_only != 0;
  size_t be = kt_model_boundary_elems(cfg) * (size_t)micro_batch;
  c->in_elems = c->is_first ? 0 : be;
  c->out_elems = c->is_last ? 0 : be;
  c->unit_offset = calloc((size_t)n_units + 1, sizeof *c->unit_offset);
  if (!c->unit_offset) {
    free(c);
    return kt_fail(err, KT_ENOMEM, "out of memory");
  }
  for (int u = 0; u < n_units; u++)
    c->unit_offset[u + 1] = c->unit_offset[u] + kt_model_unit_params(cfg, first_unit + u);
  c->n_params = c->unit_offset[n_units];
  c->params = kt__alloc_floats(c->n_params + 16);
  c->grads = kt__alloc_floats(c->n_params + 16);
  if (c->params && !sizes_only) memset(c->params, 0, (c->n_params + 16) * sizeof(float));
  if (c->grads && !sizes_only) memset(c->grads, 0, (c->n_params + 16) * sizeof(float));
  if (!c->params || !c->grads) {
    size_t n = c->n_params;
    kt__chunk_free_common(c);
    return kt_fail(err, KT_ENOMEM, "out of memory for %zu parameters", n);
  }
  *out = c;
  return KT_OK;
}

void kt__chunk_free_common(kt_chunk *c) {
  if (!c) return;
  kt__pool_destroy(c->pool);
  free(c->params);
  free(c->grads);
  free(c->unit_offset);
  free(c);
}

static kt_status create_kind(const kt_model_config *cfg, int first_unit, int n_units,
                             int micro_batch, int n_microbatches, int sizes_only, kt_chunk **out,
                             kt_error *err) {
  switch (cfg->kind) {
    case KT_MODEL_MLP:
      return kt__mlp_chunk_create(cfg, first_unit, n_units, micro_batch, n_microbatches, sizes_only,
                                  out, err);
    case KT_MODEL_GPT:
      return kt__gpt_chunk_create(cfg, first_unit, n_units, micro_batch, n_microbatches, sizes_only,
                                  out, err);
    default: return kt_fail(err, KT_EINVAL, "unknown model kind %d", (int)cfg->kind);
  }
}

/* No GEMM library, threads or parameters: it computes nothing. */
kt_status kt_chunk_create_sizes_only(const kt_model_config *cfg, int first_unit, int n_units,
                                     int micro_batch, int n_microbatches, kt_chunk **out,
                                     kt_error *err) {
  *out = NULL;
  return create_kind(cfg, first_unit, n_units, micro_batch, n_microbatches, 1, out, err);
}

kt_status kt_chunk_create(const kt_model_config *cfg, int first_unit, int n_units, int micro_batch,
                          int n_microbatches, kt_chunk **out, kt_error *err) {
  *out = NULL;
  kt_status st = kt__blas_load(err); /* every product runs on a chunk */
  if (st) return st;
  st = create_kind(cfg, first_unit, n_units, micro_batch, n_microbatches, 0, out, err);
  if (!st) st = kt__chunk_exec_init(*out, err);
  if (st && *out) {
    kt_chunk_destroy(*out);
    *out = NULL;
  }
  return st;
}

int kt_model_unit_tensors(const kt_model_config *cfg, int unit, kt_param_tensor *out, int max) {
  if (cfg->kind == KT_MODEL_GPT) return kt_gpt_unit_tensors(cfg, unit, out, max);
  size_t H = (size_t)cfg->hidden;
  kt_param_tensor t[2] = {{"w", 0, H * H, 1}, {"b", H * H, H, 0}};
  int n = max < 2 ? max : 2;
  for (int i = 0; i < n; i++) out[i] = t[i];
  return 2;
}

void kt_chunk_destroy(kt_chunk *c) {
  if (c) c->ops->destroy(c);
}

typedef struct {
  kt_chunk_range_fn fn;
  void *ctx;
  size_t n, block;
} chunk_range_job;

static void chunk_range_task(void *arg, int task, int thread) {
  (void)thread;
  const chunk_range_job *j = arg;
  size_t lo = (size_t)task * j->block, hi = j->n - lo < j->block ? j->n : lo + j->block;
  j->fn(j->ctx, lo, hi);
}

void kt_chunk_parallel(kt_chunk *c, size_t n, size_t block, kt_chunk_range_fn fn, void *ctx) {
  if (n == 0) return;
  if (block < 1) block = 1;
  if ((n - 1) / block >= INT_MAX) block = n / INT_MAX + 1; /* task indices are ints */
  chunk_range_job j = {fn, ctx, n, block};
  kt__pool_run((kt__pool *)c->pool, (int)((n - 1) / block + 1), chunk_range_task, &j);
}

static void zero_range(void *ctx, size_t lo, size_t hi) {
  memset((float *)ctx + lo, 0, (hi - lo) * sizeof(float));
}

void kt_chunk_zero_grad(kt_chunk *c) {
  kt_chunk_parallel(c, c->n_params, 1 << 16, zero_range, c->grads);
}

/* The chunk's ops run on its threads and GEMM library. */
kt__exec kt__chunk_enter(const kt_chunk *c) {
  return kt__exec_enter((kt__pool *)c->pool, kt_chunk_gemm(c, NULL),
                        c->gemm.n_shapes ? &c->gemm : NULL);
}

kt_status kt_chunk_forward(kt_chunk *c, int mb, const kt_microbatch *data, const float *in,
                           float *out, double *loss, kt_error *err) {
  kt__exec saved = kt__chunk_enter(c);
  kt_status st = c->ops->forward(c, mb, data, in, out, loss, err);
  kt__exec_leave(saved);
  return st;
}
kt_status kt_chunk_backward_input(kt_chunk *c, int mb, const kt_microbatch *data, const float *dout,
                                  float *din, kt_error *err) {
  kt__exec saved = kt__chunk_enter(c);
  kt_status st = c->ops->backward_input(c, mb, data, dout, din, err);
  kt__exec_leave(saved);
  return st;
}
kt_status kt_chunk_backward_weight(kt_chunk *c, int mb, kt_error *err) {
  kt__exec saved = kt__chunk_enter(c);
  kt_status st = c->ops->backward_weight(c, mb, err);
  kt__exec_leave(saved);
  return st;
}
kt_status kt_chunk_backward(kt_chunk *c, int mb, const kt_microbatch *data, const float *dout,
                            float *din, kt_error *err) {
  kt__exec saved = kt__chunk_enter(c);
  kt_status st;
  if (c->ops->backward) {
    st = c->ops->backward(c, mb, data, dout, din, err);
  } else {
    st = c->ops->backward_input(c, mb, data, dout, din, err);
    if (!st) st = c->ops->backward_weight(c, mb, err);
  }
  kt__exec_leave(saved);
  return st;
}
size_t kt_chunk_in_elems(const kt_chunk *c) { return c->in_elems; }
size_t kt_chunk_out_elems(const kt_chunk *c) { return c->out_elems; }
int kt_chunk_is_first(const kt_chunk *c) { return c->is_first; }
int kt_chunk_is_last(const kt_chunk *c) { return c->is_last; }
const kt_model_config *kt_chunk_config(const kt_chunk *c) { return &c->cfg; }
float *kt_chunk_params(kt_chunk *c, size_t *n) {
  if (n) *n = c->n_params;
  return c->params;
}
float *kt_chunk_grads(kt_chunk *c, size_t *n) {
  if (n) *n = c->n_params;
  return c->grads;
}
const size_t *kt_chunk_unit_offsets(const kt_chunk *c, int *first_unit, int *n_units) {
  if (first_unit) *first_unit = c->first_unit;
  if (n_units) *n_units = c->n_units;
  return c->unit_offset;
}
size_t kt_chunk_tied(kt_chunk *c, float **copy, float **grad) {
  if (copy) *copy = c->tied;
  if (grad) *grad = c->tied_grad;
  return c->tied ? c->tied_elems : 0;
}
size_t kt_chunk_stash_bytes(const kt_chunk *c) { return c->stash_bytes; }
size_t kt_chunk_peak_stash_bytes(const kt_chunk *c) { return c->peak_stash_bytes; }
void kt_chunk_reset_peak(kt_chunk *c) { c->peak_stash_bytes = c->stash_bytes; }

kt_status kt_partition_parse(const char *text, int n_stages, int units, int *counts,
                             kt_error *err) {
  int n = 0, sum = 0;
  const char *p = text;
  while (*p) {
    char *end;
    long v = strtol(p, &end, 10);
    if (end == p || v < 1 || v > 100000 || (*end && *end != ','))
      return kt_fail(err, KT_EINVAL, "partition '%s': expected positive layer counts like 2,3,3",
                     text);
    if (n >= n_stages)
      return kt_fail(err, KT_EINVAL, "partition '%s' lists more than %d stages", text, n_stages);
    counts[n++] = (int)v;
    sum += (int)v;
    p = *end ? end + 1 : end;
  }
  if (n != n_stages)
    return kt_fail(err, KT_EINVAL, "partition '%s' lists %d stages, the pipeline has %d", text, n,
                   n_stages);
  if (sum != units)
    return kt_fail(err, KT_EINVAL, "partition '%s' covers %d units, the model has %d", text, sum,
                   units);
  return KT_OK;
}

/* The exact min-max partition of the units' forward FLOPs (the one
 * partitioner, kaiten/costs.h). */
kt_status kt_partition_balanced(const kt_model_config *cfg, int n_stages, int *counts,
                                kt_error *err) {
  int U = kt_model_units(cfg);
  if (n_stages < 1 || n_stages > U)
    return kt_fail(err, KT_EINVAL, "cannot split %d units into %d stages without an empty stage", U,
                   n_stages);
  double *load = calloc((size_t)U, sizeof *load);
  if (!load) return kt_fail(err, KT_ENOMEM, "out of memory");
  for (int u = 0; u < U; u++) load[u] = kt_model_unit_flops(cfg, u);
  kt_partition_problem pb = {.n = U, .load = load};
  kt_status st = kt_partition_minmax(&pb, n_stages, counts, NULL, err);
  free(load);
  return st;
}
