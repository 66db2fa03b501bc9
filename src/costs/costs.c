/* Cost model values: uniform or per stage, from flags (JSON files: costs_json.c). */
#include <errno.h>
#include <math.h>
#include <stddef.h>
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
  kt__costs_free_mb(c);
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
  int cells = src->n_stages * src->n_mb;
  dst->mb_tf = dup_array(src->mb_tf, cells, &fail);
  dst->mb_tb = dup_array(src->mb_tb, cells, &fail);
  dst->mb_tw = dup_array(src->mb_tw, cells, &fail);
  dst->mb_mem_act = dup_array(src->mb_mem_act, cells, &fail);
  dst->mb_mem_wgrad = dup_array(src->mb_mem_wgrad, cells, &fail);
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

int kt__costs_value_ok(double x, double lo) {
  return x == 0 || (x >= lo && x <= KT_COST_MAX); /* NaN fails both */
}

kt_status kt_cost_value_check(const char *name, double x, kt_error *err) {
  if (kt__costs_value_ok(x, KT_COST_MIN)) return KT_OK;
  return kt_fail(err, KT_EINVAL, "%s %g: " KT__COST_RANGE_TEXT, name, x);
}

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

int kt_cost_in_range(double x) { return kt__costs_value_ok(x, KT_COST_STAGE_MIN); }

kt_status kt_costs_check(const kt_costs *c, int n_stages, kt_error *err) {
  const struct {
    const char *name;
    double v;
  } scalars[] = {{"tf", c->tf},
                 {"tb", c->tb},
                 {"tw", c->tw},
                 {"comm", c->comm},
                 {"comm-latency", c->comm_latency},
                 {"comm-bytes", c->comm_bytes},
                 {"comm-bandwidth", c->comm_bandwidth},
                 {"send-overhead", c->send_overhead},
                 {"op-overhead", c->op_overhead},
                 {"mem-act", c->mem_act},
                 {"mem-wgrad", c->mem_wgrad},
                 {"mem-transient", c->mem_transient},
                 {"tu", c->tu},
                 {"t-norm", c->t_norm},
                 {"t-dp", c->t_dp},
                 {"tie", c->t_tie}};
  for (size_t i = 0; i < sizeof scalars / sizeof *scalars; i++)
    if (!kt__costs_value_ok(scalars[i].v, KT_COST_STAGE_MIN))
      return kt_fail(err, KT_EINVAL, "%s %g: " KT__COST_RANGE_TEXT, scalars[i].name, scalars[i].v);
  if ((unsigned)c->step_sync >= KT_STEP_SYNC_COUNT)
    return kt_fail(err, KT_EINVAL, "step sync %d: expected overlap or barrier", (int)c->step_sync);
  if (!(c->overlap >= 0 && c->overlap <= 1))
    return kt_fail(err, KT_EINVAL, "overlap %g: expected a fraction in 0..1", c->overlap);
  if (c->n_stages < 0 || (c->n_stages > 0 && c->n_stages != n_stages))
    return kt_fail(err, KT_EINVAL,
                   "per-stage costs list %d stages but the schedule has S=%d stages", c->n_stages,
                   n_stages);
  const struct {
    const char *name;
    const double *a;
  } arrays[] = {{"tf", c->stage_tf},
                {"tb", c->stage_tb},
                {"tw", c->stage_tw},
                {"mem-act", c->stage_mem_act},
                {"mem-wgrad", c->stage_mem_wgrad},
                {"mem-transient", c->stage_mem_transient},
                {"tu", c->stage_tu}};
  for (size_t i = 0; i < sizeof arrays / sizeof *arrays; i++)
    if (arrays[i].a)
      for (int s = 0; s < c->n_stages; s++)
        if (!kt__costs_value_ok(arrays[i].a[s], KT_COST_STAGE_MIN))
          return kt_fail(err, KT_EINVAL, "%s: stage %d has %g; " KT__COST_RANGE_TEXT,
                         arrays[i].name, s, arrays[i].a[s]);
  kt_status st = kt__costs_links_check(c, err);
  return st ? st : kt__costs_check_mb(c, err);
}

/* Every field a flag, a setting or a cost file names: where its uniform
 * value lives, and its per-stage array (none for the scalars). */
typedef struct {
  const char *name, *alias; /* "mem-act", "mem_act" */
  size_t uniform;
  ptrdiff_t per_stage; /* -1: a scalar */
} field_def;
#define LIST(n, a, u, ps) \
  { n, a, offsetof(kt_costs, u), offsetof(kt_costs, ps) }
#define SCALAR(n, a, u) \
  { n, a, offsetof(kt_costs, u), -1 }
static const field_def field_defs[] = {
    LIST("tf", "tf", tf, stage_tf),
    LIST("tb", "tb", tb, stage_tb),
    LIST("tw", "tw", tw, stage_tw),
    LIST("tu", "tu", tu, stage_tu),
    LIST("mem-act", "mem_act", mem_act, stage_mem_act),
    LIST("mem-wgrad", "mem_wgrad", mem_wgrad, stage_mem_wgrad),
    LIST("mem-transient", "mem_transient", mem_transient, stage_mem_transient),
    SCALAR("comm", "comm", comm),
    SCALAR("comm-latency", "comm_latency", comm_latency),
    SCALAR("comm-bytes", "comm_bytes", comm_bytes),
    SCALAR("comm-bandwidth", "comm_bandwidth", comm_bandwidth),
    SCALAR("send-overhead", "send_overhead", send_overhead),
    SCALAR("op-overhead", "op_overhead", op_overhead),
    SCALAR("overlap", "overlap", overlap),
    SCALAR("t-norm", "t_norm", t_norm),
    SCALAR("t-dp", "t_dp", t_dp),
    SCALAR("tie", "tie", t_tie), /* given: the embeddings are tied */
};

static const field_def *field_of(const char *field) {
  for (size_t i = 0; i < sizeof field_defs / sizeof *field_defs; i++)
    if (!strcmp(field, field_defs[i].name) || !strcmp(field, field_defs[i].alias))
      return &field_defs[i];
  return NULL;
}

int kt__costs_is_list(const char *field) {
  const field_def *f = field_of(field);
  return f && f->per_stage >= 0;
}

/* The rule of one value of field: a cost in range, or overlap a fraction. */
static kt_status check_value(const field_def *f, const char *name, double x, kt_error *err) {
  if (strcmp(f->name, "overlap")) return kt_cost_value_check(name, x, err);
  if (x >= 0 && x <= 1) return KT_OK;
  return kt_fail(err, KT_EINVAL, "overlap %g: expected a fraction in 0..1", x);
}

kt_status kt__costs_set_values(kt_costs *c, const char *field, const double *vals, int n,
                               kt_error *err) {
  const field_def *f = field_of(field);
  /* comm, comm-latency, comm-bandwidth: a list is one value per link;
   * link-delay is only that */
  if (kt__costs_is_link_field(field) && (n > 1 || !f))
    return kt__costs_set_links(c, field, vals, n, err);
  if (!f) return kt_fail(err, KT_EINVAL, "unknown cost field '%.40s'", field);
  if (n < 1 || n > KT_MAX_RANKS * KT_MAX_CHUNKS || (n > 1 && f->per_stage < 0))
    return kt_fail(err, KT_EINVAL, "%s: %d values (expected %s)", field, n,
                   f->per_stage < 0 ? "one" : "one, or one per stage");
  for (int i = 0; i < n; i++) {
    kt_status st = check_value(f, field, vals[i], err);
    if (st) return st;
  }
  double *uniform = (double *)((char *)c + f->uniform);
  double **arr = f->per_stage < 0 ? NULL : (double **)((char *)c + f->per_stage);
  kt__costs_drop_mb(c,
                    field); /* a value per stage or one for all replaces a list per micro-batch */
  if (n == 1) {
    *uniform = vals[0];
    if (arr) free(*arr), *arr = NULL;
    if (!strcmp(f->name, "tie")) c->tied = 1;
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

/* One number of a flag's text: "%s '%s' ..." naming it when it is not
 * one; a number too small for a double (5e-324, 1e-400) is out of range,
 * as the same number in a cost file is. */
static kt_status parse_value(const field_def *f, const char *name, const char *tok, double *out,
                             kt_error *err) {
  if (kt_parse_double(tok, out) == 0) return KT_OK;
  char *end;
  errno = 0;
  double x = strtod(tok, &end);
  if (*tok && !*end && errno == ERANGE && fabs(x) < 1)
    return kt_fail(
        err, KT_EINVAL, "%s '%.40s': %s", name, tok,
        strcmp(f->name, "overlap") ? KT__COST_RANGE_TEXT : "expected a fraction in 0..1");
  return kt_fail(err, KT_EINVAL, "%s: '%.40s' is not a number", name, tok);
}

kt_status kt_costs_set(kt_costs *c, const char *field, const char *text, kt_error *err) {
  const field_def *f = field_of(field);
  if (!f && !kt__costs_is_link_field(field))
    return kt_fail(err, KT_EINVAL, "unknown cost field '%.40s'", field);
  if (strchr(text, ';')) return kt__costs_set_mb_text(c, field, text, err);
  return kt__costs_set_list(c, field, text, err);
}

kt_status kt__costs_parse_list(const char *field, const char *text, double **out, int *count,
                               kt_error *err) {
  /* link-delay's values: a hop's rules */
  const field_def *f = field_of(field)                  ? field_of(field)
                       : kt__costs_is_link_field(field) ? field_of("comm")
                                                        : NULL;
  if (!f) return kt_fail(err, KT_EINVAL, "unknown cost field '%.40s'", field);
  size_t len = strlen(text);
  if (len > (size_t)KT_MAX_RANKS * KT_MAX_CHUNKS * 32)
    return kt_fail(err, KT_EINVAL, "%s: a list of %zu bytes, longer than %d values", field, len,
                   KT_MAX_RANKS * KT_MAX_CHUNKS);
  double *vals = malloc(sizeof(double) * (len / 2 + 2));
  char *copy = strdup(text);
  if (!vals || !copy) {
    free(vals);
    free(copy);
    return kt_fail(err, KT_ENOMEM, "out of memory");
  }
  int n = 0;
  kt_status st = KT_OK;
  /* split by hand: strtok would silently merge "1,,2" into two values */
  for (char *tok = copy; tok;) {
    char *comma = strchr(tok, ',');
    if (comma) *comma = 0;
    if (!*tok) {
      st = kt_fail(err, KT_EINVAL, "%s '%.40s%s': an empty value in the list", field, text,
                   len > 40 ? "..." : "");
      break;
    }
    kt_error sub;
    if ((st = parse_value(f, field, tok, &vals[n], err))) break;
    if ((st = check_value(f, field, vals[n], &sub))) { /* the value as typed */
      kt_fail(err, st, "%s '%.40s': %s", field, tok, strchr(sub.msg, ':') + 2);
      break;
    }
    n++;
    tok = comma ? comma + 1 : NULL;
  }
  if (!st && n == 0) st = kt_fail(err, KT_EINVAL, "%s: no value in '%s'", field, text);
  free(copy);
  if (st) {
    free(vals);
    return st;
  }
  *out = vals, *count = n;
  return KT_OK;
}

kt_status kt__costs_set_list(kt_costs *c, const char *field, const char *text, kt_error *err) {
  double *vals;
  int n;
  kt_status st = kt__costs_parse_list(field, text, &vals, &n, err);
  if (st) return st;
  if (n > KT_MAX_RANKS * KT_MAX_CHUNKS)
    st = kt_fail(err, KT_EINVAL, "%s: too many values (%d)", field, n);
  if (!st) st = kt__costs_set_values(c, field, vals, n, err);
  free(vals);
  return st;
}

kt_status kt_costs_for_chunks(const kt_costs *c, int v, kt_costs *dst, kt_error *err) {
  if (kt_costs_copy(dst, c)) return kt_fail(err, KT_ENOMEM, "out of memory");
  if (v <= 1) return KT_OK;
  double *uniform[] = {
      &dst->tf, &dst->tb, &dst->tw, &dst->mem_act, &dst->mem_wgrad, &dst->mem_transient, &dst->tu};
  for (size_t i = 0; i < sizeof uniform / sizeof *uniform; i++) *uniform[i] /= v;
  return KT_OK;
}

/* One field: "name=x" or "name=x0,x1,..." (long lists elided in the middle). */
static size_t describe_field(char *buf, size_t n, const char *name, double uniform,
                             const double *per, int ns) {
  size_t len = (size_t)snprintf(buf, n, "%s=", name);
  if (!per || ns <= 0)
    return len + (size_t)snprintf(buf + len, n > len ? n - len : 0, "%g", uniform);
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
  const struct {
    const char *name;
    double u;
    const double *per;
  } f[] = {{"tf", c->tf, c->stage_tf}, {"tb", c->tb, c->stage_tb}, {"tw", c->tw, c->stage_tw}};
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
  const struct {
    const char *name;
    double v;
  } step[] = {{"t-norm", c->t_norm}, {"t-dp", c->t_dp}};
  for (size_t i = 0; i < 2; i++)
    if (step[i].v > 0 && len + 32 < n)
      len += (size_t)snprintf(buf + len, n - len, " %s=%g", step[i].name, step[i].v);
  if (c->tied && len + 32 < n) snprintf(buf + len, n - len, " tie=%g", c->t_tie);
}
