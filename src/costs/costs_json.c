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

static const char *const fields[] = {"tf",      "tb",        "tw",           "tu",
                                     "mem_act", "mem_wgrad", "mem_transient"};
static const char *const scalars[] = {"comm",           "comm_latency",  "comm_bytes",
                                      "comm_bandwidth", "send_overhead", "op_overhead",
                                      "overlap",        "t_norm",        "t_dp"};
#define N_FIELDS (sizeof fields / sizeof *fields)
#define N_SCALARS (sizeof scalars / sizeof *scalars)

/* Every key is one of the fields or scalars: a typo must not pass. */
static kt_status check_keys(const cJSON *root, const char *origin, kt_error *err) {
  for (const cJSON *it = root->child; it; it = it->next) {
    int known = 0;
    for (size_t f = 0; f < N_FIELDS; f++) known |= !strcmp(it->string, fields[f]);
    for (size_t f = 0; f < N_SCALARS; f++) known |= !strcmp(it->string, scalars[f]);
    known |= !strcmp(it->string, "tie") || !strcmp(it->string, "step_sync") ||
             !strcmp(it->string, "link_delay");
    if (!known)
      return kt_fail(err, KT_EINVAL,
                     "%s: unknown key \"%s\" (known: tf, tb, tw, tu, comm, comm_latency, "
                     "comm_bytes, comm_bandwidth, send_overhead, op_overhead, mem_act, mem_wgrad, "
                     "mem_transient, overlap, t_norm, t_dp, tie, step_sync, link_delay)",
                     origin, it->string);
  }
  return KT_OK;
}

/* A per-stage (or, for a link field, per-link) list of numbers into field. */
static kt_status read_list(kt_costs *c, const cJSON *it, const char *field, const char *origin,
                           kt_error *err) {
  int n = cJSON_GetArraySize(it);
  if (n < 1 || n > KT_MAX_RANKS * KT_MAX_CHUNKS)
    return kt_fail(err, KT_EINVAL, "%s: \"%s\" has %d entries", origin, field, n);
  double *vals = malloc(sizeof(double) * (size_t)n);
  if (!vals) return kt_fail(err, KT_ENOMEM, "out of memory");
  kt_status st = KT_OK;
  int i = 0;
  const cJSON *x;
  cJSON_ArrayForEach(x, it) {
    if (!cJSON_IsNumber(x)) {
      st = kt_fail(err, KT_EINVAL, "%s: \"%s\"[%d] is not a number", origin, field, i);
      break;
    }
    vals[i++] = x->valuedouble;
  }
  if (!st && kt__costs_is_link_field(field)) st = kt__costs_set_links(c, field, vals, n, err);
  else if (!st) st = kt__costs_set_values(c, field, vals, n, err);
  free(vals);
  return st;
}

/* A field that is uniform (a number) or per stage (a list). */
static kt_status read_field(kt_costs *c, const cJSON *root, const char *field, const char *origin,
                            kt_error *err) {
  const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, field);
  if (!it) return KT_OK;
  if (cJSON_IsArray(it)) return read_list(c, it, field, origin, err);
  if (!cJSON_IsNumber(it))
    return kt_fail(err, KT_EINVAL, "%s: \"%s\" must be a number or an array", origin, field);
  double v = it->valuedouble;
  return kt__costs_set_values(c, field, &v, 1, err);
}

/* "tie": the exchange's time (tied embeddings); "step_sync": a name. */
static kt_status read_step_end(kt_costs *c, const cJSON *root, const char *origin, kt_error *err) {
  const cJSON *tie = cJSON_GetObjectItemCaseSensitive(root, "tie");
  if (tie && (!cJSON_IsNumber(tie) || kt__costs_bad_value(tie->valuedouble)))
    return kt_fail(err, KT_EINVAL, "%s: \"tie\" must be a number >= 0", origin);
  if (tie) c->tied = 1, c->t_tie = tie->valuedouble;
  const cJSON *sync = cJSON_GetObjectItemCaseSensitive(root, "step_sync");
  if (!sync) return KT_OK;
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
  for (size_t f = 0; f < N_FIELDS && !st; f++) st = read_field(c, root, fields[f], origin, err);
  double *targets[] = {&c->comm,           &c->comm_latency,  &c->comm_bytes,
                       &c->comm_bandwidth, &c->send_overhead, &c->op_overhead,
                       &c->overlap,        &c->t_norm,        &c->t_dp};
  _Static_assert(sizeof targets / sizeof *targets == N_SCALARS, "one target per scalar");
  for (size_t f = 0; f < N_SCALARS && !st; f++) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, scalars[f]);
    if (!it) continue;
    if (cJSON_IsArray(it) && kt__costs_is_link_field(scalars[f])) /* one value per link */
      st = read_list(c, it, scalars[f], origin, err);
    else if (!cJSON_IsNumber(it) || kt__costs_bad_value(it->valuedouble))
      st = kt_fail(err, KT_EINVAL, "%s: \"%s\" must be a number >= 0", origin, scalars[f]);
    else *targets[f] = it->valuedouble;
  }
  const cJSON *delay = cJSON_GetObjectItemCaseSensitive(root, "link_delay");
  if (!st && delay && !cJSON_IsArray(delay))
    st = kt_fail(err, KT_EINVAL, "%s: \"link_delay\" must be an array (one value per link)", origin);
  else if (!st && delay) st = read_list(c, delay, "link_delay", origin, err);
  if (!st) st = read_step_end(c, root, origin, err);
  cJSON_Delete(root);
  return st;
}
