/* SVG and HTML renderers: a golden SVG Gantt for a tiny schedule, one bar
 * per action (detail) or counts that add up (aggregate), chart thinning,
 * escaping, memory series, and the report's size and speed at P=32, M=256. */
#include "check.h"
#include "kaiten/generators.h"
#include "kaiten/report.h"
#include "report/whatif.h"

static int sim(kt_gen_kind kind, int p, int m, kt_schedule *s, kt_timeline *t) {
  kt_error err;
  kt_gen_params params = {.p = p, .m = m};
  if (kt_generate(kind, &params, s, &err)) return -1;
  if (kt_simulate(s, NULL, t, &err)) {
    kt_schedule_free(s);
    return -1;
  }
  return 0;
}

static size_t count(const char *hay, const char *needle) {
  size_t n = 0;
  for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

/* A copy of a page without its scripts' text (what the markup itself holds). */
static char *without_scripts(const char *page) {
  char *out = strdup(page), *w = out;
  for (const char *p = page; out && *p;) {
    const char *open = strstr(p, "<script"), *close = open ? strstr(open, "</script>") : NULL;
    size_t keep = open && close ? (size_t)(open - p) : strlen(p);
    memmove(w, p, keep);
    w += keep;
    p = open && close ? close + 9 : p + keep;
  }
  if (out) *w = 0;
  return out;
}

/* The what-if panel's share of every page: the simulator (wasm, base64url)
 * and the panel's styles and scripts, at most 450 KB (400 KB before
 * per-micro-batch costs, packing and faults joined the page's request); the bytes are a wasm
 * module whenever the build had the toolchain. */
static void whatif_budget(void) {
  kt_buf b;
  kt_buf_init(&b);
  kt__whatif_assets(&b);
  kt__whatif_scripts(&b);
  printf("what-if panel: %zu bytes in every page (a %zu-byte wasm module)\n", b.len, kt__wasm_len);
  CHECK(!b.failed);
  CHECK_MSG(b.len <= 450 * 1024, "the what-if panel adds %zu bytes", b.len);
  CHECK(kt__wasm_len == 0 || !memcmp(kt__wasm, "\0asm", 4));
  CHECK(!strstr(b.data, "//") && !strstr(b.data, "http"));
  kt_buf_free(&b);
}

/* Sum of data-n over the rects of rank r (aggregate view), or the number of
 * data-rank="r" rects (detail view). */
static long bars_of_rank(const char *svg, int r) {
  char key[32];
  snprintf(key, sizeof key, "data-rank=\"%d\"", r);
  long total = 0;
  for (const char *p = svg; (p = strstr(p, key)); p += strlen(key)) {
    const char *end = strstr(p, "/>"), *n = strstr(p, "data-n=\"");
    total += n && n < end ? atol(n + 8) : 1;
  }
  return total;
}

static void golden_svg(void) {
  kt_schedule s;
  kt_timeline t;
  REQUIRE_VOID(sim(KT_SCHED_ZB_H1, 2, 3, &s, &t) == 0);
  kt_svg_gantt_opts o;
  kt_svg_gantt_default_opts(&o);
  o.standalone = 1;
  o.width = 640;
  o.title = "zb-h1 P=2 M=3";
  kt_buf b;
  kt_buf_init(&b);
  kt_svg_gantt(&b, &t, &o);
  CHECK(!b.failed);
  char path[1024];
  const char *dir = getenv("KT_TEST_GOLDEN");
  snprintf(path, sizeof path, "%s/gantt_zb-h1_p2_m3.svg", dir ? dir : "tests/golden");
  kt_error err;
  char *want = NULL;
  if (getenv("KT_UPDATE_GOLDEN")) {
    CHECK(kt_write_file_atomic(path, b.data, b.len, &err) == KT_OK);
  } else if (kt_read_file(path, &want, NULL, &err) == KT_OK) {
    CHECK_MSG(!strcmp(want, b.data), "%s differs (KT_UPDATE_GOLDEN=1 rewrites it); got:\n%s", path,
              b.data);
  } else {
    CHECK_MSG(0, "%s", err.msg);
  }
  /* one rect per action, labels present, no external reference */
  CHECK_EQ_INT(count(b.data, "data-op="), kt_schedule_total_actions(&s));
  CHECK_STR_CONTAINS(b.data, ">F0</text>");
  CHECK_STR_CONTAINS(b.data, ">W2</text>");
  CHECK_STR_CONTAINS(b.data, "time (cost units)");
  CHECK_STR_CONTAINS(b.data, "data-mode=\"detail\"");
  free(want);
  kt_buf_free(&b);
  kt_timeline_free(&t);
  kt_schedule_free(&s);
}

static void bars_per_rank(kt_gen_kind kind, int p, int m, int force_aggregate) {
  kt_schedule s;
  kt_timeline t;
  REQUIRE_VOID(sim(kind, p, m, &s, &t) == 0);
  kt_svg_gantt_opts o;
  kt_svg_gantt_default_opts(&o);
  o.force_aggregate = force_aggregate;
  kt_buf b;
  kt_buf_init(&b);
  kt_svg_gantt(&b, &t, &o);
  REQUIRE_VOID(!b.failed);
  int aggregated = strstr(b.data, "data-mode=\"aggregate\"") != NULL;
  CHECK_MSG(aggregated == (force_aggregate || kt_schedule_total_actions(&s) > 4000),
            "%s P=%d M=%d: aggregated=%d", kt_gen_kind_name(kind), p, m, aggregated);
  for (int r = 0; r < p; r++)
    CHECK_MSG(bars_of_rank(b.data, r) == (long)s.ranks[r].n,
              "%s P=%d M=%d rank %d: %ld bars, %zu actions", kt_gen_kind_name(kind), p, m, r,
              bars_of_rank(b.data, r), s.ranks[r].n);
  kt_buf_free(&b);
  kt_timeline_free(&t);
  kt_schedule_free(&s);
}

static void line_chart_thins(void) {
  enum { N = 1000000 };
  double *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
  REQUIRE_VOID(x && y);
  for (int i = 0; i < N; i++) x[i] = i, y[i] = 3 + sin(i * 0.001) + (i == 500000 ? 50 : 0);
  kt_series s = {.name = "loss", .x = x, .y = y, .n = N};
  kt_chart_opts o;
  kt_chart_default_opts(&o);
  o.x_label = "step";
  o.y_label = "loss";
  kt_buf b;
  kt_buf_init(&b);
  kt_svg_line_chart(&b, &o, &s, 1);
  CHECK(!b.failed);
  CHECK_MSG(b.len < 40000, "line chart of 1e6 points is %zu bytes", b.len);
  CHECK(strstr(b.data, ">loss</text>") && strstr(b.data, ">step</text>"));
  CHECK(strstr(b.data, ">0</text>") && strstr(b.data, ">900k</text>"));
  /* the single spike survives thinning: some point of the path sits near
   * the top (y = 53 of 0..60), the rest near the bottom (y = 2..4) */
  const char *d = strstr(b.data, " d=\"");
  REQUIRE_VOID(d);
  double min_y = 1e9;
  for (const char *p = d + 4; *p && *p != '"';) {
    char *end;
    if (*p == 'M' || *p == 'L' || *p == ' ') {
      p++;
      continue;
    }
    strtod(p, &end); /* x */
    double yv = strtod(end, &end);
    if (yv < min_y) min_y = yv;
    p = end;
  }
  CHECK_MSG(min_y < 60, "spike lost: highest point at y=%g px", min_y);
  kt_buf_free(&b);
  free(x);
  free(y);
}

static void bar_chart(void) {
  const char *labels[] = {"a<b", "c&d", "e"};
  const char *series[] = {"busy", "idle"};
  double v[] = {1, 2, 3, 0, 0.5, NAN};
  kt_bar_data d = {
      .labels = labels, .n = 3, .series_names = series, .k = 2, .values = v, .stacked = 1};
  kt_buf b;
  kt_buf_init(&b);
  kt_svg_bar_chart(&b, NULL, &d);
  CHECK_EQ_INT(count(b.data, "data-bar="), 6);
  CHECK_STR_CONTAINS(b.data, "a&lt;b");
  CHECK_STR_CONTAINS(b.data, "c&amp;d");
  CHECK(!strstr(b.data, "a<b"));
  kt_buf_free(&b);
}

static void escape_and_series(void) {
  kt_buf b;
  kt_buf_init(&b);
  kt_buf_xml_escape(&b, "<a href=\"x\">'&'</a>\x01");
  CHECK(!strcmp(b.data, "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt; "));
  kt_buf_free(&b);
  kt_timeline t;
  kt_timeline_init(&t, 2, "s", "B");
  kt_timeline_add_mem(&t, 0, 1.0, 10);
  kt_timeline_add_mem(&t, 0, 2.0, 5);
  kt_timeline_add_mem(&t, 0, 2.0, 7); /* same instant: the last level holds */
  kt_timeline_add_mem(&t, 1, 0.5, 3);
  kt_series *s;
  size_t n;
  REQUIRE_VOID(kt_timeline_mem_series(&t, 0, 4, &s, &n) == KT_OK);
  CHECK_EQ_INT(n, 2);
  CHECK(!strcmp(s[0].name, "rank 0"));
  CHECK_EQ_INT(s[0].n, 4); /* (0,0) (1,10) (2,7) (4,7) */
  CHECK_NEAR(s[0].y[0], 0, 0);
  CHECK_NEAR(s[0].y[2], 7, 0);
  CHECK_NEAR(s[0].x[3], 4, 0);
  CHECK_EQ_INT(s[1].n, 3);
  kt_series_free(s, n);
  kt_timeline_free(&t);
}

/* A "measured" timeline (the simulation stretched and shifted, in seconds)
 * drawn over its prediction: both sets of bars, counts intact, ms axis. */
static void measured_vs_predicted(void) {
  kt_schedule s;
  kt_timeline pred;
  REQUIRE_VOID(sim(KT_SCHED_1F1B, 4, 8, &s, &pred) == 0);
  kt_timeline meas;
  kt_timeline_init(&meas, 4, "s", "B");
  for (size_t i = 0; i < pred.n_events; i++) {
    kt_event e = pred.events[i];
    e.start = 100 + e.start * 0.011 * (1 + 0.1 * e.rank);
    e.end = 100 + e.end * 0.011 * (1 + 0.1 * e.rank);
    CHECK(kt_timeline_add_event(&meas, &e) == KT_OK);
  }
  kt_timeline scaled = pred; /* prediction in the same unit and origin */
  scaled.events = malloc(pred.n_events * sizeof *scaled.events);
  REQUIRE_VOID(scaled.events);
  for (size_t i = 0; i < pred.n_events; i++) {
    scaled.events[i] = pred.events[i];
    scaled.events[i].start = 100 + pred.events[i].start * 0.011;
    scaled.events[i].end = 100 + pred.events[i].end * 0.011;
  }
  kt_svg_gantt_opts o;
  kt_svg_gantt_default_opts(&o);
  o.predicted = &scaled;
  o.predicted_label = "predicted (simulator)";
  kt_buf b;
  kt_buf_init(&b);
  kt_svg_gantt(&b, &meas, &o);
  CHECK(!b.failed);
  CHECK_EQ_INT(count(b.data, "data-pred=\"1\""), pred.n_events);
  for (int r = 0; r < 4; r++) CHECK_EQ_INT(bars_of_rank(b.data, r), s.ranks[r].n);
  CHECK(strstr(b.data, "time (ms)") != NULL);
  CHECK(strstr(b.data, "predicted (simulator)") != NULL);
  kt_buf_free(&b);
  free(scaled.events);
  kt_timeline_free(&meas);
  kt_timeline_free(&pred);
  kt_schedule_free(&s);
}

/* Nothing to draw must still give well-formed, closed markup. */
static void degenerate(void) {
  kt_timeline t;
  kt_timeline_init(&t, 3, "unit", "unit");
  kt_buf b;
  kt_buf_init(&b);
  kt_svg_gantt(&b, &t, NULL);
  kt_svg_line_chart(&b, NULL, NULL, 0);
  kt_bar_data d = {.labels = NULL, .n = 0, .values = NULL};
  kt_svg_bar_chart(&b, NULL, &d);
  double x[] = {1, 10, 100}, y[] = {0.5, 0.05, -1}; /* log axis skips y <= 0 */
  kt_series s = {.name = "loss", .x = x, .y = y, .n = 3};
  kt_chart_opts o;
  kt_chart_default_opts(&o);
  o.log_y = 1;
  kt_svg_line_chart(&b, &o, &s, 1);
  kt_render_html_report(&b, "empty", NULL, 0, NULL);
  CHECK(!b.failed);
  char *markup = without_scripts(b.data); /* the scripts build charts of their own */
  CHECK_EQ_INT(count(markup, "<svg"), 4);
  CHECK_EQ_INT(count(markup, "</svg>"), 4);
  CHECK(strstr(b.data, "</html>") != NULL);
  CHECK(!strstr(markup, "nan") && !strstr(markup, "inf"));
  free(markup);
  kt_buf_free(&b);
  kt_timeline_free(&t);
}

/* The comparison report at P=32, M=256: size and render time. */
static void big_report(void) {
  static const kt_gen_kind kinds[] = {KT_SCHED_GPIPE, KT_SCHED_1F1B,  KT_SCHED_INTERLEAVED,
                                      KT_SCHED_ZB_H1, KT_SCHED_ZB_H2, KT_SCHED_ZBV};
  enum { NK = sizeof kinds / sizeof *kinds };
  kt_schedule s[NK];
  kt_timeline t[NK];
  kt_metrics m[NK];
  kt_report_entry e[NK];
  kt_costs c;
  kt_costs_default(&c);
  kt_error err;
  for (int i = 0; i < NK; i++) {
    REQUIRE_VOID(sim(kinds[i], 32, 256, &s[i], &t[i]) == 0);
    REQUIRE_VOID(kt_timeline_metrics(&t[i], &m[i], &err) == KT_OK);
    e[i] = (kt_report_entry){.info = {.schedule = kt_gen_kind_name(kinds[i]),
                                      .p = 32,
                                      .v = s[i].v,
                                      .m = 256,
                                      .costs = &c,
                                      .closed_form = -1},
                             .timeline = &t[i],
                             .metrics = &m[i]};
  }
  kt_buf b;
  kt_buf_init(&b);
  double t0 = kt_now();
  kt_render_html_report(&b, "big", e, NK, &c);
  double secs = kt_now() - t0;
  CHECK(!b.failed);
  printf("compare report P=32 M=256, %d schedules: %zu bytes in %.3f s\n", NK, b.len, secs);
  /* 1.5 MB of charts, and up to 400 KB for the what-if panel's simulator */
  CHECK_MSG(b.len < 1500000 + 400000, "report is %zu bytes", b.len);
  CHECK_MSG(secs < 2.0, "render took %.3f s", secs);
  CHECK_EQ_INT(count(b.data, "class=\"gantt\""), NK);
  CHECK(!strstr(b.data, "http:") && !strstr(b.data, "https:") && !strstr(b.data, "//"));
  CHECK_STR_CONTAINS(b.data, "data-kt=\"loading\"");
  kt_buf_free(&b);
  for (int i = 0; i < NK; i++) {
    kt_metrics_free(&m[i]);
    kt_timeline_free(&t[i]);
    kt_schedule_free(&s[i]);
  }
}

int main(void) {
  whatif_budget();
  golden_svg();
  bars_per_rank(KT_SCHED_1F1B, 4, 8, 0);
  bars_per_rank(KT_SCHED_INTERLEAVED, 4, 8, 0);
  bars_per_rank(KT_SCHED_ZBV, 4, 8, 0);
  bars_per_rank(KT_SCHED_ZB_H2, 8, 64, 1);
  bars_per_rank(KT_SCHED_1F1B, 32, 256, 0);
  line_chart_thins();
  bar_chart();
  escape_and_series();
  measured_vs_predicted();
  degenerate();
  big_report();
  return kt_test_done(__FILE__);
}
