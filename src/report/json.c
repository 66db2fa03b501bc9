/* Machine-readable renderers: simulation JSON (the CLI contract), metrics
 * text table, Chrome trace. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/generators.h"
#include "kaiten/report.h"

static void cost_value(kt_buf *b, const char *key, double uniform, const double *per, int ns);

/* A cost field: a number, the per-stage list, or with per-micro-batch
 * values (mb: n_stages lists of n_mb, stage-major) a list per stage. */
static void cost_value_mb(kt_buf *b, const char *key, double uniform, const double *per, int ns,
                          const double *mb, int n_mb) {
  if (mb && ns > 0 && n_mb > 0) {
    kt_buf_printf(b, "\"%s\":[", key);
    for (int s = 0; s < ns; s++) {
      kt_buf_puts(b, s ? ",[" : "[");
      for (int j = 0; j < n_mb; j++) {
        if (j) kt_buf_puts(b, ",");
        kt_buf_json_number(b, mb[(size_t)s * (size_t)n_mb + (size_t)j]);
      }
      kt_buf_puts(b, "]");
    }
    kt_buf_puts(b, "]");
    return;
  }
  cost_value(b, key, uniform, per, ns);
}

/* A cost field: a number, or the per-stage list. */
static void cost_value(kt_buf *b, const char *key, double uniform, const double *per, int ns) {
  kt_buf_printf(b, "\"%s\":", key);
  if (!per || ns <= 0) {
    kt_buf_json_number(b, uniform);
    return;
  }
  kt_buf_puts(b, "[");
  for (int s = 0; s < ns; s++) {
    if (s) kt_buf_puts(b, ",");
    kt_buf_json_number(b, per[s]);
  }
  kt_buf_puts(b, "]");
}

void kt_render_costs_json(const kt_costs *c, kt_buf *b) {
  int ns = c->n_stages, nm = kt_costs_mb_differ(c) ? c->n_mb : 0; /* equal lists: per stage */
  kt_buf_puts(b, "{");
  cost_value_mb(b, "tf", c->tf, c->stage_tf, ns, c->mb_tf, nm);
  kt_buf_puts(b, ",");
  cost_value_mb(b, "tb", c->tb, c->stage_tb, ns, c->mb_tb, nm);
  kt_buf_puts(b, ",");
  cost_value_mb(b, "tw", c->tw, c->stage_tw, ns, c->mb_tw, nm);
  kt_buf_puts(b, ",\"comm\":");
  kt_buf_json_number(b, kt_cost_comm(c));
  if (c->n_links > 0) { /* each link's hop, its delay included (kt_cost_link) */
    kt_buf_puts(b, ",\"links\":[");
    for (int l = 0; l < c->n_links; l++) {
      if (l) kt_buf_puts(b, ",");
      kt_buf_json_number(b, kt_cost_link_at(c, l));
    }
    kt_buf_puts(b, "]");
  }
  kt_buf_puts(b, ",\"send_overhead\":");
  kt_buf_json_number(b, c->send_overhead);
  if (c->op_overhead > 0) {
    kt_buf_puts(b, ",\"op_overhead\":");
    kt_buf_json_number(b, c->op_overhead);
  }
  kt_buf_puts(b, ",");
  cost_value_mb(b, "mem_act", c->mem_act, c->stage_mem_act, ns, c->mb_mem_act, nm);
  kt_buf_puts(b, ",");
  cost_value_mb(b, "mem_wgrad", c->mem_wgrad, c->stage_mem_wgrad, ns, c->mb_mem_wgrad, nm);
  /* the step's end (kaiten/costs.h) */
  kt_buf_puts(b, ",");
  cost_value(b, "tu", c->tu, c->stage_tu, ns);
  kt_buf_puts(b, ",\"t_norm\":");
  kt_buf_json_number(b, c->t_norm);
  kt_buf_puts(b, ",\"t_dp\":");
  kt_buf_json_number(b, c->t_dp);
  if (c->tied) {
    kt_buf_puts(b, ",\"tie\":");
    kt_buf_json_number(b, c->t_tie);
  }
  kt_buf_puts(b, ",\"step_sync\":");
  kt_buf_json_string(b, kt_step_sync_name(c->step_sync));
  kt_buf_printf(b, ",\"per_stage\":%s}", ns > 0 ? "true" : "false");
}

/* lower_bound, gap (makespan over it, less 1) and, for the exact search,
 * proven and its figures. */
static void bound_json(const kt_sim_info *info, double makespan, kt_buf *b) {
  kt_buf_puts(b, ",\"lower_bound\":");
  if (!info->has_lower_bound) {
    kt_buf_puts(b, "null,\"gap\":null");
    if (info->lower_bound_why) {
      kt_buf_puts(b, ",\"lower_bound_why\":");
      kt_buf_json_string(b, info->lower_bound_why);
    }
  } else {
    kt_buf_json_number(b, info->lower_bound);
    kt_buf_puts(b, ",\"lower_bound_memory\":");
    kt_buf_json_number(b, info->lower_bound_memory);
    if (info->lower_bound_from) {
      kt_buf_puts(b, ",\"lower_bound_from\":");
      kt_buf_json_string(b, info->lower_bound_from);
    }
    kt_buf_printf(b,
                  ",\"lower_bound_exact\":%s,\"gap\":", info->lower_bound_exact ? "true" : "false");
    kt_buf_json_number(b, info->lower_bound > 0 ? makespan / info->lower_bound - 1 : 0);
  }
  if (info->stages) {
    kt_buf_puts(b, ",\"stages\":");
    kt_buf_json_string(b, info->stages);
  }
  if (!info->searched) return;
  kt_buf_printf(b, ",\"proven\":%s,\"search\":{\"seconds\":", info->proven ? "true" : "false");
  kt_buf_json_number(b, info->search_seconds);
  kt_buf_puts(b, ",\"time_limit\":");
  kt_buf_json_number(b, info->search_time_limit);
  kt_buf_printf(b, ",\"nodes\":%ld,\"start_period\":", info->search_nodes);
  kt_buf_json_number(b, info->search_start_period);
  if (info->search_sequences)
    kt_buf_printf(b, ",\"sequences\":%d,\"sequences_all\":%s,\"proven_in_sequences\":%s",
                  info->search_sequences, info->search_sequences_all ? "true" : "false",
                  info->search_proven_in_sequences ? "true" : "false");
  kt_buf_puts(b, "}");
}

/* Micro-batches of their own costs: what the search proved, in words. */
static void sequences_text(const kt_sim_info *info, kt_buf *b) {
  const char *which = info->search_sequences_all ? "every" : "the given";
  if (info->search_proven_in_sequences)
    kt_buf_printf(b,
                  "optimal: no order that runs the micro-batches in one sequence on every stage "
                  "(%s sequence: %d searched) is faster\n",
                  which, info->search_sequences);
  else
    kt_buf_printf(b,
                  "optimal: the search over micro-batch sequences (%s sequence) stopped at %g s "
                  "after %d: the best order it found\n",
                  which, info->search_time_limit, info->search_sequences);
}

/* The bound's line under the metrics, and the search's. */
static void bound_text(const kt_sim_info *info, double makespan, kt_buf *b) {
  if (info->has_lower_bound) {
    double gap = info->lower_bound > 0 ? makespan / info->lower_bound - 1 : 0;
    char mem[48] = "any memory"; /* no limit binds: activations that take none */
    if (isfinite(info->lower_bound_memory))
      snprintf(mem, sizeof mem, "memory <= %g per rank", info->lower_bound_memory);
    kt_buf_printf(
        b, "lower bound %g (%s, %s): gap %.2f%%\n", info->lower_bound,
        info->lower_bound_exact ? "the proven optimum" : "no order of this layout is faster", mem,
        100 * gap);
  } else if (info->lower_bound_why) {
    kt_buf_printf(b, "lower bound - (%s)\n", info->lower_bound_why);
  }
  if (!info->searched) return;
  if (info->search_sequences && !info->proven) {
    sequences_text(info, b);
    kt_buf_printf(b,
                  "optimal: not proven over every order (%.3g s, %ld nodes): within %.2f%% of "
                  "the bound; zb-auto's order: %g\n",
                  info->search_seconds, info->search_nodes,
                  100 * (makespan / info->lower_bound - 1), info->search_start_period);
    return;
  }
  if (info->proven)
    kt_buf_printf(b, "optimal: proven in %.3g s (%ld nodes; zb-auto's order: %g)\n",
                  info->search_seconds, info->search_nodes, info->search_start_period);
  else
    kt_buf_printf(b,
                  "optimal: not proven within %g s (%ld nodes): the best order found, within "
                  "%.2f%% of the bound; zb-auto's order: %g\n",
                  info->search_time_limit, info->search_nodes,
                  100 * (makespan / info->lower_bound - 1), info->search_start_period);
}

/* The timeline's events, a JSON object per event: appended piece by
 * piece (a printf per row was a third of `sim --format json` at P=64,
 * M=1024). */
static void events_json(kt_buf *b, const kt_timeline *t) {
  kt_buf_puts(b, ",\"events\":[");
  for (size_t i = 0; i < t->n_events; i++) {
    const kt_event *e = &t->events[i];
    kt_buf_puts(b, i ? ",{\"rank\":" : "{\"rank\":");
    kt_buf_json_number(b, e->rank);
    kt_buf_puts(b, ",\"stage\":");
    kt_buf_json_number(b, e->stage);
    kt_buf_puts(b, ",\"mb\":");
    kt_buf_json_number(b, e->mb);
    char op[] = ",\"op\":\"?\",\"start\":";
    op[7] = kt_op_letter((kt_op)e->op);
    kt_buf_append(b, op, sizeof op - 1);
    kt_buf_json_number(b, e->start);
    kt_buf_puts(b, ",\"end\":");
    kt_buf_json_number(b, e->end);
    if (e->flags & KT_ACTION_OVERLAP_NEXT) kt_buf_puts(b, ",\"overlap_next\":true");
    if (e->bytes) kt_buf_printf(b, ",\"bytes\":%lld", (long long)e->bytes);
    kt_buf_puts(b, "}");
  }
  kt_buf_puts(b, "]");
}

/* Documents packed into the micro-batches: the packing, its tokens, and
 * each micro-batch in run order. */
static void packing_json(const kt_sim_info *info, double period, kt_buf *b) {
  const kt_pack *pk = info->pack;
  if (!pk) return;
  kt_buf_puts(b, ",\"packing\":{\"packing\":");
  kt_buf_json_string(b, info->packing ? info->packing : "fifo");
  kt_buf_printf(b, ",\"documents\":%d,\"left_out\":%d,\"step_tokens\":%ld,\"tokens_per_time\":",
                pk->n_docs - pk->left_out, pk->left_out, info->step_tokens);
  kt_buf_json_number(b, period > 0 ? (double)info->step_tokens / period : 0);
  kt_buf_puts(b, ",\"micro_batches\":[");
  for (int k = 0; k < pk->m; k++) {
    int mb = pk->order[k];
    kt_buf_printf(b, "%s{\"packed\":%d,\"tokens\":%d,\"documents\":%d,\"sum_sq\":", k ? "," : "",
                  mb, pk->tokens[mb], pk->first[mb + 1] - pk->first[mb]);
    kt_buf_json_number(b, pk->sq[mb]);
    kt_buf_puts(b, "}");
  }
  kt_buf_puts(b, "]}");
}

void kt_render_sim_json(const kt_sim_info *info, const kt_metrics *m, const kt_timeline *t,
                        kt_buf *b) {
  kt_buf_puts(b, "{\"schedule\":");
  kt_buf_json_string(b, info->schedule ? info->schedule : "");
  kt_buf_printf(b, ",\"p\":%d,\"m\":%d,\"v\":%d,\"placement\":", info->p, info->m, info->v);
  /* the name only ("loop", "v", "explicit"); an explicit table follows as stage_ranks */
  const char *pl = info->placement ? info->placement : "loop";
  kt_buf_printf(b, "\"%.*s\"", (int)strcspn(pl, " "), pl);
  if (info->stage_ranks) {
    kt_buf_puts(b, ",\"stage_ranks\":[");
    for (int s = 0; s < info->p * info->v; s++)
      kt_buf_printf(b, "%s%d", s ? "," : "", info->stage_ranks[s]);
    kt_buf_puts(b, "]");
  }
  kt_buf_puts(b, ",\"makespan\":");
  kt_buf_json_number(b, m->makespan);
  kt_buf_puts(b, ",\"period\":");
  kt_buf_json_number(b, m->period);
  kt_buf_puts(b, ",\"step_sync\":");
  kt_buf_json_string(b, m->step_sync >= 0 ? kt_step_sync_name((kt_step_sync)m->step_sync) : "none");
  kt_buf_puts(b, ",\"span\":");
  kt_buf_json_number(b, m->span);
  if (m->step_sync ==
      KT_STEP_OVERLAP) { /* post-validation: a wrong update runs the next step again */
    kt_buf_puts(b, ",\"rollback_cost\":");
    kt_buf_json_number(b, m->period);
  }
  kt_buf_puts(b, ",\"bubble_ratio\":");
  kt_buf_json_number(b, m->bubble_ratio);
  kt_buf_puts(b, ",\"closed_form_bubble\":");
  if (info->closed_form >= 0) kt_buf_json_number(b, info->closed_form);
  else kt_buf_puts(b, "null");
  kt_buf_puts(b, ",\"closed_form_expr\":");
  if (info->closed_form_expr) kt_buf_json_string(b, info->closed_form_expr);
  else kt_buf_puts(b, "null");
  if (info->closed_form < 0 && info->closed_form_why) {
    kt_buf_puts(b, ",\"closed_form_why\":");
    kt_buf_json_string(b, info->closed_form_why);
  }
  kt_buf_printf(b, ",\"messages\":%zu,\"time_unit\":", info->messages);
  kt_buf_json_string(b, t ? t->time_unit : "unit");
  if (info->costs) {
    kt_buf_puts(b, ",\"costs\":");
    kt_render_costs_json(info->costs, b);
  }
  if (info->cost_basis) {
    kt_buf_puts(b, ",\"cost_basis\":");
    kt_buf_json_string(b, info->cost_basis);
  }
  bound_json(info, m->period, b);
  packing_json(info, m->period, b);
  double peak = 0;
  for (int r = 0; r < m->p; r++)
    if (m->ranks[r].peak_memory > peak) peak = m->ranks[r].peak_memory;
  kt_buf_puts(b, ",\"peak_memory\":");
  kt_buf_json_number(b, peak);
  kt_buf_puts(b, ",\"ranks\":[");
  for (int r = 0; r < m->p; r++) {
    const kt_rank_metrics *rm = &m->ranks[r];
    kt_buf_printf(b, "%s{\"rank\":%d,\"busy\":", r ? "," : "", r);
    kt_buf_json_number(b, rm->busy);
    kt_buf_puts(b, ",\"idle\":");
    kt_buf_json_number(b, rm->idle);
    kt_buf_puts(b, ",\"peak_memory\":");
    kt_buf_json_number(b, rm->peak_memory);
    kt_buf_printf(b, ",\"peak_inflight\":%d,\"actions\":%zu,\"start\":", rm->peak_inflight,
                  rm->actions);
    kt_buf_json_number(b, rm->start);
    kt_buf_puts(b, ",\"end\":");
    kt_buf_json_number(b, rm->end);
    kt_buf_printf(b, ",\"bytes_sent\":%lld}", (long long)rm->bytes_sent);
  }
  kt_buf_puts(b, "]");
  if (t) events_json(b, t);
  kt_buf_puts(b, "}\n");
}

void kt_render_step_line(kt_step_sync sync, kt_buf *b) {
  if (sync == KT_STEP_BARRIER)
    kt_buf_puts(b, "period = a step in steady state, step sync barrier: every rank waits for all "
                   "after the global-norm all-reduce; makespan = one step alone\n");
  else
    kt_buf_puts(b,
                "period = a step in steady state, step sync overlap: a rank starts its next step "
                "once its own update is done; makespan = one step alone\n");
}

void kt_render_period_text(const kt_metrics *m, const char *time_unit, kt_buf *b) {
  kt_buf_printf(b, "period %g %s", m->period, time_unit);
  if (m->step_sync >= 0)
    kt_buf_printf(b, " (a step, %s)", kt_step_sync_name((kt_step_sync)m->step_sync));
  if (fabs(m->makespan - m->period) > 1e-12 * (1 + m->period))
    kt_buf_printf(b, "   makespan %g (one step alone)", m->makespan);
}

void kt_render_metrics_text(const kt_sim_info *info, const kt_metrics *m, const char *time_unit,
                            kt_buf *b) {
  if (info) {
    kt_buf_printf(b, "schedule %s  P=%d V=%d M=%d  placement=%s", info->schedule, info->p, info->v,
                  info->m, info->placement);
    if (info->costs) {
      char text[400];
      kt_costs_describe(info->costs, text, sizeof text);
      kt_buf_printf(b, "  %s", text);
    }
    kt_buf_puts(b, "\n");
  }
  kt_render_period_text(m, time_unit, b);
  kt_buf_printf(b, "   bubble_ratio %.4f (%.1f%%)", m->bubble_ratio, 100 * m->bubble_ratio);
  if (info && info->closed_form >= 0)
    kt_buf_printf(b, "   closed form %s = %.4f", info->closed_form_expr, info->closed_form);
  else if (info && info->closed_form_why)
    kt_buf_printf(b, "   closed form - (%s)", info->closed_form_why);
  if (info) kt_buf_printf(b, "   p2p messages %zu", info->messages);
  kt_buf_puts(b, "\n");
  if (info) bound_text(info, m->period, b);
  if (info && info->pack)
    kt_buf_printf(b,
                  "packing %s: %d documents in %d micro-batches (%d left for the next step), "
                  "%ld tokens per step, %.6g tokens per %s\n",
                  info->packing, info->pack->n_docs - info->pack->left_out, info->pack->m,
                  info->pack->left_out, info->step_tokens,
                  m->period > 0 ? (double)info->step_tokens / m->period : 0, time_unit);
  kt_buf_printf(b, "%-6s %10s %10s %8s %12s %14s\n", "rank", "busy", "idle", "util", "peak_memory",
                "peak_inflight");
  /* many ranks: the first ones, the last, and the extremes of the rest
   * (the JSON lists them all) */
  enum { SHOWN = 16, ALL_UP_TO = 40 };
  int lo_busy = 0, hi_mem = 0;
  for (int r = 1; r < m->p; r++) {
    if (m->ranks[r].busy < m->ranks[lo_busy].busy) lo_busy = r;
    if (m->ranks[r].peak_memory > m->ranks[hi_mem].peak_memory) hi_mem = r;
  }
  for (int r = 0; r < m->p; r++) {
    int show = m->p <= ALL_UP_TO || r < SHOWN || r == m->p - 1 || r == lo_busy || r == hi_mem;
    if (!show) {
      if (r == SHOWN)
        kt_buf_printf(b, "  ... %d ranks not shown: all of them are in --format json\n",
                      m->p - SHOWN - 1 - (lo_busy > SHOWN && lo_busy < m->p - 1) -
                          (hi_mem > SHOWN && hi_mem < m->p - 1 && hi_mem != lo_busy));
      continue;
    }
    const kt_rank_metrics *rm = &m->ranks[r];
    double util = m->period > 0 ? rm->busy / m->period : 0;
    kt_buf_printf(b, "%-6d %10g %10g %7.1f%% %12g %14d", r, rm->busy, rm->idle, 100 * util,
                  rm->peak_memory, rm->peak_inflight);
    if (m->p > ALL_UP_TO && r == lo_busy && rm->busy < m->ranks[m->p - 1 - lo_busy].busy)
      kt_buf_puts(b, "   (least busy)");
    if (m->p > ALL_UP_TO && r == hi_mem &&
        rm->peak_memory > m->ranks[m->p - 1 - hi_mem].peak_memory)
      kt_buf_puts(b, "   (highest peak memory)");
    kt_buf_puts(b, "\n");
  }
}

/* The communication actions of a lowered program: one track per rank under
 * its compute track ("rank r comm", tid P + r), each action a slice from its
 * post to its completion, seq its place in the rank's program order. */
static void comm_tracks(const kt_timeline *t, double us_per_unit, kt_buf *b) {
  if (!t->n_comm) return;
  for (int r = 0; r < t->p; r++) {
    kt_buf_printf(b,
                  ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":%d,"
                  "\"args\":{\"name\":\"rank %d comm\"}}",
                  t->p + r, r);
    kt_buf_printf(b,
                  ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":0,\"tid\":%d,"
                  "\"args\":{\"sort_index\":%d}}",
                  t->p + r, 2 * r + 1);
  }
  int *next = kt_calloc((size_t)t->p, sizeof *next); /* each rank's next seq */
  if (!next) {
    b->failed = 1;
    return;
  }
  for (size_t i = 0; i < t->n_comm; i++) {
    const kt_event *e = &t->comm[i];
    if (e->rank < 0 || e->rank >= t->p) continue;
    int seq = next[e->rank]++;
    kt_action a = {.stage = e->stage, .mb = e->mb, .op = e->op};
    char lab[40];
    kt_action_format(&a, lab, sizeof lab);
    kt_buf_printf(b,
                  ",\n{\"name\":\"%s\",\"cat\":\"comm\",\"ph\":\"X\",\"pid\":0,\"tid\":%d,"
                  "\"ts\":",
                  lab, t->p + e->rank);
    kt_buf_json_number(b, e->start * us_per_unit);
    kt_buf_puts(b, ",\"dur\":");
    kt_buf_json_number(b, (e->end - e->start) * us_per_unit);
    kt_buf_printf(b, ",\"cname\":\"grey\",\"args\":{\"rank\":%d,\"seq\":%d,\"op\":\"%s\"", e->rank,
                  seq, kt_op_name(e->op));
    if (e->bytes) kt_buf_printf(b, ",\"bytes\":%lld", (long long)e->bytes);
    kt_buf_puts(b, "}}");
  }
  free(next);
}

void kt_render_chrome_trace(const kt_timeline *t, const char *title, double us_per_unit,
                            kt_buf *b) {
  kt_buf_puts(b, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
  kt_buf_puts(b, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"args\":{\"name\":");
  kt_buf_json_string(b, title ? title : "kaiten");
  kt_buf_puts(b, "}}");
  for (int r = 0; r < t->p; r++) {
    kt_buf_printf(b,
                  ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":%d,"
                  "\"args\":{\"name\":\"rank %d\"}}",
                  r, r);
    kt_buf_printf(b,
                  ",\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":0,\"tid\":%d,"
                  "\"args\":{\"sort_index\":%d}}",
                  r, 2 * r);
  }
  comm_tracks(t, us_per_unit, b);
  static const char *const cname[] = {"thread_state_running", "good", "rail_animation",
                                      "rail_idle"};
  for (size_t i = 0; i < t->n_events; i++) {
    const kt_event *e = &t->events[i];
    char lab[32];
    snprintf(lab, sizeof lab, "%d%c%d", e->stage, kt_op_letter((kt_op)e->op), e->mb);
    kt_buf_printf(b, ",\n{\"name\":\"%s\",\"cat\":\"%c\",\"ph\":\"X\",\"pid\":0,\"tid\":%d,\"ts\":",
                  lab, kt_op_letter((kt_op)e->op), e->rank);
    kt_buf_json_number(b, e->start * us_per_unit);
    kt_buf_puts(b, ",\"dur\":");
    kt_buf_json_number(b, (e->end - e->start) * us_per_unit);
    kt_buf_printf(b, ",\"cname\":\"%s\",\"args\":{\"stage\":%d,\"mb\":%d,\"op\":\"%c\"",
                  e->op < 4 ? cname[e->op] : "generic_work", e->stage, e->mb,
                  kt_op_letter((kt_op)e->op));
    if (e->bytes) kt_buf_printf(b, ",\"bytes_sent\":%lld", (long long)e->bytes);
    kt_buf_puts(b, "}}");
  }
  for (size_t i = 0; i < t->n_mem; i++) {
    const kt_mem_sample *s = &t->mem[i];
    kt_buf_printf(b, ",\n{\"name\":\"memory rank %d\",\"ph\":\"C\",\"pid\":0,\"tid\":%d,\"ts\":",
                  s->rank, s->rank);
    kt_buf_json_number(b, s->t * us_per_unit);
    kt_buf_puts(b, ",\"args\":{\"");
    kt_buf_puts(b, t->mem_unit);
    kt_buf_puts(b, "\":");
    kt_buf_json_number(b, s->value);
    kt_buf_puts(b, "}}");
  }
  kt_buf_puts(b, "\n]}\n");
}

void kt_render_run_timelines(const kt_run_timelines *t, kt_buf *timeline, kt_buf *trace) {
  const kt_schedule *sc = t->schedule;
  kt_metrics mm;
  if (kt_timeline_metrics(t->measured, &mm, NULL)) {
    timeline->failed = 1;
    return;
  }
  /* measured and predicted in the sim JSON format, side by side */
  kt_sim_info info = {.schedule = sc->name,
                      .p = sc->p,
                      .v = sc->v,
                      .m = sc->m,
                      .placement = kt_placement_name(sc->placement),
                      .closed_form = -1,
                      .messages = kt_schedule_messages(sc)};
  kt_buf_puts(timeline, "{\"measured\":");
  if (t->measured_metrics)
    kt_metrics_set_period(&mm, t->measured_metrics->period, t->measured_metrics->step_sync);
  kt_render_sim_json(&info, &mm, t->measured, timeline);
  kt_buf_puts(timeline, ",\"predicted\":");
  info.costs = t->calibrated;
  kt_render_sim_json(&info, t->predicted_metrics, t->predicted, timeline);
  kt_buf_puts(timeline, "}\n");
  kt_metrics_free(&mm);
  char title[96];
  snprintf(title, sizeof title, "kaiten train %s P=%d M=%d (measured)", sc->name, sc->p, sc->m);
  kt_render_chrome_trace(t->measured, title, 1e6, trace);
}
