/* kaiten validate: check a schedule file for completeness, order and deadlock. */
#include "cli/cli.h"
#include "kaiten/timeline.h"

static const cli_opt validate_opts[] = {
    {"quiet", 'q', NULL, "print nothing on success"},
    {"schedule-file", 0, "FILE", "the schedule file (the same as giving FILE)"},
    {"torch-notation", 0, "N",
     "how B/BW read: auto (default) | current (B full, I input) | legacy (B input, BW full)"},
    {"torch-version", 0, "V",
     "check a lowered file for this PyTorch release: 2.15 (default) or older, e.g. 2.9"},
};

static int run_validate(cli_args *a) {
  const char *file = cli_get(a, "schedule-file");
  if (a->n_pos + (file != NULL) != 1)
    return cli_usage_error("validate takes exactly one schedule file (got %d)",
                           a->n_pos + (file != NULL));
  if (!file) file = a->pos[0];
  kt_result res;
  int rc = cli_order_read(a, file, &res);
  if (rc) return rc;
  if (!cli_has(a, "quiet")) {
    printf("%s\n", res.read_info);
    kt_metrics m;
    kt_error err = {{0}};
    const kt_schedule *s = &res.order;
    if (kt_simulate_metrics(s, NULL, &m, &err) == KT_OK) {
      char pl[512];
      printf("valid: %s  P=%d V=%d M=%d placement=%s, %zu actions; unit-cost makespan %g, "
             "bubble %.4f\n",
             file, s->p, s->v, s->m, kt_schedule_placement_text(s, pl, sizeof pl),
             kt_schedule_total_actions(s), m.makespan, m.bubble_ratio);
      kt_metrics_free(&m);
    }
  }
  kt_result_free(&res);
  return 0;
}

const cli_command cli_cmd_validate = {
    .name = "validate",
    .summary = "check a schedule file: every pair computed once, right ranks, no deadlock",
    .usage =
        "FILE | --schedule-file FILE [--torch-notation auto|current|legacy] [--torch-version V]",
    .details =
        "FILE is a schedule in CSV form (PyTorch-compatible: one row per rank, one cell per\n"
        "slot, empty cell = idle, actions like 0F0 1I3 2W3 0B1, overlapped cells\n"
        "(0F7;7B3)OVERLAP_F_B) or text form (one line per rank, blank-separated actions,\n"
        "'-' = idle). P is the number of rows; stages, micro-batches and the stage -> rank\n"
        "placement (loop, v or explicit) are inferred and printed. Both of PyTorch's\n"
        "notations are read: current (B full backward, I input gradient) and legacy (B input\n"
        "gradient, BW full backward), detected from the file unless --torch-notation says.\n"
        "A lowered file (with SEND_F/RECV_F/SEND_B/RECV_B, WAIT_SEND_F/B) is also checked\n"
        "for matching sends and receives, in the same order per pair of ranks, one\n"
        "WAIT_SEND retiring each send (torch 2.15; --torch-version 2.14 or older lets\n"
        "them out), and for deadlock with non-blocking sends and blocking waits.\n"
        "REDUCE_GRAD/WAIT_REDUCE_GRAD and UNSHARD/RESHARD are checked for pairing.\n"
        "Ranks may hold different numbers of stages. Exit 0 when valid, 2 with the reason.\n",
    .opts = validate_opts,
    .n_opts = sizeof validate_opts / sizeof *validate_opts,
    .run = run_validate,
};
