/* kaiten validate: check a schedule file for completeness, order and deadlock. */
#include "cli/cli.h"
#include "kaiten/timeline.h"

static const cli_opt validate_opts[] = {
    {"quiet", 'q', NULL, "print nothing on success"},
};

static int run_validate(cli_args *a) {
  if (a->n_pos != 1)
    return cli_usage_error("validate takes exactly one schedule file (got %d arguments)", a->n_pos);
  kt_error err = {{0}};
  kt_schedule s;
  kt_status st = kt_schedule_parse_file(a->pos[0], &s, &err);
  if (st) return cli_fail(st, &err);
  st = kt_schedule_validate(&s, &err);
  if (st) {
    fprintf(stderr, "kaiten: %s: invalid: %s\n", a->pos[0], err.msg);
    kt_schedule_free(&s);
    return kt_status_exit_code(st);
  }
  if (!cli_has(a, "quiet")) {
    kt_metrics m;
    if (kt_simulate_metrics(&s, NULL, &m, &err) == KT_OK) {
      printf("valid: %s  P=%d V=%d M=%d placement=%s, %zu actions; unit-cost makespan %g, "
             "bubble %.4f\n",
             a->pos[0], s.p, s.v, s.m, kt_placement_name(s.placement),
             kt_schedule_total_actions(&s), m.makespan, m.bubble_ratio);
      kt_metrics_free(&m);
    }
  }
  kt_schedule_free(&s);
  return 0;
}

const cli_command cli_cmd_validate = {
    .name = "validate",
    .summary = "check a schedule file: every pair computed once, right ranks, no deadlock",
    .usage = "FILE",
    .details =
        "FILE is a schedule in CSV form (PyTorch-compatible: one row per rank, one cell per\n"
        "slot, empty cell = idle, actions like 0F0 1I3 2W3 0B1) or text form (one line per\n"
        "rank, blank-separated actions, '-' = idle). Exit 0 when valid, 2 with the reason.\n",
    .opts = validate_opts,
    .n_opts = sizeof validate_opts / sizeof *validate_opts,
    .run = run_validate,
};
