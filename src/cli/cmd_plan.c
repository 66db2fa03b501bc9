/* kaiten plan: search (P, D, t, V, M, b, K, schedule, recompute) for a model
 * on a cluster, or (--partition-only) cut the model into S balanced stages. */
#include <stdlib.h>
#include "kaiten/generators.h"
#include <string.h>

#include "cli/cli.h"
#include "kaiten/report.h"

static const cli_opt plan_opts[] = {
    {"model", 0, "PRESET|FILE", "model: a preset (see --list-presets) or a JSON model spec"},
    {"devices", 'n', "N", "devices in all (default: the cluster's, 8)"},
    {"mem-gb", 0, "G", "memory per device in GB = 1e9 bytes (default: the cluster's, 80)"},
    {"mem-reserved-gb", 0, "G",
     "GB of each device's memory the model never gets (default: the "
     "cluster's, else 2 GB (at most a tenth) + 5%: runtime, buffers, "
     "fragmentation)"},
    {"global-batch", 'B', "B", "samples per optimizer step (required unless --partition-only)"},
    {"seq-len", 's', "S", "sequence length (default: the model's)"},
    {"cluster", 0, "FILE", "JSON cluster spec (devices, memory, FLOP/s, bandwidths; see docs)"},
    {"pipeline", 'p', "P", "pin the pipeline ranks P"},
    {"data-parallel", 'd', "D", "pin the data-parallel replicas D"},
    {"tensor-parallel", 't', "T", "pin the tensor-parallel degree t"},
    {"chunks", 'v', "V", "pin the chunks per rank V (interleaved/looped-bfs; zbv needs 2)"},
    {"microbatches", 'm', "M", "pin the micro-batches per round M"},
    {"micro-batch-size", 'b', "B", "pin the samples per micro-batch b"},
    {"grad-accum", 'k', "K", "pin the accumulation rounds K (B = K*M*b*D)"},
    {"schedule", 0, "LIST", "schedules to consider, comma-separated (default: all)"},
    {"recompute", 0, "LIST", "none | selective | full, comma-separated (default: all three)"},
    {"nodes", 0, "LIST",
     "dp-inside (replicas share a node, the pipeline crosses) | pp-inside (a pipeline shares a node, the all-reduce crosses), comma-separated (default: both where the job spans nodes)"},
    {"zero", 0, "Z", "0 (default) | 1 shard optimizer state over D | 2 + gradients | 3 + weights"},
    {"bytes-per-param", 0, "W,G,O", "bytes per parameter: weights, gradients, optimizer (2,2,12)"},
    {"sequence-parallel", 0, "on|off", "sequence parallelism with t > 1 (default on)"},
    CLI_STEP_SYNC_OPT,
    {"tflops", 0, "X", "peak TFLOP/s per device (overrides the cluster's)"},
    {"efficiency", 0, "X", "achieved share of peak for matmuls, 0..1 (overrides the cluster's)"},
    {"devices-per-node", 0, "N", "devices per node (overrides the cluster's)"},
    {"max-bubble", 0, "X", "drop configurations whose bubble ratio exceeds X (0..1)"},
    {"max-microbatches", 0, "M", "largest M considered (default 1024)"},
    {"max-chunks", 0, "V", "largest V for interleaved and looped-bfs (default 4)"},
    {"top", 0, "N", "configurations to print (default 10; 0 = every one that fits)"},
    {"explain", 0, NULL, "breakdown of the best configuration (text; JSON always has it)"},
    {"partition-only", 0, NULL, "only cut the model into --stages S balanced stages"},
    {"stages", 0, "S", "with --partition-only: number of stages"},
    {"list-presets", 0, NULL, "list the model presets and exit"},
    {"format", 'f', "FMT", "text (default) | json"},
    {"output", 'o', "FILE", "write to FILE (atomically) instead of stdout"},
};

/* Parses a comma list of names into a bit mask. */
static int parse_mask(const char *flag, const char *list, int (*lookup)(const char *),
                      const char *known, unsigned *out) {
  *out = 0;
  char *copy = strdup(list), *save = NULL;
  if (!copy) return cli_usage_error("out of memory");
  for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    int k = lookup(tok);
    if (k < 0) {
      int rc = cli_usage_error("--%s: unknown value '%s' (known: %s)", flag, tok, known);
      free(copy);
      return rc;
    }
    *out |= 1u << k;
  }
  free(copy);
  if (!*out) return cli_usage_error("--%s '%s': empty list", flag, list);
  return 0;
}

static int lookup_recompute(const char *s) { return kt_recompute_from_name(s); }
static int lookup_nodes(const char *s) { return kt_node_layout_from_name(s); }

static int read_options(const cli_args *a, kt_plan_options *o) {
  kt_plan_options_default(o);
  long zero;
  if (cli_int(a, "zero", 0, 3, 0, &zero)) return 2;
  o->zero = (int)zero;
  const char *bpp = cli_get(a, "bytes-per-param");
  if (bpp) {
    double v[3];
    char extra;
    if (sscanf(bpp, "%lf,%lf,%lf%c", &v[0], &v[1], &v[2], &extra) != 3 || v[0] < 0 || v[1] < 0 ||
        v[2] < 0 || v[0] > 64 || v[1] > 64 || v[2] > 64)
      return cli_usage_error("--bytes-per-param '%s': expected three numbers W,G,O in 0..64 "
                             "(e.g. 2,2,12)",
                             bpp);
    o->weight_bytes = v[0], o->grad_bytes = v[1], o->optimizer_bytes = v[2];
  }
  const char *sp = cli_get(a, "sequence-parallel");
  if (sp && strcmp(sp, "on") && strcmp(sp, "off"))
    return cli_usage_error("--sequence-parallel '%s': expected on or off", sp);
  if (sp) o->sequence_parallel = !strcmp(sp, "on");
  if (cli_step_sync(a, &o->step_sync)) return 2;
  return 0;
}

static int read_cluster(const cli_args *a, kt_plan_cluster *c) {
  kt_plan_cluster_default(c);
  kt_error err = {{0}};
  const char *file = cli_get(a, "cluster");
  if (file && kt_plan_cluster_load(file, c, &err)) return cli_fail(KT_EINVAL, &err);
  long n, dpn;
  double gb, tflops, eff, reserved;
  if (cli_int(a, "devices", 1, (long)KT_MAX_RANKS * 64, c->devices, &n) ||
      cli_int(a, "devices-per-node", 1, 1 << 20, c->devices_per_node, &dpn) ||
      cli_double(a, "mem-gb", 1e-6, 1e9, c->mem_bytes / 1e9, &gb) ||
      cli_double(a, "tflops", 1e-9, 1e9, c->peak_flops / 1e12, &tflops) ||
      cli_double(a, "efficiency", 1e-6, 1, c->efficiency, &eff) ||
      cli_double(a, "mem-reserved-gb", 0, 1e9, c->mem_reserved / 1e9, &reserved))
    return 2;
  if (cli_has(a, "mem-reserved-gb")) c->mem_reserved = reserved * 1e9;
  c->devices = (int)n, c->devices_per_node = (int)dpn, c->mem_bytes = gb * 1e9;
  c->peak_flops = tflops * 1e12, c->efficiency = eff;
  if (cli_has(a, "tflops") || cli_has(a, "efficiency")) c->achieved_flops = 0;
  if (kt_plan_cluster_check(c, &err)) return cli_fail(KT_EINVAL, &err);
  return 0;
}

static int read_model(const cli_args *a, kt_plan_model *m) {
  kt_error err = {{0}};
  const char *name = cli_get(a, "model");
  if (!name)
    return cli_usage_error("--model is required (a preset: %s; or a JSON file)",
                           kt_plan_preset_list());
  if (kt_plan_model_load(name, m, &err)) return cli_fail(KT_EINVAL, &err);
  long s;
  if (cli_int(a, "seq-len", 1, 1 << 24, 0, &s)) {
    kt_plan_model_free(m);
    return 2;
  }
  if (s > 0 && kt_plan_model_set_seq_len(m, (int)s, &err)) {
    kt_plan_model_free(m);
    return cli_fail(KT_EINVAL, &err);
  }
  return 0;
}

static int read_search(const cli_args *a, kt_plan_search_params *sp) {
  kt_plan_search_params_default(sp);
  long B, v[7], top, maxm, maxv;
  static const char *const pins[] = {"pipeline",  "data-parallel", "tensor-parallel",
                                     "chunks",    "microbatches",  "micro-batch-size",
                                     "grad-accum"};
  for (int i = 0; i < 7; i++)
    if (cli_int(a, pins[i], 1, i == 4 ? KT_MAX_MICROBATCHES : 1L << 30, 0, &v[i])) return 2;
  if (!cli_has(a, "global-batch"))
    return cli_usage_error("--global-batch B is required (samples per optimizer step)");
  if (cli_int(a, "global-batch", 1, 1000000000000L, 0, &B) ||
      cli_int(a, "top", 0, 1000000, 10, &top) ||
      cli_int(a, "max-microbatches", 1, KT_MAX_MICROBATCHES, 1024, &maxm) ||
      cli_int(a, "max-chunks", 2, KT_MAX_CHUNKS, 4, &maxv) ||
      cli_double(a, "max-bubble", 0, 1, 0, &sp->max_bubble))
    return 2;
  sp->global_batch = B;
  sp->pin = (kt_plan_config){.p = (int)v[0],
                             .d = (int)v[1],
                             .t = (int)v[2],
                             .v = (int)v[3],
                             .m = (int)v[4],
                             .b = (int)v[5],
                             .k = (int)v[6]};
  if (v[3] > maxv) maxv = v[3];
  sp->top = (int)top, sp->max_microbatches = (int)maxm, sp->max_chunks = (int)maxv;
  sp->collapse = 1; /* one row per distinct layout */
  if (v[4] > maxm) sp->max_microbatches = (int)v[4];
  const char *list = cli_get(a, "schedule");
  if (list &&
      parse_mask("schedule", list, kt_gen_kind_from_name, kt_gen_kind_list(), &sp->schedules))
    return 2;
  list = cli_get(a, "recompute");
  if (list &&
      parse_mask("recompute", list, lookup_recompute, "none, selective, full", &sp->recomputes))
    return 2;
  list = cli_get(a, "nodes");
  if (list && parse_mask("nodes", list, lookup_nodes, "dp-inside, pp-inside", &sp->node_layouts))
    return 2;
  return 0;
}

static int run_partition_only(const cli_args *a, const kt_plan_model *m, const kt_plan_cluster *c,
                              const kt_plan_options *o, const char *format, kt_buf *out) {
  long S, t, b, mb, d;
  if (!cli_has(a, "stages")) return cli_usage_error("--partition-only needs --stages S");
  if (cli_int(a, "stages", 1, KT_MAX_RANKS * KT_MAX_CHUNKS, 0, &S) ||
      cli_int(a, "tensor-parallel", 1, 1 << 20, 1, &t) ||
      cli_int(a, "micro-batch-size", 1, 1 << 30, 1, &b) ||
      cli_int(a, "microbatches", 1, KT_MAX_MICROBATCHES, S, &mb) ||
      cli_int(a, "data-parallel", 1, 1 << 30, 1, &d))
    return 2;
  if (S > m->n_layers)
    return cli_usage_error("--stages %ld: the model has only %d layers (no stage may be empty)", S,
                           m->n_layers);
  kt_recompute r = KT_RECOMPUTE_NONE;
  const char *rname = cli_get(a, "recompute");
  if (rname && kt_recompute_from_name(rname) < 0)
    return cli_usage_error("--recompute '%s': expected none, selective or full", rname);
  if (rname) r = (kt_recompute)kt_recompute_from_name(rname);
  kt_plan_partition_view pv = {.stages = (int)S,
                               .t = (int)t,
                               .b = (int)b,
                               .m = (int)mb,
                               .d = (int)d,
                               .recompute = r,
                               .capped = cli_has(a, "mem-gb")};
  kt_error err = {{0}};
  kt_status st = kt_plan_partition_only(m, c, o, &pv, &err);
  if (st) return cli_fail(st == KT_ENOMEM ? st : KT_EINVAL, &err);
  kt_render_plan_partition(m, c, &pv, !strcmp(format, "json"), out);
  kt_plan_partition_view_free(&pv);
  return 0;
}

/* One line: why nothing fits (the smallest memory seen against the budget). */
static void nothing_fits(const kt_plan_cluster *c, const kt_plan_search_params *sp,
                         const kt_plan_report *rep, kt_error *err) {
  double budget = kt_plan_cluster_budget(c);
  if (rep->evaluated == 0 && rep->pruned_memory == 0 && rep->not_applicable > 0)
    kt_fail(err, KT_EINVAL, "no configuration applies: %s", rep->not_applicable_reason);
  else if (rep->over_bubble > 0 && rep->over_bubble + rep->no_fit >= rep->evaluated)
    kt_fail(err, KT_EINVAL, "no configuration fits with bubble <= %.1f%% (%zu fit but exceed it)",
            100 * sp->max_bubble, rep->over_bubble);
  else
    kt_fail(err, KT_EINVAL,
            "no configuration fits in %.1f GB per device: the smallest needs %.1f GB "
            "(try more devices, --zero 1..3, --recompute full or a smaller --micro-batch-size)",
            budget / 1e9, rep->min_memory / 1e9);
}

static int run_plan(cli_args *a) {
  if (a->n_pos)
    return cli_usage_error("unexpected argument '%s' (see kaiten plan --help)", a->pos[0]);
  kt_buf out;
  kt_buf_init(&out);
  if (cli_has(a, "list-presets")) {
    kt_render_plan_presets(&out);
    int rc = cli_emit(cli_get(a, "output"), &out, 0);
    kt_buf_free(&out);
    return rc;
  }
  const char *format = cli_get(a, "format") ? cli_get(a, "format") : "text";
  if (strcmp(format, "text") && strcmp(format, "json"))
    return cli_usage_error("--format '%s': expected text or json", format);
  kt_plan_options o;
  kt_plan_cluster c;
  kt_plan_model m;
  int rc = read_options(a, &o);
  if (!rc) rc = read_cluster(a, &c);
  if (rc) return rc;
  if ((rc = read_model(a, &m))) return rc;
  if (cli_has(a, "partition-only")) {
    rc = run_partition_only(a, &m, &c, &o, format, &out);
  } else {
    kt_plan_search_params sp;
    if ((rc = read_search(a, &sp))) goto done;
    kt_plan_report rep;
    kt_error err = {{0}};
    kt_status st = kt_plan_search(&m, &c, &o, &sp, &rep, &err);
    if (st) {
      rc = cli_fail(st, &err);
      goto done;
    }
    kt_render_plan(&m, &c, &o, &sp, &rep, !strcmp(format, "json"), cli_has(a, "explain"), &out);
    if (rep.n == 0) {
      nothing_fits(&c, &sp, &rep, &err);
      fprintf(stderr, "kaiten: %s\n", err.msg);
      rc = 1;
    }
    kt_plan_report_free(&rep);
  }
  if (!rc || rc == 1) {
    int erc = cli_emit(cli_get(a, "output"), &out, 0);
    if (!rc) rc = erc;
  }
done:
  kt_buf_free(&out);
  kt_plan_model_free(&m);
  return rc;
}

const cli_command cli_cmd_plan = {
    .name = "plan",
    .summary = "choose P, D, t, V, M, b, K, schedule and recompute for a model on a cluster",
    .usage = "--model PRESET|FILE --devices N --mem-gb G --global-batch B [--seq-len S]\n"
             "                   [--cluster FILE] [pins: --pipeline P --data-parallel D ...]\n"
             "                   [--explain] [--format text|json]\n"
             "       kaiten plan --partition-only --model PRESET|FILE --stages S [-t T -b B]",
    .details = "Every configuration uses all N devices (P*D*t = N) and the whole batch\n"
               "(B = K*M*b*D). Step time = K rounds of the simulated schedule (each round pays\n"
               "its own fill and drain) + the data-parallel gradient sync. Configurations over\n"
               "the memory budget (memory less --mem-reserved-gb) are dropped; the rest are\n"
               "ranked by step time, equal times by peak memory. Exit 0 with\n"
               "the ranking, 1 when nothing fits (reason on stderr), 2 on bad input.\n"
               "--partition-only prints the min-max cut of the layers into S stages and the\n"
               "argument for kaiten train --partition (with --mem-gb: under a per-stage memory\n"
               "cap assuming 1F1B in-flight counts). See docs/planner.md.\n\n"
               "examples:\n"
               "  kaiten plan --model llama-7b --devices 8 --mem-gb 80 --global-batch 1024\n"
               "  kaiten plan --model llama-7b --devices 8 --mem-gb 80 --global-batch 1024 \\\n"
               "      --seq-len 1024 -p 4 -d 2 -b 2 --schedule 1f1b --microbatches 16 --explain\n"
               "  kaiten plan --partition-only --model gpt2-124m --stages 4\n",
    .opts = plan_opts,
    .n_opts = sizeof plan_opts / sizeof *plan_opts,
    .run = run_plan,
};
