/* The gradient all-reduce as a ring over non-blocking point-to-point
 * messages: a reduce-scatter then an all-gather, D - 1 steps each, where
 * every rank sends one D-th of the buffer to its right neighbour and
 * receives one from its left per step (2 (D - 1) / D of the buffer each
 * way in all). When the group spans machines with several members on some,
 * hierarchically: each machine's members send their buffers to its first
 * member (the leader), which sums them, the leaders run the ring, and each
 * leader sends the result back. Both are what the links model prices.
 *
 * Why not MPI_Allreduce: OpenMPI's choice for a few ranks and a large
 * buffer may move the whole buffer one way and then back (a reduce and a
 * broadcast: twice the ring's time on a link between machines), and its
 * blocking call spins on a core that ranks of the same machine need (they
 * then took their pipeline messages milliseconds late). Here the waits are
 * the transport's polled ones (they sleep, honour the watchdog, name the
 * neighbour waited for). Each chunk is summed on one rank and copied to the
 * others, so every replica ends with the same bits; the sum's order is
 * fixed by the ring, so a run repeats exactly. */
#include <stdlib.h>
#include <string.h>

#include "transport/mpi/mpi_internal.h"

/* Chunk k of a buffer of n floats split in d: [n k / d, n (k + 1) / d). */
static size_t chunk_lo(size_t n, int d, int k) {
  return n / (size_t)d * (size_t)k + (n % (size_t)d) * (size_t)k / (size_t)d;
}

typedef struct {
  MPI_Request req[2]; /* the send to the right, the receive from the left */
  int left;           /* world rank, for the error */
} ring_step;

static int step_done(kt_transport *t, void *arg, kt_status *st, kt_error *err) {
  ring_step *s = arg;
  int flag = 0;
  if (MPI_Testall(2, s->req, &flag, MPI_STATUSES_IGNORE) != MPI_SUCCESS) {
    *st = kt_fail(err, KT_EPEER, "rank %d: the all-reduce's exchange with rank %d failed", t->rank,
                  s->left);
    return 1;
  }
  return flag;
}

/* One step: send send_n floats to the right and receive recv_n from the
 * left into into (comm ranks; MPI_PROC_NULL: that side has nothing). */
static kt_status exchange(kt_transport *t, MPI_Comm comm, int right, int left, int tag,
                          const float *send, size_t send_n, float *into, size_t recv_n,
                          const int *world_of, kt_error *err) {
  mpi_ctx *c = t->ctx;
  int named = left != MPI_PROC_NULL ? world_of[left] : world_of[right];
  ring_step s = {{MPI_REQUEST_NULL, MPI_REQUEST_NULL}, named};
  if (MPI_Irecv(into, (int)recv_n, MPI_FLOAT, left, tag, comm, &s.req[1]) != MPI_SUCCESS ||
      MPI_Isend(send, (int)send_n, MPI_FLOAT, right, tag, comm, &s.req[0]) != MPI_SUCCESS) {
    if (s.req[1] != MPI_REQUEST_NULL) {
      MPI_Cancel(&s.req[1]);
      MPI_Request_free(&s.req[1]);
    }
    return kt_fail(err, KT_ERUNTIME, "rank %d: posting the all-reduce's exchange failed", t->rank);
  }
  if (right != MPI_PROC_NULL && c->bells && c->bells[world_of[right]])
    kt_doorbell_ring(c->bells[world_of[right]]); /* the right neighbour may sleep on it */
  kt_status st = kt__mpi_wait_named(t, step_done, &s, named, 0, err);
  if (st) { /* MPI may still touch the buffers: the job ends on this error anyway */
    for (int i = 0; i < 2; i++)
      if (s.req[i] != MPI_REQUEST_NULL) {
        MPI_Cancel(&s.req[i]);
        MPI_Request_free(&s.req[i]);
      }
  } else if (right != MPI_PROC_NULL) {
    t->bytes_sent += (int64_t)(send_n * sizeof(float));
  }
  return st;
}

/* Room for n floats in the scratch buffer. */
static kt_status scratch_for(kt_transport *t, size_t n, kt_error *err) {
  mpi_ctx *c = t->ctx;
  if (c->scratch_floats >= n) return KT_OK;
  float *s = realloc(c->scratch, sizeof(float) * n);
  if (!s) return kt_fail(err, KT_ENOMEM, "rank %d: out of memory for the all-reduce", t->rank);
  c->scratch = s, c->scratch_floats = n;
  return KT_OK;
}

/* The ring over the k comm ranks ring[] (this rank is ring[pos]). */
static kt_status ring(kt_transport *t, MPI_Comm comm, const int *ring, int k, int pos, float *buf,
                      size_t n, const int *world_of, kt_error *err) {
  mpi_ctx *c = t->ctx;
  kt_status st = scratch_for(t, chunk_lo(n, k, 1) + 1, err);
  int right = ring[(pos + 1) % k], left = ring[(pos + k - 1) % k];
  /* reduce-scatter: after step s this rank holds the sum of s + 2 parts of
   * chunk pos - s - 1; after k - 1 steps, chunk pos + 1 is complete here */
  for (int s = 0; s < k - 1 && !st; s++) {
    int out = ((pos - s) % k + k) % k, in = ((pos - s - 1) % k + k) % k;
    size_t olo = chunk_lo(n, k, out), ilo = chunk_lo(n, k, in);
    size_t on = chunk_lo(n, k, out + 1) - olo, inn = chunk_lo(n, k, in + 1) - ilo;
    st = exchange(t, comm, right, left, s, buf + olo, on, c->scratch, inn, world_of, err);
    for (size_t i = 0; !st && i < inn; i++) buf[ilo + i] += c->scratch[i];
  }
  /* all-gather: the complete chunks travel once around the ring */
  for (int s = 0; s < k - 1 && !st; s++) {
    int out = ((pos + 1 - s) % k + k) % k, in = ((pos - s) % k + k) % k;
    size_t olo = chunk_lo(n, k, out), ilo = chunk_lo(n, k, in);
    st = exchange(t, comm, right, left, k + s, buf + olo, chunk_lo(n, k, out + 1) - olo, buf + ilo,
                  chunk_lo(n, k, in + 1) - ilo, world_of, err);
  }
  return st;
}

/* The machine of comm member i (each its own when the machines are unknown). */
static int machine(const mpi_ctx *c, const int *world_of, int i) {
  return c->node_of ? c->node_of[world_of[i]] : world_of[i];
}

#define TAG_GATHER 30000
#define TAG_SCATTER 30001

kt_status kt__mpi_ring_allreduce(kt_transport *t, MPI_Comm comm, float *buf, size_t n,
                                 kt_error *err) {
  mpi_ctx *c = t->ctx;
  int d, me;
  MPI_Comm_size(comm, &d);
  MPI_Comm_rank(comm, &me);
  if (d == 1 || n == 0) return KT_OK;
  const int *world_of = kt__mpi_members(c, comm, d);
  int *order = malloc(sizeof(int) * (size_t)d);
  if (!world_of || !order) {
    free(order);
    return kt_fail(err, KT_ENOMEM, "rank %d: out of memory for the all-reduce", t->rank);
  }
  /* each member's node leader (its node's first member); the leaders */
  int k = 0, most = 1, lead = me, pos = 0;
  for (int i = 0; i < d; i++) {
    int ni = machine(c, world_of, i), first = i, same = 0;
    for (int j = 0; j < d; j++) {
      int nj = machine(c, world_of, j);
      if (nj == ni && j < first) first = j;
      same += nj == ni;
    }
    if (same > most) most = same;
    if (i == me) lead = first;
    if (first == i) order[k++] = i;
  }
  for (int i = 0; i < k; i++)
    if (order[i] == lead) pos = i;
  kt_status st = KT_OK;
  if (k == 1 || most == 1) { /* one node, or one member on each: a ring over all */
    for (int i = 0; i < d; i++) order[i] = i;
    st = ring(t, comm, order, d, me, buf, n, world_of, err);
  } else if (me != lead) { /* hierarchical: the leader sums this node's buffers */
    st = exchange(t, comm, lead, MPI_PROC_NULL, TAG_GATHER, buf, n, NULL, 0, world_of, err);
    if (!st)
      st = exchange(t, comm, MPI_PROC_NULL, lead, TAG_SCATTER, NULL, 0, buf, n, world_of, err);
  } else {
    int mine = machine(c, world_of, me);
    st = scratch_for(t, n, err);
    for (int j = me + 1; j < d && !st; j++) { /* in member order: the same sum every run */
      if (machine(c, world_of, j) != mine) continue;
      st = exchange(t, comm, MPI_PROC_NULL, j, TAG_GATHER, NULL, 0, c->scratch, n, world_of, err);
      for (size_t i = 0; !st && i < n; i++) buf[i] += c->scratch[i];
    }
    if (!st) st = ring(t, comm, order, k, pos, buf, n, world_of, err);
    for (int j = me + 1; j < d && !st; j++)
      if (machine(c, world_of, j) == mine)
        st = exchange(t, comm, j, MPI_PROC_NULL, TAG_SCATTER, buf, n, NULL, 0, world_of, err);
  }
  free(order);
  return st;
}
