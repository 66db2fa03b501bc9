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
    {"v", 'v', "V", "chunks per rank (interleaved/looped-bfs default 2, zbv/dualpipev 2)"},
    CLI_COST_OPTS,
    {"slow-rank", 0, "R:F", "a fault to simulate: pipeline rank R's compute takes F times as long"},
    {"slow-link", 0, "A-B:+D", "a fault to simulate: messages between ranks A and B arrive D (costs' unit) later"},
    {"mem-limit", 0, "X", "zb-auto, zbv-auto, optimal: memory per rank, in --mem-act units or as a fraction of 1F1B's (0.5x); default 1F1B's"},
    CLI_THOROUGH_OPT,
    CLI_TIME_LIMIT_OPT,
    {"format", 'f', "FMT", "ascii (default) | json | csv | text | chrome | torch-csv | torch-csv-comms"},
    {"events", 0, NULL, "json: list every action's event even above " SIM_EVENTS_MAX_TEXT " actions"},
    {"output", 'o', "FILE", "write to FILE (atomically) instead of stdout"},
    {"report", 0, "FILE", "also write a self-contained HTML report (Gantt, memory) to FILE"},
    {"width", 0, "N", "chart width in columns (default: terminal width or 120)"},
    {"color", 0, "WHEN", "auto (default) | always | never"},
};

/* One sim run: its options, the schedule, and what came of it. */
typedef struct {
  cli_args *a;
  long p, m, v, width;
  cli_mem_limit ml;
  const char *format, *color, *from;
  cli_torch torch;
  kt_costs given, costs; /* as given; the stage costs of this schedule */
  kt_faults faults;      /* --slow-rank, --slow-link: in the stage costs */
  kt_schedule sched, program;
  int kind; /* the generator, or -1 for a file (and for optimal) */
  int optimal; /* the exact search made it */
  kt_optimal_result opt;
  double time_limit, limit; /* the search's time; the memory limit searched under (units; < 0: none) */
  kt_timeline tl;
  kt_metrics met;
  int have_tl, have_met;
  int tl_coarse; /* tl is a coarse timeline (a run above SIM_EVENTS_MAX) */
} sim_run;

static void sim_free(sim_run *r) {
  kt_costs_free(&r->given);
  kt_costs_free(&r->costs);
  kt_faults_free(&r->faults);
  kt_schedule_free(&r->sched);
  kt_schedule_free(&r->program);
  if (r->have_tl) kt_timeline_free(&r->tl);
  if (r->have_met) kt_metrics_free(&r->met);
}

static int parse_options(sim_run *r) {
  cli_args *a = r->a;
  if (cli_int(a, "p", 1, KT_MAX_RANKS, 4, &r->p) || cli_int(a, "m", 1, KT_MAX_MICROBATCHES, 8, &r->m) ||
      cli_int(a, "v", 1, KT_MAX_CHUNKS, 0, &r->v) || cli_int(a, "width", 40, 100000, 0, &r->width) ||
      cli_mem_limit_parse(a, 0, &r->ml) || cli_double(a, "time-limit", 1e-3, 1e6, 10, &r->time_limit))
    return 2;
  if (a->n_pos) return cli_usage_error("unexpected argument '%s' (see kaiten sim --help)", a->pos[0]);
  r->format = cli_get(a, "format") ? cli_get(a, "format") : "ascii";
  static const char *const formats[] = {"ascii", "json", "csv", "text", "chrome", "torch-csv",
                                        "torch-csv-comms"};
  int fmt_ok = 0;
  for (size_t i = 0; i < sizeof formats / sizeof *formats; i++) fmt_ok |= !strcmp(r->format, formats[i]);
  if (!fmt_ok)
    return cli_usage_error(
        "--format '%s': expected ascii, json, csv, text, chrome, torch-csv or torch-csv-comms", r->format);
  if (cli_torch_read(a, &r->torch)) return 2;
  r->color = cli_get(a, "color");
  if (r->color && strcmp(r->color, "auto") && strcmp(r->color, "always") && strcmp(r->color, "never"))
    return cli_usage_error("--color '%s': expected auto, always or never", r->color);
  r->from = cli_get(a, "schedule-file") ? cli_get(a, "schedule-file") : cli_get(a, "from");
  if (r->from && cli_has(a, "schedule"))
    return cli_usage_error("give either --schedule or --schedule-file, not both");
  kt_error err = {{0}};
  const char *rank = cli_get(a, "slow-rank"), *link = cli_get(a, "slow-link");
  if (rank && kt_faults_add_rank(&r->faults, rank, &err)) return cli_usage_error("%s", err.msg);
  if (link && kt_faults_add_link(&r->faults, link, 1, 0, &err))
    return cli_usage_error("%s", err.msg);
  return cli_read_costs(a, &r->given);
}

/* The stage costs under the faults (--slow-rank, --slow-link) as they are
 * once they began, for a layout of p ranks, v chunks in placement pl. */
static int apply_faults(sim_run *r, int p, int v, kt_placement pl, const kt_schedule *file) {
  if (!kt_faults_any(&r->faults)) return 0;
  int S = p * v, *stage_rank = kt_calloc((size_t)S, sizeof *stage_rank);
  kt_error err = {{0}};
  if (!stage_rank) return cli_fail(KT_ENOMEM, &err);
  for (int s = 0; s < S; s++)
    stage_rank[s] = file ? kt_stage_rank(file, s) : pl == KT_PLACEMENT_V && s >= p ? 2 * p - 1 - s : s % p;
  kt_status st = kt_faults_apply(&r->faults, 1 << 30, 0, p, stage_rank, S, &r->costs, &err);
  free(stage_rank);
  return st ? cli_usage_error("%s", err.msg) : 0;
}

/* The schedule "optimal": the exact search, V = 1 (loop) or 2 (v). */
static int build_optimal(sim_run *r) {
  int v = r->v > 0 ? (int)r->v : 1;
  int rc = cli_stage_costs(r->a, &r->given, v, &r->costs);
  if (!rc) rc = apply_faults(r, (int)r->p, v, v == 2 ? KT_PLACEMENT_V : KT_PLACEMENT_LOOP, NULL);
  if (rc) return rc;
  kt_gen_kind like = v == 2 ? KT_SCHED_ZBV_AUTO : KT_SCHED_ZB_AUTO;
  double limit = cli_mem_limit_units(&r->ml, like, (int)r->p, (int)r->m, v, &r->costs);
  kt_error err = {{0}};
  r->optimal = 1;
  if ((rc = cli_generate_optimal((int)r->p, (int)r->m, v, &r->costs, limit, r->time_limit,
                                 &r->sched, &r->opt, &err))) {
    fprintf(stderr, "kaiten: %s\n", err.msg);
    return rc;
  }
  kt_gen_params lp = {.p = (int)r->p, .v = v, .m = (int)r->m, .costs = &r->costs,
                           .mem_limit = limit};
  r->limit = kt_gen_mem_limit(&lp);
  return 0;
}

/* The schedule: a file's (its program too, when lowered), or generated
 * with the stage costs of its V. */
static int build_schedule(sim_run *r) {
  cli_args *a = r->a;
  r->kind = -1;
  if (r->from) {
    char info[CLI_INFO_LEN];
    cli_size_flag sizes[3] = {{"-p", cli_has(a, "p"), r->p}, {"-v", cli_has(a, "v"), r->v},
                              {"-m", cli_has(a, "m"), r->m}};
    int rc = cli_load_schedule_file(r->torch, r->from, sizes, &r->sched, &r->program, info, sizeof info);
    if (rc) return rc;
    fprintf(stderr, "kaiten: %s", info);
    rc = cli_stage_costs(a, &r->given, r->sched.v, &r->costs);
    return rc ? rc : apply_faults(r, r->sched.p, r->sched.v, r->sched.placement, &r->sched);
  }
  const char *name = cli_get(a, "schedule") ? cli_get(a, "schedule") : "1f1b";
  if (!strcmp(name, CLI_OPTIMAL)) return build_optimal(r);
  r->kind = kt_gen_kind_from_name(name);
  if (r->kind < 0)
    return cli_usage_error("unknown schedule '%s' (known: %s)", name, kt_gen_kind_list());
  kt_gen_kind k = (kt_gen_kind)r->kind;
  int v = r->v > 0 ? (int)r->v : kt_gen_default_chunks(k);
  int rc = cli_check_sim_size("sim", r->p, v, r->m);
  if (!rc) rc = cli_stage_costs(a, &r->given, v, &r->costs);
  if (!rc) rc = apply_faults(r, (int)r->p, v, kt_gen_kind_placement(k), NULL);
  if (rc) return rc;
  double limit = cli_mem_limit_units(&r->ml, k, (int)r->p, (int)r->m, (int)r->v, &r->costs);
  kt_error err = {{0}};
  if ((rc = cli_generate(a, k, (int)r->p, (int)r->m, (int)r->v, &r->costs, limit, &r->sched,
                         &err)))
    fprintf(stderr, "kaiten: %s\n", err.msg);
  if (!rc && (k == KT_SCHED_ZB_AUTO || k == KT_SCHED_ZBV_AUTO)) {
    kt_gen_params lp = {.p = r->sched.p, .v = r->sched.v, .m = r->sched.m, .costs = &r->costs,
                             .mem_limit = limit};
    r->limit = kt_gen_mem_limit(&lp);
  }
  return rc;
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
 * from a second, streamed simulation; r->met (already there) gives the span. */
static int simulate_coarse(sim_run *r, int bins, int dominant, kt_timeline *out) {
  const kt_schedule *s = r->program.ranks ? &r->program : &r->sched;
  double t0 = INFINITY, t1 = -INFINITY;
  for (int k = 0; k < r->met.p; k++)
    if (r->met.ranks[k].actions)
      t0 = fmin(t0, r->met.ranks[k].start), t1 = fmax(t1, r->met.ranks[k].end);
  kt_error err = {{0}};
  kt_timeline_coarse c;
  kt_status st = kt_coarse_init(&c, s->p, t0, t1, bins, dominant, &err);
  if (st) return cli_fail(st, &err);
  kt_sim_sink sink = {.ctx = &c, .event = kt_coarse_add_event, .mem = kt_coarse_add_mem};
  if ((st = kt_simulate_into(s, &r->costs, &sink, NULL, &err))) {
    kt_coarse_free(&c);
    return cli_fail(st, &err);
  }
  if ((st = kt_coarse_finish(&c, "unit", "unit", out, &err))) return cli_fail(st, &err);
  return 0;
}

static int simulate(sim_run *r) {
  kt_error err = {{0}};
  /* a lowered file runs as written: its communication actions in its order */
  const kt_schedule *s = r->program.ranks ? &r->program : &r->sched;
  size_t actions = kt_schedule_total_actions(s);
  kt_status st;
  if (needs_timeline(r, actions)) {
    st = kt_simulate_both(s, &r->costs, &r->tl, &r->met, &err);
    r->have_tl = r->have_met = !st;
    return st ? cli_fail(st, &err) : 0;
  }
  if ((st = kt_simulate_metrics(s, &r->costs, &r->met, &err))) return cli_fail(st, &err);
  r->have_met = 1;
  if (!strcmp(r->format, "json"))
    fprintf(stderr, "kaiten: %zu actions: the JSON leaves out the event list (--events keeps it)\n",
            actions);
  if (!cli_get(r->a, "report")) return 0;
  enum { REPORT_BINS = 1000 }; /* the HTML Gantt aggregates into bins of a few pixels */
  int rc = simulate_coarse(r, REPORT_BINS, 0, &r->tl);
  r->have_tl = r->tl_coarse = !rc;
  return rc;
}

/* The terminal chart: every action, or above SIM_EVENTS_MAX one bin per
 * column showing the op that used most of it. */
static int render_ascii(sim_run *r, const kt_sim_info *info, kt_buf *out) {
  kt_gantt_opts go;
  kt_gantt_default_opts(&go);
  go.width = r->width ? (int)r->width : cli_term_width();
  go.color = cli_use_color(r->color) && !cli_get(r->a, "output");
  go.chunks = r->sched.v;
  if (r->have_tl && !r->tl_coarse) {
    kt_render_gantt_ascii(&r->tl, &go, out);
  } else {
    kt_timeline coarse;
    int rc = simulate_coarse(r, kt_gantt_columns(&go, r->sched.p), 1, &coarse);
    if (rc) return rc;
    go.coarse = 1;
    kt_buf_printf(out, "%zu actions, drawn aggregated:\n", kt_schedule_total_actions(&r->sched));
    kt_render_gantt_ascii(&coarse, &go, out);
    kt_timeline_free(&coarse);
  }
  kt_buf_puts(out, "\n");
  kt_render_metrics_text(info, &r->met, "unit", out);
  kt_render_cost_basis_line(cli_cost_basis(r->a), r->sched.v, out);
  cli_memory_model_line(r->a, &r->costs, out);
  return 0;
}

/* What the schedule ran with, for every renderer (kt_sim_info_describe:
 * closed forms where exact, the lower bound, the search's figures). */
static kt_sim_info sim_info(const sim_run *r, char *placement, size_t n) {
  const kt_schedule *s = &r->sched;
  kt_sim_info info = {.schedule = s->name, .p = s->p, .v = s->v, .m = s->m,
                      .placement = kt_schedule_placement_text(s, placement, n),
                      /* the renderer reads P*V entries: an uneven table has fewer */
                      .stage_ranks = kt_schedule_even(s) ? s->stage_rank : NULL,
                      .costs = &r->costs, .cost_basis = cli_cost_basis(r->a),
                      .messages = kt_schedule_messages(s)};
  kt_sim_origin o = {.kind = r->optimal ? KT_SIM_OPTIMAL : r->kind, .mem_limit = r->limit,
                     .optimal = &r->opt, .time_limit = r->time_limit};
  kt_sim_info_describe(&info, &o, s, &r->costs, r->have_met ? &r->met : NULL);
  return info;
}

static int render(sim_run *r, const kt_sim_info *info, kt_buf *out) {
  const char *f = r->format;
  kt_notation written = r->torch.notation == KT_NOTATION_LEGACY ? KT_NOTATION_LEGACY : KT_NOTATION_CURRENT;
  if (!strcmp(f, "ascii")) {
    return render_ascii(r, info, out);  } else if (!strcmp(f, "json")) {
    kt_render_sim_json(info, &r->met, r->have_tl && !r->tl_coarse ? &r->tl : NULL, out);
  } else if (!strcmp(f, "csv") || !strcmp(f, "torch-csv")) {
    kt_schedule_write_csv_notation(&r->sched, written, out);
  } else if (!strcmp(f, "torch-csv-comms")) {
    kt_schedule lowered;
    kt_error err = {{0}};
    kt_status st = kt_schedule_lower_ir(&r->sched, r->torch.ir, &lowered, &err);
    if (st) return cli_fail(st, &err);
    kt_schedule_write_csv_notation(&lowered, written, out);
    kt_schedule_free(&lowered);
  } else if (!strcmp(f, "text")) {
    kt_schedule_write_text(&r->sched, out);
  } else {
    char title[96];
    snprintf(title, sizeof title, "kaiten sim %s P=%d V=%d M=%d", r->sched.name, r->sched.p,
             r->sched.v, r->sched.m);
    kt_render_chrome_trace(&r->tl, title, 1000.0, out);
  }
  return 0;
}

static int run_sim(cli_args *a) {
  sim_run r = {.a = a, .limit = -1};
  kt_costs_default(&r.costs);
  int rc = parse_options(&r);
  if (!rc) rc = build_schedule(&r);
  if (!rc) rc = simulate(&r);
  char placement[512];
  kt_sim_info info;
  kt_buf out;
  kt_buf_init(&out);
  if (!rc) {
    info = sim_info(&r, placement, sizeof placement);
    rc = render(&r, &info, &out);
  }
  if (!rc) rc = cli_emit(cli_get(a, "output"), &out, 0);
  const char *report = cli_get(a, "report");
  if (!rc && report) {
    char title[96];
    snprintf(title, sizeof title, "kaiten sim: %s, P=%d V=%d M=%d", r.sched.name, r.sched.p,
             r.sched.v, r.sched.m);
    kt_report_entry entry = {.info = info, .timeline = &r.tl, .metrics = &r.met};
    kt_error err = {{0}};
    kt_status st = kt_write_html_report(report, title, &entry, 1, &r.given, &err);
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
        "Every run prints a lower bound on the makespan of any order of its layout within\n"
        "its memory (--mem-limit, or the schedule's own peak) and its gap to it.\n"
        "zb-auto searches under --mem-limit with -v V chunks per rank in loop placement\n"
        "(default 1); zbv-auto does the same with 2 chunks in v placement.\n"
        "Costs are in any time unit; defaults T_F = T_B = T_W = 1,\n"
        "T_comm = 0, M_B = 1, M_W = 0. A full backward B costs tb + tw.\n"
        CLI_COST_BASIS_HELP
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
