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

/* The library's own sim JSON of s with costs c, described as the CLI
 * describes a generated schedule of kind (kt_sim_info_describe). */
static char *direct_json(const kt_schedule *s, const kt_costs *c, const char *basis, int kind) {
  kt_timeline tl;
  kt_metrics met;
  kt_error err;
  if (kt_simulate_both(s, c, &tl, &met, &err)) return NULL;
  kt_sim_info info = {.schedule = s->name, .p = s->p, .v = s->v, .m = s->m, .placement = "loop",
                      .stage_ranks = s->stage_rank, .costs = c, .cost_basis = basis,
                      .messages = kt_schedule_messages(s)};
  kt_sim_origin o = {.kind = kind, .mem_limit = -1};
  kt_sim_info_describe(&info, &o, s, c, &met);
  kt_buf b;
  kt_buf_init(&b);
  kt_render_sim_json(&info, &met, &tl, &b);
  kt_timeline_free(&tl);
  kt_metrics_free(&met);
  return b.data;
}

static void test_schedule_and_sim(void) {
  kt_error err = {{0}};
  kt_costs *given = kt_ffi_costs_new(), *stage = kt_ffi_costs_new();
  REQUIRE_VOID(given && stage);
  CHECK_EQ_INT(kt_costs_parse_json(given, "{\"tf\": 2, \"tb\": 2, \"tw\": 1}", "costs", &err), KT_OK);
  CHECK_EQ_INT(kt_costs_for_chunks(given, 2, stage, &err), KT_OK);
  char *cj = NULL;
  CHECK_EQ_INT(kt_ffi_costs_json(stage, &cj, &err), KT_OK);
  CHECK_STR_CONTAINS(cj, "\"tf\":1,\"tb\":1,\"tw\":0.5");
  kt_ffi_free(cj);
  kt_schedule *s = kt_ffi_schedule_new();
  int kind = kt_gen_kind_from_name("interleaved");
  CHECK_EQ_INT(kt_ffi_generate(kind, 4, 2, 8, stage, 0, 0, s, &err), KT_OK);
  int shape[5];
  kt_ffi_schedule_shape(s, shape);
  CHECK(shape[0] == 4 && shape[1] == 2 && shape[2] == 8 && shape[3] == 8);
  CHECK(shape[4] == KT_PLACEMENT_LOOP);
  CHECK(!strcmp(kt_ffi_schedule_name(s), "interleaved"));
  kt_ffi_sim *sim = NULL;
  CHECK_EQ_INT(kt_ffi_simulate(s, stage, &sim, &err), KT_OK);
  kt_ffi_info *info = kt_ffi_info_new(s, stage, "rank", kind, -1, NULL, sim);
  REQUIRE_VOID(sim && info);
  char *json = NULL, *want = direct_json(s, stage, "rank", kind);
  CHECK_EQ_INT(kt_ffi_sim_json(info, sim, 1, &json, &err), KT_OK);
  CHECK_MSG(json && want && !strcmp(json, want), "ffi json differs:\n%s\n%s", json, want);
  kt_ffi_free(json);
  free(want);
  char *chart = NULL;
  CHECK_EQ_INT(kt_ffi_sim_gantt(info, sim, 80, &chart, &err), KT_OK);
  CHECK_STR_CONTAINS(chart, "rank 3 |");
  CHECK_STR_CONTAINS(chart, "closed form (P-1)/(V*M+P-1) = 0.1579");
  CHECK_STR_CONTAINS(chart, "cost basis: rank");
  kt_ffi_free(chart);
  char *csv = NULL, *text = NULL;
  CHECK_EQ_INT(kt_ffi_schedule_write(s, KT_NOTATION_CURRENT, &csv, &err), KT_OK);
  CHECK_EQ_INT(kt_ffi_schedule_write(s, -1, &text, &err), KT_OK);
  CHECK_STR_CONTAINS(text, "# kaiten p=4 v=2 m=8");
  /* the CSV read back is the same schedule, written the same */
  kt_schedule *back = kt_ffi_schedule_new(), *lowered = kt_ffi_schedule_new();
  long info3[3] = {-1, -1, -1};
  CHECK_EQ_INT(kt_ffi_parse(csv, KT_NOTATION_AUTO, back, lowered, info3, &err), KT_OK);
  CHECK(info3[1] == 0 && info3[2] == 0);
  char *again = NULL;
  CHECK_EQ_INT(kt_ffi_schedule_write(back, KT_NOTATION_CURRENT, &again, &err), KT_OK);
  CHECK(again && !strcmp(again, csv));
  kt_ffi_free(again);
  kt_ffi_free(csv);
  kt_ffi_free(text);
  kt_ffi_schedule_free(back);
  kt_ffi_schedule_free(lowered);
  /* a report of one schedule that ran and one that does not apply */
  char path[] = "/tmp/kt_test_ffi_XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  if (fd >= 0) close(fd);
  const kt_ffi_info *infos[2] = {info, NULL};
  const kt_ffi_sim *sims[2] = {sim, NULL};
  const char *names[2] = {"interleaved", "zbv"}, *reasons[2] = {NULL, "zbv needs more micro-batches"};
  CHECK_EQ_INT(kt_ffi_report(path, "t", 2, infos, sims, names, reasons, 4, 8, "rank", given, &err),
               KT_OK);
  char *html = NULL;
  size_t len = 0;
  CHECK_EQ_INT(kt_read_file(path, &html, &len, &err), KT_OK);
  CHECK_STR_CONTAINS(html, "zbv needs more micro-batches");
  free(html);
  unlink(path);
  CHECK_EQ_INT(kt_ffi_report(path, "t", 0, infos, sims, names, reasons, 4, 8, "rank", NULL, &err),
               KT_EINVAL);
  kt_ffi_info_free(info);
  kt_ffi_sim_free(sim);
  kt_ffi_schedule_free(s);
  kt_ffi_costs_free(given);
  kt_ffi_costs_free(stage);
}

/* The exact search's schedule: proven on a small problem, its bound its
 * makespan; a comparison of it and zb-auto (whose bound is no higher), and
 * a row that does not apply. */
static void test_optimal_and_compare(void) {
  kt_error err = {{0}};
  kt_costs *c = kt_ffi_costs_new();
  REQUIRE_VOID(c);
  CHECK_EQ_INT(kt_costs_parse_json(c, "{\"tw\": 0.5}", "costs", &err), KT_OK);
  kt_schedule *opt = kt_ffi_schedule_new(), *zb = kt_ffi_schedule_new();
  kt_ffi_search *search = NULL;
  double limit = kt_ffi_mem_limit(3, 1, 5, c, 0);
  CHECK_EQ_INT(kt_ffi_optimal(3, 1, 5, c, 0, 20, opt, &search, &err), KT_OK);
  CHECK_EQ_INT(kt_ffi_generate(KT_SCHED_ZB_AUTO, 3, 1, 5, c, 0, 0, zb, &err), KT_OK);
  kt_ffi_sim *so = NULL, *sz = NULL;
  CHECK_EQ_INT(kt_ffi_simulate(opt, c, &so, &err), KT_OK);
  CHECK_EQ_INT(kt_ffi_simulate(zb, c, &sz, &err), KT_OK);
  REQUIRE_VOID(search && so && sz);
  kt_ffi_info *io = kt_ffi_info_new(opt, c, "rank", KT_SIM_OPTIMAL, limit, search, so);
  kt_ffi_info *iz = kt_ffi_info_new(zb, c, "rank", KT_SCHED_ZB_AUTO, limit, NULL, sz);
  kt_ffi_search_free(search); /* the info keeps its own copy */
  REQUIRE_VOID(io && iz);
  char *json = NULL;
  CHECK_EQ_INT(kt_ffi_sim_json(io, so, 0, &json, &err), KT_OK);
  CHECK_STR_CONTAINS(json, "\"lower_bound_from\":\"search\",\"lower_bound_exact\":true,\"gap\":0,");
  CHECK_STR_CONTAINS(json, "\"proven\":true,\"search\":{\"seconds\":");
  CHECK_STR_CONTAINS(json, "\"closed_form_why\":\"the exact search's order has no formula\"");
  kt_ffi_free(json);
  const kt_ffi_info *infos[3] = {iz, io, NULL};
  const kt_ffi_sim *sims[3] = {sz, so, NULL};
  const char *names[3] = {"zb-auto", "optimal", "zbv"}, *reasons[3] = {NULL, NULL, "too few"};
  CHECK_EQ_INT(kt_ffi_compare(3, infos, sims, names, reasons, 3, 3, 5, 2, "rank", c, 0, &json,
                              &err), KT_OK);
  CHECK_STR_CONTAINS(json, "{\"schedule\":\"zbv\",\"applies\":false,\"reason\":\"too few\"}");
  CHECK_STR_CONTAINS(json, "\"mem_limit\":3,");
  CHECK_STR_CONTAINS(json, "\"proven\":true");
  kt_ffi_free(json);
  CHECK_EQ_INT(kt_ffi_compare(3, infos, sims, names, reasons, 3, 3, 5, 2, "rank", c, 1, &json,
                              &err), KT_OK);
  CHECK_STR_CONTAINS(json, "optimal");
  kt_ffi_free(json);
  /* above the search's reach: EINVAL, no handle */
  search = (kt_ffi_search *)1;
  CHECK_EQ_INT(kt_ffi_optimal(3, 1, 500, c, 0, 1, opt, &search, &err), KT_EINVAL);
  CHECK(search == NULL);
  kt_ffi_info_free(io);
  kt_ffi_info_free(iz);
  kt_ffi_sim_free(so);
  kt_ffi_sim_free(sz);
  kt_ffi_schedule_free(opt);
  kt_ffi_schedule_free(zb);
  kt_ffi_costs_free(c);
  kt_ffi_search_free(NULL);
}

static void test_errors_and_limits(void) {
  kt_error err = {{0}};
  kt_schedule *s = kt_ffi_schedule_new();
  CHECK_EQ_INT(kt_ffi_generate(-1, 4, 0, 8, NULL, 0, 0, s, &err), KT_EINVAL);
  CHECK_EQ_INT(kt_ffi_generate(KT_SCHED_COUNT, 4, 0, 8, NULL, 0, 0, s, &err), KT_EINVAL);
  CHECK_EQ_INT(kt_ffi_generate(KT_SCHED_ZBV, 4, 0, 4, NULL, 0, 0, s, &err), KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "2P");
  CHECK_EQ_INT(kt_ffi_parse("0F0,0B0\n1F0\n", KT_NOTATION_AUTO, s, NULL, NULL, &err), KT_OK);
  CHECK(kt_schedule_validate(s, &err) != KT_OK);
  kt_ffi_schedule_free(s);
  s = kt_ffi_schedule_new();
  CHECK(kt_ffi_parse("0X0\n", KT_NOTATION_AUTO, s, NULL, NULL, &err) != KT_OK);
  CHECK_EQ_INT(kt_ffi_parse("0F0\n", 7, s, NULL, NULL, &err), KT_EINVAL);
  kt_ffi_schedule_free(s);
  kt_ffi_schedule_free(NULL);
  kt_ffi_costs_free(NULL);
  kt_ffi_sim_free(NULL);
  kt_ffi_info_free(NULL);
  kt_ffi_plan_free(NULL);
  /* 1F1B's peak and zb-auto's default limit: P * M_B with unit costs */
  CHECK_NEAR(kt_ffi_1f1b_peak(KT_SCHED_ZB_AUTO, 4, 1, 8, NULL), 4, 1e-12);
  CHECK_NEAR(kt_ffi_mem_limit(4, 1, 8, NULL, 0), 4, 1e-12);
  CHECK_NEAR(kt_ffi_mem_limit(4, 1, 8, NULL, 3), 3, 1e-12);
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

/* Issue 49: every entry point checks what it is handed, with the CLI's
 * ranges and its size guard, before it builds anything. */
static void test_arguments_checked(void) {
  kt_error err = {{0}};
  kt_costs *c = kt_ffi_costs_new();
  kt_schedule *s = kt_ffi_schedule_new();
  REQUIRE_VOID(c && s);
  /* sizes out of the CLI's ranges, and one too large for this machine */
  CHECK_EQ_INT(kt_ffi_generate(KT_SCHED_1F1B, 0, 0, 4, c, 0, 0, s, &err), KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "P=0");
  CHECK_EQ_INT(kt_ffi_generate(KT_SCHED_1F1B, 4097, 0, 4, c, 0, 0, s, &err), KT_EINVAL);
  CHECK_EQ_INT(kt_ffi_generate(KT_SCHED_1F1B, 4, -1, 4, c, 0, 0, s, &err), KT_EINVAL);
  CHECK_EQ_INT(kt_ffi_generate(KT_SCHED_1F1B, 4, 0, 1000001, c, 0, 0, s, &err), KT_EINVAL);
  CHECK_EQ_INT(kt_ffi_generate(KT_SCHED_ZBV, 4096, 0, 1000000, c, 0, 0, s, &err), KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "would need about");
  /* the memory limit's rule, and a limit that is not a number */
  CHECK_EQ_INT(kt_ffi_generate(KT_SCHED_1F1B, 2, 0, 4, c, 3, 0, s, &err), KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "1f1b cannot keep to a memory limit");
  CHECK_EQ_INT(kt_ffi_generate(KT_SCHED_ZB_AUTO, 2, 0, 4, c, NAN, 0, s, &err), KT_EINVAL);
  CHECK(kt_ffi_1f1b_peak(KT_SCHED_1F1B, 0, 0, 4, c) < 0);
  CHECK(kt_ffi_mem_limit(4, 0, 4, c, INFINITY) < 0);
  /* costs set behind the readers' backs: the generator and simulator check them */
  c->mem_act = 1e308;
  CHECK_EQ_INT(kt_ffi_generate(KT_SCHED_ZB_AUTO, 2, 0, 2, c, 0, 0, s, &err), KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "mem-act 1e+308");
  c->mem_act = 1;
  CHECK_EQ_INT(kt_ffi_generate(KT_SCHED_1F1B, 2, 0, 2, c, 0, 0, s, &err), KT_OK);
  kt_ffi_sim *sim = NULL;
  c->tf = 1e308;
  CHECK_EQ_INT(kt_ffi_simulate(s, c, &sim, &err), KT_EINVAL);
  CHECK(sim == NULL);
  c->tf = 1;
  /* NULL handles and texts */
  CHECK_EQ_INT(kt_ffi_simulate(NULL, c, &sim, &err), KT_EINVAL);
  CHECK_EQ_INT(kt_ffi_parse(NULL, 0, s, NULL, NULL, &err), KT_EINVAL);
  char *out = NULL;
  CHECK_EQ_INT(kt_ffi_costs_json(NULL, &out, &err), KT_EINVAL);
  kt_schedule *empty = kt_ffi_schedule_new();
  CHECK_EQ_INT(kt_ffi_schedule_write(empty, -1, &out, &err), KT_EINVAL);
  CHECK(kt_ffi_info_new(empty, c, "rank", -1, -1, NULL, NULL) == NULL);
  /* a chart width beyond --width's range: refused, not drawn for minutes */
  REQUIRE_VOID(kt_ffi_simulate(s, c, &sim, &err) == KT_OK);
  kt_ffi_info *info = kt_ffi_info_new(s, c, "rank", KT_SCHED_1F1B, -1, NULL, sim);
  REQUIRE_VOID(info);
  CHECK_EQ_INT(kt_ffi_sim_gantt(info, sim, 1000000000, &out, &err), KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "width 1000000000");
  CHECK_EQ_INT(kt_ffi_sim_gantt(info, sim, -5, &out, &err), KT_EINVAL);
  CHECK_EQ_INT(kt_ffi_sim_gantt(info, sim, 0, &out, &err), KT_OK);
  kt_ffi_free(out);
  /* rows: counts and names */
  const kt_ffi_info *infos[1] = {info};
  const kt_ffi_sim *sims[1] = {sim};
  const char *names[1] = {NULL};
  CHECK_EQ_INT(kt_ffi_compare(1, infos, sims, names, NULL, -1, 2, 2, 2, "rank", c, 0, &out, &err),
               KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "names[0]");
  CHECK_EQ_INT(kt_ffi_compare(-1, infos, sims, names, NULL, -1, 2, 2, 2, "rank", c, 0, &out, &err),
               KT_EINVAL);
  CHECK_EQ_INT(kt_ffi_report("x.html", "t", 100000, infos, sims, names, NULL, 2, 2, "rank", c, &err),
               KT_EINVAL);
  /* optimal's time limit in --time-limit's range */
  kt_ffi_search *search = NULL;
  CHECK_EQ_INT(kt_ffi_optimal(2, 1, 2, c, 0, NAN, s, &search, &err), KT_EINVAL);
  CHECK_EQ_INT(kt_ffi_optimal(2, 1, 2, c, 0, 1e9, s, &search, &err), KT_EINVAL);
  CHECK_EQ_INT(kt_ffi_optimal(2, 3, 2, c, 0, 1, s, &search, &err), KT_EINVAL);
  CHECK(search == NULL);
  kt_ffi_info_free(info);
  kt_ffi_sim_free(sim);
  kt_ffi_schedule_free(empty);
  kt_ffi_schedule_free(s);
  kt_ffi_costs_free(c);
}

/* The partitioner: sums that overflow, and work beyond its bound, refused at once. */
static void test_partition_bounds(void) {
  kt_error err = {{0}};
  double big[4] = {1e308, 1e308, 1e308, 1e308};
  int counts[2];
  double bottleneck = 0;
  CHECK_EQ_INT(kt_ffi_partition(4, big, NULL, NULL, NULL, 0, 2, counts, &bottleneck, &err), KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "overflows");
  int n = 2000000;
  double *ones = malloc(sizeof *ones * (size_t)n);
  int *many = malloc(sizeof *many * 1000);
  REQUIRE_VOID(ones && many);
  for (int i = 0; i < n; i++) ones[i] = 1;
  double t0 = kt_now();
  CHECK_EQ_INT(kt_ffi_partition(n, ones, NULL, NULL, NULL, 0, 1000, many, &bottleneck, &err), KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "cells of work");
  CHECK(kt_now() - t0 < 1);
  CHECK_EQ_INT(kt_ffi_partition(n, ones, NULL, NULL, NULL, 0, 4, many, &bottleneck, &err), KT_OK);
  CHECK_NEAR(bottleneck, n / 4, 0);
  free(ones);
  free(many);
}

int main(void) {
  test_schedule_and_sim();
  test_optimal_and_compare();
  test_errors_and_limits();
  test_arguments_checked();
  test_partition_bounds();
  test_plan();
  return kt_test_done(__FILE__);
}
