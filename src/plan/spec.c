/* Planner specs: model presets and JSON, cluster JSON, options. */
#include <cjson/cJSON.h>
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
  for (int i = 0; name && i < KT_RECOMPUTE_COUNT; i++)
    if (!strcmp(name, recompute_names[i])) return i;
  return -1;
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

static void apply_preset(kt_plan_model *m, const preset *p) {
  snprintf(m->name, sizeof m->name, "%s", p->name);
  m->transformer = 1;
  m->blocks = p->blocks, m->hidden = p->hidden, m->heads = p->heads, m->kv_heads = p->kv_heads;
  m->ffn = p->ffn, m->vocab = p->vocab, m->seq_len = p->seq_len, m->swiglu = p->swiglu;
  m->learned_positions = p->learned_positions, m->tie_embeddings = p->tied;
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
    return kt_fail(err, KT_EINVAL,
                   "--seq-len %d: model '%s' is an explicit layer list; its costs are per sample",
                   seq_len, m->name);
  if (seq_len < 1 || seq_len > 1 << 24)
    return kt_fail(err, KT_EINVAL, "sequence length %d out of range 1..%d", seq_len, 1 << 24);
  m->seq_len = seq_len;
  free(m->layers);
  m->layers = NULL;
  return kt__plan_build_layers(m, err);
}

/* ---- JSON helpers ------------------------------------------------------------- */

/* Reads a number field into *out when present. EINVAL when it is not a finite
 * number in [lo, hi]. */
static kt_status json_num(const cJSON *obj, const char *key, double lo, double hi, double *out,
                          int *present, kt_error *err) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (present) *present = v != NULL;
  if (!v) return KT_OK;
  if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo ||
      v->valuedouble > hi) {
    char *text = cJSON_PrintUnformatted(v);
    kt_status st = kt_fail(err, KT_EINVAL, "\"%s\": %s: expected a number in %g..%g", key,
                           text ? text : "?", lo, hi);
    free(text);
    return st;
  }
  *out = v->valuedouble;
  return KT_OK;
}

static kt_status json_int(const cJSON *obj, const char *key, int lo, int hi, int *out,
                          kt_error *err) {
  double d = *out;
  kt_status st = json_num(obj, key, lo, hi, &d, NULL, err);
  if (st) return st;
  if (d != floor(d)) return kt_fail(err, KT_EINVAL, "\"%s\": %g: expected an integer", key, d);
  *out = (int)d;
  return KT_OK;
}

static kt_status json_bool(const cJSON *obj, const char *key, int *out, kt_error *err) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!v) return KT_OK;
  if (!cJSON_IsBool(v)) return kt_fail(err, KT_EINVAL, "\"%s\": expected true or false", key);
  *out = cJSON_IsTrue(v);
  return KT_OK;
}

/* Prefixes the reason in err with the file it came from; returns st. */
static kt_status with_path(kt_error *err, kt_status st, const char *path) {
  if (!err) return st;
  char msg[KT_ERROR_LEN];
  snprintf(msg, sizeof msg, "%s", err->msg);
  return kt_fail(err, st, "%s: %s", path, msg);
}

/* Rejects keys outside the list (a misspelt field would silently do nothing). */
static kt_status check_keys(const cJSON *obj, const char *const *keys, size_t n, const char *what,
                            kt_error *err) {
  const cJSON *it;
  cJSON_ArrayForEach(it, obj) {
    size_t i = 0;
    while (i < n && strcmp(it->string, keys[i])) i++;
    if (i == n) return kt_fail(err, KT_EINVAL, "%s: unknown field \"%s\"", what, it->string);
  }
  return KT_OK;
}

static kt_status parse_root(const char *json, cJSON **root, const char *what, kt_error *err) {
  *root = cJSON_Parse(json);
  if (!*root) {
    const char *at = cJSON_GetErrorPtr();
    char near[24] = "";
    if (at) snprintf(near, sizeof near, "%.20s", at);
    return kt_fail(err, KT_EPARSE, "%s: malformed JSON near '%s'", what, near);
  }
  if (!cJSON_IsObject(*root)) {
    cJSON_Delete(*root);
    return kt_fail(err, KT_EPARSE, "%s: expected a JSON object", what);
  }
  return KT_OK;
}

/* ---- model JSON ---------------------------------------------------------------- */

static kt_status parse_custom_layers(const cJSON *arr, kt_plan_model *m, kt_error *err) {
  int total = 0;
  const cJSON *it;
  cJSON_ArrayForEach(it, arr) {
    if (!cJSON_IsObject(it)) return kt_fail(err, KT_EINVAL, "\"layers\": entries must be objects");
    static const char *const keys[] = {"name",      "comment",     "repeat",   "params",
                                       "flops",     "act_bytes",   "wgrad_bytes", "out_bytes"};
    int rep = 1;
    kt_status st = check_keys(it, keys, sizeof keys / sizeof *keys, "layer", err);
    if (!st) st = json_int(it, "repeat", 1, KT_PLAN_MAX_LAYERS, &rep, err);
    if (st) return st;
    total += rep;
    if (total > KT_PLAN_MAX_LAYERS)
      return kt_fail(err, KT_EINVAL, "\"layers\": more than %d layers", KT_PLAN_MAX_LAYERS);
  }
  if (total == 0) return kt_fail(err, KT_EINVAL, "\"layers\": the list is empty");
  m->layers = kt_calloc((size_t)total, sizeof *m->layers);
  if (!m->layers) return kt_fail(err, KT_ENOMEM, "out of memory for %d layers", total);
  int n = 0, idx = 0;
  cJSON_ArrayForEach(it, arr) {
    kt_plan_layer l = {.kind = KT_LAYER_CUSTOM};
    int rep = 1, have_w = 0, have_out = 0;
    kt_status st = json_int(it, "repeat", 1, KT_PLAN_MAX_LAYERS, &rep, err);
    if (!st) st = json_num(it, "params", 0, 1e15, &l.params, NULL, err);
    if (!st) st = json_num(it, "flops", 0, 1e21, &l.flops, NULL, err);
    if (!st) st = json_num(it, "act_bytes", 0, 1e15, &l.act_bytes, NULL, err);
    if (!st) st = json_num(it, "wgrad_bytes", 0, 1e15, &l.wgrad_bytes, &have_w, err);
    if (!st) st = json_num(it, "out_bytes", 0, 1e15, &l.out_bytes, &have_out, err);
    if (st) {
      char msg[KT_ERROR_LEN];
      snprintf(msg, sizeof msg, "%s", err ? err->msg : "");
      return kt_fail(err, st, "layer %d: %s", idx, msg);
    }
    if (!have_w) l.wgrad_bytes = l.act_bytes;
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(it, "name");
    snprintf(l.name, sizeof l.name, "%s", cJSON_IsString(name) ? name->valuestring : "layer");
    for (int r = 0; r < rep; r++) {
      m->layers[n] = l;
      if (!have_out && n > 0) m->layers[n].out_bytes = m->layers[n - 1].out_bytes;
      n++;
    }
    idx++;
  }
  m->n_layers = n;
  return KT_OK;
}

static kt_status parse_shape(const cJSON *root, kt_plan_model *m, kt_error *err) {
  const cJSON *ffn_type = cJSON_GetObjectItemCaseSensitive(root, "ffn_type");
  if (ffn_type) {
    if (!cJSON_IsString(ffn_type) ||
        (strcmp(ffn_type->valuestring, "gelu") && strcmp(ffn_type->valuestring, "swiglu")))
      return kt_fail(err, KT_EINVAL, "\"ffn_type\": expected \"gelu\" or \"swiglu\"");
    m->swiglu = !strcmp(ffn_type->valuestring, "swiglu");
  }
  const int big = 1 << 24;
  const cJSON *layers = cJSON_GetObjectItemCaseSensitive(root, "layers");
  kt_status st = KT_OK;
  if (cJSON_IsNumber(layers)) st = json_int(root, "layers", 1, KT_PLAN_MAX_LAYERS - 2, &m->blocks, err);
  if (!st) st = json_int(root, "blocks", 1, KT_PLAN_MAX_LAYERS - 2, &m->blocks, err);
  int had_kv = cJSON_GetObjectItemCaseSensitive(root, "kv_heads") != NULL;
  int had_ffn = cJSON_GetObjectItemCaseSensitive(root, "ffn") != NULL;
  if (!st) st = json_int(root, "hidden", 1, big, &m->hidden, err);
  if (!st) st = json_int(root, "heads", 1, big, &m->heads, err);
  if (!st) st = json_int(root, "kv_heads", 1, big, &m->kv_heads, err);
  if (!st) st = json_int(root, "ffn", 1, big, &m->ffn, err);
  if (!st) st = json_int(root, "vocab", 1, big, &m->vocab, err);
  if (!st) st = json_int(root, "seq_len", 1, big, &m->seq_len, err);
  if (!st) st = json_bool(root, "learned_positions", &m->learned_positions, err);
  if (!st) st = json_bool(root, "tie_embeddings", &m->tie_embeddings, err);
  if (st) return st;
  if (!had_kv && m->kv_heads <= 0) m->kv_heads = m->heads;
  if (!had_ffn && m->ffn <= 0) m->ffn = 4 * m->hidden;
  static const char *const required[] = {"blocks", "hidden", "heads", "vocab", "seq_len"};
  const int *vals[] = {&m->blocks, &m->hidden, &m->heads, &m->vocab, &m->seq_len};
  for (int i = 0; i < 5; i++)
    if (*vals[i] <= 0)
      return kt_fail(err, KT_EINVAL, "model spec: missing \"%s\" (or give \"layers\": [...])",
                     required[i]);
  m->transformer = 1;
  return kt__plan_build_layers(m, err);
}

kt_status kt_plan_model_parse(const char *json, kt_plan_model *out, kt_error *err) {
  memset(out, 0, sizeof *out);
  cJSON *root;
  kt_status st = parse_root(json, &root, "model spec", err);
  if (st) return st;
  static const char *const keys[] = {"name", "comment", "preset", "layers", "blocks", "hidden",
                                     "heads", "kv_heads", "ffn", "ffn_type", "vocab", "seq_len",
                                     "learned_positions", "tie_embeddings"};
  st = check_keys(root, keys, sizeof keys / sizeof *keys, "model spec", err);
  if (st) {
    cJSON_Delete(root);
    return st;
  }
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(root, "name");
  const cJSON *base = cJSON_GetObjectItemCaseSensitive(root, "preset");
  const cJSON *layers = cJSON_GetObjectItemCaseSensitive(root, "layers");
  if (base) {
    const preset *p = cJSON_IsString(base) ? find_preset(base->valuestring) : NULL;
    if (!p) {
      st = kt_fail(err, KT_EINVAL, "\"preset\": unknown model preset '%s' (known: %s)",
                   cJSON_IsString(base) ? base->valuestring : "?", kt_plan_preset_list());
      goto done;
    }
    apply_preset(out, p);
  }
  if (cJSON_IsString(name)) snprintf(out->name, sizeof out->name, "%s", name->valuestring);
  else if (!out->name[0]) snprintf(out->name, sizeof out->name, "custom");
  if (cJSON_IsArray(layers)) {
    if (base) {
      st = kt_fail(err, KT_EINVAL, "model spec: \"preset\" and a \"layers\" list exclude each other");
      goto done;
    }
    st = parse_custom_layers(layers, out, err);
  } else if (layers && !cJSON_IsNumber(layers)) {
    st = kt_fail(err, KT_EINVAL, "\"layers\": expected a count or a list of layer objects");
  } else {
    st = parse_shape(root, out, err);
  }
done:
  cJSON_Delete(root);
  if (st) kt_plan_model_free(out);
  return st;
}

kt_status kt_plan_model_load(const char *preset_or_path, kt_plan_model *out, kt_error *err) {
  memset(out, 0, sizeof *out);
  if (!preset_or_path || !*preset_or_path)
    return kt_fail(err, KT_EINVAL, "no model given (a preset: %s; or a JSON file)",
                   kt_plan_preset_list());
  if (find_preset(preset_or_path)) return kt_plan_model_preset(preset_or_path, out, err);
  char *text;
  size_t len;
  kt_status st = kt_read_file(preset_or_path, &text, &len, err);
  if (st) {
    if (!strchr(preset_or_path, '/') && !strstr(preset_or_path, ".json"))
      return kt_fail(err, KT_EINVAL, "unknown model '%s': not a preset (%s) nor a readable file",
                     preset_or_path, kt_plan_preset_list());
    return st;
  }
  st = kt_plan_model_parse(text, out, err);
  free(text);
  return st ? with_path(err, st, preset_or_path) : st;
}

/* ---- cluster --------------------------------------------------------------------- */

void kt_plan_cluster_default(kt_plan_cluster *c) {
  memset(c, 0, sizeof *c);
  c->devices = 8;
  c->devices_per_node = 8;
  c->mem_bytes = 80e9;
  c->peak_flops = 312e12;
  c->efficiency = 0.5;
  c->intra_bw = 300e9;
  c->intra_latency = 5e-6;
  c->inter_bw = 25e9;
  c->inter_latency = 10e-6;
}

double kt_plan_cluster_flops(const kt_plan_cluster *c) {
  return c->achieved_flops > 0 ? c->achieved_flops : c->peak_flops * c->efficiency;
}

kt_status kt_plan_cluster_check(const kt_plan_cluster *c, kt_error *err) {
  if (c->devices < 1) return kt_fail(err, KT_EINVAL, "cluster: devices=%d: need at least 1", c->devices);
  if (c->devices_per_node < 1)
    return kt_fail(err, KT_EINVAL, "cluster: devices_per_node=%d: need at least 1",
                   c->devices_per_node);
  if (!(c->mem_bytes > 0))
    return kt_fail(err, KT_EINVAL, "cluster: memory per device %g bytes: must be > 0", c->mem_bytes);
  if (!(c->mem_reserved >= 0) || c->mem_reserved >= c->mem_bytes)
    return kt_fail(err, KT_EINVAL, "cluster: reserved memory %g bytes leaves nothing of %g",
                   c->mem_reserved, c->mem_bytes);
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

kt_status kt_plan_cluster_parse(const char *json, kt_plan_cluster *c, kt_error *err) {
  cJSON *root;
  kt_status st = parse_root(json, &root, "cluster spec", err);
  if (st) return st;
  struct {
    const char *key;
    double scale, hi;
    double *dst;
  } fields[] = {
      {"mem_gb", 1e9, 1e9, &c->mem_bytes},
      {"mem_reserved_gb", 1e9, 1e9, &c->mem_reserved},
      {"peak_tflops", 1e12, 1e9, &c->peak_flops},
      {"efficiency", 1, 1, &c->efficiency},
      {"achieved_tflops", 1e12, 1e9, &c->achieved_flops},
      {"intra_bw_gbs", 1e9, 1e9, &c->intra_bw},
      {"intra_latency_us", 1e-6, 1e9, &c->intra_latency},
      {"inter_bw_gbs", 1e9, 1e9, &c->inter_bw},
      {"inter_latency_us", 1e-6, 1e9, &c->inter_latency},
      {"inter_burst_kib", 1024, 1e9, &c->inter_burst},
  };
  st = json_int(root, "devices", 1, KT_MAX_RANKS * 64, &c->devices, err);
  if (!st) st = json_int(root, "devices_per_node", 1, 1 << 20, &c->devices_per_node, err);
  for (size_t i = 0; !st && i < sizeof fields / sizeof *fields; i++) {
    double v = 0;
    int present = 0;
    st = json_num(root, fields[i].key, 0, fields[i].hi, &v, &present, err);
    if (!st && present) *fields[i].dst = v * fields[i].scale;
  }
  static const char *const keys[] = {"devices", "devices_per_node", "mem_gb", "mem_reserved_gb",
                                     "peak_tflops", "efficiency", "achieved_tflops",
                                     "intra_bw_gbs", "intra_latency_us", "inter_bw_gbs",
                                     "inter_latency_us", "inter_burst_kib", "name", "comment"};
  if (!st) st = check_keys(root, keys, sizeof keys / sizeof *keys, "cluster spec", err);
  cJSON_Delete(root);
  if (!st) st = kt_plan_cluster_check(c, err);
  return st;
}

kt_status kt_plan_cluster_load(const char *path, kt_plan_cluster *c, kt_error *err) {
  char *text;
  size_t len;
  kt_status st = kt_read_file(path, &text, &len, err);
  if (st) return st;
  st = kt_plan_cluster_parse(text, c, err);
  free(text);
  return st ? with_path(err, st, path) : st;
}
