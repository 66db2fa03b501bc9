/* The exact search's single-machine bound (optimal_bound.c): Jackson's
 * preemptive schedule, the released op with the longest tail first, on a
 * binary heap of tails. */
#include <math.h>
#include <stdlib.h>

#include "generators/optimal_internal.h"

#define NONE (-INFINITY)

static inline double maxd(double a, double b) { return a > b ? a : b; }

static void heap_push(double *key, int *idx, int *n, int job, double k) {
  int i = (*n)++;
  while (i > 0 && key[(i - 1) / 2] < k) {
    key[i] = key[(i - 1) / 2], idx[i] = idx[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  key[i] = k, idx[i] = job;
}

static void heap_pop(double *key, int *idx, int *n) {
  double k = key[--*n];
  int job = idx[*n], i = 0;
  for (;;) {
    int c = 2 * i + 1;
    if (c >= *n) break;
    if (c + 1 < *n && key[c + 1] > key[c]) c++;
    if (key[c] <= k) break;
    key[i] = key[c], idx[i] = idx[c];
    i = c;
  }
  key[i] = k, idx[i] = job;
}

static int by_head(const void *a, const void *b) {
  double x = ((const struct kt__opt_job *)a)->head, y = ((const struct kt__opt_job *)b)->head;
  return (x > y) - (x < y);
}

double kt__opt_jackson(kt__opt_bound_ws *ws, int n, int sorted) {
  struct kt__opt_job *jb = ws->jobs;
  if (!sorted && n <= 48) { /* insertion sort */
    for (int i = 1; i < n; i++) {
      struct kt__opt_job x = jb[i];
      int k = i;
      for (; k > 0 && jb[k - 1].head > x.head; k--) jb[k] = jb[k - 1];
      jb[k] = x;
    }
  } else if (!sorted) {
    qsort(jb, (size_t)n, sizeof *jb, by_head);
  }
  double t = NONE, best = NONE;
  int hn = 0;
  for (int i = 0; i < n || hn;) {
    if (!hn && jb[i].head > t) t = jb[i].head;
    for (; i < n && jb[i].head <= t; i++) heap_push(ws->heap_key, ws->heap_job, &hn, i, jb[i].tail);
    int j = ws->heap_job[0];
    double next = i < n ? jb[i].head : INFINITY;
    if (t + jb[j].dur <= next) {
      t += jb[j].dur;
      best = maxd(best, t + jb[j].tail);
      heap_pop(ws->heap_key, ws->heap_job, &hn);
    } else {
      jb[j].dur -= next - t;
      t = next;
    }
  }
  return best;
}
