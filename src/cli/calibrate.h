/* kaiten calibrate internals: the link classes measured under mpirun. */
#ifndef KAITEN_CLI_CALIBRATE_H
#define KAITEN_CLI_CALIBRATE_H

#include "cli/cli.h"
#include "kaiten/transport.h"

typedef struct {
  int rank, devices, devices_per_node, nodes;
  double intra_latency, intra_bw; /* latency < 0: no two ranks share a machine */
  double inter_latency, inter_bw; /* latency < 0: one machine */
  double inter_burst;             /* bytes passed at once after the link idled */
  double allreduce_bytes, allreduce_seconds; /* over every rank, median of 5 */
  int *node_of;                   /* devices entries (caller frees) */
} calibrate_links;

/* Every rank calls it (collective); 0 or the exit code after printing why. */
int calibrate_links_mpi(size_t boundary_bytes, calibrate_links *out);

#endif
