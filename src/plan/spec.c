/* Planner specs: model presets, cluster defaults and checks, options (the
 * JSON readers are in spec_json.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan_internal.h"

static const char *const recompute_names[] = {"none", "selective", "full"};
_Static_assert(sizeof recompute_names / sizeof *recompute_names == KT_RECOMPUTE_COUNT,
               "recompute names out of sync");

const char *kt_recompute_name(kt_recompute r) {
  return (unsigned)r < KT_RECOMPUTE_COUNT ? recompute_names[r] : "?";
}

int kt_recompute_from_name(const char *name) {
  return kt_name_index(name, recompute_names, KT_RECOMPUTE_COUNT);
}

void kt_plan_options_default(kt_plan_options *o) {
  memset(o, 0, sizeof *o);
  o->weight_bytes = 2;
  o->grad_bytes = 2;
  o->optimizer_bytes = 12; /* fp32 master weights + Adam m and v: 16 bytes in all */
  o->sequence_parallel = 1;
}

/* ---- presets ------------------------------------------------------------------ */

typedef struct {
  const char *name;
  int blocks, hidden, heads, kv_heads, ffn, vocab, seq_len, swiglu, learned_positions, tied;
} preset;

/* GPT-2 (Radford et al. 2019), LLaMA (Touvron et al. 2023), and the GPT models
 * of the zero-bubble paper (Qi et al. 2024, table of models: 1.5B 22x2304/24,
 * 6.2B 30x4096/32, 14.6B 46x5120/40, 28.3B 62x6144/48, sequence 1024; the
 * paper gives no vocabulary: GPT-2's 50257 is assumed, and the names match
 * the parameter counts within 2% when the embedding is counted once, so
 * they are marked tied; the head still holds its copy on the last stage). */
static const preset presets[] = {
    {"gpt2-124m", 12, 768, 12, 12, 3072, 50257, 1024, 0, 1, 1},
    {"gpt2-350m", 24, 1024, 16, 16, 4096, 50257, 1024, 0, 1, 1},
    {"gpt2-1.5b", 48, 1600, 25, 25, 6400, 50257, 1024, 0, 1, 1},
    {"llama-7b", 32, 4096, 32, 32, 11008, 32000, 2048, 1, 0, 0},
    {"llama-70b", 80, 8192, 64, 8, 28672, 32000, 4096, 1, 0, 0},
    {"zb-1.5b", 22, 2304, 24, 24, 9216, 50257, 1024, 0, 1, 1},
    {"zb-6.2b", 30, 4096, 32, 32, 16384, 50257, 1024, 0, 1, 1},
    {"zb-14.6b", 46, 5120, 40, 40, 20480, 50257, 1024, 0, 1, 1},
    {"zb-28.3b", 62, 6144, 48, 48, 24576, 50257, 1024, 0, 1, 1},
};
#define N_PRESETS (sizeof presets / sizeof *presets)

const char *kt_plan_preset_list(void) {
  static char list[256];
  if (!list[0]) {
    size_t n = 0;
    for (size_t i = 0; i < N_PRESETS; i++)
      n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", presets[i].name);
  }
  return list;
}

static const preset *find_preset(const char *name) {
  for (size_t i = 0; i < N_PRESETS; i++)
    if (!strcmp(name, presets[i].name)) return &presets[i];
  return NULL;
}

int kt__plan_is_preset(const char *name) { return name && find_preset(name) != NULL; }

static void apply_preset(kt_plan_model *m, const preset *p) {
  snprintf(m->name, sizeof m->name, "%s", p->name);
  m->transformer = 1;
  m->blocks = p->blocks, m->hidden = p->hidden, m->heads = p->heads, m->kv_heads = p->kv_heads;
  m->ffn = p->ffn, m->vocab = p->vocab, m->seq_len = p->seq_len, m->swiglu = p->swiglu;
  m->learned_positions = p->learned_positions, m->tie_embeddings = p->tied;
}

int kt__plan_apply_preset(kt_plan_model *m, const char *name) {
  const preset *p = name ? find_preset(name) : NULL;
  if (p) apply_preset(m, p);
  return p != NULL;
}

kt_status kt_plan_model_preset(const char *name, kt_plan_model *out, kt_error *err) {
  memset(out, 0, sizeof *out);
  const preset *p = name ? find_preset(name) : NULL;
  if (!p)
    return kt_fail(err, KT_EINVAL, "unknown model preset '%s' (known: %s)", name ? name : "",
                   kt_plan_preset_list());
  apply_preset(out, p);
  return kt__plan_build_layers(out, err);
}

void kt_plan_model_free(kt_plan_model *m) {
  free(m->layers);
  m->layers = NULL;
  m->n_layers = 0;
}

double kt_plan_model_params(const kt_plan_model *m) {
  double sum = 0;
  for (int i = 0; i < m->n_layers; i++) sum += m->layers[i].params;
  if (m->transformer && m->tie_embeddings) sum -= (double)m->vocab * m->hidden;
  return sum;
}

kt_status kt_plan_model_set_seq_len(kt_plan_model *m, int seq_len, kt_error *err) {
  if (!m->transformer)
    return kt_fail(
        err, KT_EINVAL,
        "sequence length %d: model '%s' is an explicit layer list; its costs are per sample",
        seq_len, m->name);
  if (seq_len < 1 || seq_len > 1 << 24)
    return kt_fail(err, KT_EINVAL, "sequence length %d out of range 1..%d", seq_len, 1 << 24);
  m->seq_len = seq_len;
  free(m->layers);
  m->layers = NULL;
  return kt__plan_build_layers(m, err);
}

/* ---- cluster --------------------------------------------------------------------- */

void kt_plan_cluster_default(kt_plan_cluster *c) {
  memset(c, 0, sizeof *c);
  c->devices = 8;
  c->devices_per_node = 8;
  c->mem_bytes = 80e9;
  c->mem_reserved = -1; /* the default: kt_plan_cluster_reserved */
  c->peak_flops = 312e12;
  c->efficiency = 0.5;
  c->intra_bw = 300e9;
  c->intra_latency = 5e-6;
  c->inter_bw = 25e9;
  c->inter_latency = 10e-6;
}

double kt_plan_cluster_reserved(const kt_plan_cluster *c) {
  if (c->mem_reserved >= 0) return c->mem_reserved;
  return fmin(KT_PLAN_RESERVE_FIXED, 0.1 * c->mem_bytes) + KT_PLAN_RESERVE_SHARE * c->mem_bytes;
}

double kt_plan_cluster_budget(const kt_plan_cluster *c) {
  return c->mem_bytes - kt_plan_cluster_reserved(c);
}

double kt_plan_cluster_flops(const kt_plan_cluster *c) {
  return c->achieved_flops > 0 ? c->achieved_flops : c->peak_flops * c->efficiency;
}

kt_status kt_plan_cluster_check(const kt_plan_cluster *c, kt_error *err) {
  if (c->devices < 1)
    return kt_fail(err, KT_EINVAL, "cluster: devices=%d: need at least 1", c->devices);
  if (c->devices_per_node < 1)
    return kt_fail(err, KT_EINVAL, "cluster: devices_per_node=%d: need at least 1",
                   c->devices_per_node);
  if (!(c->mem_bytes > 0))
    return kt_fail(err, KT_EINVAL, "cluster: memory per device %g bytes: must be > 0",
                   c->mem_bytes);
  if (isnan(c->mem_reserved) || kt_plan_cluster_reserved(c) >= c->mem_bytes)
    return kt_fail(err, KT_EINVAL, "cluster: reserved memory %g bytes leaves nothing of %g",
                   kt_plan_cluster_reserved(c), c->mem_bytes);
  if (!(kt_plan_cluster_flops(c) > 0) || !isfinite(kt_plan_cluster_flops(c)))
    return kt_fail(err, KT_EINVAL, "cluster: achieved FLOP/s %g: must be > 0",
                   kt_plan_cluster_flops(c));
  if (!(c->intra_bw > 0) || !(c->inter_bw > 0))
    return kt_fail(err, KT_EINVAL, "cluster: bandwidths must be > 0 (intra %g, inter %g B/s)",
                   c->intra_bw, c->inter_bw);
  if (!(c->intra_latency >= 0) || !(c->inter_latency >= 0))
    return kt_fail(err, KT_EINVAL, "cluster: latencies must be >= 0");
  if (!(c->inter_burst >= 0) || !isfinite(c->inter_burst))
    return kt_fail(err, KT_EINVAL, "cluster: inter-node burst %g bytes: must be >= 0",
                   c->inter_burst);
  return KT_OK;
}
