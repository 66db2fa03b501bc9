/* train --cluster FILE: the spec's link classes, and which node each rank of
 * this job lives on (MPI: the machines' names; threads: devices_per_node
 * consecutive ranks per node), for the prediction on the cluster's links. */
#include <stdlib.h>

#include "cli/train_cli.h"
#include "kaiten/plan.h"

kt_status train_cluster_links(const train_opts *o, kt_transport *mpi_t, int p, kt_links **out,
                              kt_error *err) {
  *out = NULL;
  if (!o->cluster) return KT_OK;
  kt_plan_cluster c;
  kt_plan_cluster_default(&c);
  kt_status st = kt_plan_cluster_load(o->cluster, &c, err);
  if (!st) st = kt_plan_cluster_check(&c, err);
  if (st) return st;
  kt_link_classes lc = {.intra_latency = c.intra_latency, .intra_bw = c.intra_bw,
                        .inter_latency = c.inter_latency, .inter_bw = c.inter_bw,
                        .inter_burst = c.inter_burst};
  int world = p * o->d, *nodes = NULL;
  if (mpi_t) {
    nodes = kt_calloc((size_t)world, sizeof *nodes);
    if (!nodes) return kt_fail(err, KT_ENOMEM, "out of memory");
    st = kt_transport_mpi_nodes(mpi_t, nodes, err);
  }
  if (!st) st = kt_links_create(&lc, p, o->d, nodes, c.devices_per_node, out, err);
  free(nodes);
  if (st) return kt_fail(err, st, "--cluster %s: %s", o->cluster, err->msg);
  return KT_OK;
}
