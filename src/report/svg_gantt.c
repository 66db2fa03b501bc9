/* SVG Gantt chart of a timeline: ranks as rows, time to the right.
 *
 * Detail view: one <rect> per action, coloured by op (Okabe-Ito), later
 * chunks lighter, labels ("F3", "5F3") where they fit, idle left empty over
 * a pale lane. Aggregated view (too many or too thin actions): each rank's
 * time is cut into bins a few pixels wide, runs of bins with similar activity
 * merge into blocks, and a block is drawn as stacked bands, one per op, whose
 * total height is the rank's utilisation there. Both views keep one data-op
 * rect per (action | op and block) with counts that add up per rank.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/svg_util.h"

#define LEGEND_H 24.0
#define AXIS_H 42.0
#define BIN_PX 6.0
#define MERGE_TOL 0.2

void kt_svg_gantt_default_opts(kt_svg_gantt_opts *o) {
  memset(o, 0, sizeof *o);
  o->chunks = 1;
  o->width = 1200;
}

double kt_svg_fit_scale(double span, int width) {
  double plot = (double)width - KT_SVG_MARGIN_LEFT - KT_SVG_MARGIN_RIGHT;
  if (plot < 100) plot = 100;
  return span > 0 ? plot / span : plot;
}

/* Display unit of a time axis: seconds become ms or us for short spans. */
static double time_display(const char *unit, double span, const char **shown) {
  if (!strcmp(unit, "s")) {
    if (span < 2e-3) return *shown = "\xc2\xb5s", 1e6;
    if (span < 2) return *shown = "ms", 1e3;
    return *shown = "s", 1;
  }
  *shown = !strcmp(unit, "unit") ? "cost units" : unit;
  return 1;
}

typedef struct {
  const kt_svg_gantt_opts *o;
  int p;
  double t0, ppu, x0;
  double top, row_h;
  int chunks;
} layout;

static int chunk_of(const layout *L, const kt_event *e) {
  return L->chunks > 1 && L->p > 0 && e->stage >= L->p ? e->stage / L->p : 0;
}

typedef struct {
  int32_t rank;
  double start;
  size_t i;
} ev_key;

static int cmp_key(const void *a, const void *b) {
  const ev_key *x = a, *y = b;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  if (x->start != y->start) return x->start < y->start ? -1 : 1;
  return x->i < y->i ? -1 : x->i > y->i;
}

/* Event indices ordered by (rank, start, list order); NULL on allocation failure. */
static size_t *sorted_events(const kt_timeline *t) {
  size_t n = t->n_events;
  ev_key *keys = malloc((n ? n : 1) * sizeof *keys);
  size_t *idx = malloc((n ? n : 1) * sizeof *idx);
  if (!keys || !idx) {
    free(keys);
    free(idx);
    return NULL;
  }
  for (size_t i = 0; i < n; i++) keys[i] = (ev_key){t->events[i].rank, t->events[i].start, i};
  qsort(keys, n, sizeof *keys, cmp_key);
  for (size_t i = 0; i < n; i++) idx[i] = keys[i].i;
  free(keys);
  return idx;
}

static void rect(kt_buf *b, double x, double y, double w, double h, const char *fill) {
  kt_buf_puts(b, "<rect x=\"");
  kt__svg_num(b, x);
  kt_buf_puts(b, "\" y=\"");
  kt__svg_num(b, y);
  kt_buf_puts(b, "\" width=\"");
  kt__svg_num(b, w > 0.1 ? w : 0.1);
  kt_buf_puts(b, "\" height=\"");
  kt__svg_num(b, h > 0.1 ? h : 0.1);
  kt_buf_printf(b, "\" fill=\"%s\"", fill);
}

/* Detail view of t's events into band [y_off, y_off + bar_h) of each row. */
static void draw_detail(kt_buf *b, const layout *L, const kt_timeline *t, const size_t *idx,
                        double y_off, double bar_h, int pred, double min_px) {
  double font = bar_h - 7 > 11 ? 11 : bar_h - 7;
  /* a thin white edge separates neighbours, unless it would eat thin bars */
  const char *edge = min_px >= 4 ? " stroke=\"#FFFFFF\" stroke-width=\"0.6\"" : "";
  kt_buf_printf(b, "<g class=\"%s\"%s%s>\n", pred ? "pred" : "bars",
                pred ? " opacity=\"0.85\"" : "", edge);
  for (size_t k = 0; k < t->n_events; k++) {
    const kt_event *e = &t->events[idx[k]];
    if (e->rank < 0 || e->rank >= L->p) continue;
    double x = L->x0 + (e->start - L->t0) * L->ppu, w = (e->end - e->start) * L->ppu;
    double y = L->top + e->rank * L->row_h + y_off;
    rect(b, x, y, w, bar_h, kt_svg_op_color((kt_op)e->op, chunk_of(L, e)));
    if (pred) kt_buf_printf(b, " data-pred=\"1\" data-op=\"%c\"/>\n", kt_op_letter((kt_op)e->op));
    else
      kt_buf_printf(b, " data-rank=\"%d\" data-stage=\"%d\" data-mb=\"%d\" data-op=\"%c\"/>\n",
                    e->rank, e->stage, e->mb, kt_op_letter((kt_op)e->op));
  }
  kt_buf_puts(b, "</g>\n");
  if (pred || font < 8) return;
  /* labels, in their own group so the bars' stroke does not touch them */
  kt_buf_printf(b,
                "<g class=\"labels\" font-size=\"%g\" text-anchor=\"middle\" "
                "pointer-events=\"none\">\n",
                font);
  for (size_t k = 0; k < t->n_events; k++) {
    const kt_event *e = &t->events[idx[k]];
    if (e->rank < 0 || e->rank >= L->p) continue;
    double w = (e->end - e->start) * L->ppu;
    char lab[32];
    kt_event_label(e, L->chunks, lab, sizeof lab);
    if (kt__text_width(lab, font) + 5 > w && L->chunks > 1)
      snprintf(lab, sizeof lab, "%c%d", kt_op_letter((kt_op)e->op), e->mb);
    if (kt__text_width(lab, font) + 5 > w) continue;
    double x = L->x0 + (e->start - L->t0) * L->ppu + w / 2;
    double y = L->top + e->rank * L->row_h + y_off + bar_h / 2 + font * 0.36;
    kt_buf_puts(b, "<text x=\"");
    kt__svg_num(b, x);
    kt_buf_puts(b, "\" y=\"");
    kt__svg_num(b, y);
    kt_buf_printf(b, "\" fill=\"%s\">%s</text>\n", kt__op_text_color(e->op, chunk_of(L, e)), lab);
  }
  kt_buf_puts(b, "</g>\n");
}

/* Busy share of each op in bins k0..k1 of one rank (row = its first cell). */
static void bin_share(const double *row, size_t k0, size_t k1, double bin, double span, double *f) {
  double w = 0;
  for (int op = 0; op < KT_OP_COUNT; op++) f[op] = 0;
  for (size_t k = k0; k <= k1; k++) {
    double lo = (double)k * bin;
    w += lo + bin > span && span > lo ? span - lo : bin;
    for (int op = 0; op < KT_OP_COUNT; op++) f[op] += row[k * KT_OP_COUNT + op];
  }
  for (int op = 0; op < KT_OP_COUNT; op++) f[op] = w > 0 ? f[op] / w : 0;
}

/* Time bins for the aggregated view: bins of BIN_PX pixels, but wide
 * enough to hold a few typical actions. */
static double agg_bin_width(const layout *L, const kt_timeline *t, double span, size_t *nb) {
  double dsum = 0;
  for (size_t i = 0; i < t->n_events; i++) dsum += t->events[i].end - t->events[i].start;
  double mean = t->n_events ? dsum / (double)t->n_events : 0;
  double bin = BIN_PX / L->ppu;
  if (bin < 4 * mean) bin = 4 * mean;
  if (!(bin > 0) || !(bin <= span)) bin = span > 0 ? span : 1;
  double n = ceil(span / bin); /* as a double: a tiny bin must not overflow the count */
  if (!(n >= 1)) n = 1;
  /* at most 100,000 bins, and a million cells over all ranks */
  double most = fmax(1, fmin(100000, floor(1e6 / L->p)));
  if (n > most) n = most, bin = span / n;
  *nb = (size_t)n;
  return bin;
}

/* The bin of time a (from the start), within 0..nb-1 (NaN: 0). */
static size_t bin_of(double a, double bin, size_t nb) {
  double k = floor(a / bin);
  return k > 0 ? k < (double)nb ? (size_t)k : nb - 1 : 0;
}

/* Busy time per (rank, bin, op) and the number of actions starting there. */
static void bin_events(const layout *L, const kt_timeline *t, double bin, size_t nb, double *busy,
                       int *count) {
  for (size_t i = 0; i < t->n_events; i++) {
    const kt_event *e = &t->events[i];
    if (e->rank < 0 || e->rank >= L->p || e->op >= KT_OP_COUNT) continue;
    double a = kt__axis_clamp(e->start) - L->t0, z = kt__axis_clamp(e->end) - L->t0;
    size_t k0 = bin_of(a, bin, nb), k1 = bin_of(z, bin, nb);
    size_t row = (size_t)e->rank * nb;
    count[(row + k0) * KT_OP_COUNT + e->op]++;
    for (size_t k = k0; k <= k1; k++) {
      double lo = (double)k * bin, hi = lo + bin;
      double ov = (z < hi ? z : hi) - (a > lo ? a : lo);
      if (ov > 0) busy[(row + k) * KT_OP_COUNT + e->op] += ov;
    }
  }
}

/* The end of the block that starts at bin k0: bins join while they stay
 * close to its average; bins are compared smoothed over their neighbours,
 * so a period that beats with the bin width does not cut it into bricks. */
static size_t block_end(const double *row, size_t k0, size_t nb, double bin, double span) {
  double ref[KT_OP_COUNT] = {0};
  int idle = 0;
  size_t k = k0;
  for (; k < nb; k++) {
    double raw[KT_OP_COUNT], sm[KT_OP_COUNT], tot = 0, diff = 0;
    bin_share(row, k, k, bin, span, raw);
    bin_share(row, k > 0 ? k - 1 : 0, k + 1 < nb ? k + 1 : k, bin, span, sm);
    for (int op = 0; op < KT_OP_COUNT; op++) tot += raw[op];
    if (k == k0) idle = tot < 0.02;
    for (int op = 0; op < KT_OP_COUNT; op++) {
      double d = fabs(sm[op] - ref[op] / (double)(k - k0 ? k - k0 : 1));
      if (d > diff) diff = d;
    }
    if (k > k0 && (diff > MERGE_TOL || (tot < 0.02) != idle)) break;
    for (int op = 0; op < KT_OP_COUNT; op++) ref[op] += sm[op];
  }
  return k;
}

/* Aggregated view. Returns -1 on allocation failure. */
static int draw_aggregate(kt_buf *b, const layout *L, const kt_timeline *t, double span,
                          double y_off, double bar_h, int pred) {
  size_t nb;
  double bin = agg_bin_width(L, t, span, &nb);
  size_t cells = (size_t)L->p * nb * KT_OP_COUNT;
  double *busy = calloc(cells, sizeof *busy);
  int *count = calloc(cells, sizeof *count);
  if (!busy || !count) {
    free(busy);
    free(count);
    return -1;
  }
  bin_events(L, t, bin, nb, busy, count);
  kt_buf_puts(b, pred ? "<g class=\"pred\" opacity=\"0.85\">\n" : "<g class=\"bars agg\">\n");
  for (int r = 0; r < L->p; r++) {
    const double *row = busy + (size_t)r * nb * KT_OP_COUNT;
    const int *nrow = count + (size_t)r * nb * KT_OP_COUNT;
    for (size_t k0 = 0, k; k0 < nb; k0 = k) {
      k = block_end(row, k0, nb, bin, span);
      double avg[KT_OP_COUNT];
      int n[KT_OP_COUNT] = {0};
      for (size_t j = k0; j < k; j++)
        for (int op = 0; op < KT_OP_COUNT; op++) n[op] += nrow[j * KT_OP_COUNT + op];
      bin_share(row, k0, k - 1, bin, span, avg);
      double sum_w = (k * bin < span ? (double)k * bin : span) - (double)k0 * bin;
      double x = L->x0 + (double)k0 * bin * L->ppu, w = sum_w * L->ppu;
      double y = L->top + r * L->row_h + y_off + bar_h; /* bands stack up from the bottom */
      for (int op = 0; op < KT_OP_COUNT; op++) {
        if (avg[op] <= 0 && n[op] == 0) continue;
        double h = avg[op] * bar_h;
        if (h > bar_h) h = bar_h;
        y -= h;
        rect(b, x, y, w, h, kt_svg_op_color((kt_op)op, 0));
        if (pred) kt_buf_printf(b, " data-pred=\"1\" data-op=\"%c\"/>\n", kt_op_letter((kt_op)op));
        else
          kt_buf_printf(b, " data-rank=\"%d\" data-op=\"%c\" data-n=\"%d\" data-util=\"%.2f\"/>\n",
                        r, kt_op_letter((kt_op)op), n[op], avg[op]);
      }
    }
  }
  kt_buf_puts(b, "</g>\n");
  free(busy);
  free(count);
  return 0;
}

static void swatch(kt_buf *b, double *x, double y, const char *fill, const char *stroke,
                   const char *text) {
  rect(b, *x, y, 12, 12, fill);
  if (stroke) kt_buf_printf(b, " stroke=\"%s\"", stroke);
  kt_buf_puts(b, "/>\n<text x=\"");
  kt__svg_num(b, *x + 16);
  kt_buf_puts(b, "\" y=\"");
  kt__svg_num(b, y + 10);
  kt_buf_puts(b, "\">");
  kt_buf_xml_escape(b, text);
  kt_buf_puts(b, "</text>\n");
  *x += 16 + kt__text_width(text, 11) + 14;
}

/* Draws the legend; returns the x where it ends (the svg must be that wide). */
static double draw_legend(kt_buf *b, const kt_svg_gantt_opts *o, unsigned ops, int aggregate) {
  static const char *const names[KT_OP_COUNT] = {"F forward", "B backward", "I input grad",
                                                 "W weight grad"};
  double x = KT_SVG_MARGIN_LEFT, y = 4;
  kt_buf_puts(b, "<g class=\"legend\" fill=\"#333333\">\n");
  for (int op = 0; op < KT_OP_COUNT; op++)
    if (ops & (1u << op)) swatch(b, &x, y, kt_svg_op_color((kt_op)op, 0), NULL, names[op]);
  swatch(b, &x, y, "#F1F1F1", "#BBBBBB", "idle");
  if (o->chunks > 1 && !aggregate) {
    rect(b, x, y, 6, 12, kt_svg_op_color(KT_OP_F, 0));
    kt_buf_puts(b, "/>\n");
    x += 6;
    swatch(b, &x, y, kt_svg_op_color(KT_OP_F, 1), NULL,
           "lighter: later chunk (stage \xe2\x89\xa5 P)");
  }
  if (o->predicted) {
    char lab[96];
    snprintf(lab, sizeof lab, "thin strip: %s",
             o->predicted_label ? o->predicted_label : "predicted");
    swatch(b, &x, y, "#999999", NULL, lab);
  }
  if (aggregate) {
    static const char note[] = "aggregated: bar height = utilisation, bands = share of each op";
    kt_buf_puts(b, "<text x=\"");
    kt__svg_num(b, x);
    kt_buf_printf(b, "\" y=\"14\" fill=\"#666666\">%s</text>\n", note);
    x += kt__text_width(note, 11);
  }
  kt_buf_puts(b, "</g>\n");
  return x;
}

/* The memory samples as JSON in a <metadata> element (see embed_memory):
 * per rank the levels in time order, from 0 at the chart's start. */
static void memory_metadata(kt_buf *b, const kt_timeline *t, double t0) {
  kt_series *s;
  size_t n;
  if (kt_timeline_mem_series(t, t0, t0, &s, &n)) {
    b->failed = 1;
    return;
  }
  const char *unit = !strcmp(t->mem_unit, "unit") ? "M_B" : t->mem_unit;
  kt_buf_puts(b, "<metadata class=\"kt-mem\">{\"unit\":");
  kt_buf_json_string(b, unit);
  kt_buf_puts(b, ",\"ranks\":[");
  for (size_t r = 0; r < n; r++) {
    kt_buf_puts(b, r ? ",[" : "[");
    for (size_t i = 0; i < s[r].n; i++)
      kt_buf_printf(b, "%s%.9g,%.6g", i ? "," : "", s[r].x[i] - t0,
                    isfinite(s[r].y[i]) ? s[r].y[i] : 0.0);
    kt_buf_puts(b, "]");
  }
  kt_buf_puts(b, "]}</metadata>\n");
  kt_series_free(s, n);
}

/* The time range, shortest action and ops present in t and the predicted
 * timeline; a requested range overrides the first two. */
static void scan_events(const kt_timeline *t, const kt_svg_gantt_opts *opts, double *t0, double *t1,
                        double *dmin, unsigned *ops) {
  *t0 = INFINITY, *t1 = -INFINITY, *dmin = INFINITY, *ops = 0;
  const kt_timeline *tls[2] = {t, opts->predicted};
  for (int k = 0; k < 2; k++)
    for (size_t i = 0; tls[k] && i < tls[k]->n_events; i++) {
      const kt_event *e = &tls[k]->events[i];
      if (e->start < *t0) *t0 = e->start;
      if (e->end > *t1) *t1 = e->end;
      if (e->end - e->start < *dmin) *dmin = e->end - e->start;
      if (e->op < KT_OP_COUNT) *ops |= 1u << e->op;
    }
  if (!isfinite(*t0)) *t0 = 0, *t1 = 1, *dmin = 1;
  if (opts->t_max > opts->t_min) *t0 = opts->t_min, *t1 = opts->t_max;
  /* far-out times (1e308, an overflowed sum) are drawn at the axis' limit */
  *t0 = kt__axis_clamp(*t0), *t1 = kt__axis_clamp(*t1);
  if (!(*dmin >= 0)) *dmin = 0;
}

/* Grey lanes, one per rank, and the rank labels (thinned when rows are low). */
static void draw_lanes(kt_buf *b, const layout *L, double plot_w) {
  kt_buf_puts(b, "<g class=\"lanes\" fill=\"#F1F1F1\">\n");
  for (int r = 0; r < L->p; r++) {
    rect(b, L->x0, L->top + r * L->row_h + 1, plot_w, L->row_h - 2, "#F1F1F1");
    kt_buf_puts(b, "/>\n");
  }
  kt_buf_puts(b, "</g>\n<g class=\"ranks\" fill=\"#333333\" text-anchor=\"end\">\n");
  double rfont = L->row_h >= 16 ? 11 : 10;
  int every = L->row_h >= 11 ? 1 : (int)ceil(11.0 / L->row_h);
  for (int r = 0; r < L->p; r++) {
    if (r % every && r != L->p - 1) continue;
    kt_buf_puts(b, "<text x=\"");
    kt__svg_num(b, L->x0 - 6);
    kt_buf_puts(b, "\" y=\"");
    kt__svg_num(b, L->top + r * L->row_h + L->row_h / 2 + rfont * 0.36);
    kt_buf_printf(b, "\" font-size=\"%g\">rank %d</text>\n", rfont, r);
  }
  kt_buf_puts(b, "</g>\n");
}

/* One timeline's bars (pred: the thin predicted strip) in the band
 * [y_off, y_off + bar_h) of each row. */
static void draw_bars(kt_buf *b, const layout *L, const kt_timeline *t, int aggregate, double span,
                      double y_off, double bar_h, int pred, double min_px) {
  if (aggregate) {
    if (draw_aggregate(b, L, t, span, y_off, bar_h, pred)) b->failed = 1;
    return;
  }
  size_t *idx = sorted_events(t);
  if (idx) draw_detail(b, L, t, idx, y_off, bar_h, pred, min_px);
  else b->failed = 1;
  free(idx);
}

/* The <svg> attributes the page script reads. */
static void gantt_attrs(char *attrs, size_t n, const layout *L, int aggregate, double tscale,
                        const char *shown) {
  char unit[16]; /* the unit goes into an attribute: keep it to safe characters */
  snprintf(unit, sizeof unit, "%s", shown);
  for (char *c = unit; *c; c++)
    if (strchr("<>&\"'", *c)) *c = '_';
  snprintf(attrs, n,
           " class=\"gantt\" data-mode=\"%s\" data-p=\"%d\" data-t0=\"%.9g\" data-ppu=\"%.9g\""
           " data-x0=\"%d\" data-tscale=\"%g\" data-tunit=\"%s\"",
           aggregate ? "aggregate" : "detail", L->p, L->t0, L->ppu, KT_SVG_MARGIN_LEFT, tscale,
           unit);
}

void kt_svg_gantt(kt_buf *b, const kt_timeline *t, const kt_svg_gantt_opts *opts) {
  kt_svg_gantt_opts def;
  if (!opts) kt_svg_gantt_default_opts(&def), opts = &def;
  layout L = {.o = opts, .p = t->p > 0 ? t->p : 1, .chunks = opts->chunks};
  double t0, t1, dmin;
  unsigned ops;
  scan_events(t, opts, &t0, &t1, &dmin, &ops);
  double span = t1 - t0 > 0 ? t1 - t0 : 1;
  L.t0 = t0;
  L.ppu = opts->px_per_unit > 0 ? opts->px_per_unit
                                : kt_svg_fit_scale(span, opts->width > 0 ? opts->width : 1200);
  L.x0 = KT_SVG_MARGIN_LEFT;
  L.row_h = opts->row_height > 0 ? opts->row_height : L.p <= 8 ? 24 : L.p <= 16 ? 18 : 13;
  L.top = LEGEND_H;
  size_t max_rects = opts->max_rects ? opts->max_rects : 4000;
  double min_px = opts->min_bar_px > 0 ? opts->min_bar_px : 2;
  size_t n_all = t->n_events + (opts->predicted ? opts->predicted->n_events : 0);
  int aggregate = opts->force_aggregate || n_all > max_rects || dmin * L.ppu < min_px;
  double plot_w = span * L.ppu, w = L.x0 + plot_w + KT_SVG_MARGIN_RIGHT;
  double rows_h = L.row_h * L.p, h = L.top + rows_h + AXIS_H;
  const char *shown;
  double tscale = time_display(t->time_unit, span, &shown);
  char attrs[256];
  gantt_attrs(attrs, sizeof attrs, &L, aggregate, tscale, shown);
  kt_buf legend;
  kt_buf_init(&legend);
  double legend_end = draw_legend(&legend, opts, ops, aggregate) + 8;
  if (legend.failed) b->failed = 1;
  kt__svg_open(b, w > legend_end ? w : legend_end, h, opts->id, opts->title, opts->standalone,
               attrs);
  kt_buf_append(b, legend.data ? legend.data : "", legend.len);
  kt_buf_free(&legend);
  if (opts->embed_memory && !aggregate && t->n_mem) memory_metadata(b, t, t0);
  draw_lanes(b, &L, plot_w);
  char xlabel[64];
  snprintf(xlabel, sizeof xlabel, "time (%s)", shown);
  /* the axis counts from the chart's start (a measured step starts anywhere) */
  kt__svg_x_axis(b, L.x0, L.x0 + plot_w, L.top + rows_h + 2, L.top, 0, t1 - t0, tscale, xlabel);
  double inset = L.row_h >= 16 ? 3 : 1.5;
  double bar_h = L.row_h - 2 * inset, pred_h = 0;
  if (opts->predicted) {
    pred_h = floor(bar_h * 0.32);
    bar_h -= pred_h + 1;
  }
  draw_bars(b, &L, t, aggregate, span, inset, bar_h, 0, dmin * L.ppu);
  if (opts->predicted)
    draw_bars(b, &L, opts->predicted, aggregate, span, inset + bar_h + 1, pred_h, 1, dmin * L.ppu);
  kt_buf_puts(b, "</svg>\n");
}
