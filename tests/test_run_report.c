/* Run directories read back (kt_run_load) and the run report: config
 * flattening, metrics lines (null validation loss, torn last line, ranks
 * changing between lines, unsorted steps), timeline events shifted to start
 * at 0, trace memory counters, every error naming its file, and the
 * rendered page (sections, markers, thinning of a long run, size and time). */
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "kaiten/report.h"

/* Like CHECK_STR_CONTAINS, without printing a whole page when it fails. */
#define HAS(text, needle) CHECK_MSG(strstr(text, needle) != NULL, "no '%s' in the text", needle)

static char root[256];

__attribute__((format(printf, 3, 4))) static void put(const char *dir, const char *name,
                                                      const char *fmt, ...) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  CHECK_MSG(f != NULL, "cannot write %s", path);
  if (!f) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(f, fmt, ap);
  va_end(ap);
  fclose(f);
}

/* A fresh run directory under root. */
static const char *run_dir(const char *name) {
  static char dir[320];
  snprintf(dir, sizeof dir, "%s/%s", root, name);
  mkdir(dir, 0755);
  return dir;
}

static const char config[] =
    "{\"model\": {\"kind\": \"mlp\", \"layers\": 4, \"hidden\": 16, \"tie_embeddings\": false},\n"
    " \"layout\": {\"schedule\": \"1f1b\", \"p\": 2, \"v\": 1, \"m\": 2, \"transport\": "
    "\"threads\", \"partition\": [2, 2]},\n"
    " \"optimizer\": {\"kind\": \"adamw\", \"lr\": 0.001},\n"
    " \"steps\": 3, \"data\": null}\n";

#define RANKS2 \
  "\"ranks\":[{\"busy\":0.001,\"bytes_sent\":1024,\"comm_time\":0.0005," \
  "\"peak_act_bytes\":2048},{\"busy\":0.002,\"bytes_sent\":512," \
  "\"comm_time\":0.0001,\"peak_act_bytes\":1024}]"

/* A measured step starting at t = 5 s, and its prediction from 0. */
static const char timeline[] =
    "{\"measured\":{\"p\":2,\"time_unit\":\"s\",\"events\":["
    "{\"rank\":0,\"stage\":0,\"mb\":0,\"op\":\"F\",\"start\":5.0,\"end\":5.001,\"bytes\":256},"
    "{\"rank\":1,\"stage\":1,\"mb\":0,\"op\":\"F\",\"start\":5.001,\"end\":5.002},"
    "{\"rank\":1,\"stage\":1,\"mb\":0,\"op\":\"B\",\"start\":5.002,\"end\":5.004},"
    "{\"rank\":0,\"stage\":0,\"mb\":0,\"op\":\"B\",\"start\":5.004,\"end\":5.006}]},"
    "\"predicted\":{\"p\":2,\"time_unit\":\"s\",\"costs\":{\"tf\":0.001,\"tb\":0.002,\"tw\":0,"
    "\"comm\":0},\"events\":["
    "{\"rank\":0,\"stage\":0,\"mb\":0,\"op\":\"F\",\"start\":0,\"end\":0.001},"
    "{\"rank\":1,\"stage\":1,\"mb\":0,\"op\":\"F\",\"start\":0.001,\"end\":0.002},"
    "{\"rank\":1,\"stage\":1,\"mb\":0,\"op\":\"B\",\"start\":0.002,\"end\":0.004},"
    "{\"rank\":0,\"stage\":0,\"mb\":0,\"op\":\"B\",\"start\":0.004,\"end\":0.006}]}}\n";

static const char trace[] =
    "{\"traceEvents\":[{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"args\":{}},"
    "{\"name\":\"memory rank 0\",\"ph\":\"C\",\"pid\":0,\"tid\":0,\"ts\":5001000,"
    "\"args\":{\"B\":2048}},"
    "{\"name\":\"memory rank 0\",\"ph\":\"C\",\"pid\":0,\"tid\":0,\"ts\":5006000,"
    "\"args\":{\"B\":0}}]}\n";

static void full_run(void) {
  const char *d = run_dir("full");
  put(d, "config.json", "%s", config);
  /* out of order, a null validation loss, a torn last line */
  put(d, "metrics.jsonl",
      "{\"step\":2,\"loss\":0.5,\"val_loss\":0.45,\"lr\":0.001,\"bubble\":0.4," RANKS2 "}\n"
      "{\"step\":1,\"loss\":0.7,\"val_loss\":null,\"lr\":0.001,\"tokens_per_s\":1000,"
      "\"bubble\":0.5," RANKS2 "}\n"
      "{\"step\":3,\"loss\":0.4,\"val_loss\":null,\"bubble\":0.3,\"ranks\":[{\"busy\":0.001}]}\n"
      "{\"step\":4,\"loss\":0.3,\"val_lo");
  put(d, "timeline.json", "%s", timeline);
  put(d, "trace.json", "%s", trace);
  kt_run r;
  kt_error err = {{0}};
  kt_status st = kt_run_load(d, &r, &err);
  CHECK_MSG(st == KT_OK, "%s", err.msg);
  REQUIRE_VOID(st == KT_OK);
  CHECK_EQ_INT(r.n_steps, 3);
  CHECK_EQ_INT(r.skipped_lines, 1);
  CHECK_EQ_INT(r.steps[0].step, 1);
  CHECK_EQ_INT(r.steps[2].step, 3);
  CHECK(isnan(r.steps[0].val_loss));
  CHECK_NEAR(r.steps[1].val_loss, 0.45, 1e-12);
  CHECK(isnan(r.steps[1].tokens_per_s));
  CHECK_EQ_INT(r.ranks, 2);
  CHECK_NEAR(r.rank_steps[0 * 2 + 1].busy, 0.002, 1e-12);
  CHECK_NEAR(r.rank_steps[1 * 2 + 0].bytes_sent, 1024, 0);
  CHECK(isnan(r.rank_steps[2 * 2 + 1].busy)); /* step 3 has one rank */
  CHECK_EQ_INT(r.p, 2);
  CHECK_EQ_INT(r.layers, 4);
  CHECK_EQ_INT(r.steps_planned, 3);
  CHECK(!strcmp(r.schedule, "1f1b") && !strcmp(r.model, "mlp"));
  static const char *const want[][2] = {{"layout.partition", "2, 2"},
                                        {"model.tie_embeddings", "false"},
                                        {"data", "null"},
                                        {"optimizer.lr", "0.001"}};
  int seen = 0;
  for (size_t i = 0; i < r.n_config; i++)
    for (int k = 0; k < 4; k++)
      if (!strcmp(r.config[i].key, want[k][0])) {
        seen++;
        CHECK_MSG(!strcmp(r.config[i].value, want[k][1]), "%s = '%s'", want[k][0],
                  r.config[i].value);
      }
  CHECK_EQ_INT(seen, 4);
  CHECK(r.has_timeline);
  CHECK_EQ_INT(r.measured.n_events, 4);
  CHECK_EQ_INT(r.predicted.n_events, 4);
  double first = INFINITY;
  for (size_t i = 0; i < r.measured.n_events; i++)
    if (r.measured.events[i].start < first) first = r.measured.events[i].start;
  CHECK_NEAR(first, 0, 1e-12);
  CHECK(r.has_calibrated);
  CHECK_NEAR(r.calibrated.tb, 0.002, 1e-12);
  CHECK(r.has_memory);
  CHECK_EQ_INT(r.measured.n_mem, 2);
  CHECK_NEAR(r.measured.mem[0].t, 0.001, 1e-9); /* 5.001 s, counted from the step's start */
  kt_buf b;
  kt_buf_init(&b);
  kt_render_run_report(&b, &r, NULL);
  CHECK(!b.failed);
  HAS(b.data, "<h1>kaiten run: full</h1>");
  HAS(b.data, "id=\"chart-loss\"");
  HAS(b.data, "id=\"gantt-step\"");
  HAS(b.data, "id=\"memory-step\"");
  HAS(b.data, "id=\"bars-predicted\"");
  HAS(b.data, "torn line");
  HAS(b.data, "validation loss: step 2, 0.45"); /* the dot's tooltip */
  CHECK(strstr(b.data, "http") == NULL);
  kt_buf_free(&b);
  char out[512];
  snprintf(out, sizeof out, "%s/out.html", d);
  CHECK(kt_write_run_report(out, &r, "t", &err) == KT_OK);
  char *text = NULL;
  CHECK(kt_read_file(out, &text, NULL, &err) == KT_OK);
  CHECK(text && !strncmp(text, "<!DOCTYPE html>", 15) && strstr(text, "</html>"));
  free(text);
  kt_run_free(&r);
}

/* No timeline.json, no trace.json, no steps yet: still a page. */
static void bare_run(void) {
  const char *d = run_dir("bare");
  put(d, "config.json", "%s", config);
  put(d, "metrics.jsonl", "{\"step\":1,\"lo");
  kt_run r;
  kt_error err = {{0}};
  CHECK(kt_run_load(d, &r, &err) == KT_OK);
  CHECK_EQ_INT(r.n_steps, 0);
  CHECK(!r.has_timeline && !r.has_memory);
  kt_buf b;
  kt_buf_init(&b);
  kt_render_run_report(&b, &r, "bare");
  CHECK(!b.failed);
  HAS(b.data, "no complete step");
  HAS(b.data, "No timeline.json");
  CHECK(strstr(b.data, "gantt-step") == NULL);
  kt_buf_free(&b);
  kt_run_free(&r);
}

static void expect_error(const char *name, const char *file, const char *text, kt_status want,
                         const char *needle) {
  const char *d = run_dir(name);
  put(d, "config.json", "%s", config);
  put(d, "metrics.jsonl", "{\"step\":1,\"loss\":1}\n");
  put(d, "timeline.json", "%s", timeline);
  if (file) put(d, file, "%s", text);
  kt_run r;
  kt_error err = {{0}};
  kt_status st = kt_run_load(d, &r, &err);
  CHECK_MSG(st == want, "%s: status %s, want %s (%s)", name, kt_status_name(st),
            kt_status_name(want), err.msg);
  CHECK_MSG(strstr(err.msg, needle) != NULL, "%s: '%s' lacks '%s'", name, err.msg, needle);
  CHECK_MSG(strchr(err.msg, '\n') == NULL, "%s: not one line", name);
  if (st == KT_OK) kt_run_free(&r);
}

/* A bad complete line is skipped with a warning naming file and line; the
 * lines after it (after a NUL byte too) are kept. */
static void bad_lines(void) {
  const char *d = run_dir("badlines");
  put(d, "config.json", "%s", config);
  char path[512];
  snprintf(path, sizeof path, "%s/metrics.jsonl", d);
  FILE *f = fopen(path, "wb");
  REQUIRE_VOID(f);
  fputs("{\"step\":1,\"loss\":1}\nnonsense\n{\"step\":3,\"loss\":3}\n{\"loss\":1}\n", f);
  static const char nul_line[] = "{\"step\":5,\0\"loss\":5}\n";
  fwrite(nul_line, 1, sizeof nul_line - 1, f);
  fputs("{\"step\":6,\"loss\":6}\n{\"step\":7,\"lo", f); /* torn last line */
  fclose(f);
  kt_run r;
  kt_error err = {{0}};
  REQUIRE_VOID(kt_run_load(d, &r, &err) == KT_OK);
  CHECK_EQ_INT(r.n_steps, 3);
  CHECK_EQ_INT(r.n_steps == 3 ? r.steps[2].step : 0, 6);
  CHECK_EQ_INT(r.bad_lines, 3);
  CHECK_EQ_INT(r.skipped_lines, 1);
  CHECK_EQ_INT(r.n_warnings, 3);
  if (r.n_warnings == 3) {
    HAS(r.warnings[0], "metrics.jsonl line 2: malformed JSON");
    HAS(r.warnings[1], "metrics.jsonl line 4: no integer \"step\"");
    HAS(r.warnings[2], "metrics.jsonl line 5: a NUL byte");
  }
  kt_run_free(&r);
}

static void errors(void) {
  kt_run r;
  kt_error err = {{0}};
  char missing[320];
  snprintf(missing, sizeof missing, "%s/nowhere", root);
  CHECK(kt_run_load(missing, &r, &err) == KT_EINVAL);
  HAS(err.msg, "nowhere");
  const char *d = run_dir("empty");
  CHECK(kt_run_load(d, &r, &err) == KT_EINVAL);
  HAS(err.msg, "config.json");
  put(d, "config.json", "%s", config);
  CHECK(kt_run_load(d, &r, &err) == KT_EINVAL);
  HAS(err.msg, "metrics.jsonl is missing");
  expect_error("badcfg", "config.json", "{\"model\": ", KT_EPARSE, "config.json");
  expect_error("cfgarray", "config.json", "[1, 2]", KT_EPARSE, "not a JSON object");
  expect_error("overflow", "timeline.json",
               "{\"measured\":{\"p\":1,\"events\":[{\"rank\":0,\"stage\":0,\"mb\":0,\"op\":\"F\","
               "\"start\":-1e308,\"end\":1e308}]},\"predicted\":{\"p\":1,\"events\":[]}}",
               KT_EPARSE, "too far");
  expect_error("badtl", "timeline.json", "{\"measured\": 3}", KT_EPARSE, "timeline.json");
  expect_error("badrank", "timeline.json",
               "{\"measured\":{\"p\":1,\"events\":[{\"rank\":1,\"stage\":0,\"mb\":0,\"op\":\"F\","
               "\"start\":0,\"end\":1}]},\"predicted\":{\"p\":1,\"events\":[]}}",
               KT_EPARSE, "rank 1");
  expect_error("badend", "timeline.json",
               "{\"measured\":{\"p\":1,\"events\":[{\"rank\":0,\"stage\":0,\"mb\":0,\"op\":\"W\","
               "\"start\":2,\"end\":1}]},\"predicted\":{\"p\":1,\"events\":[]}}",
               KT_EPARSE, "end 1");
  expect_error("badtrace", "trace.json", "{\"traceEvents\": [", KT_EPARSE, "trace.json");
  /* trace.json alone, without timeline.json, is ignored */
  const char *t = run_dir("traceonly");
  put(t, "config.json", "%s", config);
  put(t, "metrics.jsonl", "{\"step\":1,\"loss\":1}\n");
  put(t, "trace.json", "garbage");
  CHECK(kt_run_load(t, &r, &err) == KT_OK);
  kt_run_free(&r);
}

/* Many steps: every step read, curves thinned, a moving average, a page of
 * bounded size rendered quickly. */
static void long_run(void) {
  const char *d = run_dir("long");
  put(d, "config.json", "%s", config);
  char path[512];
  snprintf(path, sizeof path, "%s/metrics.jsonl", d);
  FILE *f = fopen(path, "w");
  if (!f) return;
  enum { N = 20000 };
  for (int s = 1; s <= N; s++)
    fprintf(f,
            "{\"step\":%d,\"loss\":%.6f,\"val_loss\":%s,\"lr\":0.001,\"tokens_per_s\":%d,"
            "\"bubble\":0.25," RANKS2 "}\n",
            s, 2.0 / (1 + s * 0.01) + 0.05 * (s % 7), s % 1000 ? "null" : "1.5", 1000 + s % 13);
  fclose(f);
  put(d, "timeline.json", "%s", timeline);
  kt_run r;
  kt_error err = {{0}};
  double t0 = kt_now();
  CHECK(kt_run_load(d, &r, &err) == KT_OK);
  double t1 = kt_now();
  CHECK_EQ_INT(r.n_steps, N);
  kt_buf b;
  kt_buf_init(&b);
  kt_render_run_report(&b, &r, NULL);
  double t2 = kt_now();
  CHECK(!b.failed);
  HAS(b.data, "mean of 251 steps"); /* N / 40 = 500, capped at 251 */
  /* and up to 400 KB for the what-if panel's simulator */
  CHECK_MSG(b.len < 400000 + 400000, "%zu bytes for %d steps", b.len, N);
  printf("run report of %d steps: load %.3f s, render %.3f s, %zu KB\n", N, t1 - t0, t2 - t1,
         b.len / 1024);
  kt_buf_free(&b);
  kt_run_free(&r);
}

/* kt_series.markers: one dot per finite point, with a tooltip. */
static void markers(void) {
  double x[4] = {1, 2, 3, 4}, y[4] = {0.5, NAN, 0.25, 0.125};
  kt_series s = {.name = "val", .x = x, .y = y, .n = 4, .markers = 1};
  kt_chart_opts co;
  kt_chart_default_opts(&co);
  co.x_label = "step";
  kt_buf b;
  kt_buf_init(&b);
  kt_svg_line_chart(&b, &co, &s, 1);
  int n = 0;
  for (const char *p = b.data; (p = strstr(p, "<circle")); p++) n++;
  CHECK_EQ_INT(n, 3);
  HAS(b.data, "<title>val: step 3, 0.25</title>");
  kt_buf_free(&b);
}

/* A run as train writes it now: costs calibrated per stage (per_stage
 * true, the step's end), each rank's bytes sent, and config.json's segment
 * with the model's memory per stage, 1F1B's peak and the limit. */
static const char config_mem[] =
    "{\"model\": {\"kind\": \"gpt\", \"layers\": 4},\n"
    " \"layout\": {\"schedule\": \"1f1b\", \"p\": 2, \"v\": 1, \"m\": 2, \"partition\": [2, 2]},\n"
    " \"steps\": 1,\n"
    " \"segments\": [{\"first_step\": 0, \"last_step\": 1, \"schedule\": \"1f1b\", \"p\": 2, "
    "\"v\": 1, \"m\": 2, \"partition\": [2, 2], \"mem_act_bytes\": [4096, 2048], "
    "\"mem_wgrad_bytes\": [1024, 512], \"mem_transient_bytes\": [256, 128], "
    "\"peak_1f1b_bytes\": 8192, \"mem_limit\": \"0.5x\", \"mem_limit_bytes\": 4096}]}\n";

static const char timeline_costs[] =
    "{\"measured\":{\"p\":2,\"time_unit\":\"s\",\"ranks\":[{\"rank\":0,\"bytes_sent\":4096},"
    "{\"rank\":1,\"bytes_sent\":2048}],\"events\":["
    "{\"rank\":0,\"stage\":0,\"mb\":0,\"op\":\"F\",\"start\":1.0,\"end\":1.001}]},"
    "\"predicted\":{\"p\":2,\"time_unit\":\"s\",\"costs\":{\"tf\":[0.001,0.003],"
    "\"tb\":[0.002,0.004],\"tw\":[0.0005,0.0006],\"comm\":0.0001,\"send_overhead\":1e-6,"
    "\"mem_act\":0,\"mem_wgrad\":0,\"tu\":0.0002,\"t_norm\":0,\"t_dp\":0,"
    "\"step_sync\":\"barrier\",\"per_stage\":true},\"events\":["
    "{\"rank\":0,\"stage\":0,\"mb\":0,\"op\":\"F\",\"start\":0,\"end\":0.001}]}}\n";

static void check_costs(const kt_costs *c) {
  CHECK_EQ_INT(c->n_stages, 2);
  CHECK(c->stage_tf && c->stage_tb && c->stage_tw);
  if (!c->stage_tf || !c->stage_tb || !c->stage_tw) return;
  CHECK_NEAR(c->stage_tf[1], 0.003, 0);
  CHECK_NEAR(c->stage_tb[0], 0.002, 0);
  CHECK_NEAR(c->stage_tw[1], 0.0006, 0);
  CHECK_NEAR(c->comm, 0.0001, 0);
  CHECK_NEAR(c->send_overhead, 1e-6, 0);
  CHECK_NEAR(c->tu, 0.0002, 0);
  CHECK_EQ_INT(c->step_sync, KT_STEP_BARRIER);
  /* the segment's bytes per stage */
  CHECK(c->stage_mem_act && c->stage_mem_wgrad && c->stage_mem_transient);
  if (c->stage_mem_act) CHECK_NEAR(c->stage_mem_act[0], 4096, 0);
  if (c->stage_mem_wgrad) CHECK_NEAR(c->stage_mem_wgrad[1], 512, 0);
  if (c->stage_mem_transient) CHECK_NEAR(c->stage_mem_transient[0], 256, 0);
}

static void calibrated_run(void) {
  char d[400];
  snprintf(d, sizeof d, "%s", run_dir("calibrated"));
  put(d, "config.json", "%s", config_mem);
  put(d, "metrics.jsonl", "{\"step\":1,\"loss\":1,\"bubble\":0.5," RANKS2 "}\n");
  put(d, "timeline.json", "%s", timeline_costs);
  kt_run r;
  kt_error err = {{0}};
  kt_status st = kt_run_load(d, &r, &err);
  CHECK_MSG(st == KT_OK, "%s", err.msg);
  if (st) return;
  CHECK(r.has_calibrated);
  check_costs(&r.calibrated);
  const kt_run_segment *seg = &r.cfg.segments[0];
  CHECK_EQ_INT(seg->n_mem, 2);
  CHECK_NEAR(seg->peak_1f1b_bytes, 8192, 0);
  CHECK_NEAR(seg->mem_limit_bytes, 4096, 0);
  CHECK(!strcmp(seg->mem_limit, "0.5x"));
  CHECK(r.sent_bytes != NULL);
  if (r.sent_bytes) CHECK_NEAR(r.sent_bytes[0], 4096, 0);
  /* the per-rank table says what each rank sent (its events carry no bytes) */
  kt_buf b;
  kt_buf_init(&b);
  kt_render_run_report(&b, &r, NULL);
  CHECK(!b.failed);
  const char *table = b.data ? strstr(b.data, "per rank, traced step") : NULL;
  CHECK(table != NULL);
  HAS(table ? table : "", "<td class=\"num\">4096</td>");
  HAS(table ? table : "", "<td class=\"num\">2048</td>");
  HAS(b.data ? b.data : "",
      "costs calibrated on a median step (per stage): T_F 1000, 3000 \xc2\xb5s");
  kt_buf_free(&b);
  /* config.json written back keeps the memory */
  kt_rundir *rd;
  const char *d2 = run_dir("calibrated-copy");
  st = kt_rundir_create(d2, KT_RUNDIR_NEW, NULL, &rd, &err);
  CHECK_MSG(st == KT_OK, "%s", err.msg);
  if (!st) {
    st = kt_rundir_write_config(rd, &r.cfg, &err);
    CHECK_MSG(st == KT_OK, "%s", err.msg);
    kt_rundir_destroy(rd);
    kt_run_config back;
    st = kt_rundir_read_config(d2, &back, &err);
    CHECK_MSG(st == KT_OK, "%s", err.msg);
    if (!st) {
      CHECK_EQ_INT(back.segments[0].n_mem, 2);
      CHECK_NEAR(back.segments[0].mem_transient_bytes[1], 128, 0);
      CHECK_NEAR(back.segments[0].peak_1f1b_bytes, 8192, 0);
      CHECK(!strcmp(back.segments[0].mem_limit, "0.5x"));
      kt_run_config_free(&back);
    }
  }
  kt_run_free(&r);
  /* compare --costs runs/NAME reads the same */
  kt_costs c;
  kt_run_segment lay;
  st = kt_rundir_read_costs(d, &c, &lay, &err);
  CHECK_MSG(st == KT_OK, "%s", err.msg);
  if (!st) {
    check_costs(&c);
    CHECK(lay.p == 2 && lay.m == 2 && lay.v == 1 && !strcmp(lay.schedule, "1f1b"));
    kt_costs_free(&c);
  }
  /* a run without timeline.json: said */
  const char *d3 = run_dir("no-timeline");
  put(d3, "config.json", "%s", config_mem);
  st = kt_rundir_read_costs(d3, &c, NULL, &err);
  CHECK_EQ_INT(st, KT_EINVAL);
  HAS(err.msg, "has no timeline.json");
  kt_costs_free(&c);
}

int main(void) {
  snprintf(root, sizeof root, "/tmp/kt_run_report_XXXXXX");
  if (!mkdtemp(root)) {
    perror("mkdtemp");
    return 1;
  }
  full_run();
  calibrated_run();
  bare_run();
  errors();
  bad_lines();
  long_run();
  markers();
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", root);
  return kt_test_done(__FILE__);
}
