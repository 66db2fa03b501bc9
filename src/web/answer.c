/* The what-if answer: kaiten sim's JSON (kt_render_sim_json) inside one
 * object with what the panel draws beyond it (kaiten/web.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kaiten/generators.h"
#include "kaiten/report.h"
#include "web/web_internal.h"

static void number_list(kt_buf *b, const double *v, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (i) kt_buf_puts(b, ",");
    kt_buf_json_number(b, v[i]);
  }
}

/* "--flag x" or "--flag x0,x1,...", or per micro-batch "--flag 'a0,a1;b0,b1'" */
static void cost_flag(kt_buf *b, const char *flag, double uniform, const double *per, int n) {
  kt_buf_printf(b, " --%s ", flag);
  if (per && n > 0) number_list(b, per, (size_t)n);
  else kt_buf_json_number(b, uniform);
}

static void cost_flag_mb(kt_buf *b, const char *flag, double uniform, const double *per,
                         const double *mb, const kt_costs *c) {
  if (!mb) {
    cost_flag(b, flag, uniform, per, c->n_stages);
    return;
  }
  kt_buf_printf(b, " --%s '", flag);
  for (int s = 0; s < c->n_stages; s++) {
    if (s) kt_buf_puts(b, ";");
    number_list(b, mb + (size_t)s * (size_t)c->n_mb, (size_t)c->n_mb);
  }
  kt_buf_puts(b, "'");
}

/* The packing's flags: it makes each micro-batch's costs from the stage
 * costs printed before them. */
static void packing_flags(kt_buf *b, const kt_request *rq) {
  kt_buf_printf(b, " --doc-lengths lognormal:%.17g:%d:%d --packing %s --mb-tokens %d --seed %llu",
                rq->doc_lengths.sigma, rq->doc_lengths.min, rq->doc_lengths.max,
                kt_packing_name(rq->packing), rq->tokens.budget, (unsigned long long)rq->seed);
  kt_buf_puts(b, " --attn-share ");
  kt_buf_json_number(b, rq->tokens.attn);
}

/* The kaiten sim flags that reproduce the run: sizes (a generated
 * schedule), then every stage's costs as they ran (--per-stage), or as
 * the packing made each micro-batch's from. */
static void command(kt_buf *b, const kt__web_run *w) {
  kt_buf cmd;
  kt_buf_init(&cmd);
  const kt_result *res = &w->res;
  const kt_schedule *s = &res->order;
  const kt_costs *c = res->packed ? &res->stage_costs : &res->costs;
  if (res->kind >= 0)
    kt_buf_printf(
        &cmd, "--schedule %s -p %d -m %d -v %d",
        res->kind == KT_SIM_OPTIMAL ? KT_OPTIMAL_NAME : kt_gen_kind_name((kt_gen_kind)res->kind),
        s->p, s->m, s->v);
  kt_buf_puts(&cmd, res->kind >= 0 ? " --per-stage" : "--per-stage");
  cost_flag_mb(&cmd, "tf", c->tf, c->stage_tf, c->mb_tf, c);
  cost_flag_mb(&cmd, "tb", c->tb, c->stage_tb, c->mb_tb, c);
  cost_flag_mb(&cmd, "tw", c->tw, c->stage_tw, c->mb_tw, c);
  cost_flag_mb(&cmd, "mem-act", c->mem_act, c->stage_mem_act, c->mb_mem_act, c);
  cost_flag_mb(&cmd, "mem-wgrad", c->mem_wgrad, c->stage_mem_wgrad, c->mb_mem_wgrad, c);
  const struct {
    const char *flag;
    double v;
  } scal[] = {{"comm", kt_cost_comm(c)},
              {"send-overhead", c->send_overhead},
              {"op-overhead", c->op_overhead},
              {"overlap", c->overlap}};
  for (size_t i = 0; i < sizeof scal / sizeof *scal; i++)
    if (scal[i].v > 0) cost_flag(&cmd, scal[i].flag, scal[i].v, NULL, 0);
  if (res->mem_limit > 0) cost_flag(&cmd, "mem-limit", res->mem_limit, NULL, 0);
  if (c->step_sync != KT_STEP_OVERLAP)
    kt_buf_printf(&cmd, " --step-sync %s", kt_step_sync_name(c->step_sync));
  if (res->packed) packing_flags(&cmd, &w->rq);
  if (cmd.failed) b->failed = 1;
  kt_buf_json_string(b, cmd.data ? cmd.data : "");
  kt_buf_free(&cmd);
}

static void limits(kt_buf *b, const kt__web_run *w) {
  double limit = w->res.mem_limit;
  kt_buf_puts(b, ",\"mem_limit\":");
  if (limit < 0) {
    kt_buf_puts(b, "null,\"over_limit\":[]");
    return;
  }
  kt_buf_json_number(b, limit);
  kt_buf_puts(b, ",\"over_limit\":[");
  int k = 0;
  for (int r = 0; r < w->res.met.p; r++) {
    double peak = w->res.met.ranks[r].peak_memory;
    if (kt_within_limit(peak, limit)) continue; /* as zb-auto keeps it */
    kt_buf_printf(b, "%s{\"rank\":%d,\"peak\":", k++ ? "," : "", r);
    kt_buf_json_number(b, peak);
    kt_buf_puts(b, "}");
  }
  kt_buf_puts(b, "]");
}

/* The schedule as kaiten text and PyTorch CSV, compute-only and lowered
 * for torch 2.15 (what kaiten sim --format text / torch-csv /
 * torch-csv-comms write). */
static kt_status exports(kt_buf *b, const kt_schedule *s, kt_error *err) {
  kt_buf t;
  kt_buf_init(&t);
  kt_schedule_write_text(s, &t);
  kt_buf_puts(b, ",\"text\":");
  kt_buf_json_string(b, t.data ? t.data : "");
  t.len = 0;
  kt_schedule_write_csv_notation(s, KT_NOTATION_CURRENT, &t);
  kt_buf_puts(b, ",\"csv\":");
  kt_buf_json_string(b, t.data ? t.data : "");
  t.len = 0;
  kt_schedule lowered;
  kt_status st = kt_schedule_lower_ir(s, KT_TORCH_IR_2_15, &lowered, err);
  if (!st) {
    kt_schedule_write_csv_notation(&lowered, KT_NOTATION_CURRENT, &t);
    kt_schedule_free(&lowered);
    kt_buf_puts(b, ",\"csv_comms\":");
    kt_buf_json_string(b, t.data ? t.data : "");
  }
  if (t.failed) b->failed = 1;
  kt_buf_free(&t);
  return st;
}

kt_status kt__web_answer(const kt__web_run *w, kt_buf *out, kt_error *err) {
  const kt_result *res = &w->res;
  const kt_schedule *s = &res->order;
  kt_buf b;
  kt_buf_init(&b);
  kt_buf_puts(&b, "{\"ok\":true,\"sim\":");
  kt_render_sim_json(&res->info, &res->met, &res->tl, &b);
  kt_buf_puts(&b, ",\"slack\":[");
  number_list(&b, w->cr.slack, res->tl.n_events);
  kt_buf_puts(&b, "],\"path\":[");
  for (size_t i = 0; i < w->cr.n_path; i++) kt_buf_printf(&b, "%s%zu", i ? "," : "", w->cr.path[i]);
  kt_buf_puts(&b, "],\"stage_rank\":[");
  for (int st = 0; st < kt_schedule_stages(s); st++)
    kt_buf_printf(&b, "%s%d", st ? "," : "", kt_stage_rank(s, st));
  kt_buf_puts(&b, "]");
  limits(&b, w);
  double mem = res->info.closed_form_peak_memory;
  kt_buf_puts(&b, ",\"closed_memory\":");
  kt_buf_json_number(&b, mem >= 0 ? mem : NAN);
  kt_buf_puts(&b, ",\"closed_memory_expr\":");
  if (res->info.closed_form_peak_memory_expr)
    kt_buf_json_string(&b, res->info.closed_form_peak_memory_expr);
  else kt_buf_puts(&b, "null");
  /* the quick search gave this order: kaiten sim runs the full one */
  static const int searches[] = {KT_SCHED_ZB_AUTO, KT_SCHED_ZBV_AUTO, KT_SCHED_ZBV, KT_SCHED_V_HALF,
                                 KT_SCHED_V_MIN};
  int quick = 0;
  for (size_t i = 0; i < sizeof searches / sizeof *searches; i++)
    quick |= w->rq.effort == KT_EFFORT_QUICK && res->kind == searches[i];
  kt_buf_printf(&b, ",\"quick\":%s,\"command\":", quick ? "true" : "false");
  command(&b, w);
  if (isfinite(w->replanned)) { /* replan=1: the fault's plans */
    kt_buf_puts(&b, ",\"fault\":{\"clean\":");
    kt_buf_json_number(&b, w->clean);
    kt_buf_puts(&b, ",\"static\":");
    kt_buf_json_number(&b, w->res.met.period);
    kt_buf_puts(&b, ",\"replanned\":");
    kt_buf_json_number(&b, w->replanned);
    kt_buf_puts(&b, ",\"lower_bound\":");
    kt_buf_json_number(&b, w->bound);
    kt_buf_puts(&b, ",\"schedule\":");
    kt_buf_json_string(&b, w->replanned_name);
    kt_buf_puts(&b, "}");
  }
  kt_status st = w->exports ? exports(&b, s, err) : KT_OK;
  kt_buf_puts(&b, "}\n");
  if (!st && b.failed) st = kt_fail(err, KT_ENOMEM, "out of memory writing the answer");
  if (!st) kt_buf_append(out, b.data, b.len);
  kt_buf_free(&b);
  return st;
}
