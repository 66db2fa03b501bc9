/* The run report's autopilot section (docs/runtime.md, "The autopilot"):
 * the pipeline with the rank or link named slow drawn in, and each switch
 * of plan with the step before and after it side by side, measured and
 * predicted. Nothing when no step of the run named a fault or switched. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "report/run_report.h"

#define SLOW "#D55E00"
#define FINE "#56B4E9"

/* The first fault the run named (kind NONE: none), and its last step. */
static kt_run_fault first_fault(const kt_run *r, int *until) {
  kt_run_fault f = {0};
  for (size_t i = 0; i < r->n_steps; i++) {
    const kt_run_fault *x = &r->steps[i].fault;
    if (x->kind == KT_FAULT_NONE) continue;
    if (f.kind == KT_FAULT_NONE) f = *x;
    if (x->kind == f.kind && x->rank == f.rank && x->a == f.a && x->b == f.b)
      *until = r->steps[i].step;
  }
  return f;
}

/* The pipeline: a box per rank, a line per link, the culprit in red with
 * what it did. */
static void pipeline_svg(kt_buf *b, int p, const kt_run_fault *f, int until) {
  int bw = 110, gap = 70, w = 20 + p * bw + (p - 1) * gap + 20, h = 120;
  kt_buf_printf(b,
                "<svg id=\"autopilot-pipeline\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                "font-size=\"12\" role=\"img\"><title>The pipeline's ranks and links; the one "
                "named slow in red</title>\n",
                w, h, w, h);
  for (int r = 0; r < p; r++) {
    int x = 20 + r * (bw + gap), slow = f->kind == KT_FAULT_RANK && f->rank == r;
    if (r + 1 < p) {
      int link = f->kind == KT_FAULT_LINK && f->a == r && f->b == r + 1;
      kt_buf_printf(b,
                    "<line class=\"%s\" x1=\"%d\" x2=\"%d\" y1=\"50\" y2=\"50\" stroke=\"%s\" "
                    "stroke-width=\"%d\"/>\n",
                    link ? "slow" : "link", x + bw, x + bw + gap, link ? SLOW : "#888888",
                    link ? 5 : 2);
      if (link)
        kt_buf_printf(
            b, "<text x=\"%d\" y=\"40\" text-anchor=\"middle\" fill=\"%s\">+%.3g ms</text>\n",
            x + bw + gap / 2, SLOW, 1e3 * f->delay);
    }
    kt_buf_printf(b,
                  "<rect class=\"%s\" x=\"%d\" y=\"30\" width=\"%d\" height=\"40\" rx=\"5\" "
                  "fill=\"%s\"/><text x=\"%d\" y=\"55\" text-anchor=\"middle\" fill=\"#FFFFFF\">"
                  "rank %d%s</text>\n",
                  slow ? "slow" : "rank", x, bw, slow ? SLOW : FINE, x + bw / 2, r,
                  slow ? " (slow)" : "");
    if (slow)
      kt_buf_printf(b,
                    "<text x=\"%d\" y=\"88\" text-anchor=\"middle\" fill=\"%s\">ops x%.3g</text>\n",
                    x + bw / 2, SLOW, f->factor);
  }
  kt_buf_printf(b,
                "<text x=\"20\" y=\"112\" fill=\"#333333\">slow from step %d to step %d</text>"
                "</svg>\n",
                f->since, until);
}

/* Each switch (the first 16): the step before it and the second after
 * it (the first runs after the switch's barrier), measured and predicted. */
static void switch_table(kt_buf *b, const kt_run *r) {
  static const char *const head[] = {
      "switch", "plan",   "step before: measured", "predicted", "step after: measured", "predicted",
      "bound",  "re-plan"};
  enum { COLS = 8, ROWS = 16, LEN = 256 };
  static char text[ROWS][COLS][LEN];
  const char *cells[ROWS * COLS];
  size_t rows = 0;
  for (size_t i = 0; i < r->n_steps && rows < ROWS; i++) {
    const kt_run_switch *w = &r->steps[i].sw;
    if (!w->made) continue;
    double before = i > 0 ? r->steps[i - 1].seconds : NAN;
    double after = r->steps[i + 1 < r->n_steps ? i + 1 : i].seconds;
    char(*c)[LEN] = text[rows];
    snprintf(c[0], LEN, "before step %d: %s", r->steps[i].step, w->kind);
    snprintf(c[1], LEN, "%s \xe2\x86\x92 %s%s%s", w->from, w->to,
             w->partition[0] ? ", layers " : "", w->partition);
    snprintf(c[2], LEN, "%.4g ms", 1e3 * before);
    snprintf(c[3], LEN, "%.4g ms", 1e3 * w->predicted_before);
    snprintf(c[4], LEN, "%.4g ms", 1e3 * after);
    snprintf(c[5], LEN, "%.4g ms", 1e3 * w->predicted_after);
    snprintf(c[6], LEN, "%.4g ms", 1e3 * w->lower_bound);
    snprintf(c[7], LEN, "%.3g ms (%.2g%% of a step)", 1e3 * w->replan_seconds,
             100 * w->replan_fraction);
    for (int k = 0; k < COLS; k++) cells[rows * COLS + (size_t)k] = c[k];
    rows++;
  }
  kt_html_table(b,
                "Each switch: the step before it and the second after it (the first runs "
                "after the switch's barrier), measured, and the simulator's prediction on the "
                "costs measured",
                head, COLS, cells, rows);
}

void kt__run_autopilot_section(kt_buf *b, const kt_run *r) {
  int until = 0, switches = 0;
  kt_run_fault f = first_fault(r, &until);
  for (size_t i = 0; i < r->n_steps; i++) switches += r->steps[i].sw.made;
  if (f.kind == KT_FAULT_NONE && !switches) return;
  kt_html_section_begin(b, "autopilot", "Autopilot",
                        "The rank or link each step named slow (its ops or hand-overs more than "
                        "10% over the ones calibrated on the clean steps before), and the plans "
                        "the autopilot switched to.");
  kt__run_card_begin(b);
  if (f.kind != KT_FAULT_NONE) pipeline_svg(b, r->p > 0 ? r->p : 1, &f, until);
  if (switches) switch_table(b, r);
  else
    kt_buf_puts(b, "<p class=\"na\">No switch: none was predicted to pay for itself "
                   "(or the run had no --autopilot).</p>\n");
  kt__run_card_end(b);
  kt_html_section_end(b);
}
