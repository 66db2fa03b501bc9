/* kaiten compare: every applicable schedule side by side under one cost model. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "kaiten/generators.h"
#include "kaiten/report.h"

static const cli_opt compare_opts[] = {
    {"p", 'p', "P", "pipeline ranks (default 4)"},
    {"m", 'm', "M", "micro-batches per step (default 8)"},
    {"v", 'v', "V", "chunks per rank for interleaved and looped-bfs (default 2)"},
    {"schedules", 0, "LIST", "comma-separated schedules (default: all)"},
    CLI_SCHEDULE_FILE_OPTS,
    CLI_COST_OPTS,
    {"mem-limit", 0, "X", "zb-auto, zbv-auto: memory per rank, in --mem-act units or as a fraction of 1F1B's (0.5x)"},
    {"format", 'f', "FMT", "table (default) | json"},
    {"output", 'o', "FILE", "write to FILE (atomically) instead of stdout"},
    {"report", 0, "FILE", "also write a self-contained HTML report (Gantts side by side) to FILE"},
};

typedef struct {
  const char *name;
  int ok;
  char reason[KT_ERROR_LEN];
  int v;
  double makespan, bubble, closed, peak_mem_first, peak_mem_last, peak_mem_max;
  int inflight_first, inflight_last;
  size_t messages;
  const char *expr;
  double closed_mem, mem_limit; /* closed-form peak memory (< 0: none); zb-auto's limit */
  const char *mem_expr;
  kt_timeline tl; /* kept for --report */
  kt_metrics met;
  kt_sim_info info;
  char placement[512];
} row;

/* Simulates s (kind < 0: a schedule file, no closed forms) into the row;
 * frees s. */
static void eval_schedule(row *rw, kt_schedule *sched, int kind, const kt_costs *c,
                          const cli_mem_limit *ml, int keep) {
  kt_error err = {{0}};
  kt_schedule s = *sched;
  int p = s.p, m = s.m;
  kt_metrics met;
  kt_status st = kt_simulate(&s, c, &rw->tl, &err);
  if (!st && (st = kt_timeline_metrics(&rw->tl, &met, &err))) kt_timeline_free(&rw->tl);
  if (st) {
    snprintf(rw->reason, sizeof rw->reason, "%s", err.msg);
    kt_schedule_free(&s);
    return;
  }
  rw->ok = 1;
  rw->v = s.v;
  rw->makespan = met.makespan;
  rw->bubble = met.bubble_ratio;
  rw->closed = kind < 0 ? -1
                        : kt_schedule_closed_form_bubble((kt_schedule_kind)kind, s.p, s.v, s.m,
                                                         c->tf, c->tb, c->tw, &rw->expr);
  /* the forms assume uniform per-stage times (memory: uniform M_B, M_W) and no communication */
  if (c->stage_tf || c->stage_tb || c->stage_tw || kt_cost_comm(c) > 0) rw->closed = -1;
  rw->closed_mem = kind < 0 ? -1
                            : kt_schedule_closed_form_peak_memory((kt_schedule_kind)kind, s.p, s.v,
                                                                  s.m, c->mem_act, c->mem_wgrad,
                                                                  &rw->mem_expr);
  if (c->stage_mem_act || c->stage_mem_wgrad) rw->closed_mem = -1;
  kt_schedule_params lim = {.p = p, .m = m, .v = s.v, .costs = c};
  if (kind >= 0) lim.mem_limit = cli_mem_limit_units(ml, (kt_schedule_kind)kind, p, m, s.v, c);
  rw->mem_limit = kind == KT_SCHED_ZB_AUTO || kind == KT_SCHED_ZBV_AUTO ? kt_schedule_mem_limit(&lim) : -1;
  rw->peak_mem_first = met.ranks[0].peak_memory;
  rw->peak_mem_last = met.ranks[p - 1].peak_memory;
  for (int r = 0; r < p; r++)
    if (met.ranks[r].peak_memory > rw->peak_mem_max) rw->peak_mem_max = met.ranks[r].peak_memory;
  rw->inflight_first = met.ranks[0].peak_inflight;
  rw->inflight_last = met.ranks[p - 1].peak_inflight;
  rw->messages = kt_schedule_messages(&s);
  rw->info = (kt_sim_info){.schedule = rw->name, .p = s.p, .v = s.v, .m = s.m,
                           .placement = cli_placement_text(&s, rw->placement, sizeof rw->placement),
                           .costs = c,
                           .closed_form = rw->closed, .closed_form_expr = rw->expr,
                           .messages = rw->messages};
  if (keep) {
    rw->met = met;
  } else {
    kt_metrics_free(&met);
    kt_timeline_free(&rw->tl);
  }
  kt_schedule_free(&s);
}

static void eval_row(row *rw, kt_schedule_kind kind, int p, int m, int v, const kt_costs *c,
                     const cli_mem_limit *ml, int keep) {
  kt_error err = {{0}};
  kt_schedule s;
  rw->name = kt_schedule_kind_name(kind);
  int defv = kt_schedule_default_chunks(kind);
  int use_v = defv > 1 && kt_schedule_kind_placement(kind) != KT_PLACEMENT_V ? v : 0;
  double mem_limit = cli_mem_limit_units(ml, kind, p, m, use_v, c);
  if (cli_generate(kind, p, m, use_v, c, mem_limit, &s, &err)) {
    snprintf(rw->reason, sizeof rw->reason, "%s", err.msg);
    return;
  }
  eval_schedule(rw, &s, (int)kind, c, ml, keep);
}

static int run_compare(cli_args *a) {
  long p, m, v;
  cli_mem_limit ml;
  if (cli_int(a, "p", 1, KT_MAX_RANKS, 4, &p) || cli_int(a, "m", 1, KT_MAX_MICROBATCHES, 8, &m) ||
      cli_int(a, "v", 2, KT_MAX_CHUNKS, 2, &v) || cli_mem_limit_parse(a, 0, &ml))
    return 2;
  if (a->n_pos) return cli_usage_error("unexpected argument '%s' (see kaiten compare --help)", a->pos[0]);
  /* a schedule file is one more row; its P and M set the comparison's */
  kt_schedule file_sched = {0};
  const char *file = cli_get(a, "schedule-file");
  if (file) {
    cli_torch torch;
    if (cli_torch_read(a, &torch)) return 2;
    char info[CLI_INFO_LEN];
    /* -v is for the built-in rows; the file keeps its own */
    cli_size_flag sizes[3] = {{"-p", cli_has(a, "p"), p}, {"-v", 0, 0}, {"-m", cli_has(a, "m"), m}};
    int rc = cli_load_schedule_file(torch, file, sizes, &file_sched, NULL, info, sizeof info);
    if (rc) return rc;
    p = file_sched.p;
    m = file_sched.m;
    fprintf(stderr, "kaiten: %s", info);
  }
  const char *format = cli_get(a, "format") ? cli_get(a, "format") : "table";
  if (strcmp(format, "table") && strcmp(format, "json")) {
    kt_schedule_free(&file_sched);
    return cli_usage_error("--format '%s': expected table or json", format);
  }
  int kinds[KT_SCHED_COUNT], nk = 0;
  const char *list = cli_get(a, "schedules");
  if (list) {
    char *copy = strdup(list), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
      int k = kt_schedule_kind_from_name(tok);
      if (k < 0) {
        kt_schedule_free(&file_sched);
        int rc = cli_usage_error("unknown schedule '%s' in --schedules (known: %s)", tok,
                                 kt_schedule_kind_list());
        free(copy);
        return rc;
      }
      if (nk < KT_SCHED_COUNT) kinds[nk++] = k;
    }
    free(copy);
    if (nk == 0) {
      kt_schedule_free(&file_sched);
      return cli_usage_error("--schedules is empty");
    }
  } else {
    for (int k = 0; k < KT_SCHED_COUNT; k++) kinds[nk++] = k;
  }
  kt_costs costs;
  int rc = cli_read_costs(a, &costs);
  if (rc) {
    kt_schedule_free(&file_sched);
    return rc;
  }
  row rows[KT_SCHED_COUNT + 1];
  memset(rows, 0, sizeof rows);
  for (int i = 0; i < nk; i++)
    eval_row(&rows[i], (kt_schedule_kind)kinds[i], (int)p, (int)m, (int)v, &costs, &ml,
             cli_has(a, "report"));
  if (file) {
    rows[nk].name = file_sched.name;
    eval_schedule(&rows[nk++], &file_sched, -1, &costs, &ml, cli_has(a, "report"));
  }

  kt_buf out;
  kt_buf_init(&out);
  if (!strcmp(format, "json")) {
    kt_buf_printf(&out, "{\"p\":%ld,\"m\":%ld,\"v\":%ld,\"costs\":{\"tf\":", p, m, v);
    kt_buf_json_number(&out, costs.tf);
    kt_buf_puts(&out, ",\"tb\":");
    kt_buf_json_number(&out, costs.tb);
    kt_buf_puts(&out, ",\"tw\":");
    kt_buf_json_number(&out, costs.tw);
    kt_buf_puts(&out, ",\"comm\":");
    kt_buf_json_number(&out, kt_cost_comm(&costs));
    kt_buf_puts(&out, "},\"rows\":[");
    for (int i = 0; i < nk; i++) {
      row *rw = &rows[i];
      kt_buf_printf(&out, "%s{\"schedule\":", i ? "," : "");
      kt_buf_json_string(&out, rw->name); /* a file's name may hold anything */
      if (!rw->ok) {
        kt_buf_puts(&out, ",\"applies\":false,\"reason\":");
        kt_buf_json_string(&out, rw->reason);
        kt_buf_puts(&out, "}");
        continue;
      }
      kt_buf_printf(&out, ",\"applies\":true,\"v\":%d,\"makespan\":", rw->v);
      kt_buf_json_number(&out, rw->makespan);
      kt_buf_puts(&out, ",\"bubble_ratio\":");
      kt_buf_json_number(&out, rw->bubble);
      kt_buf_puts(&out, ",\"closed_form_bubble\":");
      if (rw->closed >= 0) kt_buf_json_number(&out, rw->closed);
      else kt_buf_puts(&out, "null");
      kt_buf_puts(&out, ",\"closed_form_expr\":");
      if (rw->expr) kt_buf_json_string(&out, rw->expr);
      else kt_buf_puts(&out, "null");
      kt_buf_puts(&out, ",\"peak_memory_first\":");
      kt_buf_json_number(&out, rw->peak_mem_first);
      kt_buf_puts(&out, ",\"peak_memory_last\":");
      kt_buf_json_number(&out, rw->peak_mem_last);
      kt_buf_puts(&out, ",\"peak_memory\":");
      kt_buf_json_number(&out, rw->peak_mem_max);
      kt_buf_puts(&out, ",\"closed_form_peak_memory\":");
      if (rw->closed_mem >= 0) kt_buf_json_number(&out, rw->closed_mem);
      else kt_buf_puts(&out, "null");
      kt_buf_puts(&out, ",\"closed_form_peak_memory_expr\":");
      if (rw->mem_expr) kt_buf_json_string(&out, rw->mem_expr);
      else kt_buf_puts(&out, "null");
      if (rw->mem_limit >= 0) {
        kt_buf_puts(&out, ",\"mem_limit\":");
        kt_buf_json_number(&out, rw->mem_limit);
      }
      kt_buf_printf(&out, ",\"peak_inflight_first\":%d,\"peak_inflight_last\":%d,\"messages\":%zu}",
                    rw->inflight_first, rw->inflight_last, rw->messages);
    }
    kt_buf_puts(&out, "]}\n");
  } else {
    kt_buf_printf(&out, "P=%ld M=%ld  tf=%g tb=%g tw=%g comm=%g  mem-act=%g mem-wgrad=%g%s\n\n",
                  p, m, costs.tf, costs.tb, costs.tw, kt_cost_comm(&costs), costs.mem_act,
                  costs.mem_wgrad, costs.n_stages ? "  (per-stage costs)" : "");
    int w = 12;
    for (int i = 0; i < nk; i++)
      if ((int)strlen(rows[i].name) > w) w = (int)strlen(rows[i].name);
    kt_buf_printf(&out, "%-*s %2s %10s %8s %9s %9s %9s %9s %9s %6s %6s %8s\n", w, "schedule", "V",
                  "makespan", "bubble", "formula", "peak mem", "mem form", "mem r0", "mem last",
                  "fl r0", "fl last", "messages");
    for (int i = 0; i < nk; i++) {
      row *rw = &rows[i];
      if (!rw->ok) continue;
      char formula[32] = "-", mem_formula[32] = "-";
      if (rw->closed >= 0) snprintf(formula, sizeof formula, "%.2f%%", 100 * rw->closed);
      if (rw->closed_mem >= 0) snprintf(mem_formula, sizeof mem_formula, "%g", rw->closed_mem);
      else if (rw->mem_limit >= 0) snprintf(mem_formula, sizeof mem_formula, "<=%g", rw->mem_limit);
      kt_buf_printf(&out, "%-*s %2d %10g %7.2f%% %9s %9g %9s %9g %9g %6d %6d %8zu\n", w, rw->name,
                    rw->v, rw->makespan, 100 * rw->bubble, formula, rw->peak_mem_max, mem_formula,
                    rw->peak_mem_first, rw->peak_mem_last, rw->inflight_first, rw->inflight_last,
                    rw->messages);
    }
    int forms = 0;
    for (int i = 0; i < nk; i++) {
      row *rw = &rows[i];
      if (!rw->ok || (!rw->expr && !rw->mem_expr && rw->mem_limit < 0)) continue;
      if (!forms++)
        kt_buf_puts(&out, "\nclosed forms (uniform per-stage costs; bubble also T_comm = 0; "
                          "I = idle per rank, n = P-1):\n");
      kt_buf_printf(&out, "  %-12s bubble %s\n", rw->name, rw->expr ? rw->expr : "-");
      if (rw->mem_expr) kt_buf_printf(&out, "  %-12s memory %s\n", "", rw->mem_expr);
      else if (rw->mem_limit >= 0)
        kt_buf_printf(&out, "  %-12s memory <= --mem-limit (%g)\n", "", rw->mem_limit);
    }
    int skipped = 0;
    for (int i = 0; i < nk; i++)
      if (!rows[i].ok) {
        if (!skipped++) kt_buf_puts(&out, "\nnot applicable:\n");
        kt_buf_printf(&out, "  %-12s %s\n", rows[i].name, rows[i].reason);
      }
    kt_buf_puts(&out,
                "\npeak mem = the largest peak over the ranks (mem form: its closed form); mem = peak "
                "activation memory (units of --mem-act), fl = peak in-flight micro-batches, on "
                "the first and last rank.\n");
  }
  rc = cli_emit(cli_get(a, "output"), &out);
  if (cli_has(a, "report")) {
    kt_report_entry entries[KT_SCHED_COUNT + 1];
    for (int i = 0; i < nk; i++) {
      row *rw = &rows[i];
      entries[i] = (kt_report_entry){.info = rw->info, .timeline = rw->ok ? &rw->tl : NULL,
                                     .metrics = rw->ok ? &rw->met : NULL, .reason = rw->reason};
      entries[i].info.schedule = rw->name;
      entries[i].info.p = (int)p, entries[i].info.m = (int)m; /* also where it does not apply */
    }
    char title[96];
    snprintf(title, sizeof title, "kaiten compare: P=%ld M=%ld", p, m);
    kt_error err = {{0}};
    kt_status st = rc ? KT_OK : kt_write_html_report(cli_get(a, "report"), title, entries,
                                                     (size_t)nk, &costs, &err);
    if (st) rc = cli_fail(st, &err);
    for (int i = 0; i < nk; i++)
      if (rows[i].ok) kt_metrics_free(&rows[i].met), kt_timeline_free(&rows[i].tl);
  }
  kt_buf_free(&out);
  kt_costs_free(&costs);
  return rc;
}


const cli_command cli_cmd_compare = {
    .name = "compare",
    .summary = "compare pipeline schedules side by side (bubble, makespan, memory, messages)",
    .usage = "-p P -m M [-v V] [--schedules a,b,c] [--schedule-file FILE] [costs] [--format table|json]",
    .details = "--schedule-file adds the file's schedule as one more row (named after the file);\n"
               "P and M then come from the file.\n"
               "examples:\n  kaiten compare -p 8 -m 24 --tf 18.5 --tb 18.1 --tw 9.3 --comm 0.6\n"
               "  kaiten compare -p 4 -m 8 --report cmp.html\n"
               "  kaiten compare --schedule-file dualpipev_4rank_10mb.csv --schedules 1f1b,zbv\n",
    .opts = compare_opts,
    .n_opts = sizeof compare_opts / sizeof *compare_opts,
    .run = run_compare,
};
