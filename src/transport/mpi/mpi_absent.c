/* Built without MPI: the MPI transport reports that it is not available. */
#include "kaiten/transport_impl.h"

int kt_transport_mpi_available(void) { return 0; }

kt_status kt_transport_mpi_init(int *world_rank, int *world_size, kt_error *err) {
  *world_rank = 0;
  *world_size = 1;
  return kt_fail(err, KT_EINVAL,
                 "this kaiten was built without MPI (install libopenmpi-dev and rebuild)");
}

kt_status kt_transport_mpi_create(int p, int d, double timeout, kt_transport **out, kt_error *err) {
  (void)p, (void)d, (void)timeout;
  *out = NULL;
  return kt_fail(err, KT_EINVAL,
                 "this kaiten was built without MPI (install libopenmpi-dev and rebuild)");
}

void kt_transport_mpi_destroy(kt_transport *t) { (void)t; }
int kt_transport_mpi_local_size(void) { return 1; }
void kt_transport_mpi_abort_job(int code) { (void)code; }
void kt_transport_mpi_finalize(void) {}
void kt_transport_mpi_set_spin(kt_transport *t, double seconds) { (void)t, (void)seconds; }
kt_status kt_transport_mpi_nodes(kt_transport *t, int *out, kt_error *err) {
  (void)t, (void)out;
  return kt_fail(err, KT_EINVAL,
                 "this kaiten was built without MPI (install libopenmpi-dev and rebuild)");
}
int kt_transport_mpi_waiting_for(double *since) {
  (void)since;
  return -1;
}
