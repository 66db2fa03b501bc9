/* Internal helpers shared by the SVG and HTML renderers (not public API). */
#ifndef KAITEN_REPORT_SVG_UTIL_H
#define KAITEN_REPORT_SVG_UTIL_H

#include <stddef.h>

#include "kaiten/report.h"

/* Appends a coordinate with at most one decimal ("12", "12.5"). */
void kt__svg_num(kt_buf *b, double x);
/* 1, 2 or 5 times a power of ten, at least x (x > 0). */
double kt__nice_step(double x);
/* Tick label for v on a grid of step: "0.5", "20", "15k", "2.5M". */
void kt__tick_label(char *buf, size_t n, double v, double step);
/* Approximate width in px of text at font size px (proportional sans). */
double kt__text_width(const char *s, double px);
/* Opens <svg width height viewBox [id] [standalone xmlns + font]> and an
 * optional <title>. */
void kt__svg_open(kt_buf *b, double w, double h, const char *id, const char *title,
                  int standalone, const char *extra_attrs);
/* Horizontal time-or-value axis under a plot: baseline, ticks, labels, and
 * a title centred below. x0, x1 in px map v0, v1. Grid lines up to y_top. */
void kt__svg_x_axis(kt_buf *b, double x0, double x1, double y, double y_top, double v0,
                    double v1, double scale, const char *label);
/* The conveyor-belt replay script (belt.js, compiled in); every page ends with it. */
extern const char kt__belt_js[];
/* Text colour readable on an op's fill. */
const char *kt__op_text_color(int op, int chunk);

#endif
