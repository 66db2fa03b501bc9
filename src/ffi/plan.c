/* The flat interface's planner request and partitioner (kaiten/ffi.h): the
 * structs of kaiten/plan.h behind a handle, their fields set by name. */
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/ffi.h"
#include "kaiten/plan.h"
#include "kaiten/report.h"

struct kt_ffi_plan {
  kt_plan_model model;
  int have_model;
  kt_plan_cluster cluster;
  kt_plan_options options;
  kt_plan_search_params search;
  double min_memory;
  char not_applicable[KT_ERROR_LEN];
};

kt_ffi_plan *kt_ffi_plan_new(void) {
  kt_ffi_plan *pl = kt_calloc(1, sizeof *pl);
  if (!pl) return NULL;
  kt_plan_cluster_default(&pl->cluster);
  kt_plan_options_default(&pl->options);
  kt_plan_search_params_default(&pl->search);
  return pl;
}

void kt_ffi_plan_free(kt_ffi_plan *pl) {
  if (!pl) return;
  if (pl->have_model) kt_plan_model_free(&pl->model);
  free(pl);
}

#define NEED(x, what) \
  do { \
    if (!(x)) return kt_fail(err, KT_EINVAL, "%s: NULL", what); \
  } while (0)

static kt_status set_model(kt_ffi_plan *pl, const char *text, int is_json, kt_error *err) {
  NEED(pl, "plan");
  NEED(text, is_json ? "model JSON" : "model");
  kt_plan_model m;
  kt_status st = is_json ? kt_plan_model_parse(text, &m, err) : kt_plan_model_load(text, &m, err);
  if (st) return st;
  if (pl->have_model) kt_plan_model_free(&pl->model);
  pl->model = m, pl->have_model = 1;
  return KT_OK;
}

kt_status kt_ffi_plan_model(kt_ffi_plan *pl, const char *preset_or_path, kt_error *err) {
  return set_model(pl, preset_or_path, 0, err);
}

kt_status kt_ffi_plan_model_json(kt_ffi_plan *pl, const char *json, kt_error *err) {
  return set_model(pl, json, 1, err);
}

kt_status kt_ffi_plan_cluster_json(kt_ffi_plan *pl, const char *json, kt_error *err) {
  NEED(pl, "plan");
  NEED(json, "cluster JSON");
  return kt_plan_cluster_parse(json, &pl->cluster, err);
}

kt_status kt_ffi_plan_cluster_file(kt_ffi_plan *pl, const char *path, kt_error *err) {
  NEED(pl, "plan");
  NEED(path, "cluster file");
  return kt_plan_cluster_load(path, &pl->cluster, err);
}

kt_status kt_ffi_plan_check(const kt_ffi_plan *pl, kt_error *err) {
  NEED(pl, "plan");
  return kt_plan_cluster_check(&pl->cluster, err);
}

/* A settable field: where it lives in the request and its C type. */
typedef enum { F_DOUBLE, F_INT, F_LONG, F_UNSIGNED } field_type;
typedef struct {
  const char *name;
  size_t offset;
  field_type type;
} field;

#define CLUSTER(f, t) \
  { #f, offsetof(kt_ffi_plan, cluster.f), t }
#define OPTION(f, t) \
  { #f, offsetof(kt_ffi_plan, options.f), t }
#define SEARCH(f, t) \
  { #f, offsetof(kt_ffi_plan, search.f), t }
#define PIN(f) \
  { #f, offsetof(kt_ffi_plan, search.pin.f), F_INT }
static const field fields[] = {
    CLUSTER(devices, F_INT),
    CLUSTER(devices_per_node, F_INT),
    CLUSTER(mem_bytes, F_DOUBLE),
    CLUSTER(mem_reserved, F_DOUBLE),
    CLUSTER(peak_flops, F_DOUBLE),
    CLUSTER(efficiency, F_DOUBLE),
    CLUSTER(achieved_flops, F_DOUBLE),
    CLUSTER(intra_bw, F_DOUBLE),
    CLUSTER(intra_latency, F_DOUBLE),
    CLUSTER(inter_bw, F_DOUBLE),
    CLUSTER(inter_latency, F_DOUBLE),
    CLUSTER(inter_burst, F_DOUBLE),
    OPTION(weight_bytes, F_DOUBLE),
    OPTION(grad_bytes, F_DOUBLE),
    OPTION(optimizer_bytes, F_DOUBLE),
    OPTION(zero, F_INT),
    OPTION(sequence_parallel, F_INT),
    SEARCH(global_batch, F_LONG),
    SEARCH(max_bubble, F_DOUBLE),
    SEARCH(max_microbatches, F_INT),
    SEARCH(max_chunks, F_INT),
    SEARCH(top, F_INT),
    SEARCH(collapse, F_INT),
    SEARCH(schedules, F_UNSIGNED),
    SEARCH(recomputes, F_UNSIGNED),
    SEARCH(node_layouts, F_UNSIGNED),
    PIN(p),
    PIN(d),
    PIN(t),
    PIN(v),
    PIN(m),
    PIN(b),
    PIN(k),
};

static kt_status set_field(kt_ffi_plan *pl, const field *f, double value, kt_error *err) {
  char *at = (char *)pl + f->offset;
  if (f->type == F_DOUBLE) {
    if (!isfinite(value))
      return kt_fail(err, KT_EINVAL, "%s: %g is not a finite number", f->name, value);
    *(double *)at = value;
    return KT_OK;
  }
  double lo = f->type == F_UNSIGNED ? 0 : f->type == F_INT ? INT_MIN : -9.0e18;
  double hi = f->type == F_UNSIGNED ? UINT_MAX : f->type == F_INT ? INT_MAX : 9.0e18;
  if (!(value >= lo && value <= hi) || value != floor(value))
    return kt_fail(err, KT_EINVAL, "%s: %g is not an integer in its range", f->name, value);
  if (f->type == F_INT) *(int *)at = (int)value;
  else if (f->type == F_LONG) *(long *)at = (long)value;
  else *(unsigned *)at = (unsigned)value;
  return KT_OK;
}

kt_status kt_ffi_plan_set(kt_ffi_plan *pl, const char *field_name, double value, kt_error *err) {
  NEED(pl, "plan");
  NEED(field_name, "field");
  if (!strcmp(field_name, "seq_len")) {
    if (!pl->have_model) return kt_fail(err, KT_EINVAL, "seq_len: set the model first");
    if (!(value >= 1 && value <= (1 << 24)) || value != floor(value))
      return kt_fail(err, KT_EINVAL, "seq_len: %g is not an integer in 1..16777216", value);
    return kt_plan_model_set_seq_len(&pl->model, (int)value, err);
  }
  for (size_t i = 0; i < sizeof fields / sizeof *fields; i++)
    if (!strcmp(fields[i].name, field_name)) return set_field(pl, &fields[i], value, err);
  return kt_fail(err, KT_EINVAL, "unknown planner field '%.40s'", field_name);
}

kt_status kt_ffi_plan_search(kt_ffi_plan *pl, char **json, kt_error *err) {
  *json = NULL;
  NEED(pl, "plan");
  if (!pl->have_model) return kt_fail(err, KT_EINVAL, "the planner needs a model");
  kt_plan_report rep;
  kt_status st = kt_plan_search(&pl->model, &pl->cluster, &pl->options, &pl->search, &rep, err);
  if (st) return st;
  pl->min_memory = rep.min_memory;
  snprintf(pl->not_applicable, sizeof pl->not_applicable, "%s", rep.not_applicable_reason);
  kt_buf b;
  kt_buf_init(&b);
  kt_render_plan(&pl->model, &pl->cluster, &pl->options, &pl->search, &rep, 1, 1, &b);
  kt_plan_report_free(&rep);
  if (b.failed || !b.data) {
    kt_buf_free(&b);
    return kt_fail(err, KT_ENOMEM, "out of memory rendering the plan");
  }
  *json = b.data;
  return KT_OK;
}

double kt_ffi_plan_min_memory(const kt_ffi_plan *pl) { return pl ? pl->min_memory : 0; }

const char *kt_ffi_plan_not_applicable(const kt_ffi_plan *pl) {
  return pl ? pl->not_applicable : "";
}

kt_status kt_ffi_plan_partition(const kt_ffi_plan *pl, int stages, int t, int b, int m, int d,
                                int recompute, int capped, char **json, kt_error *err) {
  *json = NULL;
  NEED(pl, "plan");
  if (!pl->have_model) return kt_fail(err, KT_EINVAL, "the partitioner needs a model");
  if (stages < 1 || stages > KT_PLAN_MAX_LAYERS)
    return kt_fail(err, KT_EINVAL, "stages %d: expected 1..%d", stages, KT_PLAN_MAX_LAYERS);
  const struct {
    const char *name;
    int v, hi;
  } sizes[] = {
      {"t", t, 1 << 30}, {"b", b, 1 << 30}, {"m", m, KT_MAX_MICROBATCHES}, {"d", d, 1 << 30}};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
    if (sizes[i].v < 1 || sizes[i].v > sizes[i].hi)
      return kt_fail(err, KT_EINVAL, "%s %d: expected 1..%d", sizes[i].name, sizes[i].v,
                     sizes[i].hi);
  if (recompute < 0 || recompute >= KT_RECOMPUTE_COUNT)
    return kt_fail(err, KT_EINVAL, "recompute %d: expected 0 (none), 1 (selective) or 2 (full)",
                   recompute);
  kt_plan_partition_view pv = {.stages = stages,
                               .t = t,
                               .b = b,
                               .m = m,
                               .d = d,
                               .recompute = (kt_recompute)recompute,
                               .capped = capped};
  kt_status st = kt_plan_partition_only(&pl->model, &pl->cluster, &pl->options, &pv, err);
  if (st) return st;
  kt_buf out;
  kt_buf_init(&out);
  kt_render_plan_partition(&pl->model, &pl->cluster, &pv, 1, &out);
  kt_plan_partition_view_free(&pv);
  if (out.failed || !out.data) {
    kt_buf_free(&out);
    return kt_fail(err, KT_ENOMEM, "out of memory rendering the partition");
  }
  *json = out.data;
  return KT_OK;
}

kt_status kt_ffi_partition(int n, const double *load, const double *fixed, const double *act,
                           const double *mult, double mem_cap, int stages, int *counts,
                           double *bottleneck, kt_error *err) {
  NEED(counts, "counts");
  kt_partition_problem pb = {
      .n = n, .load = load, .fixed = fixed, .act = act, .mult = mult, .mem_cap = mem_cap};
  return kt_partition_minmax(&pb, stages, counts, bottleneck, err);
}
