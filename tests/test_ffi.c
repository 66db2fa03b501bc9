/* The flat interface for foreign-function callers (kaiten/ffi.h), from C:
 * every handle made, used and freed as Python's ctypes uses it, its
 * results equal to the library's own calls (so the sanitizer builds cover
 * the layer the Python package loads), and its errors as statuses. */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "kaiten/ffi.h"
#include "kaiten/generators.h"
#include "kaiten/plan.h"
#include "kaiten/report.h"
#include "kaiten/sim.h"

/* The library's own result of the same request (kaiten/request.h), as
 * the CLI renders it. */
static char *direct_json(const char *settings) {
  kt_request rq;
  kt_request_init(&rq);
  kt_result res;
  kt_error err;
  char *out = NULL;
  if (!kt_request_parse(&rq, settings, &err) &&
      !kt_request_run(&rq, &res, KT_RESULT_TIMELINE, &err)) {
    kt_buf b;
    kt_buf_init(&b);
    kt_render_sim_json(&res.info, &res.met, &res.tl, &b);
    out = b.data;
    kt_result_free(&res);
  }
  kt_request_free(&rq);
  return out;
}

static void test_request_and_result(void) {
  kt_error err = {{0}};
  kt_request *rq = kt_ffi_request_new();
  REQUIRE_VOID(rq);
  const char *settings = "schedule=interleaved p=4 v=2 m=8 tf=2 tb=2 tw=1";
  CHECK_EQ_INT(kt_ffi_request_parse(rq, settings, &err), KT_OK);
  char *text = NULL;
  CHECK_EQ_INT(kt_ffi_request_text(rq, &text, &err), KT_OK);
  CHECK_STR_CONTAINS(text, "schedule=interleaved p=4 m=8 v=2 tf=2 tb=2"); /* tw=1: the default */
  kt_ffi_free(text);
  kt_result *res = NULL;
  CHECK_EQ_INT(kt_ffi_run(rq, 0, &res, &err), KT_OK);
  REQUIRE_VOID(res);
  const kt_schedule *s = kt_ffi_result_order(res);
  int shape[5];
  kt_ffi_schedule_shape(s, shape);
  CHECK(shape[0] == 4 && shape[1] == 2 && shape[2] == 8 && shape[3] == 8);
  CHECK(shape[4] == KT_PLACEMENT_LOOP);
  CHECK(!strcmp(kt_ffi_schedule_name(s), "interleaved"));
  CHECK(kt_ffi_result_program(res) == NULL);
  char *cj = NULL;
  CHECK_EQ_INT(kt_ffi_result_costs_json(res, &cj, &err), KT_OK);
  CHECK_STR_CONTAINS(cj, "\"tf\":1,\"tb\":1,\"tw\":0.5"); /* rank basis: /V per stage */
  kt_ffi_free(cj);
  char *json = NULL;
  CHECK_EQ_INT(kt_ffi_result_json(res, 1, &json, &err), KT_EINVAL); /* not simulated yet */
  CHECK_EQ_INT(kt_ffi_result_simulate(res, 2, &err), KT_OK);
  char *want = direct_json(settings);
  CHECK_EQ_INT(kt_ffi_result_json(res, 1, &json, &err), KT_OK);
  CHECK_MSG(json && want && !strcmp(json, want), "ffi json differs:\n%s\n%s", json, want);
  kt_ffi_free(json);
  free(want);
  char *chart = NULL;
  CHECK_EQ_INT(kt_ffi_result_gantt(res, 80, &chart, &err), KT_OK);
  CHECK_STR_CONTAINS(chart, "rank 3 |");
  CHECK_STR_CONTAINS(chart, "closed form (P-1)/(V*M+P-1) = 0.1579");
  CHECK_STR_CONTAINS(chart, "cost basis: rank");
  kt_ffi_free(chart);
  char *csv = NULL;
  CHECK_EQ_INT(kt_ffi_schedule_write(s, KT_NOTATION_CURRENT, -1, &csv, &err), KT_OK);
  CHECK_EQ_INT(kt_ffi_schedule_write(s, -1, -1, &text, &err), KT_OK);
  CHECK_STR_CONTAINS(text, "# kaiten p=4 v=2 m=8");
  kt_ffi_free(text);
  CHECK_EQ_INT(kt_ffi_schedule_write(s, KT_NOTATION_CURRENT, KT_TORCH_IR_2_15, &text, &err), KT_OK);
  CHECK_STR_CONTAINS(text, "SEND_F");
  kt_ffi_free(text);
  /* the CSV held as the order of a new request: the same schedule */
  kt_request *back = kt_ffi_request_new();
  kt_result *again = NULL;
  CHECK_EQ_INT(kt_ffi_request_order(back, csv, strlen(csv), "mine", &err), KT_OK);
  CHECK_EQ_INT(kt_ffi_run(back, 1, &again, &err), KT_OK);
  char *csv2 = NULL;
  if (again) {
    CHECK_EQ_INT(kt_ffi_schedule_write(kt_ffi_result_order(again), 1, -1, &csv2, &err), KT_OK);
    CHECK(csv2 && !strcmp(csv2, csv));
    CHECK(!strcmp(kt_ffi_schedule_name(kt_ffi_result_order(again)), "mine"));
    CHECK_STR_CONTAINS(kt_ffi_result_read_info(again), "4 ranks, 8 stages (V=2)");
  }
  kt_ffi_free(csv2);
  kt_ffi_free(csv);
  kt_ffi_result_free(again);
  kt_ffi_request_free(back);
  /* the report of one result */
  char path[] = "/tmp/kt_test_ffi_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  if (fd >= 0) close(fd);
  CHECK_EQ_INT(kt_ffi_result_report(res, rq, path, NULL, &err), KT_OK);
  char *html = NULL;
  size_t len = 0;
  CHECK_EQ_INT(kt_read_file(path, &html, &len, &err), KT_OK);
  CHECK_STR_CONTAINS(html, "kaiten sim: interleaved, P=4 V=2 M=8");
  free(html);
  unlink(path);
  kt_ffi_result_free(res);
  kt_ffi_request_free(rq);
}

/* The exact search's schedule: proven on a small problem, its bound its
 * period; a comparison of it and zb-auto, and a row that does not apply. */
static void test_optimal_and_compare(void) {
  kt_error err = {{0}};
  kt_request *rq = kt_ffi_request_new();
  REQUIRE_VOID(rq);
  CHECK_EQ_INT(kt_ffi_request_parse(rq, "schedule=optimal p=3 m=5 tw=0.5 time-limit=20", &err),
               KT_OK);
  kt_result *opt = NULL;
  CHECK_EQ_INT(kt_ffi_run(rq, 1, &opt, &err), KT_OK);
  REQUIRE_VOID(opt);
  char *json = NULL;
  CHECK_EQ_INT(kt_ffi_result_json(opt, 0, &json, &err), KT_OK);
  CHECK_STR_CONTAINS(json, "\"lower_bound_from\":\"search\",\"lower_bound_exact\":true,\"gap\":0,");
  CHECK_STR_CONTAINS(json, "\"proven\":true,\"search\":{\"seconds\":");
  CHECK_STR_CONTAINS(json, "\"closed_form_why\":\"the exact search's order has no formula\"");
  kt_ffi_free(json);
  CHECK_NEAR(kt_ffi_result_mem_limit(opt), 3, 1e-12);
  kt_ffi_result_free(opt);
  CHECK_EQ_INT(kt_ffi_request_set(rq, "schedules", "zb-auto,optimal,zbv", &err), KT_OK);
  kt_comparison *cmp = NULL;
  CHECK_EQ_INT(kt_ffi_compare(rq, 1, &cmp, &err), KT_OK);
  REQUIRE_VOID(cmp);
  CHECK_EQ_INT(kt_ffi_comparison_rows(cmp), 3);
  const char *name = NULL, *reason = NULL;
  CHECK(kt_ffi_comparison_row(cmp, 1, &name, &reason) != NULL);
  CHECK(name && !strcmp(name, "optimal") && reason == NULL);
  CHECK(kt_ffi_comparison_row(cmp, 2, &name, &reason) == NULL);
  CHECK(reason && strstr(reason, "2P"));
  CHECK(kt_ffi_comparison_row(cmp, 3, &name, &reason) == NULL);
  CHECK_EQ_INT(kt_ffi_comparison_text(cmp, 1, &json, &err), KT_OK);
  CHECK_STR_CONTAINS(json, "{\"schedule\":\"zbv\",\"applies\":false,\"reason\":");
  CHECK_STR_CONTAINS(json, "\"mem_limit\":3,");
  CHECK_STR_CONTAINS(json, "\"proven\":true");
  kt_ffi_free(json);
  CHECK_EQ_INT(kt_ffi_comparison_text(cmp, 0, &json, &err), KT_OK);
  CHECK_STR_CONTAINS(json, "optimal");
  kt_ffi_free(json);
  CHECK_EQ_INT(kt_ffi_comparison_report(cmp, "/tmp/never.html", NULL, &err), KT_EINVAL);
  kt_ffi_comparison_free(cmp);
  /* above the search's reach: EINVAL, no result */
  kt_result *none = (kt_result *)1;
  CHECK_EQ_INT(kt_ffi_request_parse(rq, "schedule=optimal m=500 time-limit=1", &err), KT_OK);
  CHECK_EQ_INT(kt_ffi_run(rq, 1, &none, &err), KT_EINVAL);
  CHECK(none == NULL);
  kt_ffi_request_free(rq);
}

static void test_errors_and_limits(void) {
  kt_error err = {{0}};
  kt_request *rq = kt_ffi_request_new();
  kt_result *res = NULL;
  CHECK_EQ_INT(kt_ffi_request_set(rq, "schedule", "no-such", &err), KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "schedule 'no-such'");
  CHECK_EQ_INT(kt_ffi_request_set(rq, "stages", "0", &err), KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "stages '0': expected an integer in 1..");
  CHECK_EQ_INT(kt_ffi_request_set(rq, "no_such", "1", &err), KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "unknown setting 'no_such'");
  CHECK_EQ_INT(kt_ffi_request_parse(rq, "schedule=zbv m=4", &err), KT_OK);
  CHECK_EQ_INT(kt_ffi_run(rq, 1, &res, &err), KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "2P");
  CHECK_EQ_INT(kt_ffi_run(rq, 7, &res, &err), KT_EINVAL);
  /* an order that is not a schedule, and one that is not valid */
  CHECK_EQ_INT(kt_ffi_request_order(rq, "0X0\n", 4, NULL, &err), KT_OK);
  CHECK(kt_ffi_run(rq, 0, &res, &err) != KT_OK);
  CHECK_EQ_INT(kt_ffi_request_order(rq, "0F0,0B0\n1F0\n", 12, NULL, &err), KT_OK);
  CHECK(kt_ffi_run(rq, 0, &res, &err) != KT_OK);
  CHECK(res == NULL);
  CHECK_EQ_INT(kt_ffi_request_order(rq, "0F0\0x", 5, NULL, &err), KT_EPARSE);
  CHECK_EQ_INT(kt_ffi_request_costs(rq, "{\"tf\": 2, \"tff\": 1}", &err), KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "tff");
  /* a fraction below what one micro-batch needs: the smallest that works */
  CHECK_EQ_INT(kt_ffi_request_parse(rq, "schedule=zb-auto mem-limit=0.1x", &err), KT_OK);
  kt_request_free(rq);
  kt_request_init(rq);
  CHECK_EQ_INT(kt_ffi_request_parse(rq, "schedule=zb-auto mem-limit=0.1x", &err), KT_OK);
  CHECK_EQ_INT(kt_ffi_run(rq, 1, &res, &err), KT_EMEMLIMIT);
  CHECK_STR_CONTAINS(err.msg, "mem-limit 0.1x: ");
  CHECK_STR_CONTAINS(err.msg, "the smallest fraction that works is 0.25x");
  CHECK_EQ_INT(kt_ffi_request_parse(rq, "mem-limit=0.25x", &err), KT_OK);
  CHECK_EQ_INT(kt_ffi_run(rq, 1, &res, &err), KT_OK);
  kt_ffi_result_free(res);
  kt_ffi_request_free(rq);
  kt_ffi_request_free(NULL);
  kt_ffi_result_free(NULL);
  kt_ffi_comparison_free(NULL);
  kt_ffi_plan_free(NULL);
  int counts[2];
  double bott = 0, load[4] = {1, 1, 1, 5};
  CHECK_EQ_INT(kt_ffi_partition(4, load, NULL, NULL, NULL, 0, 2, counts, &bott, &err), KT_OK);
  CHECK(counts[0] == 3 && counts[1] == 1 && bott == 5);
  CHECK_EQ_INT(kt_ffi_partition(2, load, NULL, NULL, NULL, 0, 3, counts, &bott, &err), KT_EINVAL);
}

static void test_plan(void) {
  kt_error err = {{0}};
  kt_ffi_plan *pl = kt_ffi_plan_new();
  REQUIRE_VOID(pl);
  char *json = NULL;
  CHECK_EQ_INT(kt_ffi_plan_search(pl, &json, &err), KT_EINVAL); /* no model yet */
  CHECK_EQ_INT(kt_ffi_plan_set(pl, "seq_len", 128, &err), KT_EINVAL);
  CHECK_EQ_INT(kt_ffi_plan_model(pl, "no-such-model", &err), KT_EINVAL);
  CHECK_EQ_INT(kt_ffi_plan_model(pl, "gpt2-124m", &err), KT_OK);
  CHECK_EQ_INT(kt_ffi_plan_model_json(pl, "{\"blocks\": 2", &err), KT_EPARSE);
  CHECK_EQ_INT(kt_ffi_plan_set(pl, "devices", 4, &err), KT_OK);
  CHECK_EQ_INT(kt_ffi_plan_set(pl, "mem_bytes", 16e9, &err), KT_OK);
  CHECK_EQ_INT(kt_ffi_plan_set(pl, "global_batch", 32, &err), KT_OK);
  CHECK_EQ_INT(kt_ffi_plan_set(pl, "top", 2, &err), KT_OK);
  CHECK_EQ_INT(kt_ffi_plan_set(pl, "p", 2.5, &err), KT_EINVAL);
  CHECK_EQ_INT(kt_ffi_plan_set(pl, "schedules", -1, &err), KT_EINVAL);
  CHECK_EQ_INT(kt_ffi_plan_set(pl, "efficiency", NAN, &err), KT_EINVAL);
  CHECK_EQ_INT(kt_ffi_plan_set(pl, "no_such_field", 1, &err), KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "no_such_field");
  CHECK_EQ_INT(kt_ffi_plan_check(pl, &err), KT_OK);
  CHECK_EQ_INT(kt_ffi_plan_search(pl, &json, &err), KT_OK);
  CHECK_STR_CONTAINS(json, "\"configs\":[{\"p\":");
  CHECK_STR_CONTAINS(json, "\"global_batch\":32");
  kt_ffi_free(json);
  CHECK(kt_ffi_plan_min_memory(pl) > 0);
  CHECK_EQ_INT(kt_ffi_plan_partition(pl, 4, 1, 1, 4, 1, KT_RECOMPUTE_NONE, 0, &json, &err), KT_OK);
  CHECK_STR_CONTAINS(json, "\"partition_arg\":\"5,4,4,1\"");
  kt_ffi_free(json);
  CHECK_EQ_INT(kt_ffi_plan_partition(pl, 4, 1, 1, 4, 1, 9, 0, &json, &err), KT_EINVAL);
  kt_ffi_plan_free(pl);
}

/* Issue 49: every entry point checks what it is handed (the request's
 * ranges and size guard, its own numbers' ranges, NULL handles) before it
 * builds anything. */
static void test_arguments_checked(void) {
  kt_error err = {{0}};
  kt_request *rq = kt_ffi_request_new();
  kt_result *res = NULL;
  REQUIRE_VOID(rq);
  /* sizes out of the CLI's ranges, and a layout too large for this machine */
  CHECK_EQ_INT(kt_ffi_request_set(rq, "p", "4097", &err), KT_EINVAL);
  CHECK_EQ_INT(kt_ffi_request_set(rq, "m", "1000001", &err), KT_EINVAL);
  CHECK_EQ_INT(kt_ffi_request_parse(rq, "schedule=zbv p=4096 m=1000000", &err), KT_OK);
  CHECK_EQ_INT(kt_ffi_run(rq, 1, &res, &err), KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "would need about");
  CHECK(res == NULL);
  /* costs out of range, by name, and the memory limit's one rule */
  kt_request_free(rq);
  kt_request_init(rq);
  CHECK_EQ_INT(kt_ffi_request_set(rq, "mem_act", "1e308", &err), KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "mem_act '1e308'");
  CHECK_EQ_INT(kt_ffi_request_set(rq, "comm", "9e307", &err), KT_EINVAL);
  CHECK_EQ_INT(kt_ffi_request_set(rq, "tf", "5e-324", &err), KT_EINVAL);
  CHECK_EQ_INT(kt_ffi_request_costs(rq, "{\"tb\": 1e308}", &err), KT_EINVAL);
  CHECK_EQ_INT(kt_ffi_request_costs(rq, "{\"tb\": 1, \"tb\": 2}", &err), KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "twice");
  CHECK_EQ_INT(kt_ffi_request_set(rq, "mem_limit", "1e-300", &err), KT_EINVAL);
  CHECK_EQ_INT(kt_ffi_request_parse(rq, "schedule=1f1b p=2 m=4 mem-limit=3", &err), KT_OK);
  CHECK_EQ_INT(kt_ffi_run(rq, 1, &res, &err), KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "mem-limit 3: 1f1b cannot keep to a memory limit");
  /* costs set behind the readers' backs: the generator and simulator check them */
  kt_request_free(rq);
  kt_request_init(rq);
  CHECK_EQ_INT(kt_ffi_request_parse(rq, "schedule=zb-auto p=2 m=2", &err), KT_OK);
  rq->costs.mem_act = 1e308;
  CHECK_EQ_INT(kt_ffi_run(rq, 1, &res, &err), KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "1e+308");
  rq->costs.mem_act = 1;
  /* NULL handles, texts and outputs */
  CHECK_EQ_INT(kt_ffi_run(NULL, 1, &res, &err), KT_EINVAL);
  CHECK_EQ_INT(kt_ffi_run(rq, 1, NULL, &err), KT_EINVAL);
  CHECK_EQ_INT(kt_ffi_request_set(rq, NULL, "1", &err), KT_EINVAL);
  CHECK_EQ_INT(kt_ffi_request_set(rq, "p", NULL, &err), KT_EINVAL);
  CHECK_EQ_INT(kt_ffi_request_order_file(rq, NULL, NULL, &err), KT_EINVAL);
  char *out = NULL;
  CHECK_EQ_INT(kt_ffi_result_costs_json(NULL, &out, &err), KT_EINVAL);
  CHECK_EQ_INT(kt_ffi_schedule_write(NULL, -1, -1, &out, &err), KT_EINVAL);
  CHECK(kt_ffi_result_order(NULL) == NULL && kt_ffi_result_mem_limit(NULL) < 0);
  CHECK_EQ_INT(kt_ffi_web_run(NULL, NULL, &out, &err), KT_EINVAL);
  /* a chart width beyond --width's range: refused, not drawn for minutes */
  REQUIRE_VOID(kt_ffi_run(rq, 2, &res, &err) == KT_OK);
  CHECK_EQ_INT(kt_ffi_result_gantt(res, 1000000000, &out, &err), KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "width 1000000000");
  CHECK(out == NULL);
  CHECK_EQ_INT(kt_ffi_result_gantt(res, -5, &out, &err), KT_EINVAL);
  CHECK_EQ_INT(kt_ffi_result_gantt(res, 40, &out, &err), KT_OK);
  kt_ffi_free(out);
  CHECK_EQ_INT(kt_ffi_schedule_write(kt_ffi_result_order(res), -1, 7, &out, &err), KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "lowered_ir 7");
  /* the order in a file is read as the CLI reads it: /dev/zero stops at once */
  CHECK_EQ_INT(kt_ffi_request_order_file(rq, "/dev/zero", NULL, &err), KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "/dev/zero");
  /* optimal's time limit in --time-limit's range */
  CHECK_EQ_INT(kt_ffi_request_set(rq, "time_limit", "nan", &err), KT_EINVAL);
  CHECK_EQ_INT(kt_ffi_request_set(rq, "time_limit", "1e9", &err), KT_EINVAL);
  kt_ffi_result_free(res);
  kt_ffi_request_free(rq);
}

/* The partitioner: sums that overflow, and work beyond its bound, refused at once. */
static void test_partition_bounds(void) {
  kt_error err = {{0}};
  double big[4] = {1e308, 1e308, 1e308, 1e308};
  int counts[2];
  double bottleneck = 0;
  CHECK_EQ_INT(kt_ffi_partition(4, big, NULL, NULL, NULL, 0, 2, counts, &bottleneck, &err),
               KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "overflows");
  int n = 2000000;
  double *ones = malloc(sizeof *ones * (size_t)n);
  int *many = malloc(sizeof *many * 1000);
  REQUIRE_VOID(ones && many);
  for (int i = 0; i < n; i++) ones[i] = 1;
  double t0 = kt_now();
  CHECK_EQ_INT(kt_ffi_partition(n, ones, NULL, NULL, NULL, 0, 1000, many, &bottleneck, &err),
               KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "cells of work");
  CHECK(kt_now() - t0 < 1);
  CHECK_EQ_INT(kt_ffi_partition(n, ones, NULL, NULL, NULL, 0, 4, many, &bottleneck, &err), KT_OK);
  CHECK_NEAR(bottleneck, n / 4, 0);
  free(ones);
  free(many);
}

int main(void) {
  test_request_and_result();
  test_optimal_and_compare();
  test_errors_and_limits();
  test_arguments_checked();
  test_partition_bounds();
  test_plan();
  return kt_test_done(__FILE__);
}
