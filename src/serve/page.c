/* The dashboard page: the report pages' head, styles and closing script
 * (tooltips, the conveyor belt), around places the live script fills from
 * the event stream. One self-contained page: nothing is loaded from
 * elsewhere, and the server's content policy forbids it.
 */
#include <stdio.h>
#include <string.h>

#include "serve/serve_internal.h"

static const char live_css[] =
    "#now table{font-size:14px}\n"
    ".swatch{display:inline-block;width:11px;height:11px;border-radius:2px;margin-right:6px;"
    "vertical-align:-1px}\n"
    ".run{margin:10px 0 22px}\n"
    ".run>h3{margin:0 0 6px}\n"
    "#status{font-weight:600;color:#333}\n"
    "body[data-live=live] #status{color:#007A4D}\n"
    "body[data-live=lost] #status{color:#B00020}\n";

void kt__serve_page(kt_buf *b, const kt_server *s) {
  char title[160], sub[200];
  size_t len = (size_t)snprintf(title, sizeof title, "kaiten %s: ", s->live >= 0 ? "live" : "runs");
  for (int i = 0; i < s->n_runs && len < sizeof title; i++)
    len +=
        (size_t)snprintf(title + len, sizeof title - len, "%s%s", i ? ", " : "", s->runs[i].name);
  snprintf(sub, sizeof sub, "%s: curves, stages and the latest step, as they arrive",
           s->live >= 0 ? "Live training dashboard" : "Training runs");
  kt_html_begin(b, title, sub);
  kt_buf_puts(b, "<style>/*<![CDATA[*/\n");
  kt_buf_puts(b, live_css);
  kt_buf_puts(b, "/*]]>*/</style>\n");
  kt_html_section_begin(b, "summary", "Now", NULL);
  kt_buf_puts(b, "<p id=\"status\">connecting&#8230;</p>\n<div id=\"now\"></div>\n"
                 "<div class=\"card\" id=\"chart-peaks\" hidden=\"hidden\"></div>\n");
  kt_buf_puts(b, "<noscript><p class=\"na\">This page draws with script. The runs' files are "
                 "served under /runs/N/ (config.json, metrics.jsonl, timeline.json, "
                 "trace.json).</p></noscript>\n");
  kt_html_section_end(b);
  kt_html_section_begin(b, "training", "Training",
                        "One point per optimizer step; several runs overlay, one colour each. "
                        "Bubble: idle share of P \xc3\x97 the step, measured every step; the "
                        "prediction comes from the simulator with costs calibrated on the "
                        "latest rendered step.");
  kt_buf_puts(b, "<div class=\"row\">\n<div class=\"card\" id=\"chart-loss\"></div>\n"
                 "<div class=\"card\" id=\"chart-throughput\"></div>\n"
                 "<div class=\"card\" id=\"chart-step-time\"></div>\n"
                 "<div class=\"card\" id=\"chart-bubble\"></div>\n</div>\n");
  kt_html_section_end(b);
  kt_html_section_begin(b, "stages", "Stages and the latest step",
                        "Per rank: the busy share of the latest step and its peak activation "
                        "memory; then that step as measured (one row per rank) and as the "
                        "simulator predicts it, on one time scale. Replay it with the controls "
                        "above the measured chart.");
  kt_buf_puts(b, "<div id=\"runs\"></div>\n");
  kt_html_section_end(b);
  kt_buf_puts(b, "<script>/*<![CDATA[*/\n");
  kt_buf_puts(b, kt__live_js);
  kt_buf_puts(b, "/*]]>*/</script>\n");
  kt_html_end(b);
}
