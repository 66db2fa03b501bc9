/* Ping-pong between world ranks 0 and 1: the median one-way time of a
 * message, for benchmarks and kaiten calibrate. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/transport_impl.h"

#define MAX_REPS 256

double kt_transport_pingpong(kt_transport *t, size_t bytes, int reps) {
  if (reps < 1) reps = 1;
  if (reps > MAX_REPS) reps = MAX_REPS;
  char *buf = malloc(bytes + 1);
  double rtt[MAX_REPS];
  kt_error err;
  if (!buf) return -1;
  memset(buf, 1, bytes);
  int ok = 1;
  for (int i = 0; i < reps + 3 && ok; i++) { /* 3 warm-up round trips */
    double t0 = kt_now();
    if (t->rank == 0)
      ok = !t->ops->send(t, 1, 7, buf, bytes, &err) && !t->ops->recv(t, 1, 8, buf, bytes, &err);
    else ok = !t->ops->recv(t, 0, 7, buf, bytes, &err) && !t->ops->send(t, 0, 8, buf, bytes, &err);
    if (i >= 3) rtt[i - 3] = kt_now() - t0;
  }
  free(buf);
  if (!ok) return -1;
  return kt_median(rtt, (size_t)reps) / 2;
}

typedef struct {
  kt_transport *t;
  size_t bytes;
  int reps;
  double result;
} side;

static void *run_side(void *arg) {
  side *s = arg;
  s->result = kt_transport_pingpong(s->t, s->bytes, s->reps);
  return NULL;
}

double kt_transport_threads_pingpong(size_t bytes, int reps) {
  kt_transport *h;
  kt_error err;
  if (kt_transport_threads_create(2, 1, 60, 16, &h, &err)) return -1;
  side a = {&h[0], bytes, reps, 0}, b = {&h[1], bytes, reps, 0};
  pthread_t th;
  if (pthread_create(&th, NULL, run_side, &b)) {
    kt_transport_threads_destroy(h, 2);
    return -1;
  }
  run_side(&a);
  pthread_join(th, NULL);
  kt_transport_threads_destroy(h, 2);
  return a.result;
}
