/* The what-if panel's place in a page (whatif*.js run it): the simulator
 * every page carries (the wasm bytes of the build, base64url in an inert
 * script element), the panel's styles and scripts, and one <details> per
 * Gantt seeded with what that chart ran: the schedule, sizes, costs as the
 * user gave them, the order as it ran (kaiten text, from the timeline) and,
 * for a measured step, its events, critical path and per-rank figures.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/generators.h"
#include "report/svg_util.h"
#include "report/whatif.h"

/* A seed's order only up to this many actions (the text rides in the page). */
#define ORDER_MAX_EVENTS 200000

static const char whatif_css[] =
    "details.kt-whatif{margin:6px 0 14px;border:1px solid #d7dde4;border-radius:6px;"
    "padding:4px 10px;background:#fbfcfd}\n"
    "details.kt-whatif>summary{cursor:pointer;font-weight:600;color:#0b5394}\n"
    ".kt-wi-controls{display:flex;flex-wrap:wrap;gap:6px 16px;align-items:center;margin:6px 0;"
    "font-size:13px}\n"
    ".kt-wi-controls input[type=range]{width:120px;vertical-align:middle}\n"
    ".kt-wi-controls input[type=number]{width:70px}\n"
    ".kt-wi-facts,.kt-wi-diffline{font-size:13px;margin:4px 0}\n"
    ".kt-wi-error{color:#B00020;font-weight:600;margin:4px 0}\n"
    ".kt-wi-at{font-size:13px;min-height:18px;margin:2px 0;font-variant-numeric:tabular-nums}\n"
    ".kt-wi-tools{font-size:13px;display:flex;gap:10px;align-items:center;flex-wrap:wrap}\n"
    ".kt-wi-hint{color:#666}\n"
    ".kt-wi-label{font-size:12px;color:#555;margin:4px 0 0}\n"
    ".kt-wi-cmd{font-size:12px;color:#444;word-break:break-all}\n"
    ".kt-wi-file{font-size:12px;margin:4px 0}\n"
    ".kt-wi-file textarea{display:block;width:100%;font:11px monospace}\n"
    "details.kt-whatif h4{margin:2px 0 4px;font-size:13px}\n"
    "svg.kt-wi-gantt rect[data-i]{cursor:grab}\n";

void kt__whatif_assets(kt_buf *b) {
  static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  kt_buf_puts(b, "<style>/*<![CDATA[*/\n");
  kt_buf_puts(b, whatif_css);
  kt_buf_puts(
      b, "/*]]>*/</style>\n<script type=\"application/x-kt-wasm\" id=\"kt-wasm\" data-kinds=\"");
  kt_html_text(b, kt_gen_kind_list());
  kt_buf_puts(b, "\">");
  /* base64url: no '/' or '+', so nothing in it reads as a path or a link */
  char quad[4];
  for (size_t i = 0; i < kt__wasm_len; i += 3) {
    unsigned x = (unsigned)kt__wasm[i] << 16;
    size_t left = kt__wasm_len - i;
    if (left > 1) x |= (unsigned)kt__wasm[i + 1] << 8;
    if (left > 2) x |= kt__wasm[i + 2];
    int n = left > 2 ? 4 : (int)left + 1;
    for (int k = 0; k < 4; k++) quad[k] = abc[(x >> (18 - 6 * k)) & 63];
    kt_buf_append(b, quad, (size_t)n);
    if (i % 3072 == 3069) kt_buf_puts(b, "\n");
  }
  kt_buf_puts(b, "</script>\n");
}

void kt__whatif_scripts(kt_buf *b) {
  kt_buf_puts(b, kt__whatif_draw_js);
  kt_buf_puts(b, kt__whatif_ui_js);
  kt_buf_puts(b, kt__whatif_edit_js);
  kt_buf_puts(b, kt__whatif_js);
}

/* "x" or [x0, x1, ...] */
static void cost_json(kt_buf *b, const char *key, double u, const double *per, int n) {
  kt_buf_printf(b, ",\"%s\":", key);
  if (!per || n <= 0) {
    kt_buf_json_number(b, u);
    return;
  }
  kt_buf_puts(b, "[");
  for (int s = 0; s < n; s++) {
    if (s) kt_buf_puts(b, ",");
    kt_buf_json_number(b, per[s]);
  }
  kt_buf_puts(b, "]");
}

/* With per-micro-batch values (a run calibrated on micro-batches that
 * differ): a list per stage of its micro-batches' values; else cost_json. */
static void cost_json_mb(kt_buf *b, const char *key, double u, const double *per, int n,
                         const double *mb, int n_mb) {
  if (!mb || n <= 0 || n_mb <= 0) {
    cost_json(b, key, u, per, n);
    return;
  }
  kt_buf_printf(b, ",\"%s\":[", key);
  for (int s = 0; s < n; s++) {
    kt_buf_puts(b, s ? ",[" : "[");
    for (int j = 0; j < n_mb; j++) {
      if (j) kt_buf_puts(b, ",");
      kt_buf_json_number(b, mb[(size_t)s * (size_t)n_mb + (size_t)j]);
    }
    kt_buf_puts(b, "]");
  }
  kt_buf_puts(b, "]");
}

void kt__whatif_costs_json(kt_buf *b, const kt_costs *c) {
  int n = c->n_stages, nm = kt_costs_mb_differ(c) ? c->n_mb : 0; /* equal lists: per stage */
  kt_buf_puts(b, "{\"overlap\":");
  kt_buf_json_number(b, c->overlap);
  cost_json_mb(b, "tf", c->tf, c->stage_tf, n, c->mb_tf, nm);
  cost_json_mb(b, "tb", c->tb, c->stage_tb, n, c->mb_tb, nm);
  cost_json_mb(b, "tw", c->tw, c->stage_tw, n, c->mb_tw, nm);
  cost_json_mb(b, "mem-act", c->mem_act, c->stage_mem_act, n, c->mb_mem_act, nm);
  cost_json_mb(b, "mem-wgrad", c->mem_wgrad, c->stage_mem_wgrad, n, c->mb_mem_wgrad, nm);
  if (c->mem_transient > 0 || c->stage_mem_transient)
    cost_json(b, "mem-transient", c->mem_transient, c->stage_mem_transient, n);
  if (c->comm_bandwidth > 0) {
    cost_json(b, "comm-latency", c->comm_latency, NULL, 0);
    cost_json(b, "comm-bytes", c->comm_bytes, NULL, 0);
    cost_json(b, "comm-bandwidth", c->comm_bandwidth, NULL, 0);
  } else if (c->n_links > 0) { /* each link's hop, its delay included */
    kt_buf_puts(b, ",\"comm\":[");
    for (int l = 0; l < c->n_links; l++) {
      if (l) kt_buf_puts(b, ",");
      kt_buf_json_number(b, kt_cost_link_at(c, l));
    }
    kt_buf_puts(b, "]");
  } else {
    cost_json(b, "comm", c->comm, NULL, 0);
  }
  cost_json(b, "send-overhead", c->send_overhead, NULL, 0);
  cost_json(b, "op-overhead", c->op_overhead, NULL, 0);
  /* the step's end, as the costs say it (the panel passes it on unchanged) */
  if (c->tu > 0 || c->stage_tu) cost_json(b, "tu", c->tu, c->stage_tu, n);
  if (c->t_norm > 0) cost_json(b, "t-norm", c->t_norm, NULL, 0);
  if (c->t_dp > 0) cost_json(b, "t-dp", c->t_dp, NULL, 0);
  if (c->tied) cost_json(b, "tie", c->t_tie, NULL, 0);
  if (c->step_sync != KT_STEP_OVERLAP) {
    kt_buf_puts(b, ",\"step-sync\":");
    kt_buf_json_string(b, kt_step_sync_name(c->step_sync));
  }
  kt_buf_puts(b, "}");
}

/* The order a timeline ran, as kaiten text (each rank's actions by start;
 * the placement is inferred back from where the stages sit). */
static void order_json(kt_buf *b, const kt_timeline *t) {
  size_t n = t->n_events;
  if (!n || n > ORDER_MAX_EVENTS) return;
  kt_timeline sorted = *t;
  sorted.events = kt_calloc(n, sizeof *sorted.events);
  int S = 0, M = 0;
  int32_t *table = NULL;
  kt_schedule s = {0};
  kt_buf text;
  kt_buf_init(&text);
  if (!sorted.events) goto done;
  memcpy(sorted.events, t->events, n * sizeof *t->events);
  sorted.n_mem = sorted.n_comm = 0;
  kt_timeline_sort(&sorted);
  for (size_t i = 0; i < n; i++) {
    if (sorted.events[i].stage + 1 > S) S = sorted.events[i].stage + 1;
    if (sorted.events[i].mb + 1 > M) M = sorted.events[i].mb + 1;
  }
  if (!(table = kt_calloc((size_t)S, sizeof *table))) goto done;
  for (size_t i = 0; i < n; i++) table[sorted.events[i].stage] = sorted.events[i].rank;
  if (kt_schedule_init(&s, t->p, 1, M, KT_PLACEMENT_EXPLICIT, NULL) ||
      kt_schedule_set_stage_table(&s, S, table, NULL))
    goto done;
  for (size_t i = 0; i < n; i++) {
    const kt_event *e = &sorted.events[i];
    if (kt_schedule_push(&s, e->rank, e->stage, (kt_op)e->op, e->mb)) goto done;
    kt_rank_actions *ra = &s.ranks[e->rank];
    ra->actions[ra->n - 1].flags = e->flags & KT_ACTION_OVERLAP_NEXT;
  }
  /* only an order that is one (a coarse timeline's bins are not) */
  if (kt_schedule_validate(&s, NULL)) goto done;
  kt_schedule_write_text(&s, &text);
  if (!text.failed && text.data) {
    kt_buf_puts(b, ",\"order\":");
    kt_buf_json_string(b, text.data);
  }
done:
  kt_buf_free(&text);
  kt_schedule_free(&s);
  free(table);
  free(sorted.events);
}

/* A measured step: its events with their slack, the critical path of the
 * measurement (kt_timeline_critical with no hop: the waits hold the
 * transfers) and each rank's busy time. */
static void measured_json(kt_buf *b, const kt__whatif_seed *w) {
  const kt_timeline *t = w->measured;
  kt_critical cr;
  if (!t || kt_timeline_critical(t, 0, 0, &cr, NULL)) return;
  kt_buf_puts(b, ",\"measured\":{\"svg\":");
  kt_buf_json_string(b, w->measured_svg ? w->measured_svg : "");
  kt_buf_puts(b, ",\"events\":[");
  for (size_t i = 0; i < t->n_events; i++) {
    const kt_event *e = &t->events[i];
    kt_buf_printf(b, "%s[%d,%d,%d,\"%c\",", i ? "," : "", e->rank, e->stage, e->mb,
                  kt_op_letter((kt_op)e->op));
    kt_buf_json_number(b, e->start);
    kt_buf_puts(b, ",");
    kt_buf_json_number(b, e->end);
    kt_buf_puts(b, ",");
    kt_buf_json_number(b, cr.slack[i]);
    kt_buf_puts(b, "]");
  }
  kt_buf_puts(b, "],\"path\":[");
  for (size_t i = 0; i < cr.n_path; i++) kt_buf_printf(b, "%s%zu", i ? "," : "", cr.path[i]);
  kt_buf_puts(b, "],\"ranks\":[");
  for (int r = 0; r < w->n_busy; r++) {
    kt_buf_puts(b, r ? ",{\"busy\":" : "{\"busy\":");
    kt_buf_json_number(b, w->busy[r]);
    if (w->idle && !isnan(w->idle[r].busy)) {
      kt_buf_puts(b, ",\"idle_causes\":");
      kt_idle_split_json(&w->idle[r], b);
    }
    kt_buf_puts(b, "}");
  }
  kt_buf_puts(b, "]}");
  kt_critical_free(&cr);
}

void kt__whatif_panel(kt_buf *b, const kt__whatif_seed *w) {
  kt_buf j;
  kt_buf_init(&j);
  kt_buf_puts(&j, "{\"name\":");
  kt_buf_json_string(&j, w->name ? w->name : "");
  if (w->name && kt_gen_kind_from_name(w->name) >= 0) {
    kt_buf_puts(&j, ",\"schedule\":");
    kt_buf_json_string(&j, w->name);
  }
  kt_buf_printf(&j, ",\"p\":%d,\"m\":%d,\"v\":%d,\"basis\":\"%s\",\"costs\":", w->p, w->m, w->v,
                w->basis && !strcmp(w->basis, "stage") ? "stage" : "rank");
  kt__whatif_costs_json(&j, w->costs);
  kt_buf_puts(&j, ",\"mem_limit\":");
  if (w->mem_limit > 0) kt_buf_json_number(&j, w->mem_limit);
  else kt_buf_puts(&j, "null");
  if (w->order) order_json(&j, w->order);
  measured_json(&j, w);
  kt_buf_puts(&j, "}");
  if (j.failed) b->failed = 1;
  kt_buf_puts(b, "<details class=\"kt-whatif\" data-kt-whatif=\"");
  kt_buf_xml_escape(b, j.data ? j.data : "{}");
  kt_buf_puts(b, "\"><summary>What if\xe2\x80\xa6 change the costs, the link, M or the schedule, "
                 "drag actions, see the critical path: kaiten's simulator re-runs in the page"
                 "</summary></details>\n");
  kt_buf_free(&j);
}

void kt__whatif_run(kt_buf *b, const kt_run *r) {
  /* the last step's busy time and idle causes per rank, as metrics.jsonl
   * has them */
  const double *busy = NULL;
  double per[KT_MAX_RANKS];
  kt_idle_split idle[KT_MAX_RANKS];
  int n = r->n_steps && r->ranks > 0 && r->ranks <= KT_MAX_RANKS ? r->ranks : 0;
  for (int k = 0; k < n; k++) {
    per[k] = r->rank_steps[(r->n_steps - 1) * (size_t)r->ranks + k].busy;
    idle[k] = r->rank_steps[(r->n_steps - 1) * (size_t)r->ranks + k].idle;
  }
  if (n) busy = per;
  /* the prediction as it ran: its costs (per stage) and its order, so the
   * panel's first simulation is the run's own prediction */
  kt__whatif_seed w = {.name = r->schedule,
                       .p = r->p,
                       .m = r->m,
                       .v = r->v,
                       .basis = "stage",
                       .costs = &r->calibrated,
                       .order = &r->predicted,
                       .measured = &r->measured,
                       .measured_svg = "gantt-step",
                       .busy = busy,
                       .idle = n ? idle : NULL,
                       .n_busy = n};
  kt__whatif_panel(b, &w);
}
