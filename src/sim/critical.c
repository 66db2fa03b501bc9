/* The critical path of a timeline and every action's slack.
 *
 * The timeline's actions form a graph under the schedule's rules
 * (kaiten/schedule.h): each action follows its rank's previous one (which
 * holds the rank send_overhead longer per message it sent) and the action
 * that made its input (kt_action_needs), handed over `hop` later when that
 * one ran on another rank; an overlapped group publishes when it all ends,
 * as the simulator runs it. The critical path walks back from the action
 * that ends last through the predecessor that released it last; the slack
 * is the latest start that keeps the step's end (a backward pass over the
 * same graph) minus the start.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/sim.h"

typedef struct {
  const kt_timeline *t;
  size_t n;
  int S, M;
  size_t *order;     /* events by (rank, start): each rank's run order */
  long *prev, *next; /* the rank's previous and next event (-1: none) */
  long *made;        /* (result, stage, mb) -> the event that made it */
  long *needs;       /* (result, stage, mb) -> the event that waits for it */
  int *srank;        /* stage -> rank */
  double *pub;       /* when an event's results leave (its group's end) */
  double *held;      /* how long its rank is held after its end (sends posted) */
  size_t *gate;      /* the first event of its overlapped group (itself when alone):
                        a group starts when every member's input is there */
} graph;

/* A sort key per event: no globals, so threads may each run a walk. */
typedef struct {
  int32_t rank;
  double start;
  size_t index;
} run_key;

static int by_rank_start(const void *a, const void *b) {
  const run_key *x = a, *y = b;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  if (x->start != y->start) return x->start < y->start ? -1 : 1;
  return x->index < y->index ? -1 : x->index > y->index;
}

/* Each rank's events in run order, into g->order. -1: out of memory. */
static int rank_orders(graph *g) {
  run_key *keys = kt_calloc(g->n ? g->n : 1, sizeof *keys);
  if (!keys) return -1;
  for (size_t i = 0; i < g->n; i++)
    keys[i] = (run_key){g->t->events[i].rank, g->t->events[i].start, i};
  qsort(keys, g->n, sizeof *keys, by_rank_start);
  for (size_t i = 0; i < g->n; i++) g->order[i] = keys[i].index;
  free(keys);
  return 0;
}

static size_t slot(const graph *g, int result, int stage, int mb) {
  return ((size_t)result * (size_t)g->S + (size_t)stage) * (size_t)g->M + (size_t)mb;
}

static void graph_free(graph *g) {
  free(g->order);
  free(g->prev);
  free(g->next);
  free(g->made);
  free(g->needs);
  free(g->srank);
  free(g->pub);
  free(g->held);
  free(g->gate);
}

/* Sizes, the rank orders and the stage owners; -1 on a bad event. */
static int graph_shape(graph *g, const kt_timeline *t) {
  g->t = t, g->n = t->n_events, g->S = 1, g->M = 1;
  for (size_t i = 0; i < g->n; i++) {
    const kt_event *e = &t->events[i];
    if (e->rank < 0 || e->rank >= t->p || e->stage < 0 || e->mb < 0 || e->op >= KT_OP_COUNT ||
        e->stage >= KT_MAX_RANKS * KT_MAX_CHUNKS || e->mb >= KT_MAX_MICROBATCHES)
      return -1;
    if (e->stage + 1 > g->S) g->S = e->stage + 1;
    if (e->mb + 1 > g->M) g->M = e->mb + 1;
  }
  return 0;
}

static kt_status graph_build(graph *g, const kt_timeline *t, double send_overhead, kt_error *err) {
  memset(g, 0, sizeof *g);
  if (graph_shape(g, t))
    return kt_fail(err, KT_EINVAL, "critical path: an event outside the timeline's ranks");
  size_t n = g->n ? g->n : 1, cells = 3 * (size_t)g->S * (size_t)g->M;
  g->order = kt_calloc(n, sizeof *g->order);
  g->prev = kt_calloc(n, sizeof *g->prev);
  g->next = kt_calloc(n, sizeof *g->next);
  g->pub = kt_calloc(n, sizeof *g->pub);
  g->held = kt_calloc(n, sizeof *g->held);
  g->gate = kt_calloc(n, sizeof *g->gate);
  g->made = kt_calloc(cells, sizeof *g->made);
  g->needs = kt_calloc(cells, sizeof *g->needs);
  g->srank = kt_calloc((size_t)g->S, sizeof *g->srank);
  if (!g->order || !g->prev || !g->next || !g->pub || !g->held || !g->gate || !g->made ||
      !g->needs || !g->srank) {
    graph_free(g);
    return kt_fail(err, KT_ENOMEM, "out of memory for the critical path of %zu actions", g->n);
  }
  for (size_t i = 0; i < cells; i++) g->made[i] = g->needs[i] = -1;
  for (size_t i = 0; i < g->n; i++) {
    const kt_event *e = &t->events[i];
    g->srank[e->stage] = e->rank;
    unsigned pubs = kt_action_publishes(e->op);
    for (int r = 0; r < KT_OUT_COUNT; r++)
      if (pubs & (1u << r)) g->made[slot(g, r, e->stage, e->mb)] = (long)i;
    int from;
    kt_output need = kt_action_needs(e->op, e->stage, g->S, &from);
    if (need != KT_OUT_NONE && from >= 0) g->needs[slot(g, need, from, e->mb)] = (long)i;
  }
  if (rank_orders(g)) {
    graph_free(g);
    return kt_fail(err, KT_ENOMEM, "out of memory for the critical path of %zu actions", g->n);
  }
  for (size_t k = 0; k < g->n; k++) {
    size_t i = g->order[k];
    int same_prev = k > 0 && t->events[g->order[k - 1]].rank == t->events[i].rank;
    int same_next = k + 1 < g->n && t->events[g->order[k + 1]].rank == t->events[i].rank;
    g->prev[i] = same_prev ? (long)g->order[k - 1] : -1;
    g->next[i] = same_next ? (long)g->order[k + 1] : -1;
  }
  /* overlapped groups (runs of OVERLAP_NEXT on a rank): results leave when
   * the group ends, and the rank is held after it for all its sends */
  for (size_t k = 0; k < g->n;) {
    size_t first = k, last = k;
    while ((t->events[g->order[last]].flags & KT_ACTION_OVERLAP_NEXT) &&
           g->next[g->order[last]] >= 0)
      last++;
    int sent = 0;
    for (size_t j = first; j <= last; j++) {
      const kt_event *e = &t->events[g->order[j]];
      unsigned pubs = kt_action_publishes(e->op);
      for (int r = 0; r < KT_OUT_COUNT; r++) {
        int to = (pubs & (1u << r)) ? kt_output_consumer((kt_output)r, e->stage, g->S) : -1;
        sent += to >= 0 && g->srank[to] != e->rank;
      }
    }
    for (size_t j = first; j <= last; j++) {
      g->pub[g->order[j]] = t->events[g->order[last]].end;
      g->held[g->order[j]] = j == last ? sent * send_overhead : 0;
      g->gate[g->order[j]] = g->order[first];
    }
    k = last + 1;
  }
  return KT_OK;
}

/* The event that made a's input, and when it reached a's rank (-1: none). */
static long producer(const graph *g, size_t a, double hop, double *release) {
  const kt_event *e = &g->t->events[a];
  int from;
  kt_output need = kt_action_needs(e->op, e->stage, g->S, &from);
  if (need == KT_OUT_NONE || from < 0) return -1;
  long q = g->made[slot(g, need, from, e->mb)];
  if (q >= 0) *release = g->pub[q] + (g->t->events[q].rank != e->rank ? hop : 0);
  return q;
}

/* The next member of a's overlapped group, -1 after the last. */
static long next_member(const graph *g, size_t a) {
  return (g->t->events[a].flags & KT_ACTION_OVERLAP_NEXT) ? g->next[a] : -1;
}

/* Of the inputs a group's start (gate) waits for, the one that arrived
 * last (-1: none). */
static long last_input(const graph *g, size_t gate, double hop, double *release) {
  long best = -1;
  *release = -INFINITY;
  for (long m = (long)gate; m >= 0; m = next_member(g, (size_t)m)) {
    double r;
    long q = producer(g, (size_t)m, hop, &r);
    if (q >= 0 && (best < 0 || r > *release)) best = q, *release = r;
  }
  return best;
}

/* Counts (add 1) or releases (add -1, queueing what is free) the edges
 * into x: its rank's previous event, and for a group's first event the
 * makers of every member's input. */
static void edge(long from, int add, int *out, size_t *queue, size_t *tail) {
  if (from < 0) return;
  out[from] += add;
  if (add < 0 && !out[from]) queue[(*tail)++] = (size_t)from;
}

static void edges_into(const graph *g, size_t x, int add, int *out, size_t *queue, size_t *tail) {
  edge(g->prev[x], add, out, queue, tail);
  if (g->gate[x] != x) return;
  for (long m = (long)x; m >= 0; m = next_member(g, (size_t)m)) {
    double r;
    edge(producer(g, (size_t)m, 0, &r), add, out, queue, tail);
  }
}

/* The latest end of a that keeps the step's end: before its rank's next
 * event (and what its sends hold) and before each consumer's group starts. */
static double latest_end(const graph *g, size_t a, double hop, double end, const double *ls) {
  const kt_event *ev = g->t->events, *e = &ev[a];
  double lf = end;
  if (g->next[a] >= 0) lf = fmin(lf, ls[g->next[a]] - g->held[a]);
  unsigned pubs = kt_action_publishes(e->op);
  for (int r = 0; r < KT_OUT_COUNT; r++) {
    long c = (pubs & (1u << r)) ? g->needs[slot(g, r, e->stage, e->mb)] : -1;
    if (c < 0 || g->made[slot(g, r, e->stage, e->mb)] != (long)a) continue;
    double gap = g->pub[a] - e->end + (ev[c].rank != e->rank ? hop : 0);
    lf = fmin(lf, ls[g->gate[c]] - gap);
  }
  return lf;
}

/* Latest starts, successors first (a topological order of the reversed graph). */
static kt_status latest_starts(const graph *g, double hop, double end, double *ls, kt_error *err) {
  int *out = kt_calloc(g->n ? g->n : 1, sizeof *out);
  size_t *queue = kt_calloc(g->n ? g->n : 1, sizeof *queue);
  if (!out || !queue) {
    free(out);
    free(queue);
    return kt_fail(err, KT_ENOMEM, "out of memory for the slack of %zu actions", g->n);
  }
  size_t head = 0, tail = 0;
  for (size_t i = 0; i < g->n; i++) edges_into(g, i, 1, out, queue, &tail);
  for (size_t i = 0; i < g->n; i++)
    if (!out[i]) queue[tail++] = i;
  while (head < tail) {
    size_t a = queue[head++];
    ls[a] = latest_end(g, a, hop, end, ls) - (g->t->events[a].end - g->t->events[a].start);
    edges_into(g, a, -1, out, queue, &tail);
  }
  free(out);
  free(queue);
  if (head != g->n)
    return kt_fail(err, KT_EINVAL,
                   "critical path: the timeline's actions wait for each other "
                   "in a cycle");
  return KT_OK;
}

/* The chain back from the last action: each step to the predecessor that
 * released it last (on a tie the hand-over from another rank). */
static size_t walk(const graph *g, double hop, size_t *path) {
  const kt_event *ev = g->t->events;
  size_t last = 0;
  for (size_t i = 1; i < g->n; i++)
    if (ev[i].end > ev[last].end || (ev[i].end == ev[last].end && ev[i].rank < ev[last].rank))
      last = i;
  size_t k = 0;
  long a = g->n ? (long)last : -1;
  while (a >= 0 && k < g->n) {
    path[k++] = (size_t)a;
    double rp = -INFINITY, rq = -INFINITY;
    long p = g->prev[a], q = g->gate[a] == (size_t)a ? last_input(g, (size_t)a, hop, &rq) : -1;
    if (p >= 0) rp = ev[p].end + g->held[p];
    if (q < 0) a = p;
    else if (p < 0) a = q;
    else a = rq >= rp - 1e-12 * fmax(1, fabs(rp)) ? q : p;
  }
  for (size_t i = 0; i < k / 2; i++) {
    size_t x = path[i];
    path[i] = path[k - 1 - i], path[k - 1 - i] = x;
  }
  return k;
}

kt_status kt_timeline_critical(const kt_timeline *t, double hop, double send_overhead,
                               kt_critical *out, kt_error *err) {
  memset(out, 0, sizeof *out);
  if (!(hop >= 0) || !isfinite(hop) || !(send_overhead >= 0) || !isfinite(send_overhead))
    return kt_fail(err, KT_EINVAL,
                   "critical path: hop %g and send overhead %g must be finite "
                   "and >= 0",
                   hop, send_overhead);
  graph g;
  kt_status st = graph_build(&g, t, send_overhead, err);
  if (st) return st;
  size_t n = g.n ? g.n : 1;
  out->slack = kt_calloc(n, sizeof *out->slack);
  out->path = kt_calloc(n, sizeof *out->path);
  if (!out->slack || !out->path) {
    graph_free(&g);
    kt_critical_free(out);
    return kt_fail(err, KT_ENOMEM, "out of memory for the slack of %zu actions", g.n);
  }
  out->end = -INFINITY;
  for (size_t i = 0; i < g.n; i++) out->end = fmax(out->end, t->events[i].end);
  if (!g.n) out->end = 0;
  if ((st = latest_starts(&g, hop, out->end, out->slack, err))) {
    graph_free(&g);
    kt_critical_free(out);
    return st;
  }
  for (size_t i = 0; i < g.n; i++) {
    double s = out->slack[i] - t->events[i].start;
    /* rounding leaves a few ulps where the answer is 0; a measured step
     * (hop 0) never waits less than nothing */
    out->slack[i] = s > 1e-12 * fmax(1, fabs(out->end)) ? s : 0;
  }
  out->n_path = walk(&g, hop, out->path);
  graph_free(&g);
  return KT_OK;
}

void kt_critical_free(kt_critical *c) {
  free(c->slack);
  free(c->path);
  memset(c, 0, sizeof *c);
}
