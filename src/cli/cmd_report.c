/* kaiten report: the HTML report of a training run directory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "kaiten/report.h"

static const cli_opt report_opts[] = {
    {"output", 'o', "FILE", "HTML file to write (default RUN_DIR/report.html; - = stdout)"},
    {"title", 0, "TEXT", "page title (default: kaiten run: <directory name>)"},
};

void cli_run_warnings(const kt_run *r) {
  for (size_t i = 0; i < r->n_warnings; i++)
    fprintf(stderr, "kaiten: warning: %s\n", r->warnings[i]);
  if (r->bad_lines > KT_RUN_LINES_DESCRIBED)
    fprintf(stderr, "kaiten: warning: %s/metrics.jsonl: %zu more bad lines skipped\n", r->dir,
            r->bad_lines - KT_RUN_LINES_DESCRIBED);
}

static int run_report(cli_args *a) {
  if (a->n_pos == 0)
    return cli_usage_error("report needs a run directory: kaiten report RUN_DIR [-o out.html]");
  if (a->n_pos > 1) return cli_usage_error("unexpected argument '%s'", a->pos[1]);
  const char *dir = a->pos[0];
  kt_error err = {{0}};
  kt_run run;
  double t_start = kt_now();
  kt_status st = kt_run_load(dir, &run, &err);
  if (st) return cli_fail(st, &err);
  cli_run_warnings(&run);
  char *dflt = NULL;
  const char *out = cli_get(a, "output");
  if (!out) {
    size_t n = strlen(dir) + sizeof "/report.html";
    if (!(dflt = malloc(n))) {
      kt_run_free(&run);
      return cli_fail(KT_ENOMEM, NULL);
    }
    snprintf(dflt, n, "%s/report.html", dir);
    out = dflt;
  }
  kt_buf b;
  kt_buf_init(&b);
  kt_render_run_report(&b, &run, cli_get(a, "title"));
  int rc = cli_emit(out, &b, 0);
  if (rc == 0 && strcmp(out, "-"))
    printf("report: %s (%.0f KB, %zu steps%s, %.2f s)\n", out, b.len / 1024.0, run.n_steps,
           run.has_timeline ? ", traced step" : "", kt_now() - t_start);
  kt_buf_free(&b);
  kt_run_free(&run);
  free(dflt);
  return rc;
}

const cli_command cli_cmd_report = {
    .name = "report",
    .summary = "HTML report of a training run directory (curves, traced step, stages)",
    .usage = "RUN_DIR [-o out.html] [--title TEXT]",
    .details = "RUN_DIR is a directory written by kaiten train --run-dir: config.json and\n"
               "metrics.jsonl are required, timeline.json and trace.json add the traced step.\n"
               "The report is one self-contained HTML file (no network), written atomically.\n\n"
               "example:\n  kaiten train --model mlp --stages 2 -m 4 --steps 50 --run-dir runs/a\n"
               "  kaiten report runs/a        # writes runs/a/report.html\n",
    .opts = report_opts,
    .n_opts = sizeof report_opts / sizeof *report_opts,
    .run = run_report,
};
