/* Internal to src/transport/mpi/: the MPI transport's state, shared by the
 * transport (mpi_transport.c), the set-up of its shared-memory windows (windows.c)
 * and its ring all-reduce (ring.c). */
#ifndef KAITEN_TRANSPORT_MPI_INTERNAL_H
#define KAITEN_TRANSPORT_MPI_INTERNAL_H

#include <mpi.h>
#include <stdint.h>

#include "kaiten/transport_impl.h"
#include "transport/doorbell.h"
#include "transport/mpi/inbox.h"

/* An outstanding non-blocking operation and the buffer it owns. */
typedef struct pending {
  struct pending *next;
  MPI_Request req;
  int src;
  uint64_t tag;
  size_t bytes; /* the buffer's capacity */
  size_t len;   /* the message's size */
  int done;
  unsigned char data[];
} pending;

/* A pending's buffer is kept for reuse (up to POOL_MAX of them). */
#define POOL_MAX 64

typedef struct {
  MPI_Comm world, data, pipeline, everyone; /* everyone: collectives over the world */
  pending *sends;                           /* Isend copies, reclaimed when complete */
  pending *posted;                          /* Irecvs announced by post(), oldest first */
  pending *pool;                            /* completed pendings, their buffers reused */
  int pooled;
  /* Doorbells of the ranks on this host (NULL elsewhere, or for all when
   * the shared window is not available: receives then poll). */
  MPI_Win bell_win;
  kt_doorbell **bells; /* [world size] */
  kt_doorbell *my_bell;
  /* Inboxes of the ranks on this host (inbox.h; NULL elsewhere, or for all
   * when the window is not available): point-to-point messages between
   * them skip MPI. */
  MPI_Win inbox_win;
  void **inboxes; /* [world size] */
  uint64_t sent_seq;
  /* Seconds a wait keeps testing before it sleeps: a while when this host
   * has a core for every rank on it (a spinning rank then takes no one's
   * core, and a message that is about to come is taken at once), none when
   * ranks share cores (a spin would hold the core the sender needs). */
  double spin, spin_default;
  int all_local;   /* every rank of the job is on this host */
  int *members[3]; /* the data, pipeline and world groups' world ranks (kt__mpi_members) */
  int *node_of;    /* world rank -> machine (NULL: unknown, each its own) */
  float *scratch;  /* the ring's incoming chunk */
  size_t scratch_floats;
  int aborted;
  char reason[KT_ERROR_LEN];
} mpi_ctx;

/* The doorbells and inboxes of the ranks on this host (collective over the
 * job; on failure the transport polls and every message goes through MPI),
 * and the wait's spin time. */
void kt__mpi_windows_create(mpi_ctx *c, int size);

/* What a wait waits for: 1 when it is done (*st its outcome), 0 not yet. */
typedef int (*kt__mpi_wait_ready)(kt_transport *t, void *arg, kt_status *st, kt_error *err);

/* Waits until ready says so, polled (sleeping between tests), under the
 * watchdog, with the world rank it waits for published for a signal
 * handler to name (who; -1: none); p2p: a point-to-point receive (its
 * sender rings this rank's doorbell). */
kt_status kt__mpi_wait_named(kt_transport *t, kt__mpi_wait_ready ready, void *arg, int who, int p2p,
                             kt_error *err);

/* The members of comm (one of the transport's communicators, size of
 * them) as world ranks, in comm's order: translated once per communicator
 * and kept (NULL when out of memory). */
const int *kt__mpi_members(mpi_ctx *c, MPI_Comm comm, int size);

/* The all-reduce (sum) of n floats over comm as a ring of point-to-point
 * messages (ring.c). */
kt_status kt__mpi_ring_allreduce(kt_transport *t, MPI_Comm comm, float *buf, size_t n,
                                 kt_error *err);

#endif
