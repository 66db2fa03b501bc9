/* kaiten sample: generate text from a run directory's latest checkpoint. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "kaiten/generators.h"
#include "kaiten/checkpoint.h"
#include "kaiten/data.h"

static const cli_opt sample_opts[] = {
    {"run-dir", 0, "DIR", "run directory written by kaiten train --run-dir (required)"},
    {"prompt", 0, "TEXT", "text to continue (default: a newline)"},
    {"tokens", 'n', "N", "bytes to generate (default 200)"},
    {"temperature", 't', "X", "sampling temperature (default 0.8; 0 = greedy)"},
    {"top-k", 0, "K", "sample among the K most likely bytes (default 40; 0 = all)"},
    {"seed", 0, "S", "sampling seed (default 1)"},
};

static int run_sample(cli_args *a) {
  const char *dir = cli_get(a, "run-dir");
  if (!dir) return cli_usage_error("sample needs --run-dir DIR (see kaiten sample --help)");
  if (a->n_pos) return cli_usage_error("unexpected argument '%s'", a->pos[0]);
  long n, top_k, seed;
  double temp;
  if (cli_int(a, "tokens", 1, 1000000, 200, &n) || cli_int(a, "top-k", 0, 256, 40, &top_k) ||
      cli_int(a, "seed", 0, 2147483647L, 1, &seed) ||
      cli_double(a, "temperature", 0, 100, 0.8, &temp))
    return 2;
  kt_error err = {{0}};
  kt_checkpoint_found found;
  kt_status st = kt_checkpoint_find(dir, &found, &err);
  if (st) return cli_fail(st, &err);
  char *path = found.path; /* the newest intact one; what was passed over is said */
  kt_checkpoint_meta meta = found.meta;
  if (found.n_skipped)
    fprintf(stderr, "kaiten: warning: %s; sampling from %s (step %d)\n", found.skipped, path,
            meta.step);
  if (meta.model.kind != KT_MODEL_GPT) {
    free(path);
    return cli_usage_error("%s holds a %s model; sampling needs a gpt run", dir,
                           kt_model_kind_name(meta.model.kind));
  }
  /* one rank holding every unit, micro-batch 1 */
  kt_schedule s;
  kt_gen_params sp = {.p = 1, .m = 1};
  st = kt_generate(KT_SCHED_GPIPE, &sp, &s, &err);
  kt_runtime_config rc;
  kt_runtime_config_default(&rc);
  rc.schedule = &s;
  rc.model = meta.model;
  rc.optim.kind = meta.optim;
  kt_runtime *rt = NULL;
  if (!st) st = kt_runtime_create_threads(&rc, &rt, &err);
  if (!st) st = kt_checkpoint_load(rt, path, &meta, &err);
  const char *prompt = cli_get(a, "prompt") ? cli_get(a, "prompt") : "";
  size_t plen = strlen(prompt);
  int *ptok = malloc(sizeof(int) * (plen + 1)), *out = malloc(sizeof(int) * (size_t)n);
  char *text = malloc((size_t)n + 1);
  if (!st && (!ptok || !out || !text)) st = kt_fail(&err, KT_ENOMEM, "out of memory");
  if (!st) {
    kt_data_encode(prompt, plen, ptok);
    kt_chunk *c = kt_runtime_chunk(rt, 0, 0);
    kt_sample_params params = {
        .temperature = (float)temp, .top_k = (int)top_k, .seed = (uint64_t)seed};
    st = kt_gpt_sample(&c, 1, ptok, (int)plen, (int)n, &params, out, &err);
  }
  int rcode = 0;
  if (st) {
    rcode = cli_fail(st, &err);
  } else {
    kt_data_decode(out, (size_t)n, text);
    printf("%s%s\n", prompt, text);
  }
  free(ptok);
  free(out);
  free(text);
  kt_runtime_destroy(rt);
  kt_schedule_free(&s);
  free(path);
  return rcode;
}

const cli_command cli_cmd_sample = {
    .name = "sample",
    .summary = "generate text from a trained GPT run directory",
    .usage = "--run-dir DIR [--prompt TEXT] [--tokens N] [--temperature X] [--top-k K] [--seed S]",
    .details =
        "example:\n  kaiten sample --run-dir runs/demo --prompt \"The chef \" --tokens 300\n",
    .opts = sample_opts,
    .n_opts = sizeof sample_opts / sizeof *sample_opts,
    .run = run_sample,
    .linear_algebra = 1,
};
