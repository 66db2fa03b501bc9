/* Schedules that trade memory for bubble: v-half and v-min (their peak
 * memory forms, the rank-basis fractions of 1F1B's memory and bubble, and
 * the cost-aware search staying within the construction's memory and
 * time), zbv-auto and zb-auto with V chunks (never over the budget, never
 * slower than the handcrafted order of the layout when that fits), and
 * 1F1B's peak behind --mem-limit fractions. */
#include "check.h"
#include "kaiten/generators.h"
#include "kaiten/schedule.h"
#include "kaiten/sim.h"
#include "generators/internal.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static double urand(double lo, double hi) {
  rng_state ^= rng_state >> 12, rng_state ^= rng_state << 25, rng_state ^= rng_state >> 27;
  return lo + (hi - lo) * (double)((rng_state * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

static int run(kt_gen_kind kind, int p, int v, int m, const kt_costs *gen, const kt_costs *c,
               double limit, kt_metrics *out) {
  kt_schedule s;
  kt_error err;
  kt_gen_params params = {.p = p, .v = v, .m = m, .costs = gen, .mem_limit = limit};
  if (kt_generate(kind, &params, &s, &err)) {
    fprintf(stderr, "%s P=%d V=%d M=%d: %s\n", kt_gen_kind_name(kind), p, v, m, err.msg);
    return -1;
  }
  kt_status st = kt_schedule_validate(&s, &err);
  if (!st) st = kt_simulate_metrics(&s, c ? c : gen, out, &err);
  if (st) fprintf(stderr, "%s P=%d V=%d M=%d: %s\n", s.name, p, v, m, err.msg);
  kt_schedule_free(&s);
  return st ? -1 : 0;
}

static double max_peak(const kt_metrics *m) {
  double x = 0;
  for (int r = 0; r < m->p; r++) x = fmax(x, m->ranks[r].peak_memory);
  return x;
}

/* Peak of the constructions (M_B = M_W = 1 per stage): min(2M, 2*floor(P/2)+2)
 * for v-half and min(2M, 2*floor((P+1)/3)+2) for v-min. */
static double form(kt_gen_kind kind, int p, int m) {
  double f = kind == KT_SCHED_V_HALF ? 2 * (p / 2) + 2 : 2 * ((p + 1) / 3) + 2;
  return fmin(2.0 * m, f);
}

static void test_forms(void) {
  kt_costs c;
  kt_costs_default(&c);
  c.mem_act = 1, c.mem_wgrad = 1;
  int tried = 0;
  for (int k = 0; k < 2; k++) {
    kt_gen_kind kind = k ? KT_SCHED_V_HALF : KT_SCHED_V_MIN;
    for (int p = 1; p <= 12; p++)
      for (int m = 1; m <= 3 * p; m++) {
        kt_metrics met;
        if (run(kind, p, 0, m, NULL, &c, 0, &met)) {
          CHECK(0);
          continue;
        }
        CHECK_MSG(max_peak(&met) == form(kind, p, m), "%s P=%d M=%d: peak %g, form %g",
                  kt_gen_kind_name(kind), p, m, max_peak(&met), form(kind, p, m));
        /* per rank (M >= P): the form on every rank, but one less on rank 0 for
         * v-min when P mod 3 = 2 and for v-half with an even P and M = P */
        for (int r = 0; r < p && m >= p; r++) {
          int less = r == 0 && (kind == KT_SCHED_V_MIN ? p % 3 == 2 : p % 2 == 0 && m == p);
          CHECK_MSG(met.ranks[r].peak_memory == form(kind, p, m) - less,
                    "%s P=%d M=%d rank %d: "
                    "peak %g",
                    kt_gen_kind_name(kind), p, m, r, met.ranks[r].peak_memory);
        }
        kt_metrics_free(&met);
        tried++;
      }
  }
  CHECK(tried == 2 * 234);
  /* the authors' figures at P = 4, 8, 16 (and 32): v-min 4, 8, 12 (24), v-half 6, 10, 18 (34) */
  int ps[] = {4, 8, 16, 32}, vmin[] = {4, 8, 12, 24}, vhalf[] = {6, 10, 18, 34};
  for (int i = 0; i < 4; i++) {
    CHECK(form(KT_SCHED_V_MIN, ps[i], 4 * ps[i]) == vmin[i]);
    CHECK(form(KT_SCHED_V_HALF, ps[i], 4 * ps[i]) == vhalf[i]);
  }
}

/* On the rank basis (a chunk holds half a rank's layers: half its M_B and
 * its time) at P=8, M=32 with balanced costs: v-half <= 0.625 of 1F1B's
 * memory and <= 0.5 of its bubble; v-min <= 0.5 and <= 0.7. */
static void test_fractions_of_1f1b(void) {
  kt_costs rank, chunk;
  kt_costs_default(&rank);
  kt_costs_default(&chunk);
  rank.mem_act = rank.mem_wgrad = 1;
  chunk.tf = chunk.tb = chunk.tw = 0.5;
  chunk.mem_act = chunk.mem_wgrad = 0.5;
  kt_metrics one, half, min;
  if (run(KT_SCHED_1F1B, 8, 0, 32, &rank, NULL, 0, &one) ||
      run(KT_SCHED_V_HALF, 8, 0, 32, &chunk, NULL, 0, &half) ||
      run(KT_SCHED_V_MIN, 8, 0, 32, &chunk, NULL, 0, &min)) {
    CHECK(0);
    return;
  }
  CHECK_MSG(max_peak(&half) <= 0.625 * max_peak(&one) + 1e-12, "v-half memory %g vs 1f1b %g",
            max_peak(&half), max_peak(&one));
  CHECK_MSG(half.bubble_ratio <= 0.5 * one.bubble_ratio, "v-half bubble %g vs 1f1b %g",
            half.bubble_ratio, one.bubble_ratio);
  CHECK_MSG(max_peak(&min) <= 0.5 * max_peak(&one) + 1e-12, "v-min memory %g vs 1f1b %g",
            max_peak(&min), max_peak(&one));
  CHECK_MSG(min.bubble_ratio <= 0.7 * one.bubble_ratio, "v-min bubble %g vs 1f1b %g",
            min.bubble_ratio, one.bubble_ratio);
  /* the same with kt_gen_1f1b_peak, the basis of --mem-limit fractions */
  kt_gen_params pr = {.p = 8, .m = 32, .costs = &chunk};
  CHECK_NEAR(kt_gen_1f1b_peak(KT_SCHED_V_HALF, &pr), max_peak(&one), 1e-12);
  kt_metrics_free(&one);
  kt_metrics_free(&half);
  kt_metrics_free(&min);
}

static void random_costs(kt_costs *c, int stages, double wgrad_share) {
  kt_costs_default(c);
  c->comm = urand(0, 1) < 0.5 ? 0 : urand(0, 0.5);
  c->mem_act = 1, c->mem_wgrad = wgrad_share;
  c->n_stages = stages;
  double **arrs[] = {&c->stage_tf, &c->stage_tb, &c->stage_tw};
  for (int k = 0; k < 3; k++) {
    *arrs[k] = malloc((size_t)stages * sizeof(double));
    for (int s = 0; s < stages; s++) (*arrs[k])[s] = urand(0.2, 3);
  }
}

/* Under any costs the cost-aware v-half and v-min keep every rank within
 * the construction's peak and are never slower than the construction. */
static void test_cost_aware_bounds(void) {
  int tried = 0, faster = 0;
  for (int trial = 0; trial < 60; trial++) {
    int p = 2 + (int)urand(0, 7), m = 1 + (int)urand(0, 4 * p);
    kt_gen_kind kind = trial % 2 ? KT_SCHED_V_HALF : KT_SCHED_V_MIN;
    kt_costs c;
    random_costs(&c, 2 * p, trial % 3 ? 1 : 0.4);
    kt_metrics plain, aware;
    if (run(kind, p, 0, m, NULL, &c, 0, &plain) || run(kind, p, 0, m, &c, NULL, 0, &aware)) {
      CHECK(0);
      kt_costs_free(&c);
      continue;
    }
    CHECK_MSG(max_peak(&aware) <= max_peak(&plain) * (1 + 1e-12), "%s P=%d M=%d: peak %g over %g",
              kt_gen_kind_name(kind), p, m, max_peak(&aware), max_peak(&plain));
    CHECK_MSG(aware.period <= plain.period * (1 + 1e-12), "%s P=%d M=%d: %g slower than %g",
              kt_gen_kind_name(kind), p, m, aware.period, plain.period);
    faster += aware.period < plain.period * (1 - 1e-9);
    tried++;
    kt_metrics_free(&plain);
    kt_metrics_free(&aware);
    kt_costs_free(&c);
  }
  CHECK(tried == 60 && faster > 20);
}

/* zbv-auto and zb-auto with V chunks: never over the budget, deadlock-free,
 * and at 1F1B's memory (the default) never slower than zbv / interleaved-zb
 * when those fit. */
static void test_auto_placements(void) {
  int tried = 0, checked_vs_fixed = 0;
  for (int trial = 0; trial < 80; trial++) {
    int p = 1 + (int)urand(0, 6), v = trial % 2 ? 2 : 2 + (int)urand(0, 2);
    int m = 1 + (int)urand(0, 4 * p);
    kt_gen_kind kind = trial % 2 ? KT_SCHED_ZBV_AUTO : KT_SCHED_ZB_AUTO;
    kt_costs c;
    random_costs(&c, p * v, urand(0, 1) < 0.3 ? urand(1, 1.5) : urand(0, 1));
    double need = fmax(1, c.mem_wgrad) * (v == 2 ? 2 : v); /* one micro-batch (and its room) */
    double factors[] = {0, 1, 1.5, fmax(1, 0.3 * p), fmax(1, 0.7 * p)},
           limit = factors[trial % 5] * need;
    kt_metrics met;
    if (run(kind, p, v, m, &c, NULL, limit, &met)) {
      CHECK(0);
      kt_costs_free(&c);
      continue;
    }
    kt_gen_params lp = {.p = p, .v = v, .m = m, .costs = &c, .mem_limit = limit};
    double budget = kt_gen_mem_limit(&lp);
    CHECK_MSG(max_peak(&met) <= budget * (1 + 1e-12), "%s P=%d V=%d M=%d: peak %g over %g",
              kt_gen_kind_name(kind), p, v, m, max_peak(&met), budget);
    if (limit == 0 && c.mem_wgrad <= c.mem_act) {
      kt_gen_kind fixed = kind == KT_SCHED_ZBV_AUTO ? KT_SCHED_ZBV : KT_SCHED_INTERLEAVED_ZB;
      kt_metrics f;
      kt_schedule s;
      kt_error err;
      kt_gen_params fp = {.p = p, .v = v, .m = m};
      if (!kt_generate(fixed, &fp, &s, &err)) {
        if (!kt_simulate_metrics(&s, &c, &f, &err)) {
          if (max_peak(&f) <= budget * (1 + 1e-12)) {
            CHECK_MSG(met.period <= f.period * (1 + 1e-12), "%s P=%d V=%d M=%d: %g, %s %g",
                      kt_gen_kind_name(kind), p, v, m, met.period, kt_gen_kind_name(fixed),
                      f.period);
            checked_vs_fixed++;
          }
          kt_metrics_free(&f);
        }
        kt_schedule_free(&s);
      }
    }
    tried++;
    kt_metrics_free(&met);
    kt_costs_free(&c);
  }
  CHECK(tried == 80 && checked_vs_fixed > 2);
  /* a budget that cannot hold one micro-batch and the room for a later chunk */
  kt_schedule s;
  kt_error err;
  kt_gen_params params = {.p = 4, .m = 8, .mem_limit = 1.5};
  CHECK(kt_generate(KT_SCHED_ZBV_AUTO, &params, &s, &err) == KT_EMEMLIMIT);
  CHECK_STR_CONTAINS(err.msg, "plus room for a later one");
}

/* v-half and v-min stretch a run of 2P + 8 micro-batches for longer M:
 * every rank's list equals the construction done slot by slot for all M
 * (just past the threshold, a few more, several times it; P from 1 up). */
static void test_stretched_equals_direct(void) {
  int ps[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 16, 17, 24, 31, 32, 48};
  for (int k = 0; k < 2; k++)
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) {
      int p = ps[i], m0 = 2 * p + 8, ms[] = {m0 + 1, m0 + 5, 3 * m0 + 2};
      for (int j = 0; j < 3; j++) {
        kt_schedule s, d;
        kt_error err;
        kt_gen_params params = {.p = p, .v = 2, .m = ms[j]};
        CHECK(kt_generate(k ? KT_SCHED_V_HALF : KT_SCHED_V_MIN, &params, &s, &err) == KT_OK);
        CHECK(kt_schedule_init_like(&d, &s, ms[j], &err) == KT_OK);
        CHECK(kt__v_shape_direct(&d, k, &err) == KT_OK);
        int same = 1;
        for (int r = 0; r < p && same; r++) {
          same = s.ranks[r].n == d.ranks[r].n;
          for (size_t a = 0; same && a < s.ranks[r].n; a++) {
            const kt_action *x = &s.ranks[r].actions[a], *y = &d.ranks[r].actions[a];
            same = x->stage == y->stage && x->op == y->op && x->mb == y->mb;
          }
        }
        if (!same) fprintf(stderr, "%s P=%d M=%d: stretched != direct\n", s.name, p, ms[j]);
        CHECK(same);
        kt_schedule_free(&s), kt_schedule_free(&d);
      }
    }
}

int main(void) {
  test_stretched_equals_direct();
  test_forms();
  test_fractions_of_1f1b();
  test_cost_aware_bounds();
  test_auto_placements();
  return kt_test_done(__FILE__);
}
