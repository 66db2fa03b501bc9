/* ASCII Gantt chart in the style of the source documents:
 *
 *   rank 0 |F0 F1 F2 F3 ..................B0    B1    B2    B3    |
 *
 * One column group per time quantum when the chart fits the width, else a
 * proportional scale where labels that do not fit are cut to the op letter.
 */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/svg_util.h"

void kt_gantt_default_opts(kt_gantt_opts *o) {
  o->width = 120;
  o->color = 0;
  o->chunks = 1;
  o->max_ranks = 16;
  o->coarse = 0;
}

/* Appends the decimal digits of x >= 0 at out; returns how many. (A chart
 * labels every action: snprintf per label was most of a large chart's time.) */
static int put_uint(char *out, unsigned x) {
  char tmp[12];
  int n = 0;
  do tmp[n++] = (char)('0' + x % 10), x /= 10;
  while (x);
  for (int i = 0; i < n; i++) out[i] = tmp[n - 1 - i];
  return n;
}

/* "<stage><op><mb>" or "<op><mb>" into buf (at least 32 bytes): what
 * snprintf("%d%c%d") writes, and its length. */
static int put_label(char *buf, int stage, char op, int mb) {
  if ((stage != INT_MIN && stage < 0) || mb < 0) {
    return stage == INT_MIN ? snprintf(buf, 32, "%c%d", op, mb)
                            : snprintf(buf, 32, "%d%c%d", stage, op, mb);
  }
  int n = stage == INT_MIN ? 0 : put_uint(buf, (unsigned)stage);
  buf[n++] = op;
  n += put_uint(buf + n, (unsigned)mb);
  buf[n] = 0;
  return n;
}

int kt_event_label(const kt_event *e, int chunks, char *buf, size_t n) {
  char tmp[32];
  int len = put_label(tmp, chunks > 1 ? e->stage : INT_MIN, kt_op_letter((kt_op)e->op), e->mb);
  if (n) {
    size_t k = (size_t)len < n ? (size_t)len : n - 1;
    memcpy(buf, tmp, k);
    buf[k] = 0;
  }
  return len;
}

/* Short label for narrow cells: the op letter, lower case on every chunk but
 * the first of its rank, then the micro-batch ("F3", "f3"). buf: 32 bytes. */
static int short_label(const kt_event *e, int p, char *buf) {
  char op = kt_op_letter((kt_op)e->op);
  if (p > 0 && e->stage >= p) op = (char)(op - 'A' + 'a');
  return put_label(buf, INT_MIN, op, e->mb);
}

/* 256-colour backgrounds chosen to stay distinct for colour-blind readers
 * (blue, orange, yellow, teal: Okabe-Ito hues). */
static const char *op_color(int op) {
  switch (op) {
    case KT_OP_F: return "\x1b[48;5;32;38;5;231m";
    case KT_OP_B: return "\x1b[48;5;208;38;5;16m";
    case KT_OP_I: return "\x1b[48;5;220;38;5;16m";
    case KT_OP_W: return "\x1b[48;5;30;38;5;231m";
    default: return "";
  }
}
#define RESET "\x1b[0m"

/* Largest quantum q that divides every start/end offset (within 1e-6), so
 * unit-cost charts get one cell per unit; 0 when no nice quantum exists. */
static double find_quantum(const kt_timeline *t, double t0) {
  double min_d = INFINITY;
  for (size_t i = 0; i < t->n_events; i++) {
    double d = t->events[i].end - t->events[i].start;
    if (d > 1e-12 && d < min_d) min_d = d;
  }
  if (!isfinite(min_d)) return 0;
  /* try q = min_d / k for small k */
  for (int k = 1; k <= 4; k++) {
    double q = min_d / k;
    int ok = 1;
    for (size_t i = 0; i < t->n_events && ok; i++) {
      double a = (t->events[i].start - t0) / q, b = (t->events[i].end - t0) / q;
      if (fabs(a - round(a)) > 1e-6 || fabs(b - round(b)) > 1e-6) ok = 0;
    }
    if (ok) return q;
  }
  return 0;
}

/* The chart's geometry: time origin and span, label form, scale, columns. */
typedef struct {
  double t0, span, q, scale; /* scale: chars per time unit; q: quantum or 0 */
  int use_short, quantized, cols, band, prefix;
} gantt_layout;

/* "rank NN |": as wide as the largest rank number */
static int prefix_width(int p) {
  char num[16];
  return 7 + snprintf(num, sizeof num, "%d", p > 1 ? p - 1 : 0);
}

int kt_gantt_columns(const kt_gantt_opts *o, int p) {
  return (o->width > 40 ? o->width : 40) - prefix_width(p) - 1;
}

/* The widest label: the digits of the largest stage and micro-batch (the
 * labels' widths grow with them), without formatting every event. */
static int max_label_width(const kt_timeline *t, const kt_gantt_opts *o, int short_form) {
  int stage = 0, mb = 0, odd = 0;
  for (size_t i = 0; i < t->n_events; i++) {
    const kt_event *e = &t->events[i];
    if (e->stage > stage) stage = e->stage;
    if (e->mb > mb) mb = e->mb;
    odd |= e->stage < 0 || e->mb < 0;
  }
  if (odd) { /* negative numbers: every label, as written */
    int w = 2;
    for (size_t i = 0; i < t->n_events; i++) {
      char lab[32];
      int n = short_form ? short_label(&t->events[i], t->p, lab)
                         : kt_event_label(&t->events[i], o->chunks, lab, sizeof lab);
      if (n > w) w = n;
    }
    return w;
  }
  char lab[32];
  int w = put_label(lab, short_form || o->chunks <= 1 ? INT_MIN : stage, 'F', mb);
  return w > 2 ? w : 2;
}

/* Layout, best first: one cell per time quantum with full labels, then with
 * short labels, wrapped into at most MAX_BANDS bands of the width; then one
 * band with narrower cells; then a proportional scale (always for a coarse
 * timeline: its bins are the columns). */
static gantt_layout choose_layout(const kt_timeline *t, const kt_gantt_opts *o) {
  enum { MAX_BANDS = 4 };
  gantt_layout L = {.t0 = INFINITY, .prefix = prefix_width(t->p)};
  double t1 = -INFINITY;
  for (size_t i = 0; i < t->n_events; i++) {
    if (t->events[i].start < L.t0) L.t0 = t->events[i].start;
    if (t->events[i].end > t1) t1 = t->events[i].end;
  }
  /* times far out (1e308, an overflowed sum) are drawn at the axis' limit */
  L.t0 = kt__axis_clamp(L.t0);
  L.span = kt__axis_clamp(t1) - L.t0 > 0 ? kt__axis_clamp(t1) - L.t0 : 1;
  int avail = kt_gantt_columns(o, t->p);
  int label_w = max_label_width(t, o, 0), short_w = max_label_width(t, o, 1), cell = 0;
  L.q = o->coarse ? 0 : find_quantum(t, L.t0);
  if (L.q > 0) {
    double quanta = L.span / L.q; /* may be huge: cells below compare it as a double */
    if (quanta * (label_w + 1) <= (double)avail * MAX_BANDS) cell = label_w + 1;
    else if (o->chunks > 1 && quanta * (short_w + 1) <= (double)avail * MAX_BANDS)
      cell = short_w + 1, L.use_short = 1;
    else {
      cell = (int)floor(avail / quanta);
      if (cell > label_w + 1) cell = label_w + 1;
      L.use_short = o->chunks > 1;
    }
  }
  L.quantized = L.q > 0 && cell >= 1 && L.span / L.q <= avail * MAX_BANDS;
  if (L.quantized) {
    L.scale = cell / L.q;
    L.cols = (int)llround(L.span / L.q) * cell;
    L.band = avail / cell * cell;
  } else {
    L.scale = avail / L.span;
    L.cols = L.band = avail;
  }
  return L;
}

/* The column of time t, within 0..cols (NaN: 0). */
static int column(const gantt_layout *L, double t) {
  double c = round((kt__axis_clamp(t) - L->t0) * L->scale);
  return c > 0 ? c < L->cols ? (int)c : L->cols : 0;
}

/* Each event's cells: its label, or its op letter where the label does not
 * fit; opmap keeps the op per cell for colours. */
static void paint_events(const kt_timeline *t, const kt_gantt_opts *o, const gantt_layout *L,
                         char *grid, signed char *opmap) {
  int cols = L->cols;
  for (size_t i = 0; i < t->n_events; i++) {
    const kt_event *e = &t->events[i];
    if (e->rank < 0 || e->rank >= t->p) continue;
    char *row = grid + (size_t)e->rank * cols;
    signed char *ops = opmap + (size_t)e->rank * cols;
    int c0 = column(L, e->start), c1 = column(L, e->end);
    if (c0 >= cols) c0 = cols - 1;
    if (c1 > cols) c1 = cols;
    if (c1 <= c0) c1 = c0 + 1;
    char lab[32];
    int n = o->coarse      ? snprintf(lab, sizeof lab, "%c", kt_op_letter((kt_op)e->op))
            : L->use_short ? short_label(e, t->p, lab)
                           : kt_event_label(e, o->chunks, lab, sizeof lab);
    for (int c = c0; c < c1; c++) {
      ops[c] = (signed char)e->op;
      row[c] = c - c0 < n ? lab[c - c0] : ' ';
    }
    /* too narrow for the label: keep the op letter visible */
    if (c1 - c0 < n) {
      for (int c = c0 + 1; c < c1; c++) row[c] = ' ';
      row[c0] = lab[L->use_short || o->chunks == 1 ? 0 : strcspn(lab, "FBIW")];
    }
  }
}

/* Time axis: ticks at round numbers (multiples of the step, whatever time
 * the chart starts at: a measured step starts a few microseconds in), at
 * whole quanta from the start when quantized. */
static void draw_axis(const gantt_layout *L, char *axis) {
  memset(axis, ' ', (size_t)L->cols);
  double step_units = kt__nice_step(10.0 / L->scale);
  if (L->quantized && step_units < L->q) step_units = L->q;
  double first = L->quantized ? L->t0 : ceil(L->t0 / step_units - 1e-9) * step_units;
  /* a tick every 10 columns or more: at most one per column whatever the times */
  double ticks = floor((L->t0 + L->span - first) / step_units + 1e-9) + 1;
  if (!(ticks <= L->cols)) ticks = L->cols;
  for (int i = 0; i < (int)ticks; i++) {
    double tt = first + i * step_units;
    if (fabs(tt) < 1e-9 * step_units) tt = 0; /* no -0 or 1e-17 */
    int c = column(L, tt);
    char num[32];
    int n = snprintf(num, sizeof num, "%g", tt);
    if (c + n > L->cols) break;
    int clear = 1;
    for (int k = (c > 0 ? c - 1 : 0); k < c + n && k < L->cols; k++)
      if (axis[k] != ' ') clear = 0;
    if (clear) memcpy(axis + c, num, (size_t)n);
  }
}

static void print_row(kt_buf *b, const char *row, const signed char *ops, int w, int color) {
  if (!color) {
    kt_buf_append(b, row, (size_t)w);
    return;
  }
  int cur = -2;
  for (int c = 0; c < w; c++) {
    if (ops[c] != cur) {
      kt_buf_puts(b, ops[c] >= 0 ? op_color(ops[c]) : RESET);
      cur = ops[c];
    }
    kt_buf_append(b, &row[c], 1);
  }
  kt_buf_puts(b, RESET);
}

/* The chart in bands of the width: the first ranks, the last, the axis. */
static void print_bands(const kt_timeline *t, const kt_gantt_opts *o, const gantt_layout *L,
                        const char *grid, const signed char *opmap, kt_buf *b) {
  int cols = L->cols, shown = t->p <= o->max_ranks ? t->p : o->max_ranks;
  const char *axis = grid + (size_t)t->p * cols;
  for (int c0 = 0; c0 < cols; c0 += L->band) {
    int w = cols - c0 < L->band ? cols - c0 : L->band;
    if (c0) kt_buf_puts(b, "\n");
    for (int r = 0; r < t->p; r++) {
      if (r >= shown && r != t->p - 1) {
        if (r == shown) kt_buf_printf(b, "  ... %d more ranks ...\n", t->p - 1 - shown);
        continue;
      }
      kt_buf_printf(b, "rank %*d |", L->prefix - 7, r);
      print_row(b, grid + (size_t)r * cols + c0, opmap + (size_t)r * cols + c0, w, o->color);
      kt_buf_puts(b, c0 + w < cols ? ">\n" : "|\n");
    }
    for (int k = 0; k < L->prefix; k++) kt_buf_puts(b, " ");
    int aw = w; /* trim trailing blanks of the axis */
    while (aw > 0 && axis[c0 + aw - 1] == ' ') aw--;
    kt_buf_append(b, axis + c0, (size_t)aw);
    kt_buf_puts(b, "\n");
  }
}

void kt_render_gantt_ascii(const kt_timeline *t, const kt_gantt_opts *o, kt_buf *b) {
  if (t->n_events == 0) {
    kt_buf_puts(b, "(empty timeline)\n");
    return;
  }
  gantt_layout L = choose_layout(t, o);
  char *grid = malloc((size_t)(t->p + 1) * (size_t)L.cols);
  signed char *opmap = malloc((size_t)t->p * (size_t)L.cols);
  if (!grid || !opmap) {
    free(grid);
    free(opmap);
    b->failed = 1;
    return;
  }
  memset(grid, '.', (size_t)t->p * (size_t)L.cols);
  memset(opmap, -1, (size_t)t->p * (size_t)L.cols);
  paint_events(t, o, &L, grid, opmap);
  draw_axis(&L, grid + (size_t)t->p * L.cols);
  print_bands(t, o, &L, grid, opmap, b);
  kt_buf_puts(b, "F forward  B backward  I input-grad  W weight-grad  . idle   ");
  if (L.use_short) kt_buf_puts(b, "lower case = later chunk   ");
  if (o->coarse)
    kt_buf_printf(b,
                  "\naggregated: a cell shows the op that used most of its time, '.' a rank idle "
                  "over half of it; one column = %.3g %s\n",
                  1.0 / L.scale, t->time_unit);
  else if (L.quantized) kt_buf_printf(b, "time in %s, one cell = %g\n", t->time_unit, L.q);
  else kt_buf_printf(b, "time in %s, one column = %.3g\n", t->time_unit, 1.0 / L.scale);
  free(grid);
  free(opmap);
}
