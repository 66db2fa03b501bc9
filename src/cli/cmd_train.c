/* kaiten train: options and their parsing; the run itself is train_session.c. */
#include <stdlib.h>
#include <string.h>
#include "kaiten/generators.h"

#include "cli/train_cli.h"

static const cli_opt train_opts_table[] = {
    {"model", 0, "NAME", "gpt (default) | mlp"},
    {"layers", 0, "L",
     "transformer blocks (GPT, default 4), layers (MLP, default 8) or --synthetic units a partition moves"},
    {"hidden", 0, "C", "channels (GPT, default 64) or width (MLP, default 64)"},
    {"heads", 0, "H", "GPT attention heads (default 4)"},
    {"seq-len", 0, "T", "GPT sequence length (default 64)"},
    {"tie-embeddings", 0, NULL, "GPT: the LM head shares the token embedding"},
    {"recompute", 0, NULL, "keep only each stage's input; recompute the forward in backward"},
    {"gemm", 0, "NAME",
     "matmul library: auto (default: the fastest here on this model) | openblas | blis | onednn | kaiten (its own: AVX-512, or AVX2 + FMA)"},
    {"data", 0, "FILE", "GPT: train on this text file (default: the built-in corpus)"},
    {"seq-chunks", 0, "K",
     "with --doc-lengths: each micro-batch runs as K chunks along the sequence (Seq1F1B: 1f1b over the chunks, keys and values of earlier chunks kept), lowering peak activation memory"},
    {"stages", 'p', "P", "pipeline ranks (default 4)"},
    {"chunks", 'v', "V", "chunks per rank (interleaved, looped-bfs; zbv/dualpipev use 2)"},
    {"schedule", 's', "NAME", "pipeline schedule (default 1f1b)"},
    CLI_SCHEDULE_FILE_OPTS,
    {"microbatches", 'm', "M", "micro-batches per round (default 8)"},
    {"micro-batch-size", 'b', "b", "samples per micro-batch (default 4)"},
    {"grad-accum", 0, "K", "rounds of M micro-batches per optimizer step (default 1)"},
    {"data-parallel", 'd', "D", "data-parallel replicas (default 1)"},
    {"steps", 'n', "N", "optimizer steps in total (default 20; with --resume: run until N)"},
    {"seed", 0, "S", "seed for weights and data (default 1)"},
    {"partition", 0, "LIST", "layers per stage, e.g. 2,3,3 (default: balanced by cost)"},
    {"optimizer", 0, "NAME", "adamw (default) | sgd"},
    {"lr", 0, "X", "peak learning rate (default: adamw 3e-3 GPT, 1e-3 MLP; sgd 0.05)"},
    {"momentum", 0, "X", "SGD momentum (default 0)"},
    {"weight-decay", 0, "X", "AdamW decoupled weight decay (default 0)"},
    {"grad-clip", 0, "X", "clip the global gradient norm to X (default 1 for GPT, off for MLP)"},
    {"warmup", 0, "N",
     "linear learning-rate warm-up steps (default: 5% of --steps for GPT, 0 MLP)"},
    {"decay-steps", 0, "N",
     "cosine decay to 0.1 lr over N steps (default --steps; kept on resume)"},
    {"val-every", 0, "N", "validation loss every N steps (default 10; 0 = never)"},
    {"run-dir", 0, "DIR", "write config.json, metrics.jsonl, timelines and checkpoints to DIR"},
    {"checkpoint-every", 0, "K", "checkpoint every K steps (default: at the end only)"},
    {"keep-checkpoints", 0, "N",
     "keep the newest N checkpoints, remove older ones (default 3; 0 = all)"},
    {"resume", 0, "DIR", "continue the run in DIR from its latest complete checkpoint"},
    {"save-init", 0, "FILE", "write the weights training starts from to FILE (a checkpoint) first"},
    {"mem-limit", 0, "X",
     "zb-auto, zbv-auto: peak memory per rank: activations (12), a fraction of 1F1B's peak on this model (0.5x) or bytes (2GiB)"},
    {"synthetic", 0, NULL, "synthetic workload: F/I/W sleep their cost, tensors still travel"},
    {"tf", 0, "MS",
     "synthetic forward cost of one rank's share in ms (V chunks: MS/V each; default 2), or one per stage"},
    {"tb", 0, "MS", "synthetic input-gradient cost, on the same basis (default 2)"},
    {"tw", 0, "MS", "synthetic weight-gradient cost, on the same basis (default 2)"},
    {"act-bytes", 0, "N", "synthetic boundary tensor bytes (default 65536)"},
    {"grad-bytes", 0, "N", "synthetic gradient bytes per stage, all-reduced over D (default 0)"},
    CLI_TRAIN_PACKING_OPTS,
    {"slow-rank", 0, "R:F[@S]",
     "fault injection: pipeline rank R's compute takes F times as long (F in 1..1000), from step S"},
    {"slow-link", 0, "A-B:+D[@S]",
     "fault injection: messages between ranks A and B arrive D ms later (or 0.1s, 500us; below --timeout), from step S"},
    {"fault-trace", 0, "FILE[@S]",
     "fault injection: link delays over time, lines time_s;links;delays (PipeMorph's traces, seconds), from step S"},
    {"autopilot", 0, NULL,
     "re-plan between steps when a rank or link slows down: a new order or partition, when worth its switch"},
    {"inject-nan", 0, "S[:R]",
     "fault injection: a NaN in pipeline rank R's gradients (default 0) at step S (1-based)"},
    {"skip-nonfinite", 0, NULL,
     "skip a step whose loss or gradients are not finite (default: stop)"},
    CLI_STEP_SYNC_OPT,
    {"timeout", 0, "SEC", "watchdog: max seconds a rank waits for a peer (default 60)"},
    {"cluster", 0, "FILE",
     "cluster spec (kaiten calibrate): predict hops and the all-reduce on its links"},
    {"transport", 0, "NAME", "threads (default: one process) | mpi (one process per rank, mpirun)"},
    {"threads-per-rank", 0, "N",
     "compute threads per rank (default: cores / ranks in this process)"},
    {"no-pin", 0, NULL,
     "leave rank threads to the kernel (default: each on its own core when there are enough)"},
    {"format", 'f', "FMT", "text (default) | ascii | json | chrome"},
    {"output", 'o', "FILE", "write the final report (json/chrome/ascii) to FILE"},
    {"no-live", 0, NULL, "plain progress lines even on a terminal"},
    {"live", 0, NULL, "the live view even under mpirun (default: on terminals, not under mpirun)"},
    {"force", 0, NULL,
     "train into a --run-dir that holds an old run: kaiten's files there are removed"},
    {"serve", 0, "[HOST:]PORT",
     "live dashboard in the browser at http://HOST:PORT/ (HOST 127.0.0.1; PORT 0 = any free)"},
    {"addr", 0, "[HOST:]PORT", "the same as --serve (serve's spelling)"},
    {"port", 0, "PORT", "--serve PORT (on 127.0.0.1, or the HOST of --addr HOST)"},
    {"allow-host", 0, "NAME[,NAME]",
     "with --serve: Host names a request may give besides this machine's"},
};

/* The model a bare `kaiten train` builds. */
#define KT_DEFAULT_MODEL "gpt"

static const char *const shape_flags[] = {"layers", "hidden", "heads", "seq-len", "tie-embeddings"};

/* The numeric flags, before they go into the options. */
typedef struct {
  long p, v, m, b, k, d, steps, seed, layers, hidden, heads, seq, val, warm, decay, act, grad, ckpt,
      keep, blas;
  double lr, mom, wd, clip;
} train_numbers;

/* A synthetic cost: a number of ms, or a list of them (parse_stage_costs;
 * the first entry stands for the uniform value). */
static int syn_cost(const cli_args *a, const char *name, double *out) {
  const char *v = cli_get(a, name);
  if (v && strchr(v, ',')) return *out = 2, 0;
  return cli_double(a, name, 0, 1e6, 2, out);
}

static int parse_numbers(const cli_args *a, train_opts *o, int sgd, int gpt, train_numbers *n) {
  if (cli_int(a, "stages", 1, KT_MAX_RANKS, 4, &n->p) ||
      cli_int(a, "chunks", 1, KT_MAX_CHUNKS, 0, &n->v) ||
      cli_int(a, "microbatches", 1, 65536, 8, &n->m) ||
      cli_int(a, "micro-batch-size", 1, 65536, 4, &n->b) ||
      cli_int(a, "grad-accum", 1, 65535, 1, &n->k) ||
      cli_int(a, "data-parallel", 1, 4096, 1, &n->d) ||
      cli_int(a, "steps", 1, 100000000, 20, &n->steps) ||
      cli_int(a, "seed", 0, 2147483647L, 1, &n->seed) ||
      cli_int(a, "layers", 1, 4096, o->sp.model.layers, &n->layers) ||
      cli_int(a, "hidden", 1, 65536, o->sp.model.hidden, &n->hidden) ||
      cli_int(a, "heads", 1, 4096, o->sp.model.heads ? o->sp.model.heads : 1, &n->heads) ||
      cli_int(a, "seq-len", 1, 65536, o->sp.model.seq_len ? o->sp.model.seq_len : 1, &n->seq) ||
      cli_int(a, "val-every", 0, 100000000, 10, &n->val) ||
      cli_int(a, "warmup", 0, 100000000, -1, &n->warm) ||
      cli_int(a, "decay-steps", 1, 100000000, 1, &n->decay) ||
      cli_int(a, "act-bytes", 1, 1L << 30, 65536, &n->act) ||
      cli_int(a, "grad-bytes", 0, 1L << 30, 0, &n->grad) ||
      cli_int(a, "checkpoint-every", 1, 100000000, 1, &n->ckpt) ||
      cli_int(a, "keep-checkpoints", 0, 100000000, KT_SESSION_KEEP_CHECKPOINTS, &n->keep) ||
      cli_int(a, "threads-per-rank", 0, 1024, 0, &n->blas) ||
      cli_double(a, "lr", 0, 10,
                 sgd   ? 0.05
                 : gpt ? 3e-3
                       : 1e-3,
                 &n->lr) ||
      cli_double(a, "momentum", 0, 1, 0, &n->mom) ||
      cli_double(a, "weight-decay", 0, 10, 0, &n->wd) ||
      cli_double(a, "grad-clip", 0, 1e30, gpt ? 1.0 : 0.0, &n->clip) ||
      syn_cost(a, "tf", &o->sp.syn_tf_ms) || syn_cost(a, "tb", &o->sp.syn_tb_ms) ||
      syn_cost(a, "tw", &o->sp.syn_tw_ms) ||
      cli_double(a, "timeout", 0.01, 1e6, 60, &o->sp.timeout))
    return 2;
  const char *limit = cli_get(a, "mem-limit");
  kt_error err = {{0}};
  if (limit && kt_mem_limit_parse("--mem-limit", limit, 1, &o->sp.mem_limit, &err))
    return cli_usage_error("%s", err.msg);
  return 0;
}

/* The named choices: output format, schedule (or file), transport, the
 * dashboard address. */
static int parse_choices(const cli_args *a, train_opts *o) {
  o->format = cli_get(a, "format") ? cli_get(a, "format") : "text";
  if (strcmp(o->format, "text") && strcmp(o->format, "ascii") && strcmp(o->format, "json") &&
      strcmp(o->format, "chrome"))
    return cli_usage_error("--format '%s': expected text, ascii, json or chrome", o->format);
  o->schedule_file = cli_get(a, "schedule-file");
  if (o->schedule_file && cli_has(a, "schedule"))
    return cli_usage_error("give either --schedule or --schedule-file, not both");
  const char *sname = cli_get(a, "schedule") ? cli_get(a, "schedule") : "1f1b";
  int skind = kt_gen_kind_from_name(sname);
  if (skind < 0)
    return cli_usage_error("unknown schedule '%s' (known: %s)", sname, kt_gen_kind_list());
  o->sp.kind = (kt_gen_kind)skind;
  o->transport = cli_get(a, "transport") ? cli_get(a, "transport") : "threads";
  if (strcmp(o->transport, "threads") && strcmp(o->transport, "mpi"))
    return cli_usage_error("--transport '%s': expected threads or mpi", o->transport);
  o->sp.use_mpi = !strcmp(o->transport, "mpi");
  const char *flag;
  if (cli_serve_addr(a, o->serve_addr, sizeof o->serve_addr, &flag)) return 2;
  o->serve = o->serve_addr[0] ? o->serve_addr : NULL;
  if (o->serve) { /* a bad address is a usage error before anything runs */
    char host[64] = "127.0.0.1";
    int port;
    kt_error aerr = {{0}};
    if (kt_serve_parse_addr(o->serve, host, sizeof host, &port, &aerr))
      return cli_usage_error("%s %s", flag, aerr.msg);
    cli_serve_exposed(host, port);
  }
  cli_hosts hosts;
  o->allow_host = cli_get(a, "allow-host");
  if (cli_parse_hosts("allow-host", o->allow_host, &hosts)) return 2;
  return 0;
}

/* The layout, run and path flags as given. */
static void take_flags(const cli_args *a, train_opts *o, const train_numbers *n) {
  kt_session_params *sp = &o->sp;
  o->p_given = cli_has(a, "stages");
  o->v_given = cli_has(a, "chunks");
  o->m_given = cli_has(a, "microbatches");
  sp->p = (int)n->p, sp->v = (int)n->v, sp->m = (int)n->m, sp->micro_batch = (int)n->b;
  sp->grad_accum = (int)n->k, sp->data_parallel = (int)n->d;
  sp->steps = (int)n->steps;
  sp->data_seed = (uint64_t)n->seed;
  sp->val_every = (int)n->val;
  sp->val_batches = 2;
  sp->checkpoint_every = cli_has(a, "checkpoint-every") ? (int)n->ckpt : 0;
  sp->keep_checkpoints = (int)n->keep;
  sp->syn_act_bytes = (size_t)n->act;
  sp->syn_grad_bytes = (size_t)n->grad;
  sp->blas_threads = (int)n->blas;
  sp->pin_threads = !cli_has(a, "no-pin");
  sp->synthetic = cli_has(a, "synthetic");
  /* a synthetic model of --layers units: a partition can move them */
  sp->syn_units = sp->synthetic && cli_has(a, "layers") ? (int)n->layers : 0;
  sp->skip_nonfinite = cli_has(a, "skip-nonfinite");
  sp->partition = cli_get(a, "partition");
  sp->run_dir = cli_get(a, "run-dir");
  sp->resume = cli_get(a, "resume");
  sp->save_init = cli_get(a, "save-init");
  sp->data_path = cli_get(a, "data");
  sp->doc_lengths = cli_get(a, "doc-lengths");
  sp->packing = cli_get(a, "packing");
  sp->cluster = cli_get(a, "cluster");
  sp->force = cli_has(a, "force");
  o->output = cli_get(a, "output");
  o->live = !cli_has(a, "no-live");
  o->live_forced = cli_has(a, "live");
  static const char *const layout_flags[] = {"schedule",   "schedule-file", "stages",
                                             "chunks",     "microbatches",  "micro-batch-size",
                                             "grad-accum", "data-parallel", "partition"};
  for (size_t i = 0; i < sizeof layout_flags / sizeof *layout_flags; i++)
    if (cli_has(a, layout_flags[i])) o->layout_given |= 1u << i;
}

/* The model's shape and the optimizer's settings. */
static int set_model(const cli_args *a, train_opts *o, const train_numbers *n, int gpt) {
  kt_model_config *m = &o->sp.model;
  kt_optim_config *opt = &o->sp.optim;
  m->layers = (int)n->layers;
  m->hidden = (int)n->hidden;
  m->seed = (uint64_t)n->seed;
  if (gpt) {
    m->heads = (int)n->heads;
    m->seq_len = (int)n->seq;
    m->tie_embeddings = cli_has(a, "tie-embeddings");
  } else if (cli_has(a, "heads") || cli_has(a, "seq-len") || cli_has(a, "tie-embeddings") ||
             cli_has(a, "data") || (cli_has(a, "doc-lengths") && !cli_has(a, "synthetic"))) {
    return cli_usage_error(
        "--heads, --seq-len, --tie-embeddings, --data and --doc-lengths are GPT options (--model gpt)");
  }
  if (cli_has(a, "seq-chunks") && !cli_has(a, "doc-lengths"))
    return cli_usage_error("--seq-chunks splits documents: it needs --doc-lengths");
  if (cli_has(a, "seq-chunks") && cli_has(a, "synthetic"))
    return cli_usage_error("--seq-chunks splits the GPT's documents: not with --synthetic");
  if (cli_has(a, "seq-chunks") && cli_has(a, "recompute"))
    return cli_usage_error("--seq-chunks and --recompute do not go together");
  if (cli_has(a, "seq-chunks")) {
    long k;
    if (cli_int(a, "seq-chunks", 1, m->seq_len, 1, &k)) return 2;
    m->seq_chunks = (int)k;
  }
  const char *packing = cli_get(a, "packing");
  if (packing && strcmp(packing, "fifo") && strcmp(packing, "balanced"))
    return cli_usage_error("--packing '%s': expected fifo or balanced", packing);
  m->recompute = cli_has(a, "recompute");
  const char *gemm = cli_get(a, "gemm");
  if (gemm && kt_gemm_from_name(gemm) < 0)
    return cli_usage_error("--gemm '%s': expected auto, openblas, blis, onednn or kaiten", gemm);
  m->gemm = gemm ? (kt_gemm_kind)kt_gemm_from_name(gemm) : KT_GEMM_AUTO;
  for (size_t i = 0; i < sizeof shape_flags / sizeof *shape_flags; i++)
    if (cli_has(a, shape_flags[i])) o->model_flags_given |= 1 << i;
  if (cli_has(a, "model")) o->model_flags_given |= TRAIN_MODEL_GIVEN;
  opt->lr = n->lr;
  opt->momentum = n->mom;
  opt->weight_decay = n->wd;
  opt->grad_clip = n->clip;
  /* GPT default: warm up over the first 5% of the steps */
  opt->warmup_steps = n->warm >= 0 ? (int)n->warm : gpt ? (int)(o->sp.steps / 20) : 0;
  o->decay_given = cli_has(a, "decay-steps");
  opt->decay_steps = o->decay_given ? (int)n->decay : o->sp.steps;
  return 0;
}

/* Flags that contradict each other. */
static int check_conflicts(const cli_args *a, const train_opts *o) {
  const kt_session_params *sp = &o->sp;
  if (sp->synthetic && sp->partition)
    return cli_usage_error("--partition has no meaning with --synthetic");
  /* synthetic ops sleep: no matmuls, no compute threads */
  if (sp->synthetic && (cli_has(a, "gemm") || cli_has(a, "threads-per-rank")))
    return cli_usage_error("--%s has no meaning with --synthetic (its ops sleep: no matmuls)",
                           cli_has(a, "gemm") ? "gemm" : "threads-per-rank");
  if (sp->synthetic && o->sp.mem_limit.kind == KT_MEM_BYTES)
    return cli_usage_error("--mem-limit in bytes needs a model's activation sizes; --synthetic has "
                           "none (give activations per rank or a fraction such as 0.5x)");
  if (sp->resume && sp->run_dir && strcmp(sp->resume, sp->run_dir))
    return cli_usage_error("--resume continues in its own run directory; drop --run-dir");
  if (sp->force && !sp->run_dir) return cli_usage_error("--force clears a --run-dir; give one");
  if (sp->force && sp->resume)
    return cli_usage_error("--force starts over; --resume continues: give one");
  if (cli_has(a, "live") && cli_has(a, "no-live"))
    return cli_usage_error("give --live or --no-live, not both");
  return 0;
}

/* The faults' onsets within the run's steps, and each link delay below the
 * watchdog's --timeout (a message that late is a lost peer's, and a run
 * sleeping it could not be stopped). */
static int check_fault_reach(const cli_args *a, const train_opts *o) {
  const kt_faults *f = &o->faults;
  const char *rank = cli_get(a, "slow-rank"), *link = cli_get(a, "slow-link");
  const char *trace = cli_get(a, "fault-trace");
  int steps = o->sp.steps, check_steps = !o->sp.resume || cli_has(a, "steps");
  const char *past = "%s '%s': step %d is past the run's last step (--steps %d)";
  if (check_steps && f->n_rank && f->rank[0].onset >= steps)
    return cli_usage_error(past, "--slow-rank", rank, f->rank[0].onset + 1, steps);
  if (check_steps && f->n_link && f->link[0].onset >= steps)
    return cli_usage_error(past, "--slow-link", link, f->link[0].onset + 1, steps);
  if (check_steps && f->n_points && f->trace_onset >= steps)
    return cli_usage_error(past, "--fault-trace", trace, f->trace_onset + 1, steps);
  const char *late =
      "%s '%s': a delay of %g s is not below the watchdog's --timeout %g s (a peer that "
      "late is taken for lost)";
  if (f->n_link && f->link[0].delay >= o->sp.timeout)
    return cli_usage_error(late, "--slow-link", link, f->link[0].delay, o->sp.timeout);
  for (size_t i = 0; i < (size_t)f->n_points * (size_t)f->n_trace_links; i++)
    if (f->trace_delay[i] >= o->sp.timeout)
      return cli_usage_error(late, "--fault-trace", trace, f->trace_delay[i], o->sp.timeout);
  return 0;
}

/* --slow-rank R:F[@S], --slow-link A-B:+D[@S] (D in ms unless it says),
 * --fault-trace FILE[@S]. The ranks are checked against the pipeline once
 * it is known (a schedule file or a resumed run sets P): the runtime names
 * them. */
static int parse_faults(const cli_args *a, train_opts *o) {
  const char *rank = cli_get(a, "slow-rank"), *link = cli_get(a, "slow-link");
  const char *trace = cli_get(a, "fault-trace");
  kt_error err = {{0}};
  /* the command line keeps one value of a flag: a second fault would drop the first */
  static const char *const once[] = {"slow-rank", "slow-link", "fault-trace", "inject-nan"};
  for (int i = 0; i < a->n_opts; i++)
    for (size_t k = 0; k < sizeof once / sizeof *once; k++)
      if (a->given[i] > 1 && !strcmp(a->opts[i].name, once[k]))
        return cli_usage_error("--%s is given %d times: give it once", once[k], a->given[i]);
  if (rank && kt_faults_add_rank(&o->faults, rank, &err)) return cli_usage_error("--%s", err.msg);
  if (link && kt_faults_add_link(&o->faults, link, 1e-3, 1, &err))
    return cli_usage_error("--%s", err.msg);
  if (trace) {
    char path[4096];
    const char *at = strrchr(trace, '@');
    long s = 1;
    size_t n = at ? (size_t)(at - trace) : strlen(trace);
    if (n == 0 || n >= sizeof path || (at && kt_parse_int(at + 1, 1, 100000000, &s)))
      return cli_usage_error("--fault-trace '%s': expected FILE or FILE@S (a step, 1-based)",
                             trace);
    memcpy(path, trace, n);
    path[n] = 0;
    kt_status st = kt_faults_load_trace(&o->faults, path, (int)s - 1, &err);
    if (st) return cli_fail(st == KT_EIO ? KT_EINVAL : st, &err);
  }
  int rc = check_fault_reach(a, o);
  if (rc) return rc;
  if (kt_faults_any(&o->faults)) o->sp.faults = &o->faults;
  o->sp.autopilot = cli_has(a, "autopilot");
  return 0;
}

/* --tf/--tb/--tw lists with --synthetic: each stage's own costs (a number
 * for one of them is every stage's). */
static int parse_stage_costs(const cli_args *a, train_opts *o) {
  static const char *const names[3] = {"tf", "tb", "tw"};
  kt_costs c;
  kt_costs_default(&c);
  kt_error err = {{0}};
  int lists = 0, rc = 0;
  for (int k = 0; k < 3 && !rc; k++) {
    const char *v = cli_get(a, names[k]);
    if (!v || !strchr(v, ',')) continue;
    lists = 1;
    if (!o->sp.synthetic)
      rc = cli_usage_error("--%s %s: a list of stage costs is for --synthetic", names[k], v);
    else if (kt_costs_set(&c, names[k], v, &err)) rc = cli_usage_error("--%s", err.msg);
    else if (c.n_mb > 0) /* the stage summary would stand in for them unsaid */
      rc = cli_usage_error("--%s '%.40s': a cost per micro-batch is for sim and compare; a "
                           "synthetic run takes one per stage (or --doc-lengths)",
                           names[k], v);
  }
  int S = c.n_stages;
  if (!rc && lists && !(o->syn_stage_ms = kt_calloc(3 * (size_t)S, sizeof(double))))
    rc = cli_usage_error("out of memory");
  double uniform[3] = {o->sp.syn_tf_ms, o->sp.syn_tb_ms, o->sp.syn_tw_ms};
  const double *per[3] = {c.stage_tf, c.stage_tb, c.stage_tw};
  for (int st = 0; !rc && lists && st < S; st++)
    for (int k = 0; k < 3; k++) o->syn_stage_ms[3 * st + k] = per[k] ? per[k][st] : uniform[k];
  if (!rc && lists) o->sp.syn_stage_ms = o->syn_stage_ms, o->sp.syn_stages = S;
  kt_costs_free(&c);
  return rc;
}

/* --inject-nan S[:R] (a 1-based step, a pipeline rank). */
static int parse_inject_nan(const cli_args *a, train_opts *o) {
  const char *v = cli_get(a, "inject-nan");
  if (!v) return 0;
  char step[32];
  const char *colon = strchr(v, ':');
  size_t n = colon ? (size_t)(colon - v) : strlen(v);
  long st, r = 0;
  if (n == 0 || n >= sizeof step)
    return cli_usage_error("--inject-nan '%s': expected S or S:R, e.g. 5:1", v);
  memcpy(step, v, n);
  step[n] = 0;
  if (kt_parse_int(step, 1, 100000000, &st))
    return cli_usage_error("--inject-nan '%s': step '%s' is not a step number (1, 2, ...)", v,
                           step);
  if (colon && kt_parse_int(colon + 1, 0, KT_MAX_RANKS - 1, &r))
    return cli_usage_error("--inject-nan '%s': rank '%s' is not a pipeline rank (0, 1, ...)", v,
                           colon + 1);
  if (st > o->sp.steps && (!o->sp.resume || cli_has(a, "steps")))
    return cli_usage_error("--inject-nan '%s': step %ld is past the run's last step (--steps %d)",
                           v, st, o->sp.steps);
  o->sp.nan_step = (int)st - 1, o->sp.nan_rank = (int)r;
  return 0;
}

/* --schedule-file: its order (and lowered program), P, V and M from it. */
static int read_schedule_file(const cli_args *a, train_opts *o) {
  int rc = cli_order_read(a, o->schedule_file, &o->file);
  if (rc) return rc;
  o->have_file = 1;
  o->sp.schedule = &o->file.order;
  o->sp.program = o->file.program.ranks ? &o->file.program : NULL;
  o->sp.p = o->file.order.p, o->sp.v = o->file.order.v, o->sp.m = o->file.order.m;
  const char *rank = getenv("OMPI_COMM_WORLD_RANK"); /* one line per job, not per process */
  if (!rank || !strcmp(rank, "0")) fprintf(stderr, "kaiten: %s\n", o->file.read_info);
  return 0;
}

int train_parse(const cli_args *a, train_opts *o) {
  memset(o, 0, sizeof *o);
  o->sp = kt_session_default_params();
  const char *model_name = cli_get(a, "model") ? cli_get(a, "model") : KT_DEFAULT_MODEL;
  int kind = kt_model_kind_from_name(model_name);
  if (kind < 0) return cli_usage_error("--model '%s': expected gpt or mlp", model_name);
  kt_model_config_default(&o->sp.model, (kt_model_kind)kind);
  const char *opt_name = cli_get(a, "optimizer") ? cli_get(a, "optimizer") : "adamw";
  int okind = kt_optim_from_name(opt_name);
  if (okind < 0) return cli_usage_error("--optimizer '%s': expected sgd or adamw", opt_name);
  kt_optim_config_default(&o->sp.optim);
  o->sp.optim.kind = (kt_optim_kind)okind;
  int gpt = kind == KT_MODEL_GPT, rc;
  train_numbers n;
  if ((rc = parse_numbers(a, o, okind == KT_OPTIM_SGD, gpt, &n))) return rc;
  if (a->n_pos)
    return cli_usage_error("unexpected argument '%s' (see kaiten train --help)", a->pos[0]);
  if ((rc = parse_choices(a, o))) return rc;
  take_flags(a, o, &n);
  if ((rc = set_model(a, o, &n, gpt)) || (rc = check_conflicts(a, o)) ||
      (rc = parse_faults(a, o)) || (rc = parse_stage_costs(a, o)) ||
      (rc = parse_inject_nan(a, o)) || (rc = cli_step_sync(a, &o->sp.step_sync)))
    return rc;
  kt_error err = {{0}};
  if (!o->sp.synthetic && kt_model_config_check(&o->sp.model, &err))
    return cli_fail(KT_EINVAL, &err);
  if ((rc = train_synthetic_packing(a, o))) return rc;
  return o->schedule_file ? read_schedule_file(a, o) : 0;
}

static int run_train(cli_args *a) {
  train_opts o;
  int rc = train_parse(a, &o);
  if (!rc) rc = train_session(&o);
  kt_faults_free(&o.faults);
  free(o.syn_stage_ms);
  return rc;
}

const cli_command cli_cmd_train = {
    .name = "train",
    .summary = "train a model with pipeline parallelism (threads or MPI), measured vs predicted",
    .usage = "[--model gpt|mlp] [--layers L --hidden C] --stages P --schedule NAME "
             "--microbatches M --micro-batch-size b --steps N [--format text|ascii|json|chrome]",
    .details =
        "Each rank runs its schedule's action list on real model chunks (a thread, or an MPI\n"
        "process with --transport mpi under mpirun); the last step is measured and compared\n"
        "with the simulator's prediction from costs calibrated on that step. --synthetic\n"
        "replaces the model by sleeps of --tf/--tb/--tw ms per op with real --act-bytes\n"
        "tensors, so P larger than the core count runs with true timing.\n"
        "\nexamples:\n"
        "  kaiten train --stages 4 --schedule 1f1b --steps 200 --run-dir runs/demo\n"
        "  kaiten train --model mlp --layers 8 --hidden 64 --stages 4 --schedule zb-h1 -m 8\n"
        "  kaiten train --resume runs/demo --steps 400 --stages 2 --schedule zb-h1\n"
        "  kaiten train --synthetic --stages 8 --schedule 1f1b -m 32 --tf 2 --tb 4 --tw 0\n"
        "  kaiten train --synthetic --schedule zb-auto --layers 32 --slow-rank 2:1.5@10 --autopilot\n"
        "  mpirun -np 4 kaiten train --transport mpi --stages 2 --data-parallel 2\n",
    .opts = train_opts_table,
    .n_opts = sizeof train_opts_table / sizeof *train_opts_table,
    .run = run_train,
    .linear_algebra = 1,
};
