/* train --synthetic --doc-lengths: the step's documents packed into its
 * micro-batches by the request module, as `kaiten sim` packs them with the
 * same flags, so the simulator's prediction and the synthetic run share one
 * packing and order. */
#include <stdlib.h>
#include <string.h>

#include "cli/train_cli.h"
#include "kaiten/request.h"

static const char *const packing_keys[] = {"doc-lengths", "packing", "mb-tokens", "attn-share"};

static int set(kt_request *rq, const char *key, const char *value) {
  kt_error err = {{0}};
  kt_status st = kt_request_set(rq, key, value, &err);
  return st ? cli_fail(st, &err) : 0;
}

/* The request sim would read for this run: its schedule, layout, the
 * synthetic costs (ms, one rank's share) and the packing flags. */
static int fill(const cli_args *a, const train_opts *o, kt_request *rq) {
  const kt_session_params *sp = &o->sp;
  char text[64];
  int rc = set(rq, "schedule", kt_gen_kind_name(sp->kind));
  snprintf(text, sizeof text, "%d", sp->p);
  if (!rc) rc = set(rq, "p", text);
  snprintf(text, sizeof text, "%d", sp->m);
  if (!rc) rc = set(rq, "m", text);
  snprintf(text, sizeof text, "%d", sp->v);
  if (!rc && sp->v > 0) rc = set(rq, "v", text);
  const double ms[] = {sp->syn_tf_ms, sp->syn_tb_ms, sp->syn_tw_ms};
  const char *const cost_keys[] = {"tf", "tb", "tw"};
  for (int i = 0; i < 3 && !rc; i++) {
    snprintf(text, sizeof text, "%.17g", ms[i]);
    rc = set(rq, cost_keys[i], text);
  }
  snprintf(text, sizeof text, "%llu", (unsigned long long)sp->data_seed);
  if (!rc) rc = set(rq, "seed", text);
  if (!rc && kt_mem_limit_given(&sp->mem_limit)) {
    kt_mem_limit_format(&sp->mem_limit, text, sizeof text);
    rc = set(rq, "mem-limit", text);
  }
  for (size_t i = 0; i < sizeof packing_keys / sizeof *packing_keys && !rc; i++)
    if (cli_get(a, packing_keys[i])) rc = set(rq, packing_keys[i], cli_get(a, packing_keys[i]));
  return rc;
}

/* --attn-share for the GPT: its token model's share for the whole run (no
 * calibration). */
static int gpt_attn_share(const char *text, train_opts *o) {
  double x;
  if (kt_parse_double(text, &x) || !(x >= 0 && x <= 1))
    return cli_usage_error("--attn-share '%s': expected a fraction in 0..1", text);
  o->sp.attn_share = x, o->sp.attn_from = 0;
  return 0;
}

int train_synthetic_packing(const cli_args *a, train_opts *o) {
  int any = 0;
  for (size_t i = 0; i < sizeof packing_keys / sizeof *packing_keys; i++)
    any |= cli_has(a, packing_keys[i]);
  if (!any) return 0;
  if (!cli_has(a, "doc-lengths"))
    return cli_usage_error("--packing, --mb-tokens and --attn-share need --doc-lengths");
  if (!o->sp.synthetic) { /* the GPT's data source packs its own documents */
    if (cli_has(a, "mb-tokens"))
      return cli_usage_error("--mb-tokens is for --synthetic runs: the GPT's "
                             "micro-batches hold --micro-batch-size x --seq-len tokens");
    return cli_has(a, "attn-share") ? gpt_attn_share(cli_get(a, "attn-share"), o) : 0;
  }
  if (o->schedule_file)
    return cli_usage_error(
        "--doc-lengths: documents are packed for a generated schedule, not --schedule-file");
  kt_request rq;
  kt_result res;
  kt_error err = {{0}};
  kt_request_init(&rq);
  int rc = fill(a, o, &rq);
  kt_status st = KT_OK;
  if (!rc && (st = kt_request_run(&rq, &res, KT_RESULT_ORDER, &err))) rc = cli_fail(st, &err);
  if (!rc) {
    o->syn_mb_scale = malloc(sizeof(double) * (size_t)res.pack.m);
    if (!o->syn_mb_scale) rc = cli_fail(KT_ENOMEM, &(kt_error){.msg = "out of memory"});
    for (int k = 0; !rc && k < res.pack.m; k++)
      o->syn_mb_scale[k] = kt_pack_load(&res.pack, &rq.tokens, k);
    o->sp.syn_mb_scale = o->syn_mb_scale;
    o->step_tokens = res.step_tokens;
    kt_result_free(&res);
  }
  kt_request_free(&rq);
  return rc;
}
