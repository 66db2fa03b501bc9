/* kt_web_run, the what-if panel's one call (the page runs it compiled to
 * WebAssembly; here it runs natively, under the sanitizers too): its
 * answers equal the library's own generate + simulate on the same inputs,
 * a straggler equals the same per-stage costs, the exports read back to
 * the same simulation, invalid orders and settings fail with the
 * validator's and the parser's one-line reasons, and the memory limit is
 * kaiten sim's. */
#include <cjson/cJSON.h>

#include "check.h"
#include "kaiten/generators.h"
#include "kaiten/sim.h"
#include "kaiten/web.h"

/* Runs a request; the answer parsed (caller deletes), NULL when it is not JSON. */
static cJSON *ask(const char *args, const char *order, kt_status *st) {
  kt_buf b;
  kt_buf_init(&b);
  *st = kt_web_run(args, order, &b);
  cJSON *j = b.data ? cJSON_Parse(b.data) : NULL;
  kt_buf_free(&b);
  return j;
}

static double num(const cJSON *j, const char *a, const char *b) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, a);
  if (b) x = cJSON_GetObjectItemCaseSensitive(x, b);
  return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

static const char *str(const cJSON *j, const char *a) {
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, a);
  return cJSON_IsString(x) ? x->valuestring : "";
}

/* The library's answer for a generated schedule under costs c (stage costs). */
static double library_makespan(kt_gen_kind k, int p, int m, const kt_costs *c, double limit) {
  kt_schedule s;
  kt_error err;
  kt_gen_params pp = {.p = p, .m = m, .costs = c, .mem_limit = limit};
  if (kt_generate(k, &pp, &s, &err)) return NAN;
  kt_metrics met;
  double x = kt_simulate_metrics(&s, c, &met, &err) ? NAN : met.makespan;
  if (!isnan(x)) kt_metrics_free(&met);
  kt_schedule_free(&s);
  return x;
}

static void generated(void) {
  kt_status st;
  cJSON *j =
      ask("schedule=zb-h1 p=4 m=8 tf=1 tb=1.5 tw=0.5 comm=0.25 op-overhead=0.125", NULL, &st);
  REQUIRE_VOID(j && st == KT_OK);
  CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "ok")));
  kt_costs c;
  kt_costs_default(&c);
  c.tb = 1.5, c.tw = 0.5, c.comm = 0.25, c.op_overhead = 0.125;
  CHECK_NEAR(num(j, "sim", "makespan"), library_makespan(KT_SCHED_ZB_H1, 4, 8, &c, 0), 0);
  const cJSON *sim = cJSON_GetObjectItemCaseSensitive(j, "sim");
  int events = cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(sim, "events"));
  CHECK_EQ_INT(events, 3 * 4 * 8);
  CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "slack")), events);
  CHECK(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "path")) > 0);
  CHECK_STR_CONTAINS(str(j, "command"),
                     "--schedule zb-h1 -p 4 -m 8 -v 1 --per-stage --tf 1 --tb 1.5");
  CHECK_STR_CONTAINS(str(j, "command"), "--comm 0.25 --op-overhead 0.125");
  /* the closed form needs T_comm = 0 and no overhead */
  CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(sim, "closed_form_bubble")));
  cJSON_Delete(j);
  j = ask("schedule=zb-h1 p=4 m=8", NULL, &st);
  REQUIRE_VOID(j);
  CHECK_NEAR(num(j, "sim", "closed_form_bubble"), num(j, "sim", "bubble_ratio"), 1e-12);
  cJSON_Delete(j);
  /* quick=1 (a moving slider) changes only the searching schedules' orders */
  j = ask("schedule=zbv p=4 m=8 tb=2 tw=0.5 quick=1", NULL, &st);
  REQUIRE_VOID(j);
  CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "quick")));
  cJSON_Delete(j);
  j = ask("schedule=1f1b p=4 m=8 tb=2 tw=0.5 quick=1", NULL, &st);
  REQUIRE_VOID(j);
  CHECK(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "quick")));
  cJSON_Delete(j);
  /* interleaved on the rank basis: the stage costs are 1/V of the given */
  j = ask("schedule=interleaved p=4 m=8 v=2 tf=2 tb=2 tw=2", NULL, &st);
  REQUIRE_VOID(j);
  kt_costs_default(&c);
  CHECK_NEAR(num(j, "sim", "makespan"), library_makespan(KT_SCHED_INTERLEAVED, 4, 8, &c, 0), 0);
  cJSON_Delete(j);
}

/* slow-rank=R:F is the same as per-stage costs with R's stages F times dearer */
static void straggler(void) {
  kt_status st;
  cJSON *j = ask("schedule=zbv p=4 m=8 slow-rank=2:1.5 per-stage=1", NULL, &st);
  REQUIRE_VOID(j && st == KT_OK);
  kt_costs c;
  kt_costs_default(&c);
  kt_error err;
  /* zbv (V placement): rank 2 holds stages 2 and 5 */
  REQUIRE_VOID(kt_costs_set(&c, "tf", "1,1,1.5,1,1,1.5,1,1", &err) == KT_OK);
  REQUIRE_VOID(kt_costs_set(&c, "tb", "1,1,1.5,1,1,1.5,1,1", &err) == KT_OK);
  REQUIRE_VOID(kt_costs_set(&c, "tw", "1,1,1.5,1,1,1.5,1,1", &err) == KT_OK);
  CHECK_NEAR(num(j, "sim", "makespan"), library_makespan(KT_SCHED_ZBV, 4, 8, &c, 0), 0);
  CHECK_STR_CONTAINS(str(j, "command"), "--tf 1,1,1.5,1,1,1.5,1,1");
  kt_costs_free(&c);
  cJSON_Delete(j);
}

/* exports=1: the text and both CSVs run back to the same simulation */
static void exports(void) {
  kt_status st;
  const char *args = "schedule=dualpipev p=4 m=10 tf=1 tb=1.25 tw=0.75 comm=0.1";
  cJSON *j = ask("schedule=dualpipev p=4 m=10 tf=1 tb=1.25 tw=0.75 comm=0.1 exports=1", NULL, &st);
  REQUIRE_VOID(j && st == KT_OK);
  double want = num(j, "sim", "makespan");
  static const char *const forms[] = {"text", "csv", "csv_comms"};
  for (int i = 0; i < 3; i++) {
    const char *order = str(j, forms[i]);
    CHECK(strlen(order) > 100);
    cJSON *back = ask(args, order, &st);
    CHECK_MSG(back && st == KT_OK, "%s does not run back", forms[i]);
    if (back) CHECK_NEAR(num(back, "sim", "makespan"), want, 0);
    cJSON_Delete(back);
  }
  CHECK_STR_CONTAINS(str(j, "csv_comms"), "SEND_F");
  cJSON_Delete(j);
}

static void invalid(void) {
  kt_status st;
  cJSON *j = ask("", "# kaiten p=2 v=1 m=2\n0B0 0F0 0F1 0B1\n1F0 1B0 1F1 1B1\n", &st);
  REQUIRE_VOID(j);
  CHECK_EQ_INT(st, KT_EINVALID_SCHEDULE);
  CHECK(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(j, "ok")));
  CHECK_STR_CONTAINS(str(j, "error"), "rank 0 runs 0B0 before 0F0");
  cJSON_Delete(j);
  /* rank 0 waits at 0B0 for rank 1's B0, rank 1 at 1F1 for rank 0's F1 */
  j = ask("", "# kaiten p=2 v=1 m=2\n0F0 0B0 0F1 0B1\n1F1 1B1 1F0 1B0\n", &st);
  REQUIRE_VOID(j);
  CHECK_EQ_INT(st, KT_EDEADLOCK);
  CHECK_STR_CONTAINS(
      str(j, "error"),
      "deadlock: rank 0 waits at 0B0 for 1B0/1I0 (rank 1); rank 1 waits at 1F1 for 0F1 (rank 0)");
  cJSON_Delete(j);
  static const char *const bad[][2] = {
      {"tf=abc", "tf: 'abc' is not a number"},
      {"frobnicate=1", "unknown setting 'frobnicate'"},
      {"p=0", "p '0': expected an integer"},
      {"mem-limit=-1", "mem-limit '-1'"},
      {"slow-rank=9:2", "slow-rank 9: the pipeline has ranks 0..3"},
      {"slow-rank=1:0", "slow-rank '1:0'"},
      {"schedule=nope", "schedule: unknown schedule 'nope'"},
      {"comm=1 comm-bandwidth=2", "comm 1 and comm-bandwidth 2 both set"},
      {"overlap=2", "overlap '2'"},
      {"tf=0 tb=0 tw=0", "tf, tb and tw are all 0"},
      {"p", "setting 'p': expected key=value"},
      {"p=4096 m=1000000", "actions would need about"}};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    j = ask(bad[i][0], NULL, &st);
    CHECK_MSG(j && st == KT_EINVAL, "%s: status %d", bad[i][0], (int)st);
    if (j) CHECK_STR_CONTAINS(str(j, "error"), bad[i][1]);
    cJSON_Delete(j);
  }
}

/* zb-auto under 0.5x: kaiten sim's limit, the schedule within it; an order
 * past the limit is named rank by rank */
static void memory_limit(void) {
  kt_status st;
  cJSON *j = ask("schedule=zb-auto p=4 m=8 mem-limit=0.5x exports=1", NULL, &st);
  REQUIRE_VOID(j && st == KT_OK);
  kt_costs c;
  kt_costs_default(&c);
  kt_gen_params pp = {.p = 4, .m = 8, .costs = &c};
  double limit = 0.5 * kt_gen_1f1b_peak(KT_SCHED_ZB_AUTO, &pp);
  CHECK_NEAR(num(j, "mem_limit", NULL), limit, 0);
  CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "over_limit")), 0);
  CHECK_NEAR(num(j, "sim", "makespan"), library_makespan(KT_SCHED_ZB_AUTO, 4, 8, &c, limit), 0);
  cJSON_Delete(j);
  /* 1F1B's order under half of its own peak */
  j = ask("schedule=1f1b p=4 m=8 exports=1", NULL, &st);
  REQUIRE_VOID(j);
  char args[64];
  snprintf(args, sizeof args, "mem-limit=%g", limit);
  cJSON *over = ask(args, str(j, "text"), &st);
  REQUIRE_VOID(over && st == KT_OK);
  const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(over, "over_limit");
  CHECK(cJSON_GetArraySize(ranks) >= 1);
  CHECK_NEAR(num(cJSON_GetArrayItem(ranks, 0), "rank", NULL), 0, 0);
  CHECK_NEAR(num(cJSON_GetArrayItem(ranks, 0), "peak", NULL), 4, 0);
  cJSON_Delete(over);
  cJSON_Delete(j);
}

int main(void) {
  generated();
  straggler();
  exports();
  invalid();
  memory_limit();
  return kt_test_done(__FILE__);
}
