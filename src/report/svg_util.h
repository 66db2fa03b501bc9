/* Internal helpers shared by the SVG and HTML renderers (not public API). */
#ifndef KAITEN_REPORT_SVG_UTIL_H
#define KAITEN_REPORT_SVG_UTIL_H

#include <stddef.h>

#include "kaiten/report.h"

/* ---- axis.c: bounded for any values ---- */

/* Charts map values within ±KT_AXIS_MAX (so a span, 2 * KT_AXIS_MAX, stays
 * finite) and steps of at least KT_AXIS_MIN_STEP; an axis has at most
 * KT_MAX_TICKS ticks. */
#define KT_AXIS_MAX 1e300
#define KT_AXIS_MIN_STEP 1e-300
#define KT_MAX_TICKS 64

/* Appends a coordinate with at most one decimal ("12", "12.5"); beyond
 * ±1e9 px (inf included) the edge, NaN 0. */
void kt__svg_num(kt_buf *b, double x);
/* v within ±KT_AXIS_MAX (NaN: 0). */
double kt__axis_clamp(double v);
/* 1, 2 or 5 times a power of ten, at least x (x clamped to
 * KT_AXIS_MIN_STEP..KT_AXIS_MAX; 1 when x is not a positive number). */
double kt__nice_step(double x);
/* Makes lo..hi a drawable range: both clamped, ordered, and at least a
 * billionth of their magnitude apart (a constant series gets 10% of its
 * value on either side, or 1 around 0). */
void kt__axis_range(double *lo, double *hi);
/* Ticks at first + i * step, i < n, on [v0, v1]: a nice step of at least
 * min_step, coarse enough for at most KT_MAX_TICKS distinct ticks; n = 0 when
 * the range is not finite. */
typedef struct {
  double first, step;
  int n;
} kt__ticks;
kt__ticks kt__axis_ticks(double v0, double v1, double min_step);
/* Whole pixels of a chart of span at ppu px per unit, margins included
 * (at most a million; the margins alone when span * ppu is not a number). */
int kt__svg_width(double span, double ppu);
/* Tick label for v on a grid of step: "0.5", "20", "15k", "2.5M", "1e+20". */
void kt__tick_label(char *buf, size_t n, double v, double step);
/* Approximate width in px of text at font size px (proportional sans). */
double kt__text_width(const char *s, double px);
/* Opens <svg width height viewBox [id] [standalone xmlns + font]> and an
 * optional <title>. */
void kt__svg_open(kt_buf *b, double w, double h, const char *id, const char *title, int standalone,
                  const char *extra_attrs);
/* Horizontal time-or-value axis under a plot: baseline, ticks, labels, and
 * a title centred below. x0, x1 in px map v0, v1. Grid lines up to y_top. */
void kt__svg_x_axis(kt_buf *b, double x0, double x1, double y, double y_top, double v0, double v1,
                    double scale, const char *label);
/* The conveyor-belt replay script (belt.js, compiled in); every page ends with it. */
extern const char kt__belt_js[];
/* Text colour readable on an op's fill. */
const char *kt__op_text_color(int op, int chunk);

#endif
