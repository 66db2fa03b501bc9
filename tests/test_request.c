/* The request's vocabulary (kaiten/request.h): every setting read by its
 * name and its aliases, written back so that it reads the same, errors
 * naming the key as given; memory limits in their three forms; what a
 * built result holds. */
#include "check.h"
#include "kaiten/request.h"

static void test_set_and_print(void) {
  kt_request rq, back;
  kt_error err = {{0}};
  kt_request_init(&rq);
  const char *text =
      "schedule=zb-auto schedules=1f1b,zbv,optimal p=6 m=13 v=2 placement=v tf=1.5 "
      "tb=1,2,3,4,5,6,7,8,9,10,11,12 tw=0.25 tu=0.5 mem-act=2 mem-wgrad=0.5 mem-transient=0.125 "
      "comm=0.1 send-overhead=0.01 op-overhead=0.02 t-norm=0.3 t-dp=0.4 overlap=0.5 tie=0.05 "
      "step-sync=barrier per-stage=1 mem-limit=0.75x effort=thorough time-limit=2.5 "
      "slow-rank=3:1.5@10 slow-link=2-3:+0.5 torch-notation=legacy torch-version=2.9";
  CHECK_EQ_INT(kt_request_parse(&rq, text, &err), KT_OK);
  CHECK_EQ_INT(rq.p, 6);
  CHECK_EQ_INT(rq.m, 13);
  CHECK_EQ_INT(rq.v, 2);
  CHECK_EQ_INT(rq.placement, KT_PLACEMENT_V);
  CHECK_EQ_INT(rq.costs.n_stages, 12);
  CHECK(rq.costs.tied && rq.costs.t_tie == 0.05);
  CHECK_EQ_INT(rq.costs.step_sync, KT_STEP_BARRIER);
  CHECK_EQ_INT(rq.mem_limit.kind, KT_MEM_FRACTION);
  CHECK_NEAR(rq.mem_limit.value, 0.75, 0);
  CHECK_EQ_INT(rq.effort, KT_EFFORT_THOROUGH);
  CHECK(rq.faults.n_rank == 1 && rq.faults.rank[0].rank == 3 && rq.faults.rank[0].factor == 1.5 &&
        rq.faults.rank[0].onset == 9);
  CHECK(rq.faults.n_link == 1 && rq.faults.link[0].a == 2 && rq.faults.link[0].b == 3 &&
        rq.faults.link[0].delay == 0.5 && rq.faults.link[0].onset == 0);
  CHECK_EQ_INT(rq.notation, KT_NOTATION_LEGACY);
  CHECK_EQ_INT(rq.ir, KT_TORCH_IR_PRE_2_15);
  /* written back, it reads the same */
  kt_buf a, b;
  kt_buf_init(&a);
  kt_buf_init(&b);
  kt_request_print(&rq, &a);
  kt_request_init(&back);
  CHECK_EQ_INT(kt_request_parse(&back, a.data, &err), KT_OK);
  kt_request_print(&back, &b);
  CHECK_MSG(a.data && b.data && !strcmp(a.data, b.data), "%s\n%s", a.data, b.data);
  CHECK_STR_CONTAINS(a.data, "tb=1,2,3,4,5,6,7,8,9,10,11,12");
  CHECK_STR_CONTAINS(a.data, "mem-limit=0.75x");
  CHECK_STR_CONTAINS(a.data, "slow-rank=3:1.5@10 slow-link=2-3:+0.5");
  kt_buf_free(&a);
  kt_buf_free(&b);
  kt_request_free(&back);
  kt_request_free(&rq);
  /* per-link hops and delays read back the same */
  kt_request_init(&rq);
  CHECK_EQ_INT(kt_request_parse(&rq, "comm=0.5,1,0.25 link-delay=0,2,0", &err), KT_OK);
  CHECK(rq.costs.n_links == 3 && rq.costs.link_comm[1] == 1 && rq.costs.link_delay[1] == 2);
  kt_buf_init(&a);
  kt_request_print(&rq, &a);
  CHECK_STR_CONTAINS(a.data, "comm=0.5,1,0.25 link-delay=0,2,0");
  kt_buf_free(&a);
  kt_request_free(&rq);
  /* the defaults print as the schedule and its sizes alone */
  kt_request_init(&rq);
  kt_buf_init(&a);
  kt_request_print(&rq, &a);
  CHECK_STR_EQ(a.data, "schedule=1f1b p=4 m=8");
  kt_buf_free(&a);
  /* aliases, dashes and underscores */
  CHECK_EQ_INT(kt_request_set(&rq, "stages", "5", &err), KT_OK);
  CHECK_EQ_INT(kt_request_set(&rq, "--microbatches", "9", &err), KT_OK);
  CHECK_EQ_INT(kt_request_set(&rq, "mem_limit", "12", &err), KT_OK);
  CHECK_EQ_INT(kt_request_set(&rq, "-v", "3", &err), KT_OK);
  CHECK(rq.p == 5 && rq.m == 9 && rq.v == 3 && rq.mem_limit.kind == KT_MEM_UNITS);
  CHECK_EQ_INT(rq.given, KT_REQ_GIVEN_P | KT_REQ_GIVEN_M | KT_REQ_GIVEN_V);
  CHECK_EQ_INT(kt_request_set(&rq, "thorough", "1", &err), KT_OK);
  CHECK_EQ_INT(rq.effort, KT_EFFORT_THOROUGH);
  CHECK_EQ_INT(kt_request_set(&rq, "thorough", "0", &err), KT_OK);
  CHECK_EQ_INT(rq.effort, KT_EFFORT_DEFAULT);
  CHECK_EQ_INT(kt_request_set(&rq, "quick", "1", &err), KT_OK);
  CHECK_EQ_INT(rq.effort, KT_EFFORT_QUICK);
  kt_request_free(&rq);
}

static void test_errors(void) {
  kt_request rq;
  kt_error err = {{0}};
  kt_request_init(&rq);
  struct {
    const char *key, *value, *says;
  } bad[] = {
      {"stages", "0", "stages '0': expected an integer in 1..4096"},
      {"-p", "4.5", "-p '4.5': expected an integer in 1..4096"},
      {"schedule", "nope", "schedule: unknown schedule 'nope' (known: gpipe"},
      {"schedules", "1f1b,interleaved-1f1b,interleaved", "schedules lists 'interleaved' twice"},
      {"schedules", "1f1b,,zbv", "an empty name"},
      {"tf", "-1", "tf"},
      {"--tf", "abc", "--tf"},
      {"overlap", "2", "overlap '2': expected a fraction in 0..1"},
      /* issue 49: one range for every cost and memory value, every limit */
      {"mem_act", "1e308", "mem_act '1e308': expected 0 or a number in 1e-15..1e+15"},
      {"--comm", "9e307", "--comm '9e307': expected 0 or a number in 1e-15..1e+15"},
      {"tie", "5e-324", "tie '5e-324'"},
      {"tw", "1,1e16", "tw '1e16'"},
      {"mem-limit", "1e-300", "mem-limit '1e-300': expected a number above 0"},
      {"mem-limit", "2e15x", "mem-limit '2e15x'"},
      {"mem_limit", "0.1", NULL},
      {"mem_limit", "-1x", "mem_limit '-1x': expected a number above 0"},
      {"mem-limit", "0x", "expected a number above 0"},
      {"mem-limit", "lots", "mem-limit 'lots'"},
      {"step-sync", "sometimes", "step-sync 'sometimes': expected overlap or barrier"},
      {"effort", "max", "effort 'max': expected quick, default or thorough"},
      {"per-stage", "yes", "per-stage 'yes': expected 0 or 1"},
      {"time-limit", "0", "time-limit '0': expected seconds in 0.001..1e+06"},
      {"slow-rank", "2", "slow-rank '2': expected R:F or R:F@S"},
      {"slow-rank", "2:0", "slow-rank '2:0'"},
      {"slow_rank", "2:1.5@0", "slow_rank '2:1.5@0'"},
      {"--slow-link", "1:+5", "--slow-link '1:+5': '1' is not two pipeline ranks"},
      {"slow-link", "0-1:+x", "slow-link '0-1:+x': delay 'x' is not a time >= 0"},
      {"comm", "1,x", "comm"},
      {"placement", "w", "placement 'w': expected loop or v"},
      {"torch-notation", "old", "torch-notation 'old'"},
      {"no-such", "1", "unknown setting 'no-such' (known: schedule, schedules, p,"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    kt_status st = kt_request_set(&rq, bad[i].key, bad[i].value, &err);
    if (!bad[i].says) {
      CHECK_EQ_INT(st, KT_OK);
      continue;
    }
    CHECK_MSG(st == KT_EINVAL, "%s=%s: status %d", bad[i].key, bad[i].value, st);
    CHECK_STR_CONTAINS(err.msg, bad[i].says);
  }
  /* a long value is echoed as a prefix, on one line */
  char big[400];
  memset(big, '7', sizeof big - 1);
  big[sizeof big - 1] = 0;
  CHECK_EQ_INT(kt_request_set(&rq, "p", big, &err), KT_EINVAL);
  CHECK(strlen(err.msg) < 200 && strstr(err.msg, "...'"));
  CHECK_EQ_INT(kt_request_parse(&rq, "p=4 nonsense", &err), KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "setting 'nonsense': expected key=value");
  /* the rules between settings */
  kt_request_free(&rq);
  kt_request_init(&rq);
  CHECK_EQ_INT(kt_request_parse(&rq, "comm=1 comm-bandwidth=5", &err), KT_OK);
  CHECK_EQ_INT(kt_request_check(&rq, &err), KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "both set the time of a hop");
  kt_request_free(&rq);
  kt_request_init(&rq);
  CHECK_EQ_INT(kt_request_parse(&rq, "tf=0 tb=0 tw=0", &err), KT_OK);
  kt_result res;
  CHECK_EQ_INT(kt_request_build(&rq, &res, &err), KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "all 0");
  kt_request_free(&rq);
}

static void test_mem_limits(void) {
  kt_mem_limit ml;
  kt_error err = {{0}};
  CHECK_EQ_INT(kt_mem_limit_parse("--mem-limit", "2GiB", 1, &ml, &err), KT_OK);
  CHECK(ml.kind == KT_MEM_BYTES && ml.value == 2147483648.0);
  CHECK_EQ_INT(kt_mem_limit_parse("--mem-limit", "512MiB", 0, &ml, &err), KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "bytes need a model");
  CHECK_EQ_INT(kt_mem_limit_parse("mem_limit", "0.5X", 0, &ml, &err), KT_OK);
  CHECK(ml.kind == KT_MEM_FRACTION && ml.value == 0.5);
  char text[40];
  kt_mem_limit set_in_code = {KT_MEM_FRACTION, 0.25, ""};
  kt_mem_limit_format(&set_in_code, text, sizeof text);
  CHECK_STR_EQ(text, "0.25x");
  /* a fraction is of 1F1B's peak on the same model: P=4 unit costs, 4 M_B */
  kt_costs c;
  kt_costs_default(&c);
  CHECK_NEAR(kt_mem_limit_units(&ml, KT_SCHED_ZB_AUTO, 4, 8, 1, &c), 2, 1e-12);
  CHECK_NEAR(kt_mem_limit_fraction(2, KT_SCHED_ZB_AUTO, 4, 8, 1, &c), 0.5, 1e-12);
  kt_mem_limit none = {KT_MEM_UNITS, 0, ""};
  CHECK_NEAR(kt_mem_limit_units(&none, KT_SCHED_ZB_AUTO, 4, 8, 1, &c), -1, 0);
}

/* A built result: the limit zb-auto kept, the stages its search ran, what
 * a held order inferred; a limit nothing meets named as written. */
static void test_results(void) {
  kt_request rq;
  kt_result res;
  kt_error err = {{0}};
  kt_request_init(&rq);
  CHECK_EQ_INT(kt_request_parse(&rq, "schedule=zb-auto p=4 m=8 mem-limit=0.75x tw=0.5", &err),
               KT_OK);
  CHECK_EQ_INT(kt_request_run(&rq, &res, KT_RESULT_METRICS, &err), KT_OK);
  CHECK_NEAR(res.mem_limit, 3, 1e-12);
  CHECK(res.info.stages && strstr(res.info.stages, "bound"));
  CHECK(res.info.has_lower_bound && res.info.lower_bound <= res.met.period + 1e-9);
  CHECK(!res.has_timeline && res.simulated);
  for (int r = 0; r < res.met.p; r++) CHECK(kt_within_limit(res.met.ranks[r].peak_memory, 3));
  kt_result_free(&res);
  CHECK_EQ_INT(kt_request_set(&rq, "mem-limit", "0.2x", &err), KT_OK);
  CHECK_EQ_INT(kt_request_build(&rq, &res, &err), KT_EMEMLIMIT);
  CHECK_STR_CONTAINS(err.msg, "mem-limit 0.2x: zb-auto: memory limit");
  CHECK_STR_CONTAINS(err.msg, "the smallest fraction that works is 0.25x");
  /* the fraction it names works */
  CHECK_EQ_INT(kt_request_set(&rq, "mem-limit", "0.25x", &err), KT_OK);
  CHECK_EQ_INT(kt_request_build(&rq, &res, &err), KT_OK);
  kt_result_free(&res);
  /* placement: zb-auto in v placement is zbv-auto; 1f1b has one */
  CHECK_EQ_INT(kt_request_parse(&rq, "mem-limit=1x placement=v", &err), KT_OK);
  CHECK_EQ_INT(kt_request_build(&rq, &res, &err), KT_OK);
  CHECK_STR_EQ(res.order.name, "zbv-auto");
  kt_result_free(&res);
  CHECK_EQ_INT(kt_request_parse(&rq, "schedule=1f1b", &err), KT_OK);
  CHECK_EQ_INT(kt_request_build(&rq, &res, &err), KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "1f1b places its stages in loop placement, not v");
  kt_request_free(&rq);
  /* a held order: sizes agree or are refused, named by the key given */
  kt_request_init(&rq);
  CHECK_EQ_INT(
      kt_request_set_order(&rq, "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n", "two", "two.csv", &err),
      KT_OK);
  CHECK_EQ_INT(kt_request_run(&rq, &res, KT_RESULT_TIMELINE, &err), KT_OK);
  CHECK_STR_EQ(res.order.name, "two");
  CHECK_STR_CONTAINS(res.read_info, "two.csv: 2 ranks, 2 stages (V=1), 2 micro-batches");
  CHECK_EQ_INT(res.kind, -1);
  kt_result_free(&res);
  CHECK_EQ_INT(kt_request_set(&rq, "--stages", "3", &err), KT_OK);
  CHECK_EQ_INT(kt_request_build(&rq, &res, &err), KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "--stages disagrees with two.csv: it has P=2 M=2 V=1 (you gave 3)");
  kt_request_free(&rq);
}

static void test_compare(void) {
  kt_request rq;
  kt_comparison cmp;
  kt_error err = {{0}};
  kt_request_init(&rq);
  CHECK_EQ_INT(kt_request_parse(&rq, "p=4 m=8 schedules=1f1b,zbv,zb-h1,interleaved-1f1b", &err),
               KT_OK);
  CHECK_EQ_INT(kt_request_compare(&rq, KT_RESULT_METRICS, &cmp, &err), KT_OK);
  CHECK_EQ_INT(cmp.n, 4);
  CHECK_STR_EQ(cmp.rows[3].name, "interleaved"); /* an alias shows as its generator */
  CHECK(cmp.rows[0].applies && cmp.rows[2].applies);
  CHECK_NEAR(cmp.peak_1f1b, 4, 1e-12);
  CHECK_NEAR(cmp.rows[0].result.met.period, 33, 1e-9); /* (M + P - 1) (tf + tb + tw) */
  kt_comparison_free(&cmp);
  CHECK_EQ_INT(kt_request_set(&rq, "v", "1", &err), KT_OK);
  CHECK_EQ_INT(kt_request_compare(&rq, KT_RESULT_METRICS, &cmp, &err), KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "v 1: a comparison's V is the chunks of interleaved");
  kt_request_free(&rq);
}

int main(void) {
  test_set_and_print();
  test_errors();
  test_mem_limits();
  test_results();
  test_compare();
  return kt_test_done(__FILE__);
}
