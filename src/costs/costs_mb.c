/* Costs per (stage, micro-batch): each micro-batch its own time and memory
 * (variable-length micro-batches). The stage arrays keep each stage's
 * summary for the readers that only know stages. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "costs/costs_internal.h"

/* The per-micro-batch array of field and the stage array it summarises;
 * *memory: the summary is the largest value, else the mean. NULL: a field
 * with no per-micro-batch form. */
static double **mb_field(kt_costs *c, const char *field, double ***stage, int *memory) {
  *memory = 0;
  if (!strcmp(field, "tf")) return *stage = &c->stage_tf, &c->mb_tf;
  if (!strcmp(field, "tb")) return *stage = &c->stage_tb, &c->mb_tb;
  if (!strcmp(field, "tw")) return *stage = &c->stage_tw, &c->mb_tw;
  *memory = 1;
  if (!strcmp(field, "mem-act") || !strcmp(field, "mem_act"))
    return *stage = &c->stage_mem_act, &c->mb_mem_act;
  if (!strcmp(field, "mem-wgrad") || !strcmp(field, "mem_wgrad"))
    return *stage = &c->stage_mem_wgrad, &c->mb_mem_wgrad;
  return NULL;
}

static int any_mb(const kt_costs *c) {
  return c->mb_tf || c->mb_tb || c->mb_tw || c->mb_mem_act || c->mb_mem_wgrad;
}

void kt__costs_free_mb(kt_costs *c) {
  free(c->mb_tf), free(c->mb_tb), free(c->mb_tw), free(c->mb_mem_act), free(c->mb_mem_wgrad);
  c->mb_tf = c->mb_tb = c->mb_tw = c->mb_mem_act = c->mb_mem_wgrad = NULL;
  c->n_mb = 0;
}

void kt_costs_clear_mb(kt_costs *c) { kt__costs_free_mb(c); }

void kt__costs_drop_mb(kt_costs *c, const char *field) {
  double **stage;
  int memory;
  double **arr = mb_field(c, field, &stage, &memory);
  if (!arr) return;
  free(*arr);
  *arr = NULL;
  if (!any_mb(c)) c->n_mb = 0;
}

#define MB_VALUE(arr, stage_fn) \
  ((c->n_mb > 0 && c->arr && stage >= 0 && stage < c->n_stages && mb >= 0 && mb < c->n_mb) \
       ? c->arr[(size_t)stage * (size_t)c->n_mb + (size_t)mb] \
       : stage_fn(c, stage))

double kt_cost_tf_mb(const kt_costs *c, int stage, int mb) { return MB_VALUE(mb_tf, kt_cost_tf); }
double kt_cost_tb_mb(const kt_costs *c, int stage, int mb) { return MB_VALUE(mb_tb, kt_cost_tb); }
double kt_cost_tw_mb(const kt_costs *c, int stage, int mb) { return MB_VALUE(mb_tw, kt_cost_tw); }
double kt_cost_mem_act_mb(const kt_costs *c, int stage, int mb) {
  return MB_VALUE(mb_mem_act, kt_cost_mem_act);
}
double kt_cost_mem_wgrad_mb(const kt_costs *c, int stage, int mb) {
  return MB_VALUE(mb_mem_wgrad, kt_cost_mem_wgrad);
}

/* A stage's summary of its micro-batches' values: the value itself when
 * they are all equal (so equal lists behave exactly as a per-stage list),
 * else the mean (times) or the largest (memory). */
static double summary(const double *x, int n, int memory) {
  int equal = 1;
  double sum = 0, top = x[0];
  for (int j = 0; j < n; j++) {
    equal &= x[j] == x[0];
    sum += x[j];
    top = fmax(top, x[j]);
  }
  return equal ? x[0] : memory ? top : sum / n;
}

kt_status kt_costs_set_mb(kt_costs *c, const char *field, const double *vals, int n_stages,
                          int n_mb, kt_error *err) {
  double **stage;
  int memory;
  double **arr = mb_field(c, field, &stage, &memory);
  if (!arr)
    return kt_fail(err, KT_EINVAL,
                   "%s: no per-micro-batch form (tf, tb, tw, mem-act and mem-wgrad have one)",
                   field);
  if (n_stages < 1 || n_stages > KT_MAX_RANKS * KT_MAX_CHUNKS || n_mb < 1 ||
      n_mb > KT_MAX_MICROBATCHES)
    return kt_fail(err, KT_EINVAL, "%s: %d stages of %d micro-batches", field, n_stages, n_mb);
  if (c->n_stages > 0 && c->n_stages != n_stages)
    return kt_fail(err, KT_EINVAL, "%s lists %d stages but another cost lists %d", field, n_stages,
                   c->n_stages);
  int others = !!c->mb_tf + !!c->mb_tb + !!c->mb_tw + !!c->mb_mem_act + !!c->mb_mem_wgrad - !!*arr;
  if (others > 0 && c->n_mb != n_mb)
    return kt_fail(err, KT_EINVAL, "%s lists %d micro-batches but another cost lists %d", field,
                   n_mb, c->n_mb);
  size_t cells = (size_t)n_stages * (size_t)n_mb;
  for (size_t i = 0; i < cells; i++)
    if (!kt__costs_value_ok(vals[i], KT_COST_MIN))
      return kt_fail(err, KT_EINVAL, "%s: stage %d micro-batch %d has %g; " KT__COST_RANGE_TEXT,
                     field, (int)(i / (size_t)n_mb), (int)(i % (size_t)n_mb), vals[i]);
  double *a = malloc(sizeof(double) * cells), *per = malloc(sizeof(double) * (size_t)n_stages);
  if (!a || !per) {
    free(a), free(per);
    return kt_fail(err, KT_ENOMEM, "out of memory");
  }
  memcpy(a, vals, sizeof(double) * cells);
  for (int s = 0; s < n_stages; s++) per[s] = summary(a + (size_t)s * (size_t)n_mb, n_mb, memory);
  free(*arr), free(*stage);
  *arr = a, *stage = per;
  c->n_stages = n_stages, c->n_mb = n_mb;
  return KT_OK;
}

kt_status kt__costs_check_mb(const kt_costs *c, kt_error *err) {
  if (!any_mb(c)) return KT_OK;
  if (c->n_mb < 1 || c->n_stages < 1)
    return kt_fail(err, KT_EINVAL, "per-micro-batch costs with %d stages of %d micro-batches",
                   c->n_stages, c->n_mb);
  const struct {
    const char *name;
    const double *a;
  } arrays[] = {{"tf", c->mb_tf},
                {"tb", c->mb_tb},
                {"tw", c->mb_tw},
                {"mem-act", c->mb_mem_act},
                {"mem-wgrad", c->mb_mem_wgrad}};
  size_t cells = (size_t)c->n_stages * (size_t)c->n_mb;
  for (size_t k = 0; k < sizeof arrays / sizeof *arrays; k++)
    for (size_t i = 0; arrays[k].a && i < cells; i++)
      if (!kt__costs_value_ok(arrays[k].a[i], KT_COST_STAGE_MIN))
        return kt_fail(err, KT_EINVAL, "%s: stage %d micro-batch %d has %g; " KT__COST_RANGE_TEXT,
                       arrays[k].name, (int)(i / (size_t)c->n_mb), (int)(i % (size_t)c->n_mb),
                       arrays[k].a[i]);
  return KT_OK;
}

kt_status kt_costs_check_m(const kt_costs *c, int m, kt_error *err) {
  if (c->n_mb > 0 && c->n_mb != m)
    return kt_fail(err, KT_EINVAL,
                   "per-micro-batch costs list %d micro-batches but the schedule has M=%d", c->n_mb,
                   m);
  return KT_OK;
}

/* "a0,a1;b0,b1;...": one group per stage, every group as long. */
kt_status kt__costs_set_mb_text(kt_costs *c, const char *field, const char *text, kt_error *err) {
  char *copy = strdup(text);
  double *all = NULL;
  if (!copy) return kt_fail(err, KT_ENOMEM, "out of memory");
  int stages = 0, n_mb = 0;
  kt_status st = KT_OK;
  for (char *grp = copy; grp && !st;) {
    char *semi = strchr(grp, ';');
    if (semi) *semi = 0;
    double *vals;
    int n;
    if ((st = kt__costs_parse_list(field, grp, &vals, &n, err))) break;
    if (stages && n != n_mb)
      st = kt_fail(err, KT_EINVAL, "%s: stage %d lists %d micro-batches, stage 0 lists %d", field,
                   stages, n, n_mb);
    else if (stages >= KT_MAX_RANKS * KT_MAX_CHUNKS)
      st = kt_fail(err, KT_EINVAL, "%s: too many stages (%d)", field, stages + 1);
    double *grown = st ? NULL : realloc(all, sizeof(double) * (size_t)(stages + 1) * (size_t)n);
    if (!st && !grown) st = kt_fail(err, KT_ENOMEM, "out of memory");
    if (!st) {
      all = grown;
      memcpy(all + (size_t)stages * (size_t)n, vals, sizeof(double) * (size_t)n);
      n_mb = n, stages++;
    }
    free(vals);
    grp = semi ? semi + 1 : NULL;
  }
  if (!st) st = kt_costs_set_mb(c, field, all, stages, n_mb, err);
  free(all);
  free(copy);
  return st;
}

/* The per-micro-batch arrays and the stage arrays they summarise. */
#define N_MB_FIELDS 5
static void mb_arrays(kt_costs *c, double **mb[N_MB_FIELDS], double **stage[N_MB_FIELDS]) {
  static const char *const names[N_MB_FIELDS] = {"tf", "tb", "tw", "mem-act", "mem-wgrad"};
  int memory;
  for (int k = 0; k < N_MB_FIELDS; k++) mb[k] = mb_field(c, names[k], &stage[k], &memory);
}

int kt_costs_mb_differ(const kt_costs *c) {
  double **mb[N_MB_FIELDS], **stage[N_MB_FIELDS];
  mb_arrays((kt_costs *)c, mb, stage);
  for (int k = 0; k < N_MB_FIELDS; k++)
    for (int s = 0; *mb[k] && s < c->n_stages; s++)
      for (int j = 1; j < c->n_mb; j++)
        if ((*mb[k])[(size_t)s * (size_t)c->n_mb + (size_t)j] !=
            (*mb[k])[(size_t)s * (size_t)c->n_mb])
          return 1;
  return 0;
}

kt_status kt_costs_least(const kt_costs *c, kt_costs *dst, kt_error *err) {
  if (kt_costs_copy(dst, c)) return kt_fail(err, KT_ENOMEM, "out of memory");
  double **mb[N_MB_FIELDS], **stage[N_MB_FIELDS];
  mb_arrays(dst, mb, stage);
  for (int k = 0; k < N_MB_FIELDS; k++)
    for (int s = 0; *mb[k] && s < dst->n_stages; s++) {
      const double *x = *mb[k] + (size_t)s * (size_t)dst->n_mb;
      double least = x[0];
      for (int j = 1; j < dst->n_mb; j++) least = fmin(least, x[j]);
      (*stage[k])[s] = least;
    }
  kt__costs_free_mb(dst);
  return KT_OK;
}
