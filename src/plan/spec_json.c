/* Planner specs read from JSON: model and cluster files (cJSON). Part of
 * the io layer (libkaiten_io), not the core: the planner itself needs no
 * JSON reader. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan_internal.h"

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
    static const char *const keys[] = {"name",  "comment",   "repeat",      "params",
                                       "flops", "act_bytes", "wgrad_bytes", "out_bytes"};
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
  if (cJSON_IsNumber(layers))
    st = json_int(root, "layers", 1, KT_PLAN_MAX_LAYERS - 2, &m->blocks, err);
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
  static const char *const keys[] = {"name",
                                     "comment",
                                     "preset",
                                     "layers",
                                     "blocks",
                                     "hidden",
                                     "heads",
                                     "kv_heads",
                                     "ffn",
                                     "ffn_type",
                                     "vocab",
                                     "seq_len",
                                     "learned_positions",
                                     "tie_embeddings"};
  st = check_keys(root, keys, sizeof keys / sizeof *keys, "model spec", err);
  if (st) {
    cJSON_Delete(root);
    return st;
  }
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(root, "name");
  const cJSON *base = cJSON_GetObjectItemCaseSensitive(root, "preset");
  const cJSON *layers = cJSON_GetObjectItemCaseSensitive(root, "layers");
  if (base) {
    if (!cJSON_IsString(base) || !kt__plan_apply_preset(out, base->valuestring)) {
      st = kt_fail(err, KT_EINVAL, "\"preset\": unknown model preset '%s' (known: %s)",
                   cJSON_IsString(base) ? base->valuestring : "?", kt_plan_preset_list());
      goto done;
    }
  }
  if (cJSON_IsString(name)) snprintf(out->name, sizeof out->name, "%s", name->valuestring);
  else if (!out->name[0]) snprintf(out->name, sizeof out->name, "custom");
  if (cJSON_IsArray(layers)) {
    if (base) {
      st = kt_fail(err, KT_EINVAL,
                   "model spec: \"preset\" and a \"layers\" list exclude each other");
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
  if (kt__plan_is_preset(preset_or_path)) return kt_plan_model_preset(preset_or_path, out, err);
  char *text;
  size_t len;
  kt_status st = kt_read_text(preset_or_path, KT_PLAN_FILE_MAX, 0, &text, &len, err);
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
  static const char *const keys[] = {
      "devices",          "devices_per_node", "mem_gb",       "mem_reserved_gb",  "peak_tflops",
      "efficiency",       "achieved_tflops",  "intra_bw_gbs", "intra_latency_us", "inter_bw_gbs",
      "inter_latency_us", "inter_burst_kib",  "name",         "comment"};
  if (!st) st = check_keys(root, keys, sizeof keys / sizeof *keys, "cluster spec", err);
  cJSON_Delete(root);
  if (!st) st = kt_plan_cluster_check(c, err);
  return st;
}

kt_status kt_plan_cluster_load(const char *path, kt_plan_cluster *c, kt_error *err) {
  char *text;
  size_t len;
  kt_status st = kt_read_text(path, KT_PLAN_FILE_MAX, 0, &text, &len, err);
  if (st) return st;
  st = kt_plan_cluster_parse(text, c, err);
  free(text);
  return st ? with_path(err, st, path) : st;
}
