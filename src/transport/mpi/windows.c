/* The MPI transport's shared-memory windows on the ranks of one host: a
 * doorbell per rank (a sender rings the receiver's) and an inbox per rank
 * (inbox.h). */
#include <stdlib.h>
#include <unistd.h>

#include "transport/mpi/mpi_internal.h"

/* How long a wait spins before sleeping when every rank has its own core:
 * about a wake-up's latency on a VM. */
#define SPIN_SECONDS 50e-6

/* The inboxes: one per rank in a second shared-memory window on the node
 * communicator (collective; every rank of the job agrees, or none uses
 * them). node_ranks: each world rank's rank on this host, or MPI_UNDEFINED. */
static void inboxes_create(mpi_ctx *c, MPI_Comm node, int size, const int *node_ranks) {
  void *mine = NULL;
  int ok = MPI_Win_allocate_shared((MPI_Aint)kt_inbox_bytes(), 64, MPI_INFO_NULL, node, &mine,
                                   &c->inbox_win) == MPI_SUCCESS;
  c->inboxes = ok ? calloc((size_t)size, sizeof *c->inboxes) : NULL;
  ok = ok && c->inboxes;
  int all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, c->world);
  if (!all_ok) {
    if (c->inbox_win != MPI_WIN_NULL) MPI_Win_free(&c->inbox_win);
    free(c->inboxes);
    c->inboxes = NULL;
    return;
  }
  kt_inbox_init(mine);
  for (int r = 0; r < size; r++) {
    if (node_ranks[r] == MPI_UNDEFINED) continue;
    MPI_Aint sz;
    int disp;
    void *box = NULL;
    MPI_Win_shared_query(c->inbox_win, node_ranks[r], &sz, &disp, &box);
    c->inboxes[r] = box;
  }
}

/* The doorbells: one per rank in a shared-memory window of the ranks on
 * this host. On failure the transport polls, as without a window. */
void kt__mpi_windows_create(mpi_ctx *c, int size) {
  MPI_Comm node;
  if (MPI_Comm_split_type(c->world, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS)
    return;
  kt_doorbell *mine = NULL;
  int ok = MPI_Win_allocate_shared((MPI_Aint)sizeof(kt_doorbell), (int)sizeof(kt_doorbell),
                                   MPI_INFO_NULL, node, &mine, &c->bell_win) == MPI_SUCCESS;
  c->bells = ok ? calloc((size_t)size, sizeof *c->bells) : NULL;
  int *world_ranks = ok ? malloc((size_t)size * sizeof *world_ranks) : NULL;
  int *node_ranks = ok ? malloc((size_t)size * sizeof *node_ranks) : NULL;
  ok = ok && c->bells && world_ranks && node_ranks;
  /* every rank must agree, or one would ring into a window another lacks */
  int all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, c->world);
  if (all_ok) {
    kt_doorbell_init(mine, 1);
    MPI_Group wg, ng;
    MPI_Comm_group(c->world, &wg);
    MPI_Comm_group(node, &ng);
    for (int r = 0; r < size; r++) world_ranks[r] = r;
    MPI_Group_translate_ranks(wg, size, world_ranks, ng, node_ranks);
    c->all_local = 1;
    for (int r = 0; r < size; r++) {
      if (node_ranks[r] == MPI_UNDEFINED) {
        c->all_local = 0;
        continue;
      }
      MPI_Aint sz;
      int disp;
      kt_doorbell *b = NULL;
      MPI_Win_shared_query(c->bell_win, node_ranks[r], &sz, &disp, &b);
      c->bells[r] = b;
    }
    MPI_Group_free(&wg);
    MPI_Group_free(&ng);
    c->my_bell = mine;
    inboxes_create(c, node, size, node_ranks);
    MPI_Barrier(c->world); /* every bell and inbox initialised before anyone rings */
  } else {
    if (c->bell_win != MPI_WIN_NULL) MPI_Win_free(&c->bell_win);
    free(c->bells);
    c->bells = NULL;
  }
  free(world_ranks);
  free(node_ranks);
  int local = 1;
  MPI_Comm_size(node, &local);
  long cores = sysconf(_SC_NPROCESSORS_ONLN); /* the host's: mpirun may bind each rank to one */
  c->spin = c->spin_default = cores > 0 && local <= cores ? SPIN_SECONDS : 0;
  MPI_Comm_free(&node);
}
