/* The run report's memory and cost pieces: 1F1B's predicted peak and the
 * memory limit as lines on the memory charts, the summary's memory note
 * (what the schedule saves against 1F1B and what it costs in time), and
 * the costs the prediction ran on, per stage. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report/run_report.h"

static const kt_run_segment *current_segment(const kt_run *r) {
  return r->cfg.n_segments > 0 ? &r->cfg.segments[r->cfg.n_segments - 1] : NULL;
}

double kt__run_mem_ref_peak(const kt_run *r) {
  const kt_run_segment *g = current_segment(r);
  if (!g) return 0;
  return fmax(g->peak_1f1b_bytes > 0 ? g->peak_1f1b_bytes : 0,
              g->mem_limit_bytes > 0 ? g->mem_limit_bytes : 0);
}

int kt__run_mem_refs(const kt_run *r, double scale, double x0, double x1, kt_series *out,
                     double *xy, char (*names)[64]) {
  const kt_run_segment *g = current_segment(r);
  int n = 0;
  if (!g) return 0;
  double v[KT__MEM_REFS] = {g->peak_1f1b_bytes, g->mem_limit_bytes};
  static const char *const colors[KT__MEM_REFS] = {"#D55E00", "#B00020"};
  for (int k = 0; k < KT__MEM_REFS; k++) {
    if (!(v[k] > 0) || !isfinite(v[k] / scale)) continue;
    if (k == 0) snprintf(names[n], 64, "1F1B's predicted peak");
    else snprintf(names[n], 64, "--mem-limit %s", g->mem_limit);
    double *p = xy + 4 * n;
    p[0] = x0, p[1] = x1, p[2] = p[3] = v[k] / scale;
    out[n] =
        (kt_series){.name = names[n], .x = p, .y = p + 2, .n = 2, .color = colors[k], .dashed = 1};
    n++;
  }
  return n;
}

/* One calibrated cost: "T_F 0.233, 0.345 ms" (per stage) or "T_comm 0.916 ms". */
static void cost_text(kt_buf *b, const char *name, double u, const double *per, int n, double ts,
                      const char *tu) {
  kt_buf_printf(b, "%s ", name);
  if (!per || n <= 0) {
    kt_buf_printf(b, "%.4g", u * ts);
  } else {
    for (int s = 0; s < n && s < 16; s++) kt_buf_printf(b, "%s%.4g", s ? ", " : "", per[s] * ts);
    if (n > 16) kt_buf_printf(b, ", \xe2\x80\xa6 (%d stages)", n);
  }
  kt_buf_printf(b, " %s", tu);
}

/* The costs the prediction ran on, per stage where calibrated per stage. */
void kt__run_calibrated_costs(kt_buf *b, const kt_costs *c, double ts, const char *tu) {
  int n = c->n_stages;
  kt_buf_puts(b, "<br/><span class=\"costs\" id=\"calibrated\">simulator, costs calibrated on "
                 "a median step");
  kt_buf_puts(b, n > 0 ? " (per stage): " : ": ");
  cost_text(b, "T_F", c->tf, c->stage_tf, n, ts, tu);
  kt_buf_puts(b, " &#183; ");
  cost_text(b, "T_B", c->tb, c->stage_tb, n, ts, tu);
  kt_buf_puts(b, " &#183; ");
  cost_text(b, "T_W", c->tw, c->stage_tw, n, ts, tu);
  kt_buf_puts(b, " &#183; ");
  cost_text(b, "T_comm", kt_cost_comm(c), NULL, 0, ts, tu);
  if (c->send_overhead > 0) {
    kt_buf_puts(b, " &#183; ");
    cost_text(b, "send overhead", c->send_overhead, NULL, 0, ts, tu);
  }
  if (c->tu > 0 || c->stage_tu) {
    kt_buf_puts(b, " &#183; ");
    cost_text(b, "update", c->tu, c->stage_tu, n, ts, tu);
  }
  kt_buf_puts(b, "</span>");
}

/* The memory the run's last step held against 1F1B's on the same model,
 * the limit, and what the schedule costs in time for it. */
void kt__run_memory_note(kt_buf *b, const kt_run *r) {
  const kt_run_segment *g = current_segment(r);
  double most = NAN;
  for (int k = 0; r->n_steps && k < r->ranks; k++) {
    double v = r->rank_steps[(r->n_steps - 1) * (size_t)r->ranks + (size_t)k].peak_act_bytes;
    if (isfinite(v) && !(most >= v)) most = v;
  }
  if (!g || !isfinite(most) || !(g->peak_1f1b_bytes > 0)) return;
  const char *mu;
  double sc = kt__run_bytes_unit(fmax(most, g->peak_1f1b_bytes), &mu);
  kt_buf_printf(b,
                "<p class=\"note\" id=\"memory-summary\">Memory: the largest rank's peak "
                "activations in the last step, <b>%.4g %s</b>, are <b>%.3fx</b> 1F1B's "
                "predicted peak on this model (%.4g %s at P=%d, M=%d)",
                most / sc, mu, most / g->peak_1f1b_bytes, g->peak_1f1b_bytes / sc, mu, g->p, g->m);
  if (g->mem_limit[0] && g->mem_limit_bytes > 0)
    kt_buf_printf(b, " under --mem-limit %s (%.4g %s)", g->mem_limit, g->mem_limit_bytes / sc, mu);
  else if (g->mem_limit[0]) kt_buf_printf(b, " under --mem-limit %s", g->mem_limit);
  if (g->period_1f1b > 0 && g->predicted_period > 0)
    kt_buf_printf(b,
                  "; in time, its predicted period is <b>%.3fx</b> 1F1B's (%.4g ms against "
                  "%.4g ms, on the costs calibrated on a median step)",
                  g->predicted_period / g->period_1f1b, 1e3 * g->predicted_period,
                  1e3 * g->period_1f1b);
  kt_buf_puts(b, ".</p>\n");
  kt__run_stage_memory(b, g);
}

/* One of the model's memories per stage as a list in unit sc, and as the
 * bytes in data-NAME. */
static void stage_bytes(kt_buf *b, const char *what, const char *name, const double *v, int n,
                        double sc, const char *mu) {
  if (!v) return;
  kt_buf_printf(b, "<span data-%s=\"", name);
  for (int s = 0; s < n; s++) kt_buf_printf(b, "%s%.17g", s ? "," : "", v[s]);
  kt_buf_printf(b, "\">%s ", what);
  for (int s = 0; s < n && s < 16; s++) kt_buf_printf(b, "%s%.4g", s ? ", " : "", v[s] / sc);
  if (n > 16) kt_buf_printf(b, ", \xe2\x80\xa6 (%d stages)", n);
  kt_buf_printf(b, " %s</span>", mu);
}

/* The model's memory per stage as train measured it (config.json): what
 * the schedule was generated with and what `compare --costs RUN` reads. */
void kt__run_stage_memory(kt_buf *b, const kt_run_segment *g) {
  if (!g || g->n_mem <= 0 || !g->mem_act_bytes) return;
  double most = 0;
  for (int s = 0; s < g->n_mem; s++) most = fmax(most, g->mem_act_bytes[s]);
  const char *mu;
  double sc = kt__run_bytes_unit(most, &mu);
  kt_buf_puts(b, "<p class=\"note\" id=\"memory-per-stage\">The model's memory per stage, "
                 "measured by train (config.json; what its schedule was generated with): ");
  stage_bytes(b, "M_B (an F keeps until its B or I)", "act", g->mem_act_bytes, g->n_mem, sc, mu);
  kt_buf_puts(b, " &#183; ");
  stage_bytes(b, "M_W (an I keeps until its W)", "wgrad", g->mem_wgrad_bytes, g->n_mem, sc, mu);
  if (g->mem_transient_bytes) kt_buf_puts(b, " &#183; ");
  stage_bytes(b, "transient (a backward holds while it runs)", "transient", g->mem_transient_bytes,
              g->n_mem, sc, mu);
  kt_buf_puts(b, ".</p>\n");
}
