/* The what-if panel's one call (kaiten/web.h): read the settings, build the
 * schedule (generate it, or read the order the page holds), simulate it,
 * and answer with kaiten sim's own JSON plus what the panel draws: every
 * action's slack and the critical path, memory levels, the closed forms,
 * the flags that reproduce it, and on request the exports. Every step is a
 * call into the library; this file only wires them.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/report.h"
#include "kaiten/web.h"
#include "web/web_internal.h"

static void failure(kt_buf *out, kt_status st, const kt_error *err) {
  kt_buf_puts(out, "{\"ok\":false,\"status\":");
  kt_buf_json_string(out, kt_status_name(st));
  kt_buf_puts(out, ",\"error\":");
  kt_buf_json_string(out, err->msg[0] ? err->msg : kt_status_message(st));
  kt_buf_puts(out, "}\n");
}

/* The settings: the page's own (exports=0|1, replan=0|1) and every other
 * as the request reads it. */
static kt_status parse(const char *args, kt__web_run *w, kt_error *err) {
  char *text = strdup(args), *save = NULL;
  if (!text) return kt_fail(err, KT_ENOMEM, "out of memory");
  kt_buf rest;
  kt_buf_init(&rest);
  kt_status st = KT_OK;
  for (char *tok = strtok_r(text, " \t\r\n", &save); tok && !st;
       tok = strtok_r(NULL, " \t\r\n", &save)) {
    if (!strcmp(tok, "exports=1") || !strcmp(tok, "exports=0")) w->exports = tok[8] == '1';
    else if (!strcmp(tok, "replan=1") || !strcmp(tok, "replan=0")) w->replan = tok[7] == '1';
    else kt_buf_printf(&rest, "%s ", tok);
  }
  free(text);
  if (rest.failed) st = kt_fail(err, KT_ENOMEM, "out of memory");
  if (!st) st = kt_request_parse(&w->rq, rest.data ? rest.data : "", err);
  kt_buf_free(&rest);
  return st;
}

/* replan=1 with a fault set (slow-rank, slow-link): the order's period
 * without the faults, and the order zb-auto (zbv-auto in the v placement)
 * makes for the faulted costs under the same memory limit, its period and
 * lower bound. */
static kt_status replan(kt__web_run *w, kt_error *err) {
  w->clean = w->replanned = w->bound = NAN;
  if (!w->replan || !kt_faults_any(&w->rq.faults)) return KT_OK;
  const kt_schedule *s = &w->res.order;
  kt_costs clean;
  double busy;
  kt_status st = kt_costs_for_chunks(&w->rq.costs, w->rq.per_stage ? 1 : s->v, &clean, err);
  if (!st) st = kt_gen_period(kt_result_runs(&w->res), &clean, &w->clean, &busy, err);
  kt_costs_free(&clean);
  kt_request re;
  if (!st && kt_request_copy(&re, &w->rq)) st = kt_fail(err, KT_ENOMEM, "out of memory");
  if (st) return st;
  free(re.order);
  re.order = NULL;
  snprintf(re.schedule, sizeof re.schedule, "%s",
           s->placement == KT_PLACEMENT_V ? "zbv-auto" : "zb-auto");
  re.placement = -1, re.p = s->p, re.m = s->m, re.v = s->v;
  re.given = KT_REQ_GIVEN_P | KT_REQ_GIVEN_M | KT_REQ_GIVEN_V;
  if (w->res.mem_limit > 0) re.mem_limit = (kt_mem_limit){KT_MEM_UNITS, w->res.mem_limit, ""};
  kt_result r;
  st = kt_request_run(&re, &r, KT_RESULT_METRICS, err);
  if (!st) {
    snprintf(w->replanned_name, sizeof w->replanned_name, "%s", r.order.name);
    w->replanned = r.met.period;
    w->bound = r.bound.has ? r.bound.value : NAN;
    kt_result_free(&r);
  }
  kt_request_free(&re);
  return st;
}

kt_status kt_web_run(const char *args, const char *order, kt_buf *out) {
  kt__web_run w;
  memset(&w, 0, sizeof w);
  kt_request_init(&w.rq);
  kt_error err = {{0}};
  kt_status st = parse(args ? args : "", &w, &err);
  if (!st && order && *order) {
    w.rq.given = 0; /* the order's sizes are its own */
    st = kt_request_set_order(&w.rq, order, NULL, NULL, &err);
  }
  if (!st) st = kt_request_run(&w.rq, &w.res, KT_RESULT_TIMELINE, &err);
  w.have_res = !st;
  if (!st) {
    st = kt_timeline_critical(&w.res.tl, kt_cost_comm(&w.res.costs), w.res.costs.send_overhead,
                              &w.cr, &err);
  }
  if (!st) st = replan(&w, &err);
  if (!st) st = kt__web_answer(&w, out, &err);
  if (st) failure(out, st, &err);
  if (w.have_res) kt_result_free(&w.res);
  kt_critical_free(&w.cr);
  kt_request_free(&w.rq);
  return st;
}
