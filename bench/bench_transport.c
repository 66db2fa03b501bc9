/* Point-to-point bandwidth and latency of the transports, ping-pong between
 * two ranks, for activation-sized messages. Run plainly for the threads
 * transport, under `mpirun -np 2` for MPI. Median of repeated round trips. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/transport.h"

#define REPS 31

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

typedef struct {
  kt_transport *t;
  size_t bytes;
  double rtt[REPS];
  int ok;
} pingpong;

static void *run(void *arg) {
  pingpong *pp = arg;
  kt_transport *t = pp->t;
  char *buf = malloc(pp->bytes + 1);
  kt_error err;
  pp->ok = buf != NULL;
  memset(buf, 1, pp->bytes);
  for (int i = 0; i < REPS + 3 && pp->ok; i++) {
    double t0 = kt_now();
    if (t->rank == 0) {
      pp->ok = !t->ops->send(t, 1, 7, buf, pp->bytes, &err) && !t->ops->recv(t, 1, 8, buf, pp->bytes, &err);
    } else {
      pp->ok = !t->ops->recv(t, 0, 7, buf, pp->bytes, &err) && !t->ops->send(t, 0, 8, buf, pp->bytes, &err);
    }
    if (i >= 3) pp->rtt[i - 3] = kt_now() - t0;
  }
  free(buf);
  return NULL;
}

static void report(const char *name, size_t bytes, double *rtt) {
  qsort(rtt, REPS, sizeof *rtt, cmp);
  double one_way = rtt[REPS / 2] / 2;
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
      pingpong pp = {.t = t, .bytes = sizes[i]};
      run(&pp);
      if (t->rank == 0) report("mpi", sizes[i], pp.rtt);
    }
    kt_transport_mpi_free(t);
    kt_transport_mpi_finalize();
    return 0;
  }
  printf("%-8s %10s %12s %12s\n", "transport", "bytes", "one-way us", "GB/s");
  for (int i = 0; i < n; i++) {
    kt_transport *h;
    if (kt_transport_threads_create(2, 1, 60, 16, &h, &err)) {
      fprintf(stderr, "%s\n", err.msg);
      return 1;
    }
    pingpong a = {.t = &h[0], .bytes = sizes[i]}, b = {.t = &h[1], .bytes = sizes[i]};
    pthread_t th;
    pthread_create(&th, NULL, run, &b);
    run(&a);
    pthread_join(th, NULL);
    report("threads", sizes[i], a.rtt);
    kt_transport_threads_free(h, 2);
  }
  return 0;
}
