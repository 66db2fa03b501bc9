/* Renderers of `kaiten plan`: the ranking (text table or JSON), the
 * breakdown of the best configuration (--explain), the partition-only view
 * and the model presets. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/generators.h"
#include "kaiten/report.h"

/* ---- small formatting helpers ----------------------------------------------------- */

static const char *fmt_time(double s, char *buf, size_t n) {
  if (s >= 1) snprintf(buf, n, "%.3f s", s);
  else if (s >= 1e-3) snprintf(buf, n, "%.2f ms", s * 1e3);
  else snprintf(buf, n, "%.1f us", s * 1e6);
  return buf;
}

static void stage_label(const kt_plan_model *m, int first, int count, char *buf, size_t n) {
  if (count == 1) snprintf(buf, n, "%s", m->layers[first].name);
  else snprintf(buf, n, "%s..%s", m->layers[first].name, m->layers[first + count - 1].name);
}

/* Copies text into dst (n bytes), ending in "..." when it does not fit. */
static void clip(const char *text, char *dst, size_t n) {
  snprintf(dst, n, "%s", text ? text : "");
  if (text && strlen(text) >= n && n > 4) memcpy(dst + n - 4, "...", 4);
}

static void partition_arg(const int *counts, int S, kt_buf *b) {
  for (int j = 0; j < S; j++) kt_buf_printf(b, "%s%d", j ? "," : "", counts[j]);
}

/* A row's partition (layers per stage) and memory per rank (GB), whole
 * up to KT_PLAN_CELL characters (the stages of a model of about 2,000
 * layers, 1,000 ranks), longer ones ending in "...". */
#define KT_PLAN_CELL 8192
static void row_cells(const kt_plan_result *r, char *part, char *mem) {
  const kt_plan_config *g = &r->cfg;
  kt_buf b;
  kt_buf_init(&b);
  partition_arg(r->partition, g->p * g->v, &b);
  clip(b.data, part, KT_PLAN_CELL);
  kt_buf_free(&b);
  kt_buf_init(&b);
  for (int k = 0; k < g->p; k++) kt_buf_printf(&b, "%s%.1f", k ? "," : "", r->mem_rank[k] / 1e9);
  clip(b.data, mem, KT_PLAN_CELL);
  kt_buf_free(&b);
}

static void json_array(kt_buf *b, const double *x, int n) {
  kt_buf_puts(b, "[");
  for (int i = 0; i < n; i++) {
    if (i) kt_buf_puts(b, ",");
    kt_buf_json_number(b, x[i]);
  }
  kt_buf_puts(b, "]");
}

static void json_int_array(kt_buf *b, const int *x, int n) {
  kt_buf_puts(b, "[");
  for (int i = 0; i < n; i++) kt_buf_printf(b, "%s%d", i ? "," : "", x[i]);
  kt_buf_puts(b, "]");
}

static void json_field(kt_buf *b, const char *key, double v) {
  kt_buf_printf(b, ",\"%s\":", key);
  kt_buf_json_number(b, v);
}

void kt_render_plan_partition(const kt_plan_model *m, const kt_plan_cluster *c,
                              const kt_plan_partition_view *pv, int json, kt_buf *out) {
  int S = pv->stages;
  double imbalance = pv->mean > 0 ? pv->bottleneck / pv->mean - 1 : 0;
  if (json) {
    kt_buf_puts(out, "{\"model\":");
    kt_buf_json_string(out, m->name);
    kt_buf_printf(out, ",\"layers\":%d,\"stages\":%d,\"t\":%d,\"b\":%d,\"recompute\":\"%s\"",
                  m->n_layers, S, pv->t, pv->b, kt_recompute_name(pv->recompute));
    kt_buf_puts(out, ",\"partition\":");
    json_int_array(out, pv->counts, S);
    kt_buf_puts(out, ",\"partition_arg\":\"");
    partition_arg(pv->counts, S, out);
    kt_buf_puts(out, "\",\"load\":");
    json_array(out, pv->load, S);
    kt_buf_puts(out, ",\"params\":");
    json_array(out, pv->params, S);
    if (pv->capped) {
      kt_buf_puts(out, ",\"memory_per_stage\":");
      json_array(out, pv->mem, S);
      json_field(out, "memory_cap", kt_plan_cluster_budget(c));
    }
    json_field(out, "bottleneck", pv->bottleneck);
    json_field(out, "mean", pv->mean);
    json_field(out, "imbalance", imbalance);
    kt_buf_puts(out, "}\n");
    return;
  }
  kt_buf_printf(out,
                "partition of %s (%d layers) into %d stages by time per micro-batch "
                "(t=%d, b=%d, recompute %s%s)\n\n",
                m->name, m->n_layers, S, pv->t, pv->b, kt_recompute_name(pv->recompute),
                pv->capped ? ", memory-capped" : "");
  kt_buf_printf(out, "%5s %6s  %-22s %12s %7s %12s%s\n", "stage", "layers", "range", "load",
                "share", "params (M)", pv->capped ? "  memory (GB)" : "");
  for (int j = 0, i = 0; j < S; i += pv->counts[j], j++) {
    char label[80], t[32];
    stage_label(m, i, pv->counts[j], label, sizeof label);
    kt_buf_printf(out, "%5d %6d  %-22s %12s %6.1f%% %12.1f", j, pv->counts[j], label,
                  fmt_time(pv->load[j], t, sizeof t),
                  pv->mean > 0 ? 100 * pv->load[j] / (pv->mean * S) : 0, pv->params[j] / 1e6);
    if (pv->capped) kt_buf_printf(out, "  %11.2f", pv->mem[j] / 1e9);
    kt_buf_puts(out, "\n");
  }
  char tb[32], tm[32];
  kt_buf_printf(out, "\nbottleneck %s, mean %s, imbalance %.1f%%\n",
                fmt_time(pv->bottleneck, tb, sizeof tb), fmt_time(pv->mean, tm, sizeof tm),
                100 * imbalance);
  kt_buf_puts(out, "kaiten train --partition ");
  partition_arg(pv->counts, S, out);
  kt_buf_puts(out, "\n");
}

/* ---- presets ---------------------------------------------------------------------- */

void kt_render_plan_presets(kt_buf *out) {
  kt_buf_printf(out, "%-12s %9s %6s %6s %5s %6s %6s %6s  %s\n", "preset", "params", "blocks",
                "hidden", "heads", "ffn", "vocab", "seq", "ffn type");
  const char *list = kt_plan_preset_list();
  char name[64];
  while (*list) {
    size_t len = strcspn(list, ",");
    snprintf(name, sizeof name, "%.*s", (int)len, list);
    list += len;
    while (*list == ',' || *list == ' ') list++;
    kt_plan_model m;
    if (kt_plan_model_preset(name, &m, NULL)) continue;
    kt_buf_printf(out, "%-12s %8.2fB %6d %6d %5d %6d %6d %6d  %s\n", name,
                  kt_plan_model_params(&m) / 1e9, m.blocks, m.hidden, m.heads, m.ffn, m.vocab,
                  m.seq_len, m.swiglu ? "swiglu" : "gelu");
    kt_plan_model_free(&m);
  }
}

/* ---- the ranking ------------------------------------------------------------------- */

static void render_config_json(const kt_plan_model *m, const kt_plan_options *o,
                               const kt_plan_result *r, long B, kt_buf *out) {
  const kt_plan_config *g = &r->cfg;
  int S = g->p * g->v;
  kt_buf_printf(out,
                "{\"p\":%d,\"d\":%d,\"t\":%d,\"v\":%d,\"m\":%d,\"b\":%d,\"k\":%d,"
                "\"schedule\":\"%s\",\"recompute\":\"%s\",\"nodes\":\"%s\"",
                g->p, g->d, g->t, g->v, g->m, g->b, g->k, kt_gen_kind_name(g->schedule),
                kt_recompute_name(g->recompute), kt_node_layout_name(g->nodes));
  if (r->equivalent)
    kt_buf_printf(out, ",\"m_range\":[%d,%d],\"equivalent\":%d", r->m_min, r->m_max, r->equivalent);
  json_field(out, "bubble_ratio", r->bubble_ratio);
  json_field(out, "step_time", r->step_time);
  json_field(out, "round_time", r->round_time);
  json_field(out, "dp_time", r->dp_time);
  json_field(out, "p2p_time", r->p2p_time);
  json_field(out, "tp_time", r->tp_time);
  json_field(out, "samples_per_second", r->step_time > 0 ? B / r->step_time : 0);
  kt_buf_puts(out, ",\"memory_per_stage\":");
  json_array(out, r->mem_rank, g->p);
  kt_buf_puts(out, ",\"memory_state\":");
  json_array(out, r->mem_state, g->p);
  json_field(out, "peak_memory", r->mem_peak);
  kt_buf_printf(out, ",\"peak_inflight\":%d", r->peak_inflight);
  json_field(out, "imbalance", r->imbalance);
  kt_buf_puts(out, ",\"partition\":");
  json_int_array(out, r->partition, S);
  kt_buf_puts(out, ",\"partition_arg\":\"");
  partition_arg(r->partition, S, out);
  kt_buf_puts(out, "\",\"stages\":[");
  for (int j = 0, i = 0; j < S; i += r->partition[j], j++) {
    kt_buf_printf(out, "%s{\"layers\":%d,\"first\":", j ? "," : "", r->partition[j]);
    kt_buf_json_string(out, m->layers[i].name);
    kt_buf_puts(out, ",\"last\":");
    kt_buf_json_string(out, m->layers[i + r->partition[j] - 1].name);
    json_field(out, "f", r->stage_f[j]);
    json_field(out, "i", r->stage_i[j]);
    json_field(out, "w", r->stage_w[j]);
    kt_buf_puts(out, "}");
  }
  kt_buf_puts(out, "],\"reason\":");
  kt_buf_json_string(out, r->reason);
  kt_render_plan_launch(m, o, r, B, 1, out);
  kt_buf_puts(out, "}");
}

static void render_json(const kt_plan_model *m, const kt_plan_cluster *c, const kt_plan_options *o,
                        const kt_plan_search_params *sp, const kt_plan_report *rep, kt_buf *out) {
  kt_buf_puts(out, "{\"model\":{\"name\":");
  kt_buf_json_string(out, m->name);
  json_field(out, "params", kt_plan_model_params(m));
  kt_buf_printf(out, ",\"layers\":%d,\"seq_len\":%d}", m->n_layers, m->seq_len);
  kt_buf_printf(out, ",\"cluster\":{\"devices\":%d,\"devices_per_node\":%d", c->devices,
                c->devices_per_node);
  json_field(out, "mem_bytes", c->mem_bytes);
  json_field(out, "mem_reserved", kt_plan_cluster_reserved(c));
  json_field(out, "flops", kt_plan_cluster_flops(c));
  json_field(out, "intra_bw", c->intra_bw);
  json_field(out, "inter_bw", c->inter_bw);
  kt_buf_printf(out,
                "},\"global_batch\":%ld,\"zero\":%d,\"sequence_parallel\":%s,\"step_sync\":\"%s\"",
                sp->global_batch, o->zero, o->sequence_parallel ? "true" : "false",
                kt_step_sync_name(o->step_sync));
  kt_buf_printf(out,
                ",\"search\":{\"enumerated\":%zu,\"pruned_memory\":%zu,\"pruned_time\":%zu,"
                "\"evaluated\":%zu,\"no_fit\":%zu,\"not_applicable\":%zu,\"over_bubble\":%zu,"
                "\"simulations\":%zu",
                rep->enumerated, rep->pruned_memory, rep->pruned_time, rep->evaluated, rep->no_fit,
                rep->not_applicable, rep->over_bubble, rep->simulations);
  json_field(out, "seconds", rep->seconds);
  kt_buf_puts(out, "},\"configs\":[");
  for (int i = 0; i < rep->n; i++) {
    if (i) kt_buf_puts(out, ",");
    render_config_json(m, o, &rep->configs[i], sp->global_batch, out);
  }
  kt_buf_puts(out, "]}\n");
}

static void render_explain(const kt_plan_model *m, const kt_plan_cluster *c,
                           const kt_plan_result *r, long B, kt_buf *out) {
  const kt_plan_config *g = &r->cfg;
  int S = g->p * g->v;
  char t1[32], t2[32], t3[32];
  kt_buf_printf(out,
                "\nbest configuration, explained\n"
                "  P=%d D=%d t=%d V=%d M=%d b=%d K=%d schedule=%s recompute=%s\n"
                "  global batch %ld = K %d x M %d x b %d x D %d; devices %d = P %d x D %d x t %d\n",
                g->p, g->d, g->t, g->v, g->m, g->b, g->k, kt_gen_kind_name(g->schedule),
                kt_recompute_name(g->recompute), B, g->k, g->m, g->b, g->d, c->devices, g->p, g->d,
                g->t);
  kt_buf_printf(out,
                "  step %s = K %d x round %s + gradient sync %s  (%.1f samples/s; the period, "
                "rounds back to back)\n",
                fmt_time(r->step_time, t1, sizeof t1), g->k, fmt_time(r->round_time, t2, sizeof t2),
                fmt_time(r->dp_time, t3, sizeof t3), B / r->step_time);
  const char *expr = NULL;
  double closed = kt_gen_closed_form_bubble(g->schedule, g->p, g->v, g->m, 1, 1, 1, &expr);
  kt_buf_printf(out, "  round: simulated period of %d micro-batches; bubble %.2f%%", g->m,
                100 * r->bubble_ratio);
  if (closed >= 0 && expr)
    kt_buf_printf(out, " (uniform closed form %s = %.2f%%)", expr, 100 * closed);
  kt_buf_printf(out,
                "\n  p2p hop %s; tensor-parallel collectives %s per micro-batch on the "
                "slowest stage; imbalance %.1f%%\n",
                fmt_time(r->p2p_time, t1, sizeof t1), fmt_time(r->tp_time, t2, sizeof t2),
                100 * r->imbalance);
  kt_buf_printf(out, "\n  %5s %4s %6s  %-22s %10s %10s %10s\n", "stage", "rank", "layers", "range",
                "F", "I", "W");
  for (int j = 0, i = 0; j < S; i += r->partition[j], j++) {
    char label[80], f[32], ii[32], w[32];
    stage_label(m, i, r->partition[j], label, sizeof label);
    int rank = kt_gen_kind_placement(g->schedule) == KT_PLACEMENT_V
                   ? (j < g->p ? j : 2 * g->p - 1 - j)
                   : j % g->p;
    kt_buf_printf(out, "  %5d %4d %6d  %-22s %10s %10s %10s\n", j, rank, r->partition[j], label,
                  fmt_time(r->stage_f[j], f, sizeof f), fmt_time(r->stage_i[j], ii, sizeof ii),
                  fmt_time(r->stage_w[j], w, sizeof w));
  }
  kt_buf_printf(out, "\n  %4s %12s %16s %12s   budget %.2f GB\n", "rank", "state (GB)",
                "activations (GB)", "total (GB)", kt_plan_cluster_budget(c) / 1e9);
  for (int k = 0; k < g->p; k++)
    kt_buf_printf(out, "  %4d %12.2f %16.2f %12.2f\n", k, r->mem_state[k] / 1e9,
                  (r->mem_rank[k] - r->mem_state[k]) / 1e9, r->mem_rank[k] / 1e9);
  kt_buf_printf(out, "  peak in-flight micro-batches %d\n\n  kaiten train --partition ",
                r->peak_inflight);
  partition_arg(r->partition, S, out);
  kt_buf_puts(out, "\n");
}

void kt_render_plan(const kt_plan_model *m, const kt_plan_cluster *c, const kt_plan_options *o,
                    const kt_plan_search_params *sp, const kt_plan_report *rep, int json,
                    int explain, kt_buf *out) {
  if (json) {
    render_json(m, c, o, sp, rep, out);
    return;
  }
  char seq[32] = "costs per sample";
  if (m->transformer) snprintf(seq, sizeof seq, "sequence %d", m->seq_len);
  kt_buf_printf(out,
                "%s: %.3gB parameters, %d layers, %s; %d devices x %.0f GB, "
                "global batch %ld\n",
                m->name, kt_plan_model_params(m) / 1e9, m->n_layers, seq, c->devices,
                c->mem_bytes / 1e9, sp->global_batch);
  kt_buf_printf(out,
                "memory per device: %.3g GB for the model, %.3g GB reserved (runtime, "
                "buffers, fragmentation: --mem-reserved-gb)\n",
                kt_plan_cluster_budget(c) / 1e9, kt_plan_cluster_reserved(c) / 1e9);
  kt_buf_printf(out,
                "%zu candidates in %.3f s: %zu over memory by bound, %zu cut by the time "
                "bound, %zu evaluated (%zu over memory, %zu not applicable, %zu over bubble), "
                "%zu simulations\n\n",
                rep->enumerated, rep->seconds, rep->pruned_memory, rep->pruned_time, rep->evaluated,
                rep->no_fit, rep->not_applicable, rep->over_bubble, rep->simulations);
  kt_buf_printf(out,
                "step = the simulated period, a step in steady state under step sync %s "
                "(--step-sync)\n\n",
                kt_step_sync_name(o->step_sync));
  if (rep->n == 0) return;
  /* the partition and the memory per stage in full: columns as wide as the longest */
  int wp = 14, wm = 19;
  for (int i = 0; i < rep->n; i++) {
    char part[KT_PLAN_CELL], mem[KT_PLAN_CELL];
    row_cells(&rep->configs[i], part, mem);
    wp = (int)fmax(wp, strlen(part)), wm = (int)fmax(wm, strlen(mem));
  }
  kt_buf_printf(out, "%3s %3s %3s %2s %2s %9s %4s %5s  %-14s %-9s %-9s %10s %7s  %-*s  %-*s %s\n",
                "#", "P", "D", "t", "V", "M", "b", "K", "schedule", "recompute", "nodes", "step",
                "bubble", wm, "memory/stage (GB)", wp, "partition", "why");
  int collapsed = 0;
  for (int i = 0; i < rep->n; i++) {
    const kt_plan_result *r = &rep->configs[i];
    const kt_plan_config *g = &r->cfg;
    char t[32], part[KT_PLAN_CELL], mem[KT_PLAN_CELL];
    row_cells(r, part, mem);
    char mcol[24];
    if (r->equivalent && r->m_min != r->m_max)
      snprintf(mcol, sizeof mcol, "%d-%d", r->m_min, r->m_max);
    else snprintf(mcol, sizeof mcol, "%d", g->m);
    collapsed += r->equivalent > 0 && r->m_min != r->m_max;
    kt_buf_printf(
        out, "%3d %3d %3d %2d %2d %9s %4d %5d  %-14s %-9s %-9s %10s %6.2f%%  %-*s  %-*s %s\n",
        i + 1, g->p, g->d, g->t, g->v, mcol, g->b, g->k, kt_gen_kind_name(g->schedule),
        kt_recompute_name(g->recompute), kt_node_layout_name(g->nodes),
        fmt_time(r->step_time, t, sizeof t), 100 * r->bubble_ratio, wm, mem, wp, part, r->reason);
  }
  if (collapsed)
    kt_buf_puts(out, "M a-b: one row for the layouts that differ only in how the step is cut "
                     "into rounds (M and K, same M*K; with P=1 also the schedule) and have the "
                     "same step time and memory; K is the shown row's\n");
  kt_render_plan_launch(m, o, &rep->configs[0], sp->global_batch, 0, out);
  if (explain) render_explain(m, c, &rep->configs[0], sp->global_batch, out);
}
