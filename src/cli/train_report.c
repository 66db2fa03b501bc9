/* kaiten train's final report: a text summary (measured against predicted,
 * per rank, why each rank idled), JSON, an ASCII Gantt of both, or a
 * Chrome trace. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/train_cli.h"
#include "kaiten/report.h"

static void json_array(kt_buf *b, const char *key, const double *v, int n) {
  kt_buf_printf(b, ",\"%s\":", key);
  if (!v) {
    kt_buf_puts(b, "null");
    return;
  }
  kt_buf_puts(b, "[");
  for (int i = 0; i < n; i++) {
    if (i) kt_buf_puts(b, ",");
    kt_buf_json_number(b, v[i]);
  }
  kt_buf_puts(b, "]");
}

/* The model's memory, the machine's cores, the fault injected. */
static void json_run_facts(kt_buf *b, const train_opts *o, const kt_session_info *in,
                           const kt_session_result *res) {
  json_array(b, "mem_act_bytes", in->mem_act_bytes, in->mem_stages);
  json_array(b, "mem_wgrad_bytes", in->mem_wgrad_bytes, in->mem_stages);
  json_array(b, "mem_transient_bytes", in->mem_transient_bytes, in->mem_stages);
  kt_buf_puts(b, ",\"peak_1f1b_bytes\":");
  kt_buf_json_number(b, in->peak_1f1b > 0 ? in->peak_1f1b : NAN);
  kt_buf_puts(b, ",\"peak_vs_1f1b\":");
  kt_buf_json_number(b, res->peak_vs_1f1b);
  kt_buf_puts(b, ",\"period_1f1b\":");
  kt_buf_json_number(b, res->period_1f1b);
  kt_buf_puts(b, ",\"period_vs_1f1b\":");
  kt_buf_json_number(b,
                     res->period_1f1b > 0 ? res->train.predicted.period / res->period_1f1b : NAN);
  kt_buf_printf(b, ",\"cores\":%d,\"compute_threads\":%d,\"oversubscribed\":%s", in->cores,
                in->compute_threads, in->compute_threads > in->cores ? "true" : "false");
  if (!o->sp.synthetic) {
    kt_buf_printf(b,
                  ",\"threads_per_rank\":%d,\"gemm\":\"%s\",\"gemm_chosen\":\"%s\","
                  "\"gemm_seconds\":{",
                  kt_blas_threads(), kt_gemm_name(o->gemm.kind),
                  o->gemm.how ? o->gemm.how : "given");
    for (int k = 1; k < KT_GEMM_COUNT; k++) {
      kt_buf_printf(b, "%s\"%s\":", k > 1 ? "," : "", kt_gemm_name((kt_gemm_kind)k));
      kt_buf_json_number(b, o->gemm.seconds[k] > 0 ? o->gemm.seconds[k] : NAN);
    }
    kt_buf_puts(b, "},\"gemm_shapes\":[");
    for (int i = 0; i < o->gemm.n_shapes; i++) {
      const kt_gemm_shape *s = &o->gemm.shapes[i];
      kt_buf_printf(b,
                    "%s{\"trans_a\":%d,\"trans_b\":%d,\"dims\":[%d,%d],\"gemm\":\"%s\","
                    "\"speedup\":",
                    i ? "," : "", s->trans_a, s->trans_b, s->dims[0], s->dims[1],
                    kt_gemm_name(s->kind));
      kt_buf_json_number(b, s->speedup);
      kt_buf_puts(b, "}");
    }
    kt_buf_puts(b, "]");
  }
  if (!o->sp.synthetic && o->sp.doc_lengths) {
    kt_buf_puts(b, ",\"attn_share\":");
    kt_buf_json_number(b, res->attn_share);
    kt_buf_printf(b, ",\"attn_share_from\":%d", res->attn_from);
  }
  const kt_faults *f = o->sp.faults;
  if (f && f->n_rank > 0) { /* the first --slow-rank */
    kt_buf_printf(b, ",\"slow_rank\":%d,\"slow_factor\":", f->rank[0].rank);
    kt_buf_json_number(b, f->rank[0].factor);
  }
  kt_buf_printf(b, ",\"autopilot\":{\"enabled\":%s,\"switches\":%d,\"last_switch\":",
                o->sp.autopilot ? "true" : "false", res->switches);
  kt_run_switch_json(&res->last_switch, b);
  kt_buf_puts(b, "}");
}

/* The time rank r's own ops waited for a core in the last step (their
 * ready_wait, measured per thread), seconds; NAN when not measured. */
static double own_core_wait(const kt_timeline *t, int r) {
  double sum = 0;
  int any = 0;
  for (size_t i = 0; i < t->n_events; i++)
    if (t->events[i].rank == r) /* measured: its own time is (sim/idle.c) */
      sum += t->events[i].ready_wait, any |= t->events[i].cpu_time > 0;
  return any ? sum : NAN;
}

static void json_ranks(kt_buf *b, const kt_train_result *r, const kt_session_result *res,
                       const double *pred_peak) {
  kt_buf_puts(b, ",\"ranks\":[");
  for (int i = 0; i < r->measured.p; i++) {
    const kt_rank_metrics *m = &r->measured.ranks[i];
    const kt_rank_metrics *q = &r->predicted.ranks[i];
    kt_buf_printf(b, "%s{\"rank\":%d,\"busy\":", i ? "," : "", i);
    kt_buf_json_number(b, m->busy);
    kt_buf_puts(b, ",\"idle\":");
    kt_buf_json_number(b, m->idle);
    kt_buf_printf(b, ",\"peak_inflight\":%d,\"predicted_peak_inflight\":%d,\"peak_memory\":",
                  m->peak_inflight, q->peak_inflight);
    kt_buf_json_number(b, m->peak_memory);
    if (pred_peak) {
      kt_buf_puts(b, ",\"predicted_peak_memory\":");
      kt_buf_json_number(b, pred_peak[i]);
    }
    kt_buf_printf(b, ",\"bytes_sent\":%lld,\"comm_time\":", (long long)m->bytes_sent);
    kt_buf_json_number(b, m->comm_time);
    kt_buf_puts(b, ",\"predicted_busy\":");
    kt_buf_json_number(b, q->busy);
    if (res->idle) {
      kt_buf_puts(b, ",\"idle_causes\":");
      kt_idle_split_json(&res->idle[i], b);
      kt_buf_puts(b, ",\"core_wait_own\":");
      kt_buf_json_number(b, own_core_wait(&r->measured_timeline, i));
    }
    kt_buf_puts(b, "}");
  }
  kt_buf_puts(b, "]");
}

static void json_seconds(kt_buf *b, const char *key, const double *x, int n) {
  kt_buf_printf(b, ",\"%s\":[", key);
  for (int i = 0; i < n; i++) {
    if (i) kt_buf_puts(b, ",");
    kt_buf_json_number(b, x[i]);
  }
  kt_buf_puts(b, "]");
}

/* The last step's micro-batches: what each held and each stage's measured
 * costs (seconds), for predicted versus measured per micro-batch. */
static void json_microbatches(kt_buf *b, const kt_train_result *r) {
  kt_buf_puts(b, ",\"microbatches\":[");
  for (int i = 0; i < r->n_mb_costs; i++) {
    const kt_mb_cost *c = &r->mb_costs[i];
    kt_buf_printf(b,
                  "%s{\"round\":%d,\"mb\":%d,\"tokens\":%d,\"documents\":%d,"
                  "\"attn_tokens2\":%.0f",
                  i ? "," : "", c->round, c->mb, c->tokens, c->documents, c->attn_tokens2);
    json_seconds(b, "tf", c->tf, r->mb_cost_stages);
    json_seconds(b, "tb", c->tb, r->mb_cost_stages);
    json_seconds(b, "tw", c->tw, r->mb_cost_stages);
    kt_buf_puts(b, "}");
  }
  kt_buf_puts(b, "]");
}

static void json_result(kt_buf *b, const train_opts *o, const kt_session_info *in,
                        const kt_session_result *res, const double *pred_peak) {
  const kt_schedule *s = in->schedule;
  const kt_train_result *r = &res->train;
  kt_buf_puts(b, "{\"schedule\":");
  kt_buf_json_string(b, s->name);
  kt_buf_printf(b,
                ",\"model\":\"%s\",\"transport\":\"%s\",\"p\":%d,\"v\":%d,\"m\":%d,\"d\":%d,"
                "\"k\":%d,\"b\":%d,\"losses\":[",
                o->sp.synthetic ? "synthetic" : kt_model_kind_name(o->sp.model.kind), o->transport,
                s->p, s->v, s->m, o->sp.data_parallel, o->sp.grad_accum, o->sp.micro_batch);
  for (int i = 0; i < r->n_losses; i++) {
    if (i) kt_buf_puts(b, ",");
    kt_buf_json_number(b, r->losses[i]);
  }
  kt_buf_puts(b, "],\"val_loss\":");
  kt_buf_json_number(b, r->last_val_loss);
  const struct {
    const char *k;
    double v;
  } nums[] = {{"bubble_ratio", r->measured.bubble_ratio},
              {"predicted_bubble_ratio", r->predicted.bubble_ratio},
              {"makespan", r->measured.makespan},
              {"predicted_makespan", r->predicted.makespan},
              {"period", r->measured.period},
              {"predicted_period", r->predicted.period},
              {"step_seconds", r->mean_step_seconds},
              {"median_step_seconds", r->median_step_seconds},
              {"sync_seconds", r->measured_sync_seconds},
              {"update_seconds", r->tail_seconds},
              {"samples_per_s", r->samples_per_s},
              {"tokens_per_s", r->tokens_per_s},
              {"steady_tokens_per_s", r->steady_tokens_per_s},
              {"peak_activation_bytes_stage0", (double)r->peak_stash_bytes_stage0},
              {"hop_seconds", r->calibrated.comm},
              {"send_overhead_seconds", r->calibrated.send_overhead},
              {"idle_step_seconds", res->idle ? res->idle_seconds : NAN}};
  for (size_t i = 0; i < sizeof nums / sizeof *nums; i++) {
    kt_buf_printf(b, ",\"%s\":", nums[i].k);
    kt_buf_json_number(b, nums[i].v);
  }
  kt_buf_printf(b, ",\"step_sync\":\"%s\",\"rollbacks\":%d,\"waited_steps\":%d",
                kt_step_sync_name(o->sp.step_sync), r->rollbacks, r->waited_steps);
  kt_buf_puts(b, ",\"predicted_step_seconds\":");
  kt_buf_json_number(b, r->predicted_step_seconds);
  if (o->sp.cluster) {
    kt_buf_puts(b, ",\"predicted_sync_seconds\":");
    kt_buf_json_number(b, r->predicted_sync_seconds);
  }
  json_run_facts(b, o, in, res);
  json_ranks(b, r, res, pred_peak);
  json_microbatches(b, r);
  kt_buf_puts(b, "}\n");
}

/* One rank's step as a bar of `width` characters: busy '#', then the
 * causes in kt_idle_cause_names' order as s, c, m, o, u. */
static void idle_bar(kt_buf *b, const kt_idle_split *x, double step, int width) {
  static const char marks[KT_IDLE_CAUSES] = {'s', 'c', 'm', 'o', 'u'};
  double at = x->busy, drawn = 0;
  int cols = (int)lround(width * fmin(1, at / step));
  for (int k = 0; k < cols; k++) kt_buf_puts(b, "#");
  drawn = cols;
  for (int i = 0; i < KT_IDLE_CAUSES; i++) {
    at += kt_idle_cause(x, i);
    int upto = (int)lround(width * fmin(1, at / step));
    for (; drawn < upto; drawn++) kt_buf_printf(b, "%c", marks[i]);
  }
}

/* Each rank's own waits for a core, ms, in lines of at most 100 columns;
 * nothing when they were not measured. */
static void own_waits(kt_buf *b, const kt_timeline *t, int p) {
  if (isnan(own_core_wait(t, 0))) return;
  kt_buf_puts(b, "core_wait is the pipeline's: a wait for a core delays the step's end wherever\n"
                 "it happens, and every rank idles until that end (docs/runtime.md); each rank's "
                 "own\nops waited for a core, ms:");
  int col = 31;
  for (int i = 0; i < p; i++) {
    char cell[48];
    int n = snprintf(cell, sizeof cell, " %d: %.2f%s", i, 1e3 * own_core_wait(t, i),
                     i + 1 < p ? "," : "");
    if (col + n > 100) kt_buf_puts(b, "\n"), col = 0;
    kt_buf_puts(b, cell), col += n;
  }
  kt_buf_puts(b, "\n");
}

/* Why each rank idled on the last step, ms, with a bar per rank; then
 * why core_wait is one figure, and each rank's own waits for a core. */
static void idle_table(kt_buf *b, const kt_session_result *res) {
  if (!res->idle) return;
  double step = res->idle_seconds;
  kt_buf_printf(b,
                "why idle, last step: %.2f ms, ms each (compute: the ops' CPU time; busy: "
                "their wall time)\n",
                1e3 * step);
  kt_buf_printf(b, "%-5s %9s %9s %9s %9s %9s %9s  %s\n", "rank", "compute", "schedule", "core_wait",
                "comm", "overhead", "optimizer", "# compute, then s c m o u");
  for (int i = 0; i < res->train.measured.p; i++) {
    const kt_idle_split *x = &res->idle[i];
    kt_buf_printf(b, "%-5d %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f  ", i, 1e3 * x->busy,
                  1e3 * x->schedule, 1e3 * x->core_wait, 1e3 * x->comm, 1e3 * x->overhead,
                  1e3 * x->optimizer);
    if (step > 0) idle_bar(b, x, step, 30);
    kt_buf_puts(b, "\n");
  }
  own_waits(b, &res->train.measured_timeline, res->train.measured.p);
}

static void text_summary(kt_buf *b, const train_opts *o, const kt_session_info *in,
                         const kt_session_result *res) {
  const kt_train_result *r = &res->train;
  kt_buf_printf(b, "\nlast step, measured:  period %8.2f ms  makespan %8.2f ms  bubble %5.1f%%\n",
                1e3 * r->measured.period, 1e3 * r->measured.makespan,
                100 * r->measured.bubble_ratio);
  kt_buf_printf(b,
                "predicted (costs of a median step):  period %8.2f ms  makespan %8.2f ms  "
                "bubble %5.1f%%\n",
                1e3 * r->predicted.period, 1e3 * r->predicted.makespan,
                100 * r->predicted.bubble_ratio);
  kt_buf_printf(b,
                "period = a step under step sync %s (docs/runtime.md); makespan = one step "
                "alone\n",
                kt_step_sync_name(o->sp.step_sync));
  if (o->sp.step_sync == KT_STEP_OVERLAP)
    kt_buf_printf(b, "post-validation: %d rollbacks, %d of %d steps waited for their check%s\n",
                  r->rollbacks, r->waited_steps, r->n_losses,
                  2 * r->waited_steps > r->n_losses ? " (predicted as a barrier)" : "");
  kt_buf_printf(b, "%-5s %10s %10s %10s %10s %10s %10s %12s\n", "rank", "busy ms", "idle ms",
                "pred busy", "in flight", "predicted", "sent KiB", "peak act MiB");
  for (int i = 0; i < r->measured.p; i++) {
    const kt_rank_metrics *m = &r->measured.ranks[i], *q = &r->predicted.ranks[i];
    kt_buf_printf(b, "%-5d %10.2f %10.2f %10.2f %10d %10d %10.1f %12.3f\n", i, 1e3 * m->busy,
                  1e3 * m->idle, 1e3 * q->busy, m->peak_inflight, q->peak_inflight,
                  m->bytes_sent / 1024.0, m->peak_memory / 1048576.0);
  }
  idle_table(b, res);
  if (in->compute_threads > in->cores)
    kt_buf_printf(b,
                  "oversubscribed: %d compute threads (ranks x BLAS threads) on %d cores: "
                  "core_wait\n",
                  in->compute_threads, in->cores);
  if (o->sp.cluster)
    kt_buf_printf(b,
                  "step on the links of %s: predicted %.2f ms (all-reduce and sums %.2f ms), "
                  "measured %.2f ms (median; all-reduce and sums %.2f ms, update %.2f ms), "
                  "measured/predicted %.3f\n",
                  o->sp.cluster, 1e3 * r->predicted_step_seconds, 1e3 * r->predicted_sync_seconds,
                  1e3 * r->median_step_seconds, 1e3 * r->measured_sync_seconds,
                  1e3 * r->tail_seconds, r->median_step_seconds / r->predicted_step_seconds);
  kt_buf_printf(b,
                "throughput: %.0f tokens/s steady (median step %.1f ms, predicted %.1f), %.0f "
                "over all\n",
                r->steady_tokens_per_s, 1e3 * r->median_step_seconds,
                1e3 * r->predicted_step_seconds, r->tokens_per_s);
}

void train_final_report(const train_opts *o, const kt_session_info *in,
                        const kt_session_result *res, const double *pred_peak, kt_buf *out) {
  const kt_schedule *sched = in->schedule;
  if (!strcmp(o->format, "json")) {
    json_result(out, o, in, res, pred_peak);
  } else if (!strcmp(o->format, "chrome")) {
    char title[96];
    snprintf(title, sizeof title, "kaiten train %s P=%d M=%d (measured)", sched->name, sched->p,
             sched->m);
    kt_render_chrome_trace(&res->train.measured_timeline, title, 1e6, out);
  } else {
    if (!strcmp(o->format, "ascii")) {
      kt_gantt_opts go;
      kt_gantt_default_opts(&go);
      go.width = cli_term_width();
      go.chunks = sched->v;
      go.color = cli_use_color(NULL) && !o->output;
      kt_buf_puts(out, "\nmeasured (last step):\n");
      kt_render_gantt_ascii(&res->train.measured_timeline, &go, out);
      kt_buf_puts(out, "\npredicted:\n");
      kt_render_gantt_ascii(&res->train.predicted_timeline, &go, out);
    }
    text_summary(out, o, in, res);
  }
}

/* What the schedule's memory costs in time: its predicted period against
 * 1F1B's on the same costs (a memory limit: what it saves and what it costs). */
static void price_line(const train_opts *o, const kt_session_result *r, kt_buf *out) {
  double mine = r->train.predicted.period, one = r->period_1f1b;
  if (!(mine > 0) || !(one > 0)) return;
  if (kt_mem_limit_given(&o->sp.mem_limit) && r->peak_vs_1f1b > 0) {
    char lim[32];
    kt_mem_limit_format(&o->sp.mem_limit, lim, sizeof lim);
    kt_buf_printf(out,
                  "the price of --mem-limit %s: %.3fx 1F1B's memory, %.3fx its step "
                  "(predicted %.2f vs %.2f ms)\n",
                  lim, r->peak_vs_1f1b, mine / one, 1e3 * mine, 1e3 * one);
  } else {
    kt_buf_printf(out,
                  "step against 1F1B: predicted period %.2f ms = %.3fx 1F1B's %.2f ms "
                  "(calibrated costs)\n",
                  1e3 * mine, mine / one, 1e3 * one);
  }
}

void train_memory_report(const train_opts *o, kt_session *s, const kt_session_result *r,
                         kt_buf *out) {
  kt_session_info in;
  kt_session_get_info(s, &in);
  double *pred = kt_calloc((size_t)in.schedule->p, sizeof *pred);
  kt_error err = {{0}};
  kt_status st =
      pred ? kt_session_predict_memory(s, pred, &err) : kt_fail(&err, KT_ENOMEM, "out of memory");
  if (st) {
    kt_buf_printf(out, "peak activation memory: no prediction (%s)\n", err.msg);
    free(pred);
    return;
  }
  kt_buf_printf(out,
                "peak activation memory per rank, MiB (%s; predicted from each stage's "
                "bytes):\n%-5s %10s %10s\n",
                in.schedule->name, "rank", "predicted", "measured");
  double most = 0;
  for (int i = 0; i < r->train.measured.p && i < in.schedule->p; i++) {
    kt_buf_printf(out, "%-5d %10.3f %10.3f\n", i, pred[i] / 1048576.0,
                  r->train.measured.ranks[i].peak_memory / 1048576.0);
    most = fmax(most, r->train.measured.ranks[i].peak_memory);
  }
  if (in.peak_1f1b > 0)
    kt_buf_printf(out,
                  "largest rank's peak %.3f MiB = %.3fx 1F1B's predicted peak on this model "
                  "(%.3f MiB at P=%d, M=%d)\n",
                  most / 1048576.0, r->peak_vs_1f1b, in.peak_1f1b / 1048576.0, in.schedule->p,
                  in.schedule->m / (o->sp.model.seq_chunks > 1 ? o->sp.model.seq_chunks : 1));
  free(pred);
  price_line(o, r, out);
}
