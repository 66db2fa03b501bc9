/* Costs per (stage, micro-batch): lists of equal values behave exactly as
 * the per-stage lists and scalars they repeat (the whole `sim --format json`
 * answer, byte for byte, on every generator at several sizes); lists that
 * differ make each micro-batch take its own time and memory in the
 * simulator, keep the lower bound below every order zb-auto finds, run
 * optimal's search over micro-batch sequences, and are refused where they
 * cannot apply (M, bad values). */
#include "check.h"
#include "kaiten/generators.h"
#include "kaiten/report.h"
#include "kaiten/request.h"

/* One value (form 0), S values "a,b" (1) or S groups of m copies "a,a;b,b"
 * (2); varied: stage s's value is base * (1 + s % 3 / 4), else base. */
static void cost_text(char *buf, size_t n, double base, int S, int m, int form, int varied) {
  size_t len = 0;
  if (form == 0) {
    snprintf(buf, n, "%.17g", base);
    return;
  }
  for (int s = 0; s < S; s++)
    for (int j = 0; j < (form == 2 ? m : 1); j++)
      len += (size_t)snprintf(buf + len, n - len, "%s%.17g",
                              !s && !j    ? ""
                              : j         ? ","
                              : form == 2 ? ";"
                                          : ",",
                              base * (varied ? 1 + (s % 3) / 4.0 : 1));
}

/* Runs kind at P, M (its own V) with costs in form 0 (scalar), 1 (per
 * stage) or 2 (per micro-batch, equal per stage); varied: stage values
 * differ (forms 1 and 2 only). The sim JSON in *out; its costs and closed
 * forms taken from like when given (scalars vs lists describe the same
 * numbers differently). */
static int run(const char *kind, int p, int m, int form, int S, int varied, const kt_result *like,
               kt_result *res, kt_buf *out) {
  kt_request rq;
  kt_error err = {{0}};
  kt_request_init(&rq);
  char text[1 << 16];
  /* a memory limit where the kind keeps to one (the others refuse it) */
  int k = kt_gen_kind_from_name(kind);
  int limited = k >= 0 && !kt_gen_check_mem_limit((kt_gen_kind)k, 1, NULL);
  snprintf(text, sizeof text, "schedule=%s p=%d m=%d per-stage=1 comm=0.125%s", kind, p, m,
           limited ? " mem-limit=0.8x" : "");
  kt_status st = kt_request_parse(&rq, text, &err);
  const char *fields[] = {"tf", "tb", "tw", "mem-act", "mem-wgrad"};
  double base[] = {1.5, 1.25, 0.75, 2, 0.5};
  for (int f = 0; f < 5 && !st; f++) {
    char val[1 << 15];
    cost_text(val, sizeof val, base[f], S, m, form, varied);
    st = kt_request_set(&rq, fields[f], val, &err);
  }
  if (!st) st = kt_request_run(&rq, res, KT_RESULT_TIMELINE, &err);
  kt_request_free(&rq);
  if (st) return -1;
  kt_sim_info info = res->info;
  info.search_seconds = 0; /* optimal: the search's wall clock, the one thing that varies */
  if (like) {
    info.costs = like->info.costs, info.closed_form = like->info.closed_form;
    info.closed_form_expr = like->info.closed_form_expr,
    info.closed_form_why = like->info.closed_form_why;
    info.closed_form_peak_memory = like->info.closed_form_peak_memory;
    info.closed_form_peak_memory_expr = like->info.closed_form_peak_memory_expr;
  }
  kt_render_sim_json(&info, &res->met, &res->tl, out);
  return 0;
}

static int compared;

/* form a against form b on kind at P, M: the same bytes. */
static void same(const char *kind, int p, int m, int fa, int fb, int varied) {
  kt_result probe, a, b;
  kt_buf ja, jb, jp;
  kt_buf_init(&ja), kt_buf_init(&jb), kt_buf_init(&jp);
  if (run(kind, p, m, 0, 1, 0, NULL, &probe, &jp)) return; /* a size the kind refuses */
  int S = kt_schedule_stages(&probe.order);
  kt_result_free(&probe);
  int ra = run(kind, p, m, fa, S, varied, NULL, &a, &ja);
  /* the costs as written differ (scalars, per stage, per micro-batch): all else alike */
  int rb = ra ? -1 : run(kind, p, m, fb, S, varied, &a, &b, &jb);
  CHECK_MSG(!ra && !rb, "%s P=%d M=%d forms %d/%d ran", kind, p, m, fa, fb);
  if (!ra && !rb) {
    compared++;
    CHECK_MSG(ja.len == jb.len && !memcmp(ja.data, jb.data, ja.len),
              "%s P=%d M=%d: form %d and form %d differ:\n%.400s\n%.400s", kind, p, m, fa, fb,
              ja.data, jb.data);
    kt_result_free(&b);
  }
  if (!ra) kt_result_free(&a);
  kt_buf_free(&ja), kt_buf_free(&jb), kt_buf_free(&jp);
}

static void test_uniform_exact(void) {
  const char *list = kt_gen_kind_list();
  char kinds[512];
  snprintf(kinds, sizeof kinds, "%s", list);
  const int sizes[][2] = {{2, 4}, {4, 8}, {3, 7}, {4, 4}};
  for (char *k = strtok(kinds, ", "); k; k = strtok(NULL, ", "))
    for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++) {
      same(k, sizes[z][0], sizes[z][1], 0, 2, 0); /* scalars vs equal per-mb lists */
      same(k, sizes[z][0], sizes[z][1], 1, 2, 1); /* per-stage vs per-mb lists of them */
    }
  /* the exact search too, on sizes it proves in well under its time limit */
  const int small[][2] = {{2, 4}, {3, 4}, {4, 4}, {2, 6}};
  for (size_t z = 0; z < sizeof small / sizeof *small; z++) {
    same("optimal", small[z][0], small[z][1], 0, 2, 0);
    same("optimal", small[z][0], small[z][1], 1, 2, 1);
  }
  printf("uniform: %d schedules byte-identical\n", compared);
  CHECK(compared >= 68);
}

/* 1F1B at P=2, M=2 with micro-batch 1 three times as long: by hand. */
static void test_own_costs(void) {
  kt_request rq;
  kt_result res;
  kt_error err = {{0}};
  kt_request_init(&rq);
  CHECK_EQ_INT(kt_request_parse(&rq,
                                "schedule=1f1b p=2 m=2 per-stage=1 tf=1,3;1,3 tb=1,3;1,3 "
                                "tw=0 mem-act=1,4;1,4",
                                &err),
               KT_OK);
  CHECK_EQ_INT(kt_request_run(&rq, &res, KT_RESULT_TIMELINE, &err), KT_OK);
  /* rank0: F0 0-1, F1 1-4; rank1: F0 1-2, B0 2-3, F1 4-7, B1 7-10;
   * rank0: B0 3-4 (waits for F1), B1 10-13 */
  CHECK_NEAR(res.met.makespan, 13, 1e-12);
  CHECK_NEAR(res.met.ranks[0].peak_memory, 5, 1e-12);
  CHECK_NEAR(res.met.ranks[1].peak_memory, 4, 1e-12);
  CHECK(res.bound.has && res.bound.value <= res.met.period + 1e-9);
  kt_result_free(&res);
  /* the text form reads back as written */
  kt_buf b;
  kt_buf_init(&b);
  kt_request_print(&rq, &b);
  CHECK_STR_CONTAINS(b.data, "tf=1,3;1,3");
  CHECK_STR_CONTAINS(b.data, "mem-act=1,4;1,4");
  kt_buf_free(&b);
  /* M must match the lists */
  CHECK_EQ_INT(kt_request_set(&rq, "m", "3", &err), KT_OK);
  CHECK_EQ_INT(kt_request_run(&rq, &res, KT_RESULT_METRICS, &err), KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "2 micro-batches but the schedule has M=3");
  CHECK_EQ_INT(kt_request_set(&rq, "m", "2", &err), KT_OK);
  /* optimal searches both sequences of the two micro-batches, each with its
   * own costs: no slower than 1F1B, never below the bound on every order */
  CHECK_EQ_INT(kt_request_set(&rq, "schedule", "optimal", &err), KT_OK);
  CHECK_EQ_INT(kt_request_run(&rq, &res, KT_RESULT_METRICS, &err), KT_OK);
  CHECK(res.met.period <= 13 + 1e-9);
  CHECK(res.info.search_sequences == 2 && res.info.search_sequences_all);
  CHECK(res.info.search_proven_in_sequences);
  CHECK(res.info.lower_bound <= res.met.period + 1e-9);
  kt_result_free(&res);
  kt_request_free(&rq);
}

/* zb-auto with micro-batches of their own costs: never below the bound,
 * within the memory limit, and no slower than 1F1B on the same costs. */
static void test_search(void) {
  unsigned seed = 7;
  for (int trial = 0; trial < 12; trial++) {
    int p = 2 + trial % 3, m = 2 * p + trial % 4;
    char tf[4096], tb[4096], act[4096];
    size_t a = 0, b = 0, c = 0;
    for (int s = 0; s < p; s++)
      for (int j = 0; j < m; j++) {
        seed = seed * 1103515245u + 12345u;
        double len = 0.25 + (seed >> 16) % 1000 / 250.0;
        const char *sep = !s && !j ? "" : j ? "," : ";";
        a += (size_t)snprintf(tf + a, sizeof tf - a, "%s%g", sep, len);
        b += (size_t)snprintf(tb + b, sizeof tb - b, "%s%g", sep, 2 * len);
        c += (size_t)snprintf(act + c, sizeof act - c, "%s%g", sep, len);
      }
    double period[2];
    const char *kinds[] = {"1f1b", "zb-auto"};
    for (int k = 0; k < 2; k++) {
      kt_request rq;
      kt_result res;
      kt_error err = {{0}};
      kt_request_init(&rq);
      char text[64];
      snprintf(text, sizeof text, "schedule=%s p=%d m=%d tw=1 mem-wgrad=0.5", kinds[k], p, m);
      CHECK_EQ_INT(kt_request_parse(&rq, text, &err), KT_OK);
      CHECK_EQ_INT(kt_request_set(&rq, "tf", tf, &err), KT_OK);
      CHECK_EQ_INT(kt_request_set(&rq, "tb", tb, &err), KT_OK);
      CHECK_EQ_INT(kt_request_set(&rq, "mem-act", act, &err), KT_OK);
      kt_status st = kt_request_run(&rq, &res, KT_RESULT_METRICS, &err);
      CHECK_MSG(st == KT_OK, "%s: %s", kinds[k], err.msg);
      if (!st) {
        period[k] = res.met.period;
        CHECK_MSG(res.bound.has && res.bound.value <= res.met.period * (1 + 1e-12),
                  "%s P=%d M=%d: bound %g above period %g", kinds[k], p, m, res.bound.value,
                  res.met.period);
        kt_result_free(&res);
      }
      kt_request_free(&rq);
    }
    CHECK_MSG(period[1] <= period[0] * (1 + 1e-9), "P=%d M=%d: zb-auto %g slower than 1f1b %g", p,
              m, period[1], period[0]);
  }
}

static void test_json(void) {
  kt_costs c;
  kt_error err = {{0}};
  kt_costs_default(&c);
  CHECK_EQ_INT(
      kt_costs_parse_json(
          &c, "{\"tf\": [[1, 2, 3], [4, 5, 6]], \"mem_act\": [[1, 1, 2], [2, 2, 2]]}", "t", &err),
      KT_OK);
  CHECK(c.n_stages == 2 && c.n_mb == 3);
  CHECK_NEAR(kt_cost_tf_mb(&c, 1, 2), 6, 0);
  CHECK_NEAR(kt_cost_tf(&c, 0), 2, 0);      /* the stage's mean */
  CHECK_NEAR(kt_cost_mem_act(&c, 0), 2, 0); /* the stage's largest */
  CHECK_NEAR(kt_cost_mem_act(&c, 1), 2, 0);
  CHECK_NEAR(kt_cost_tb_mb(&c, 1, 2), 1, 0); /* none per mb: the uniform value */
  CHECK(kt_costs_mb_differ(&c));
  kt_costs copy;
  CHECK_EQ_INT(kt_costs_copy(&copy, &c), KT_OK);
  CHECK_NEAR(kt_cost_tf_mb(&copy, 0, 1), 2, 0);
  kt_costs_free(&copy);
  kt_costs least;
  CHECK_EQ_INT(kt_costs_least(&c, &least, &err), KT_OK);
  CHECK(least.n_mb == 0 && kt_cost_tf(&least, 1) == 4 && kt_cost_mem_act(&least, 0) == 1);
  kt_costs_free(&least);
  kt_costs_free(&c);
  const char *bad[] = {"{\"tf\": [[1, 2], [3]]}",
                       "{\"tf\": [[1, -2]]}",
                       "{\"tf\": [[1], 2]}",
                       "{\"tu\": [[1, 2]]}",
                       "{\"tf\": [[1, 2]], \"tb\": [[1, 2, 3]]}",
                       "{\"tf\": [[1, 2]], \"tb\": [1, 2]}",
                       "{\"tf\": [[1, \"x\"]]}"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    kt_costs_default(&c);
    CHECK_MSG(kt_costs_parse_json(&c, bad[i], "t", &err) == KT_EINVAL, "%s accepted", bad[i]);
    kt_costs_free(&c);
  }
  kt_costs_default(&c);
  CHECK_EQ_INT(kt_costs_set(&c, "tf", "1,2;3", &err), KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "stage 1 lists 1 micro-batches");
  CHECK_EQ_INT(kt_costs_set(&c, "tf", "1,2;3,x", &err), KT_EINVAL);
  CHECK_EQ_INT(kt_costs_set(&c, "tf", "1,2;3,4", &err), KT_OK);
  CHECK_EQ_INT(kt_costs_set(&c, "tf", "2", &err), KT_OK); /* a scalar replaces the lists */
  CHECK(c.n_mb == 0 && !c.mb_tf);
  kt_costs_free(&c);
}

int main(void) {
  test_json();
  test_own_costs();
  test_search();
  test_uniform_exact();
  return kt_test_done(__FILE__);
}
