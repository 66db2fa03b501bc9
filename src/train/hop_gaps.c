/* The hand-overs of a measured step (kaiten/train.h's calibration and the
 * autopilot's detector): for every action that sat waiting for a remote
 * input, the gap between its producer's end and its own start. */
#include <math.h>
#include <stdlib.h>

#include "train/autopilot.h"

/* One event seen as a producer or consumer of a boundary tensor: the F of a
 * (stage, mb) or its B/I (class 1), in start order within its group. */
typedef struct {
  int stage, mb, cls;
  double start, end;
  size_t idx;
} hop_ref;

static int cmp_hop(const void *a, const void *b) {
  const hop_ref *x = a, *y = b;
  if (x->stage != y->stage) return x->stage < y->stage ? -1 : 1;
  if (x->mb != y->mb) return x->mb < y->mb ? -1 : 1;
  if (x->cls != y->cls) return x->cls < y->cls ? -1 : 1;
  return x->start < y->start ? -1 : x->start > y->start;
}

static size_t find_group(const hop_ref *refs, size_t n, int stage, int mb, int cls) {
  size_t lo = 0, hi = n;
  hop_ref key = {stage, mb, cls, -INFINITY, 0, 0};
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (cmp_hop(&refs[mid], &key) < 0) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

size_t kt__hop_gaps(const kt_timeline *t, const kt_schedule *s, double *gaps, int *from_rank,
                    int *to_rank, size_t *consumer) {
  size_t n = t->n_events;
  hop_ref *refs = kt_calloc(n + 1, sizeof *refs);
  size_t *occ = kt_calloc(n + 1, sizeof *occ);
  double *prev_end = kt_calloc(n + 1, sizeof *prev_end);
  size_t ng = 0;
  if (!refs || !occ || !prev_end) goto done;
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    const kt_event *e = &t->events[i];
    prev_end[i] = i > 0 && t->events[i - 1].rank == e->rank ? t->events[i - 1].end : -INFINITY;
    if (e->op == KT_OP_W) continue;
    refs[m++] = (hop_ref){e->stage, e->mb, e->op == KT_OP_F ? 0 : 1, e->start, e->end, i};
  }
  qsort(refs, m, sizeof *refs, cmp_hop);
  /* occurrence (accumulation round) of each event within its group */
  for (size_t i = 0, k = 0; i < m; i++) {
    k = i > 0 && refs[i].stage == refs[i - 1].stage && refs[i].mb == refs[i - 1].mb &&
                refs[i].cls == refs[i - 1].cls
            ? k + 1
            : 0;
    occ[refs[i].idx] = k;
  }
  int S = kt_schedule_stages(s);
  for (size_t i = 0; i < n; i++) {
    const kt_event *e = &t->events[i];
    int from;
    kt_output need = kt_action_needs(e->op, e->stage, S, &from);
    if ((need != KT_OUT_F && need != KT_OUT_BI) || from == e->stage) continue;
    if (kt_stage_rank(s, from) == kt_stage_rank(s, e->stage)) continue; /* in memory */
    size_t g = find_group(refs, m, from, e->mb, e->op == KT_OP_F ? 0 : 1) + occ[i];
    if (g >= m || refs[g].stage != from || refs[g].mb != e->mb) continue;
    double produced = refs[g].end;
    if (!(prev_end[i] < produced && e->start >= produced)) continue;
    if (from_rank) from_rank[ng] = kt_stage_rank(s, from), to_rank[ng] = kt_stage_rank(s, e->stage);
    if (consumer) consumer[ng] = i;
    gaps[ng++] = e->start - produced;
  }
done:
  free(refs);
  free(occ);
  free(prev_end);
  return ng;
}
