/* Timeline storage and the metrics every report shows. */
#include "kaiten/timeline.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/schedule.h"

kt_status kt_timeline_init(kt_timeline *t, int p, const char *time_unit, const char *mem_unit) {
  memset(t, 0, sizeof *t);
  t->p = p;
  snprintf(t->time_unit, sizeof t->time_unit, "%s", time_unit ? time_unit : "unit");
  snprintf(t->mem_unit, sizeof t->mem_unit, "%s", mem_unit ? mem_unit : "unit");
  return KT_OK;
}

void kt_timeline_free(kt_timeline *t) {
  free(t->events);
  free(t->mem);
  free(t->comm);
  memset(t, 0, sizeof *t);
}

kt_status kt_timeline_add_event(kt_timeline *t, const kt_event *e) {
  if (kt_grow((void **)&t->events, &t->cap_events, t->n_events + 1, sizeof *e) != 0)
    return KT_ENOMEM;
  t->events[t->n_events++] = *e;
  return KT_OK;
}

kt_status kt_timeline_reserve(kt_timeline *t, size_t n_events, size_t n_mem) {
  if (kt_grow((void **)&t->events, &t->cap_events, n_events, sizeof *t->events) ||
      kt_grow((void **)&t->mem, &t->cap_mem, n_mem, sizeof *t->mem))
    return KT_ENOMEM;
  return KT_OK;
}

kt_status kt_timeline_add_mem(kt_timeline *t, int rank, double time, double value) {
  if (kt_grow((void **)&t->mem, &t->cap_mem, t->n_mem + 1, sizeof *t->mem) != 0) return KT_ENOMEM;
  t->mem[t->n_mem++] = (kt_mem_sample){rank, time, value};
  return KT_OK;
}

kt_status kt_timeline_add_comm(kt_timeline *t, const kt_event *e) {
  if (kt_grow((void **)&t->comm, &t->cap_comm, t->n_comm + 1, sizeof *e) != 0) return KT_ENOMEM;
  t->comm[t->n_comm++] = *e;
  return KT_OK;
}

kt_status kt_timeline_copy(kt_timeline *dst, const kt_timeline *src) {
  dst->n_events = dst->n_mem = dst->n_comm = 0;
  dst->p = src->p;
  memcpy(dst->time_unit, src->time_unit, sizeof dst->time_unit);
  memcpy(dst->mem_unit, src->mem_unit, sizeof dst->mem_unit);
  if (kt_grow((void **)&dst->events, &dst->cap_events, src->n_events, sizeof *dst->events) ||
      kt_grow((void **)&dst->comm, &dst->cap_comm, src->n_comm, sizeof *dst->comm) ||
      kt_grow((void **)&dst->mem, &dst->cap_mem, src->n_mem, sizeof *dst->mem))
    return KT_ENOMEM;
  if (src->n_events) memcpy(dst->events, src->events, src->n_events * sizeof *dst->events);
  if (src->n_comm) memcpy(dst->comm, src->comm, src->n_comm * sizeof *dst->comm);
  if (src->n_mem) memcpy(dst->mem, src->mem, src->n_mem * sizeof *dst->mem);
  dst->n_events = src->n_events, dst->n_comm = src->n_comm, dst->n_mem = src->n_mem;
  return KT_OK;
}

/* Communication events grouped by rank, each rank's in the order given
 * (program order: a counting sort, stable by construction). */
static void sort_comm_by_rank(kt_timeline *t) {
  int sorted = 1;
  for (size_t i = 1; i < t->n_comm && sorted; i++) sorted = t->comm[i - 1].rank <= t->comm[i].rank;
  if (sorted || t->p <= 0) return;
  size_t *first = kt_calloc((size_t)t->p + 1, sizeof *first);
  kt_event *out = kt_calloc(t->n_comm, sizeof *out);
  if (!first || !out) { /* leave them as they are */
    free(first);
    free(out);
    return;
  }
  for (size_t i = 0; i < t->n_comm; i++) {
    int r = t->comm[i].rank;
    first[(r >= 0 && r < t->p ? r : t->p - 1) + 1]++;
  }
  for (int r = 0; r < t->p; r++) first[r + 1] += first[r];
  for (size_t i = 0; i < t->n_comm; i++) {
    int r = t->comm[i].rank;
    out[first[r >= 0 && r < t->p ? r : t->p - 1]++] = t->comm[i];
  }
  free(t->comm);
  t->comm = out;
  t->cap_comm = t->n_comm;
  free(first);
}

static int cmp_event(const void *a, const void *b) {
  const kt_event *x = a, *y = b;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  if (x->start != y->start) return x->start < y->start ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  return 0;
}

static int cmp_mem(const void *a, const void *b) {
  const kt_mem_sample *x = a, *y = b;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  if (x->t != y->t) return x->t < y->t ? -1 : 1;
  return 0;
}

/* qsort is not stable; events with equal (rank, start, end) keep list order
 * only when they are already sorted, which is how both executors emit them. */
static int is_sorted_events(const kt_timeline *t) {
  for (size_t i = 1; i < t->n_events; i++)
    if (cmp_event(&t->events[i - 1], &t->events[i]) > 0) return 0;
  return 1;
}

void kt_timeline_sort(kt_timeline *t) {
  if (!is_sorted_events(t)) qsort(t->events, t->n_events, sizeof *t->events, cmp_event);
  int mem_sorted = 1;
  for (size_t i = 1; i < t->n_mem && mem_sorted; i++)
    if (cmp_mem(&t->mem[i - 1], &t->mem[i]) > 0) mem_sorted = 0;
  if (!mem_sorted) qsort(t->mem, t->n_mem, sizeof *t->mem, cmp_mem);
  sort_comm_by_rank(t);
}

void kt_metrics_finish(kt_metrics *m) {
  m->makespan = m->span = m->total_busy = 0;
  double lo = INFINITY, hi = -INFINITY;
  for (int r = 0; r < m->p; r++) {
    kt_rank_metrics *rm = &m->ranks[r];
    if (rm->actions && rm->end - rm->start > m->span) m->span = rm->end - rm->start;
    if (rm->actions && rm->start < lo) lo = rm->start;
    if (rm->actions && rm->end > hi) hi = rm->end;
    m->total_busy += rm->busy;
  }
  if (hi > lo) m->makespan = hi - lo;
  kt_metrics_set_period(m, m->makespan, -1);
}

void kt_metrics_set_period(kt_metrics *m, double period, int step_sync) {
  m->period = period;
  m->step_sync = step_sync;
  for (int r = 0; r < m->p; r++) m->ranks[r].idle = period - m->ranks[r].busy;
  m->bubble_ratio = period > 0 ? 1.0 - m->total_busy / (m->p * period) : 0.0;
}

void kt_metrics_free(kt_metrics *m) {
  free(m->ranks);
  memset(m, 0, sizeof *m);
}

/* In-flight counting needs each rank's events in start order (ties keep list
 * order). Both executors append a rank's events in execution order, so one
 * sequential pass with per-rank state is the common case; a timeline whose
 * per-rank order is broken (e.g. merged by hand) is sorted first. */
static int per_rank_ordered(const kt_timeline *t, double *last) {
  for (int r = 0; r < t->p; r++) last[r] = -INFINITY;
  for (size_t i = 0; i < t->n_events; i++) {
    const kt_event *e = &t->events[i];
    if (e->rank < 0 || e->rank >= t->p) continue;
    if (e->start < last[e->rank]) return 0;
    last[e->rank] = e->start;
  }
  return 1;
}

static int cmp_event_stable(const void *a, const void *b) {
  const kt_event *x = *(const kt_event *const *)a, *y = *(const kt_event *const *)b;
  if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
  if (x->start != y->start) return x->start < y->start ? -1 : 1;
  return x < y ? -1 : (x > y);
}

kt_status kt_timeline_metrics(const kt_timeline *t, kt_metrics *out, kt_error *err) {
  memset(out, 0, sizeof *out);
  out->p = t->p;
  out->ranks = kt_calloc((size_t)t->p, sizeof *out->ranks);
  int *inflight = kt_calloc((size_t)t->p, sizeof *inflight);
  double *last = kt_calloc((size_t)t->p, sizeof *last);
  const kt_event **order = NULL;
  if (!out->ranks || !inflight || !last) goto oom;
  if (!per_rank_ordered(t, last)) {
    order = kt_calloc(t->n_events, sizeof *order);
    if (!order) goto oom;
    for (size_t i = 0; i < t->n_events; i++) order[i] = &t->events[i];
    qsort(order, t->n_events, sizeof *order, cmp_event_stable);
  }
  for (int r = 0; r < t->p; r++) out->ranks[r].rank = r;
  for (size_t i = 0; i < t->n_events; i++) {
    const kt_event *e = order ? order[i] : &t->events[i];
    if (e->rank < 0 || e->rank >= t->p) continue;
    kt_rank_metrics *rm = &out->ranks[e->rank];
    if (rm->actions == 0) {
      rm->start = e->start;
      rm->end = e->end;
    }
    if (e->start < rm->start) rm->start = e->start;
    if (e->end > rm->end) rm->end = e->end;
    rm->busy += e->end - e->start;
    rm->actions++;
    rm->bytes_sent += e->bytes;
    rm->comm_time += e->comm_time;
    /* in flight: +1 at F, -1 at B or W; I keeps the pair in flight */
    if (e->op == KT_OP_F) inflight[e->rank]++;
    if (inflight[e->rank] > rm->peak_inflight) rm->peak_inflight = inflight[e->rank];
    if (e->op == KT_OP_B || e->op == KT_OP_W) inflight[e->rank]--;
  }
  free(order);
  free(inflight);
  free(last);
  /* a measured run logs what it sent on its SEND actions, not on compute */
  for (size_t i = 0; i < t->n_comm; i++) {
    const kt_event *c = &t->comm[i];
    if ((c->op == KT_OP_SEND_F || c->op == KT_OP_SEND_B) && c->rank >= 0 && c->rank < t->p)
      out->ranks[c->rank].bytes_sent += c->bytes;
  }
  for (size_t i = 0; i < t->n_mem; i++) {
    const kt_mem_sample *s = &t->mem[i];
    if (s->rank >= 0 && s->rank < t->p && s->value > out->ranks[s->rank].peak_memory)
      out->ranks[s->rank].peak_memory = s->value;
  }
  kt_metrics_finish(out);
  return KT_OK;
oom:
  free(order);
  free(inflight);
  free(last);
  kt_metrics_free(out);
  return kt_fail(err, KT_ENOMEM, "out of memory computing metrics");
}
