/* Cost files in JSON (cJSON). Part of the io layer (libkaiten_io), not the
 * core: the cost model itself needs no JSON reader. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "costs/costs_internal.h"

kt_status kt_costs_load_json(kt_costs *c, const char *path, kt_error *err) {
  char *text;
  kt_status st = kt_read_file(path, &text, NULL, err);
  if (st) return st;
  st = kt_costs_parse_json(c, text, path, err);
  free(text);
  return st;
}

kt_status kt_costs_parse_json(kt_costs *c, const char *json, const char *origin, kt_error *err) {
  kt_status st = KT_OK;
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
  static const char *const fields[] = {"tf", "tb", "tw", "mem_act", "mem_wgrad", "mem_transient"};
  static const char *const scalars[] = {"comm",          "comm_latency", "comm_bytes",
                                        "comm_bandwidth", "send_overhead", "op_overhead",
                                        "overlap"};
  for (const cJSON *it = root->child; it && !st; it = it->next) { /* a typo must not pass */
    int known = 0;
    for (size_t f = 0; f < sizeof fields / sizeof *fields; f++) known |= !strcmp(it->string, fields[f]);
    for (size_t f = 0; f < sizeof scalars / sizeof *scalars; f++) known |= !strcmp(it->string, scalars[f]);
    if (!known)
      st = kt_fail(err, KT_EINVAL,
                   "%s: unknown key \"%s\" (known: tf, tb, tw, comm, comm_latency, comm_bytes, "
                   "comm_bandwidth, send_overhead, op_overhead, mem_act, mem_wgrad, mem_transient, "
                   "overlap)",
                   origin, it->string);
  }
  for (size_t f = 0; f < sizeof fields / sizeof *fields && !st; f++) {
    cJSON *it = cJSON_GetObjectItemCaseSensitive(root, fields[f]);
    if (!it) continue;
    if (cJSON_IsNumber(it)) {
      double v = it->valuedouble;
      st = kt__costs_set_values(c, fields[f], &v, 1, err);
    } else if (cJSON_IsArray(it)) {
      int n = cJSON_GetArraySize(it);
      if (n < 1 || n > KT_MAX_RANKS * KT_MAX_CHUNKS) {
        st = kt_fail(err, KT_EINVAL, "%s: \"%s\" has %d entries", origin, fields[f], n);
        break;
      }
      double *vals = malloc(sizeof(double) * (size_t)n);
      if (!vals) { st = kt_fail(err, KT_ENOMEM, "out of memory"); break; }
      int i = 0;
      cJSON *x;
      cJSON_ArrayForEach(x, it) {
        if (!cJSON_IsNumber(x)) {
          st = kt_fail(err, KT_EINVAL, "%s: \"%s\"[%d] is not a number", origin, fields[f], i);
          break;
        }
        vals[i++] = x->valuedouble;
      }
      if (!st) st = kt__costs_set_values(c, fields[f], vals, n, err);
      free(vals);
    } else {
      st = kt_fail(err, KT_EINVAL, "%s: \"%s\" must be a number or an array", origin, fields[f]);
    }
  }
  double *targets[] = {&c->comm,           &c->comm_latency,  &c->comm_bytes,
                       &c->comm_bandwidth, &c->send_overhead, &c->op_overhead,
                       &c->overlap};
  for (size_t f = 0; f < sizeof targets / sizeof *targets && !st; f++) {
    cJSON *it = cJSON_GetObjectItemCaseSensitive(root, scalars[f]);
    if (!it) continue;
    if (!cJSON_IsNumber(it) || kt__costs_bad_value(it->valuedouble))
      st = kt_fail(err, KT_EINVAL, "%s: \"%s\" must be a number >= 0", origin, scalars[f]);
    else *targets[f] = it->valuedouble;
  }
  cJSON_Delete(root);
  return st;
}
