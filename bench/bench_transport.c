/* Point-to-point bandwidth and latency of the transports, ping-pong between
 * two ranks, for activation-sized messages. Run plainly for the threads
 * transport, under `mpirun -np 2` for MPI. Median of 31 round trips. */
#include <stdio.h>
#include <stdlib.h>

#include "kaiten/transport.h"

#define REPS 31

static void report(const char *name, size_t bytes, double one_way) {
  printf("%-8s %10zu %12.1f %12.1f\n", name, bytes, 1e6 * one_way, bytes / one_way / 1e9);
}

int main(void) {
  size_t sizes[] = {1024, 16384, 131072, 1 << 20, 4 << 20, 16 << 20};
  int n = sizeof sizes / sizeof *sizes;
  kt_error err;
  const char *mpi_env = getenv("OMPI_COMM_WORLD_SIZE");
  if (mpi_env && atoi(mpi_env) == 2) {
    kt_transport *t;
    if (kt_transport_mpi_create(2, 1, 60, &t, &err)) {
      fprintf(stderr, "%s\n", err.msg);
      return 1;
    }
    if (t->rank == 0) printf("%-8s %10s %12s %12s\n", "transport", "bytes", "one-way us", "GB/s");
    for (int i = 0; i < n; i++) {
      double s = kt_transport_pingpong(t, sizes[i], REPS);
      if (t->rank == 0) report("mpi", sizes[i], s);
    }
    kt_transport_mpi_free(t);
    kt_transport_mpi_finalize();
    return 0;
  }
  printf("%-8s %10s %12s %12s\n", "transport", "bytes", "one-way us", "GB/s");
  for (int i = 0; i < n; i++) report("threads", sizes[i], kt_transport_threads_pingpong(sizes[i], REPS));
  return 0;
}
