/* A comparison: one request run once per schedule (kaiten/request.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/request.h"
#include "request/internal.h"

/* The V a kind runs with in a comparison: v for the chunked kinds in loop
 * placement (interleaved, looped-bfs), its own otherwise. */
static int kind_v(kt_gen_kind k, int v) {
  int own = kt_gen_default_chunks(k);
  return own > 1 && kt_gen_kind_placement(k) != KT_PLACEMENT_V ? v : own;
}

/* The row of one schedule: rq asked of it alone. */
static kt_status run_row(const kt_request *rq, const char *name, int v, kt_result_detail detail,
                         kt_compare_entry *row) {
  kt_request one = *rq; /* shallow: read only */
  one.order = NULL, one.schedules = NULL, one.placement = -1, one.given = 0;
  snprintf(one.schedule, sizeof one.schedule, "%.*s", KT_REQUEST_NAME_LEN - 1, name);
  snprintf(row->name, sizeof row->name, "%.*s", KT_REQUEST_NAME_LEN - 1, name);
  if (strcmp(name, KT_OPTIMAL_NAME)) {
    kt_gen_kind k = (kt_gen_kind)kt_gen_kind_from_name(name);
    one.v = kind_v(k, v);
    /* the memory limit is for the rows that keep to one; the others keep their own order */
    if (kt_gen_check_mem_limit(k, 1, NULL)) one.mem_limit = (kt_mem_limit){KT_MEM_UNITS, 0, ""};
  } else {
    one.v = 1;
  }
  kt_error err = {{0}};
  kt_status st = kt_request_run(&one, &row->result, detail, &err);
  row->applies = !st;
  if (st) snprintf(row->reason, sizeof row->reason, "%s", err.msg);
  return st == KT_ENOMEM ? st : KT_OK;
}

/* 1F1B's peak memory on the same model: the memory column's unit. */
static double peak_of_1f1b(const kt_request *rq, int p, int m) {
  kt_request one = *rq;
  one.order = NULL, one.schedules = NULL, one.placement = -1, one.given = 0, one.v = 0;
  one.p = p, one.m = m;
  one.mem_limit = (kt_mem_limit){KT_MEM_UNITS, 0, ""}; /* 1F1B's order sets its memory */
  snprintf(one.schedule, sizeof one.schedule, "1f1b");
  kt_result res;
  if (kt_request_run(&one, &res, KT_RESULT_METRICS, NULL)) return -1;
  double peak = 0;
  for (int r = 0; r < res.met.p; r++)
    if (res.met.ranks[r].peak_memory > peak) peak = res.met.ranks[r].peak_memory;
  kt_result_free(&res);
  return peak;
}

/* The rows asked for: rq->schedules, or every generator. */
static int row_names(const kt_request *rq, char names[][KT_REQUEST_NAME_LEN], int max) {
  int n = 0;
  if (!rq->schedules) {
    for (int k = 0; k < KT_SCHED_COUNT && n < max; k++)
      snprintf(names[n++], KT_REQUEST_NAME_LEN, "%s", kt_gen_kind_name((kt_gen_kind)k));
    return n;
  }
  for (const char *at = rq->schedules; *at && n < max; at += *at == ',') {
    size_t len = strcspn(at, ",");
    snprintf(names[n], KT_REQUEST_NAME_LEN, "%.*s", (int)len, at);
    /* an alias is shown as the generator's own name */
    int k = kt_gen_kind_from_name(names[n]);
    if (k >= 0) snprintf(names[n], KT_REQUEST_NAME_LEN, "%s", kt_gen_kind_name((kt_gen_kind)k));
    n++;
    at += len;
  }
  return n;
}

/* A memory limit given where no row keeps to one would be ignored: refused. */
static kt_status check_limit(const kt_request *rq, char names[][KT_REQUEST_NAME_LEN], int n,
                             kt_error *err) {
  if (!kt_mem_limit_given(&rq->mem_limit) || rq->order) return KT_OK; /* a held order's check */
  for (int i = 0; i < n; i++)
    if (!strcmp(names[i], KT_OPTIMAL_NAME) ||
        !kt_gen_check_mem_limit((kt_gen_kind)kt_gen_kind_from_name(names[i]), 1, NULL))
      return KT_OK;
  char text[40];
  kt_mem_limit_format(&rq->mem_limit, text, sizeof text);
  return kt_fail(err, KT_EINVAL,
                 "%smem-limit %s: none of the schedules compared keeps to a "
                 "memory limit (zb-auto, zbv-auto and optimal do)",
                 rq->key_prefix, text);
}

/* A comparison where no row applies has nothing to show: the first row's
 * reason (the same for every row when the input is at fault). */
static kt_status none_applies(kt_comparison *cmp, kt_error *err) {
  for (int i = 0; i < cmp->n; i++)
    if (cmp->rows[i].applies) return KT_OK;
  if (cmp->n == 0) return KT_OK;
  kt_status st = kt_fail(err, KT_EINVAL, "none of the schedules compared applies: %s: %s",
                         cmp->rows[0].name, cmp->rows[0].reason);
  kt_comparison_free(cmp);
  return st;
}

kt_status kt_request_compare(const kt_request *rq, kt_result_detail detail, kt_comparison *cmp,
                             kt_error *err) {
  memset(cmp, 0, sizeof *cmp);
  if ((rq->given & KT_REQ_GIVEN_V) && rq->v < 2)
    return kt_fail(err, KT_EINVAL,
                   "%s %d: a comparison's V is the chunks of interleaved and "
                   "looped-bfs: expected 2..%d",
                   rq->size_key[2], rq->v, KT_MAX_CHUNKS);
  if (detail == KT_RESULT_ORDER) detail = KT_RESULT_METRICS;
  kt_status st = kt_request_check(rq, err);
  if (st) return st;
  cmp->p = rq->p, cmp->m = rq->m, cmp->v = rq->v > 0 ? rq->v : 2;
  char names[KT_SCHED_COUNT + 1][KT_REQUEST_NAME_LEN];
  int n = row_names(rq, names, KT_SCHED_COUNT + 1);
  if ((st = check_limit(rq, names, n, err))) return st;
  /* every row's order is kept (12 bytes an action), and with TIMELINE its events too */
  double bytes = detail == KT_RESULT_TIMELINE ? KT_SIM_BYTES_TIMELINE * (n + 1.0)
                                              : KT_SIM_BYTES_METRICS + 12.0 * n;
  if (!rq->order && (st = kt__request_size_check(cmp->p, cmp->v, cmp->m, bytes, err))) return st;
  cmp->cost_basis = rq->per_stage ? "stage" : "rank";
  cmp->given = &rq->costs;
  cmp->rows = kt_calloc(KT_SCHED_COUNT + 2, sizeof *cmp->rows);
  if (!cmp->rows) return kt_fail(err, KT_ENOMEM, "out of memory");
  /* the held order is one more row; its P and M set the comparison's */
  kt_result held;
  int has_held = rq->order != NULL;
  if (has_held) {
    kt_request one = *rq;
    one.given &= ~(unsigned)KT_REQ_GIVEN_V; /* -v is for the built-in rows */
    if ((st = kt_request_build(&one, &held, err))) {
      kt_comparison_free(cmp);
      return st;
    }
    cmp->p = held.order.p, cmp->m = held.order.m;
  }
  /* a fault off the pipeline is the request's error, not a row's */
  if ((st = kt_faults_check(&rq->faults, cmp->p, err))) {
    if (has_held) kt_result_free(&held);
    kt_comparison_free(cmp);
    return st;
  }
  kt_request sized = *rq;
  sized.p = cmp->p, sized.m = cmp->m;
  cmp->peak_1f1b = peak_of_1f1b(&sized, cmp->p, cmp->m);
  for (int i = 0; i < n && !st; i++)
    st = run_row(&sized, names[i], cmp->v, detail, &cmp->rows[cmp->n++]);
  if (has_held) {
    kt_compare_entry *row = &cmp->rows[cmp->n++];
    row->result = held;
    snprintf(row->name, sizeof row->name, "%s", held.order.name);
    kt_error why = {{0}};
    kt_status sst = kt_result_simulate(&row->result, detail, &why);
    row->applies = !sst;
    if (sst) {
      snprintf(row->reason, sizeof row->reason, "%s", why.msg);
      kt_result_free(&row->result);
    }
    if (sst == KT_ENOMEM && !st) st = sst;
  }
  if (st) {
    kt_comparison_free(cmp);
    return kt_fail(err, st, "out of memory");
  }
  return none_applies(cmp, err);
}

void kt_comparison_free(kt_comparison *cmp) {
  for (int i = 0; i < cmp->n; i++)
    if (cmp->rows[i].applies) kt_result_free(&cmp->rows[i].result);
  free(cmp->rows);
  cmp->rows = NULL, cmp->n = 0;
}
