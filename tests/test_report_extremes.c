/* Every renderer on values no run should produce but a file can hold: NaN,
 * ±inf, ±1e308, denormals, a constant series (0, -1e20, 2^53, 1e308), times
 * that overflow to infinity when subtracted. Each rendering must end within a
 * second, stay under a few MB, write no "nan"/"inf" into SVG coordinates and
 * put at most KT_MAX_TICKS ticks on an axis (issue 35, section 2). Under
 * UBSan (make asan) this is also the check that kt__svg_num and the casts
 * from double are defined for every value. */
#include <float.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "kaiten/core.h"
#include "kaiten/report.h"
#include "kaiten/rundir.h"
#include "report/svg_util.h"

#define N 40
#define MAX_OUT (4u << 20)

static const double specials[] = {0,      1,       -1e20,    1e20,      9007199254740992.0,
                                  -1e308, 1e308,   DBL_MAX,  -DBL_MAX,  1e-308,
                                  5e-324, -5e-324, INFINITY, -INFINITY, NAN,
                                  9.3e18, -9.3e18, 1e300,    -1e300};
#define N_SPECIAL (sizeof specials / sizeof *specials)

/* No "nan" or "inf" in the output (as a number: "nan" inside a word is
 * fine), bounded size and time. */
static void check_output(const kt_buf *b, double t0, const char *what, double v) {
  CHECK_MSG(!b->failed, "%s (%g): buffer failed", what, v);
  CHECK_MSG(b->len < MAX_OUT, "%s (%g): %zu bytes", what, v, b->len);
  CHECK_MSG(kt_now() - t0 < 1.0, "%s (%g): %.2f s", what, v, kt_now() - t0);
  const char *d = b->data ? b->data : "";
  for (const char *p = d; (p = strpbrk(p, "=\" ")) != NULL; p++) {
    const char *q = p + 1;
    if (*q == '-') q++;
    int bad = !strncmp(q, "nan", 3) || !strncmp(q, "inf", 3) || !strncmp(q, "NaN", 3) ||
              !strncmp(q, "Inf", 3);
    if (bad) {
      CHECK_MSG(0, "%s (%g): non-finite number near '%.40s'", what, v, p);
      break;
    }
  }
}

/* Tick labels: <text ... text-anchor="end"> in the y axis group. */
static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; p && (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
  return n;
}

static void line_charts(void) {
  double x[N], y[N];
  for (size_t k = 0; k < N_SPECIAL; k++) {
    for (int pattern = 0; pattern < 4; pattern++) {
      double v = specials[k];
      for (int i = 0; i < N; i++) {
        x[i] = i + 1;
        switch (pattern) {
          case 0: y[i] = v; break;                               /* constant */
          case 1: y[i] = i % 2 ? v : -v; break;                  /* alternating */
          case 2: y[i] = i == N / 2 ? v : 0.5 + 0.01 * i; break; /* one outlier */
          default: x[i] = v * (i + 1), y[i] = i; break;          /* huge or odd x */
        }
      }
      for (int log_y = 0; log_y < 2; log_y++) {
        kt_series s = {.name = "s", .x = x, .y = y, .n = N, .markers = 1};
        kt_chart_opts o;
        kt_chart_default_opts(&o);
        o.title = "t";
        o.x_label = "step";
        o.y_label = "loss";
        o.log_y = log_y;
        kt_buf b;
        kt_buf_init(&b);
        double t0 = kt_now();
        kt_svg_line_chart(&b, &o, &s, 1);
        check_output(&b, t0, log_y ? "log line chart" : "line chart", v);
        CHECK_MSG(count(b.data, "text-anchor=\"end\"") <= KT_MAX_TICKS + 1,
                  "line chart (%g, pattern %d): %d y ticks", v, pattern,
                  count(b.data, "text-anchor=\"end\""));
        kt_buf_free(&b);
      }
    }
  }
}

static void bar_charts(void) {
  for (size_t k = 0; k < N_SPECIAL; k++) {
    double vals[6] = {specials[k], specials[k], 1, specials[k], -specials[k], 2};
    const char *labels[3] = {"a", "b", "c"};
    for (int stacked = 0; stacked < 2; stacked++) {
      kt_bar_data d = {.labels = labels, .values = vals, .n = 3, .k = 2, .stacked = stacked};
      kt_buf b;
      kt_buf_init(&b);
      double t0 = kt_now();
      kt_svg_bar_chart(&b, NULL, &d);
      check_output(&b, t0, "bar chart", specials[k]);
      kt_buf_free(&b);
    }
  }
}

/* A 2-rank timeline with one event at [a, b] among ordinary ones. */
static void timeline_with(kt_timeline *t, double a, double b) {
  kt_timeline_init(t, 2, "s", "B");
  for (int i = 0; i < 6; i++) {
    kt_event e = {
        .rank = i % 2, .stage = i % 2, .mb = i / 2, .op = KT_OP_F, .start = i, .end = i + 0.5};
    kt_timeline_add_event(t, &e);
  }
  kt_event e = {.rank = 1, .stage = 1, .mb = 3, .op = KT_OP_B, .start = a, .end = b};
  kt_timeline_add_event(t, &e);
  kt_timeline_add_mem(t, 0, a, 1e300);
  kt_timeline_add_mem(t, 1, 2, 5);
}

static void gantts(void) {
  for (size_t k = 0; k < N_SPECIAL; k++)
    for (size_t j = 0; j < N_SPECIAL; j++) {
      double a = specials[k], z = specials[j];
      if (!(z >= a)) continue; /* a timeline's events end after they start */
      kt_timeline t;
      timeline_with(&t, a, z);
      for (int agg = 0; agg < 2; agg++) {
        kt_svg_gantt_opts o;
        kt_svg_gantt_default_opts(&o);
        o.force_aggregate = agg;
        o.embed_memory = 1;
        o.predicted = &t;
        kt_buf b;
        kt_buf_init(&b);
        double t0 = kt_now();
        kt_svg_gantt(&b, &t, &o);
        check_output(&b, t0, agg ? "svg gantt (aggregated)" : "svg gantt", a);
        kt_buf_free(&b);
      }
      kt_gantt_opts go;
      kt_gantt_default_opts(&go);
      kt_buf b;
      kt_buf_init(&b);
      double t0 = kt_now();
      kt_render_gantt_ascii(&t, &go, &b);
      CHECK_MSG(!b.failed && b.len < MAX_OUT && kt_now() - t0 < 1.0,
                "ascii gantt [%g, %g]: %zu bytes, %.2f s", a, z, b.len, kt_now() - t0);
      kt_buf_free(&b);
      kt_timeline_free(&t);
    }
}

/* The run report of a run whose every step holds v, traced step [a, b]. */
static void run_reports(void) {
  for (size_t k = 0; k < N_SPECIAL; k++) {
    double v = specials[k];
    kt_run r;
    memset(&r, 0, sizeof r);
    r.n_steps = 120; /* past the moving average's threshold */
    r.steps = kt_calloc(r.n_steps, sizeof *r.steps);
    r.ranks = 2;
    r.rank_steps = kt_calloc(r.n_steps * 2, sizeof *r.rank_steps);
    REQUIRE_VOID(r.steps && r.rank_steps);
    for (size_t i = 0; i < r.n_steps; i++) {
      r.steps[i] = (kt_run_step){.step = (int)i + 1,
                                 .loss = i % 3 ? v : -v,
                                 .val_loss = v,
                                 .lr = v,
                                 .grad_norm = v,
                                 .seconds = v,
                                 .tokens_per_s = v,
                                 .samples_per_s = v,
                                 .bubble = v};
      for (int q = 0; q < 2; q++)
        r.rank_steps[i * 2 + q] = (kt_run_rank_step){v, v, v, v, {v, v, v, v, v, v}};
    }
    snprintf(r.model, sizeof r.model, "mlp");
    snprintf(r.schedule, sizeof r.schedule, "1f1b");
    r.p = 2, r.v = 1, r.m = 4;
    timeline_with(&r.measured, 0, v);
    timeline_with(&r.predicted, 0, v);
    r.has_timeline = isfinite(v) && v >= 0;
    r.has_memory = 1;
    kt_costs_default(&r.calibrated);
    r.calibrated.tf = r.calibrated.tb = r.calibrated.tw = r.calibrated.comm = v;
    r.has_calibrated = 1;
    kt_buf b;
    kt_buf_init(&b);
    double t0 = kt_now();
    kt_render_run_report(&b, &r, "extremes");
    CHECK_MSG(!b.failed && b.len < 8 * MAX_OUT && kt_now() - t0 < 2.0,
              "run report (%g): %zu bytes, %.2f s", v, b.len, kt_now() - t0);
    kt_buf_free(&b);
    kt_run_free(&r);
  }
}

static void numbers(void) {
  for (size_t k = 0; k < N_SPECIAL; k++) {
    kt_buf b;
    kt_buf_init(&b);
    kt__svg_num(&b, specials[k]);
    double back = atof(b.data);
    CHECK_MSG(isfinite(back) && fabs(back) <= 1e9, "svg_num(%g) = %s", specials[k], b.data);
    kt_buf_free(&b);
    double s = kt__nice_step(fabs(specials[k]));
    CHECK_MSG(isfinite(s) && s > 0, "nice_step(%g) = %g", specials[k], s);
    double lo = specials[k], hi = specials[k];
    kt__axis_range(&lo, &hi);
    CHECK_MSG(
        isfinite(lo) && isfinite(hi) && hi > lo && (hi - lo) > 1e-10 * fmax(fabs(lo), fabs(hi)),
        "axis_range(%g) = [%g, %g]", specials[k], lo, hi);
    kt__ticks t = kt__axis_ticks(lo, hi, 0);
    CHECK_MSG(t.n >= 1 && t.n <= KT_MAX_TICKS && t.first + (t.n - 1) * t.step > t.first - t.step,
              "axis_ticks(%g..%g): %d ticks of %g", lo, hi, t.n, t.step);
    char lab[32];
    kt__tick_label(lab, sizeof lab, specials[k], 1);
    CHECK(strlen(lab) < sizeof lab);
  }
  /* the old formula's UB: llabs(LLONG_MIN) for coordinates past 9.2e18 */
  kt_buf b;
  kt_buf_init(&b);
  kt__svg_num(&b, -9.3e18);
  CHECK_STR_CONTAINS(b.data, "-1000000000");
  kt_buf_free(&b);
}

int main(void) {
  alarm(120); /* a renderer that loops forever fails here, not at the CTest timeout */
  numbers();
  line_charts();
  bar_charts();
  gantts();
  run_reports();
  return kt_test_done("test_report_extremes");
}
