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
  double left;    /* seconds of work at the link's full rate */
  int flow, copy; /* which flow; 1: its replicas' copies */
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

/* One replay in time order: the flows sorted by start, those waiting for
 * their pair's connection, those on the links, each link's crowd and burst
 * bucket. */
typedef struct {
  kt_links *l;
  kt__flow *f;
  int n, world;
  int *idx, *wait;     /* flows by start; started flows whose pair is busy */
  active_flow *act;    /* flows on the links */
  int *nup, *ndown;    /* flows on each node's uplink, downlink */
  char *busy;          /* world x world: a pair with a flow on the links */
  bucket *bup, *bdown; /* each link's burst */
  int next, n_act, n_wait;
  double t, cap, change;
} replay;

static void replay_free(replay *rp) {
  free(rp->idx), free(rp->wait), free(rp->act), free(rp->nup), free(rp->ndown), free(rp->busy);
  free(rp->bup), free(rp->bdown);
}

static int replay_init(replay *rp, kt_links *l) {
  int n = (int)l->n_flows, nodes = l->p * l->d;
  *rp = (replay){
      .l = l, .f = l->flows, .n = n, .world = nodes, .cap = l->lc.inter_burst / l->lc.inter_bw};
  rp->idx = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
  rp->wait = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
  rp->act = malloc(sizeof(active_flow) * (size_t)(n + 1));
  rp->nup = calloc((size_t)nodes, sizeof(int)), rp->ndown = calloc((size_t)nodes, sizeof(int));
  rp->busy = calloc((size_t)nodes * (size_t)nodes, 1);
  rp->bup = malloc(sizeof(bucket) * (size_t)nodes);
  rp->bdown = malloc(sizeof(bucket) * (size_t)nodes);
  if (!rp->idx || !rp->wait || !rp->act || !rp->nup || !rp->ndown || !rp->busy || !rp->bup ||
      !rp->bdown)
    return -1;
  for (int k = 0; k < nodes; k++)
    rp->bup[k] = rp->bdown[k] = (bucket){rp->cap, -INFINITY}; /* idle: full */
  for (int i = 0; i < n; i++) rp->idx[i] = i;
  sort_by_start(rp->idx, n, rp->f);
  rp->t = n ? rp->f[rp->idx[0]].start : 0;
  return 0;
}

/* Flows that have started join the links, in start order, a pair's first
 * waiting one once its connection is free; each takes what the buckets of
 * both its links hold (in series: the uplink spends all it holds). */
static void admit(replay *rp) {
  kt__flow *f = rp->f;
  while (rp->next < rp->n && f[rp->idx[rp->next]].start <= rp->t)
    rp->wait[rp->n_wait++] = rp->idx[rp->next++];
  for (int k = 0; k < rp->n_wait;) {
    kt__flow *x = &f[rp->wait[k]];
    char *pair = &rp->busy[x->from * rp->world + x->to];
    if (*pair) {
      k++;
      continue;
    }
    *pair = 1;
    bucket *up = &rp->bup[x->a], *down = &rp->bdown[x->b];
    if (!rp->nup[x->a]) fill(up, rp->t, rp->cap);
    if (!rp->ndown[x->b]) fill(down, rp->t, rp->cap);
    double at_once = fmin(x->own, fmin(up->tokens, down->tokens));
    up->tokens -= fmin(x->own, up->tokens), down->tokens -= at_once;
    rp->act[rp->n_act++] = (active_flow){x->own - at_once, rp->wait[k], 0};
    rp->nup[x->a]++, rp->ndown[x->b]++;
    memmove(rp->wait + k, rp->wait + k + 1, sizeof(int) * (size_t)(rp->n_wait - k - 1));
    rp->n_wait--;
  }
}

/* Time to the next event: a flow ends at its share of the rate, or one
 * starts (INFINITY: none). */
static double next_event(const replay *rp) {
  double dt = rp->next < rp->n ? rp->f[rp->idx[rp->next]].start - rp->t : INFINITY;
  for (int k = 0; k < rp->n_act; k++) {
    double need = rp->act[k].left * crowd(&rp->f[rp->act[k].flow], rp->nup, rp->ndown);
    if (need < dt) dt = need;
  }
  return dt;
}

/* Flows that ended leave the links (an original's copies start on the same
 * links after it); their durations, halfway to the last replay's. */
static void retire(replay *rp) {
  for (int k = 0; k < rp->n_act;) {
    active_flow *af = &rp->act[k];
    if (af->left > 1e-12) {
      k++;
      continue;
    }
    kt__flow *x = &rp->f[af->flow];
    int again = af->flow < (int)rp->l->replayed; /* its duration came from the last replay */
    if (!af->copy) {
      double d = rp->t - x->start;
      if (fabs(d - x->dur) > rp->change) rp->change = fabs(d - x->dur);
      if (again) d = 0.5 * (d + x->dur);
      x->dur = d, x->dur_all = d;
      if (x->copies > 0) {
        *af = (active_flow){x->copies, af->flow, 1};
        continue; /* same links, still counted on them */
      }
    } else {
      x->dur_all = again ? 0.5 * (rp->t - x->start + x->dur_all) : rp->t - x->start;
    }
    rp->nup[x->a]--, rp->ndown[x->b]--;
    if (!rp->nup[x->a]) rp->bup[x->a].since = rp->t; /* idle from here: filling */
    if (!rp->ndown[x->b]) rp->bdown[x->b].since = rp->t;
    rp->busy[x->from * rp->world + x->to] = 0;
    *af = rp->act[--rp->n_act];
  }
}

/* One pair's messages travel one after another (one connection): a flow
 * joins the links when it has started and its pair has nothing on them. */
double kt_links_share(kt_links *l) {
  replay rp;
  if (replay_init(&rp, l)) {
    replay_free(&rp);
    return INFINITY; /* out of memory: the next run books in turns */
  }
  while (rp.next < rp.n || rp.n_act > 0 || rp.n_wait > 0) {
    admit(&rp);
    double dt = next_event(&rp);
    if (!isfinite(dt)) break;
    for (int k = 0; k < rp.n_act; k++)
      rp.act[k].left -= dt / crowd(&rp.f[rp.act[k].flow], rp.nup, rp.ndown);
    rp.t += dt;
    retire(&rp);
  }
  replay_free(&rp);
  l->replayed = l->n_flows;
  return rp.change;
}
