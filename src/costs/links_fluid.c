/* Transfers that share a link at the same time share its bandwidth (TCP's
 * flows do), which booking them in turns (links.c) gets wrong for the one
 * booked first: it arrives early while the other one, started a moment
 * later, in fact slowed it down. The simulator does not run in time order,
 * so it cannot know that while it books. Instead it runs again: the flows
 * of one run (each transfer's start, bytes, uplink and downlink) are
 * replayed in time order with every active flow on a link getting an equal
 * share of it (the most crowded of its two links decides), and the next
 * run takes each transfer's duration from that replay, halfway between
 * the last one and the new one once a replay has run: where the links are
 * saturated, full steps swing (slow durations spread the next run's
 * transfers apart, so its replay finds them fast, and back) and where the
 * runs stopped decided the answer (a 0.01% change in bandwidth moved a
 * prediction by 5%); half steps settle. A replica's copies
 * of a transfer follow replica 0's on the same links (they take turns with
 * it, as in the booking), and share with everything else. One pair's
 * messages keep their order: they travel one connection.
 *
 * A link with a burst allowance (inter_burst: a token bucket, as a
 * rate-limited link has) passes that many bytes of a transfer at once when
 * it has idled long enough to fill its bucket: the bucket fills at the
 * link's rate while nothing crosses, holds at most the burst, and a
 * transfer takes what both its uplink's and its downlink's buckets hold
 * (the two are in series: the uplink spends all it holds, the downlink
 * what passed it at once).
 * Measured on emulated hosts (tbf, bench/README.md), a message after an
 * idle gap arrives burst / rate sooner, whatever its size, and a link that
 * never idles gives none. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "costs/links_internal.h"

typedef struct {
  double left;     /* seconds of work at the link's full rate */
  int flow, copy;  /* which flow; 1: its replicas' copies */
} active_flow;

/* A link's burst bucket, in seconds of work at its rate: what it holds,
 * and since when it has been idle and filling. */
typedef struct {
  double tokens, since;
} bucket;

/* Fills an idle link's bucket up to t (capacity cap). */
static void fill(bucket *k, double t, double cap) {
  k->tokens = fmin(cap, k->tokens + fmax(0, t - k->since));
  k->since = t;
}

/* Insertion sort of n flow indices by start (flows are logged nearly in
 * that order already), ties in log order. */
static void sort_by_start(int *idx, int n, const kt__flow *f) {
  for (int i = 1; i < n; i++) {
    int x = idx[i], j = i;
    while (j > 0 && f[idx[j - 1]].start > f[x].start) idx[j] = idx[j - 1], j--;
    idx[j] = x;
  }
}

static int crowd(const kt__flow *x, const int *nup, const int *ndown) {
  return nup[x->a] > ndown[x->b] ? nup[x->a] : ndown[x->b];
}

void kt_links_share_forget(kt_links *l) { l->replayed = 0; }

/* One pair's messages travel one after another (one connection): a flow
 * joins the links when it has started and its pair has nothing on them. */
double kt_links_share(kt_links *l) {
  int n = (int)l->n_flows, nodes = l->p * l->d, world = l->p * l->d;
  kt__flow *f = l->flows;
  int *idx = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
  int *wait = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
  active_flow *act = malloc(sizeof(active_flow) * (size_t)(n + 1));
  int *nup = calloc((size_t)nodes, sizeof(int)), *ndown = calloc((size_t)nodes, sizeof(int));
  char *busy = calloc((size_t)world * (size_t)world, 1); /* a pair with a flow on the links */
  bucket *bup = malloc(sizeof(bucket) * (size_t)nodes);
  bucket *bdown = malloc(sizeof(bucket) * (size_t)nodes);
  double change = 0, cap = l->lc.inter_burst / l->lc.inter_bw;
  if (!idx || !wait || !act || !nup || !ndown || !busy || !bup || !bdown) {
    free(idx), free(wait), free(act), free(nup), free(ndown), free(busy), free(bup), free(bdown);
    return INFINITY; /* out of memory: the next run books in turns */
  }
  for (int k = 0; k < nodes; k++) bup[k] = bdown[k] = (bucket){cap, -INFINITY}; /* idle: full */
  for (int i = 0; i < n; i++) idx[i] = i;
  sort_by_start(idx, n, f);
  int next = 0, n_act = 0, n_wait = 0;
  double t = n ? f[idx[0]].start : 0;
  while (next < n || n_act > 0 || n_wait > 0) {
    while (next < n && f[idx[next]].start <= t) wait[n_wait++] = idx[next++];
    for (int k = 0; k < n_wait;) { /* in start order: a pair's first waiting flow goes */
      kt__flow *x = &f[wait[k]];
      if (busy[x->from * world + x->to]) {
        k++;
        continue;
      }
      busy[x->from * world + x->to] = 1;
      if (!nup[x->a]) fill(&bup[x->a], t, cap);
      if (!ndown[x->b]) fill(&bdown[x->b], t, cap);
      /* in series (above): the uplink spends all it holds */
      double at_once = fmin(x->own, fmin(bup[x->a].tokens, bdown[x->b].tokens));
      bup[x->a].tokens -= fmin(x->own, bup[x->a].tokens), bdown[x->b].tokens -= at_once;
      act[n_act++] = (active_flow){x->own - at_once, wait[k], 0};
      nup[x->a]++, ndown[x->b]++;
      memmove(wait + k, wait + k + 1, sizeof(int) * (size_t)(n_wait - k - 1));
      n_wait--;
    }
    /* the next event: a flow ends at its share of the rate, or one starts */
    double dt = next < n ? f[idx[next]].start - t : INFINITY;
    for (int k = 0; k < n_act; k++) {
      double need = act[k].left * crowd(&f[act[k].flow], nup, ndown);
      if (need < dt) dt = need;
    }
    if (!isfinite(dt)) break;
    for (int k = 0; k < n_act; k++) act[k].left -= dt / crowd(&f[act[k].flow], nup, ndown);
    t += dt;
    for (int k = 0; k < n_act;) { /* flows that ended (a copy starts after its original) */
      if (act[k].left > 1e-12) {
        k++;
        continue;
      }
      kt__flow *x = &f[act[k].flow];
      int again = act[k].flow < (int)l->replayed; /* its duration came from the last replay */
      if (!act[k].copy) {
        double d = t - x->start;
        if (fabs(d - x->dur) > change) change = fabs(d - x->dur);
        if (again) d = 0.5 * (d + x->dur);
        x->dur = d, x->dur_all = d;
        if (x->copies > 0) {
          act[k] = (active_flow){x->copies, act[k].flow, 1};
          continue; /* same links, still counted on them */
        }
      } else {
        x->dur_all = again ? 0.5 * (t - x->start + x->dur_all) : t - x->start;
      }
      nup[x->a]--, ndown[x->b]--;
      if (!nup[x->a]) bup[x->a].since = t; /* idle from here: filling */
      if (!ndown[x->b]) bdown[x->b].since = t;
      busy[x->from * world + x->to] = 0;
      act[k] = act[--n_act];
    }
  }
  free(idx), free(wait), free(act), free(nup), free(ndown), free(busy), free(bup), free(bdown);
  l->replayed = l->n_flows;
  return change;
}
