/* kaiten sim: generate (or load) a schedule, simulate it, render the result. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "kaiten/generators.h"
#include "kaiten/report.h"

static const cli_opt sim_opts[] = {
    {"schedule", 's', "NAME", "schedule to generate (default 1f1b)"},
    CLI_SCHEDULE_FILE_OPTS,
    {"from", 0, "FILE", "the same as --schedule-file"},
    {"p", 'p', "P", "pipeline ranks (default 4)"},
    {"m", 'm', "M", "micro-batches per step (default 8)"},
    {"v", 'v', "V", "chunks per rank (interleaved/looped-bfs default 2, zbv/dualpipev 2)"},
    CLI_COST_OPTS,
    {"mem-limit", 0, "X", "zb-auto, zbv-auto: memory per rank, in --mem-act units or as a fraction of 1F1B's (0.5x); default 1F1B's"},
    {"format", 'f', "FMT", "ascii (default) | json | csv | text | chrome | torch-csv | torch-csv-comms"},
    {"output", 'o', "FILE", "write to FILE (atomically) instead of stdout"},
    {"report", 0, "FILE", "also write a self-contained HTML report (Gantt, memory) to FILE"},
    {"width", 0, "N", "chart width in columns (default: terminal width or 120)"},
    {"color", 0, "WHEN", "auto (default) | always | never"},
};

static int run_sim(cli_args *a) {
  long p, m, v, width;
  cli_mem_limit ml;
  if (cli_int(a, "p", 1, KT_MAX_RANKS, 4, &p) || cli_int(a, "m", 1, KT_MAX_MICROBATCHES, 8, &m) ||
      cli_int(a, "v", 1, KT_MAX_CHUNKS, 0, &v) || cli_int(a, "width", 40, 100000, 0, &width) ||
      cli_mem_limit_parse(a, 0, &ml))
    return 2;
  if (a->n_pos) return cli_usage_error("unexpected argument '%s' (see kaiten sim --help)", a->pos[0]);
  const char *format = cli_get(a, "format") ? cli_get(a, "format") : "ascii";
  static const char *const formats[] = {"ascii", "json", "csv", "text", "chrome", "torch-csv",
                                        "torch-csv-comms"};
  int fmt_ok = 0;
  for (size_t i = 0; i < sizeof formats / sizeof *formats; i++) fmt_ok |= !strcmp(format, formats[i]);
  if (!fmt_ok)
    return cli_usage_error(
        "--format '%s': expected ascii, json, csv, text, chrome, torch-csv or torch-csv-comms", format);
  cli_torch torch;
  if (cli_torch_read(a, &torch)) return 2;
  kt_notation notation = torch.notation;
  const char *color = cli_get(a, "color");
  if (color && strcmp(color, "auto") && strcmp(color, "always") && strcmp(color, "never"))
    return cli_usage_error("--color '%s': expected auto, always or never", color);

  kt_costs costs;
  int rc = cli_read_costs(a, &costs);
  if (rc) return rc;
  kt_error err = {{0}};
  kt_schedule sched, program = {0};
  int kind = -1;
  const char *from = cli_get(a, "schedule-file") ? cli_get(a, "schedule-file") : cli_get(a, "from");
  if (from) {
    if (cli_has(a, "schedule")) {
      kt_costs_free(&costs);
      return cli_usage_error("give either --schedule or --schedule-file, not both");
    }
    char info[CLI_INFO_LEN];
    cli_size_flag sizes[3] = {{"-p", cli_has(a, "p"), p}, {"-v", cli_has(a, "v"), v},
                              {"-m", cli_has(a, "m"), m}};
    if ((rc = cli_load_schedule_file(torch, from, sizes, &sched, &program, info, sizeof info))) {
      kt_costs_free(&costs);
      return rc;
    }
    fprintf(stderr, "kaiten: %s", info);
  } else {
    const char *name = cli_get(a, "schedule") ? cli_get(a, "schedule") : "1f1b";
    kind = kt_schedule_kind_from_name(name);
    if (kind < 0) {
      kt_costs_free(&costs);
      return cli_usage_error("unknown schedule '%s' (known: %s)", name, kt_schedule_kind_list());
    }
    double mem_limit = cli_mem_limit_units(&ml, (kt_schedule_kind)kind, (int)p, (int)m, (int)v, &costs);
    if ((rc = cli_generate((kt_schedule_kind)kind, (int)p, (int)m, (int)v, &costs, mem_limit,
                           &sched, &err))) {
      kt_costs_free(&costs);
      fprintf(stderr, "kaiten: %s\n", err.msg);
      return rc;
    }
  }
  kt_timeline tl;
  /* a lowered file runs as written: its communication actions in its order */
  kt_status st = kt_simulate(program.ranks ? &program : &sched, &costs, &tl, &err);
  kt_schedule_free(&program);
  if (st) {
    kt_schedule_free(&sched);
    kt_costs_free(&costs);
    return cli_fail(st, &err);
  }
  kt_metrics met;
  if ((st = kt_timeline_metrics(&tl, &met, &err))) {
    kt_timeline_free(&tl);
    kt_schedule_free(&sched);
    kt_costs_free(&costs);
    return cli_fail(st, &err);
  }
  const char *expr = NULL;
  double closed = kind >= 0 ? kt_schedule_closed_form_bubble((kt_schedule_kind)kind, sched.p,
                                                             sched.v, sched.m, costs.tf, costs.tb,
                                                             costs.tw, &expr)
                            : -1;
  if (costs.n_stages > 0 || kt_cost_comm(&costs) > 0) closed = -1; /* formulas assume uniform, no comm */
  char placement[512];
  kt_sim_info info = {.schedule = sched.name, .p = sched.p, .v = sched.v, .m = sched.m,
                      .placement = cli_placement_text(&sched, placement, sizeof placement),
                      /* the renderer reads P*V entries: an uneven table has fewer */
                      .stage_ranks = kt_schedule_even(&sched) ? sched.stage_rank : NULL,
                      .costs = &costs,
                      .closed_form = closed, .closed_form_expr = expr,
                      .messages = kt_schedule_messages(&sched)};
  kt_buf out;
  kt_buf_init(&out);
  if (!strcmp(format, "ascii")) {
    kt_gantt_opts go;
    kt_gantt_default_opts(&go);
    go.width = width ? (int)width : cli_term_width();
    go.color = cli_use_color(color) && !cli_get(a, "output");
    go.chunks = sched.v;
    kt_render_gantt_ascii(&tl, &go, &out);
    kt_buf_puts(&out, "\n");
    kt_render_metrics_text(&info, &met, tl.time_unit, &out);
  } else if (!strcmp(format, "json")) {
    kt_render_sim_json(&info, &met, &tl, &out);
  } else if (!strcmp(format, "csv") || !strcmp(format, "torch-csv")) {
    /* written in current notation unless --torch-notation legacy asks */
    kt_schedule_write_csv_notation(
        &sched, notation == KT_NOTATION_LEGACY ? KT_NOTATION_LEGACY : KT_NOTATION_CURRENT, &out);
  } else if (!strcmp(format, "torch-csv-comms")) {
    kt_schedule lowered;
    if ((st = kt_schedule_lower_ir(&sched, torch.ir, &lowered, &err))) {
      kt_buf_free(&out);
      kt_metrics_free(&met);
      kt_timeline_free(&tl);
      kt_schedule_free(&sched);
      kt_costs_free(&costs);
      return cli_fail(st, &err);
    }
    kt_schedule_write_csv_notation(
        &lowered, notation == KT_NOTATION_LEGACY ? KT_NOTATION_LEGACY : KT_NOTATION_CURRENT, &out);
    kt_schedule_free(&lowered);
  } else if (!strcmp(format, "text")) {
    kt_schedule_write_text(&sched, &out);
  } else {
    char title[96];
    snprintf(title, sizeof title, "kaiten sim %s P=%d V=%d M=%d", sched.name, sched.p, sched.v,
             sched.m);
    kt_render_chrome_trace(&tl, title, 1000.0, &out);
  }
  rc = cli_emit(cli_get(a, "output"), &out);
  const char *report = cli_get(a, "report");
  if (!rc && report) {
    char title[96];
    snprintf(title, sizeof title, "kaiten sim: %s, P=%d V=%d M=%d", sched.name, sched.p, sched.v,
             sched.m);
    kt_report_entry entry = {.info = info, .timeline = &tl, .metrics = &met};
    st = kt_write_html_report(report, title, &entry, 1, &costs, &err);
    if (st) rc = cli_fail(st, &err);
  }
  kt_buf_free(&out);
  kt_metrics_free(&met);
  kt_timeline_free(&tl);
  kt_schedule_free(&sched);
  kt_costs_free(&costs);
  return rc;
}

const cli_command cli_cmd_sim = {
    .name = "sim",
    .summary = "simulate a pipeline schedule and draw its timeline",
    .usage = "(--schedule NAME -p P -m M [-v V] | --schedule-file FILE) [costs] [--format FMT]",
    .details =
        "Schedules: gpipe, 1f1b, interleaved (interleaved-1f1b), looped-bfs, zb-h1, zb-h2,\n"
        "zbv, dualpipev, zb-auto, zbv-auto, interleaved-zb, v-half, v-min.\n"
        "zb-auto searches under --mem-limit with -v V chunks per rank in loop placement\n"
        "(default 1); zbv-auto does the same with 2 chunks in v placement.\n"
        "Costs are in any time unit; defaults T_F = T_B = T_W = 1,\n"
        "T_comm = 0, M_B = 1, M_W = 0. A full backward B costs tb + tw.\n"
        "Per-stage costs: --tf 2,1,1,1.5 (one value per stage) or --costs FILE.json.\n"
        "Overlapped F&B cells (DualPipeV) run one after the other by default, as PyTorch's\n"
        "runtime does; --overlap X credits X of the shorter op as hidden (1 = fully).\n"
        "--schedule-file reads a PyTorch CSV (current or legacy notation, with or without\n"
        "SEND/RECV) or a kaiten text file; what was inferred is printed on stderr.\n"
        "--format torch-csv writes PyTorch's compute-only CSV (current notation, or legacy\n"
        "with --torch-notation legacy); torch-csv-comms writes the lowered form torch 2.15's\n"
        "runtime loads: SEND_F/RECV_F/SEND_B/RECV_B in an order that cannot deadlock, one\n"
        "WAIT_SEND per send and REDUCE_GRAD/WAIT_REDUCE_GRAD per stage, placed as torch's\n"
        "lowering places them (--torch-version 2.14 or older: SEND/RECV only).\n"
        "\nexamples:\n"
        "  kaiten sim --schedule 1f1b -p 4 -m 8\n"
        "  kaiten sim --schedule zb-h2 -p 4 -m 8 --format json\n"
        "  kaiten sim --schedule interleaved -p 4 -v 2 -m 8 --format chrome -o trace.json\n"
        "  kaiten sim --schedule zb-h1 -p 4 -m 8 --report zb-h1.html\n"
        "  kaiten sim --schedule zb-auto -p 8 -m 32 -v 2 --mem-limit 0.5x --tw 0.5\n"
        "  kaiten sim --schedule v-half -p 8 -m 32 --tf 1 --tb 1.2 --tw 0.7\n"
        "  kaiten sim --schedule-file dualpipev_4rank_10mb.csv --tf 1 --tb 1 --tw 1\n"
        "  kaiten sim --schedule interleaved -p 4 -m 8 --format torch-csv-comms\n",
    .opts = sim_opts,
    .n_opts = sizeof sim_opts / sizeof *sim_opts,
    .run = run_sim,
};
