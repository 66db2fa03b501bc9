/* HTML page pieces: head with inline CSS, sections, tables, the tooltip
 * script, and the timeline-derived series every report draws.
 *
 * The markup is XHTML-compatible (every element closed, attributes quoted,
 * numeric character references only, script and style wrapped in CDATA
 * inside comments) so it parses with an XML parser as well as a browser.
 * Nothing refers outside the file.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report/svg_util.h"
#include "report/whatif.h"

static const char page_css[] =
    "*{box-sizing:border-box}\n"
    "body{margin:0;font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,'Helvetica Neue',"
    "Arial,sans-serif;color:#1b1b1b;background:#ffffff}\n"
    "header{padding:16px 28px 12px;border-bottom:1px solid #dde3ea;background:#f5f8fb}\n"
    "h1{font-size:21px;margin:0 0 3px}\n"
    "h2{font-size:17px;margin:0 0 6px}\n"
    "h3{font-size:15px;margin:0}\n"
    ".sub{color:#555;margin:0}\n"
    "main{padding:6px 28px 20px}\n"
    "section{margin:16px 0 24px}\n"
    ".note{color:#666;margin:0 0 8px;font-size:13px}\n"
    ".row{display:flex;flex-wrap:wrap;gap:14px;align-items:flex-start}\n"
    ".card{border:1px solid #e2e6ea;border-radius:6px;padding:6px 8px;background:#ffffff}\n"
    ".sched{margin:4px 0 12px}\n"
    ".head{display:flex;gap:16px;align-items:baseline;flex-wrap:wrap;margin:0 0 2px}\n"
    ".facts{color:#444;font-size:13px}\n"
    ".facts b{color:#000;font-weight:600}\n"
    ".scroll{overflow-x:auto;max-width:100%}\n"
    "svg{display:block}\n"
    "svg text{font-family:inherit}\n"
    "svg.gantt rect[data-op]:hover{stroke:#000000;stroke-width:1.5}\n"
    "svg.gantt rect.kt-now{stroke:#000000;stroke-width:2.5}\n"
    ".kt-belt{margin:6px 0 6px;font-size:13px;color:#333}\n"
    ".kt-controls{display:flex;gap:4px;align-items:center;flex-wrap:wrap;margin:0 0 4px}\n"
    ".kt-controls button{font:inherit;padding:1px 9px;border:1px solid #b9c0c8;"
    "border-radius:4px;background:#f5f7f9;cursor:pointer}\n"
    ".kt-controls input{width:340px}\n"
    ".kt-read{margin-left:8px;font-variant-numeric:tabular-nums}\n"
    "table{border-collapse:collapse;font-size:13px;margin:4px 0}\n"
    "caption{text-align:left;color:#666;padding:0 0 4px}\n"
    "th,td{border-bottom:1px solid #e6e6e6;padding:3px 10px;text-align:left;white-space:nowrap}\n"
    "th{background:#f1f4f7;font-weight:600}\n"
    "td.num{text-align:right;font-variant-numeric:tabular-nums}\n"
    ".na{color:#666}\n"
    ".tip{position:fixed;pointer-events:none;background:#1f1f1f;color:#ffffff;font-size:12px;"
    "padding:4px 8px;border-radius:4px;white-space:nowrap;z-index:10}\n"
    "footer{color:#777;font-size:12px;padding:8px 28px 20px;border-top:1px solid #e6e6e6}\n";

/* Tooltips for Gantt bars and chart bars; marks the body when it ran. Kept
 * free of line comments and of the sequence that closes a CDATA section. */
static const char page_js[] =
    "(function(){\n"
    "var body=document.body,tip=document.getElementById('kt-tip');\n"
    "window.addEventListener('error',function(e){\n"
    "  body.setAttribute('data-kt','error: '+e.message);});\n"
    "function num(v){return String(+v.toPrecision(4));}\n"
    "function attr(el,n){return el.getAttribute(n);}\n"
    "function describe(r){\n"
    "  var svg=r.ownerSVGElement;if(!svg)return null;\n"
    "  if(r.hasAttribute('data-bar')){return attr(r,'data-label')||num(+attr(r,'data-value'));}\n"
    "  if(!r.hasAttribute('data-op'))return null;\n"
    "  var x0=+attr(svg,'data-x0'),ppu=+attr(svg,'data-ppu');\n"
    "  var sc=+attr(svg,'data-tscale')||1,u=attr(svg,'data-tunit')||'';\n"
    "  var a=(+attr(r,'x')-x0)/ppu,z=a+(+attr(r,'width'))/ppu;\n"
    "  var when=num(a*sc)+' \\u2192 '+num(z*sc)+' '+u;\n"
    "  var op=attr(r,'data-op');\n"
    "  if(r.hasAttribute('data-pred'))return 'predicted '+op+' \\u00b7 '+when;\n"
    "  if(r.hasAttribute('data-n'))return 'rank '+attr(r,'data-rank')+' \\u00b7 '+when+': '+"
    "attr(r,'data-n')+' '+op+' actions start, '+op+' '+Math.round(100*attr(r,'data-util'))+"
    "'% of the time';\n"
    "  return 'rank '+attr(r,'data-rank')+' \\u00b7 stage '+attr(r,'data-stage')+' \\u00b7 '+op+"
    "' micro-batch '+attr(r,'data-mb')+' \\u00b7 '+when;\n"
    "}\n"
    "document.addEventListener('mousemove',function(ev){\n"
    "  var t=ev.target,s=(t&&t.tagName&&t.tagName.toLowerCase()==='rect')?describe(t):null;\n"
    "  if(!s){tip.hidden=true;return;}\n"
    "  tip.textContent=s;tip.hidden=false;\n"
    "  tip.style.left=Math.min(ev.clientX+14,window.innerWidth-tip.offsetWidth-8)+'px';\n"
    "  tip.style.top=(ev.clientY+16)+'px';\n"
    "});\n"
    "if(body.getAttribute('data-kt')==='loading')body.setAttribute('data-kt','ready');\n"
    "})();\n";

void kt_html_text(kt_buf *b, const char *s) { kt_buf_xml_escape(b, s); }

void kt_html_begin(kt_buf *b, const char *title, const char *subtitle) {
  kt_buf_puts(b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
                 "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n"
                 "<meta name=\"generator\" content=\"kaiten\"/>\n<title>");
  kt_html_text(b, title ? title : "kaiten report");
  kt_buf_puts(b, "</title>\n<style>/*<![CDATA[*/\n");
  kt_buf_puts(b, page_css);
  kt_buf_puts(b, "/*]]>*/</style>\n</head>\n<body data-kt=\"loading\">\n<header>\n<h1>");
  kt_html_text(b, title ? title : "kaiten report");
  kt_buf_puts(b, "</h1>\n");
  if (subtitle) {
    kt_buf_puts(b, "<p class=\"sub\">");
    kt_html_text(b, subtitle);
    kt_buf_puts(b, "</p>\n");
  }
  kt_buf_puts(b, "</header>\n<main>\n");
}

void kt_html_end(kt_buf *b) {
  kt_buf_puts(b, "</main>\n<footer>Generated by kaiten. Self-contained: inline SVG, CSS and a "
                 "little script; no network. Colours: Okabe&#8211;Ito (colour-blind safe). "
                 "Hover a bar for details; the controls above a Gantt replay it.</footer>\n"
                 "<div id=\"kt-tip\" class=\"tip\" hidden=\"hidden\"></div>\n");
  kt__whatif_assets(b);
  kt_buf_puts(b, "<script>/*<![CDATA[*/\n");
  kt_buf_puts(b, page_js);
  kt_buf_puts(b, kt__belt_js);
  kt__whatif_scripts(b);
  kt_buf_puts(b, "/*]]>*/</script>\n</body>\n</html>\n");
}

void kt_html_section_begin(kt_buf *b, const char *id, const char *heading, const char *note) {
  kt_buf_puts(b, "<section");
  if (id) {
    kt_buf_puts(b, " id=\"");
    kt_html_text(b, id);
    kt_buf_puts(b, "\"");
  }
  kt_buf_puts(b, ">\n");
  if (heading) {
    kt_buf_puts(b, "<h2>");
    kt_html_text(b, heading);
    kt_buf_puts(b, "</h2>\n");
  }
  if (note) {
    kt_buf_puts(b, "<p class=\"note\">");
    kt_html_text(b, note);
    kt_buf_puts(b, "</p>\n");
  }
}

void kt_html_section_end(kt_buf *b) { kt_buf_puts(b, "</section>\n"); }

static int looks_numeric(const char *s) {
  char *end;
  strtod(s, &end);
  if (end == s) return 0;
  while (*end == ' ') end++;
  return *end == 0 || !strcmp(end, "%");
}

void kt_html_table(kt_buf *b, const char *caption, const char *const *header, size_t ncols,
                   const char *const *cells, size_t nrows) {
  kt_buf_puts(b, "<table>\n");
  if (caption) {
    kt_buf_puts(b, "<caption>");
    kt_html_text(b, caption);
    kt_buf_puts(b, "</caption>\n");
  }
  kt_buf_puts(b, "<thead><tr>");
  for (size_t j = 0; j < ncols; j++) {
    kt_buf_puts(b, "<th>");
    kt_html_text(b, header[j] ? header[j] : "");
    kt_buf_puts(b, "</th>");
  }
  kt_buf_puts(b, "</tr></thead>\n<tbody>\n");
  for (size_t i = 0; i < nrows; i++) {
    kt_buf_puts(b, "<tr>");
    for (size_t j = 0; j < ncols; j++) {
      const char *c = cells[i * ncols + j];
      kt_buf_puts(b, c && looks_numeric(c) ? "<td class=\"num\">" : "<td>");
      kt_html_text(b, c ? c : "");
      kt_buf_puts(b, "</td>");
    }
    kt_buf_puts(b, "</tr>\n");
  }
  kt_buf_puts(b, "</tbody>\n</table>\n");
}

/* ---- series derived from timelines ----------------------------------------- */

typedef struct {
  double t, v;
  size_t i;
} mem_pt;

static int cmp_pt(const void *a, const void *b) {
  const mem_pt *x = a, *y = b;
  if (x->t != y->t) return x->t < y->t ? -1 : 1;
  return x->i < y->i ? -1 : x->i > y->i;
}

void kt_series_free(kt_series *s, size_t n) {
  if (!s) return;
  for (size_t i = 0; i < n; i++) {
    free((void *)s[i].x);
    free((void *)s[i].name);
  }
  free(s);
}

kt_status kt_timeline_mem_series(const kt_timeline *t, double t_from, double t_to, kt_series **out,
                                 size_t *n) {
  *out = NULL;
  *n = 0;
  int p = t->p > 0 ? t->p : 0;
  kt_series *s = kt_calloc(p ? (size_t)p : 1, sizeof *s);
  mem_pt *pts = kt_calloc(t->n_mem ? t->n_mem : 1, sizeof *pts);
  if (!s || !pts) goto oom;
  for (int r = 0; r < p; r++) {
    size_t m = 0;
    for (size_t i = 0; i < t->n_mem; i++)
      if (t->mem[i].rank == r) pts[m++] = (mem_pt){t->mem[i].t, t->mem[i].value, i};
    qsort(pts, m, sizeof *pts, cmp_pt);
    /* x then y in one block: a leading 0 at t_from and a closing hold at t_to */
    double *xy = kt_calloc(2 * (m + 2), sizeof *xy);
    char *name = malloc(24);
    if (!xy || !name) {
      free(xy);
      free(name);
      *n = (size_t)r;
      goto oom_series;
    }
    double *x = xy, *y = xy + m + 2;
    size_t k = 0;
    if (m == 0 || pts[0].t > t_from) x[k] = t_from, y[k++] = 0;
    /* several changes at one instant: the level after the last one holds */
    for (size_t i = 0; i < m; i++) {
      if (k > 0 && x[k - 1] == pts[i].t) k--;
      x[k] = pts[i].t, y[k++] = pts[i].v;
    }
    if (t_to > x[k - 1]) x[k] = t_to, y[k] = y[k - 1], k++;
    snprintf(name, 24, "rank %d", r);
    s[r] = (kt_series){.name = name, .x = x, .y = y, .n = k, .step = 1};
  }
  free(pts);
  *out = s;
  *n = (size_t)p;
  return KT_OK;
oom_series:
  kt_series_free(s, *n);
  s = NULL;
  *n = 0;
oom:
  free(s);
  free(pts);
  return KT_ENOMEM;
}

void kt_svg_rank_utilisation(kt_buf *b, const kt_metrics *m, const char *time_label,
                             const kt_chart_opts *o) {
  size_t p = m->p > 0 ? (size_t)m->p : 0;
  char(*names)[48] = kt_calloc(p ? p : 1, sizeof *names);
  const char **labels = kt_calloc(p ? p : 1, sizeof *labels);
  double *vals = kt_calloc(p ? 2 * p : 1, sizeof *vals);
  if (!names || !labels || !vals) {
    b->failed = 1;
  } else {
    for (size_t r = 0; r < p; r++) {
      const kt_rank_metrics *rm = &m->ranks[r];
      double util = m->period > 0 ? 100 * rm->busy / m->period : 0;
      snprintf(names[r], sizeof names[r], "rank %zu (%.0f%%)", r, util);
      labels[r] = names[r];
      vals[2 * r] = rm->busy;
      vals[2 * r + 1] = m->period - rm->busy > 0 ? m->period - rm->busy : 0;
    }
    static const char *const series[] = {"busy", "idle"};
    static const char *const colors[] = {"#0072B2", "#D9D9D9"};
    kt_bar_data d = {.labels = labels,
                     .n = p,
                     .series_names = series,
                     .k = 2,
                     .values = vals,
                     .stacked = 1,
                     .colors = colors,
                     .value_fmt = "%g"};
    kt_chart_opts def;
    if (o) def = *o;
    else kt_chart_default_opts(&def);
    if (!def.x_label) def.x_label = time_label;
    kt_svg_bar_chart(b, &def, &d);
  }
  free(names);
  free(labels);
  free(vals);
}
