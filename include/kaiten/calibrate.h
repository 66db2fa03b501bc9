/* kaiten calibrate: measuring this machine, the compute of a model's step
 * on one core and the links between ranks (in-process and under mpirun),
 * for the cost models of sim, plan and train. Part of the train module
 * (src/train/calibrate*.c); kaiten/train.h includes it. */
#ifndef KAITEN_CALIBRATE_H
#define KAITEN_CALIBRATE_H

#include <stddef.h>

#include "kaiten/core.h"
#include "kaiten/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  double step_seconds;   /* a whole training step (F, B, update) on one core: median of 9 */
  double flops;          /* its matmul FLOPs */
  double sgemm_seconds;  /* the same matmuls on bare sgemm: fastest of 3 */
  size_t boundary_bytes; /* a stage boundary's tensor at this micro-batch */
  /* the threads transport: latency (64-byte messages, half a round trip)
   * and bandwidth (boundary tensors) */
  double latency, bandwidth;
} kt_calibration;

/* Times micro-batches of micro_batch samples of model m on one core (sets
 * OpenBLAS to one thread, process-wide) and the threads transport.
 * EINVAL for a bad model, the runtime's errors, ENOMEM. */
kt_status kt_calibrate_compute(const kt_model_config *m, int micro_batch, kt_calibration *out,
                               kt_error *err);

typedef struct {
  int rank, devices, devices_per_node, nodes;
  double intra_latency, intra_bw;            /* latency < 0: no two ranks share a machine */
  double inter_latency, inter_bw;            /* latency < 0: one machine */
  double inter_burst;                        /* bytes passed at once after the link idled */
  double allreduce_bytes, allreduce_seconds; /* over every rank, median of 5 */
  int *node_of;                              /* devices entries (kt_link_calibration_free) */
} kt_link_calibration;

/* Under mpirun, every rank (collective): the machines told apart by name,
 * a ping-pong inside one and one across two measure latency, bandwidth and
 * the burst a rate limiter passes, and an all-reduce over every rank is
 * timed. MPI stays initialised (kt_transport_mpi_finalize). EINVAL with
 * fewer than 2 processes, ERUNTIME when a measurement between ranks fails,
 * the transport's errors. */
kt_status kt_calibrate_links_mpi(size_t boundary_bytes, kt_link_calibration *out, kt_error *err);
void kt_link_calibration_free(kt_link_calibration *l);

#ifdef __cplusplus
}
#endif

#endif
