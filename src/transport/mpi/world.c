/* The MPI job as a whole: starting and ending MPI, the ranks on this
 * host, the machines' names. No transport state but the world
 * communicator a handle holds. */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "transport/mpi/mpi_internal.h"

kt_status kt_transport_mpi_init(int *world_rank, int *world_size, kt_error *err) {
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    int provided;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
      return kt_fail(err, KT_ERUNTIME, "MPI_Init failed");
  }
  MPI_Comm_rank(MPI_COMM_WORLD, world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, world_size);
  return KT_OK;
}

int kt_transport_mpi_local_size(void) {
  int ready = 0;
  MPI_Initialized(&ready);
  if (!ready) return 1;
  MPI_Comm node;
  int n = 1;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) ==
      MPI_SUCCESS) {
    MPI_Comm_size(node, &n);
    MPI_Comm_free(&node);
  }
  return n > 0 ? n : 1;
}

void kt_transport_mpi_abort_job(int code) { MPI_Abort(MPI_COMM_WORLD, code); }

void kt_transport_mpi_finalize(void) {
  int inited = 0, finalized = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  if (inited && !finalized) MPI_Finalize();
}

kt_status kt_transport_mpi_nodes(kt_transport *t, int *out, kt_error *err) {
  mpi_ctx *c = t->ctx;
  char name[MPI_MAX_PROCESSOR_NAME] = {0};
  int len = 0;
  MPI_Get_processor_name(name, &len);
  char *all = calloc((size_t)t->world, MPI_MAX_PROCESSOR_NAME);
  if (!all) return kt_fail(err, KT_ENOMEM, "out of memory");
  if (MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all, MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
                    c->world) != MPI_SUCCESS) {
    free(all);
    return kt_fail(err, KT_ERUNTIME, "rank %d: gathering the machines' names failed", t->rank);
  }
  /* nodes numbered in order of their first rank */
  for (int r = 0; r < t->world; r++) {
    out[r] = r;
    for (int q = 0; q < r; q++)
      if (!strncmp(all + (size_t)q * MPI_MAX_PROCESSOR_NAME,
                   all + (size_t)r * MPI_MAX_PROCESSOR_NAME, MPI_MAX_PROCESSOR_NAME)) {
        out[r] = out[q];
        break;
      }
  }
  int next = 0, *map = t->world > 0 ? calloc((size_t)t->world, sizeof *map) : NULL;
  if (!map) {
    free(all);
    return kt_fail(err, KT_ENOMEM, "out of memory");
  }
  for (int r = 0; r < t->world; r++) map[r] = -1;
  for (int r = 0; r < t->world; r++) {
    if (map[out[r]] < 0) map[out[r]] = next++;
    out[r] = map[out[r]];
  }
  free(map);
  free(all);
  return KT_OK;
}
