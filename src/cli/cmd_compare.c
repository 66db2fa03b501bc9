/* kaiten compare: every applicable schedule side by side under one cost model. */
#include <math.h>
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
    {"mem-limit", 0, "X", "zb-auto, zbv-auto, optimal: memory per rank, in --mem-act units or as a fraction of 1F1B's (0.5x)"},
    CLI_THOROUGH_OPT,
    CLI_TIME_LIMIT_OPT,
    {"format", 'f', "FMT", "table (default) | json"},
    {"output", 'o', "FILE", "write to FILE (atomically) instead of stdout"},
    {"report", 0, "FILE", "also write a self-contained HTML report (Gantts side by side) to FILE"},
};

/* One row: what it shows, and the timeline kept for --report. */
typedef struct {
  kt_compare_row r;
  char reason[KT_ERROR_LEN], placement[512], name[64];
  kt_costs costs; /* this schedule's stage costs */
  kt_optimal_result opt; /* the exact search's row */
  kt_gen_outcome outcome; /* what generating it proved */
  kt_gen_bound bound;     /* its lower bound */
  kt_timeline tl;
  kt_metrics met;
  kt_sim_info info;
  int kept;
} row;

/* The row of the exact search (not a kt_gen_kind: never among "all"). */
#define KIND_OPTIMAL KT_SIM_OPTIMAL

typedef struct {
  cli_args *a;
  long p, m, v;
  cli_mem_limit ml;
  double time_limit;
  int no_bound; /* 1F1B's peak only: no lower bound needed */
  const char *format;
  int kinds[KT_SCHED_COUNT + 1], nk, keep;
  kt_costs given;
  kt_schedule file_sched;
  const char *file;
  double peak_1f1b; /* 1F1B's peak memory on the same model (< 0: unknown) */
  row rows[KT_SCHED_COUNT + 2];
  int n;
} compare_run;

/* Simulates s (kind < 0: a schedule file) into the row; frees s. */
static void eval_schedule(compare_run *cr, row *rw, kt_schedule *s, int kind) {
  kt_error err = {{0}};
  kt_status st = kt_simulate(s, &rw->costs, &rw->tl, &err);
  if (!st && (st = kt_timeline_metrics(&rw->tl, &rw->met, &err))) kt_timeline_free(&rw->tl);
  if (!st && (st = kt_sim_period(s, &rw->costs, &rw->met, &err))) {
    kt_metrics_free(&rw->met);
    kt_timeline_free(&rw->tl);
  }
  if (st) {
    snprintf(rw->reason, sizeof rw->reason, "%s", err.msg);
    kt_schedule_free(s);
    return;
  }
  kt_sim_origin o = {.kind = kind, .mem_limit = -1, .optimal = &rw->opt,
                     .time_limit = cr->time_limit};
  if (kind == KT_SCHED_ZB_AUTO || kind == KT_SCHED_ZBV_AUTO || kind == KIND_OPTIMAL) {
    kt_gen_kind like = kind == KIND_OPTIMAL ? KT_SCHED_ZB_AUTO : (kt_gen_kind)kind;
    kt_gen_params lim = {.p = s->p, .m = s->m, .v = s->v, .costs = &rw->costs,
                              .mem_limit = cli_mem_limit_units(&cr->ml, like, s->p, s->m, s->v,
                                                               &rw->costs)};
    o.mem_limit = kt_gen_mem_limit(&lim);
  }
  if (!cr->no_bound) {
    kt_gen_bound_of(s, &rw->costs, o.mem_limit, rw->met.period, &rw->outcome, &rw->bound);
    o.bound = &rw->bound;
  }
  rw->info = (kt_sim_info){.schedule = rw->r.schedule, .p = s->p, .v = s->v, .m = s->m,
                           .placement = kt_schedule_placement_text(s, rw->placement,
                                                                   sizeof rw->placement),
                           .costs = &rw->costs, .cost_basis = cli_cost_basis(cr->a),
                           .messages = kt_schedule_messages(s)};
  kt_sim_info_describe(&rw->info, &o, s, &rw->costs, &rw->met);
  kt_compare_row_fill(&rw->r, &rw->info, &o, &rw->met, cr->peak_1f1b);
  rw->kept = cr->keep;
  if (!cr->keep) kt_metrics_free(&rw->met), kt_timeline_free(&rw->tl);
  kt_schedule_free(s);
}

/* The V a kind runs with here: -v for the loop-placement chunked kinds. */
static int kind_v(kt_gen_kind k, long v) {
  int defv = kt_gen_default_chunks(k);
  return defv > 1 && kt_gen_kind_placement(k) != KT_PLACEMENT_V ? (int)v : defv;
}

static void eval_row(compare_run *cr, row *rw, int kind) {
  kt_error err = {{0}};
  kt_schedule s;
  int optimal = kind == KIND_OPTIMAL;
  kt_gen_kind like = optimal ? KT_SCHED_ZB_AUTO : (kt_gen_kind)kind;
  rw->r.schedule = optimal ? CLI_OPTIMAL : kt_gen_kind_name(like);
  rw->r.reason = rw->reason;
  rw->r.proven = -1;
  int v = optimal ? 1 : kind_v(like, cr->v), p = (int)cr->p, m = (int)cr->m;
  if (kt_costs_for_chunks(&cr->given, cli_has(cr->a, "per-stage") ? 1 : v, &rw->costs, &err)) {
    snprintf(rw->reason, sizeof rw->reason, "%s", err.msg);
    return;
  }
  /* --mem-limit is for the rows that keep to one; the others keep their own order */
  double limit = optimal || !kt_gen_check_mem_limit(like, 1, NULL)
                     ? cli_mem_limit_units(&cr->ml, like, p, m, v, &rw->costs)
                     : 0;
  if (optimal ? cli_generate_optimal(p, m, v, &rw->costs, limit, cr->time_limit, &s, &rw->opt, &err)
              : cli_generate(cr->a, like, p, m, v, &rw->costs, limit, &s, &rw->outcome, &err)) {
    snprintf(rw->reason, sizeof rw->reason, "%s", err.msg);
    return;
  }
  eval_schedule(cr, rw, &s, kind);
}

/* 1F1B's peak memory at these P, M on the same model: the memory column's unit. */
static double peak_of_1f1b(compare_run *cr) {
  row one;
  memset(&one, 0, sizeof one);
  compare_run tmp = *cr;
  tmp.keep = 0, tmp.peak_1f1b = -1, tmp.no_bound = 1;
  eval_row(&tmp, &one, KT_SCHED_1F1B);
  kt_costs_free(&one.costs);
  return one.r.applies ? one.r.peak_mem : -1;
}

static int parse_schedules(compare_run *cr) {
  const char *list = cli_get(cr->a, "schedules");
  if (!list) {
    for (int k = 0; k < KT_SCHED_COUNT; k++) cr->kinds[cr->nk++] = k;
    return 0;
  }
  char *copy = strdup(list), *save = NULL;
  int rc = copy ? 0 : cli_usage_error("out of memory");
  for (char *tok = copy ? strtok_r(copy, ",", &save) : NULL; tok && !rc; tok = strtok_r(NULL, ",", &save)) {
    int k = !strcmp(tok, CLI_OPTIMAL) ? KIND_OPTIMAL : kt_gen_kind_from_name(tok);
    if (k < 0) rc = cli_usage_error("unknown schedule '%s' in --schedules (known: %s, optimal)", tok,
                                    kt_gen_kind_list());
    for (int i = 0; i < cr->nk && !rc; i++)
      if (cr->kinds[i] == k)
        rc = cli_usage_error("--schedules lists '%s' twice (%s is %s)", tok, tok,
                             k == KIND_OPTIMAL ? CLI_OPTIMAL : kt_gen_kind_name((kt_gen_kind)k));
    if (!rc && cr->nk <= KT_SCHED_COUNT) cr->kinds[cr->nk++] = k;
  }
  free(copy);
  if (!rc && cr->nk == 0) rc = cli_usage_error("--schedules is empty");
  return rc;
}

static int parse_compare(compare_run *cr) {
  cli_args *a = cr->a;
  if (cli_int(a, "p", 1, KT_MAX_RANKS, 4, &cr->p) || cli_int(a, "m", 1, KT_MAX_MICROBATCHES, 8, &cr->m) ||
      cli_int(a, "v", 2, KT_MAX_CHUNKS, 2, &cr->v) || cli_mem_limit_parse(a, 0, &cr->ml) ||
      cli_double(a, "time-limit", 1e-3, 1e6, 10, &cr->time_limit))
    return 2;
  if (a->n_pos) return cli_usage_error("unexpected argument '%s' (see kaiten compare --help)", a->pos[0]);
  cr->format = cli_get(a, "format") ? cli_get(a, "format") : "table";
  if (strcmp(cr->format, "table") && strcmp(cr->format, "json"))
    return cli_usage_error("--format '%s': expected table or json", cr->format);
  cr->keep = cli_has(a, "report");
  cr->file = cli_get(a, "schedule-file");
  if (cr->file) { /* the file is one more row; its P and M set the comparison's */
    cli_torch torch;
    if (cli_torch_read(a, &torch)) return 2;
    char info[CLI_INFO_LEN];
    /* -v is for the built-in rows; the file keeps its own */
    cli_size_flag sizes[3] = {{"-p", cli_has(a, "p"), cr->p}, {"-v", 0, 0}, {"-m", cli_has(a, "m"), cr->m}};
    int rc = cli_load_schedule_file(torch, cr->file, sizes, &cr->file_sched, NULL, info, sizeof info);
    if (rc) return rc;
    cr->p = cr->file_sched.p, cr->m = cr->file_sched.m;
    fprintf(stderr, "kaiten: %s", info);
  }
  int rc = parse_schedules(cr), limited = 0;
  for (int i = 0; i < cr->nk; i++)
    limited |= cr->kinds[i] == KIND_OPTIMAL || !kt_gen_check_mem_limit(cr->kinds[i], 1, NULL);
  if (!rc && cli_has(a, "mem-limit") && !limited)
    rc = cli_usage_error("--mem-limit %s: none of the schedules compared keeps to a memory limit "
                         "(zb-auto, zbv-auto and optimal do)", cli_get(a, "mem-limit"));
  /* each row's timeline, every row's kept for --report */
  if (!rc) rc = cli_check_sim_size("compare", cr->p, cr->v, cr->m,
                                   KT_SIM_BYTES_TIMELINE * (cr->keep ? cr->nk + 1 : 1));
  if (!rc) rc = cli_read_costs(a, &cr->given);
  return rc;
}

static int write_report(compare_run *cr) {
  kt_report_entry entries[KT_SCHED_COUNT + 2];
  for (int i = 0; i < cr->n; i++) {
    row *rw = &cr->rows[i];
    entries[i] = (kt_report_entry){.info = rw->info, .timeline = rw->r.applies ? &rw->tl : NULL,
                                   .metrics = rw->r.applies ? &rw->met : NULL, .reason = rw->reason};
    entries[i].info.schedule = rw->r.schedule;
    entries[i].info.cost_basis = cli_cost_basis(cr->a);
    entries[i].info.p = (int)cr->p, entries[i].info.m = (int)cr->m; /* also where it does not apply */
  }
  char title[96];
  snprintf(title, sizeof title, "kaiten compare: P=%ld M=%ld", cr->p, cr->m);
  kt_error err = {{0}};
  kt_status st = kt_write_html_report(cli_get(cr->a, "report"), title, entries, (size_t)cr->n,
                                      &cr->given, &err);
  return st ? cli_fail(st, &err) : 0;
}

static void compare_free(compare_run *cr) {
  for (int i = 0; i < cr->n; i++) {
    row *rw = &cr->rows[i];
    if (rw->kept && rw->r.applies) kt_metrics_free(&rw->met), kt_timeline_free(&rw->tl);
    kt_costs_free(&rw->costs);
  }
  kt_costs_free(&cr->given);
  kt_schedule_free(&cr->file_sched);
}

static int run_compare(cli_args *a) {
  compare_run *cr = kt_calloc(1, sizeof *cr);
  if (!cr) return cli_usage_error("out of memory");
  cr->a = a;
  kt_costs_default(&cr->given);
  int rc = parse_compare(cr);
  if (!rc) {
    cr->peak_1f1b = peak_of_1f1b(cr);
    for (int i = 0; i < cr->nk; i++) eval_row(cr, &cr->rows[cr->n++], cr->kinds[i]);
    if (cr->file) {
      row *rw = &cr->rows[cr->n++];
      snprintf(rw->name, sizeof rw->name, "%s", cr->file_sched.name);
      rw->r.schedule = rw->name;
      rw->r.reason = rw->reason;
      kt_error err;
      if (!kt_costs_for_chunks(&cr->given, cli_has(a, "per-stage") ? 1 : cr->file_sched.v, &rw->costs, &err)) {
        kt_schedule s = cr->file_sched;
        memset(&cr->file_sched, 0, sizeof cr->file_sched); /* handed over */
        eval_schedule(cr, rw, &s, -1);
      }
    }
    kt_compare_row list[KT_SCHED_COUNT + 2];
    for (int i = 0; i < cr->n; i++) list[i] = cr->rows[i].r;
    kt_compare_info info = {.p = (int)cr->p, .m = (int)cr->m, .v = (int)cr->v, .costs = &cr->given,
                            .cost_basis = cli_cost_basis(a)};
    kt_buf out;
    kt_buf_init(&out);
    if (!strcmp(cr->format, "json")) kt_render_compare_json(&info, list, (size_t)cr->n, &out);
    else kt_render_compare_table(&info, list, (size_t)cr->n, &out);
    if (strcmp(cr->format, "json")) cli_memory_model_line(a, &cr->given, &out);
    rc = cli_emit(cli_get(a, "output"), &out, 0);
    kt_buf_free(&out);
    if (!rc && cr->keep) rc = write_report(cr);
  }
  compare_free(cr);
  free(cr);
  return rc;
}

const cli_command cli_cmd_compare = {
    .name = "compare",
    .summary = "compare pipeline schedules side by side (bubble, makespan, memory, messages)",
    .usage = "-p P -m M [-v V] [--schedules a,b,c] [--schedule-file FILE] [costs] [--format table|json]",
    .details = CLI_COST_BASIS_HELP
               "--schedule-file adds the file's schedule as one more row (named after the file);\n"
               "P and M then come from the file.\n"
               "--schedules optimal adds the exact search's order (V = 1, within --time-limit).\n"
               "vs bound: each makespan over the lower bound on its layout within its memory.\n"
               "examples:\n  kaiten compare -p 8 -m 24 --tf 18.5 --tb 18.1 --tw 9.3 --comm 0.6\n"
               "  kaiten compare -p 4 -m 8 --report cmp.html\n"
               "  kaiten compare --schedule-file dualpipev_4rank_10mb.csv --schedules 1f1b,zbv\n",
    .opts = compare_opts,
    .n_opts = sizeof compare_opts / sizeof *compare_opts,
    .run = run_compare,
};
