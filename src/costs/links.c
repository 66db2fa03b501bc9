/* Link classes and shared links: what a transfer between two ranks costs
 * once the cluster has nodes.
 *
 * Every node reaches the others through one link, full duplex: its uplink
 * carries what it sends, its downlink what it receives (an emulated host's
 * rate-limited veth, a machine's NIC). A transfer between nodes occupies the
 * sender's uplink and the receiver's downlink for bytes / bandwidth; two
 * transfers that would overlap on one of them go one after the other: the
 * later one ends when it would if they shared the bandwidth, the earlier one
 * sooner (TCP flows that start together share it, and both end late: the
 * simulator does not run in time order, so a transfer booked first cannot
 * be slowed by one booked after it; links_fluid.c replays a run in time
 * order with shared links, and the next run takes its durations). Each
 * link keeps
 * its busy intervals, so a transfer booked late (the simulator does not run
 * in time order across ranks) still fills an earlier gap. Inside a node
 * (shared memory, loopback) transfers do not contend. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "costs/links_internal.h"

static kt_status bad(kt_error *err, const char *what, double v) {
  return kt_fail(err, KT_EINVAL, "%s %g: expected a finite value %s", what, v,
                 strstr(what, "bandwidth") ? "> 0" : ">= 0");
}

kt_status kt_links_create(const kt_link_classes *lc, int p, int d, const int *node_of,
                          int devices_per_node, kt_links **out, kt_error *err) {
  *out = NULL;
  if (!(lc->intra_bw > 0) || !isfinite(lc->intra_bw))
    return bad(err, "intra-node bandwidth", lc->intra_bw);
  if (!(lc->inter_bw > 0) || !isfinite(lc->inter_bw))
    return bad(err, "inter-node bandwidth", lc->inter_bw);
  if (!(lc->intra_latency >= 0) || !isfinite(lc->intra_latency))
    return bad(err, "intra-node latency", lc->intra_latency);
  if (!(lc->inter_latency >= 0) || !isfinite(lc->inter_latency))
    return bad(err, "inter-node latency", lc->inter_latency);
  if (!(lc->inter_burst >= 0) || !isfinite(lc->inter_burst))
    return bad(err, "inter-node burst", lc->inter_burst);
  if (p < 1 || d < 1)
    return kt_fail(err, KT_EINVAL, "links for %d x %d ranks: expected >= 1 each", p, d);
  if (!node_of && devices_per_node < 1)
    return kt_fail(err, KT_EINVAL, "devices per node %d: expected >= 1", devices_per_node);
  int world = p * d;
  kt_links *l = kt_calloc(1, sizeof *l);
  if (!l) return kt_fail(err, KT_ENOMEM, "out of memory");
  l->lc = *lc, l->p = p, l->d = d;
  l->node = kt_calloc((size_t)world, sizeof *l->node);
  l->scratch = kt_calloc((size_t)world, sizeof *l->scratch);
  for (int r = 0; l->node && r < world; r++) {
    int n = node_of ? node_of[r] : r / devices_per_node;
    if (n < 0 || n >= world) {
      kt_links_destroy(l);
      return kt_fail(err, KT_EINVAL, "rank %d on node %d: expected 0..%d", r, n, world - 1);
    }
    l->node[r] = n;
    if (n + 1 > l->n_nodes) l->n_nodes = n + 1;
  }
  l->up = kt_calloc((size_t)world, sizeof *l->up);
  l->down = kt_calloc((size_t)world, sizeof *l->down);
  l->last_end = kt_calloc((size_t)p, sizeof *l->last_end);
  l->sent = kt_calloc((size_t)p, 1);
  l->sync_bytes = kt_calloc((size_t)p, sizeof *l->sync_bytes);
  l->sync_start = kt_calloc((size_t)p, sizeof *l->sync_start);
  l->replica = -1;
  if (!l->node || !l->scratch || !l->up || !l->down || !l->last_end || !l->sent || !l->sync_bytes ||
      !l->sync_start) {
    kt_links_destroy(l);
    return kt_fail(err, KT_ENOMEM, "out of memory");
  }
  *out = l;
  return KT_OK;
}

kt_status kt_links_clone(const kt_links *l, kt_links **out, kt_error *err) {
  kt_status st = kt_links_create(&l->lc, l->p, l->d, l->node, 1, out, err);
  if (st) return st;
  if (l->has_sync) kt_links_set_sync(*out, l->sync_bytes);
  return KT_OK;
}

void kt_links_destroy(kt_links *l) {
  if (!l) return;
  for (int n = 0; l->up && l->down && n < l->p * l->d; n++) {
    free(l->up[n].start), free(l->up[n].end);
    free(l->down[n].start), free(l->down[n].end);
  }
  free(l->up), free(l->down), free(l->node), free(l->scratch), free(l->flows), free(l->last_end);
  free(l->sent);
  free(l->sync_bytes), free(l->sync_start);
  free(l);
}

int kt_links_nodes(const kt_links *l) { return l->n_nodes; }
int kt_links_node(const kt_links *l, int world_rank) { return l->node[world_rank]; }
const kt_link_classes *kt_links_classes(const kt_links *l) { return &l->lc; }

void kt_links_reset(kt_links *l) {
  l->lag = 0;
  l->n_flows = 0; /* the replayed durations stay for the next run */
  memset(l->sent, 0, (size_t)l->p);
  for (int r = 0; r < l->p; r++) l->last_end[r] = 0;
  for (int n = 0; n < l->p * l->d; n++) l->up[n].n = l->down[n].n = 0;
}

double kt_cost_hop(const kt_links *l, int from, int to, double bytes) {
  if (from == to) return 0;
  if (l->node[from] == l->node[to]) return l->lc.intra_latency + bytes / l->lc.intra_bw;
  return l->lc.inter_latency + bytes / l->lc.inter_bw;
}

/* Moves x past every interval of b that [x, x + len) overlaps: 1 if it moved. */
static int skip_busy(const busy_list *b, double *x, double len) {
  int moved = 0;
  for (size_t i = 0; i < b->n; i++)
    if (b->start[i] < *x + len && b->end[i] > *x) *x = b->end[i], moved = 1;
  return moved;
}

static void add_busy(busy_list *b, double s, double e) {
  if (b->n == b->cap) {
    size_t cap = b->cap ? 2 * b->cap : 64;
    double *ns = realloc(b->start, cap * sizeof *ns);
    if (ns) b->start = ns;
    double *ne = realloc(b->end, cap * sizeof *ne);
    if (ne) b->end = ne;
    if (!ns || !ne) return; /* out of memory: the transfer is costed, not booked */
    b->cap = cap;
  }
  b->start[b->n] = s, b->end[b->n] = e;
  b->n++;
}

/* Records transfer i between nodes of this run (the one at the same place
 * in the last run keeps its replayed durations; an all-reduce's steps have
 * places of their own, so the order its rings are booked in does not
 * matter): NULL when out of memory (it is then booked, not replayed). */
static kt__flow *log_flow(kt_links *l, size_t i, double t, double own, double copies, int a, int b,
                          int from, int to) {
  if (i >= l->cap_flows) {
    size_t cap = l->cap_flows ? 2 * l->cap_flows : 256;
    while (cap <= i) cap *= 2;
    kt__flow *n = realloc(l->flows, cap * sizeof *n);
    if (!n) return NULL;
    l->flows = n, l->cap_flows = cap;
  }
  for (size_t g = l->n_flows; g < i; g++) { /* skipped places are filled later in the same call; */
    kt__flow *e = &l->flows[g];             /* until then empty, keeping a replayed duration */
    double dur = g < l->replayed ? e->dur : 0, all = g < l->replayed ? e->dur_all : 0;
    *e = (kt__flow){.dur = dur, .dur_all = all};
  }
  kt__flow *f = &l->flows[i];
  if (i >= l->replayed) f->dur = f->dur_all = 0;
  f->start = t, f->own = own, f->copies = copies, f->a = a, f->b = b, f->from = from, f->to = to;
  if (i >= l->n_flows) l->n_flows = i + 1;
  return f;
}

/* Books len seconds on a's uplink and b's downlink from t on: the start. */
static double book(kt_links *l, int a, int b, double len, double t) {
  double x = t;
  while (skip_busy(&l->up[a], &x, len) | skip_busy(&l->down[b], &x, len)) {
  }
  if (len > 0) add_busy(&l->up[a], x, x + len), add_busy(&l->down[b], x, x + len);
  return x;
}

/* Transfer i between nodes a and b (world ranks from, to) sent at t: own
 * seconds at the link's full rate, then copies seconds of the other
 * replicas' copies on the same links. Takes the last replay's durations
 * when it had this transfer, else books it in turns. Returns when own is
 * through (latency not included), *all when the copies are. */
static double cross(kt_links *l, size_t i, double t, double own, double copies, int a, int b,
                    int from, int to, double *all) {
  kt__flow *f = log_flow(l, i, t, own, copies, a, b, from, to);
  if (f && i < l->replayed) { /* the last replay says how long it takes */
    add_busy(&l->up[a], t, t + f->dur_all), add_busy(&l->down[b], t, t + f->dur_all);
    *all = t + f->dur_all;
    return t + f->dur;
  }
  double start = book(l, a, b, own + copies, t);
  if (f) f->dur = start - t + own, f->dur_all = start - t + own + copies;
  *all = start + own + copies;
  return start + own;
}

double kt_links_transfer(kt_links *l, int from_rank, int to_rank, double bytes, double t) {
  int D = l->d, k = l->replica > 0 ? l->replica : 0;
  int a = l->node[from_rank * D + k], b = l->node[to_rank * D + k];
  if (from_rank == to_rank) return t;
  if (a == b) return t + l->lc.intra_latency + bytes / l->lc.intra_bw;
  /* Following one replica (l->replica >= 0): its own transfer; replicas
   * whose copies of this hop cross the same two links take turns, keyed by
   * the first of them (j). Following replica 0 with the others' copies: the
   * copies that leave a or enter b take turns after replica 0's, the link
   * stays busy for all of them and the last replica runs behind by the
   * others'. Either way replicas that share links stagger rather than
   * sending in lockstep, except on a hop's first crossing of the step: the
   * replicas start the step together, so their first copies leave at once
   * and share the link (each replica keyed on its own; replica 0 arrives
   * with the last copy). Measured on 2 emulated hosts at 100 Mbit/s, P
   * across and D inside: both replicas' first activations arrive after two
   * transfers' time, the backward link starting 38-48 ms into the step
   * where turns had 27. */
  unsigned char hop = to_rank == from_rank + 1   ? 1
                      : to_rank == from_rank - 1 ? 2
                                                 : 4; /* 4: a wrap */
  int first = !(l->sent[from_rank] & hop);
  l->sent[from_rank] |= hop;
  int share = 1, j = 0;
  if (l->replica >= 0) {
    while (j < k && !(l->node[from_rank * D + j] == a && l->node[to_rank * D + j] == b)) j++;
    if (first) j = k;
  } else {
    int up = 0, down = 0;
    for (int r = 0; r < D; r++) {
      int x = l->node[from_rank * D + r], y = l->node[to_rank * D + r];
      up += x == a && y != a;
      down += y == b && x != b;
    }
    share = up > down ? up : down;
  }
  double own = bytes / l->lc.inter_bw, all;
  double arrive = cross(l, l->n_flows, t, own, (share - 1) * own, a, b, from_rank * D + j,
                        to_rank * D + j, &all);
  if (first) arrive = all;
  if (all - arrive > l->lag) l->lag = all - arrive;
  return arrive + l->lc.inter_latency;
}

double kt_links_replica_lag(const kt_links *l) { return l->lag; }

void kt_links_follow_replica(kt_links *l, int replica) {
  l->replica = replica >= 0 && replica < l->d ? replica : -1;
  memset(l->sent, 0, (size_t)l->p);
  if (replica == 0)
    for (int r = 0; r < l->p; r++) l->last_end[r] = 0;
}

int kt_links_replica(const kt_links *l) { return l->replica; }
int kt_links_replicas(const kt_links *l) { return l->d; }

void kt_links_note_end(kt_links *l, int rank, double t) {
  if (rank >= 0 && rank < l->p && t > l->last_end[rank]) l->last_end[rank] = t;
}

double kt_links_last_end(const kt_links *l, int rank) {
  return rank >= 0 && rank < l->p ? l->last_end[rank] : 0;
}

/* A ring over the given leaders (world ranks, one per node) moving chunk
 * bytes per step for steps steps from t, its transfers logged from place
 * slot on (k per step): the end. A step starts when the last one ends. */
static double ring_between(kt_links *l, const int *leaders, int k, double chunk, int steps,
                           double t, size_t slot) {
  double len = chunk / l->lc.inter_bw, all;
  for (int s = 0; s < steps; s++) {
    double end = t;
    for (int i = 0; i < k; i++) {
      int from = leaders[i], to = leaders[(i + 1) % k];
      double done = cross(l, slot++, t, len, 0, l->node[from], l->node[to], from, to, &all) +
                    l->lc.inter_latency;
      if (done > end) end = done;
    }
    t = end;
  }
  return t;
}

/* The leaders (each distinct node's first member, world ranks) of stage
 * rank r's replica group into l->scratch: their count; *most: the most
 * members one node holds. */
static int group_leaders(const kt_links *l, int stage_rank, int *most) {
  int D = l->d, *leaders = l->scratch, k = 0;
  *most = 1;
  for (int q = 0; q < D; q++) {
    int w = stage_rank * D + q, n = l->node[w], seen = 0, same = 0;
    for (int i = 0; i < k; i++) seen |= l->node[leaders[i]] == n;
    if (!seen) leaders[k++] = w;
    for (int x = 0; x < D; x++) same += l->node[stage_rank * D + x] == n;
    if (same > *most) *most = same;
  }
  return k;
}

/* The transfers between nodes stage rank r's all-reduce logs. */
static size_t allreduce_flows(const kt_links *l, int stage_rank, double bytes) {
  int most, k = l->d < 2 || bytes <= 0 ? 1 : group_leaders(l, stage_rank, &most);
  return k > 1 ? (size_t)k * 2 * (size_t)(k - 1) : 0;
}

static double allreduce_at(kt_links *l, int stage_rank, double bytes, double t, size_t slot) {
  int D = l->d, most;
  if (D < 2 || bytes <= 0) return t;
  int k = group_leaders(l, stage_rank, &most);
  const kt_link_classes *c = &l->lc;
  if (k == 1) /* one node: a ring inside it */
    return t + 2.0 * (D - 1) * (c->intra_latency + bytes / D / c->intra_bw);
  if (most == 1) return ring_between(l, l->scratch, k, bytes / k, 2 * (k - 1), t, slot);
  /* hierarchical, as the MPI transport runs it: a node's other members send
   * their buffers to its leader one after another, the leaders run the ring,
   * and each leader sends the sum back to its members one after another */
  double inside = (most - 1) * (c->intra_latency + bytes / c->intra_bw);
  t = ring_between(l, l->scratch, k, bytes / k, 2 * (k - 1), t + inside, slot);
  return t + inside;
}

double kt_links_allreduce(kt_links *l, int stage_rank, double bytes, double t) {
  return allreduce_at(l, stage_rank, bytes, t, l->n_flows);
}

double kt_links_allreduce_all(kt_links *l, const double *bytes, const double *start, double *end) {
  /* booked in order of start (the links in time order), each rank's
   * transfers logged at places in rank order */
  int P = l->p;
  int *order = kt_calloc((size_t)P, sizeof *order);
  size_t *slot = kt_calloc((size_t)P, sizeof *slot), next = l->n_flows;
  double last = 0;
  for (int i = 0; i < P; i++) {
    int j = i;
    if (order)
      for (j = i; j > 0 && start && start[order[j - 1]] > start[i]; j--) order[j] = order[j - 1];
    if (order) order[j] = i;
    if (slot) slot[i] = next, next += allreduce_flows(l, i, bytes[i]);
  }
  for (int i = 0; i < P; i++) {
    int r = order ? order[i] : i;
    double t0 = start ? start[r] : 0;
    double t1 = allreduce_at(l, r, bytes[r], t0, slot ? slot[r] : l->n_flows);
    if (end) end[r] = t1;
    if (t1 > last) last = t1;
  }
  free(order), free(slot);
  return last;
}

void kt_links_set_sync(kt_links *l, const double *bytes) {
  l->has_sync = bytes != NULL;
  for (int r = 0; bytes && r < l->p; r++) l->sync_bytes[r] = bytes[r];
}

double kt_links_sync(kt_links *l) {
  double last = 0;
  for (int r = 0; r < l->p; r++) {
    l->sync_start[r] = l->last_end[r] + l->lag;
    if (l->sync_start[r] > last) last = l->sync_start[r];
  }
  if (l->has_sync) {
    double e = kt_links_allreduce_all(l, l->sync_bytes, l->sync_start, NULL);
    if (e > last) last = e;
  }
  return l->synced = last;
}

double kt_links_synced(const kt_links *l) { return l->synced; }
