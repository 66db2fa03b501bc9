/* Faults that appear mid-run (kaiten/costs.h): a slow rank, a slow link, a
 * trace of link delays in PipeMorph's format; and the costs they make. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "costs/costs_internal.h"

void kt_faults_init(kt_faults *f) { memset(f, 0, sizeof *f); }

void kt_faults_free(kt_faults *f) {
  free(f->trace_t);
  free(f->trace_delay);
  free(f->trace_a);
  free(f->trace_b);
  kt_faults_init(f);
}

static void *dup_bytes(const void *src, size_t n, int *fail) {
  if (!src || !n) return NULL;
  void *d = malloc(n);
  if (!d) *fail = 1;
  else memcpy(d, src, n);
  return d;
}

kt_status kt_faults_copy(kt_faults *dst, const kt_faults *src, kt_error *err) {
  *dst = *src;
  int fail = 0;
  size_t np = (size_t)src->n_points, nl = (size_t)src->n_trace_links;
  dst->trace_t = dup_bytes(src->trace_t, np * sizeof(double), &fail);
  dst->trace_delay = dup_bytes(src->trace_delay, np * nl * sizeof(double), &fail);
  dst->trace_a = dup_bytes(src->trace_a, nl * sizeof(int), &fail);
  dst->trace_b = dup_bytes(src->trace_b, nl * sizeof(int), &fail);
  if (!fail) return KT_OK;
  kt_faults_free(dst);
  return kt_fail(err, KT_ENOMEM, "out of memory");
}

/* Splits "X@S" at the '@': *onset the 0-based step (S 1-based; none: 0);
 * head receives X. -1 when S is not a step number or X too long. */
static int split_onset(const char *spec, char *head, size_t n, int *onset) {
  const char *at = strchr(spec, '@');
  size_t len = at ? (size_t)(at - spec) : strlen(spec);
  long s = 1;
  if (len >= n || (at && kt_parse_int(at + 1, 1, 100000000, &s))) return -1;
  memcpy(head, spec, len);
  head[len] = 0;
  *onset = (int)s - 1;
  return 0;
}

kt_status kt_faults_add_rank(kt_faults *f, const char *spec, kt_error *err) {
  char head[64], *colon;
  int onset;
  long r;
  double x;
  if (f->n_rank >= KT_MAX_FAULTS)
    return kt_fail(err, KT_EINVAL, "slow-rank '%s': at most %d slow ranks", spec, KT_MAX_FAULTS);
  if (split_onset(spec, head, sizeof head, &onset) || !(colon = strchr(head, ':')))
    return kt_fail(err, KT_EINVAL, "slow-rank '%s': expected R:F or R:F@S, e.g. 2:1.5@10", spec);
  *colon = 0;
  if (kt_parse_int(head, 0, KT_MAX_RANKS - 1, &r))
    return kt_fail(err, KT_EINVAL, "slow-rank '%s': rank '%s' is not a pipeline rank (0, 1, ...)",
                   spec, head);
  if (kt_parse_double(colon + 1, &x) || !(x >= 1 && x <= 1000))
    return kt_fail(err, KT_EINVAL, "slow-rank '%s': factor '%s' is not a number from 1 to 1000",
                   spec, colon + 1);
  f->rank[f->n_rank++] = (kt_rank_fault){(int)r, x, onset};
  return KT_OK;
}

/* A delay "D" in unit, or with its own suffix (seconds > 0: what a second
 * is in the result). -1 when it is not one. */
static int parse_delay(const char *text, double unit, double seconds, double *out) {
  static const struct {
    const char *suffix;
    double scale;
  } units[] = {{"us", 1e-6}, {"ms", 1e-3}, {"s", 1}};
  char num[48];
  size_t n = strlen(text);
  double scale = unit;
  for (size_t i = 0; seconds > 0 && i < sizeof units / sizeof *units; i++) {
    size_t k = strlen(units[i].suffix);
    if (n > k && !strcmp(text + n - k, units[i].suffix)) {
      n -= k, scale = units[i].scale * seconds;
      break;
    }
  }
  if (n == 0 || n >= sizeof num) return -1;
  memcpy(num, text, n);
  num[n] = 0;
  double x;
  if (kt_parse_double(num, &x) || !(x >= 0) || isinf(x)) return -1;
  *out = x * scale;
  return isfinite(*out) ? 0 : -1;
}

/* "A-B" (or "A_B", the trace's form) into a < b. -1 when not two ranks. */
static int parse_pair(const char *text, char sep, int *a, int *b) {
  const char *s = strchr(text, sep);
  char left[24];
  long x, y;
  if (!s || (size_t)(s - text) >= sizeof left) return -1;
  memcpy(left, text, (size_t)(s - text));
  left[s - text] = 0;
  if (kt_parse_int(left, 0, KT_MAX_RANKS - 1, &x) || kt_parse_int(s + 1, 0, KT_MAX_RANKS - 1, &y) ||
      x == y)
    return -1;
  *a = (int)(x < y ? x : y), *b = (int)(x < y ? y : x);
  return 0;
}

kt_status kt_faults_add_link(kt_faults *f, const char *spec, double unit, double seconds,
                             kt_error *err) {
  char head[96], *colon;
  int onset, a, b;
  double d;
  if (f->n_link >= KT_MAX_FAULTS)
    return kt_fail(err, KT_EINVAL, "slow-link '%s': at most %d slow links", spec, KT_MAX_FAULTS);
  if (split_onset(spec, head, sizeof head, &onset) || !(colon = strchr(head, ':')))
    return kt_fail(err, KT_EINVAL, "slow-link '%s': expected A-B:+D or A-B:+D@S, e.g. 0-1:+120@10",
                   spec);
  *colon = 0;
  if (parse_pair(head, '-', &a, &b))
    return kt_fail(err, KT_EINVAL, "slow-link '%s': '%s' is not two pipeline ranks A-B", spec,
                   head);
  const char *dtext = colon[1] == '+' ? colon + 2 : colon + 1;
  if (parse_delay(dtext, unit, seconds, &d))
    return kt_fail(
        err, KT_EINVAL, "slow-link '%s': delay '%s' is not a time >= 0%s", spec, dtext,
        seconds > 0 ? " (a number of ms, or with us, ms or s)" : " (in the costs' unit)");
  f->link[f->n_link++] = (kt_link_fault){a, b, d, onset};
  return KT_OK;
}

kt_status kt_faults_check(const kt_faults *f, int p, kt_error *err) {
  for (int i = 0; i < f->n_rank; i++)
    if (f->rank[i].rank >= p)
      return kt_fail(err, KT_EINVAL, "slow-rank %d: the pipeline has ranks 0..%d", f->rank[i].rank,
                     p - 1);
  for (int i = 0; i < f->n_link + f->n_trace_links; i++) {
    int a = i < f->n_link ? f->link[i].a : f->trace_a[i - f->n_link];
    int b = i < f->n_link ? f->link[i].b : f->trace_b[i - f->n_link];
    if (b >= p || kt_link_index(a, b, p) < 0)
      return kt_fail(err, KT_EINVAL,
                     "slow-link %d-%d: the pipeline's links join ranks next to each other (0-1, "
                     "..., %d-%d)%s",
                     a, b, p - 2, p - 1, p > 2 ? " and its last rank to rank 0" : "");
  }
  return KT_OK;
}

/* Whether two consecutive stages run on ranks a and b (a message crosses it). */
static int link_carries(const int *stage_rank, int n_stages, int a, int b) {
  for (int s = 0; s + 1 < n_stages; s++) {
    int x = stage_rank[s], y = stage_rank[s + 1];
    if ((x == a && y == b) || (x == b && y == a)) return 1;
  }
  return 0;
}

int kt_faults_unused_link(const kt_faults *f, const int *stage_rank, int n_stages, int *a, int *b) {
  for (int i = 0; f && i < f->n_link + f->n_trace_links; i++) {
    *a = i < f->n_link ? f->link[i].a : f->trace_a[i - f->n_link];
    *b = i < f->n_link ? f->link[i].b : f->trace_b[i - f->n_link];
    if (!link_carries(stage_rank, n_stages, *a, *b)) return 1;
  }
  return 0;
}

int kt_faults_any(const kt_faults *f) {
  return f && (f->n_rank > 0 || f->n_link > 0 || f->n_points > 0);
}

int kt_faults_on_links(const kt_faults *f) { return f && (f->n_link > 0 || f->n_points > 0); }

double kt_faults_rank_factor(const kt_faults *f, int r, int step) {
  double x = 1;
  for (int i = 0; f && i < f->n_rank; i++)
    if (f->rank[i].rank == r && step >= f->rank[i].onset && f->rank[i].factor > x)
      x = f->rank[i].factor;
  return x;
}

/* The trace's delay of link k at t (the last change at or before t). */
static double trace_delay(const kt_faults *f, int k, double t) {
  int lo = 0, hi = f->n_points; /* the first change after t */
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (f->trace_t[mid] <= t) lo = mid + 1;
    else hi = mid;
  }
  return lo == 0 ? 0 : f->trace_delay[(size_t)(lo - 1) * (size_t)f->n_trace_links + (size_t)k];
}

double kt_faults_link_delay(const kt_faults *f, int a, int b, int step, double t) {
  if (!f) return 0;
  if (a > b) {
    int x = a;
    a = b, b = x;
  }
  double d = 0;
  for (int i = 0; i < f->n_link; i++)
    if (f->link[i].a == a && f->link[i].b == b && step >= f->link[i].onset) d += f->link[i].delay;
  if (t < 0 || step < f->trace_onset) return d;
  for (int k = 0; k < f->n_trace_links; k++)
    if (f->trace_a[k] == a && f->trace_b[k] == b) d += trace_delay(f, k, t);
  return d;
}

/* Per-stage compute costs of c (its uniform values where it has none). */
static kt_status make_per_stage(kt_costs *c, int n, kt_error *err) {
  double **arr[] = {&c->stage_tf, &c->stage_tb, &c->stage_tw};
  double uni[] = {c->tf, c->tb, c->tw};
  if (c->n_stages > 0 && c->n_stages != n)
    return kt_fail(err, KT_EINVAL, "per-stage costs list %d stages, the schedule has %d",
                   c->n_stages, n);
  for (int i = 0; i < 3; i++) {
    if (*arr[i] && c->n_stages == n) continue;
    double *a = malloc(sizeof(double) * (size_t)n);
    if (!a) return kt_fail(err, KT_ENOMEM, "out of memory");
    for (int s = 0; s < n; s++) a[s] = uni[i];
    free(*arr[i]);
    *arr[i] = a;
  }
  c->n_stages = n;
  return KT_OK;
}

kt_status kt_faults_apply(const kt_faults *f, int step, double t, int p, const int *stage_rank,
                          int n_stages, kt_costs *c, kt_error *err) {
  kt_status st = kt_faults_check(f, p, err);
  if (st) return st;
  if (f->n_rank > 0 && (st = make_per_stage(c, n_stages, err))) return st;
  double *per_mb[] = {c->mb_tf, c->mb_tb, c->mb_tw}; /* each micro-batch's too */
  for (int s = 0; s < n_stages && f->n_rank > 0; s++) {
    double x = kt_faults_rank_factor(f, stage_rank[s], step);
    c->stage_tf[s] *= x, c->stage_tb[s] *= x, c->stage_tw[s] *= x;
    for (int i = 0; i < 3; i++)
      for (int j = 0; per_mb[i] && j < c->n_mb; j++)
        per_mb[i][(size_t)s * (size_t)c->n_mb + (size_t)j] *= x;
  }
  if (!kt_faults_on_links(f) || p < 2) return KT_OK;
  if ((st = kt_costs_links_for(c, p, err))) return st;
  for (int l = 0; l < c->n_links; l++)
    c->link_delay[l] += kt_faults_link_delay(f, l, l + 1 < p ? l + 1 : 0, step, t);
  return KT_OK;
}
