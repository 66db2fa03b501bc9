/* kaiten compare: every applicable schedule side by side under one cost model. */
#include <stdio.h>
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
    CLI_SEARCH_OPTS,
    CLI_PACKING_OPTS,
    {"format", 'f', "FMT", "table (default) | json"},
    {"output", 'o', "FILE", "write to FILE (atomically) instead of stdout"},
    {"report", 0, "FILE", "also write a self-contained HTML report (Gantts side by side) to FILE"},
};

static int run_compare(cli_args *a) {
  if (a->n_pos)
    return cli_usage_error("unexpected argument '%s' (see kaiten compare --help)", a->pos[0]);
  const char *format = cli_get(a, "format") ? cli_get(a, "format") : "table";
  if (strcmp(format, "table") && strcmp(format, "json"))
    return cli_usage_error("--format '%s': expected table or json", format);
  kt_request rq;
  int rc = cli_request_read(a, &rq);
  kt_comparison cmp = {0};
  if (!rc) {
    kt_error err = {{0}};
    kt_status st = kt_request_compare(
        &rq, cli_has(a, "report") ? KT_RESULT_TIMELINE : KT_RESULT_METRICS, &cmp, &err);
    if (st) rc = cli_fail(st, &err);
  }
  for (int i = 0; !rc && i < cmp.n; i++)
    if (cmp.rows[i].result.read_info[0])
      fprintf(stderr, "kaiten: %s\n", cmp.rows[i].result.read_info);
  if (!rc) {
    kt_buf out;
    kt_buf_init(&out);
    int json = !strcmp(format, "json");
    kt_render_comparison(&cmp, json, &out);
    if (!json) kt_render_memory_model_line(&rq.costs, &out);
    rc = cli_emit(cli_get(a, "output"), &out, 0);
    kt_buf_free(&out);
  }
  if (!rc && cli_has(a, "report")) {
    kt_error err = {{0}};
    kt_status st = kt_write_comparison_report(cli_get(a, "report"), NULL, &cmp, &err);
    if (st) rc = cli_fail(st, &err);
  }
  kt_comparison_free(&cmp);
  kt_request_free(&rq);
  return rc;
}

const cli_command cli_cmd_compare = {
    .name = "compare",
    .summary = "compare pipeline schedules side by side (bubble, makespan, memory, messages)",
    .usage =
        "-p P -m M [-v V] [--schedules a,b,c] [--schedule-file FILE] [costs] [--format table|json]",
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
