/* The flat interface for foreign-function callers: a request and its
 * result as handles, each call handed to the library (kaiten/ffi.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/ffi.h"
#include "kaiten/report.h"
#include "kaiten/web.h"

void kt_ffi_free(char *text) { free(text); }

/* Hands a rendered buffer over as a malloc'd string (it owns b's data). */
static kt_status take_text(kt_buf *b, char **out, kt_error *err) {
  *out = NULL;
  if (b->failed) {
    kt_buf_free(b);
    return kt_fail(err, KT_ENOMEM, "out of memory rendering the result");
  }
  if (!b->data) kt_buf_append(b, "", 0);
  *out = b->data ? b->data : strdup("");
  if (!*out) return kt_fail(err, KT_ENOMEM, "out of memory rendering the result");
  return KT_OK;
}

static kt_status no_handle(kt_error *err, const char *what) {
  return kt_fail(err, KT_EINVAL, "%s: a NULL handle", what);
}

/* ---- requests ---------------------------------------------------------------- */

kt_request *kt_ffi_request_new(void) {
  kt_request *rq = kt_calloc(1, sizeof *rq);
  if (rq) kt_request_init(rq);
  return rq;
}

void kt_ffi_request_free(kt_request *rq) {
  if (!rq) return;
  kt_request_free(rq);
  free(rq);
}

kt_status kt_ffi_request_set(kt_request *rq, const char *key, const char *value, kt_error *err) {
  if (!rq || !key || !value) return no_handle(err, !rq ? "request" : !key ? "key" : "value");
  return kt_request_set(rq, key, value, err);
}

kt_status kt_ffi_request_parse(kt_request *rq, const char *text, kt_error *err) {
  if (!rq || !text) return no_handle(err, "request");
  return kt_request_parse(rq, text, err);
}

kt_status kt_ffi_request_costs(kt_request *rq, const char *json, kt_error *err) {
  if (!rq || !json) return no_handle(err, "request");
  return kt_costs_parse_json(&rq->costs, json, "costs", err);
}

kt_status kt_ffi_request_order(kt_request *rq, const char *text, size_t len, const char *name,
                               kt_error *err) {
  if (!rq || !text) return no_handle(err, "request");
  if (memchr(text, 0, len) || strlen(text) != len)
    return kt_fail(err, KT_EPARSE, "the schedule holds a NUL byte: not a text or CSV schedule");
  return kt_request_set_order(rq, text, name, NULL, err);
}

kt_status kt_ffi_request_order_file(kt_request *rq, const char *path, const char *name,
                                    kt_error *err) {
  if (!rq || !path) return no_handle(err, rq ? "path" : "request");
  return kt_request_read_order(rq, path, name, err);
}

const char *kt_ffi_request_order_text(const kt_request *rq) {
  return rq && rq->order ? rq->order : "";
}

kt_status kt_ffi_request_text(const kt_request *rq, char **out, kt_error *err) {
  if (!rq) return no_handle(err, "request");
  kt_buf b;
  kt_buf_init(&b);
  kt_request_print(rq, &b);
  return take_text(&b, out, err);
}

kt_status kt_ffi_request_pack(const kt_request *rq, const int *len, const double *sq, int n,
                              int given, char **out, kt_error *err) {
  *out = NULL;
  if (!rq || (!len && n > 0)) return no_handle(err, "request");
  kt_pack pk;
  kt_status st = kt_request_pack(rq, len, sq, n, given, &pk, err);
  if (st) return st;
  kt_buf b;
  kt_buf_init(&b);
  kt_buf_printf(&b, "{\"packing\":\"%s\",\"micro_batches\":[", kt_packing_name(pk.how));
  for (int k = 0; k < pk.m; k++) {
    int mb = pk.order[k];
    kt_buf_puts(&b, k ? ",[" : "[");
    for (int i = pk.first[mb]; i < pk.first[mb + 1]; i++)
      kt_buf_printf(&b, "%s%d", i > pk.first[mb] ? "," : "", pk.doc_of[i]);
    kt_buf_puts(&b, "]");
  }
  kt_buf_puts(&b, "],\"tokens\":[");
  for (int k = 0; k < pk.m; k++) kt_buf_printf(&b, "%s%d", k ? "," : "", pk.tokens[pk.order[k]]);
  kt_buf_puts(&b, "],\"order\":[");
  for (int k = 0; k < pk.m; k++) kt_buf_printf(&b, "%s%d", k ? "," : "", pk.order[k]);
  kt_buf_printf(&b, "],\"left_out\":%d,\"period\":", pk.left_out);
  kt_buf_json_number(&b, pk.period);
  kt_buf_puts(&b, "}");
  kt_pack_free(&pk);
  return take_text(&b, out, err);
}

/* ---- results ------------------------------------------------------------------ */

kt_status kt_ffi_run(const kt_request *rq, int detail, kt_result **out, kt_error *err) {
  if (!out) return no_handle(err, "out");
  *out = NULL;
  if (!rq) return no_handle(err, "request");
  if (detail < KT_RESULT_ORDER || detail > KT_RESULT_TIMELINE)
    return kt_fail(err, KT_EINVAL, "detail %d: expected 0 (order), 1 (metrics) or 2 (timeline)",
                   detail);
  kt_result *res = kt_calloc(1, sizeof *res);
  if (!res) return kt_fail(err, KT_ENOMEM, "out of memory");
  kt_status st = kt_request_run(rq, res, (kt_result_detail)detail, err);
  if (st) free(res);
  else *out = res;
  return st;
}

kt_status kt_ffi_result_simulate(kt_result *res, int detail, kt_error *err) {
  if (!res) return no_handle(err, "result");
  if (detail != KT_RESULT_METRICS && detail != KT_RESULT_TIMELINE)
    return kt_fail(err, KT_EINVAL, "detail %d: expected 1 (metrics) or 2 (timeline)", detail);
  if (res->has_timeline || (res->simulated && detail == KT_RESULT_METRICS)) return KT_OK;
  if (res->simulated) { /* metrics only so far: again, with every event */
    kt_metrics_free(&res->met);
    res->simulated = 0;
  }
  return kt_result_simulate(res, (kt_result_detail)detail, err);
}

void kt_ffi_result_free(kt_result *res) {
  if (!res) return;
  kt_result_free(res);
  free(res);
}

const kt_schedule *kt_ffi_result_order(const kt_result *res) { return res ? &res->order : NULL; }

const kt_schedule *kt_ffi_result_program(const kt_result *res) {
  return res && res->program.ranks ? &res->program : NULL;
}

double kt_ffi_result_mem_limit(const kt_result *res) { return res ? res->mem_limit : -1; }

const char *kt_ffi_result_read_info(const kt_result *res) { return res ? res->read_info : ""; }

static kt_status simulated(const kt_result *res, kt_error *err) {
  if (!res) return no_handle(err, "result");
  if (!res->simulated) return kt_fail(err, KT_EINVAL, "the result is not simulated yet");
  return KT_OK;
}

kt_status kt_ffi_result_json(const kt_result *res, int events, char **out, kt_error *err) {
  if (!out) return no_handle(err, "out");
  *out = NULL;
  kt_status st = simulated(res, err);
  if (st) return st;
  kt_buf b;
  kt_buf_init(&b);
  kt_render_sim_json(&res->info, &res->met, events && res->has_timeline ? &res->tl : NULL, &b);
  return take_text(&b, out, err);
}

kt_status kt_ffi_result_gantt(const kt_result *res, int width, char **out, kt_error *err) {
  if (!out) return no_handle(err, "out");
  *out = NULL;
  kt_status st = simulated(res, err);
  if (st) return st;
  if (width < 40 || width > 100000) /* --width's range: the chart's work grows with it */
    return kt_fail(err, KT_EINVAL, "width %d: expected 40..100000 columns", width);
  if (!res->has_timeline) return kt_fail(err, KT_EINVAL, "the result kept no timeline");
  kt_gantt_opts go;
  kt_gantt_default_opts(&go);
  go.width = width;
  go.chunks = res->order.v;
  kt_buf b;
  kt_buf_init(&b);
  kt_render_gantt_ascii(&res->tl, &go, &b);
  kt_buf_puts(&b, "\n");
  kt_render_metrics_text(&res->info, &res->met, "unit", &b);
  kt_render_cost_basis_line(res->cost_basis, res->order.v, &b);
  kt_render_memory_model_line(&res->costs, &b);
  return take_text(&b, out, err);
}

kt_status kt_ffi_result_costs_json(const kt_result *res, char **out, kt_error *err) {
  if (!out) return no_handle(err, "out");
  *out = NULL;
  if (!res) return no_handle(err, "result");
  kt_buf b;
  kt_buf_init(&b);
  kt_render_costs_json(&res->costs, &b);
  return take_text(&b, out, err);
}

kt_status kt_ffi_result_report(const kt_result *res, const kt_request *rq, const char *path,
                               const char *title, kt_error *err) {
  kt_status st = simulated(res, err);
  if (st) return st;
  if (!res->has_timeline) return kt_fail(err, KT_EINVAL, "the result kept no timeline");
  if (!path) return kt_fail(err, KT_EINVAL, "report: no path");
  return kt_write_result_report(path, title, res, NULL, rq ? &rq->costs : NULL, err);
}

/* ---- comparisons --------------------------------------------------------------- */

kt_status kt_ffi_compare(const kt_request *rq, int detail, kt_comparison **out, kt_error *err) {
  if (!out) return no_handle(err, "out");
  *out = NULL;
  if (!rq) return no_handle(err, "request");
  kt_comparison *cmp = kt_calloc(1, sizeof *cmp);
  if (!cmp) return kt_fail(err, KT_ENOMEM, "out of memory");
  kt_status st = kt_request_compare(
      rq, detail == KT_RESULT_TIMELINE ? KT_RESULT_TIMELINE : KT_RESULT_METRICS, cmp, err);
  if (st) free(cmp);
  else *out = cmp;
  return st;
}

void kt_ffi_comparison_free(kt_comparison *cmp) {
  if (!cmp) return;
  kt_comparison_free(cmp);
  free(cmp);
}

kt_status kt_ffi_comparison_text(const kt_comparison *cmp, int json, char **out, kt_error *err) {
  if (!out) return no_handle(err, "out");
  *out = NULL;
  if (!cmp) return no_handle(err, "comparison");
  kt_buf b;
  kt_buf_init(&b);
  kt_render_comparison(cmp, json, &b);
  if (!json) kt_render_memory_model_line(cmp->given, &b);
  return take_text(&b, out, err);
}

int kt_ffi_comparison_rows(const kt_comparison *cmp) { return cmp ? cmp->n : 0; }

const kt_result *kt_ffi_comparison_row(const kt_comparison *cmp, int i, const char **name,
                                       const char **reason) {
  if (!cmp || i < 0 || i >= cmp->n) return NULL;
  const kt_compare_entry *e = &cmp->rows[i];
  if (name) *name = e->name;
  if (reason) *reason = e->applies ? NULL : e->reason;
  return e->applies ? &e->result : NULL;
}

kt_status kt_ffi_comparison_report(const kt_comparison *cmp, const char *path, const char *title,
                                   kt_error *err) {
  if (!cmp) return no_handle(err, "comparison");
  if (!path) return kt_fail(err, KT_EINVAL, "report: no path");
  for (int i = 0; i < cmp->n; i++)
    if (cmp->rows[i].applies && !cmp->rows[i].result.has_timeline)
      return kt_fail(err, KT_EINVAL, "the comparison kept no timelines (compare with detail 2)");
  return kt_write_comparison_report(path, title, cmp, err);
}

/* ---- the what-if page's call ---------------------------------------------------- */

kt_status kt_ffi_web_run(const char *args, const char *order, char **out, kt_error *err) {
  if (!out) return no_handle(err, "out");
  *out = NULL;
  if (!args) return no_handle(err, "args");
  kt_buf b;
  kt_buf_init(&b);
  kt_web_run(args, order, &b); /* its answer says its own failure */
  return take_text(&b, out, err);
}

/* ---- schedules -------------------------------------------------------------- */

void kt_ffi_schedule_shape(const kt_schedule *s, int shape[5]) {
  if (!shape) return;
  if (!s) {
    memset(shape, 0, 5 * sizeof *shape);
    return;
  }
  shape[0] = s->p, shape[1] = s->v, shape[2] = s->m;
  shape[3] = s->ranks ? kt_schedule_stages(s) : 0;
  shape[4] = (int)s->placement;
}

const char *kt_ffi_schedule_name(const kt_schedule *s) { return s ? s->name : ""; }

kt_status kt_ffi_schedule_write(const kt_schedule *s, int notation, int lowered_ir, char **out,
                                kt_error *err) {
  if (!out) return no_handle(err, "out");
  *out = NULL;
  if (!s) return no_handle(err, "schedule");
  if (notation < -1 || notation > KT_NOTATION_LEGACY)
    return kt_fail(err, KT_EINVAL,
                   "notation %d: expected -1 (text), 0 or 1 (current) or 2 (legacy)", notation);
  if (lowered_ir < -1 || lowered_ir > KT_TORCH_IR_PRE_2_15)
    return kt_fail(err, KT_EINVAL,
                   "lowered_ir %d: expected -1 (compute only), 0 (torch 2.15) or 1 "
                   "(older)",
                   lowered_ir);
  kt_schedule low = {0};
  if (lowered_ir >= 0) {
    kt_status st = kt_schedule_lower_ir(s, (kt_torch_ir)lowered_ir, &low, err);
    if (st) return st;
    s = &low;
  }
  kt_buf b;
  kt_buf_init(&b);
  if (notation < 0) kt_schedule_write_text(s, &b);
  else
    kt_schedule_write_csv_notation(
        s, notation == KT_NOTATION_LEGACY ? KT_NOTATION_LEGACY : KT_NOTATION_CURRENT, &b);
  if (lowered_ir >= 0) kt_schedule_free(&low);
  return take_text(&b, out, err);
}
