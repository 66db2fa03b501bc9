/* Exact min-max contiguous partition (chains-on-chains) with an optional
 * per-stage memory cap.
 *
 * feasible(B): can n layers be cut into S non-empty contiguous stages whose
 * loads are <= B and whose memory meets the cap? A stage's constraints only
 * get easier when it loses layers, so for stage j the furthest end maxend(a)
 * from a start a is non-decreasing in a (two pointers, O(n)), and the set of
 * prefixes the first j stages can cover exactly follows in O(n): O(S*n) per
 * probe. The optimum B* is a stage load (a segment sum); bisection probes
 * only segment sums, each feasible probe lowering the upper bound to the
 * load of the cut it found, and stops when no segment sum is left between
 * the bounds: the result is exact. Among the optimal partitions the reconstruction picks,
 * from the last stage back, the cut closest to an even share of what is left.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/costs.h"

typedef struct {
  int n, S;
  double *L, *F, *A; /* prefix sums, n + 1 each */
  const double *mult;
  double cap;
  int *maxend; /* S x (n + 1) */
  char *reach; /* (S + 1) x (n + 1): the first j stages can cover exactly e layers */
} workspace;

#define MAXEND(w, j, a) ((w)->maxend[(size_t)(j) * (size_t)((w)->n + 1) + (size_t)(a)])
#define REACH(w, j, e) ((w)->reach[(size_t)(j) * (size_t)((w)->n + 1) + (size_t)(e)])

static int seg_ok(const workspace *w, int j, int a, int e, double B) {
  if (w->L[e] - w->L[a] > B) return 0;
  if (w->cap > 0) {
    double m = (w->F[e] - w->F[a]) + (w->mult ? w->mult[j] : 1.0) * (w->A[e] - w->A[a]);
    if (m > w->cap) return 0;
  }
  return 1;
}

static int feasible(workspace *w, double B) {
  int n = w->n, S = w->S;
  memset(w->reach, 0, (size_t)(S + 1) * (size_t)(n + 1));
  REACH(w, 0, 0) = 1;
  for (int j = 0; j < S; j++) {
    int limit = n - (S - 1 - j); /* leave one layer for every later stage */
    int e = 0;
    for (int a = 0; a < limit; a++) {
      if (e < a) e = a;
      while (e + 1 <= limit && seg_ok(w, j, a, e + 1, B)) e++;
      MAXEND(w, j, a) = e;
    }
    int last = -1;
    for (e = 1; e <= limit; e++) {
      if (REACH(w, j, e - 1)) last = e - 1;
      REACH(w, j + 1, e) = last >= 0 && MAXEND(w, j, last) >= e;
    }
  }
  return REACH(w, S, n);
}

/* After feasible(B) succeeded: cuts from the last stage back, each the valid
 * start closest to an even share of the remaining load. Returns the largest
 * stage load. */
static double reconstruct(const workspace *w, int *counts) {
  int e = w->n;
  double worst = 0;
  for (int j = w->S - 1; j >= 0; j--) {
    double share = w->L[e] / (j + 1);
    int best = -1;
    double best_gap = INFINITY;
    for (int a = j; a < e; a++) {
      if (!REACH(w, j, a) || MAXEND(w, j, a) < e) continue;
      double gap = fabs((w->L[e] - w->L[a]) - share);
      if (gap < best_gap) best_gap = gap, best = a;
    }
    if (best < 0) best = e - 1; /* unreachable when feasible() held */
    counts[j] = e - best;
    double load = w->L[e] - w->L[best];
    if (load > worst) worst = load;
    e = best;
  }
  return worst;
}

/* Stage-independent constraints (no cap, or the same multiplier everywhere):
 * the greedy cut, each stage as long as allowed while leaving one layer for
 * every later stage, succeeds whenever any cut does (its j-th end is never
 * behind that of a feasible cut, given B >= the largest layer), in O(n).
 * Returns whether it covers all layers; *worst = its largest stage load. */
static int greedy(const workspace *w, double B, double *worst) {
  int a = 0;
  double mx = 0;
  for (int j = 0; j < w->S; j++) {
    int limit = w->n - (w->S - 1 - j), e = a;
    while (e + 1 <= limit && seg_ok(w, 0, a, e + 1, B)) e++;
    if (e == a) return 0;
    mx = fmax(mx, w->L[e] - w->L[a]);
    a = e;
  }
  *worst = mx;
  return a == w->n;
}

/* The stage load to probe next: the smallest segment sum >= mid if one is
 * below hi, else the largest one in (lo, mid). 0 when (lo, hi) holds none,
 * i.e. hi is optimal. Both are two-pointer sweeps, O(n). */
static int next_candidate(const workspace *w, double lo, double mid, double hi, double *out) {
  const double *L = w->L;
  int n = w->n;
  double up = INFINITY, down = -INFINITY;
  for (int a = 0, e = 0; a < n; a++) {
    if (e <= a) e = a + 1;
    while (e < n && L[e] - L[a] < mid) e++;
    if (L[e] - L[a] >= mid) up = fmin(up, L[e] - L[a]);
    int d = e; /* largest end with a sum below mid */
    while (d > a && L[d] - L[a] >= mid) d--;
    if (d > a && L[d] - L[a] > lo) down = fmax(down, L[d] - L[a]);
  }
  if (up < hi) return *out = up, 1;
  if (down > lo && down < hi) return *out = down, 1;
  return 0;
}

static kt_status check_array(const double *x, int n, const char *what, kt_error *err) {
  for (int i = 0; x && i < n; i++)
    if (!isfinite(x[i]) || x[i] < 0)
      return kt_fail(err, KT_EINVAL, "partition: %s[%d] = %g: must be finite and >= 0", what, i,
                     x[i]);
  return KT_OK;
}

static kt_status check_problem(const kt_partition_problem *pb, int stages, kt_error *err) {
  int n = pb->n;
  if (stages < 1 || n < 1)
    return kt_fail(err, KT_EINVAL, "partition: %d layers into %d stages: both must be >= 1", n,
                   stages);
  if (stages > n)
    return kt_fail(err, KT_EINVAL, "partition: %d stages for %d layers: a stage would be empty",
                   stages, n);
  /* its tables and each probe are stages x layers: bounded, so that it ends in seconds */
  if ((double)stages * ((double)n + 1) > KT_PARTITION_MAX_CELLS)
    return kt_fail(err, KT_EINVAL,
                   "partition: %d layers into %d stages: %.3g cells of work, more "
                   "than %d: fewer layers or stages",
                   n, stages, (double)stages * ((double)n + 1), KT_PARTITION_MAX_CELLS);
  if (!(pb->mem_cap >= 0 && isfinite(pb->mem_cap)))
    return kt_fail(err, KT_EINVAL, "partition: memory cap %g: expected a finite number >= 0",
                   pb->mem_cap);
  kt_status st = check_array(pb->load, n, "load", err);
  if (!st) st = check_array(pb->fixed, n, "fixed", err);
  if (!st) st = check_array(pb->act, n, "act", err);
  if (!st) st = check_array(pb->mult, stages, "mult", err);
  if (!st && !pb->load) st = kt_fail(err, KT_EINVAL, "partition: no loads given");
  return st;
}

/* The prefix sums of loads, fixed and activation memory; a multiplier
 * common to all stages folds into the activation sums (w->mult NULL then).
 * The largest single load. */
static double prefix_sums(workspace *w, const kt_partition_problem *pb) {
  int n = pb->n, uniform = 1;
  for (int j = 1; pb->mem_cap > 0 && pb->mult && j < w->S; j++)
    if (pb->mult[j] != pb->mult[0]) uniform = 0;
  double mult0 = pb->mem_cap > 0 && pb->mult ? pb->mult[0] : 1;
  if (uniform) w->mult = NULL;
  double maxload = 0;
  for (int i = 0; i < n; i++) {
    w->L[i + 1] = w->L[i] + pb->load[i];
    w->F[i + 1] = w->F[i] + (pb->fixed ? pb->fixed[i] : 0);
    w->A[i + 1] = w->A[i] + (pb->act ? pb->act[i] : 0) * (uniform ? mult0 : 1);
    if (pb->load[i] > maxload) maxload = pb->load[i];
  }
  return maxload;
}

/* Bisection over the stage loads that can occur, from a feasible cut's
 * load hi down: the smallest feasible bottleneck, its cut in counts. */
static double bisect(workspace *w, double maxload, double hi, int *counts) {
  int n = w->n, uniform = w->mult == NULL;
  /* invariant: a cut of load hi exists; every stage load <= lo is infeasible */
  double lo = -1;
  for (int iter = 0; iter < 200; iter++) {
    double mid = lo < 0 ? fmax(w->L[n] / w->S, maxload) : lo + (hi - lo) / 2, probe;
    if (!next_candidate(w, lo, mid, hi, &probe)) break; /* no stage load in (lo, hi) */
    double worst = 0;
    int ok = uniform ? greedy(w, probe, &worst) : feasible(w, probe);
    if (!ok) lo = probe;
    else hi = uniform ? worst : reconstruct(w, counts);
  }
  return hi;
}

/* Stages of unequal speed (pb->scale): best[j][e], the least bottleneck of
 * the first j stages over the first e layers, from every cut of stage j;
 * the cut kept is the last that reaches it. */
static kt_status scaled(const kt_partition_problem *pb, int S, int *counts, double *bottleneck,
                        kt_error *err) {
  int n = pb->n;
  size_t row = (size_t)n + 1;
  double *L = kt_calloc(row, sizeof *L), *F = kt_calloc(row, sizeof *F),
         *A = kt_calloc(row, sizeof *A);
  double *best = kt_calloc(((size_t)S + 1) * row, sizeof *best);
  int *cut = kt_calloc(((size_t)S + 1) * row, sizeof *cut);
  if (!L || !F || !A || !best || !cut) {
    free(L), free(F), free(A), free(best), free(cut);
    return kt_fail(err, KT_ENOMEM, "partition: out of memory for %d layers x %d stages", n, S);
  }
  for (int i = 0; i < n; i++) {
    L[i + 1] = L[i] + pb->load[i];
    F[i + 1] = F[i] + (pb->fixed ? pb->fixed[i] : 0);
    A[i + 1] = A[i] + (pb->act ? pb->act[i] : 0);
  }
  for (size_t i = 0; i < ((size_t)S + 1) * row; i++) best[i] = INFINITY;
  best[0] = 0;
  for (int j = 1; j <= S; j++)
    for (int e = j; e <= n - (S - j); e++)
      for (int a = j - 1; a < e; a++) {
        double mem = (F[e] - F[a]) + (pb->mult ? pb->mult[j - 1] : 1.0) * (A[e] - A[a]);
        if (pb->mem_cap > 0 && mem > pb->mem_cap) continue;
        double x = fmax(best[(size_t)(j - 1) * row + (size_t)a], pb->scale[j - 1] * (L[e] - L[a]));
        if (x <= best[(size_t)j * row + (size_t)e])
          best[(size_t)j * row + (size_t)e] = x, cut[(size_t)j * row + (size_t)e] = a;
      }
  double b = best[(size_t)S * row + (size_t)n];
  kt_status st = isfinite(b) ? KT_OK
                             : kt_fail(err, KT_EINVAL,
                                       "partition: no cut of %d layers into %d stages keeps "
                                       "every stage within the memory cap %.4g",
                                       n, S, pb->mem_cap);
  for (int j = S, e = n; !st && j > 0; j--) {
    int a = cut[(size_t)j * row + (size_t)e];
    counts[j - 1] = e - a, e = a;
  }
  if (!st && bottleneck) *bottleneck = b;
  free(L), free(F), free(A), free(best), free(cut);
  return st;
}

kt_status kt_partition_minmax(const kt_partition_problem *pb, int stages, int *counts,
                              double *bottleneck, kt_error *err) {
  kt_status st = check_problem(pb, stages, err);
  if (!st) st = check_array(pb->scale, stages, "scale", err);
  if (st) return st;
  if (pb->scale) return scaled(pb, stages, counts, bottleneck, err);
  int n = pb->n;
  workspace w = {.n = n, .S = stages, .mult = pb->mult, .cap = pb->mem_cap};
  w.L = kt_calloc((size_t)n + 1, sizeof(double));
  w.F = kt_calloc((size_t)n + 1, sizeof(double));
  w.A = kt_calloc((size_t)n + 1, sizeof(double));
  w.maxend = kt_calloc((size_t)stages * ((size_t)n + 1), sizeof(int));
  w.reach = kt_calloc(((size_t)stages + 1) * ((size_t)n + 1), 1);
  if (!w.L || !w.F || !w.A || !w.maxend || !w.reach) {
    st = kt_fail(err, KT_ENOMEM, "partition: out of memory for %d layers x %d stages", n, stages);
  } else {
    double maxload = prefix_sums(&w, pb), most = 1;
    for (int j = 0; w.mult && j < stages; j++) most = fmax(most, w.mult[j]);
    if (!isfinite(w.L[n]) || !isfinite(w.F[n] + most * w.A[n]))
      st = kt_fail(err, KT_EINVAL,
                   "partition: the %s of %d layers overflows (%g): values that "
                   "large cannot be compared; scale them down",
                   isfinite(w.L[n]) ? "memory" : "load", n,
                   isfinite(w.L[n]) ? w.F[n] + most * w.A[n] : w.L[n]);
    else if (!feasible(&w, INFINITY))
      st = kt_fail(err, KT_EINVAL,
                   "partition: no cut of %d layers into %d stages keeps every stage within the "
                   "memory cap %.4g",
                   n, stages, pb->mem_cap);
    double hi = st ? 0 : bisect(&w, maxload, reconstruct(&w, counts), counts);
    if (!st && !feasible(&w, hi)) /* cannot happen: hi came from a partition */
      st = kt_fail(err, KT_EINVAL, "partition: internal error at bottleneck %g", hi);
    if (!st) hi = reconstruct(&w, counts);
    if (!st && bottleneck) *bottleneck = hi;
  }
  free(w.L);
  free(w.F);
  free(w.A);
  free(w.maxend);
  free(w.reach);
  return st;
}
