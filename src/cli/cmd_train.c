/* kaiten train: run a schedule for real on threads (or MPI ranks). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "kaiten/report.h"
#include "kaiten/train.h"

static const cli_opt train_opts[] = {
    {"model", 0, "NAME", "mlp (default) | gpt"},
    {"layers", 0, "L", "layers (MLP) or transformer blocks (GPT)"},
    {"hidden", 0, "H", "width (MLP) or channels (GPT)"},
    {"stages", 'p', "P", "pipeline ranks (default 4)"},
    {"chunks", 'v', "V", "chunks per rank (interleaved, looped-bfs, zbv, dualpipev)"},
    {"schedule", 's', "NAME", "pipeline schedule (default 1f1b)"},
    {"microbatches", 'm', "M", "micro-batches per round (default 8)"},
    {"micro-batch-size", 'b', "b", "samples per micro-batch (default 4)"},
    {"grad-accum", 0, "K", "rounds of M micro-batches per optimizer step (default 1)"},
    {"data-parallel", 'd', "D", "data-parallel replicas (default 1)"},
    {"steps", 'n', "N", "optimizer steps (default 20)"},
    {"seed", 0, "S", "seed for weights and data (default 1)"},
    {"partition", 0, "LIST", "layers per stage, e.g. 2,3,3 (default: balanced by cost)"},
    {"optimizer", 0, "NAME", "adamw (default) | sgd"},
    {"lr", 0, "X", "peak learning rate (default 1e-3 adamw, 0.05 sgd)"},
    {"momentum", 0, "X", "SGD momentum (default 0)"},
    {"weight-decay", 0, "X", "AdamW decoupled weight decay (default 0)"},
    {"grad-clip", 0, "X", "clip the global gradient norm to X (default off)"},
    {"warmup", 0, "N", "linear learning-rate warm-up steps (default 0)"},
    {"decay-steps", 0, "N", "cosine decay to 0.1 lr over N steps (default: --steps)"},
    {"val-every", 0, "N", "validation loss every N steps (default 10; 0 = never)"},
    {"mem-limit", 0, "X", "zb-auto: memory limit in activations per rank"},
    {"synthetic", 0, NULL, "synthetic workload: F/I/W sleep their cost, tensors still travel"},
    {"tf", 0, "MS", "synthetic forward cost in ms (default 2)"},
    {"tb", 0, "MS", "synthetic input-gradient cost in ms (default 2)"},
    {"tw", 0, "MS", "synthetic weight-gradient cost in ms (default 2)"},
    {"act-bytes", 0, "N", "synthetic boundary tensor bytes (default 65536)"},
    {"timeout", 0, "SEC", "watchdog: max seconds a rank waits for a peer (default 60)"},
    {"transport", 0, "NAME", "threads (default: one process) | mpi (one process per rank, mpirun)"},
    {"format", 'f', "FMT", "text (default) | ascii | json | chrome"},
    {"output", 'o', "FILE", "write the final report (json/chrome/ascii) to FILE"},
};

typedef struct {
  const char *format;
  FILE *progress;
} train_ui;

static int on_step(void *ctx, const kt_train_progress *p) {
  train_ui *ui = ctx;
  if (!ui || !ui->progress) return 0;
  fprintf(ui->progress, "step %4d/%d  loss %.6f", p->step + 1, p->steps, p->loss);
  if (!isnan(p->val_loss)) fprintf(ui->progress, "  val %.6f", p->val_loss);
  fprintf(ui->progress, "  lr %.3g  %8.1f samples/s  %6.1f ms  bubble %5.1f%%\n", p->lr,
          p->samples_per_s, 1e3 * p->seconds, 100 * p->bubble);
  fflush(ui->progress);
  return 0;
}

static void json_result(kt_buf *b, const kt_runtime_config *rc, const kt_train_result *r,
                        const char *model) {
  kt_buf_puts(b, "{\"schedule\":");
  kt_buf_json_string(b, rc->schedule->name);
  kt_buf_printf(b, ",\"model\":\"%s\",\"p\":%d,\"v\":%d,\"m\":%d,\"d\":%d,\"k\":%d,\"b\":%d,"
                   "\"losses\":[",
                model, rc->schedule->p, rc->schedule->v, rc->schedule->m, rc->data_parallel,
                rc->grad_accum, rc->micro_batch);
  for (int i = 0; i < r->n_losses; i++) {
    if (i) kt_buf_puts(b, ",");
    kt_buf_json_number(b, r->losses[i]);
  }
  kt_buf_puts(b, "],\"val_loss\":");
  kt_buf_json_number(b, r->last_val_loss);
  kt_buf_puts(b, ",\"bubble_ratio\":");
  kt_buf_json_number(b, r->measured.bubble_ratio);
  kt_buf_puts(b, ",\"predicted_bubble_ratio\":");
  kt_buf_json_number(b, r->predicted.bubble_ratio);
  kt_buf_puts(b, ",\"makespan\":");
  kt_buf_json_number(b, r->measured.makespan);
  kt_buf_puts(b, ",\"predicted_makespan\":");
  kt_buf_json_number(b, r->predicted.makespan);
  kt_buf_puts(b, ",\"step_seconds\":");
  kt_buf_json_number(b, r->mean_step_seconds);
  kt_buf_puts(b, ",\"samples_per_s\":");
  kt_buf_json_number(b, r->samples_per_s);
  kt_buf_puts(b, ",\"tokens_per_s\":");
  kt_buf_json_number(b, r->tokens_per_s);
  kt_buf_puts(b, ",\"ranks\":[");
  for (int i = 0; i < r->measured.p; i++) {
    const kt_rank_metrics *m = &r->measured.ranks[i];
    const kt_rank_metrics *q = &r->predicted.ranks[i];
    kt_buf_printf(b, "%s{\"rank\":%d,\"busy\":", i ? "," : "", i);
    kt_buf_json_number(b, m->busy);
    kt_buf_puts(b, ",\"idle\":");
    kt_buf_json_number(b, m->idle);
    kt_buf_printf(b, ",\"peak_inflight\":%d,\"predicted_peak_inflight\":%d,\"peak_memory\":",
                  m->peak_inflight, q->peak_inflight);
    kt_buf_json_number(b, m->peak_memory);
    kt_buf_printf(b, ",\"bytes_sent\":%lld,\"predicted_busy\":", (long long)m->bytes_sent);
    kt_buf_json_number(b, q->busy);
    kt_buf_puts(b, "}");
  }
  kt_buf_puts(b, "]}\n");
}

static void text_summary(kt_buf *b, const kt_train_result *r) {
  kt_buf_printf(b, "\nlast step, measured:  makespan %8.2f ms  bubble %5.1f%%\n",
                1e3 * r->measured.makespan, 100 * r->measured.bubble_ratio);
  kt_buf_printf(b, "predicted (simulator, costs calibrated from the step): makespan %8.2f ms  "
                   "bubble %5.1f%%\n",
                1e3 * r->predicted.makespan, 100 * r->predicted.bubble_ratio);
  kt_buf_printf(b, "%-5s %10s %10s %10s %10s %10s %12s\n", "rank", "busy ms", "idle ms",
                "pred busy", "in flight", "predicted", "peak act MiB");
  for (int i = 0; i < r->measured.p; i++) {
    const kt_rank_metrics *m = &r->measured.ranks[i], *q = &r->predicted.ranks[i];
    kt_buf_printf(b, "%-5d %10.2f %10.2f %10.2f %10d %10d %12.3f\n", i, 1e3 * m->busy,
                  1e3 * m->idle, 1e3 * q->busy, m->peak_inflight, q->peak_inflight,
                  m->peak_memory / 1048576.0);
  }
}

static int run_train(cli_args *a) {
  long p, v, m, b, k, d, steps, seed, layers, hidden, val_every, warmup, decay, act_bytes;
  double lr, momentum, wd, clip, tf, tb, tw, timeout, mem_limit;
  const char *model_name = cli_get(a, "model") ? cli_get(a, "model") : "mlp";
  int kind = kt_model_kind_from_name(model_name);
  if (kind < 0) return cli_usage_error("--model '%s': expected mlp or gpt", model_name);
  kt_model_config mc;
  kt_model_config_default(&mc, (kt_model_kind)kind);
  const char *opt_name = cli_get(a, "optimizer") ? cli_get(a, "optimizer") : "adamw";
  int okind = kt_optim_from_name(opt_name);
  if (okind < 0) return cli_usage_error("--optimizer '%s': expected sgd or adamw", opt_name);
  if (cli_int(a, "stages", 1, KT_MAX_RANKS, 4, &p) || cli_int(a, "chunks", 1, KT_MAX_CHUNKS, 0, &v) ||
      cli_int(a, "microbatches", 1, 65536, 8, &m) || cli_int(a, "micro-batch-size", 1, 65536, 4, &b) ||
      cli_int(a, "grad-accum", 1, 65535, 1, &k) || cli_int(a, "data-parallel", 1, 4096, 1, &d) ||
      cli_int(a, "steps", 0, 100000000, 20, &steps) || cli_int(a, "seed", 0, 2147483647L, 1, &seed) ||
      cli_int(a, "layers", 1, 4096, mc.layers, &layers) ||
      cli_int(a, "hidden", 1, 65536, mc.hidden, &hidden) ||
      cli_int(a, "val-every", 0, 100000000, 10, &val_every) ||
      cli_int(a, "warmup", 0, 100000000, 0, &warmup) ||
      cli_int(a, "decay-steps", 0, 100000000, 0, &decay) ||
      cli_int(a, "act-bytes", 1, 1L << 30, 65536, &act_bytes) ||
      cli_double(a, "lr", 0, 10, okind == KT_OPTIM_SGD ? 0.05 : 1e-3, &lr) ||
      cli_double(a, "momentum", 0, 1, 0, &momentum) ||
      cli_double(a, "weight-decay", 0, 10, 0, &wd) || cli_double(a, "grad-clip", 0, 1e30, 0, &clip) ||
      cli_double(a, "tf", 0, 1e6, 2, &tf) || cli_double(a, "tb", 0, 1e6, 2, &tb) ||
      cli_double(a, "tw", 0, 1e6, 2, &tw) || cli_double(a, "timeout", 0.01, 1e6, 60, &timeout) ||
      cli_double(a, "mem-limit", 0, 1e300, 0, &mem_limit))
    return 2;
  if (a->n_pos) return cli_usage_error("unexpected argument '%s' (see kaiten train --help)", a->pos[0]);
  const char *format = cli_get(a, "format") ? cli_get(a, "format") : "text";
  if (strcmp(format, "text") && strcmp(format, "ascii") && strcmp(format, "json") &&
      strcmp(format, "chrome"))
    return cli_usage_error("--format '%s': expected text, ascii, json or chrome", format);
  const char *sname = cli_get(a, "schedule") ? cli_get(a, "schedule") : "1f1b";
  int skind = kt_schedule_kind_from_name(sname);
  if (skind < 0) return cli_usage_error("unknown schedule '%s' (known: %s)", sname, kt_schedule_kind_list());
  int synthetic = cli_has(a, "synthetic");
  mc.layers = (int)layers;
  mc.hidden = (int)hidden;
  mc.seed = (uint64_t)seed;
  kt_error err = {{0}};
  if (!synthetic && kt_model_config_check(&mc, &err)) return cli_fail(KT_EINVAL, &err);

  kt_schedule sched;
  kt_costs unit;
  kt_costs_default(&unit);
  int rc = cli_generate((kt_schedule_kind)skind, (int)p, (int)m, (int)v, &unit, mem_limit, &sched, &err);
  if (rc) {
    fprintf(stderr, "kaiten: %s\n", err.msg);
    return rc;
  }
  int S = sched.p * sched.v;
  int *partition = NULL;
  if (cli_has(a, "partition")) {
    if (synthetic) {
      kt_schedule_free(&sched);
      return cli_usage_error("--partition has no meaning with --synthetic");
    }
    partition = kt_calloc((size_t)S, sizeof *partition);
    if (!partition || kt_partition_parse(cli_get(a, "partition"), S, kt_model_units(&mc), partition, &err)) {
      free(partition);
      kt_schedule_free(&sched);
      return cli_fail(KT_EINVAL, &err);
    }
  }
  kt_runtime_config rc_cfg;
  kt_runtime_config_default(&rc_cfg);
  rc_cfg.schedule = &sched;
  rc_cfg.data_parallel = (int)d;
  rc_cfg.grad_accum = (int)k;
  rc_cfg.micro_batch = (int)b;
  rc_cfg.model = mc;
  rc_cfg.partition = partition;
  rc_cfg.optim.kind = (kt_optim_kind)okind;
  rc_cfg.optim.lr = lr;
  rc_cfg.optim.momentum = momentum;
  rc_cfg.optim.weight_decay = wd;
  rc_cfg.optim.grad_clip = clip;
  rc_cfg.optim.warmup_steps = (int)warmup;
  rc_cfg.optim.decay_steps = (int)(cli_has(a, "decay-steps") ? decay : 0);
  rc_cfg.synthetic = synthetic;
  rc_cfg.syn_tf_ms = tf;
  rc_cfg.syn_tb_ms = tb;
  rc_cfg.syn_tw_ms = tw;
  rc_cfg.syn_act_bytes = (size_t)act_bytes;
  rc_cfg.timeout = timeout;

  const char *transport = cli_get(a, "transport") ? cli_get(a, "transport") : "threads";
  int use_mpi = !strcmp(transport, "mpi");
  if (!use_mpi && strcmp(transport, "threads")) {
    free(partition);
    kt_schedule_free(&sched);
    return cli_usage_error("--transport '%s': expected threads or mpi", transport);
  }
  kt_runtime *rt = NULL;
  kt_data_source *data = NULL;
  kt_transport *mpi_t = NULL;
  int world_rank = 0;
  kt_status st;
  if (use_mpi) {
    st = kt_transport_mpi_create(sched.p, (int)d, timeout, &mpi_t, &err);
    if (!st) {
      world_rank = mpi_t->rank;
      st = kt_runtime_create(&rc_cfg, mpi_t, &world_rank, 1, &rt, &err);
    }
  } else {
    st = kt_runtime_create_threads(&rc_cfg, &rt, &err);
  }
  if (!st && !synthetic) st = kt_data_mlp_create(mc.hidden, (uint64_t)seed, &data, &err);
  if (st) {
    free(partition);
    kt_runtime_destroy(rt);
    kt_transport_mpi_free(mpi_t);
    kt_schedule_free(&sched);
    rc = world_rank == 0 ? cli_fail(st, &err) : kt_status_exit_code(st);
    if (use_mpi) kt_transport_mpi_finalize();
    return rc;
  }
  FILE *talk = world_rank == 0 ? (!strcmp(format, "text") ? stdout : stderr) : NULL;
  train_ui ui = {.format = format, .progress = talk};
  const int *off = kt_runtime_unit_offsets(rt);
  if (talk) {
    fprintf(talk, "kaiten train: %s P=%d V=%d M=%d b=%ld K=%ld D=%ld (%s), global batch K*M*b*D = %ld samples, %s",
            sched.name, sched.p, sched.v, sched.m, b, k, d, use_mpi ? "mpi" : "threads",
            k * m * b * d, synthetic ? "synthetic workload" : kt_model_kind_name(mc.kind));
    if (!synthetic) {
      fprintf(talk, " L=%d H=%d, layers per stage:", mc.layers, mc.hidden);
      for (int s = 0; s < S; s++) fprintf(talk, "%s%d", s ? "," : " ", off[s + 1] - off[s]);
    }
    fprintf(talk, "\n");
  }
  kt_train_config tc = {.runtime = rc_cfg, .first_step = 0, .steps = (int)steps,
                        .val_every = (int)val_every, .val_batches = 1, .data = data,
                        .on_step = on_step, .ctx = &ui};
  kt_train_result res;
  st = kt_train_run(rt, &tc, &res, &err);
  if (st) {
    if (use_mpi) { /* name this rank, then take the whole job down */
      fprintf(stderr, "kaiten: rank %d (stage %d): %s\n", world_rank,
              kt_rank_chunk_stage(&sched, world_rank / (int)d, 0), err.msg);
      fflush(stderr);
      kt_transport_mpi_abort_job(1);
    }
    rc = cli_fail(st, &err);
  } else if (res.n_losses == 0 || world_rank != 0) {
    if (talk) fprintf(talk, "no steps run\n");
    if (res.n_losses) kt_train_result_free(&res);
    rc = 0;
  } else {
    kt_buf out;
    kt_buf_init(&out);
    if (!strcmp(format, "json")) {
      json_result(&out, &rc_cfg, &res, synthetic ? "synthetic" : kt_model_kind_name(mc.kind));
    } else if (!strcmp(format, "chrome")) {
      char title[96];
      snprintf(title, sizeof title, "kaiten train %s P=%d M=%d (measured)", sched.name, sched.p, sched.m);
      kt_render_chrome_trace(kt_runtime_timeline(rt), title, 1e6, &out);
    } else {
      if (!strcmp(format, "ascii")) {
        kt_gantt_opts go;
        kt_gantt_default_opts(&go);
        go.width = cli_term_width();
        go.chunks = sched.v;
        go.color = cli_use_color(NULL) && !cli_get(a, "output");
        kt_buf_puts(&out, "\nmeasured (last step):\n");
        kt_render_gantt_ascii(kt_runtime_timeline(rt), &go, &out);
        kt_buf_puts(&out, "\npredicted:\n");
        kt_render_gantt_ascii(&res.predicted_timeline, &go, &out);
      }
      text_summary(&out, &res);
    }
    rc = cli_emit(cli_get(a, "output"), &out);
    kt_buf_free(&out);
    kt_train_result_free(&res);
  }
  if (data) data->destroy(data);
  kt_runtime_destroy(rt);
  kt_transport_mpi_free(mpi_t);
  if (use_mpi) kt_transport_mpi_finalize();
  kt_schedule_free(&sched);
  free(partition);
  return rc;
}

const cli_command cli_cmd_train = {
    .name = "train",
    .summary = "train a model with pipeline parallelism (threads), measured vs predicted",
    .usage = "[--model mlp|gpt] [--layers L --hidden H] --stages P --schedule NAME "
             "--microbatches M --micro-batch-size b --steps N [--format text|ascii|json|chrome]",
    .details =
        "Each rank is a thread running its schedule's action list on real model chunks; the\n"
        "last step is measured and compared with the simulator's prediction from costs\n"
        "calibrated on that step. --synthetic replaces the model by sleeps of --tf/--tb/--tw\n"
        "ms per op with real --act-bytes tensors, so P larger than the core count runs true.\n"
        "\nexamples:\n"
        "  kaiten train --model mlp --layers 8 --hidden 64 --stages 4 --schedule 1f1b -m 8 -b 4\n"
        "  kaiten train --synthetic --stages 8 --schedule 1f1b -m 32 --tf 2 --tb 4 --tw 0 --steps 3\n",
    .opts = train_opts,
    .n_opts = sizeof train_opts / sizeof *train_opts,
    .run = run_train,
};
