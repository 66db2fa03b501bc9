/* The run report's curves over the steps: loss and validation loss,
 * tokens/s, bubble, learning rate and gradient norm, and per rank the peak
 * activation memory, communication time and bytes sent per step.
 *
 * Every step is passed to the chart (which thins it to at most four points
 * per pixel column, keeping peaks); past SMOOTH_FROM steps a centred moving
 * average is drawn over the raw curve, which turns light.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/run_report.h"

#define SMOOTH_FROM 50   /* more steps than this: a moving average over the raw curve */
#define MARKERS_UP_TO 40 /* at most this many steps: a dot per step */

/* Centred moving average over window w, skipping non-finite values. Values
 * are clamped to the charts' range (so sums stay finite), and a window sum
 * that lost its digits to a huge value leaving it is summed again. */
static void moving_average(const double *y, size_t n, size_t w, double *out) {
  double sum = 0;
  size_t cnt = 0, lo = 0, hi = 0, h = w / 2; /* window [lo, hi) */
  for (size_t i = 0; i < n; i++) {
    size_t want_lo = i > h ? i - h : 0, want_hi = i + h + 1 < n ? i + h + 1 : n;
    for (; hi < want_hi; hi++)
      if (isfinite(y[hi])) sum += kt__axis_clamp(y[hi]), cnt++;
    int resum = 0;
    for (; lo < want_lo; lo++)
      if (isfinite(y[lo])) {
        double v = kt__axis_clamp(y[lo]);
        sum -= v, cnt--;
        resum |= fabs(sum) < fabs(v) * 1e-6;
      }
    if (resum) {
      sum = 0;
      for (size_t k = lo; k < hi; k++)
        if (isfinite(y[k])) sum += kt__axis_clamp(y[k]);
    }
    out[i] = cnt ? sum / (double)cnt : NAN;
  }
}

/* An odd window of about a 40th of the steps, 5 to 251. */
static size_t smooth_window(size_t n) {
  size_t w = n / 40;
  return w < 5 ? 5 : w > 251 ? 251 : w | 1;
}

static int any_finite(const double *y, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (isfinite(y[i])) return 1;
  return 0;
}

/* ---- training curves (x = step) ------------------------------------------------ */

typedef struct {
  const kt_run *r;
  double *x;     /* step numbers */
  double *col;   /* scratch: one metric over the steps */
  double *mean;  /* scratch: its moving average */
  size_t n, win; /* steps, moving-average window (0 = none) */
} curves;

/* A metric with its moving average (past SMOOTH_FROM steps) and optional extras. */
static void metric_chart(kt_buf *b, curves *c, size_t field, const char *id, const char *title,
                         const char *name, const char *yl, int w, int h, const char *color,
                         const char *light, const kt_series *extra, size_t n_extra) {
  for (size_t i = 0; i < c->n; i++)
    c->col[i] = *(const double *)((const char *)&c->r->steps[i] + field);
  if (!any_finite(c->col, c->n) && !n_extra) return;
  kt_series s[4];
  size_t k = 0;
  char mean_name[64];
  s[k++] = (kt_series){.name = name,
                       .x = c->x,
                       .y = c->col,
                       .n = c->n,
                       .color = c->win ? light : color,
                       .markers = c->n <= MARKERS_UP_TO};
  if (c->win) {
    moving_average(c->col, c->n, c->win, c->mean);
    snprintf(mean_name, sizeof mean_name, "mean of %zu steps", c->win);
    s[k++] = (kt_series){.name = mean_name, .x = c->x, .y = c->mean, .n = c->n, .color = color};
  }
  for (size_t i = 0; i < n_extra && k < 4; i++) s[k++] = extra[i];
  kt_chart_opts co;
  kt__run_chart_opts(&co, id, title, "step", yl, w, h);
  kt__run_card_begin(b);
  kt_svg_line_chart(b, &co, s, k);
  kt__run_card_end(b);
}

#define FIELD(f) offsetof(kt_run_step, f)

void kt__run_training_section(kt_buf *b, const kt_run *r, double predicted_bubble) {
  size_t n = r->n_steps;
  kt_html_section_begin(b, "training", "Training",
                        n > SMOOTH_FROM
                            ? "Every step is drawn (thinned to a few points per pixel column); "
                              "the dark line is a centred moving average."
                            : "One point per optimizer step.");
  if (n == 0) {
    kt_buf_puts(b, "<p class=\"na\">metrics.jsonl has no complete step yet.</p>\n");
    kt_html_section_end(b);
    return;
  }
  curves c = {.r = r, .n = n, .win = n > SMOOTH_FROM ? smooth_window(n) : 0};
  c.x = kt_calloc(n, sizeof *c.x);
  c.col = kt_calloc(n, sizeof *c.col);
  c.mean = kt_calloc(n, sizeof *c.mean);
  double *val_x = kt_calloc(n, sizeof *val_x), *val_y = kt_calloc(n, sizeof *val_y);
  if (!c.x || !c.col || !c.mean || !val_x || !val_y) {
    b->failed = 1;
    goto done;
  }
  size_t nv = 0;
  for (size_t i = 0; i < n; i++) {
    c.x[i] = r->steps[i].step;
    if (isfinite(r->steps[i].val_loss)) val_x[nv] = c.x[i], val_y[nv++] = r->steps[i].val_loss;
  }
  kt_series val = {.name = "validation loss",
                   .x = val_x,
                   .y = val_y,
                   .n = nv,
                   .color = "#D55E00",
                   .dashed = 1,
                   .markers = nv <= 400};
  kt_buf_puts(b, "<div class=\"row\">\n"); /* one row that wraps: gaps between all cards */
  metric_chart(b, &c, FIELD(loss), "chart-loss", "Loss", "train loss", "loss", CARD_W1, 280,
               "#0072B2", "#56B4E9", &val, nv ? 1 : 0);
  metric_chart(b, &c, FIELD(tokens_per_s), "chart-throughput", "Throughput", "tokens/s", "tokens/s",
               CARD_W2, 220, "#0072B2", "#56B4E9", NULL, 0);
  for (size_t i = 0; i < n; i++) val_x[i] = c.x[i], val_y[i] = 100 * r->steps[i].bubble;
  kt_series bub[3] = {{.name = "measured bubble",
                       .x = val_x,
                       .y = val_y,
                       .n = n,
                       .color = c.win ? "#E69F00" : "#D55E00",
                       .markers = n <= MARKERS_UP_TO}};
  size_t nb = 1;
  double px[2] = {c.x[0], c.x[n - 1]}, py[2] = {predicted_bubble, predicted_bubble};
  if (c.win) {
    moving_average(val_y, n, c.win, c.mean);
    bub[nb++] = (kt_series){.name = "mean", .x = c.x, .y = c.mean, .n = n, .color = "#D55E00"};
  }
  if (isfinite(predicted_bubble))
    bub[nb++] = (kt_series){.name = "predicted (traced step)",
                            .x = px,
                            .y = py,
                            .n = 2,
                            .color = "#000000",
                            .dashed = 1};
  kt_chart_opts co;
  kt__run_chart_opts(&co, "chart-bubble", "Bubble per step", "step",
                     "bubble (% of P \xc3\x97 step)", CARD_W2, 220);
  kt__run_card_begin(b);
  kt_svg_line_chart(b, &co, bub, nb);
  kt__run_card_end(b);
  c.win = 0; /* learning rate and gradient norm: raw */
  metric_chart(b, &c, FIELD(lr), "chart-lr", "Learning rate", "learning rate", "learning rate",
               CARD_W2, 200, "#009E73", NULL, NULL, 0);
  metric_chart(b, &c, FIELD(grad_norm), "chart-grad-norm", "Gradient norm", "gradient norm",
               "\xe2\x80\x96g\xe2\x80\x96 (before clipping)", CARD_W2, 200, "#CC79A7", NULL, NULL,
               0);
  kt_buf_puts(b, "</div>\n");
done:
  free(c.x);
  free(c.col);
  free(c.mean);
  free(val_x);
  free(val_y);
  kt_html_section_end(b);
}

/* ---- per rank, per step ------------------------------------------------------- */

/* One line per shown rank of a per-rank, per-step value (a field of
 * kt_run_rank_step); smooth: past SMOOTH_FROM steps, each rank's moving
 * average instead of its raw values (eight noisy lines are a smear). */
static void rank_lines(kt_buf *b, const kt_run *r, size_t field, double scale, const char *id,
                       const char *title, const char *yl, int w, int smooth, int refs) {
  if (r->ranks == 0 || r->n_steps == 0) return;
  int show[MAX_CURVES], ns = kt__run_pick_ranks(r->ranks, show);
  size_t n = r->n_steps;
  size_t win = smooth && n > SMOOTH_FROM ? smooth_window(n) : 0;
  double *xy = kt_calloc(2 * n * (size_t)ns, sizeof *xy); /* x then y of each series */
  double *raw = kt_calloc(2 * n, sizeof *raw), *avg = raw + n;
  char(*names)[24] = kt_calloc((size_t)ns, sizeof *names);
  kt_series s[MAX_CURVES + KT__MEM_REFS];
  if (!xy || !raw || !names) {
    b->failed = 1;
    free(xy);
    free(raw);
    free(names);
    return;
  }
  int finite = 0, dots = n <= MARKERS_UP_TO;
  for (int k = 0; k < ns; k++) {
    double *x = xy + 2 * n * (size_t)k, *y = x + n;
    for (size_t i = 0; i < n; i++) {
      const kt_run_rank_step *rs = &r->rank_steps[i * (size_t)r->ranks + (size_t)show[k]];
      raw[i] = *(const double *)((const char *)rs + field) / scale;
    }
    if (win) moving_average(raw, n, win, avg);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
      x[m] = r->steps[i].step;
      y[m] = win ? avg[i] : raw[i];
      finite |= isfinite(y[m]);
      /* the middle of three equal values adds nothing to a line (peak
       * memory is flat for thousands of steps) */
      if (!dots && m >= 2 && y[m] == y[m - 1] && y[m - 1] == y[m - 2]) x[m - 1] = x[m], m--;
      m++;
    }
    snprintf(names[k], sizeof names[k], "rank %d", show[k]);
    s[k] = (kt_series){.name = names[k], .x = x, .y = y, .n = m, .markers = dots};
  }
  char full[160];
  size_t len = (size_t)snprintf(full, sizeof full, "%s", title);
  if (win) len += (size_t)snprintf(full + len, sizeof full - len, ", mean of %zu steps", win);
  if (ns < r->ranks) snprintf(full + len, sizeof full - len, " (%d of %d ranks)", ns, r->ranks);
  double ref_xy[4 * KT__MEM_REFS];
  char ref_names[KT__MEM_REFS][64];
  int nr = refs ? kt__run_mem_refs(r, scale, r->steps[0].step, r->steps[n - 1].step, s + ns, ref_xy,
                                   ref_names)
                : 0;
  if (finite) {
    kt_chart_opts co;
    kt__run_chart_opts(&co, id, full, "step", yl, w, 220);
    co.y_min = 0;
    kt__run_card_begin(b);
    kt_svg_line_chart(b, &co, s, (size_t)(ns + nr));
    kt__run_card_end(b);
  }
  free(xy);
  free(raw);
  free(names);
}

void kt__run_memory_section(kt_buf *b, const kt_run *r) {
  if (r->ranks == 0 || r->n_steps == 0) return;
  kt_html_section_begin(
      b, "memory", "Memory and communication",
      "Per step and per rank: the activation memory a rank's stage held at "
      "its peak, the time it spent waiting for or moving data, and what it sent.");
  double peak = kt__run_mem_ref_peak(r), sent = 0;
  for (size_t i = 0; i < r->n_steps * (size_t)r->ranks; i++) {
    if (r->rank_steps[i].peak_act_bytes > peak) peak = r->rank_steps[i].peak_act_bytes;
    if (r->rank_steps[i].bytes_sent > sent) sent = r->rank_steps[i].bytes_sent;
  }
  const char *mu, *su;
  double ms = kt__run_bytes_unit(peak, &mu), ss = kt__run_bytes_unit(sent, &su);
  char yl[64], xl[64];
  snprintf(yl, sizeof yl, "peak activations (%s)", mu);
  kt_buf_puts(b, "<div class=\"row\">\n");
  rank_lines(b, r, RFIELD(peak_act_bytes), ms, "chart-memory", "Peak activation memory per step",
             yl, CARD_W2, 0, 1);
  rank_lines(b, r, RFIELD(comm_time), 1e-3, "chart-comm", "Communication time per step",
             "wait + transfer (ms)", CARD_W2, 1, 0);
  /* bytes sent: one bar per rank, the mean over the steps */
  size_t p = (size_t)r->ranks;
  char(*names)[32] = kt_calloc(p, sizeof *names);
  const char **labels = kt_calloc(p, sizeof *labels);
  double *vals = kt_calloc(p, sizeof *vals);
  if (!names || !labels || !vals) {
    b->failed = 1;
  } else {
    for (size_t k = 0; k < p; k++) {
      snprintf(names[k], sizeof names[k], "rank %zu", k);
      labels[k] = names[k];
      vals[k] = kt__run_rank_mean(r, (int)k, RFIELD(bytes_sent)) / ss;
    }
    static const char *const color[1] = {"#56B4E9"};
    kt_bar_data d = {
        .labels = labels, .n = p, .k = 1, .values = vals, .colors = color, .value_fmt = "%.4g"};
    kt_chart_opts co;
    snprintf(xl, sizeof xl, "sent per step (%s)", su);
    kt__run_chart_opts(&co, "bars-bytes", "Point-to-point bytes sent per step (mean)", xl, NULL,
                       CARD_W2, 0);
    kt__run_card_begin(b);
    kt_svg_bar_chart(b, &co, &d);
    kt__run_card_end(b);
  }
  kt_buf_puts(b, "</div>\n");
  free(names);
  free(labels);
  free(vals);
  kt_html_section_end(b);
}

void kt__run_idle_card(kt_buf *b, const kt_run *r) {
  if (!r->n_steps || r->ranks < 1) return;
  const kt_run_rank_step *last = &r->rank_steps[(r->n_steps - 1) * (size_t)r->ranks];
  size_t p = (size_t)r->ranks, k = 1 + KT_IDLE_CAUSES;
  for (size_t q = 0; q < p; q++)
    if (isnan(last[q].idle.busy))
      return; /* an older run, or MPI ranks without the others' events */
  char(*names)[32] = kt_calloc(p, sizeof *names);
  const char **labels = kt_calloc(p, sizeof *labels);
  double *vals = kt_calloc(p * k, sizeof *vals);
  if (names && labels && vals) {
    const char *tu;
    double ts = kt__run_time_scale(r->steps[r->n_steps - 1].seconds, &tu);
    for (size_t q = 0; q < p; q++) {
      snprintf(names[q], sizeof names[q], "rank %zu", q);
      labels[q] = names[q];
      vals[q * k] = last[q].idle.busy * ts;
      for (int c = 0; c < KT_IDLE_CAUSES; c++)
        vals[q * k + 1 + (size_t)c] = kt_idle_cause(&last[q].idle, c) * ts;
    }
    static const char *const series[] = {"compute (own time)", "schedule", "core_wait", "comm",
                                         "overhead",           "optimizer"};
    static const char *const colors[] = {"#0072B2", "#BBBBBB", "#CC79A7",
                                         "#56B4E9", "#E69F00", "#000000"};
    kt_bar_data d = {.labels = labels,
                     .n = p,
                     .series_names = series,
                     .k = k,
                     .values = vals,
                     .stacked = 1,
                     .colors = colors,
                     .value_fmt = "%.3g"};
    char xl[64], title[96];
    snprintf(xl, sizeof xl, "time in the step (%s)", tu);
    snprintf(title, sizeof title, "Why idle, step %d (docs/runtime.md)",
             r->steps[r->n_steps - 1].step);
    kt_chart_opts co;
    kt__run_chart_opts(&co, "bars-idle", title, xl, NULL, CARD_W2, 0);
    kt__run_card_begin(b);
    kt_svg_bar_chart(b, &co, &d);
    kt__run_card_end(b);
  } else {
    b->failed = 1;
  }
  free(names);
  free(labels);
  free(vals);
}
