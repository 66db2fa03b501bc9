/* Loading schedule files for the commands: notation, inference report,
 * validation of the compute and the lowered form. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

int cli_torch_read(const cli_args *a, cli_torch *out) {
  const char *n = cli_get(a, "torch-notation");
  out->notation = KT_NOTATION_AUTO;
  out->ir = KT_TORCH_IR_2_15;
  if (!n || !strcmp(n, "auto")) out->notation = KT_NOTATION_AUTO;
  else if (!strcmp(n, "current")) out->notation = KT_NOTATION_CURRENT;
  else if (!strcmp(n, "legacy")) out->notation = KT_NOTATION_LEGACY;
  else return cli_usage_error("--torch-notation '%s': expected auto, current or legacy", n);
  const char *v = cli_get(a, "torch-version");
  kt_error err;
  if (v && kt_torch_ir_from_version(v, &out->ir, &err))
    return cli_usage_error("--torch-version: %s", err.msg);
  return 0;
}

/* What the file's non-compute actions were, for the summary line. */
static void describe_comms(const kt_parse_opts *po, cli_torch torch, char *buf, size_t n) {
  buf[0] = 0;
  if (!po->comm_actions) return;
  if (po->p2p_actions)
    snprintf(buf, n,
             "; lowered (torch %s IR): %zu communication actions, run in the file's order",
             kt_torch_ir_name(torch.ir), po->comm_actions);
  else
    snprintf(buf, n,
             "; %zu REDUCE_GRAD/UNSHARD-style actions checked and set aside (kaiten reduces "
             "gradients itself and does not shard)",
             po->comm_actions);
}

int cli_load_schedule_file(cli_torch torch, const char *path, const cli_size_flag sizes[3],
                           kt_schedule *out, kt_schedule *program, char *info, size_t n) {
  kt_parse_opts po = {.notation = torch.notation};
  kt_schedule lowered = {0};
  po.lowered = &lowered;
  kt_error err = {{0}};
  kt_status st = kt_schedule_parse_file_opts(path, &po, out, &err);
  if (st) return cli_fail(st, &err);
  st = kt_schedule_validate(out, &err);
  if (!st && lowered.ranks) st = kt_lowered_validate_ir(&lowered, torch.ir, &err);
  if (program && !st && po.p2p_actions) *program = lowered; /* handed over */
  else kt_schedule_free(&lowered);
  if (program && (st || !po.p2p_actions)) memset(program, 0, sizeof *program);
  if (st) {
    fprintf(stderr, "kaiten: %s: invalid: %s\n", path, err.msg);
    kt_schedule_free(out);
    return kt_status_exit_code(st);
  }
  int file_size[3] = {out->p, out->v, out->m};
  for (int i = 0; sizes && i < 3; i++)
    if (sizes[i].given && sizes[i].value != file_size[i]) {
      int rc = cli_usage_error("%s disagrees with %s: the file has P=%d M=%d V=%d (you gave %ld); "
                               "leave it out",
                               sizes[i].flag, path, out->p, out->m, out->v, sizes[i].value);
      kt_schedule_free(out);
      return rc;
    }
  if (!out->name[0]) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    snprintf(out->name, sizeof out->name, "%.*s", (int)strcspn(base, "."), base);
  }
  if (info) {
    char pl[512], comms[200], vtext[64] = "";
    describe_comms(&po, torch, comms, sizeof comms);
    if (!kt_schedule_even(out)) snprintf(vtext, sizeof vtext, "up to %d per rank", out->v);
    else snprintf(vtext, sizeof vtext, "V=%d", out->v);
    snprintf(info, n,
             "%s: %d ranks, %d stages (%s), %d micro-batches; placement %s%s; notation %s (%s)%s\n",
             path, out->p, kt_schedule_stages(out), vtext, out->m,
             kt_schedule_placement_text(out, pl, sizeof pl), po.placement_inferred ? " (inferred)" : "",
             kt_notation_name(po.detected), po.detected_why, comms);
  }
  return 0;
}
