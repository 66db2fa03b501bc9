/* Internal to src/costs/: the links' state, shared by the booking
 * (links.c) and the replay that shares links between concurrent transfers
 * (links_fluid.c). */
#ifndef KAITEN_COSTS_LINKS_INTERNAL_H
#define KAITEN_COSTS_LINKS_INTERNAL_H

#include <stddef.h>

#include "kaiten/costs.h"

typedef struct {
  double *start, *end;
  size_t n, cap;
} busy_list;

/* One transfer between nodes in a simulation run, in the order the
 * simulator made them (the same in every run of one schedule). Times are
 * seconds at the link's full rate; dur and dur_all come from the last
 * replay: when replica 0's copy and the last copy are through, after start
 * (latency not included). */
typedef struct {
  double start, own, copies;
  double dur, dur_all;
  int a, b;     /* the sender's uplink, the receiver's downlink (nodes) */
  int from, to; /* world ranks: one pair's messages keep their order */
} kt__flow;

struct kt_links {
  kt_link_classes lc;
  int p, d, n_nodes;
  int *node;            /* world rank -> node */
  busy_list *up, *down; /* per node */
  int *scratch;         /* p*d ints for group members */
  double lag;           /* the last replica's lag behind replica 0 */
  kt__flow *flows;      /* this run's transfers between nodes */
  size_t n_flows, cap_flows;
  size_t replayed;     /* flows whose durations the last replay gave (0: book in turns) */
  int replica;         /* the replica a run follows (its own transfers only); -1: replica 0
                           * with the others' copies */
  double *last_end;    /* per pipeline rank: the latest end over the replicas' runs */
  unsigned char *sent; /* per pipeline rank in this run (of one replica), the hops it has
                           * sent on across nodes: 1 to the next rank, 2 to the previous one,
                           * 4 any other (a loop's wrap between the last rank and the first) */
  double *sync_bytes;  /* per pipeline rank: the gradients all-reduced after a step */
  double *sync_start;  /* scratch: where each rank's all-reduce starts */
  int has_sync;
  double synced; /* the last all-reduce's end (kt_links_sync) */
};

#endif
