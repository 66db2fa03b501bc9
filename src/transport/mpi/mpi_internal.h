/* Internal to src/transport/mpi/: the MPI transport's state, shared by the
 * transport (mpi_transport.c) and the set-up of its shared-memory windows
 * (windows.c). */
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
  MPI_Comm world, data, pipeline;
  pending *sends;  /* Isend copies, reclaimed when complete */
  pending *posted; /* Irecvs announced by post(), oldest first */
  pending *pool;   /* completed pendings, their buffers reused */
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
  double spin;
  int all_local; /* every rank of the job is on this host */
  int aborted;
  char reason[KT_ERROR_LEN];
} mpi_ctx;

/* The doorbells and inboxes of the ranks on this host (collective over the
 * job; on failure the transport polls and every message goes through MPI),
 * and the wait's spin time. */
void kt__mpi_windows_create(mpi_ctx *c, int size);

#endif
