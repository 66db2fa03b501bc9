/* optimal with micro-batches of their own costs (random per-(stage,
 * micro-batch) times and memory, P = 2..3, M = 2..4), against this file's
 * own exhaustive enumeration and simulator:
 * - the order is valid and keeps to the memory limit;
 * - its period is the least over every order that runs the micro-batches in
 *   one sequence on every stage (all sequences), or zb-auto's when that is
 *   less (the search sets out from it): never above zb-auto's;
 * - never below the least over every order at all (enumerated where that
 *   fits: M <= 3), and equal to it whenever the result says proven;
 * - the lower bound it reports is never above that least;
 * - at M = 7 (above the sequences it tries all of) the given sequence only,
 *   said so, valid and no slower than zb-auto.
 * It fails if the search read any micro-batch's costs other than its own. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kaiten/generators.h"
#include "kaiten/request.h"
#include "kaiten/sim.h"

static unsigned rng = 4242u;
static unsigned next_rand(void) {
  rng = rng * 1103515245u + 12345u;
  return (rng >> 8) & 0xffffff;
}
static double uniform(double lo, double hi) { return lo + (hi - lo) * next_rand() / 16777216.0; }

#define TP 3
#define TM 4
#define MAX_ORDERS 2000
typedef struct {
  int p, m;
  double tf[TP][TM], tb[TP][TM], tw[TP][TM], act[TP][TM], wg[TP][TM], comm, so, limit;
  int n_orders[TP];
  unsigned char (*orders[TP])[3 * TM]; /* per rank: op * TM + mb per position */
} tiny;

/* Every order of rank r within the limit; seq (may be NULL): each op type
 * runs the micro-batches in that sequence. */
static void enumerate(tiny *t, int r, unsigned char *cur, int k, int used[3][TM], int cnt[3],
                      double mem, const int *seq) {
  if (k == 3 * t->m) {
    if (t->n_orders[r] < MAX_ORDERS) memcpy(t->orders[r][t->n_orders[r]], cur, (size_t)k);
    t->n_orders[r]++;
    return;
  }
  for (int op = 0; op < 3; op++)
    for (int j = 0; j < t->m; j++) {
      if (used[op][j] || (op && !used[op - 1][j]) || (seq && seq[cnt[op]] != j)) continue;
      double m2 = mem + (op == 0   ? t->act[r][j]
                         : op == 1 ? t->wg[r][j] - t->act[r][j]
                                   : -t->wg[r][j]);
      if (m2 > t->limit * (1 + 1e-12) + 1e-12) continue;
      used[op][j] = 1, cnt[op]++, cur[k] = (unsigned char)(op * TM + j);
      enumerate(t, r, cur, k + 1, used, cnt, m2, seq);
      used[op][j] = 0, cnt[op]--;
    }
}

/* The period of one order per rank (each rank's span, the longest), or
 * INFINITY when it deadlocks. */
static double tiny_period(const tiny *t, const int *idx) {
  double ef[TP][TM], ei[TP][TM], free_at[TP] = {0}, start[TP] = {0}, end[TP] = {0};
  int pos[TP] = {0}, n = 3 * t->m, moved = 1;
  for (int s = 0; s < t->p; s++)
    for (int j = 0; j < t->m; j++) ef[s][j] = ei[s][j] = NAN;
  while (moved) {
    moved = 0;
    for (int r = 0; r < t->p; r++)
      for (; pos[r] < n; pos[r]++, moved = 1) {
        int a = t->orders[r][idx[r]][pos[r]], op = a / TM, j = a % TM;
        double ready = op == 0   ? (r ? ef[r - 1][j] + t->comm : 0)
                       : op == 1 ? (r == t->p - 1 ? ef[r][j] : ei[r + 1][j] + t->comm)
                                 : ei[r][j];
        if (isnan(ready)) break;
        double s0 = fmax(ready, free_at[r]);
        double e = s0 + (op == 0 ? t->tf[r][j] : op == 1 ? t->tb[r][j] : t->tw[r][j]);
        if (!pos[r]) start[r] = s0;
        int sends = (op == 0 && r < t->p - 1) || (op == 1 && r > 0);
        end[r] = e, free_at[r] = e + (sends ? t->so : 0);
        if (op == 0) ef[r][j] = e;
        if (op == 1) ei[r][j] = e;
      }
  }
  double period = 0;
  for (int r = 0; r < t->p; r++) {
    if (pos[r] < n) return INFINITY;
    period = fmax(period, end[r] - start[r]);
  }
  return period;
}

/* The least period over every combination of the ranks' orders (seq: each
 * rank's op types in that sequence); -1 when there are too many. */
static double tiny_best(tiny *t, const int *seq, long max_total) {
  long total = 1;
  for (int r = 0; r < t->p; r++) {
    unsigned char cur[3 * TM];
    int used[3][TM] = {{0}}, cnt[3] = {0};
    t->n_orders[r] = 0;
    enumerate(t, r, cur, 0, used, cnt, 0, seq);
    if (t->n_orders[r] > MAX_ORDERS) return -1;
    total *= t->n_orders[r];
    if (total > max_total) return -1;
  }
  double best = INFINITY;
  for (long k = 0; k < total; k++) {
    int idx[TP];
    long q = k;
    for (int r = 0; r < t->p; r++) idx[r] = (int)(q % t->n_orders[r]), q /= t->n_orders[r];
    best = fmin(best, tiny_period(t, idx));
  }
  return best;
}

/* The least over every order that keeps one sequence on every stage. */
static double sequence_best(tiny *t) {
  int seq[TM];
  for (int j = 0; j < t->m; j++) seq[j] = j;
  double best = INFINITY;
  for (;;) {
    best = fmin(best, tiny_best(t, seq, 1L << 40));
    int i = t->m - 2; /* next permutation */
    while (i >= 0 && seq[i] > seq[i + 1]) i--;
    if (i < 0) return best;
    int k = t->m - 1;
    while (seq[k] < seq[i]) k--;
    int x = seq[i];
    seq[i] = seq[k], seq[k] = x;
    for (int a = i + 1, b = t->m - 1; a < b; a++, b--) x = seq[a], seq[a] = seq[b], seq[b] = x;
  }
}

/* "a0,a1;b0,b1" of one field. */
static void list_text(char *buf, size_t n, const tiny *t, double (*v)[TM]) {
  size_t len = 0;
  for (int s = 0; s < t->p; s++)
    for (int j = 0; j < t->m; j++)
      len += (size_t)snprintf(buf + len, n - len, "%s%.17g",
                              !s && !j ? ""
                              : j      ? ","
                                       : ";",
                              v[s][j]);
}

static kt_status run(const tiny *t, const char *kind, kt_result *res, kt_error *err) {
  kt_request rq;
  kt_request_init(&rq);
  char text[512];
  snprintf(text, sizeof text,
           "schedule=%s p=%d m=%d per-stage=1 comm=%.17g send-overhead=%.17g mem-limit=%.17g", kind,
           t->p, t->m, t->comm, t->so, t->limit);
  kt_status st = kt_request_parse(&rq, text, err);
  const char *fields[] = {"tf", "tb", "tw", "mem-act", "mem-wgrad"};
  double(*vals[])[TM] = {(double(*)[TM])t->tf, (double(*)[TM])t->tb, (double(*)[TM])t->tw,
                         (double(*)[TM])t->act, (double(*)[TM])t->wg};
  for (int f = 0; f < 5 && !st; f++) {
    char v[1024];
    list_text(v, sizeof v, t, vals[f]);
    st = kt_request_set(&rq, fields[f], v, err);
  }
  if (!st) st = kt_request_run(&rq, res, KT_RESULT_METRICS, err);
  kt_request_free(&rq);
  return st;
}

static int wins, restricted, trials_run;

static void check_one(tiny *t, int trial) {
  kt_result opt, zb;
  kt_error err = {{0}};
  kt_status st = run(t, "optimal", &opt, &err);
  CHECK_MSG(st == KT_OK, "P=%d M=%d trial %d: optimal: %s", t->p, t->m, trial, err.msg);
  if (st) return;
  st = run(t, "zb-auto", &zb, &err);
  CHECK_MSG(st == KT_OK, "P=%d M=%d trial %d: zb-auto: %s", t->p, t->m, trial, err.msg);
  if (st) {
    kt_result_free(&opt);
    return;
  }
  trials_run++;
  double period = opt.met.period, tol = 1e-9 * (1 + period);
  CHECK(kt_schedule_validate(&opt.order, &err) == KT_OK);
  for (int r = 0; r < t->p; r++) CHECK(opt.met.ranks[r].peak_memory <= t->limit * (1 + 1e-9));
  CHECK(opt.info.search_sequences_all && opt.info.search_proven_in_sequences);
  CHECK_MSG(period <= zb.met.period + tol, "P=%d M=%d trial %d: optimal %.9g above zb-auto %.9g",
            t->p, t->m, trial, period, zb.met.period);
  double seq_best = sequence_best(t), want = fmin(seq_best, zb.met.period);
  CHECK_MSG(fabs(period - want) <= tol,
            "P=%d M=%d trial %d: optimal %.9g, the best order keeping one sequence %.9g "
            "(zb-auto %.9g)",
            t->p, t->m, trial, period, seq_best, zb.met.period);
  CHECK(opt.info.lower_bound <= period + tol);
  wins += period < zb.met.period - tol;
  double all = tiny_best(t, NULL, 3000000);
  if (all >= 0) {
    CHECK_MSG(period >= all - tol && opt.info.lower_bound <= all + tol,
              "P=%d M=%d trial %d: optimal %.9g, bound %.9g, every order's best %.9g", t->p, t->m,
              trial, period, opt.info.lower_bound, all);
    if (opt.info.proven) CHECK(fabs(period - all) <= tol);
    restricted += period > all + tol;
  }
  kt_result_free(&opt), kt_result_free(&zb);
}

static void check_grid(int p, int m, int trials) {
  static unsigned char store[TP][MAX_ORDERS][3 * TM];
  for (int trial = 0; trial < trials; trial++) {
    tiny t = {.p = p, .m = m};
    double most = 0;
    for (int s = 0; s < p; s++) {
      t.orders[s] = store[s];
      for (int j = 0; j < m; j++) {
        t.tf[s][j] = uniform(0.3, 2.5), t.tb[s][j] = uniform(0.3, 2.5);
        t.tw[s][j] = uniform(0.3, 2.5), t.act[s][j] = uniform(0.5, 1.5);
        t.wg[s][j] = t.act[s][j] * (next_rand() % 4) / 4.0;
        most = fmax(most, t.act[s][j]);
      }
    }
    t.comm = (next_rand() % 3) * 0.25;
    t.so = trial % 3 == 2 ? uniform(0.05, 0.4) : 0;
    t.limit = most + uniform(0, m * 1.2);
    check_one(&t, trial);
  }
}

/* Above KT__OPT_SEQ_ALL_M micro-batches only the given sequence is searched,
 * and the result says so: valid, no slower than zb-auto, never below the
 * bound. (The arrays of tiny hold 4 micro-batches: the request is written
 * here.) */
static void check_given_only(void) {
  const char *text = "p=2 m=7 per-stage=1 comm=0.25 tf=1,2.5,0.5,1,3,0.75,1.5;2,1,0.5,2,1,1,0.25 "
                     "tb=2,1,1.5,0.5,2,2,1;1,3,1,1,0.5,2,1 tw=1 "
                     "mem-act=1,2,0.5,1,1.5,1,0.75;1,1,1,2,0.5,1,1 mem-limit=4";
  double period[2];
  for (int k = 0; k < 2; k++) {
    kt_request rq;
    kt_result res;
    kt_error err = {{0}};
    kt_request_init(&rq);
    kt_status st = kt_request_parse(&rq, text, &err);
    if (!st) st = kt_request_set(&rq, "schedule", k ? "optimal" : "zb-auto", &err);
    if (!st) st = kt_request_run(&rq, &res, KT_RESULT_METRICS, &err);
    kt_request_free(&rq);
    CHECK_MSG(st == KT_OK, "M=7: %s", err.msg);
    if (st) return;
    period[k] = res.met.period;
    if (k) {
      CHECK(kt_schedule_validate(&res.order, &err) == KT_OK);
      CHECK(res.info.search_sequences == 1 && !res.info.search_sequences_all);
      CHECK(res.info.lower_bound <= res.met.period * (1 + 1e-9));
      for (int r = 0; r < 2; r++) CHECK(res.met.ranks[r].peak_memory <= 4 * (1 + 1e-9));
    }
    kt_result_free(&res);
  }
  CHECK(period[1] <= period[0] * (1 + 1e-9));
}

int main(void) {
  int sanitized = getenv("KT_SANITIZED") != NULL;
  check_grid(2, 2, sanitized ? 4 : 24);
  check_grid(3, 2, sanitized ? 1 : 4);
  check_grid(2, 3, sanitized ? 1 : 3);
  check_grid(3, 3, sanitized ? 1 : 5);
  check_grid(2, 4, sanitized ? 1 : 2);
  check_given_only();
  printf("%d problems: optimal faster than zb-auto on %d; above every order's best (its "
         "sequences keep it from it) on %d\n",
         trials_run, wins, restricted);
  CHECK(sanitized || wins > 0);
  return kt_test_done("test_optimal_mb");
}
