/* The run report: one self-contained page for a training run directory
 * (kt_run, read by run_report_load.c), assembled from the SVG and page
 * pieces like the simulation report.
 *
 * Sections: summary, training curves (loss and validation loss, tokens/s,
 * bubble, learning rate, gradient norm; x = step), the traced step (measured
 * Gantt with the prediction as a strip under each rank, its memory on the
 * same time axis), stages (busy/idle per rank over the run, measured versus
 * predicted busy time in the traced step), memory and communication per step
 * per rank, and the configuration.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/run_report.h"
#include "report/whatif.h"

/* ---- small helpers ------------------------------------------------------------ */

/* Table cells collected in one buffer, NUL-separated; pointers made at the end. */
typedef struct {
  kt_buf text;
  size_t *off, n, cap;
  const char **ptr;
} cells;

static void cells_init(cells *c) {
  memset(c, 0, sizeof *c);
  kt_buf_init(&c->text);
}

__attribute__((format(printf, 2, 3))) static void cellf(cells *c, const char *fmt, ...) {
  if (kt_grow((void **)&c->off, &c->cap, c->n + 1, sizeof *c->off)) {
    c->text.failed = 1;
    return;
  }
  c->off[c->n++] = c->text.len;
  char tmp[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  kt_buf_append(&c->text, tmp, strlen(tmp) + 1);
}

/* Emits the cells as a table of ncols columns and frees them. */
static void cells_table(kt_buf *b, cells *c, const char *caption, const char *const *head,
                        size_t ncols) {
  c->ptr = kt_calloc(c->n ? c->n : 1, sizeof *c->ptr);
  if (!c->ptr || c->text.failed) {
    b->failed = 1;
  } else {
    for (size_t i = 0; i < c->n; i++) c->ptr[i] = c->text.data + c->off[i];
    kt_html_table(b, caption, head, ncols, c->ptr, c->n / ncols);
  }
  free(c->ptr);
  free(c->off);
  kt_buf_free(&c->text);
  memset(c, 0, sizeof *c);
}

/* A byte count's display unit: divisor and name. */
double kt__run_bytes_unit(double peak, const char **name) {
  if (peak >= 1024.0 * 1024 * 1024) return *name = "GiB", 1024.0 * 1024 * 1024;
  if (peak >= 1024.0 * 1024) return *name = "MiB", 1024.0 * 1024;
  if (peak >= 1024.0) return *name = "KiB", 1024.0;
  return *name = "B", 1;
}

/* Seconds shown as the Gantt shows them (same thresholds as its axis). */
double kt__run_time_scale(double span, const char **name) {
  if (span < 2e-3) return *name = "\xc2\xb5s", 1e6;
  if (span < 2) return *name = "ms", 1e3;
  return *name = "s", 1;
}

/* Up to MAX_CURVES ranks, evenly spaced, first and last included. */
int kt__run_pick_ranks(int p, int *show) {
  int n = p < MAX_CURVES ? p : MAX_CURVES;
  for (int i = 0; i < n; i++) show[i] = n > 1 ? (int)lround((double)i * (p - 1) / (n - 1)) : 0;
  return n;
}

void kt__run_chart_opts(kt_chart_opts *co, const char *id, const char *title, const char *xl,
                        const char *yl, int w, int h) {
  kt_chart_default_opts(co);
  co->id = id, co->title = title, co->x_label = xl, co->y_label = yl;
  co->width = w, co->height = h;
}

void kt__run_card_begin(kt_buf *b) { kt_buf_puts(b, "<div class=\"card\">\n"); }
void kt__run_card_end(kt_buf *b) { kt_buf_puts(b, "</div>\n"); }

double kt__run_rank_mean(const kt_run *r, int rank, size_t field) {
  double sum = 0;
  size_t cnt = 0;
  for (size_t i = 0; i < r->n_steps; i++) {
    const kt_run_rank_step *rs = &r->rank_steps[i * (size_t)r->ranks + (size_t)rank];
    double v = *(const double *)((const char *)rs + field);
    if (isfinite(v)) sum += v, cnt++;
  }
  return cnt ? sum / (double)cnt : NAN;
}

/* ---- the traced step and the stages ------------------------------------------- */

/* "2" or "1, 6": the stages a rank ran in the traced step (else V = 1: its
 * own number). Returns how many. */
static int stage_text(const kt_run *r, int rank, char *buf, size_t n) {
  int stages[8], ns = 0, more = 0;
  for (size_t i = 0; r->has_timeline && i < r->measured.n_events; i++) {
    const kt_event *e = &r->measured.events[i];
    if (e->rank != rank) continue;
    int seen = 0;
    for (int k = 0; k < ns; k++) seen |= stages[k] == e->stage;
    if (!seen && ns < 8) stages[ns++] = e->stage;
    else if (!seen) more = 1;
  }
  if (ns == 0) stages[ns++] = rank;
  size_t len = 0;
  buf[0] = 0;
  for (int k = 0; k < ns && len < n; k++)
    len += (size_t)snprintf(buf + len, n - len, "%s%d", k ? ", " : "", stages[k]);
  if (more && len < n) snprintf(buf + len, n - len, ", \xe2\x80\xa6");
  return ns + more;
}

/* The traced step's heading: schedule, measured and predicted period (the
 * step as it runs; the makespan, one step alone, where it differs) and
 * bubble, and the costs the prediction was calibrated with. */
static void traced_step_head(kt_buf *b, const kt_run *r, const kt_metrics *mm, const kt_metrics *pm,
                             double ts, const char *tu) {
  kt_buf_printf(b, "<div class=\"head\"><h3>");
  kt_html_text(b, r->schedule[0] ? r->schedule : "schedule");
  kt_buf_printf(b,
                "</h3><span class=\"facts\">measured: period <b>%.4g</b> %s (makespan %.4g) "
                "&#183; bubble <b>%.1f%%</b> &#8195; predicted: period <b>%.4g</b> %s (makespan "
                "%.4g) &#183; bubble <b>%.1f%%</b>",
                mm->period * ts, tu, mm->makespan * ts, 100 * mm->bubble_ratio, pm->period * ts, tu,
                pm->makespan * ts, 100 * pm->bubble_ratio);
  if (mm->step_sync >= 0)
    kt_buf_printf(b, " &#183; step sync %s", kt_step_sync_name((kt_step_sync)mm->step_sync));
  if (r->has_calibrated) kt__run_calibrated_costs(b, &r->calibrated, ts, tu);
  kt_buf_puts(b, "</span></div>\n");
}

/* Activation memory over the traced step, under its Gantt and as wide, on
 * the same time axis (span seconds, shown in tu at scale ts). */
static void traced_step_memory(kt_buf *b, const kt_run *r, double span, double ts, const char *tu,
                               int width) {
  const kt_timeline *t = &r->measured;
  double peak = kt__run_mem_ref_peak(r);
  for (size_t i = 0; i < t->n_mem; i++)
    if (t->mem[i].value > peak) peak = t->mem[i].value;
  const char *mu;
  double msc = kt__run_bytes_unit(peak, &mu);
  kt_timeline mt;
  kt_timeline_init(&mt, t->p, "s", mu);
  for (size_t i = 0; i < t->n_mem && !b->failed; i++)
    if (kt_timeline_add_mem(&mt, t->mem[i].rank, t->mem[i].t * ts, t->mem[i].value / msc))
      b->failed = 1;
  kt_series *s = NULL;
  size_t n = 0;
  if (!b->failed && kt_timeline_mem_series(&mt, 0, span * ts, &s, &n)) b->failed = 1;
  if (!b->failed) {
    int show[MAX_CURVES], ns = kt__run_pick_ranks((int)n, show);
    kt_series shown[MAX_CURVES + KT__MEM_REFS];
    for (int k = 0; k < ns; k++) shown[k] = s[show[k]];
    double ref_xy[4 * KT__MEM_REFS];
    char ref_names[KT__MEM_REFS][64];
    int refs = kt__run_mem_refs(r, msc, 0, span * ts, shown + ns, ref_xy, ref_names);
    char xl[32], yl[48], title[96];
    snprintf(xl, sizeof xl, "time (%s)", tu);
    snprintf(yl, sizeof yl, "activations (%s)", mu);
    if (ns < (int)n)
      snprintf(title, sizeof title, "Memory in the traced step (%d of %zu ranks)", ns, n);
    else snprintf(title, sizeof title, "Memory in the traced step");
    kt_chart_opts co;
    kt__run_chart_opts(&co, "memory-step", title, xl, yl, width, 200);
    co.x_min = 0;
    co.x_max = span * ts;
    co.y_min = 0;
    kt_svg_line_chart(b, &co, shown, (size_t)(ns + refs));
  }
  kt_series_free(s, n);
  kt_timeline_free(&mt);
}

static void traced_step(kt_buf *b, const kt_run *r, const kt_metrics *mm, const kt_metrics *pm) {
  const kt_timeline *t = &r->measured;
  double span = kt__axis_clamp(mm->makespan > pm->makespan ? mm->makespan : pm->makespan);
  if (!(span > 0)) span = 1e-6;
  const char *tu;
  double ts = kt__run_time_scale(span, &tu);
  traced_step_head(b, r, mm, pm, ts, tu);
  int v = 1; /* chunks per rank: the stages drawn */
  for (size_t i = 0; i < t->n_events; i++)
    if (t->events[i].stage / t->p + 1 > v) v = t->events[i].stage / t->p + 1;
  /* fitted to the page: a measured step's actions vary too much in length
   * for labels to decide the width; labels go where they fit */
  double ppu = kt_svg_fit_scale(span, PAGE_W);
  int width = kt__svg_width(span, ppu);
  ppu = kt_svg_fit_scale(span, width);
  kt_svg_gantt_opts go;
  kt_svg_gantt_default_opts(&go);
  go.id = "gantt-step";
  go.title = "traced step: measured, with the prediction under each rank";
  go.chunks = v;
  go.px_per_unit = ppu;
  go.t_min = 0;
  go.t_max = span;
  go.min_bar_px = 1e-6; /* measured actions vary: thin ones must not aggregate the chart */
  go.row_height = t->p <= 8 ? 32 : 0; /* room for labels above the prediction strip */
  go.predicted = &r->predicted;
  go.predicted_label = "predicted (simulator)";
  go.embed_memory = r->has_memory;
  kt_buf_puts(b, "<div class=\"scroll\">\n");
  kt_svg_gantt(b, t, &go);
  if (r->has_memory) traced_step_memory(b, r, span, ts, tu, width);
  kt_buf_puts(b, "</div>\n");
}

static void step_table(kt_buf *b, const kt_run *r, const kt_metrics *mm, const kt_metrics *pm) {
  const char *tu, *mu;
  double ts = kt__run_time_scale(mm->makespan, &tu), peak = 0;
  for (int k = 0; k < mm->p; k++)
    if (mm->ranks[k].peak_memory > peak) peak = mm->ranks[k].peak_memory;
  double msc = kt__run_bytes_unit(peak, &mu);
  char h[6][40];
  snprintf(h[0], sizeof h[0], "busy (%s)", tu);
  snprintf(h[1], sizeof h[1], "idle (%s)", tu);
  snprintf(h[2], sizeof h[2], "predicted busy (%s)", tu);
  snprintf(h[4], sizeof h[4], "peak activations (%s)", mu);
  const char *head[] = {"rank",    "stages",       h[0],
                        h[1],      "utilisation",  h[2],
                        "actions", "sent (bytes)", r->has_memory ? h[4] : "peak in-flight"};
  cells c;
  cells_init(&c);
  for (int k = 0; k < mm->p; k++) {
    const kt_rank_metrics *m = &mm->ranks[k];
    char st[64];
    stage_text(r, k, st, sizeof st);
    cellf(&c, "%d", k);
    cellf(&c, "%s", st);
    cellf(&c, "%.3g", m->busy * ts);
    cellf(&c, "%.3g", m->idle * ts);
    cellf(&c, "%.1f%%", mm->period > 0 ? 100 * m->busy / mm->period : 0);
    cellf(&c, "%.3g", k < pm->p ? pm->ranks[k].busy * ts : NAN);
    cellf(&c, "%zu", m->actions);
    /* the timeline's events carry no bytes: the rank's figure from timeline.json */
    cellf(&c, "%.0f", r->sent_bytes ? r->sent_bytes[k] : (double)m->bytes_sent);
    if (r->has_memory) cellf(&c, "%.4g", m->peak_memory / msc);
    else cellf(&c, "%d", m->peak_inflight);
  }
  cells_table(b, &c, "per rank, traced step", head, 9);
}

/* Bar labels and values for up to p ranks (two values each), shared by the
 * two charts of the stages section. */
typedef struct {
  size_t p;
  char (*names)[96];
  const char **labels;
  double *vals;
} rank_bars;

/* Busy and idle per rank, the mean over the run's steps. */
static void run_bars_card(kt_buf *b, const kt_run *r, rank_bars *rb) {
  /* the run's mean: a step's makespan from its bubble, 1 - sum busy / (P makespan) */
  double make = 0;
  size_t cnt = 0;
  for (size_t i = 0; i < r->n_steps; i++) {
    double busy = 0;
    for (int k = 0; k < r->ranks; k++) busy += r->rank_steps[i * (size_t)r->ranks + (size_t)k].busy;
    double m = busy / ((double)r->ranks * (1 - r->steps[i].bubble));
    if (isfinite(m) && m > 0) make += m, cnt++;
  }
  make = cnt ? make / (double)cnt : NAN;
  const char *tu;
  double ts = kt__run_time_scale(isfinite(make) ? make : 1, &tu);
  for (size_t k = 0; k < rb->p; k++) {
    double busy = kt__run_rank_mean(r, (int)k, RFIELD(busy));
    char st[40];
    int many = stage_text(r, (int)k, st, sizeof st) > 1;
    snprintf(rb->names[k], sizeof rb->names[k], "rank %zu \xc2\xb7 stage%s %s (%.0f%%)", k,
             many ? "s" : "", st, make > 0 ? 100 * busy / make : 0);
    rb->labels[k] = rb->names[k];
    rb->vals[2 * k] = busy * ts;
    rb->vals[2 * k + 1] = make > busy ? (make - busy) * ts : 0;
  }
  static const char *const series[] = {"busy", "idle"};
  static const char *const colors[] = {"#0072B2", "#D9D9D9"};
  kt_bar_data d = {.labels = rb->labels,
                   .n = rb->p,
                   .series_names = series,
                   .k = 2,
                   .values = rb->vals,
                   .stacked = 1,
                   .colors = colors,
                   .value_fmt = "%.3g"};
  char xl[48];
  snprintf(xl, sizeof xl, "time per step (%s, mean over %zu steps)", tu, r->n_steps);
  kt_chart_opts co;
  kt__run_chart_opts(&co, "bars-stages", "Busy and idle per rank, whole run", xl, NULL, CARD_W2, 0);
  kt__run_card_begin(b);
  kt_svg_bar_chart(b, &co, &d);
  kt__run_card_end(b);
}

/* Measured versus predicted busy time per rank in the traced step. */
static void traced_bars_card(kt_buf *b, const kt_metrics *mm, const kt_metrics *pm, rank_bars *rb) {
  size_t q = (size_t)mm->p, p = rb->p;
  const char *tu;
  double ts = kt__run_time_scale(mm->makespan, &tu);
  for (size_t k = 0; k < q && k < p; k++) {
    snprintf(rb->names[k], sizeof rb->names[k], "rank %zu", k);
    rb->labels[k] = rb->names[k];
    rb->vals[2 * k] = mm->ranks[k].busy * ts;
    rb->vals[2 * k + 1] = k < (size_t)pm->p ? pm->ranks[k].busy * ts : NAN;
  }
  static const char *const series[] = {"measured", "predicted"};
  static const char *const colors[] = {"#0072B2", "#999999"};
  kt_bar_data d = {.labels = rb->labels,
                   .n = q < p ? q : p,
                   .series_names = series,
                   .k = 2,
                   .values = rb->vals,
                   .colors = colors,
                   .value_fmt = "%.3g"};
  char xl[48];
  snprintf(xl, sizeof xl, "busy time (%s)", tu);
  kt_chart_opts co;
  kt__run_chart_opts(&co, "bars-predicted", "Traced step: measured versus predicted busy time", xl,
                     NULL, CARD_W2, 0);
  kt__run_card_begin(b);
  kt_svg_bar_chart(b, &co, &d);
  kt__run_card_end(b);
}

static void stages_section(kt_buf *b, const kt_run *r, const kt_metrics *mm, const kt_metrics *pm) {
  if (r->ranks == 0 && !r->has_timeline) return;
  kt_html_section_begin(b, "stages", "Stages",
                        "Busy and idle time per rank (its stages in the label). Idle = the "
                        "step's pipeline makespan minus the rank's compute: its share of the "
                        "bubble.");
  kt_buf_puts(b, "<div class=\"row\">\n");
  rank_bars rb;
  rb.p = (size_t)(r->ranks ? r->ranks : mm ? mm->p : 0);
  rb.names = kt_calloc(rb.p ? rb.p : 1, sizeof *rb.names);
  rb.labels = kt_calloc(rb.p ? rb.p : 1, sizeof *rb.labels);
  rb.vals = kt_calloc(rb.p ? 2 * rb.p : 2, sizeof *rb.vals);
  int ok = rb.names && rb.labels && rb.vals;
  if (!ok) b->failed = 1;
  else if (r->ranks && r->n_steps) run_bars_card(b, r, &rb);
  if (ok && r->has_timeline && mm) traced_bars_card(b, mm, pm, &rb);
  free(rb.names);
  free(rb.labels);
  free(rb.vals);
  kt__run_idle_card(b, r);
  kt_buf_puts(b, "</div>\n");
  if (r->has_timeline && mm) step_table(b, r, mm, pm);
  kt_html_section_end(b);
}

/* ---- the page ------------------------------------------------------------------ */

static void summary(kt_buf *b, const kt_run *r, const kt_metrics *mm, const kt_metrics *pm) {
  double best_val = INFINITY, sec = 0, bub = 0, last_loss = NAN;
  double *tok_s = kt_calloc(r->n_steps + 1, sizeof *tok_s); /* tokens/s after the first step */
  size_t nt = 0, nb = 0;
  int best_step = 0;
  for (size_t i = 0; i < r->n_steps; i++) {
    const kt_run_step *s = &r->steps[i];
    if (s->val_loss < best_val) best_val = s->val_loss, best_step = s->step;
    if (isfinite(s->seconds)) sec += s->seconds;
    if (i > 0 || r->n_steps == 1) /* the first step warms up */
      if (tok_s && isfinite(s->tokens_per_s)) tok_s[nt++] = s->tokens_per_s;
    if (isfinite(s->bubble)) bub += s->bubble, nb++;
    if (isfinite(s->loss)) last_loss = s->loss;
  }
  static const char *const head[] = {"steps",
                                     "last loss",
                                     "best validation loss",
                                     "tokens/s (steady)",
                                     "step time (mean)",
                                     "bubble (mean)",
                                     "predicted bubble",
                                     "time in steps"};
  cells c;
  cells_init(&c);
  if (r->steps_planned > 0) cellf(&c, "%zu of %d", r->n_steps, r->steps_planned);
  else cellf(&c, "%zu", r->n_steps);
  cellf(&c, "%.4f", last_loss);
  if (isfinite(best_val)) cellf(&c, "%.4f (step %d)", best_val, best_step);
  else cellf(&c, "-");
  if (!tok_s) nt = 0, b->failed = 1;
  cellf(&c, "%.0f", nt ? kt_median(tok_s, nt) : NAN); /* the median once warm, as train says it */
  free(tok_s);
  cellf(&c, "%.3g ms", r->n_steps ? 1e3 * sec / (double)r->n_steps : NAN);
  cellf(&c, "%.1f%%", nb ? 100 * bub / (double)nb : NAN);
  if (pm) cellf(&c, "%.1f%%", 100 * pm->bubble_ratio);
  else cellf(&c, "-");
  if (sec < 1) cellf(&c, "%.3g ms", 1e3 * sec);
  else cellf(&c, "%.3g s", sec);
  cells_table(b, &c, NULL, head, 8);
  (void)mm;
  if (r->skipped_lines)
    kt_buf_printf(b,
                  "<p class=\"note\">%zu torn line at the end of metrics.jsonl skipped (the "
                  "run was interrupted while writing it).</p>\n",
                  r->skipped_lines);
}

/* The layouts the run trained under: one row per segment (a run resumed
 * under another layout has several), each with its own bubble. */
static void segments_table(kt_buf *b, const kt_run *r) {
  const kt_run_config *c = &r->cfg;
  if (c->n_segments < 1) return;
  static const char *const head[] = {"steps",
                                     "schedule",
                                     "P",
                                     "V",
                                     "M",
                                     "b",
                                     "K",
                                     "D",
                                     "transport",
                                     "bubble (measured)",
                                     "bubble (predicted)"};
  cells t;
  cells_init(&t);
  for (int i = 0; i < c->n_segments; i++) {
    const kt_run_segment *s = &c->segments[i];
    int last =
        s->last_step >= 0 ? s->last_step : (int)(r->n_steps ? r->steps[r->n_steps - 1].step : 0);
    cellf(&t, "steps %d\xe2\x80\x93%d", s->first_step + 1, last);
    cellf(&t, "%s", s->schedule);
    int nums[] = {s->p, s->v, s->m, s->b, s->k, s->d};
    for (int k = 0; k < 6; k++) cellf(&t, "%d", nums[k]);
    cellf(&t, "%s", s->transport);
    if (isfinite(s->measured_bubble)) cellf(&t, "%.1f%%", 100 * s->measured_bubble);
    else cellf(&t, "-");
    if (isfinite(s->predicted_bubble)) cellf(&t, "%.1f%%", 100 * s->predicted_bubble);
    else cellf(&t, "-");
  }
  cells_table(b, &t,
              c->n_segments > 1 ? "Layouts (the run was resumed under another layout)" : "Layout",
              head, 11);
  for (int i = 0; i < c->n_segments; i++) {
    const kt_run_segment *s = &c->segments[i];
    if (s->cores > 0 && s->compute_threads > s->cores)
      kt_buf_printf(b,
                    "<p class=\"note\">Oversubscribed (steps from %d): %d compute threads "
                    "(ranks \xc3\x97 BLAS threads) on %d cores; ops waited for a core "
                    "(core_wait in <i>Why idle</i>).</p>\n",
                    s->first_step + 1, s->compute_threads, s->cores);
  }
}

/* One table per group of config.json ("model", "layout", "optimizer", and
 * the top-level keys as "run"), side by side. */
static void config_section(kt_buf *b, const kt_run *r) {
  kt_html_section_begin(b, "config", "Configuration", "config.json of the run directory.");
  kt_buf_puts(b, "<div class=\"row\">\n");
  static const char *const head[] = {"parameter", "value"};
  size_t done = 0;
  for (size_t g = 0; g < r->n_config && done < r->n_config; g++) {
    const char *dot = strchr(r->config[g].key, '.');
    size_t len = dot ? (size_t)(dot - r->config[g].key) : 0;
    int first = 1; /* the group's first item: no earlier item has the same prefix */
    for (size_t i = 0; i < g && first; i++) {
      const char *d2 = strchr(r->config[i].key, '.');
      size_t l2 = d2 ? (size_t)(d2 - r->config[i].key) : 0;
      first = !(l2 == len && !strncmp(r->config[i].key, r->config[g].key, len));
    }
    if (!first) continue;
    char group[64];
    snprintf(group, sizeof group, "%.*s", (int)(len < 63 ? len : 63), r->config[g].key);
    cells c;
    cells_init(&c);
    if (!len) cellf(&c, "run directory"), cellf(&c, "%s", r->dir ? r->dir : "");
    for (size_t i = g; i < r->n_config; i++) {
      const char *d2 = strchr(r->config[i].key, '.');
      size_t l2 = d2 ? (size_t)(d2 - r->config[i].key) : 0;
      if (l2 != len || strncmp(r->config[i].key, r->config[g].key, len)) continue;
      cellf(&c, "%s", r->config[i].key + (len ? len + 1 : 0));
      cellf(&c, "%s", r->config[i].value);
      done++;
    }
    kt_buf_puts(b, "<div>\n");
    cells_table(b, &c, len ? group : "run", head, 2);
    kt_buf_puts(b, "</div>\n");
  }
  kt_buf_puts(b, "</div>\n");
  kt_html_section_end(b);
}

void kt_render_run_report(kt_buf *b, const kt_run *r, const char *title) {
  kt_metrics mm = {0}, pm = {0};
  int have = 0;
  if (r->has_timeline) {
    kt_error err;
    if (kt_timeline_metrics(&r->measured, &mm, &err)) b->failed = 1;
    else if (kt_timeline_metrics(&r->predicted, &pm, &err)) b->failed = 1, kt_metrics_free(&mm);
    else have = 1;
    /* the traced step's periods, where the run directory has them */
    if (have && isfinite(r->measured_period))
      kt_metrics_set_period(&mm, r->measured_period, r->step_sync);
    if (have && isfinite(r->predicted_period))
      kt_metrics_set_period(&pm, r->predicted_period, r->step_sync);
  }
  char head[160], sub[320];
  /* the directory's last component ("runs/demo/" -> "demo") */
  const char *dir = r->dir && *r->dir ? r->dir : "run";
  size_t end = strlen(dir), start;
  while (end > 1 && dir[end - 1] == '/') end--;
  for (start = end; start > 0 && dir[start - 1] != '/';) start--;
  snprintf(head, sizeof head, "kaiten run: %.*s", (int)(end - start ? end - start : end),
           dir + (end - start ? start : 0));
  size_t len = (size_t)snprintf(sub, sizeof sub, "%s", r->model[0] ? r->model : "model");
  if (r->layers) len += (size_t)snprintf(sub + len, sizeof sub - len, ", %d layers", r->layers);
  if (r->hidden) len += (size_t)snprintf(sub + len, sizeof sub - len, ", width %d", r->hidden);
  snprintf(sub + len, sizeof sub - len, " \xc2\xb7 %s, P=%d, V=%d, M=%d \xc2\xb7 %zu steps%s%s",
           r->schedule[0] ? r->schedule : "?", r->p, r->v, r->m, r->n_steps,
           r->transport[0] ? " \xc2\xb7 " : "", r->transport);
  kt_html_begin(b, title ? title : head, sub);
  kt_html_section_begin(b, "summary", "Summary", NULL);
  summary(b, r, have ? &mm : NULL, have ? &pm : NULL);
  kt__run_memory_note(b, r);
  segments_table(b, r);
  kt_html_section_end(b);
  kt__run_training_section(b, r, have ? 100 * pm.bubble_ratio : NAN);
  kt__run_autopilot_section(b, r);
  kt_html_section_begin(b, "step", "Traced step",
                        have ? "One training step as measured (one row per rank, hover a bar for "
                               "details) with the simulator's prediction as a thin strip under "
                               "each rank; memory below is on the same time axis."
                             : NULL);
  if (have) traced_step(b, r, &mm, &pm);
  if (have) kt__whatif_run(b, r);
  else
    kt_buf_puts(b, "<p class=\"na\">No timeline.json in the run directory: the traced step is "
                   "written when training ends.</p>\n");
  kt_html_section_end(b);
  stages_section(b, r, have ? &mm : NULL, have ? &pm : NULL);
  kt__run_memory_section(b, r);
  config_section(b, r);
  kt_html_end(b);
  if (have) kt_metrics_free(&mm), kt_metrics_free(&pm);
}

kt_status kt_write_run_report(const char *path, const kt_run *r, const char *title, kt_error *err) {
  kt_buf b;
  kt_buf_init(&b);
  kt_render_run_report(&b, r, title);
  kt_status st = b.failed ? kt_fail(err, KT_ENOMEM, "out of memory rendering the report %s", path)
                          : kt_write_file_atomic(path, b.data, b.len, err);
  kt_buf_free(&b);
  return st;
}
