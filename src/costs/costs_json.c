/* Cost files in JSON (cJSON). Part of the io layer (libkaiten_io), not the
 * core: the cost model itself needs no JSON reader. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "costs/costs_internal.h"

kt_status kt_costs_load_json(kt_costs *c, const char *path, kt_error *err) {
  char *text;
  kt_status st = kt_read_text(path, KT_COSTS_FILE_MAX, 0, &text, NULL, err);
  if (st) return st;
  st = kt_costs_parse_json(c, text, path, err);
  free(text);
  return st;
}

static const char *const keys[] = {"tf",
                                   "tb",
                                   "tw",
                                   "tu",
                                   "mem_act",
                                   "mem_wgrad",
                                   "mem_transient",
                                   "comm",
                                   "comm_latency",
                                   "comm_bytes",
                                   "comm_bandwidth",
                                   "send_overhead",
                                   "op_overhead",
                                   "overlap",
                                   "t_norm",
                                   "t_dp",
                                   "tie",
                                   "step_sync",
                                   "link_delay"};
#define N_KEYS (sizeof keys / sizeof *keys)

/* Every key is one of keys[], once: a typo must not pass, and a value
 * given twice is as ambiguous as a flag given twice. */
static kt_status check_keys(const cJSON *root, const char *origin, kt_error *err) {
  for (const cJSON *it = root->child; it; it = it->next) {
    if (kt_name_index(it->string, keys, (int)N_KEYS) < 0)
      return kt_fail(err, KT_EINVAL,
                     "%s: unknown key \"%.40s\" (known: tf, tb, tw, tu, comm, comm_latency, "
                     "comm_bytes, comm_bandwidth, send_overhead, op_overhead, mem_act, mem_wgrad, "
                     "mem_transient, overlap, t_norm, t_dp, tie, step_sync, link_delay)",
                     origin, it->string);
    for (const cJSON *before = root->child; before != it; before = before->next)
      if (!strcmp(before->string, it->string))
        return kt_fail(err, KT_EINVAL, "%s: \"%s\" is given twice; give it once", origin,
                       it->string);
  }
  return KT_OK;
}

/* A list per stage of per-micro-batch numbers into field (kt_costs_set_mb). */
static kt_status read_lists(kt_costs *c, const cJSON *it, const char *field, const char *origin,
                            kt_error *err) {
  int stages = cJSON_GetArraySize(it), n_mb = cJSON_GetArraySize(it->child);
  if (stages > KT_MAX_RANKS * KT_MAX_CHUNKS || n_mb < 1 || n_mb > KT_MAX_MICROBATCHES)
    return kt_fail(err, KT_EINVAL, "%s: \"%s\" has %d stages of %d micro-batches", origin, field,
                   stages, n_mb);
  double *vals = malloc(sizeof(double) * (size_t)stages * (size_t)n_mb);
  if (!vals) return kt_fail(err, KT_ENOMEM, "out of memory");
  kt_status st = KT_OK;
  int s = 0;
  const cJSON *row;
  cJSON_ArrayForEach(row, it) {
    if (!cJSON_IsArray(row) || cJSON_GetArraySize(row) != n_mb) {
      st = kt_fail(err, KT_EINVAL, "%s: \"%s\"[%d] must be a list of %d numbers (as [0] is)",
                   origin, field, s, n_mb);
      break;
    }
    int j = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, row) {
      if (!cJSON_IsNumber(x)) {
        st = kt_fail(err, KT_EINVAL, "%s: \"%s\"[%d][%d] is not a number", origin, field, s, j);
        break;
      }
      vals[(size_t)s * (size_t)n_mb + (size_t)j++] = x->valuedouble;
    }
    if (st) break;
    s++;
  }
  if (!st) st = kt_costs_set_mb(c, field, vals, stages, n_mb, err);
  free(vals);
  return st;
}

/* One key's value: a number, or (a per-stage field) a list of numbers. */
static kt_status read_key(kt_costs *c, const cJSON *it, const char *origin, kt_error *err) {
  const char *key = it->string;
  int links = kt__costs_is_link_field(key); /* a list is one value per link */
  if (!strcmp(key, "link_delay") && !cJSON_IsArray(it))
    return kt_fail(err, KT_EINVAL, "%s: \"link_delay\" must be an array (one value per link)",
                   origin);
  int list = kt__costs_is_list(key) || links;
  if (!links && list && cJSON_IsArray(it) && cJSON_IsArray(it->child))
    return read_lists(c, it, key, origin, err);
  if (!cJSON_IsNumber(it) && !(list && cJSON_IsArray(it)))
    return kt_fail(err, KT_EINVAL, "%s: \"%s\" must be a number%s", origin, key,
                   list ? " or an array of numbers" : "");
  int n = cJSON_IsArray(it) ? cJSON_GetArraySize(it) : 1;
  if (n < 1 || n > KT_MAX_RANKS * KT_MAX_CHUNKS)
    return kt_fail(err, KT_EINVAL, "%s: \"%s\" has %d entries (expected 1..%d)", origin, key, n,
                   KT_MAX_RANKS * KT_MAX_CHUNKS);
  double *vals = malloc(sizeof(double) * (size_t)n);
  if (!vals) return kt_fail(err, KT_ENOMEM, "out of memory");
  kt_status st = KT_OK;
  int i = 0;
  const cJSON *x;
  if (cJSON_IsNumber(it)) vals[i++] = it->valuedouble;
  else cJSON_ArrayForEach(x, it) {
      if (!cJSON_IsNumber(x)) {
        st = kt_fail(err, KT_EINVAL, "%s: \"%s\"[%d] is not a number", origin, key, i);
        break;
      }
      vals[i++] = x->valuedouble;
    }
  kt_error sub;
  if (!st && (st = kt__costs_set_values(c, key, vals, n, &sub)))
    kt_fail(err, st, "%s: %s", origin, sub.msg);
  free(vals);
  return st;
}

/* "step_sync": a name, "overlap" or "barrier". */
static kt_status read_step_sync(kt_costs *c, const cJSON *sync, const char *origin, kt_error *err) {
  int k = cJSON_IsString(sync) ? kt_step_sync_from_name(sync->valuestring) : -1;
  if (k < 0)
    return kt_fail(err, KT_EINVAL, "%s: \"step_sync\" must be \"overlap\" or \"barrier\"", origin);
  c->step_sync = (kt_step_sync)k;
  return KT_OK;
}

kt_status kt_costs_parse_json(kt_costs *c, const char *json, const char *origin, kt_error *err) {
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithOpts(json, &end, 1);
  if (!root) {
    int line = 1;
    for (const char *p = json; end && p < end; p++) line += *p == '\n';
    return kt_fail(err, KT_EPARSE, "%s: malformed JSON at line %d", origin, line);
  }
  if (!cJSON_IsObject(root)) {
    cJSON_Delete(root);
    return kt_fail(err, KT_EPARSE, "%s: not a JSON object", origin);
  }
  kt_status st = check_keys(root, origin, err);
  for (const cJSON *it = root->child; it && !st; it = it->next)
    st = !strcmp(it->string, "step_sync") ? read_step_sync(c, it, origin, err)
                                          : read_key(c, it, origin, err);
  cJSON_Delete(root);
  return st;
}
