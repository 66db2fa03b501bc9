/* Calibration of the links (kaiten calibrate --transport mpi): both link
 * classes of the machines the job runs on. Under mpirun every rank takes
 * part: the machines are told apart by name, a ping-pong inside a machine
 * and one across two measure latency (64-byte messages, the shortest of 31
 * round trips: a waiting rank that went to sleep between polls, or a busy
 * core, only adds to a trip, and the median on a shared machine could read
 * 260 us for a link of 8) and bandwidth (the slope between the fastest of
 * 5 runs of two streams of boundary-sized messages, so latency and any
 * burst allowance cancel), the burst allowance itself (one boundary-sized
 * message after the link idled 20 ms, against the latency and the rate: a
 * rate-limited link's token bucket passes its first bytes at once; 0 where
 * none shows), and an all-reduce over every rank is timed against what the
 * links model predicts for it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kaiten/train.h"

#define TAG (KT_TAG_COLLECTIVE | 0x500)

/* One round trip of bytes between a and b (both call it): seconds at a. */
static double round_trip(kt_transport *t, int a, int b, void *buf, size_t bytes, int stream) {
  kt_error err;
  double t0 = kt_now();
  if (kt_transport_rank(t) == a) {
    for (int i = 0; i < stream; i++)
      if (kt_transport_send(t, b, TAG, buf, bytes, &err)) return -1;
    if (kt_transport_recv(t, b, TAG + 1, buf, 1, &err)) return -1;
  } else if (kt_transport_rank(t) == b) {
    for (int i = 0; i < stream; i++)
      if (kt_transport_recv(t, a, TAG, buf, bytes, &err)) return -1;
    if (kt_transport_send(t, a, TAG + 1, buf, 1, &err)) return -1;
  }
  return kt_now() - t0;
}

/* The shortest of reps round trips of stream messages (a trip on a shared
 * machine only grows with the noise, so its minimum is the link's own). */
static double trip(kt_transport *t, int a, int b, void *buf, size_t bytes, int stream, int reps) {
  double best = 0;
  for (int r = 0; r < reps; r++) {
    double v = round_trip(t, a, b, buf, bytes, stream);
    if (v < 0) return -1;
    if (r == 0 || v < best) best = v;
  }
  return best;
}

/* Bytes of one message that the link passes at once after idling: the
 * shortest of 5 trips of one message, each after 20 ms of quiet (the
 * receiver spinning, so it is not a wake-up), against 2 latencies and the
 * message at the rate; within [0, bytes]. */
static double burst(kt_transport *t, int a, int b, void *buf, size_t bytes, double small,
                    double bw) {
  struct timespec quiet = {0, 20000000};
  double best = -1;
  kt_transport_mpi_set_spin(t, 0.1);
  for (int r = 0; r < 5; r++) {
    if (kt_transport_rank(t) == a) nanosleep(&quiet, NULL);
    double v = round_trip(t, a, b, buf, bytes, 1);
    if (v < 0) break;
    if (best < 0 || v < best) best = v;
  }
  kt_transport_mpi_set_spin(t, -1);
  if (best < 0) return 0;
  double at_once = (small + (double)bytes / bw - best) * bw;
  return at_once < 0 ? 0 : at_once > (double)bytes ? (double)bytes : at_once;
}

/* Latency, bandwidth and (at_once not NULL) burst between a and b, known
 * on a (and on rank 0). */
static int measure_pair(kt_transport *t, int a, int b, size_t bytes, double *lat, double *bw,
                        double *at_once) {
  unsigned char *buf = calloc(bytes, 1);
  double v[3] = {0};
  int ok = buf != NULL;
  if (ok && (kt_transport_rank(t) == a || kt_transport_rank(t) == b)) {
    kt_transport_mpi_set_spin(t, 5e-3); /* the link's latency, not a sleeping rank's wake-up */
    double small = trip(t, a, b, buf, 64, 1, 31);
    kt_transport_mpi_set_spin(t, -1);
    /* streams long enough (4 MiB apart) that a rate-limited link shows its
     * rate over the scheduling noise of a busy machine */
    int n1 = 4, n2 = n1 + (int)((4u << 20) / bytes);
    if (n2 < n1 + 12) n2 = n1 + 12;
    double t1 = trip(t, a, b, buf, bytes, n1, 5), t2 = trip(t, a, b, buf, bytes, n2, 5);
    ok = small > 0 && t1 > 0 && t2 > t1;
    v[0] = small / 2, v[1] = ok ? (double)(n2 - n1) * (double)bytes / (t2 - t1) : 0;
    if (ok && at_once) v[2] = burst(t, a, b, buf, bytes, small, v[1]);
  }
  /* a tells everyone; the others wait in a receive that sleeps between
   * polls, so they leave the cores to the pair being measured */
  kt_error err;
  double got[3] = {v[0], v[1], v[2]};
  if (kt_transport_rank(t) == a) {
    for (int r = 0; r < kt_transport_world(t); r++)
      if (r != a && kt_transport_send(t, r, TAG + 2, got, sizeof got, &err)) ok = 0;
  } else if (kt_transport_recv(t, a, TAG + 2, got, sizeof got, &err)) {
    ok = 0;
  }
  *lat = got[0], *bw = got[1];
  if (at_once) *at_once = got[2];
  free(buf);
  return ok && *bw > 0;
}

/* The machines of the job apart by name: a pair inside one and a pair
 * across two (the first of each; -1 where there is none). */
static void find_pairs(const int *node, int world, kt_link_calibration *out, int *in_a, int *in_b,
                       int *x_b) {
  *in_a = *in_b = *x_b = -1;
  for (int r = 0; r < world; r++) {
    int same = 0;
    for (int q = 0; q < world; q++) same += node[q] == node[r];
    if (same > out->devices_per_node) out->devices_per_node = same;
    if (node[r] + 1 > out->nodes) out->nodes = node[r] + 1;
    for (int q = 0; q < r && *in_a < 0; q++)
      if (node[q] == node[r]) *in_a = q, *in_b = r;
    if (*x_b < 0 && node[r] != node[0]) *x_b = r;
  }
}

/* An all-reduce over every rank, of a few boundary tensors: median of 5. */
static int time_allreduce(kt_transport *t, size_t boundary_bytes, kt_link_calibration *out) {
  size_t n = 8 * boundary_bytes / sizeof(float);
  float *buf = kt_calloc(n, sizeof *buf);
  double v[5];
  kt_error err;
  int ok = buf != NULL;
  for (int r = 0; ok && r < 5; r++) {
    kt_transport_barrier(t, &err);
    double t0 = kt_now();
    ok &= kt_allreduce(t, KT_GROUP_WORLD, buf, n, &err) == KT_OK;
    v[r] = kt_now() - t0;
  }
  out->allreduce_bytes = (double)n * sizeof(float);
  out->allreduce_seconds = ok ? kt_median(v, 5) : 0;
  free(buf);
  return ok;
}

kt_status kt_calibrate_links_mpi(size_t boundary_bytes, kt_link_calibration *out, kt_error *err) {
  *out = (kt_link_calibration){.intra_latency = -1, .inter_latency = -1};
  int rank, world;
  kt_status st = kt_transport_mpi_init(&rank, &world, err);
  if (!st && world < 2)
    st = kt_fail(err, KT_EINVAL, "measuring links needs at least 2 MPI processes (got %d)", world);
  kt_transport *t = NULL;
  if (!st) st = kt_transport_mpi_create(world, 1, 60, &t, err);
  int *node = st ? NULL : kt_calloc((size_t)world, sizeof *node);
  if (!st && !node) st = kt_fail(err, KT_ENOMEM, "out of memory");
  if (!st) st = kt_transport_mpi_nodes(t, node, err);
  if (st) {
    free(node);
    kt_transport_mpi_destroy(t);
    return st;
  }
  out->devices = world, out->rank = rank;
  int in_a, in_b, x_b, ok = 1;
  find_pairs(node, world, out, &in_a, &in_b, &x_b);
  /* no burst inside a machine: transfers there are not booked on links */
  if (in_a >= 0)
    ok &= measure_pair(t, in_a, in_b, boundary_bytes, &out->intra_latency, &out->intra_bw, NULL);
  if (x_b >= 0)
    ok &= measure_pair(t, 0, x_b, boundary_bytes, &out->inter_latency, &out->inter_bw,
                       &out->inter_burst);
  if (in_a < 0) /* one process per machine: inside is the threads transport */
    out->intra_latency = -1;
  if (x_b < 0) out->inter_latency = -1;
  if (ok) ok = time_allreduce(t, boundary_bytes, out);
  out->node_of = node;
  kt_transport_mpi_destroy(t);
  if (!ok) return kt_fail(err, KT_ERUNTIME, "calibrate: a measurement between ranks failed");
  return KT_OK;
}

void kt_link_calibration_free(kt_link_calibration *l) {
  free(l->node_of);
  l->node_of = NULL;
}
