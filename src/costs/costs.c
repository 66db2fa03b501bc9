/* Cost model values: uniform or per stage, from flags (JSON files: costs_json.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "costs/costs_internal.h"

void kt_costs_default(kt_costs *c) {
  memset(c, 0, sizeof *c);
  c->tf = c->tb = c->tw = 1.0;
  c->mem_act = 1.0;
}

void kt_costs_free(kt_costs *c) {
  free(c->stage_tf);
  free(c->stage_tb);
  free(c->stage_tw);
  free(c->stage_mem_act);
  free(c->stage_mem_wgrad);
  free(c->stage_mem_transient);
  free(c->stage_tu);
  c->stage_tf = c->stage_tb = c->stage_tw = c->stage_mem_act = c->stage_mem_wgrad = NULL;
  c->stage_mem_transient = c->stage_tu = NULL;
  c->n_stages = 0;
  kt__costs_links_free(c);
}

static double *dup_array(const double *a, int n, int *fail) {
  if (!a) return NULL;
  double *d = malloc(sizeof(double) * (size_t)n);
  if (!d) {
    *fail = 1;
    return NULL;
  }
  memcpy(d, a, sizeof(double) * (size_t)n);
  return d;
}

kt_status kt_costs_copy(kt_costs *dst, const kt_costs *src) {
  *dst = *src;
  int fail = 0;
  dst->stage_tf = dup_array(src->stage_tf, src->n_stages, &fail);
  dst->stage_tb = dup_array(src->stage_tb, src->n_stages, &fail);
  dst->stage_tw = dup_array(src->stage_tw, src->n_stages, &fail);
  dst->stage_mem_act = dup_array(src->stage_mem_act, src->n_stages, &fail);
  dst->stage_mem_wgrad = dup_array(src->stage_mem_wgrad, src->n_stages, &fail);
  dst->stage_mem_transient = dup_array(src->stage_mem_transient, src->n_stages, &fail);
  dst->stage_tu = dup_array(src->stage_tu, src->n_stages, &fail);
  fail |= kt__costs_links_copy(dst, src);
  if (fail) {
    kt_costs_free(dst);
    return KT_ENOMEM;
  }
  return KT_OK;
}

#define STAGE_VALUE(arr, uniform) \
  ((c->n_stages > 0 && c->arr && stage >= 0 && stage < c->n_stages) ? c->arr[stage] : c->uniform)

double kt_cost_tf(const kt_costs *c, int stage) { return STAGE_VALUE(stage_tf, tf); }
double kt_cost_tb(const kt_costs *c, int stage) { return STAGE_VALUE(stage_tb, tb); }
double kt_cost_tw(const kt_costs *c, int stage) { return STAGE_VALUE(stage_tw, tw); }
double kt_cost_mem_act(const kt_costs *c, int stage) { return STAGE_VALUE(stage_mem_act, mem_act); }
double kt_cost_mem_transient(const kt_costs *c, int stage) {
  return STAGE_VALUE(stage_mem_transient, mem_transient);
}
double kt_cost_mem_wgrad(const kt_costs *c, int stage) {
  return STAGE_VALUE(stage_mem_wgrad, mem_wgrad);
}
double kt_cost_tu(const kt_costs *c, int stage) { return STAGE_VALUE(stage_tu, tu); }

static const char *const step_sync_names[] = {"overlap", "barrier"};
_Static_assert(sizeof step_sync_names / sizeof *step_sync_names == KT_STEP_SYNC_COUNT,
               "one name per step sync");

const char *kt_step_sync_name(kt_step_sync s) {
  return (unsigned)s < KT_STEP_SYNC_COUNT ? step_sync_names[s] : "?";
}

int kt_step_sync_from_name(const char *name) {
  return kt_name_index(name, step_sync_names, KT_STEP_SYNC_COUNT);
}

double kt_cost_comm(const kt_costs *c) {
  if (c->comm_bandwidth > 0) return c->comm_latency + c->comm_bytes / c->comm_bandwidth;
  return c->comm;
}

int kt__costs_bad_value(double x) { return !isfinite(x) || x < 0; }

int kt_costs_compute_free(const kt_costs *c) {
  const double *arrays[] = {c->stage_tf, c->stage_tb, c->stage_tw};
  double uniform[] = {c->tf, c->tb, c->tw};
  if (c->op_overhead > 0) return 0;
  for (int i = 0; i < 3; i++) {
    if (!arrays[i] && uniform[i] > 0) return 0;
    for (int s = 0; arrays[i] && s < c->n_stages; s++)
      if (arrays[i][s] > 0) return 0;
  }
  return 1;
}

kt_status kt_costs_check(const kt_costs *c, int n_stages, kt_error *err) {
  const struct { const char *name; double v; } scalars[] = {
      {"tf", c->tf}, {"tb", c->tb}, {"tw", c->tw}, {"comm", c->comm},
      {"comm-latency", c->comm_latency}, {"comm-bytes", c->comm_bytes},
      {"comm-bandwidth", c->comm_bandwidth}, {"send-overhead", c->send_overhead},
      {"op-overhead", c->op_overhead},
      {"mem-act", c->mem_act},
      {"mem-wgrad", c->mem_wgrad}, {"mem-transient", c->mem_transient},
      {"tu", c->tu}, {"t-norm", c->t_norm}, {"t-dp", c->t_dp}, {"tie", c->t_tie}};
  for (size_t i = 0; i < sizeof scalars / sizeof *scalars; i++)
    if (kt__costs_bad_value(scalars[i].v))
      return kt_fail(err, KT_EINVAL, "%s %g: costs must be finite and >= 0", scalars[i].name,
                     scalars[i].v);
  if ((unsigned)c->step_sync >= KT_STEP_SYNC_COUNT)
    return kt_fail(err, KT_EINVAL, "step sync %d: expected overlap or barrier", (int)c->step_sync);
  if (!(c->overlap >= 0 && c->overlap <= 1))
    return kt_fail(err, KT_EINVAL, "overlap %g: expected a fraction in 0..1", c->overlap);
  if (c->n_stages > 0 && c->n_stages != n_stages)
    return kt_fail(err, KT_EINVAL,
                   "per-stage costs list %d stages but the schedule has S=%d stages", c->n_stages,
                   n_stages);
  const struct { const char *name; const double *a; } arrays[] = {
      {"tf", c->stage_tf}, {"tb", c->stage_tb}, {"tw", c->stage_tw},
      {"mem-act", c->stage_mem_act}, {"mem-wgrad", c->stage_mem_wgrad},
      {"mem-transient", c->stage_mem_transient}, {"tu", c->stage_tu}};
  for (size_t i = 0; i < sizeof arrays / sizeof *arrays; i++)
    if (arrays[i].a)
      for (int s = 0; s < c->n_stages; s++)
        if (kt__costs_bad_value(arrays[i].a[s]))
          return kt_fail(err, KT_EINVAL, "%s: stage %d has %g; costs must be finite and >= 0",
                         arrays[i].name, s, arrays[i].a[s]);
  return kt__costs_links_check(c, err);
}

static double **field_array(kt_costs *c, const char *field, double **uniform) {
  if (!strcmp(field, "tf")) return *uniform = &c->tf, &c->stage_tf;
  if (!strcmp(field, "tb")) return *uniform = &c->tb, &c->stage_tb;
  if (!strcmp(field, "tw")) return *uniform = &c->tw, &c->stage_tw;
  if (!strcmp(field, "tu")) return *uniform = &c->tu, &c->stage_tu;
  if (!strcmp(field, "mem-act") || !strcmp(field, "mem_act"))
    return *uniform = &c->mem_act, &c->stage_mem_act;
  if (!strcmp(field, "mem-wgrad") || !strcmp(field, "mem_wgrad"))
    return *uniform = &c->mem_wgrad, &c->stage_mem_wgrad;
  if (!strcmp(field, "mem-transient") || !strcmp(field, "mem_transient"))
    return *uniform = &c->mem_transient, &c->stage_mem_transient;
  return NULL;
}

kt_status kt__costs_set_values(kt_costs *c, const char *field, const double *vals, int n,
                               kt_error *err) {
  double *uniform;
  double **arr = field_array(c, field, &uniform);
  if (!arr) return kt_fail(err, KT_EINVAL, "unknown cost field '%s'", field);
  for (int i = 0; i < n; i++)
    if (kt__costs_bad_value(vals[i]))
      return kt_fail(err, KT_EINVAL, "%s: value %g must be finite and >= 0", field, vals[i]);
  if (n == 1) {
    *uniform = vals[0];
    free(*arr);
    *arr = NULL;
    return KT_OK;
  }
  if (c->n_stages > 0 && c->n_stages != n)
    return kt_fail(err, KT_EINVAL, "%s lists %d stages but another cost lists %d", field, n,
                   c->n_stages);
  double *a = malloc(sizeof(double) * (size_t)n);
  if (!a) return kt_fail(err, KT_ENOMEM, "out of memory");
  memcpy(a, vals, sizeof(double) * (size_t)n);
  free(*arr);
  *arr = a;
  c->n_stages = n;
  return KT_OK;
}

kt_status kt_costs_set(kt_costs *c, const char *field, const char *text, kt_error *err) {
  size_t len = strlen(text);
  double *vals = malloc(sizeof(double) * (len / 2 + 2));
  if (!vals) return kt_fail(err, KT_ENOMEM, "out of memory");
  int n = 0;
  char *copy = strdup(text);
  if (!copy) {
    free(vals);
    return kt_fail(err, KT_ENOMEM, "out of memory");
  }
  kt_status st = KT_OK;
  /* split by hand: strtok would silently merge "1,,2" into two values */
  for (char *tok = copy; tok; ) {
    char *comma = strchr(tok, ',');
    if (comma) *comma = 0;
    if (!*tok) {
      st = kt_fail(err, KT_EINVAL, "%s '%s': an empty value in the list", field, text);
      break;
    }
    if (kt_parse_double(tok, &vals[n]) != 0) {
      st = kt_fail(err, KT_EINVAL, "%s: '%s' is not a number", field, tok);
      break;
    }
    n++;
    tok = comma ? comma + 1 : NULL;
  }
  if (!st && n == 0) st = kt_fail(err, KT_EINVAL, "%s: no value in '%s'", field, text);
  if (!st && n > KT_MAX_RANKS * KT_MAX_CHUNKS)
    st = kt_fail(err, KT_EINVAL, "%s: too many values (%d)", field, n);
  if (!st && kt__costs_is_link_field(field)) st = kt__costs_set_links(c, field, vals, n, err);
  else if (!st) st = kt__costs_set_values(c, field, vals, n, err);
  free(copy);
  free(vals);
  return st;
}

kt_status kt_costs_for_chunks(const kt_costs *c, int v, kt_costs *dst, kt_error *err) {
  if (kt_costs_copy(dst, c)) return kt_fail(err, KT_ENOMEM, "out of memory");
  if (v <= 1) return KT_OK;
  double *uniform[] = {&dst->tf, &dst->tb, &dst->tw, &dst->mem_act, &dst->mem_wgrad,
                       &dst->mem_transient, &dst->tu};
  for (size_t i = 0; i < sizeof uniform / sizeof *uniform; i++) *uniform[i] /= v;
  return KT_OK;
}

/* One field: "name=x" or "name=x0,x1,..." (long lists elided in the middle). */
static size_t describe_field(char *buf, size_t n, const char *name, double uniform,
                             const double *per, int ns) {
  size_t len = (size_t)snprintf(buf, n, "%s=", name);
  if (!per || ns <= 0) return len + (size_t)snprintf(buf + len, n > len ? n - len : 0, "%g", uniform);
  for (int s = 0; s < ns && len + 24 < n; s++) {
    if (s == 8 && ns > 10) { /* the first eight, then the last */
      len += (size_t)snprintf(buf + len, n - len, ",...");
      s = ns - 2;
      continue;
    }
    len += (size_t)snprintf(buf + len, n - len, "%s%g", s ? "," : "", per[s]);
  }
  return len;
}

void kt_costs_describe(const kt_costs *c, char *buf, size_t n) {
  size_t len = 0;
  const struct { const char *name; double u; const double *per; } f[] = {
      {"tf", c->tf, c->stage_tf}, {"tb", c->tb, c->stage_tb}, {"tw", c->tw, c->stage_tw}};
  for (size_t i = 0; i < 3 && len + 32 < n; i++) {
    if (i) buf[len++] = ' ';
    len += describe_field(buf + len, n - len, f[i].name, f[i].u, f[i].per, c->n_stages);
  }
  if (len + 32 < n && c->n_links > 1) { /* each link's hop, delays included */
    len += (size_t)snprintf(buf + len, n - len, " comm=");
    for (int l = 0; l < c->n_links && len + 24 < n; l++)
      len += (size_t)snprintf(buf + len, n - len, "%s%g", l ? "," : "", kt_cost_link_at(c, l));
  } else if (len + 32 < n) {
    len += (size_t)snprintf(buf + len, n - len, " comm=%g", kt_cost_link(c, 0, 1));
  }
  if (c->send_overhead > 0 && len + 32 < n)
    len += (size_t)snprintf(buf + len, n - len, " send=%g", c->send_overhead);
  if (c->op_overhead > 0 && len + 32 < n)
    len += (size_t)snprintf(buf + len, n - len, " op=%g", c->op_overhead);
  if ((c->tu > 0 || c->stage_tu) && len + 32 < n) {
    buf[len++] = ' ';
    len += describe_field(buf + len, n - len, "tu", c->tu, c->stage_tu, c->n_stages);
  }
  const struct { const char *name; double v; } step[] = {{"t-norm", c->t_norm}, {"t-dp", c->t_dp}};
  for (size_t i = 0; i < 2; i++)
    if (step[i].v > 0 && len + 32 < n)
      len += (size_t)snprintf(buf + len, n - len, " %s=%g", step[i].name, step[i].v);
  if (c->tied && len + 32 < n) snprintf(buf + len, n - len, " tie=%g", c->t_tie);
}
