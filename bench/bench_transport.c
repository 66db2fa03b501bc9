/* Point-to-point bandwidth and latency of the transports, ping-pong between
 * two ranks, for activation-sized messages. Run plainly for the threads
 * transport, under `mpirun -np 2` for MPI. Each batch of 31 round trips gives
 * its median; reported: the median, min and max over the batches.
 * Usage: bench_transport [REPS] [--quick] [--tsv FILE], REPS batches. */
#include <stdio.h>
#include <stdlib.h>

#include "bench_rows.h"
#include "kaiten/transport.h"

#define REPS 31

static void report(const bench_opts *o, const char *name, size_t bytes, double *t) {
  bench_stat s = bench_stats(t, (size_t)o->reps, 1e6);
  double gbs = bytes / s.med / 1e3;
  printf("%-8s %10zu %12.1f %12.1f\n", name, bytes, s.med, gbs);
  char id[64], what[128];
  snprintf(id, sizeof id, "transport.%s.%zu", name, bytes);
  if (bytes >= 1 << 20)
    snprintf(what, sizeof what, "ping-pong one-way time, %s, %zu MiB (%.1f GB/s)", name,
             bytes >> 20, gbs);
  else
    snprintf(what, sizeof what, "ping-pong one-way time, %s, %zu KiB (%.1f GB/s)", name,
             bytes >> 10, gbs);
  char ref_id[64];
  snprintf(ref_id, sizeof ref_id, "transport.threads.%zu", bytes);
  if (name[0] == 'm') bench_row_vs(o, id, what, "µs", s, "threads transport", ref_id);
  else bench_row(o, id, what, "µs", s, NULL, 0);
}

int main(int argc, char **argv) {
  bench_opts o = bench_args(argc, argv, 7, 3, 1, 64);
  size_t sizes[] = {1024, 16384, 131072, 1 << 20, 4 << 20, 16 << 20};
  int n = sizeof sizes / sizeof *sizes - (o.quick ? 1 : 0);
  double t[64];
  kt_error err;
  const char *mpi_env = getenv("OMPI_COMM_WORLD_SIZE");
  if (mpi_env && atoi(mpi_env) == 2) {
    kt_transport *tr;
    if (kt_transport_mpi_create(2, 1, 60, &tr, &err)) {
      fprintf(stderr, "%s\n", err.msg);
      return 1;
    }
    if (kt_transport_rank(tr) == 0)
      printf("%-8s %10s %12s %12s\n", "transport", "bytes", "one-way us", "GB/s");
    else bench_close(&o); /* rank 0 writes the rows */
    for (int i = 0; i < n; i++) {
      for (int r = 0; r < o.reps; r++) t[r] = kt_transport_pingpong(tr, sizes[i], REPS);
      if (kt_transport_rank(tr) == 0) report(&o, "mpi", sizes[i], t);
    }
    kt_transport_mpi_destroy(tr);
    kt_transport_mpi_finalize();
    bench_close(&o);
    return 0;
  }
  printf("%-8s %10s %12s %12s\n", "transport", "bytes", "one-way us", "GB/s");
  for (int i = 0; i < n; i++) {
    for (int r = 0; r < o.reps; r++) t[r] = kt_transport_threads_pingpong(sizes[i], REPS);
    report(&o, "threads", sizes[i], t);
  }
  bench_close(&o);
  return 0;
}
