/* kaiten calibrate: measure this machine for the planner — the achieved
 * FLOP/s of a model's training step on one core, sgemm's own rate on the same
 * shapes, and the point-to-point bandwidth and latency of the transport —
 * and write them as a cluster spec (kaiten plan --cluster FILE). The
 * library measures (kt_calibrate_compute, kt_calibrate_links_mpi); this
 * prints. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "kaiten/train.h"

static const cli_opt calibrate_opts[] = {
    {"model", 0, "NAME", "model whose training step is timed: gpt (default) | mlp"},
    {"layers", 0, "L", "its layers/blocks (default: kaiten train's)"},
    {"hidden", 0, "C", "its width (default: kaiten train's)"},
    {"micro-batch-size", 'b', "b", "samples per micro-batch timed (default 4)"},
    {"output", 'o', "FILE", "write the cluster spec JSON to FILE (default: stdout)"},
    {"transport", 0, "NAME",
     "threads (default) | mpi: under mpirun, measure the links inside and between machines"},
};

/* The links measured under mpirun, and the all-reduce against the model. */
static void report_links(const kt_link_calibration *l, double lat, double bw, double inter_lat,
                         double inter_bw, double inter_burst) {
  kt_link_classes lc = {.intra_latency = lat,
                        .intra_bw = bw,
                        .inter_latency = inter_lat,
                        .inter_bw = inter_bw,
                        .inter_burst = inter_burst};
  kt_links *model = NULL;
  kt_error err;
  double predicted = 0;
  if (!kt_links_create(&lc, 1, l->devices, l->node_of, 1, &model, &err))
    predicted = kt_links_allreduce(model, 0, l->allreduce_bytes, 0);
  kt_links_destroy(model);
  fprintf(stderr,
          "kaiten calibrate: %d ranks on %d machines (up to %d on one); inside a machine "
          "%.1f us, %.3f GB/s%s; between machines %.1f us, %.4f GB/s%s, burst %.1f KiB; "
          "all-reduce of %.0f KiB over all ranks: measured %.2f ms, the links model %.2f ms\n",
          l->devices, l->nodes, l->devices_per_node, 1e6 * lat, bw / 1e9,
          l->intra_latency < 0 ? " (threads: one rank per machine)" : "", 1e6 * inter_lat,
          inter_bw / 1e9, l->inter_latency < 0 ? " (one machine: as inside)" : "",
          inter_burst / 1024, l->allreduce_bytes / 1024, 1e3 * l->allreduce_seconds,
          1e3 * predicted);
}

/* The cluster spec: this machine (threads) or the job's machines (mpi). */
static int emit_spec(const cli_args *a, const kt_link_calibration *links, int mpi, double lat,
                     double bw, double effective) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  double mem = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
  long devices = cores, per_node = cores;
  double inter_lat = lat, inter_bw = bw, inter_burst = 0;
  if (mpi) {
    devices = links->devices, per_node = links->devices_per_node;
    if (links->intra_latency >= 0) lat = links->intra_latency, bw = links->intra_bw;
    if (links->inter_latency >= 0) {
      inter_lat = links->inter_latency, inter_bw = links->inter_bw;
      inter_burst = links->inter_burst;
    } else {
      inter_lat = lat, inter_bw = bw;
    }
    mem /= (double)per_node / (double)cores; /* the machine's memory over its ranks */
    report_links(links, lat, bw, inter_lat, inter_bw, inter_burst);
  }
  kt_buf out;
  kt_buf_init(&out);
  kt_buf_printf(&out,
                "{\"devices\": %ld, \"devices_per_node\": %ld, \"mem_gb\": %.3f, "
                "\"achieved_tflops\": %.6g, \"intra_bw_gbs\": %.6g, \"intra_latency_us\": %.6g, "
                "\"inter_bw_gbs\": %.6g, \"inter_latency_us\": %.6g, "
                "\"inter_burst_kib\": %.6g}\n",
                devices, per_node, mem / 1e9 / (double)cores, effective / 1e12, bw / 1e9, 1e6 * lat,
                inter_bw / 1e9, 1e6 * inter_lat, inter_burst / 1024);
  int rcode = cli_emit(cli_get(a, "output"), &out, 1);
  kt_buf_free(&out);
  return rcode;
}

/* Under mpirun: the links, collectively (MPI finalized on failure). */
static int measure_links(size_t boundary, kt_link_calibration *links) {
  kt_error err = {{0}};
  int rank, world;
  kt_status st = kt_transport_mpi_init(&rank, &world, &err);
  if (!st && world < 2)
    st = kt_fail(&err, KT_EINVAL,
                 "--transport mpi: run under mpirun with at least 2 processes (got %d)", world);
  if (!st) st = kt_calibrate_links_mpi(boundary, links, &err);
  if (!st) return 0;
  kt_transport_mpi_finalize();
  return cli_fail(st, &err);
}

/* One line: the step, its FLOP/s against sgemm's, the transport, the machine. */
static void report_compute(const kt_model_config *mc, long b, const kt_calibration *c) {
  double effective = c->flops / c->step_seconds;
  double sgemm_rate = c->sgemm_seconds > 0 ? c->flops / c->sgemm_seconds : 0;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  double mem = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
  fprintf(stderr,
          "kaiten calibrate: %s L=%d C=%d, b=%ld, one core: step %.1f ms, %.2f GFLOP/s effective "
          "(sgemm alone on the same shapes %.2f GFLOP/s, %.0f%%); transport latency %.1f us, "
          "%.2f GB/s for %zu-byte tensors; %ld cores, %.1f GB\n",
          kt_model_kind_name(mc->kind), mc->layers, mc->hidden, b, 1e3 * c->step_seconds,
          effective / 1e9, sgemm_rate / 1e9, 100 * effective / sgemm_rate, 1e6 * c->latency,
          c->bandwidth / 1e9, c->boundary_bytes, cores, mem / 1e9);
}

static int run_calibrate(cli_args *a) {
  const char *name = cli_get(a, "model") ? cli_get(a, "model") : "gpt";
  int kind = kt_model_kind_from_name(name);
  if (kind < 0) return cli_usage_error("--model '%s': expected gpt or mlp", name);
  kt_model_config mc;
  kt_model_config_default(&mc, (kt_model_kind)kind);
  long layers, hidden, b;
  if (cli_int(a, "layers", 1, 4096, mc.layers, &layers) ||
      cli_int(a, "hidden", 1, 65536, mc.hidden, &hidden) ||
      cli_int(a, "micro-batch-size", 1, 4096, 4, &b))
    return 2;
  if (a->n_pos) return cli_usage_error("unexpected argument '%s'", a->pos[0]);
  mc.layers = (int)layers, mc.hidden = (int)hidden;
  kt_error err = {{0}};
  if (kt_model_config_check(&mc, &err)) return cli_fail(KT_EINVAL, &err);
  const char *transport = cli_get(a, "transport") ? cli_get(a, "transport") : "threads";
  if (strcmp(transport, "threads") && strcmp(transport, "mpi"))
    return cli_usage_error("--transport '%s': expected threads or mpi", transport);
  int mpi = !strcmp(transport, "mpi");
  /* the links first, while every rank is idle; then each rank times the
   * model, as it will run beside the others */
  size_t boundary = kt_model_boundary_elems(&mc) * (size_t)b * sizeof(float);
  kt_link_calibration links = {.intra_latency = -1, .inter_latency = -1};
  int code = mpi ? measure_links(boundary, &links) : 0;
  if (code) return code;
  kt_calibration c;
  kt_status st = kt_calibrate_compute(&mc, (int)b, &c, &err);
  if (!st && links.rank == 0) report_compute(&mc, b, &c);
  int rcode = st ? cli_fail(st, &err)
              : links.rank == 0
                  ? emit_spec(a, &links, mpi, c.latency, c.bandwidth, c.flops / c.step_seconds)
                  : 0;
  kt_link_calibration_free(&links);
  if (mpi) kt_transport_mpi_finalize();
  return rcode;
}

const cli_command cli_cmd_calibrate = {
    .name = "calibrate",
    .summary = "measure this machine (FLOP/s, transport) as a cluster spec for kaiten plan",
    .usage =
        "[--model gpt|mlp] [--layers L --hidden C] [-b b] [--transport threads|mpi] [-o cluster.json]",
    .details = "achieved_tflops is the model's whole training step on one core (matmul FLOPs over\n"
               "step time, so non-matmul work is priced in); bandwidth and latency come from a\n"
               "ping-pong of the threads transport. With --transport mpi under mpirun (ranks on\n"
               "several machines) ping-pongs inside a machine and between two measure both link\n"
               "classes and devices_per_node, and one message after a quiet spell measures what\n"
               "a rate limiter between machines passes at once (inter_burst_kib). Then: kaiten\n"
               "plan --cluster cluster.json ... or kaiten train --cluster cluster.json ...\n",
    .opts = calibrate_opts,
    .n_opts = sizeof calibrate_opts / sizeof *calibrate_opts,
    .run = run_calibrate,
    .linear_algebra = 1,
};
