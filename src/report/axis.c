/* Axes for any values: ranges, tick steps, tick labels and coordinates that
 * stay finite and bounded whatever the data holds (NaN, ±inf, ±1e308,
 * denormals, a constant series). Every chart and the ASCII Gantt take their
 * ticks from here, so no tick loop can run forever: a loop that adds a step
 * to a value stops advancing once the step falls below the value's spacing
 * (1e20 + 1 == 1e20), and one over an infinite span never ends.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "report/svg_util.h"

/* Coordinates beyond this many px are drawn at it: no renderer shows them,
 * and a long long holds ten times it. */
#define MAX_COORD 1e9

void kt__svg_num(kt_buf *b, double x) {
  if (!isfinite(x)) x = x > 0 ? MAX_COORD : x < 0 ? -MAX_COORD : 0;
  if (x > MAX_COORD) x = MAX_COORD;
  if (x < -MAX_COORD) x = -MAX_COORD;
  long long t = llround(x * 10);
  if (t % 10 == 0) kt_buf_printf(b, "%lld", t / 10);
  else kt_buf_printf(b, "%s%lld.%lld", t < 0 ? "-" : "", llabs(t) / 10, llabs(t) % 10);
}

double kt__axis_clamp(double v) {
  if (isnan(v)) return 0;
  return v > KT_AXIS_MAX ? KT_AXIS_MAX : v < -KT_AXIS_MAX ? -KT_AXIS_MAX : v;
}

double kt__nice_step(double x) {
  if (!(x > 0) || !isfinite(x)) return 1;
  if (x < KT_AXIS_MIN_STEP) x = KT_AXIS_MIN_STEP;
  if (x > KT_AXIS_MAX) x = KT_AXIS_MAX;
  double p10 = pow(10, floor(log10(x)));
  if (x <= p10 * 1.0000001) return p10;
  if (x <= 2 * p10) return 2 * p10;
  if (x <= 5 * p10) return 5 * p10;
  return 10 * p10;
}

void kt__axis_range(double *lo, double *hi) {
  double a = kt__axis_clamp(*lo), b = kt__axis_clamp(*hi);
  if (b < a) {
    double t = a;
    a = b, b = t;
  }
  double mag = fabs(a) > fabs(b) ? fabs(a) : fabs(b);
  /* too narrow for ticks to tell apart (a constant series): room around it */
  if (b - a < mag * 1e-9 || b - a < KT_AXIS_MIN_STEP) {
    double pad = mag > 0 ? mag * 0.1 : 1;
    if (pad < KT_AXIS_MIN_STEP) pad = KT_AXIS_MIN_STEP;
    a = kt__axis_clamp(a - pad);
    b = kt__axis_clamp(b + pad);
  }
  *lo = a, *hi = b;
}

kt__ticks kt__axis_ticks(double v0, double v1, double min_step) {
  kt__ticks t = {0, 1, 0};
  if (!isfinite(v0) || !isfinite(v1) || v1 < v0) return t;
  v0 = kt__axis_clamp(v0), v1 = kt__axis_clamp(v1);
  double mag = fabs(v0) > fabs(v1) ? fabs(v0) : fabs(v1);
  double need = (v1 - v0) / (KT_MAX_TICKS - 1);
  /* a step far above the spacing of the values, so every tick is distinct */
  if (need < mag * 1e-12) need = mag * 1e-12;
  if (!(min_step > need)) min_step = need;
  t.step = kt__nice_step(min_step);
  while (t.step < min_step && t.step < KT_AXIS_MAX) t.step = kt__nice_step(t.step * 1.5);
  double k0 = ceil(v0 / t.step - 1e-9), k1 = floor(v1 / t.step + 1e-9);
  if (!isfinite(k0) || !isfinite(k1) || k1 < k0) return t;
  double n = k1 - k0 + 1;
  t.first = k0 * t.step;
  t.n = n > KT_MAX_TICKS ? KT_MAX_TICKS : (int)n;
  return t;
}

void kt__tick_label(char *buf, size_t n, double v, double step) {
  static const char *const suffix[] = {"", "k", "M", "G", "T"};
  int k = 0;
  if (!isfinite(v)) {
    snprintf(buf, n, "%s", isnan(v) ? "n/a" : v > 0 ? "\xe2\x88\x9e" : "-\xe2\x88\x9e");
    return;
  }
  if (fabs(v) < fabs(step) * 1e-9) {
    snprintf(buf, n, "0");
    return;
  }
  double a = fabs(step) > fabs(v) ? fabs(step) : fabs(v);
  if (a >= 1e16 || a < 1e-6) { /* beyond the suffixes, or tiny: exponent form */
    snprintf(buf, n, "%.3g", v);
    return;
  }
  while (a >= 1e4 && k < 4) a /= 1000, v /= 1000, step /= 1000, k++;
  if (fabs(v) < fabs(step) * 1e-9) v = 0;
  int dec = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
  if (dec > 6) dec = 6;
  snprintf(buf, n, "%.*f%s", dec, v, suffix[k]);
}

int kt__svg_width(double span, double ppu) {
  double w = ceil(KT_SVG_MARGIN_LEFT + span * ppu + KT_SVG_MARGIN_RIGHT);
  return w >= 0 && w <= 1e6 ? (int)w : w > 1e6 ? 1000000 : KT_SVG_MARGIN_LEFT + KT_SVG_MARGIN_RIGHT;
}
