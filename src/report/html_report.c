/* The simulation and comparison reports: pages assembled from the SVG
 * pieces (svg.c, svg_gantt.c) and the page pieces (html.c).
 *
 * One entry: the schedule's Gantt with its memory curves aligned under it
 * on the same time scale (labels fit where the page allows; wider charts
 * scroll), per-rank busy/idle, metrics and configuration. Several entries:
 * comparison bars first, then every Gantt on one shared time scale so the
 * lengths compare directly, memory small multiples on shared axes, the
 * metrics table and the configuration.
 */
#include <math.h>
#include "kaiten/generators.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/svg_util.h"
#include "report/whatif.h"

#define PAGE_W 1320             /* content width charts are laid out for (a 1400 px window) */
#define MAX_DETAIL_W 4000       /* a single schedule's chart may scroll up to this width */
#define MAX_DETAIL_RECTS 4000   /* the Gantt's default: more actions are drawn aggregated */
#define PAGE_DETAIL_RECTS 16000 /* a comparison shares this among its Gantts (~1.7 MB) */

static double peak_memory(const kt_metrics *m) {
  double peak = 0;
  for (int r = 0; r < m->p; r++)
    if (m->ranks[r].peak_memory > peak) peak = m->ranks[r].peak_memory;
  return peak;
}

static void time_range(const kt_timeline *t, double *t0, double *t1) {
  for (size_t i = 0; i < t->n_events; i++) {
    if (t->events[i].start < *t0) *t0 = t->events[i].start;
    if (t->events[i].end > *t1) *t1 = t->events[i].end;
  }
}

static const char *unit_name(const char *u) { return !strcmp(u, "unit") ? "cost units" : u; }

static void mem_axis_label(const kt_timeline *t, char *buf, size_t n) {
  if (!strcmp(t->mem_unit, "unit")) snprintf(buf, n, "memory (units of M_B)");
  else snprintf(buf, n, "memory (%s)", t->mem_unit);
}

/* "1" or "1, 2, 1, 1" (per stage, elided past 12 values). */
static void cost_text(char *buf, size_t n, double uniform, const double *per, int ns) {
  if (!per || ns <= 0) {
    snprintf(buf, n, "%g", uniform);
    return;
  }
  size_t len = 0;
  for (int s = 0; s < ns && len + 16 < n; s++) {
    if (s == 12 && ns > 13) {
      len += (size_t)snprintf(buf + len, n - len, ", \xe2\x80\xa6");
      s = ns - 2;
      continue;
    }
    len += (size_t)snprintf(buf + len, n - len, "%s%g", s ? ", " : "", per[s]);
  }
}

static void facts(kt_buf *b, const kt_report_entry *e) {
  const kt_metrics *m = e->metrics;
  kt_buf_printf(b, "<span class=\"facts\">period <b>%g</b> %s", m->period,
                unit_name(e->timeline->time_unit));
  if (m->step_sync >= 0)
    kt_buf_printf(b, " (a step, %s)", kt_step_sync_name((kt_step_sync)m->step_sync));
  kt_buf_printf(b, " &#183; makespan %g &#183; bubble <b>%.1f%%</b>", m->makespan,
                100 * m->bubble_ratio);
  if (e->info.closed_form >= 0 && e->info.closed_form_expr) {
    kt_buf_puts(b, " (closed form ");
    kt_html_text(b, e->info.closed_form_expr);
    kt_buf_printf(b, " = %.1f%%)", 100 * e->info.closed_form);
  }
  kt_buf_printf(b,
                " &#183; peak memory <b>%g</b> &#183; P=%d V=%d M=%d &#183; %zu messages"
                "</span>\n",
                peak_memory(m), e->info.p, e->info.v, e->info.m, e->info.messages);
}

/* The what-if panel under an entry's Gantt: costs as the user gave them
 * (else the stage costs it ran with); the order as it ran unless a
 * generator makes it again (a schedule file's, say). */
static void whatif(kt_buf *b, const kt_report_entry *e, const kt_costs *given) {
  int generated = e->info.schedule && kt_gen_kind_from_name(e->info.schedule) >= 0;
  kt__whatif_seed w = {.name = e->info.schedule,
                       .p = e->info.p,
                       .m = e->info.m,
                       .v = e->info.v,
                       .basis = given ? e->info.cost_basis : "stage",
                       .costs = given ? given : e->info.costs,
                       .mem_limit = e->info.mem_limit,
                       .order = generated ? NULL : e->timeline};
  if (w.costs) kt__whatif_panel(b, &w);
}

static void gantt(kt_buf *b, const kt_report_entry *e, double ppu, double t0, double t1,
                  size_t max_rects) {
  kt_svg_gantt_opts go;
  kt_svg_gantt_default_opts(&go);
  char id[64], title[96];
  snprintf(id, sizeof id, "gantt-%s", e->info.schedule ? e->info.schedule : "schedule");
  snprintf(title, sizeof title, "%s: P=%d V=%d M=%d", e->info.schedule ? e->info.schedule : "",
           e->info.p, e->info.v, e->info.m);
  go.id = id;
  go.title = title;
  go.chunks = e->info.v;
  go.px_per_unit = ppu;
  go.t_min = t0;
  go.t_max = t1;
  go.max_rects = max_rects;
  go.embed_memory = 1; /* the replay's memory counters */
  kt_svg_gantt(b, e->timeline, &go);
}

/* Memory curves of up to MAX_CURVES ranks (evenly spaced, first and last
 * included): more lines than that are a smear, not a chart. */
#define MAX_CURVES 8

static void memory_chart(kt_buf *b, const kt_report_entry *e, double t0, double t1, int width,
                         int height, double y_max, const char *title) {
  kt_series *s, shown[MAX_CURVES];
  size_t n;
  if (kt_timeline_mem_series(e->timeline, t0, t1, &s, &n)) {
    b->failed = 1;
    return;
  }
  size_t n_shown = n < MAX_CURVES ? n : MAX_CURVES;
  for (size_t i = 0; i < n_shown; i++)
    shown[i] =
        s[n_shown > 1 ? (size_t)llround((double)i * (double)(n - 1) / (double)(n_shown - 1)) : 0];
  char full_title[128];
  if (n > n_shown) {
    snprintf(full_title, sizeof full_title, "%s (%zu of %zu ranks)", title ? title : "Memory",
             n_shown, n);
    title = full_title;
  }
  char ylab[64], xlab[64], id[64];
  mem_axis_label(e->timeline, ylab, sizeof ylab);
  snprintf(xlab, sizeof xlab, "time (%s)", unit_name(e->timeline->time_unit));
  snprintf(id, sizeof id, "memory-%s", e->info.schedule ? e->info.schedule : "schedule");
  kt_chart_opts co;
  kt_chart_default_opts(&co);
  co.id = id;
  co.title = title;
  co.width = width;
  co.height = height;
  co.x_min = t0;
  co.x_max = t1;
  co.y_min = 0;
  co.y_max = y_max;
  co.x_label = xlab;
  co.y_label = ylab;
  kt_svg_line_chart(b, &co, shown, n_shown);
  kt_series_free(s, n);
}

/* A y extent on a round number a little above v. */
static double nice_max(double v) {
  if (!(v > 0)) return 1;
  double step = kt__nice_step(v / 4);
  double top = ceil(v / step - 1e-9) * step;
  return top <= v ? top + step / 2 : top;
}

static void summary_bars(kt_buf *b, const kt_report_entry *e, size_t n) {
  const char **labels = kt_calloc(n, sizeof *labels);
  double *vals = kt_calloc(3 * n, sizeof *vals);
  if (!labels || !vals) {
    b->failed = 1;
    free(labels);
    free(vals);
    return;
  }
  size_t k = 0;
  const char *tunit = "cost units", *munit = "unit";
  for (size_t i = 0; i < n; i++) {
    if (!e[i].timeline) continue;
    labels[k] = e[i].info.schedule;
    vals[k] = 100 * e[i].metrics->bubble_ratio;
    vals[n + k] = e[i].metrics->period;
    vals[2 * n + k] = peak_memory(e[i].metrics);
    tunit = unit_name(e[i].timeline->time_unit);
    munit = e[i].timeline->mem_unit;
    k++;
  }
  char xl[3][64];
  snprintf(xl[0], sizeof xl[0], "bubble ratio (%% of P \xc3\x97 period)");
  snprintf(xl[1], sizeof xl[1], "period, a step (%s)", tunit);
  snprintf(xl[2], sizeof xl[2],
           !strcmp(munit, "unit") ? "peak memory (units of M_B)" : "peak memory (%s)", munit);
  static const char *const titles[3] = {"Bubble ratio", "Period", "Peak memory (max over ranks)"};
  static const char *const ids[3] = {"bars-bubble", "bars-period", "bars-memory"};
  static const char *const colors[3][1] = {{"#D55E00"}, {"#56B4E9"}, {"#009E73"}};
  static const char *const fmts[3] = {"%.1f%%", "%g", "%g"};
  kt_buf_puts(b, "<div class=\"row\">\n");
  for (int c = 0; c < 3; c++) {
    kt_chart_opts co;
    kt_chart_default_opts(&co);
    co.width = (PAGE_W - 2 * 14 - 3 * 18) / 3; /* three cards in a row */
    co.title = titles[c];
    co.id = ids[c];
    co.x_label = xl[c];
    kt_bar_data d = {.labels = labels,
                     .n = k,
                     .k = 1,
                     .values = vals + (size_t)c * n,
                     .colors = colors[c],
                     .value_fmt = fmts[c]};
    kt_buf_puts(b, "<div class=\"card\">\n");
    kt_svg_bar_chart(b, &co, &d);
    kt_buf_puts(b, "</div>\n");
  }
  kt_buf_puts(b, "</div>\n");
  free(labels);
  free(vals);
}

/* Fills a table of cells with printf; keeps the strings in one arena. */
typedef struct {
  char (*cells)[96];
  const char **ptr;
  size_t n, used;
} cell_arena;

static int arena_init(cell_arena *a, size_t n) {
  a->cells = kt_calloc(n ? n : 1, sizeof *a->cells);
  a->ptr = kt_calloc(n ? n : 1, sizeof *a->ptr);
  a->n = n;
  a->used = 0;
  return a->cells && a->ptr ? 0 : -1;
}

static void arena_free(cell_arena *a) {
  free(a->cells);
  free(a->ptr);
}

__attribute__((format(printf, 2, 3))) static void cell(cell_arena *a, const char *fmt, ...) {
  if (a->used >= a->n) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(a->cells[a->used], sizeof a->cells[a->used], fmt, ap);
  va_end(ap);
  a->ptr[a->used] = a->cells[a->used];
  a->used++;
}

static void metrics_table(kt_buf *b, const kt_report_entry *e, size_t n) {
  static const char *const head[] = {
      "schedule", "V",        "period",     "makespan",      "bubble",           "closed form",
      "formula",  "peak mem", "mem rank 0", "mem last rank", "in-flight rank 0", "messages"};
  enum { NC = sizeof head / sizeof *head };
  cell_arena a;
  if (arena_init(&a, n * NC)) {
    b->failed = 1;
    arena_free(&a);
    return;
  }
  size_t rows = 0;
  for (size_t i = 0; i < n; i++) {
    if (!e[i].timeline) continue;
    const kt_metrics *m = e[i].metrics;
    cell(&a, "%s", e[i].info.schedule);
    cell(&a, "%d", e[i].info.v);
    cell(&a, "%g", m->period);
    cell(&a, "%g", m->makespan);
    cell(&a, "%.2f%%", 100 * m->bubble_ratio);
    if (e[i].info.closed_form >= 0) cell(&a, "%.2f%%", 100 * e[i].info.closed_form);
    else cell(&a, "-");
    cell(&a, "%s",
         e[i].info.closed_form_expr && e[i].info.closed_form >= 0 ? e[i].info.closed_form_expr
                                                                  : "-");
    cell(&a, "%g", peak_memory(m));
    cell(&a, "%g", m->ranks[0].peak_memory);
    cell(&a, "%g", m->ranks[m->p - 1].peak_memory);
    cell(&a, "%d", m->ranks[0].peak_inflight);
    cell(&a, "%zu", e[i].info.messages);
    rows++;
  }
  kt_html_table(b, NULL, head, NC, a.ptr, rows);
  arena_free(&a);
}

static void rank_table(kt_buf *b, const kt_metrics *m) {
  static const char *const head[] = {"rank",        "busy",           "idle",   "utilisation",
                                     "peak memory", "peak in-flight", "actions"};
  enum { NC = sizeof head / sizeof *head };
  cell_arena a;
  if (arena_init(&a, (size_t)m->p * NC)) {
    b->failed = 1;
    arena_free(&a);
    return;
  }
  for (int r = 0; r < m->p; r++) {
    const kt_rank_metrics *rm = &m->ranks[r];
    cell(&a, "%d", r);
    cell(&a, "%g", rm->busy);
    cell(&a, "%g", rm->idle);
    cell(&a, "%.1f%%", m->period > 0 ? 100 * rm->busy / m->period : 0);
    cell(&a, "%g", rm->peak_memory);
    cell(&a, "%d", rm->peak_inflight);
    cell(&a, "%zu", rm->actions);
  }
  kt_html_table(b, NULL, head, NC, a.ptr, (size_t)m->p);
  arena_free(&a);
}

static void config_table(kt_buf *b, const kt_report_entry *e, size_t n, const kt_costs *c) {
  cell_arena a;
  if (arena_init(&a, 2 * 16)) {
    b->failed = 1;
    arena_free(&a);
    return;
  }
  const kt_report_entry *first = NULL;
  for (size_t i = 0; i < n && !first; i++)
    if (e[i].timeline) first = &e[i];
  if (!first && n) first = &e[0];
  char v[96];
  if (first && first->info.p > 0) {
    cell(&a, "ranks P"), cell(&a, "%d", first->info.p);
    cell(&a, "micro-batches M"), cell(&a, "%d", first->info.m);
  }
  if (n == 1 && first && first->timeline) {
    cell(&a, "schedule"), cell(&a, "%s", first->info.schedule);
    cell(&a, "chunks per rank V"), cell(&a, "%d", first->info.v);
    cell(&a, "placement"), cell(&a, "%s", first->info.placement ? first->info.placement : "loop");
  } else {
    size_t len = 0;
    v[0] = 0;
    for (size_t i = 0; i < n && len + 2 < sizeof v; i++)
      len += (size_t)snprintf(v + len, sizeof v - len, "%s%s", i ? ", " : "",
                              e[i].info.schedule ? e[i].info.schedule : "?");
    cell(&a, "schedules"), cell(&a, "%s", v);
  }
  if (c) {
    int ns = c->n_stages;
    cost_text(v, sizeof v, c->tf, c->stage_tf, ns), cell(&a, "T_F forward"), cell(&a, "%s", v);
    cost_text(v, sizeof v, c->tb, c->stage_tb, ns), cell(&a, "T_B input gradient"),
        cell(&a, "%s", v);
    cost_text(v, sizeof v, c->tw, c->stage_tw, ns), cell(&a, "T_W weight gradient"),
        cell(&a, "%s", v);
    cell(&a, "T_comm per hop"), cell(&a, "%g", kt_cost_comm(c));
    cost_text(v, sizeof v, c->mem_act, c->stage_mem_act, ns), cell(&a, "M_B activation memory"),
        cell(&a, "%s", v);
    cost_text(v, sizeof v, c->mem_wgrad, c->stage_mem_wgrad, ns),
        cell(&a, "M_W weight-gradient memory"), cell(&a, "%s", v);
  }
  if (first && first->timeline)
    cell(&a, "time unit"), cell(&a, "%s", unit_name(first->timeline->time_unit));
  static const char *const head[] = {"parameter", "value"};
  kt_html_table(b, NULL, head, 2, a.ptr, a.used / 2);
  arena_free(&a);
}

static void not_applicable(kt_buf *b, const kt_report_entry *e, size_t n) {
  int any = 0;
  for (size_t i = 0; i < n; i++) {
    if (e[i].timeline) continue;
    if (!any++) kt_buf_puts(b, "<p class=\"na\">Not applicable here:</p>\n<ul class=\"na\">\n");
    kt_buf_puts(b, "<li><b>");
    kt_html_text(b, e[i].info.schedule ? e[i].info.schedule : "?");
    kt_buf_puts(b, "</b>: ");
    kt_html_text(b, e[i].reason ? e[i].reason : "not applicable");
    kt_buf_puts(b, "</li>\n");
  }
  if (any) kt_buf_puts(b, "</ul>\n");
}

static void compare_body(kt_buf *b, const kt_report_entry *e, size_t n, double t0, double t1,
                         const kt_costs *costs) {
  double span = t1 - t0 > 0 ? t1 - t0 : 1;
  double ppu = kt_svg_fit_scale(span, PAGE_W);
  size_t ok = 0;
  for (size_t i = 0; i < n; i++) ok += e[i].timeline != NULL;
  size_t max_rects = PAGE_DETAIL_RECTS / (ok ? ok : 1);
  if (max_rects > MAX_DETAIL_RECTS) max_rects = MAX_DETAIL_RECTS;
  double ymax = 0;
  for (size_t i = 0; i < n; i++)
    if (e[i].timeline && peak_memory(e[i].metrics) > ymax) ymax = peak_memory(e[i].metrics);
  kt_html_section_begin(
      b, "summary", "Comparison",
      "Period: a step in steady state (its step sync); makespan: one step alone. Bubble ratio: idle share of P \xc3\x97 period. Peak memory: the "
      "highest rank's activation memory. Shorter bars are better.");
  summary_bars(b, e, n);
  kt_html_section_end(b);
  kt_html_section_begin(b, "pipelines", "Pipelines",
                        "One row per rank, time to the right, all on the same time scale. "
                        "Empty grey lane = idle (the bubble). Hover a bar for details.");
  for (size_t i = 0; i < n; i++) {
    if (!e[i].timeline) continue;
    kt_buf_puts(b, "<div class=\"sched\">\n<div class=\"head\"><h3>");
    kt_html_text(b, e[i].info.schedule);
    kt_buf_puts(b, "</h3>");
    facts(b, &e[i]);
    kt_buf_puts(b, "</div>\n");
    double a = INFINITY, z = -INFINITY;
    time_range(e[i].timeline, &a, &z);
    kt_buf_puts(b, "<div class=\"scroll\">\n");
    gantt(b, &e[i], ppu, t0, z > t0 ? z : t1, max_rects);
    kt_buf_puts(b, "</div>\n");
    whatif(b, &e[i], costs);
    kt_buf_puts(b, "</div>\n");
  }
  not_applicable(b, e, n);
  kt_html_section_end(b);
  kt_html_section_begin(b, "memory", "Memory over time",
                        "Activation memory held by each rank; same axes in every chart.");
  kt_buf_puts(b, "<div class=\"row\">\n");
  for (size_t i = 0; i < n; i++) {
    if (!e[i].timeline) continue;
    kt_buf_puts(b, "<div class=\"card\">\n");
    memory_chart(b, &e[i], t0, t1, (PAGE_W - 2 * 14 - 2 * 18) / 2, 190, nice_max(ymax),
                 e[i].info.schedule);
    kt_buf_puts(b, "</div>\n");
  }
  kt_buf_puts(b, "</div>\n");
  kt_html_section_end(b);
  kt_html_section_begin(b, "metrics", "Metrics", NULL);
  metrics_table(b, e, n);
  kt_html_section_end(b);
}

static void sim_body(kt_buf *b, const kt_report_entry *e, double t0, double t1,
                     const kt_costs *costs) {
  double span = t1 - t0 > 0 ? t1 - t0 : 1;
  /* labels fit when the narrowest action is wide enough for its label */
  double need = 0;
  const kt_timeline *t = e->timeline;
  for (size_t i = 0; i < t->n_events; i++) {
    char lab[32];
    kt_event_label(&t->events[i], e->info.v, lab, sizeof lab);
    double d = t->events[i].end - t->events[i].start;
    double ppu = d > 0 ? (kt__text_width(lab, 11) + 4) / d : 0;
    if (ppu > need) need = ppu;
  }
  double ppu = kt_svg_fit_scale(span, PAGE_W), cap = kt_svg_fit_scale(span, MAX_DETAIL_W);
  if (need > ppu && t->n_events <= MAX_DETAIL_RECTS) ppu = need < cap ? need : cap;
  /* whole pixels, so the memory chart under it lines up exactly */
  int width = kt__svg_width(span, ppu);
  ppu = kt_svg_fit_scale(span, width);
  kt_html_section_begin(b, "pipeline", "Pipeline",
                        "One row per rank, time to the right; empty grey lane = idle (the "
                        "bubble). Memory below is on the same time axis. Hover for details.");
  kt_buf_puts(b, "<div class=\"head\"><h3>");
  kt_html_text(b, e->info.schedule);
  kt_buf_puts(b, "</h3>");
  facts(b, e);
  kt_buf_puts(b, "</div>\n<div class=\"scroll\">\n");
  gantt(b, e, ppu, t0, t1, MAX_DETAIL_RECTS);
  memory_chart(b, e, t0, t1, width, 200, 0, "Memory over time");
  kt_buf_puts(b, "</div>\n");
  whatif(b, e, costs);
  kt_html_section_end(b);
  kt_html_section_begin(b, "ranks", "Ranks", "Busy and idle time of each rank within the period.");
  char xl[64];
  snprintf(xl, sizeof xl, "time (%s)", unit_name(t->time_unit));
  kt_chart_opts co;
  kt_chart_default_opts(&co);
  co.id = "utilisation";
  co.width = 640;
  kt_buf_puts(b, "<div class=\"row\">\n<div class=\"card\">\n");
  kt_svg_rank_utilisation(b, e->metrics, xl, &co);
  kt_buf_puts(b, "</div>\n<div>\n");
  rank_table(b, e->metrics);
  kt_buf_puts(b, "</div>\n</div>\n");
  kt_html_section_end(b);
}

void kt_render_html_report(kt_buf *b, const char *title, const kt_report_entry *e, size_t n,
                           const kt_costs *costs) {
  double t0 = INFINITY, t1 = -INFINITY;
  size_t ok = 0;
  for (size_t i = 0; i < n; i++)
    if (e[i].timeline && e[i].metrics) time_range(e[i].timeline, &t0, &t1), ok++;
  if (!isfinite(t0)) t0 = 0, t1 = 1;
  char sub[1024];
  const kt_report_entry *f = n ? &e[0] : NULL;
  for (size_t i = 0; i < n; i++)
    if (e[i].timeline) {
      f = &e[i];
      break;
    }
  const kt_costs *c = costs ? costs : f ? f->info.costs : NULL;
  char ctext[400] = "", basis[200] = "";
  if (c) kt_costs_describe(c, ctext, sizeof ctext);
  const char *b_name = f ? f->info.cost_basis : NULL;
  if (b_name && !strcmp(b_name, "rank"))
    snprintf(basis, sizeof basis,
             " Costs are one rank's share of the model: a schedule with V "
             "chunks per rank runs 1/V of them per stage.");
  else if (b_name) snprintf(basis, sizeof basis, " Costs are per stage.");
  if (c && f)
    snprintf(sub, sizeof sub, "P=%d, M=%d%s. Simulated with %s; memory M_B=%g, M_W=%g.%s",
             f->info.p, f->info.m, n == 1 ? "" : ", every applicable schedule", ctext, c->mem_act,
             c->mem_wgrad, basis);
  else if (f) snprintf(sub, sizeof sub, "P=%d, M=%d", f->info.p, f->info.m);
  else snprintf(sub, sizeof sub, "Nothing was simulated.");
  kt_html_begin(b, title, sub);
  if (ok == 0) {
    kt_html_section_begin(b, "pipelines", "Pipelines", "Nothing to draw.");
    not_applicable(b, e, n);
    kt_html_section_end(b);
  } else if (n == 1) {
    sim_body(b, e, t0, t1, costs);
  } else {
    compare_body(b, e, n, t0, t1, costs);
  }
  kt_html_section_begin(b, "config", "Configuration", NULL);
  config_table(b, e, n, c);
  kt_html_section_end(b);
  kt_html_end(b);
}

kt_status kt_write_html_report(const char *path, const char *title, const kt_report_entry *entries,
                               size_t n, const kt_costs *costs, kt_error *err) {
  kt_buf b;
  kt_buf_init(&b);
  kt_render_html_report(&b, title, entries, n, costs);
  kt_status st = b.failed ? kt_fail(err, KT_ENOMEM, "out of memory rendering the report %s", path)
                          : kt_write_output(path, b.data, b.len, err);
  kt_buf_free(&b);
  return st;
}
