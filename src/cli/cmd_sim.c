/* kaiten sim: generate (or load) a schedule, simulate it, render the result. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "kaiten/generators.h"
#include "kaiten/report.h"

/* Above this many actions the JSON leaves its event list out (unless
 * --events) and ascii draws an aggregated chart: a timeline costs about
 * 100 bytes per action, its JSON about 80. */
#define SIM_EVENTS_MAX 1000000
#define SIM_EVENTS_MAX_TEXT "1,000,000"
/* Above this many actions the ascii chart is drawn aggregated (one bin per
 * column), whatever the format asks of the rest. */
#define ASCII_EVENTS_MAX 100000

static const cli_opt sim_opts[] = {
    {"schedule", 's', "NAME", "schedule to generate (default 1f1b)"},
    CLI_SCHEDULE_FILE_OPTS,
    {"from", 0, "FILE", "the same as --schedule-file"},
    {"p", 'p', "P", "pipeline ranks (default 4)"},
    {"m", 'm', "M", "micro-batches per step (default 8)"},
    {"v", 'v', "V",
     "chunks per rank (0: the schedule's own: interleaved/looped-bfs 2, zbv/dualpipev 2)"},
    CLI_COST_OPTS,
    CLI_SEARCH_OPTS,
    CLI_PACKING_OPTS,
    {"placement", 0, "loop|v",
     "zb-auto in v placement is zbv-auto; optimal: v places 2 chunks per rank"},
    {"format", 'f', "FMT",
     "ascii (default) | json | csv | text | chrome | torch-csv | torch-csv-comms"},
    {"events", 0, NULL,
     "json: list every action's event even above " SIM_EVENTS_MAX_TEXT " actions"},
    {"output", 'o', "FILE", "write to FILE (atomically) instead of stdout"},
    {"report", 0, "FILE", "also write a self-contained HTML report (Gantt, memory) to FILE"},
    {"width", 0, "N", "chart width in columns (default: terminal width or 120)"},
    {"color", 0, "WHEN", "auto (default) | always | never"},
};

/* One sim run: its options, the request, and its result. */
typedef struct {
  cli_args *a;
  long width;
  const char *format, *color;
  kt_notation written; /* the notation torch-csv files are written in */
  kt_request rq;
  kt_result res;
  int built;
  kt_timeline coarse; /* a coarse timeline for --report above SIM_EVENTS_MAX actions */
  int have_coarse;
} sim_run;

static void sim_free(sim_run *r) {
  kt_request_free(&r->rq);
  if (r->built) kt_result_free(&r->res);
  if (r->have_coarse) kt_timeline_free(&r->coarse);
}

static void announce_search(const char *schedule, size_t actions, void *ctx) {
  (void)ctx;
  fprintf(stderr,
          "kaiten: %s: tuning its order to the costs over %zu actions (seconds per "
          "million)\n",
          schedule, actions);
}

static int parse_options(sim_run *r) {
  cli_args *a = r->a;
  if (cli_int(a, "width", 40, 100000, 0, &r->width)) return 2;
  if (a->n_pos)
    return cli_usage_error("unexpected argument '%s' (see kaiten sim --help)", a->pos[0]);
  r->format = cli_get(a, "format") ? cli_get(a, "format") : "ascii";
  static const char *const formats[] = {"ascii",     "json",           "csv", "text", "chrome",
                                        "torch-csv", "torch-csv-comms"};
  int fmt_ok = 0;
  for (size_t i = 0; i < sizeof formats / sizeof *formats; i++)
    fmt_ok |= !strcmp(r->format, formats[i]);
  if (!fmt_ok)
    return cli_usage_error(
        "--format '%s': expected ascii, json, csv, text, chrome, torch-csv or torch-csv-comms",
        r->format);
  r->color = cli_get(a, "color");
  if (r->color && strcmp(r->color, "auto") && strcmp(r->color, "always") &&
      strcmp(r->color, "never"))
    return cli_usage_error("--color '%s': expected auto, always or never", r->color);
  int rc = cli_request_read(a, &r->rq);
  r->rq.on_long_search = announce_search;
  r->written = r->rq.notation == KT_NOTATION_LEGACY ? KT_NOTATION_LEGACY : KT_NOTATION_CURRENT;
  return rc;
}

/* The order: generated, searched, or the file's (what reading it inferred
 * on stderr). */
static int build(sim_run *r) {
  kt_error err = {{0}};
  kt_status st = kt_request_build(&r->rq, &r->res, &err);
  if (st) return cli_fail(st, &err);
  r->built = 1;
  if ((st = kt_sim_check_fault_links(&r->rq.faults, &r->res.order, &err)))
    return cli_fail(st, &err);
  if (r->res.read_info[0]) fprintf(stderr, "kaiten: %s\n", r->res.read_info);
  return 0;
}

/* Whether this run's outputs need the timeline (every event), or only the
 * metrics: the metrics-only simulation stores nothing per action. Above
 * SIM_EVENTS_MAX actions, ascii and --report draw a coarse timeline. */
static int needs_timeline(const sim_run *r, size_t actions) {
  const char *f = r->format;
  if (!strcmp(f, "chrome")) return 1;
  if (actions > SIM_EVENTS_MAX && !cli_has(r->a, "events")) return 0;
  if (cli_get(r->a, "report") || !strcmp(f, "json")) return 1;
  /* the terminal chart of a large run aggregates anyway: drawn from bins
   * streamed out of the simulation, not from every event stored (at P=64,
   * M=1024 the stored timeline was half of a 50 ms call) */
  return !strcmp(f, "ascii") && actions <= ASCII_EVENTS_MAX;
}

/* A coarse timeline of the run in `bins` time bins per rank (kaiten/timeline.h),
 * from a second, streamed simulation; the metrics (already there) give the span. */
static int simulate_coarse(sim_run *r, int bins, int dominant, kt_timeline *out) {
  const kt_schedule *s = kt_result_runs(&r->res);
  const kt_metrics *met = &r->res.met;
  double t0 = INFINITY, t1 = -INFINITY;
  for (int k = 0; k < met->p; k++)
    if (met->ranks[k].actions) t0 = fmin(t0, met->ranks[k].start), t1 = fmax(t1, met->ranks[k].end);
  kt_error err = {{0}};
  kt_timeline_coarse c;
  kt_status st = kt_coarse_init(&c, s->p, t0, t1, bins, dominant, &err);
  if (st) return cli_fail(st, &err);
  kt_sim_sink sink = {.ctx = &c, .event = kt_coarse_add_event, .mem = kt_coarse_add_mem};
  if ((st = kt_simulate_into(s, &r->res.costs, &sink, NULL, &err))) {
    kt_coarse_free(&c);
    return cli_fail(st, &err);
  }
  if ((st = kt_coarse_finish(&c, "unit", "unit", out, &err))) return cli_fail(st, &err);
  return 0;
}

/* The simulation: every event when an output draws them, else the metrics
 * (and above SIM_EVENTS_MAX actions a coarse timeline for --report). */
static int simulate(sim_run *r) {
  kt_error err = {{0}};
  size_t actions = kt_schedule_total_actions(kt_result_runs(&r->res));
  int full = needs_timeline(r, actions);
  /* a Chrome trace's text on top of the timeline: the size guard of that path */
  kt_status st = strcmp(r->format, "chrome")
                     ? KT_OK
                     : kt_sim_memory_check((double)actions, KT_SIM_BYTES_CHROME, &err);
  if (st) return cli_fail(st, &err);
  st = kt_result_simulate(&r->res, full ? KT_RESULT_TIMELINE : KT_RESULT_METRICS, &err);
  if (st) return cli_fail(st, &err);
  if (full) return 0;
  if (!strcmp(r->format, "json"))
    fprintf(stderr, "kaiten: %zu actions: the JSON leaves out the event list (--events keeps it)\n",
            actions);
  if (!cli_get(r->a, "report")) return 0;
  enum { REPORT_BINS = 1000 }; /* the HTML Gantt aggregates into bins of a few pixels */
  int rc = simulate_coarse(r, REPORT_BINS, 0, &r->coarse);
  r->have_coarse = !rc;
  return rc;
}

/* The terminal chart: every action, or above SIM_EVENTS_MAX one bin per
 * column showing the op that used most of it. */
static int render_ascii(sim_run *r, kt_buf *out) {
  const kt_result *res = &r->res;
  kt_gantt_opts go;
  kt_gantt_default_opts(&go);
  go.width = r->width ? (int)r->width : cli_term_width();
  go.color = cli_use_color(r->color) && !cli_get(r->a, "output");
  go.chunks = res->order.v;
  if (res->has_timeline) {
    kt_render_gantt_ascii(&res->tl, &go, out);
  } else {
    kt_timeline coarse;
    int rc = simulate_coarse(r, kt_gantt_columns(&go, res->order.p), 1, &coarse);
    if (rc) return rc;
    go.coarse = 1;
    kt_buf_printf(out, "%zu actions, drawn aggregated:\n", kt_schedule_total_actions(&res->order));
    kt_render_gantt_ascii(&coarse, &go, out);
    kt_timeline_free(&coarse);
  }
  kt_buf_puts(out, "\n");
  kt_render_metrics_text(&res->info, &res->met, "unit", out);
  kt_render_cost_basis_line(res->cost_basis, res->order.v, out);
  kt_render_memory_model_line(&res->costs, out);
  return 0;
}

static int render(sim_run *r, kt_buf *out) {
  const char *f = r->format;
  const kt_result *res = &r->res;
  const kt_schedule *s = &res->order;
  if (!strcmp(f, "ascii")) return render_ascii(r, out);
  if (!strcmp(f, "json")) {
    kt_render_sim_json(&res->info, &res->met, res->has_timeline ? &res->tl : NULL, out);
  } else if (!strcmp(f, "csv") || !strcmp(f, "torch-csv")) {
    kt_schedule_write_csv_notation(s, r->written, out);
  } else if (!strcmp(f, "torch-csv-comms")) {
    kt_schedule lowered;
    kt_error err = {{0}};
    kt_status st = kt_schedule_lower_ir(s, r->rq.ir, &lowered, &err);
    if (st) return cli_fail(st, &err);
    kt_schedule_write_csv_notation(&lowered, r->written, out);
    kt_schedule_free(&lowered);
  } else if (!strcmp(f, "text")) {
    kt_schedule_write_text(s, out);
  } else {
    char title[96];
    snprintf(title, sizeof title, "kaiten sim %s P=%d V=%d M=%d", s->name, s->p, s->v, s->m);
    kt_render_chrome_trace(&res->tl, title, 1000.0, out);
  }
  return 0;
}

static int run_sim(cli_args *a) {
  sim_run r = {.a = a};
  int rc = parse_options(&r);
  if (!rc) rc = build(&r);
  if (!rc) rc = simulate(&r);
  kt_buf out;
  kt_buf_init(&out);
  if (!rc) rc = render(&r, &out);
  if (!rc) rc = cli_emit(cli_get(a, "output"), &out, 0);
  const char *report = cli_get(a, "report");
  if (!rc && report) {
    kt_error err = {{0}};
    kt_status st = kt_write_result_report(report, NULL, &r.res, r.have_coarse ? &r.coarse : NULL,
                                          &r.rq.costs, &err);
    if (st) rc = cli_fail(st, &err);
  }
  kt_buf_free(&out);
  sim_free(&r);
  return rc;
}

const cli_command cli_cmd_sim = {
    .name = "sim",
    .summary = "simulate a pipeline schedule and draw its timeline",
    .usage = "(--schedule NAME -p P -m M [-v V] | --schedule-file FILE) [costs] [--format FMT]",
    .details =
        "Schedules: gpipe, 1f1b, interleaved (interleaved-1f1b), looped-bfs, zb-h1, zb-h2,\n"
        "zbv, dualpipev, zb-auto, zbv-auto, interleaved-zb, v-half, v-min, and optimal:\n"
        "the fastest order, proven by an exact search within --time-limit (V = 1, or\n"
        "-v 2 in v placement). It proves small problems within a minute:\n"
        "  " KT_OPTIMAL_PROVES "\n"
        "past the limit it prints the best order found and its gap to the bound.\n"
        "With micro-batches of their own costs (--tf 'a0,a1;b0,b1', --doc-lengths) it\n"
        "proves the fastest order that keeps one micro-batch sequence on every stage,\n"
        "over every sequence (M <= 6) or the given one, and calls it proven only when\n"
        "it meets the lower bound on every order.\n"
        "Every run prints a lower bound on the makespan of any order of its layout within\n"
        "its memory (--mem-limit, or the schedule's own peak) and its gap to it.\n"
        "zb-auto searches under --mem-limit with -v V chunks per rank in loop placement\n"
        "(default 1); zbv-auto does the same with 2 chunks in v placement.\n"
        "Costs are in any time unit; defaults T_F = T_B = T_W = 1,\n"
        "T_comm = 0, M_B = 1, M_W = 0. A full backward B costs tb + tw.\n" CLI_COST_BASIS_HELP
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
