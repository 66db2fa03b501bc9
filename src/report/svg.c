/* SVG building blocks: colours, axes, line charts and bar charts.
 *
 * Every chart is one self-contained <svg> element: attributes only (no CSS
 * needed), no external references, XML-escaped text. Coordinates are
 * written with one decimal to keep files small.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/svg_util.h"

/* ---- colours --------------------------------------------------------------- */

/* Okabe-Ito: blue F, orange B, reddish purple I, bluish green W; the second
 * row is the same hue mixed half with white (later chunks when V > 1). */
static const char *const op_fill[2][KT_OP_COUNT] = {
    {"#0072B2", "#E69F00", "#CC79A7", "#009E73"},
    {"#80B8D8", "#F2CF80", "#E6BCD3", "#80CEB9"},
};

const char *kt_svg_op_color(kt_op op, int chunk) {
  if ((int)op < 0 || op >= KT_OP_COUNT) return "#999999";
  return op_fill[chunk > 0][op];
}

const char *kt__op_text_color(int op, int chunk) {
  if (chunk > 0) return "#000000";
  return op == KT_OP_F || op == KT_OP_W ? "#FFFFFF" : "#000000";
}

static const char *const okabe_ito[8] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                         "#E69F00", "#56B4E9", "#000000", "#8C8C00"};
/* viridis from 0 to 0.85 (the yellow end is unreadable on white) */
static const char *const viridis[32] = {
    "#440154", "#450B5D", "#461466", "#471E6F", "#472777", "#45307C", "#433981", "#424186",
    "#3F4988", "#3B518A", "#38588B", "#355F8D", "#32668D", "#2F6D8E", "#2C748E", "#297B8E",
    "#27828D", "#24898D", "#228F8C", "#21968A", "#219C88", "#22A286", "#23A983", "#2CAF7E",
    "#36B578", "#3FBC73", "#4BC16C", "#5AC663", "#69CB5B", "#77D053", "#89D447", "#9BD83C"};

const char *kt_svg_series_color(size_t i, size_t n) {
  if (n <= 8) return okabe_ito[i % 8];
  size_t k = (size_t)llround((double)i * 31.0 / (double)(n - 1));
  return viridis[k > 31 ? 31 : k];
}

/* ---- text and numbers ------------------------------------------------------ */

void kt_buf_xml_escape(kt_buf *b, const char *s) {
  if (!s) return;
  const char *run = s;
  for (const char *c = s; *c; c++) {
    const char *rep = NULL;
    switch (*c) {
      case '&': rep = "&amp;"; break;
      case '<': rep = "&lt;"; break;
      case '>': rep = "&gt;"; break;
      case '"': rep = "&quot;"; break;
      case '\'': rep = "&#39;"; break;
      default:
        /* control characters are not allowed in XML 1.0 */
        if ((unsigned char)*c < 0x20 && *c != '\n' && *c != '\t') rep = " ";
    }
    if (rep) {
      kt_buf_append(b, run, (size_t)(c - run));
      kt_buf_puts(b, rep);
      run = c + 1;
    }
  }
  kt_buf_puts(b, run);
}

double kt__text_width(const char *s, double px) {
  double w = 0;
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    if ((*c & 0xC0) == 0x80) continue; /* UTF-8 continuation */
    w += (*c >= '0' && *c <= '9') ? 0.58 : (*c == ' ' || *c == '.' || *c == 'i') ? 0.3 : 0.6;
  }
  return w * px;
}

void kt__svg_open(kt_buf *b, double w, double h, const char *id, const char *title, int standalone,
                  const char *extra_attrs) {
  kt_buf_puts(b, "<svg");
  if (standalone)
    kt_buf_puts(b, " xmlns=\"http:/"
                   "/www.w3.org/2000/svg\" font-family=\"sans-serif\"");
  if (id) {
    kt_buf_puts(b, " id=\"");
    kt_buf_xml_escape(b, id);
    kt_buf_puts(b, "\"");
  }
  kt_buf_puts(b, " width=\"");
  kt__svg_num(b, w);
  kt_buf_puts(b, "\" height=\"");
  kt__svg_num(b, h);
  kt_buf_puts(b, "\" viewBox=\"0 0 ");
  kt__svg_num(b, w);
  kt_buf_puts(b, " ");
  kt__svg_num(b, h);
  kt_buf_puts(b, "\" font-size=\"11\" role=\"img\"");
  if (extra_attrs) kt_buf_puts(b, extra_attrs);
  kt_buf_puts(b, ">\n");
  if (title) {
    kt_buf_puts(b, "<title>");
    kt_buf_xml_escape(b, title);
    kt_buf_puts(b, "</title>\n");
  }
}

static void text_at(kt_buf *b, double x, double y, const char *anchor, const char *attrs,
                    const char *s) {
  kt_buf_puts(b, "<text x=\"");
  kt__svg_num(b, x);
  kt_buf_puts(b, "\" y=\"");
  kt__svg_num(b, y);
  kt_buf_puts(b, "\"");
  if (anchor) kt_buf_printf(b, " text-anchor=\"%s\"", anchor);
  if (attrs) kt_buf_puts(b, attrs);
  kt_buf_puts(b, ">");
  kt_buf_xml_escape(b, s);
  kt_buf_puts(b, "</text>\n");
}

static void line(kt_buf *b, double x1, double y1, double x2, double y2, const char *stroke) {
  kt_buf_puts(b, "<line x1=\"");
  kt__svg_num(b, x1);
  kt_buf_puts(b, "\" y1=\"");
  kt__svg_num(b, y1);
  kt_buf_puts(b, "\" x2=\"");
  kt__svg_num(b, x2);
  kt_buf_puts(b, "\" y2=\"");
  kt__svg_num(b, y2);
  kt_buf_printf(b, "\" stroke=\"%s\"/>\n", stroke);
}

void kt__svg_x_axis(kt_buf *b, double x0, double x1, double y, double y_top, double v0, double v1,
                    double scale, const char *label) {
  if (!(scale > 0) || !isfinite(scale)) scale = 1;
  kt__axis_range(&v0, &v1);
  double px = (x1 - x0) / (v1 - v0);
  double step = kt__nice_step((v1 - v0) / ((x1 - x0) / 80.0 > 1 ? (x1 - x0) / 80.0 : 1));
  /* labels must not collide: widen the step until the widest one fits */
  for (int guard = 0; guard < 8; guard++) {
    char lab[32];
    kt__tick_label(lab, sizeof lab, v1 * scale, step * scale);
    if (kt__text_width(lab, 11) + 12 <= step * px) break;
    step = kt__nice_step(step * 1.5);
  }
  kt_buf_puts(b, "<g class=\"axis\" fill=\"#444444\">\n");
  kt__ticks tk = kt__axis_ticks(v0, v1, step);
  for (int i = 0; i < tk.n; i++) {
    double v = tk.first + i * tk.step, x = x0 + (v - v0) * px;
    if (y_top < y) line(b, x, y_top, x, y, "#E4E4E4");
    line(b, x, y, x, y + 4, "#888888");
    char lab[32];
    kt__tick_label(lab, sizeof lab, v * scale, tk.step * scale);
    text_at(b, x, y + 15, "middle", NULL, lab);
  }
  line(b, x0, y, x1, y, "#888888");
  if (label) text_at(b, (x0 + x1) / 2, y + 31, "middle", NULL, label);
  kt_buf_puts(b, "</g>\n");
}

/* ---- line charts ----------------------------------------------------------- */

void kt_chart_default_opts(kt_chart_opts *o) {
  memset(o, 0, sizeof *o);
  o->width = 900;
  o->height = 0; /* line charts: 220; bar charts: as tall as their rows */
  o->max_legend = 8;
}

typedef struct {
  double x0, x1, y0, y1;     /* data range */
  double px0, px1, py0, py1; /* plot box: py0 bottom, py1 top */
  int log_y;
} frame;

/* Any x maps to a bounded coordinate (NaN stays NaN: a gap). */
static double fx(const frame *f, double x) {
  if (isnan(x)) return NAN;
  double r = f->px0 + (kt__axis_clamp(x) - f->x0) * ((f->px1 - f->px0) / (f->x1 - f->x0));
  return r > 1e8 ? 1e8 : r < -1e8 ? -1e8 : r;
}
static double fy(const frame *f, double y) {
  double v = f->log_y ? log10(y > 0 ? y : f->y0) : y;
  double lo = f->log_y ? log10(f->y0) : f->y0, hi = f->log_y ? log10(f->y1) : f->y1;
  double r = f->py0 - (v - lo) * (f->py0 - f->py1) / (hi - lo);
  return r < f->py1 ? f->py1 : r > f->py0 ? f->py0 : r;
}

/* Legend entries left to right from (x, y): line swatches (square = 0) or
 * filled squares (bar charts); the middle of a long list is elided. */
static void legend(kt_buf *b, double x, double y, double max_x, const kt_series *s, size_t n,
                   int max_items, int square) {
  if (n == 0 || (n == 1 && !s[0].name)) return;
  if (max_items < 3) max_items = 3;
  kt_buf_puts(b, "<g class=\"legend\" fill=\"#333333\">\n");
  for (size_t i = 0; i < n; i++) {
    int elide = n > (size_t)max_items && i >= (size_t)max_items - 2 && i + 1 < n;
    const char *name = elide ? "\xe2\x80\xa6" : s[i].name ? s[i].name : "";
    double w = 22 + kt__text_width(name, 11) + 12;
    if (x + w > max_x) break;
    const char *col = s[i].color ? s[i].color : kt_svg_series_color(i, n);
    if (!elide && square) {
      kt_buf_puts(b, "<rect x=\"");
      kt__svg_num(b, x + 2);
      kt_buf_puts(b, "\" y=\"");
      kt__svg_num(b, y - 10);
      kt_buf_printf(b, "\" width=\"12\" height=\"12\" fill=\"%s\"/>\n", col);
    } else if (!elide) {
      kt_buf_puts(b, "<line x1=\"");
      kt__svg_num(b, x);
      kt_buf_puts(b, "\" x2=\"");
      kt__svg_num(b, x + 16);
      kt_buf_puts(b, "\" y1=\"");
      kt__svg_num(b, y - 4);
      kt_buf_puts(b, "\" y2=\"");
      kt__svg_num(b, y - 4);
      kt_buf_printf(b, "\" stroke=\"%s\" stroke-width=\"2.5\"%s/>\n", col,
                    s[i].dashed ? " stroke-dasharray=\"5 3\"" : "");
    }
    text_at(b, x + (elide ? 0 : 20), y, NULL, NULL, name);
    x += elide ? 22 : w;
    if (elide) i = n - 2; /* jump to the last one */
  }
  kt_buf_puts(b, "</g>\n");
}

/* Appends series s as path data, thinned to first/min/max/last per column. */
static void series_path(kt_buf *b, const frame *f, const kt_series *s) {
  int pen = 0; /* 0: next point starts a subpath */
  double last_y = 0;
  long long last_px = LLONG_MIN, last_py = LLONG_MIN; /* last point written, in 0.1 px */
  size_t i = 0;
  while (i < s->n) {
    /* one bucket: consecutive points in the same pixel column */
    double col = floor(fx(f, s->x[i]));
    size_t first = i, lo = i, hi = i, last = i;
    while (i < s->n && floor(fx(f, s->x[i])) == col && isfinite(s->y[i])) {
      if (s->y[i] < s->y[lo]) lo = i;
      if (s->y[i] > s->y[hi]) hi = i;
      last = i++;
    }
    if (i == first) { /* a gap (non-finite y) breaks the line */
      pen = 0;
      i++;
      continue;
    }
    size_t keep[4] = {first, lo < hi ? lo : hi, lo < hi ? hi : lo, last};
    for (int k = 0; k < 4; k++) {
      size_t j = keep[k];
      if (k > 0 && j == keep[k - 1]) continue;
      if (k > 0 && j < keep[k - 1]) continue;
      double x = fx(f, s->x[j]), y = fy(f, s->y[j]);
      long long qx = llround(x * 10), qy = llround(y * 10);
      if (pen && qx == last_px && qy == last_py) continue; /* same spot on screen */
      last_px = qx, last_py = qy;
      if (!pen) {
        kt_buf_puts(b, " M");
        kt__svg_num(b, x);
        kt_buf_puts(b, " ");
        kt__svg_num(b, y);
        pen = 1;
      } else if (s->step) {
        kt_buf_puts(b, " H");
        kt__svg_num(b, x);
        if (llround(y * 10) != llround(last_y * 10)) {
          kt_buf_puts(b, " V");
          kt__svg_num(b, y);
        }
      } else {
        kt_buf_puts(b, " L");
        kt__svg_num(b, x);
        kt_buf_puts(b, " ");
        kt__svg_num(b, y);
      }
      last_y = y;
    }
  }
}

static void y_axis(kt_buf *b, const frame *f, const char *label) {
  kt_buf_puts(b, "<g class=\"axis\" fill=\"#444444\">\n");
  if (f->log_y) {
    /* one tick per decade, every few decades over a range of hundreds */
    double d0 = floor(log10(f->y0)), d1 = ceil(log10(f->y1));
    double stride = ceil((d1 - d0 + 1) / KT_MAX_TICKS);
    for (double d = d0; stride >= 1 && d <= d1; d += stride) {
      double v = pow(10, d);
      if (v < f->y0 * 0.999 || v > f->y1 * 1.001) continue;
      double y = fy(f, v);
      line(b, f->px0, y, f->px1, y, "#E4E4E4");
      char lab[32];
      kt__tick_label(lab, sizeof lab, v, v);
      text_at(b, f->px0 - 6, y + 4, "end", NULL, lab);
    }
  } else {
    double rows = (f->py0 - f->py1) / 36.0 > 1 ? (f->py0 - f->py1) / 36.0 : 1;
    kt__ticks tk = kt__axis_ticks(f->y0, f->y1, kt__nice_step((f->y1 - f->y0) / rows));
    for (int i = 0; i < tk.n; i++) {
      double v = tk.first + i * tk.step, y = fy(f, v);
      line(b, f->px0, y, f->px1, y, "#E4E4E4");
      char lab[32];
      kt__tick_label(lab, sizeof lab, v, tk.step);
      text_at(b, f->px0 - 6, y + 4, "end", NULL, lab);
    }
  }
  line(b, f->px0, f->py0, f->px0, f->py1, "#888888");
  if (label) {
    double cy = (f->py0 + f->py1) / 2;
    kt_buf_puts(b, "<text transform=\"translate(14 ");
    kt__svg_num(b, cy);
    kt_buf_puts(b, ") rotate(-90)\" text-anchor=\"middle\">");
    kt_buf_xml_escape(b, label);
    kt_buf_puts(b, "</text>\n");
  }
  kt_buf_puts(b, "</g>\n");
}

/* A dot per finite point of a sparse series, with "name: x, y" as its tooltip. */
static void markers(kt_buf *b, const frame *f, const kt_series *s, size_t i, size_t n,
                    const char *x_label) {
  const char *col = s->color ? s->color : kt_svg_series_color(i, n);
  for (size_t j = 0; j < s->n; j++) {
    if (!isfinite(s->x[j]) || !isfinite(s->y[j]) || (f->log_y && s->y[j] <= 0)) continue;
    kt_buf_puts(b, "<circle cx=\"");
    kt__svg_num(b, fx(f, s->x[j]));
    kt_buf_puts(b, "\" cy=\"");
    kt__svg_num(b, fy(f, s->y[j]));
    kt_buf_printf(b,
                  "\" r=\"3.5\" fill=\"%s\" stroke=\"#FFFFFF\" data-series=\"%zu\" "
                  "data-x=\"%.6g\" data-y=\"%.6g\"><title>",
                  col, i, s->x[j], s->y[j]);
    kt_buf_xml_escape(b, s->name ? s->name : "");
    kt_buf_puts(b, s->name ? ": " : "");
    char v[80];
    snprintf(v, sizeof v, "%.6g, %.4g", s->x[j], s->y[j]);
    if (x_label) {
      /* "step 4, 0.3819": the axis name without its unit in parentheses */
      char name[64];
      snprintf(name, sizeof name, "%s", x_label);
      size_t k = strcspn(name, "(");
      while (k > 0 && name[k - 1] == ' ') k--;
      name[k] = 0;
      kt_buf_xml_escape(b, name);
      kt_buf_puts(b, k ? " " : "");
    }
    kt_buf_xml_escape(b, v);
    kt_buf_puts(b, "</title></circle>\n");
  }
}

/* The data range of a line chart (or the one asked for): finite, ordered,
 * wide enough for ticks, whatever the values. */
static void data_frame(const kt_chart_opts *o, const kt_series *s, size_t n, frame *f) {
  double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
  for (size_t i = 0; i < n; i++)
    for (size_t j = 0; j < s[i].n; j++) {
      double x = s[i].x[j], y = s[i].y[j];
      if (!isfinite(x) || !isfinite(y) || (o->log_y && y <= 0)) continue;
      if (x < xmin) xmin = x;
      if (x > xmax) xmax = x;
      if (y < ymin) ymin = y;
      if (y > ymax) ymax = y;
    }
  if (!isfinite(xmin)) xmin = 0, xmax = 1, ymin = 0, ymax = 1;
  int x_given = o->x_max > o->x_min && isfinite(o->x_max - o->x_min);
  f->x0 = kt__axis_clamp(x_given ? o->x_min : xmin);
  f->x1 = kt__axis_clamp(x_given ? o->x_max : xmax);
  if (!(f->x1 > f->x0)) f->x1 = f->x0 + 1;
  kt__axis_range(&f->x0, &f->x1);
  if (o->y_max > o->y_min && isfinite(o->y_max - o->y_min) && (!o->log_y || o->y_min > 0)) {
    f->y0 = o->y_min, f->y1 = o->y_max;
  } else if (o->log_y) { /* whole decades, within 1e-300..1e300 */
    double lo = fmin(fmax(ymin, KT_AXIS_MIN_STEP), KT_AXIS_MAX);
    double hi = fmin(fmax(ymax, KT_AXIS_MIN_STEP), KT_AXIS_MAX);
    f->y0 = pow(10, floor(log10(lo))), f->y1 = pow(10, ceil(log10(hi)));
    if (!(f->y1 > f->y0)) f->y1 = f->y0 * 10;
    return;
  } else {
    double lo = ymin >= 0 ? 0 : kt__axis_clamp(ymin), hi = kt__axis_clamp(ymax);
    if (lo < 0) kt__axis_range(&lo, &hi); /* a negative constant gets room around it */
    double step = kt__nice_step((hi - lo) / 5 > 0 ? (hi - lo) / 5 : 1);
    f->y0 = lo;
    f->y1 = ceil(hi / step - 1e-9) * step;
    if (f->y1 <= hi) f->y1 += step * 0.5;
  }
  kt__axis_range(&f->y0, &f->y1);
}

void kt_svg_line_chart(kt_buf *b, const kt_chart_opts *o, const kt_series *s, size_t n) {
  kt_chart_opts d;
  if (!o) kt_chart_default_opts(&d), o = &d;
  double w = o->width > 0 ? o->width : 900, h = o->height > 0 ? o->height : 220;
  frame f = {.log_y = o->log_y};
  data_frame(o, s, n, &f);
  int has_legend = n > 1 || (n == 1 && s[0].name);
  double top = (o->title ? 22 : 8) + (has_legend ? 18 : 0) + 6;
  f.px0 = KT_SVG_MARGIN_LEFT, f.px1 = w - KT_SVG_MARGIN_RIGHT;
  f.py1 = top, f.py0 = h - (o->x_label ? 40 : 24);
  if (f.py0 < f.py1 + 20) f.py0 = f.py1 + 20;
  kt__svg_open(b, w, h, o->id, o->title, o->standalone, " data-chart=\"line\"");
  if (o->title) text_at(b, f.px0, 15, NULL, " font-weight=\"bold\" font-size=\"12\"", o->title);
  if (has_legend) legend(b, f.px0, (o->title ? 22 : 8) + 12, w, s, n, o->max_legend, 0);
  y_axis(b, &f, o->y_label);
  kt__svg_x_axis(b, f.px0, f.px1, f.py0, f.py1, f.x0, f.x1, 1, o->x_label);
  for (size_t i = 0; i < n; i++) {
    if (s[i].n == 0) continue;
    kt_buf_printf(b,
                  "<path data-series=\"%zu\" fill=\"none\" stroke=\"%s\" stroke-width=\"%s\""
                  " stroke-linejoin=\"round\"%s d=\"",
                  i, s[i].color ? s[i].color : kt_svg_series_color(i, n), n > 8 ? "1.2" : "1.8",
                  s[i].dashed ? " stroke-dasharray=\"5 3\"" : "");
    series_path(b, &f, &s[i]);
    kt_buf_puts(b, "\"/>\n");
    if (s[i].markers) markers(b, &f, &s[i], i, n, o->x_label);
  }
  kt_buf_puts(b, "</svg>\n");
}

/* ---- bar charts ------------------------------------------------------------ */

/* The text after a bar: value j of row i, or for stacked bars every part
 * ("48 + 19"). */
static void bar_label(const kt_bar_data *d, size_t i, size_t j, char *buf, size_t n) {
  size_t k = d->k ? d->k : 1, len = 0;
  double scale = d->value_scale > 0 ? d->value_scale : 1;
  const char *fmt = d->value_fmt ? d->value_fmt : "%g";
  buf[0] = 0;
  for (size_t q = d->stacked ? 0 : j; q <= j && len + 24 < n; q++) {
    double v = d->values[i * k + q];
    if (q > (d->stacked ? 0 : j)) len += (size_t)snprintf(buf + len, n - len, " + ");
    if (isfinite(v)) len += (size_t)snprintf(buf + len, n - len, fmt, v * scale);
    else len += (size_t)snprintf(buf + len, n - len, "n/a");
  }
}

static void bar_rect(kt_buf *b, const kt_bar_data *d, size_t i, size_t j, double x, double y,
                     double w, double h) {
  size_t k = d->k ? d->k : 1;
  double v = d->values[i * k + j];
  kt_buf_puts(b, "<rect x=\"");
  kt__svg_num(b, x);
  kt_buf_puts(b, "\" y=\"");
  kt__svg_num(b, y);
  kt_buf_puts(b, "\" width=\"");
  kt__svg_num(b, w);
  kt_buf_puts(b, "\" height=\"");
  kt__svg_num(b, h);
  kt_buf_printf(b, "\" fill=\"%s\" data-bar=\"%zu\" data-series=\"%zu\" data-value=\"%.6g\"",
                d->colors ? d->colors[j] : kt_svg_series_color(j, k), i, j, isfinite(v) ? v : 0);
  /* tooltip text: "label (series): value" */
  kt_bar_data one = *d;
  one.stacked = 0;
  char val[64];
  bar_label(&one, i, j, val, sizeof val);
  kt_buf_puts(b, " data-label=\"");
  kt_buf_xml_escape(b, d->labels[i] ? d->labels[i] : "");
  if (d->series_names && d->series_names[j]) {
    kt_buf_puts(b, " (");
    kt_buf_xml_escape(b, d->series_names[j]);
    kt_buf_puts(b, ")");
  }
  kt_buf_puts(b, ": ");
  kt_buf_xml_escape(b, val);
  kt_buf_puts(b, "\"/>\n");
}

void kt_svg_bar_chart(kt_buf *b, const kt_chart_opts *o, const kt_bar_data *d) {
  kt_chart_opts def;
  if (!o) kt_chart_default_opts(&def), o = &def;
  size_t k = d->k ? d->k : 1;
  int one_bar = d->stacked || k == 1; /* one bar per row (else k thinner ones) */
  double label_w = 40, value_w = 24, vmax = 0;
  char lab[160];
  for (size_t i = 0; i < d->n; i++) {
    double tw = kt__text_width(d->labels[i] ? d->labels[i] : "", 11) + 12, sum = 0;
    if (tw > label_w) label_w = tw;
    for (size_t j = 0; j < k; j++) {
      double v = d->values[i * k + j];
      if (isfinite(v) && v > 0) sum = d->stacked ? sum + v : (v > sum ? v : sum);
      if (!d->stacked || j + 1 == k) {
        bar_label(d, i, j, lab, sizeof lab);
        if (kt__text_width(lab, 11) + 8 > value_w) value_w = kt__text_width(lab, 11) + 8;
      }
    }
    if (sum > vmax) vmax = kt__axis_clamp(sum);
  }
  if (label_w > 220) label_w = 220;
  if (o->x_max > o->x_min && isfinite(o->x_max)) {
    vmax = kt__axis_clamp(o->x_max);
  } else if (vmax > 0) { /* end the axis on a tick */
    double step = kt__nice_step(vmax / 4);
    vmax = ceil(vmax / step - 1e-9) * step;
  }
  if (!(vmax > 0)) vmax = 1;
  double bar_h = one_bar ? 16 : 11;
  double row_h = (one_bar ? bar_h : bar_h * (double)k) + 8;
  int has_legend = k > 1 && d->series_names;
  double w = o->width > 0 ? o->width : 420;
  double top = (o->title ? 22 : 6) + (has_legend ? 18 : 0) + 4;
  double x0 = label_w, x1 = w - (value_w > 40 ? value_w : 40);
  if (x1 < x0 + 80) x1 = x0 + 80, w = x1 + value_w;
  double plot_h = row_h * (double)d->n;
  double h = top + plot_h + (o->x_label ? 40 : 24);
  if (o->height > h) h = o->height;
  kt__svg_open(b, w, h, o->id, o->title, o->standalone, " data-chart=\"bar\"");
  if (o->title) text_at(b, 4, 15, NULL, " font-weight=\"bold\" font-size=\"12\"", o->title);
  if (has_legend) {
    kt_series sw[16];
    size_t nk = k < 16 ? k : 16;
    for (size_t j = 0; j < nk; j++)
      sw[j] = (kt_series){.name = d->series_names[j],
                          .color = d->colors ? d->colors[j] : kt_svg_series_color(j, k)};
    legend(b, x0, (o->title ? 22 : 6) + 12, w, sw, nk, 8, 1);
  }
  kt__svg_x_axis(b, x0, x1, top + plot_h, top, 0, vmax, 1, o->x_label);
  double px = (x1 - x0) / vmax;
  for (size_t i = 0; i < d->n; i++) {
    double y = top + row_h * (double)i + 4, acc = 0;
    text_at(b, x0 - 6, y + (row_h - 8) / 2 + 4, "end", " fill=\"#222222\"",
            d->labels[i] ? d->labels[i] : "");
    for (size_t j = 0; j < k; j++) {
      double v = d->values[i * k + j], vv = isfinite(v) && v > 0 ? v : 0;
      double by = one_bar ? y : y + bar_h * (double)j;
      bar_rect(b, d, i, j, x0 + (d->stacked ? acc : 0) * px, by, vv * px,
               one_bar ? bar_h : bar_h - 1);
      acc += vv;
      if (d->stacked && j + 1 < k) continue;
      bar_label(d, i, j, lab, sizeof lab);
      text_at(b, x0 + (d->stacked ? acc : vv) * px + 4, by + bar_h / 2 + 3.5, NULL,
              " fill=\"#222222\"", lab);
    }
  }
  line(b, x0, top, x0, top + plot_h, "#888888");
  kt_buf_puts(b, "</svg>\n");
}
