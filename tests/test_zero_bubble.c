/* Zero-bubble family: zb-h1, zb-h2, zbv, dualpipev, zb-auto. Makespans and
 * per-rank memory against the papers' numbers, DualPipeV against PyTorch's
 * order, the closed forms against the simulator under random costs, and
 * zb-auto's memory bound. */
#include "check.h"
#include "kaiten/generators.h"
#include "kaiten/schedule.h"
#include "kaiten/sim.h"
#include "generators/search/search.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double urand(double lo, double hi) { /* xorshift64*, deterministic */
  rng_state ^= rng_state >> 12, rng_state ^= rng_state << 25, rng_state ^= rng_state >> 27;
  return lo + (hi - lo) * (double)((rng_state * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

static int gen(kt_gen_kind kind, int p, int m, const kt_costs *c, double limit, kt_schedule *s) {
  kt_error err;
  kt_gen_params params = {.p = p, .m = m, .costs = c, .mem_limit = limit};
  kt_status st = kt_generate(kind, &params, s, &err);
  if (st) fprintf(stderr, "generate %s P=%d M=%d: %s\n", kt_gen_kind_name(kind), p, m, err.msg);
  return st ? -1 : 0;
}

/* Generates and simulates; -1 (and a message) on any failure. */
static int run(kt_gen_kind kind, int p, int m, const kt_costs *c, double limit, kt_metrics *out) {
  kt_schedule s;
  if (gen(kind, p, m, c, limit, &s)) return -1;
  kt_error err;
  kt_status st = kt_simulate_metrics(&s, c, out, &err);
  if (st) fprintf(stderr, "simulate %s P=%d M=%d: %s\n", s.name, p, m, err.msg);
  kt_schedule_free(&s);
  return st ? -1 : 0;
}

static double max_peak(const kt_metrics *m) {
  double x = 0;
  for (int r = 0; r < m->p; r++) x = fmax(x, m->ranks[r].peak_memory);
  return x;
}

static void random_costs(kt_costs *c, int stages, int per_stage, double comm) {
  kt_costs_default(c);
  c->tf = urand(0.2, 3), c->tb = urand(0.2, 3), c->tw = urand(0.2, 3), c->comm = comm;
  if (!per_stage) return;
  c->n_stages = stages;
  double **arrs[] = {&c->stage_tf, &c->stage_tb, &c->stage_tw};
  for (int k = 0; k < 3; k++) {
    *arrs[k] = malloc((size_t)stages * sizeof(double));
    for (int s = 0; s < stages; s++) (*arrs[k])[s] = urand(0.1, 3);
  }
}

static void test_paper_numbers(void) {
  struct {
    int p, m;
    double ms[3];
  } cases[] = {{4, 8, {33, 27, 24}}, {8, 24, {93, 79, 72}}};
  kt_gen_kind kinds[3] = {KT_SCHED_1F1B, KT_SCHED_ZB_H1, KT_SCHED_ZB_H2};
  kt_metrics m;
  for (int i = 0; i < 2; i++)
    for (int k = 0; k < 3; k++) {
      if (run(kinds[k], cases[i].p, cases[i].m, NULL, 0, &m)) {
        CHECK(0);
        continue;
      }
      CHECK_MSG(m.period == cases[i].ms[k], "%s P=%d M=%d makespan %g want %g",
                kt_gen_kind_name(kinds[k]), cases[i].p, cases[i].m, m.period, cases[i].ms[k]);
      kt_metrics_free(&m);
    }
  /* per-rank peak memory, M_B = 1000 and M_W = 1: both counts in one number */
  double want[3][4] = {
      {4000, 3000, 2000, 1000}, {4000, 3001, 2002, 1003}, {7000, 5002, 3004, 1006}};
  kt_costs c;
  kt_costs_default(&c);
  c.mem_act = 1000, c.mem_wgrad = 1;
  for (int k = 0; k < 3; k++) {
    if (run(kinds[k], 4, 8, &c, 0, &m)) {
      CHECK(0);
      continue;
    }
    for (int r = 0; r < 4; r++)
      CHECK_MSG(m.ranks[r].peak_memory == want[k][r], "%s rank %d peak %g want %g",
                kt_gen_kind_name(kinds[k]), r, m.ranks[r].peak_memory, want[k][r]);
    kt_metrics_free(&m);
  }
}

static void test_zbv(void) {
  kt_costs c;
  kt_costs_default(&c);
  c.mem_act = 1000, c.mem_wgrad = 1;
  int ps[] = {2, 4, 8};
  for (int i = 0; i < 3; i++)
    for (int f = 2; f <= 4; f += 2) {
      int p = ps[i], mb = f * p;
      kt_metrics m;
      if (run(KT_SCHED_ZBV, p, mb, &c, 0, &m)) {
        CHECK(0);
        continue;
      }
      CHECK_MSG(m.bubble_ratio == 0 && m.period == 6.0 * mb, "zbv P=%d M=%d bubble %g makespan %g",
                p, mb, m.bubble_ratio, m.period);
      for (int r = 0; r < p; r++)
        CHECK_MSG(m.ranks[r].peak_memory == 2000.0 * p, "zbv P=%d M=%d rank %d peak %g", p, mb, r,
                  m.ranks[r].peak_memory);
      kt_metrics_free(&m);
    }
  kt_schedule s;
  kt_error err;
  kt_gen_params params = {.p = 4, .m = 7};
  CHECK(kt_generate(KT_SCHED_ZBV, &params, &s, &err) == KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "M >= 2P");
  params = (kt_gen_params){.p = 4, .m = 8, .v = 3};
  CHECK(kt_generate(KT_SCHED_ZBV, &params, &s, &err) == KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "exactly 2 chunks");
}

static void test_dualpipev(void) {
  kt_error err;
  char *text = NULL;
  const char *path = kt_test_data_path("dualpipev_4rank_10mb.csv");
  kt_schedule ref, s;
  if (kt_read_file(path, &text, NULL, &err) || kt_schedule_parse(text, &ref, &err)) {
    CHECK_MSG(0, "%s: %s", path, err.msg);
    free(text);
    return;
  }
  free(text);
  if (gen(KT_SCHED_DUALPIPEV, 4, 10, NULL, 0, &s)) {
    CHECK(0);
    kt_schedule_free(&ref);
    return;
  }
  /* PyTorch's order, action by action (idle slots ignored), overlap flags included */
  for (int r = 0; r < 4; r++) {
    CHECK_EQ_INT(s.ranks[r].n, ref.ranks[r].n);
    for (size_t i = 0; i < s.ranks[r].n && i < ref.ranks[r].n; i++) {
      const kt_action *a = &s.ranks[r].actions[i], *b = &ref.ranks[r].actions[i];
      char x[32], y[32];
      kt_action_format(a, x, sizeof x), kt_action_format(b, y, sizeof y);
      CHECK_MSG(a->stage == b->stage && a->mb == b->mb && a->op == b->op && a->flags == b->flags,
                "rank %d action %zu: %s%s vs PyTorch %s%s", r, i, x,
                a->flags ? " (overlapped)" : "", y, b->flags ? " (overlapped)" : "");
    }
  }
  CHECK(kt_schedule_validate(&s, &err) == KT_OK);
  kt_schedule_free(&ref);
  /* unit costs: a pair costs F + B, every rank idles 2(P-1) = 6 */
  kt_metrics m;
  if (kt_simulate_metrics(&s, NULL, &m, &err) == KT_OK) {
    CHECK_NEAR(m.period, 66, 1e-12);
    for (int r = 0; r < 4; r++) {
      CHECK_NEAR(m.ranks[r].idle, 6, 1e-12);
      CHECK_NEAR(m.ranks[r].peak_memory, 9, 1e-12); /* 2P+1 activations */
    }
    kt_metrics_free(&m);
  } else {
    CHECK_MSG(0, "%s", err.msg);
  }
  kt_schedule_free(&s);
}

/* DualPipeV's overlapped pairs as the cost model runs them, its sizes and
 * its idle at every M >= 2P. */
static void test_dualpipev_pairs(void) {
  kt_schedule s;
  kt_error err;
  kt_metrics m;
  /* the overlap cost model: a pair starts when both inputs are ready and
   * publishes both results when it ends (F&B = T_F + T_B + T_W) */
  kt_costs c;
  kt_costs_default(&c);
  c.tf = 1, c.tb = 2, c.tw = 0.5;
  kt_timeline tl;
  if (!gen(KT_SCHED_DUALPIPEV, 2, 4, NULL, 0, &s) && kt_simulate(&s, &c, &tl, &err) == KT_OK) {
    int pairs = 0;
    for (size_t i = 0; i + 1 < tl.n_events; i++) {
      const kt_event *a = &tl.events[i], *b = &tl.events[i + 1];
      if (!(a->flags & KT_ACTION_OVERLAP_NEXT)) continue;
      pairs++;
      CHECK(a->rank == b->rank && a->op == KT_OP_F && b->op == KT_OP_B);
      CHECK_NEAR(b->start, a->end, 1e-12);
      CHECK_NEAR(b->end - a->start, c.tf + c.tb + c.tw, 1e-12);
    }
    CHECK(pairs > 0);
    kt_timeline_free(&tl);
    kt_schedule_free(&s);
  } else {
    CHECK_MSG(0, "dualpipev P=2 M=4: %s", err.msg);
  }
  /* bad sizes: one-line reasons */
  kt_gen_params params = {.p = 4, .m = 7};
  CHECK(kt_generate(KT_SCHED_DUALPIPEV, &params, &s, &err) == KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "M >= 2P");
  params = (kt_gen_params){.p = 4, .m = 8, .v = 1};
  CHECK(kt_generate(KT_SCHED_DUALPIPEV, &params, &s, &err) == KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "exactly 2 chunks");
  /* every M >= 2P gives the same idle per rank (the warm-up and drain do not grow) */
  for (int p = 1; p <= 6; p++)
    for (int mb = 2 * p; mb <= 4 * p + 1; mb++) {
      if (run(KT_SCHED_DUALPIPEV, p, mb, NULL, 0, &m)) {
        CHECK(0);
        continue;
      }
      CHECK_MSG(fabs(m.period - (6.0 * mb + 2 * (p - 1))) < 1e-9, "dualpipev P=%d M=%d: %g", p, mb,
                m.period);
      kt_metrics_free(&m);
    }
}

/* The closed forms of kt_gen_closed_form_bubble / _peak_memory against
 * the simulator: random uniform T_F, T_B, T_W (some zero), T_comm = 0. */
static void test_closed_forms(void) {
  kt_gen_kind kinds[] = {KT_SCHED_ZB_H1, KT_SCHED_ZB_H2, KT_SCHED_ZBV, KT_SCHED_DUALPIPEV};
  int tried = 0;
  for (int trial = 0; trial < 300; trial++) {
    int p = 1 + (int)urand(0, 10), mb = 2 * p + (int)urand(0, 3 * p + 1);
    kt_costs c;
    kt_costs_default(&c);
    double *t[] = {&c.tf, &c.tb, &c.tw};
    for (int k = 0; k < 3; k++) *t[k] = urand(0, 1) < 0.15 ? 0 : urand(0, 3);
    c.mem_act = urand(0.5, 2), c.mem_wgrad = urand(0, 1) * c.mem_act;
    for (int k = 0; k < 4; k++) {
      kt_metrics m;
      kt_schedule s;
      /* zbv's forms are its fixed order's: generated without costs (tuned to
       * them it may be faster, test_closed_forms.c) */
      if (gen(kinds[k], p, mb, kinds[k] == KT_SCHED_ZBV ? NULL : &c, 0, &s)) {
        CHECK(0);
        continue;
      }
      kt_error err;
      kt_status st = kt_simulate_metrics(&s, &c, &m, &err);
      kt_schedule_free(&s);
      if (st) {
        CHECK_MSG(0, "%s: %s", kt_gen_kind_name(kinds[k]), err.msg);
        continue;
      }
      int v = kinds[k] == KT_SCHED_ZBV || kinds[k] == KT_SCHED_DUALPIPEV ? 2 : 1;
      const char *expr, *mexpr;
      double want = kt_gen_closed_form_bubble(kinds[k], p, v, mb, c.tf, c.tb, c.tw, &expr);
      double peak =
          kt_gen_closed_form_peak_memory(kinds[k], p, v, mb, c.mem_act, c.mem_wgrad, &mexpr);
      CHECK_MSG(expr && mexpr && want >= 0 && peak >= 0, "%s P=%d M=%d: no closed form",
                kt_gen_kind_name(kinds[k]), p, mb);
      CHECK_MSG(fabs(m.bubble_ratio - want) <= 1e-9,
                "%s P=%d M=%d tf=%g tb=%g tw=%g: bubble %.12g, "
                "closed form %.12g",
                kt_gen_kind_name(kinds[k]), p, mb, c.tf, c.tb, c.tw, m.bubble_ratio, want);
      CHECK_MSG(fabs(max_peak(&m) - peak) <= 1e-9 * peak,
                "%s P=%d M=%d M_B=%g M_W=%g: peak %.12g, "
                "closed form %.12g",
                kt_gen_kind_name(kinds[k]), p, mb, c.mem_act, c.mem_wgrad, max_peak(&m), peak);
      kt_metrics_free(&m);
      tried++;
    }
  }
  CHECK(tried == 1200);
}

/* The per-rank and classic peak memory forms, and the paper's forms as a
 * special case. */
static void test_closed_forms_memory(void) {
  /* the per-rank forms of zb-h1 and zb-h2: (P-r)M_B + r M_W and (2P-1-2r)M_B + 2r M_W */
  kt_costs c;
  kt_costs_default(&c);
  c.mem_act = 7, c.mem_wgrad = 3;
  for (int p = 1; p <= 8; p++) {
    kt_metrics h1, h2;
    if (run(KT_SCHED_ZB_H1, p, 2 * p, &c, 0, &h1)) {
      CHECK(0);
      continue;
    }
    if (run(KT_SCHED_ZB_H2, p, 2 * p, &c, 0, &h2)) {
      CHECK(0);
      kt_metrics_free(&h1);
      continue;
    }
    for (int r = 0; r < p; r++) {
      CHECK_NEAR(h1.ranks[r].peak_memory, (p - r) * 7.0 + r * 3.0, 1e-12);
      CHECK_NEAR(h2.ranks[r].peak_memory, (2 * p - 1 - 2 * r) * 7.0 + 2 * r * 3.0, 1e-12);
    }
    kt_metrics_free(&h1);
    kt_metrics_free(&h2);
  }
  /* the classic schedules' peak memory forms (interleaved: M a multiple of P) */
  kt_gen_kind classic[] = {KT_SCHED_GPIPE, KT_SCHED_1F1B, KT_SCHED_INTERLEAVED,
                           KT_SCHED_LOOPED_BFS};
  for (int k = 0; k < 4; k++)
    for (int p = 1; p <= 8; p++)
      for (int mb = 1; mb <= 3 * p; mb++) {
        int v = kt_gen_default_chunks(classic[k]);
        const char *me;
        double want = kt_gen_closed_form_peak_memory(classic[k], p, v, mb, 1, 0, &me);
        kt_metrics m;
        if (want < 0 || run(classic[k], p, mb, NULL, 0, &m)) continue;
        CHECK_MSG(max_peak(&m) == want, "%s P=%d M=%d: peak %g, %s = %g",
                  kt_gen_kind_name(classic[k]), p, mb, max_peak(&m), me, want);
        kt_metrics_free(&m);
      }
  /* the paper's forms are the special case T_W <= T_F */
  const char *e;
  double b = kt_gen_closed_form_bubble(KT_SCHED_ZB_H1, 4, 1, 8, 2, 1.5, 1, &e);
  CHECK_NEAR(b, 3 * 2.5 / (8 * 4.5 + 3 * 2.5), 1e-15);
  b = kt_gen_closed_form_bubble(KT_SCHED_ZB_H2, 4, 1, 8, 2, 1.5, 1, &e);
  CHECK_NEAR(b, 3 * 1.5 / (8 * 4.5 + 3 * 1.5), 1e-15);
  /* outside their conditions there is no closed form */
  CHECK(kt_gen_closed_form_bubble(KT_SCHED_ZB_H1, 4, 1, 3, 1, 1, 1, &e) < 0 && !e);
  CHECK(kt_gen_closed_form_bubble(KT_SCHED_ZB_H2, 4, 1, 7, 1, 1, 1, &e) < 0 && !e);
  CHECK(kt_gen_closed_form_peak_memory(KT_SCHED_ZBV, 4, 2, 8, 1, 2, &e) < 0 && !e);
  CHECK(kt_gen_closed_form_peak_memory(KT_SCHED_ZB_AUTO, 4, 1, 8, 1, 0, &e) < 0);
}

/* interleaved-zb's closed forms hold for every M >= P, any V >= 2: the
 * ZB-H1 idle per stage, and peak memory min((V-1)G+P-r, V*M)*M_B + r*M_W on
 * rank r (G micro-batches per round); below P there is no bubble form and
 * only rank 0's (the largest) peak has one. */
static void test_interleaved_zb(void) {
  int tried = 0;
  for (int p = 1; p <= 7; p++)
    for (int v = 2; v <= 4; v++)
      for (int mb = 1; mb <= 3 * p + 2; mb++) {
        kt_costs c;
        kt_costs_default(&c);
        double *t[] = {&c.tf, &c.tb, &c.tw};
        for (int k = 0; k < 3; k++) *t[k] = urand(0, 1) < 0.15 ? 0 : urand(0, 3);
        c.mem_act = urand(0.5, 2), c.mem_wgrad = urand(0, 1) * c.mem_act;
        kt_schedule s;
        kt_error err;
        kt_gen_params params = {.p = p, .v = v, .m = mb};
        if (kt_generate(KT_SCHED_INTERLEAVED_ZB, &params, &s, &err)) {
          CHECK_MSG(0, "interleaved-zb P=%d V=%d M=%d: %s", p, v, mb, err.msg);
          continue;
        }
        kt_metrics m;
        if (kt_simulate_metrics(&s, &c, &m, &err)) {
          CHECK_MSG(0, "interleaved-zb P=%d V=%d M=%d: %s", p, v, mb, err.msg);
          kt_schedule_free(&s);
          continue;
        }
        const char *e;
        double want =
            kt_gen_closed_form_bubble(KT_SCHED_INTERLEAVED_ZB, p, v, mb, c.tf, c.tb, c.tw, &e);
        if (mb >= p) {
          CHECK_MSG(e && fabs(m.bubble_ratio - want) <= 1e-9,
                    "interleaved-zb P=%d V=%d M=%d "
                    "tf=%g tb=%g tw=%g: bubble %.12g, closed form %.12g",
                    p, v, mb, c.tf, c.tb, c.tw, m.bubble_ratio, want);
          tried++;
        } else {
          CHECK(want < 0 && !e);
        }
        int rounds = mb / p > 1 ? mb / p : 1, g = mb / rounds + (mb % rounds > 0);
        double peak = kt_gen_closed_form_peak_memory(KT_SCHED_INTERLEAVED_ZB, p, v, mb, c.mem_act,
                                                     c.mem_wgrad, &e);
        CHECK_MSG(e && fabs(max_peak(&m) - peak) <= 1e-9 * peak,
                  "interleaved-zb P=%d V=%d M=%d: "
                  "peak %g, closed form %g",
                  p, v, mb, max_peak(&m), peak);
        for (int r = 0; r < p && mb >= p; r++) { /* the per-rank form: M >= P */
          int warm = (v - 1) * g + p - 1 - r;
          double rank = warm >= v * mb
                            ? v * mb * c.mem_act
                            : (warm + 1) * c.mem_act + (r < v * mb - warm ? r : 0) * c.mem_wgrad;
          CHECK_MSG(fabs(m.ranks[r].peak_memory - rank) <= 1e-9 * rank,
                    "interleaved-zb P=%d V=%d "
                    "M=%d rank %d: peak %g, form %g",
                    p, v, mb, r, m.ranks[r].peak_memory, rank);
        }
        CHECK(kt_schedule_validate(&s, &err) == KT_OK);
        kt_metrics_free(&m);
        kt_schedule_free(&s);
      }
  CHECK(tried > 200);
}

/* PyTorch's ScheduleInterleavedZeroBubble order (P=2, V=2, M=8) is
 * interleaved-zb, action for action; no cost model makes it faster. */
static void test_interleaved_zb_torch_order(void) {
  kt_schedule ref, s;
  kt_error err;
  REQUIRE_VOID(kt_schedule_parse_file(kt_test_data_path("zb1p_2rank_2stagep_compute.csv"), &ref,
                                      &err) == KT_OK);
  kt_gen_params params = {.p = 2, .v = 2, .m = 8};
  REQUIRE_VOID(kt_generate(KT_SCHED_INTERLEAVED_ZB, &params, &s, &err) == KT_OK);
  for (int r = 0; r < 2; r++) {
    CHECK_EQ_INT(s.ranks[r].n, ref.ranks[r].n);
    for (size_t i = 0; i < s.ranks[r].n && i < ref.ranks[r].n; i++) {
      const kt_action *a = &s.ranks[r].actions[i], *b = &ref.ranks[r].actions[i];
      CHECK(a->stage == b->stage && a->mb == b->mb && a->op == b->op);
    }
  }
  for (int trial = 0; trial < 50; trial++) {
    kt_costs c;
    random_costs(&c, 4, trial % 2, trial % 3 ? urand(0, 1) : 0);
    kt_metrics ours, theirs;
    if (!kt_simulate_metrics(&s, &c, &ours, &err) &&
        !kt_simulate_metrics(&ref, &c, &theirs, &err)) {
      CHECK_MSG(ours.makespan <= theirs.makespan * (1 + 1e-12),
                "PyTorch's ZB1P order %g beats "
                "interleaved-zb %g",
                theirs.makespan, ours.makespan);
      kt_metrics_free(&ours);
      kt_metrics_free(&theirs);
    } else CHECK(0);
    kt_costs_free(&c);
  }
  kt_schedule_free(&ref);
  kt_schedule_free(&s);
}

/* Every schedule validates and runs to completion (no deadlock) under random
 * per-stage costs and communication. */
static void test_random_costs_never_deadlock(void) {
  int runs = 0;
  for (int k = 0; k < KT_SCHED_COUNT; k++)
    for (int p = 1; p <= 8; p++) {
      int ms[] = {1, p, p + 1, 2 * p, 2 * p + 3, 3 * p};
      for (int i = 0; i < 6; i++) {
        int v = kt_gen_default_chunks((kt_gen_kind)k);
        kt_costs c;
        random_costs(&c, p * v, urand(0, 1) < 0.5, urand(0, 1) < 0.3 ? 0 : urand(0, 2));
        kt_schedule s;
        kt_error err;
        kt_gen_params params = {.p = p, .m = ms[i], .costs = &c};
        if (kt_generate((kt_gen_kind)k, &params, &s, &err)) {
          CHECK_MSG(err.msg[0] && !strchr(err.msg, '\n'), "%s: no one-line reason",
                    kt_gen_kind_name((kt_gen_kind)k));
          kt_costs_free(&c);
          continue;
        }
        kt_status st = kt_schedule_validate(&s, &err);
        CHECK_MSG(st == KT_OK, "%s P=%d M=%d: %s", s.name, p, ms[i], err.msg);
        kt_metrics m;
        st = kt_simulate_metrics(&s, &c, &m, &err);
        CHECK_MSG(st == KT_OK, "%s P=%d M=%d random costs: %s", s.name, p, ms[i], err.msg);
        if (!st) {
          CHECK(m.period > 0 && m.bubble_ratio >= -1e-12 && m.bubble_ratio < 1);
          kt_metrics_free(&m);
        }
        runs++;
        kt_schedule_free(&s);
        kt_costs_free(&c);
      }
    }
  CHECK(runs > 350);
}

/* Makespan of zb-auto's own heuristic (handcrafted candidates left out). */
static double heuristic_makespan(int p, int m, const kt_costs *c, double limit) {
  kt_schedule s;
  kt_error err;
  if (kt_schedule_init(&s, p, 1, m, KT_PLACEMENT_LOOP, &err)) return -1;
  kt_metrics met;
  double ms = -1;
  static const kt__search_opts heur = {.lists = 1, .rounds = 1};
  kt_status st = kt__zb_auto_build(&s, c, limit, &heur, 0, NULL, &err);
  if (!st) st = kt_simulate_metrics(&s, c, &met, &err);
  if (!st) ms = met.period, kt_metrics_free(&met);
  else fprintf(stderr, "zb-auto heuristic P=%d M=%d: %s\n", p, m, err.msg);
  kt_schedule_free(&s);
  return ms;
}

static void test_zb_auto(void) {
  /* the paper's numbers at P*M_B (zb-h1's memory) and 2P*M_B (zb-h2's) */
  struct {
    int p, m;
    double h1, h2;
  } cases[] = {{4, 8, 27, 24}, {8, 24, 79, 72}};
  for (int i = 0; i < 2; i++) {
    int p = cases[i].p, mb = cases[i].m;
    kt_metrics m;
    if (!run(KT_SCHED_ZB_AUTO, p, mb, NULL, 0, &m)) { /* default limit P*M_B */
      CHECK_NEAR(m.period, cases[i].h1, 1e-12);
      CHECK(max_peak(&m) <= p);
      kt_metrics_free(&m);
    } else CHECK(0);
    if (!run(KT_SCHED_ZB_AUTO, p, mb, NULL, 2.0 * p, &m)) {
      CHECK_NEAR(m.period, cases[i].h2, 1e-12);
      CHECK(max_peak(&m) <= 2 * p);
      kt_metrics_free(&m);
    } else CHECK(0);
    /* the heuristic finds them by itself */
    CHECK_NEAR(heuristic_makespan(p, mb, NULL, p), cases[i].h1, 1e-12);
    CHECK_NEAR(heuristic_makespan(p, mb, NULL, 2.0 * p), cases[i].h2, 1e-12);
  }
  /* a grid of sizes, costs and limits: never above the limit, and at P*M_B
   * and 2P*M_B never slower than zb-h1 and zb-h2 */
  int runs = 0, better = 0;
  for (int p = 1; p <= 8; p += (p < 4 ? 1 : 2))
    for (int mi = 0; mi < 4; mi++) {
      int mbs[] = {1, p, 2 * p + 1, 3 * p}, mb = mbs[mi];
      for (int li = 0; li < 6; li++) {
        kt_costs c;
        random_costs(&c, p, urand(0, 1) < 0.4, urand(0, 1) < 0.5 ? 0 : urand(0, 1));
        c.mem_act = urand(0.5, 2);
        c.mem_wgrad = urand(0, 1) < 0.2 ? urand(1, 1.5) * c.mem_act : urand(0, 1) * c.mem_act;
        double need = fmax(c.mem_act, c.mem_wgrad);
        double factors[] = {1, 1.5, 2.5, p, 2.0 * p, 3.0 * p}, limit = factors[li] * need;
        kt_metrics m;
        if (run(KT_SCHED_ZB_AUTO, p, mb, &c, limit, &m)) {
          CHECK(0);
          kt_costs_free(&c);
          continue;
        }
        CHECK_MSG(max_peak(&m) <= limit * (1 + 1e-12), "zb-auto P=%d M=%d limit %g: peak %g", p, mb,
                  limit, max_peak(&m));
        runs++;
        if (c.mem_wgrad <= c.mem_act && (li == 3 || li == 4)) {
          kt_metrics h;
          kt_gen_kind hk = li == 3 ? KT_SCHED_ZB_H1 : KT_SCHED_ZB_H2;
          if (!run(hk, p, mb, &c, 0, &h)) {
            if (max_peak(&h) <= limit * (1 + 1e-12)) {
              CHECK_MSG(m.period <= h.makespan * (1 + 1e-12), "zb-auto P=%d M=%d: %g, %s %g", p, mb,
                        m.period, kt_gen_kind_name(hk), h.makespan);
              better += m.period < h.makespan * (1 - 1e-9);
            }
            kt_metrics_free(&h);
          } else CHECK(0);
        }
        kt_metrics_free(&m);
        kt_costs_free(&c);
      }
    }
  CHECK(runs == 6 * 4 * 6);
  CHECK(better > 0); /* under uneven costs the search finds faster orders */
}

/* zb-auto's bad limits and layouts (one-line reasons), its placements and
 * the limit the CLI reports. */
static void test_zb_auto_params(void) {
  kt_schedule s;
  kt_error err;
  kt_costs c;
  kt_costs_default(&c);
  c.mem_act = 2;
  kt_gen_params params = {.p = 4, .m = 8, .costs = &c, .mem_limit = 1.5};
  CHECK(kt_generate(KT_SCHED_ZB_AUTO, &params, &s, &err) == KT_EMEMLIMIT);
  CHECK_STR_CONTAINS(err.msg, "below what one micro-batch needs");
  params.mem_limit = NAN;
  CHECK(kt_generate(KT_SCHED_ZB_AUTO, &params, &s, &err) == KT_EINVAL);
  /* with V chunks per rank zb-auto searches loop placement (zbv-auto: v placement) */
  params = (kt_gen_params){.p = 4, .m = 8, .v = 2};
  CHECK(kt_generate(KT_SCHED_ZB_AUTO, &params, &s, &err) == KT_OK);
  CHECK(s.v == 2 && s.placement == KT_PLACEMENT_LOOP);
  kt_schedule_free(&s);
  CHECK(kt_generate(KT_SCHED_ZBV_AUTO, &params, &s, &err) == KT_OK);
  CHECK(s.v == 2 && s.placement == KT_PLACEMENT_V);
  kt_schedule_free(&s);
  params.v = 3;
  CHECK(kt_generate(KT_SCHED_ZBV_AUTO, &params, &s, &err) == KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "exactly 2 chunks");
  /* the limit the CLI reports */
  params = (kt_gen_params){.p = 4, .m = 8, .costs = &c};
  CHECK_NEAR(kt_gen_mem_limit(&params), 8, 1e-15);
  params.mem_limit = 5;
  CHECK_NEAR(kt_gen_mem_limit(&params), 5, 1e-15);
}

/* The CLI: -v other than 2 for zbv/dualpipev is a usage error with a reason,
 * and the compare command prints every zero-bubble row. */
static void test_cli(void) {
  const char *cli = getenv("KT_CLI");
  if (!cli) {
    printf("test_zero_bubble: KT_CLI not set, CLI checks skipped\n");
    return;
  }
  char cmd[2048], out[16384];
  const char *bad[] = {"sim --schedule zbv -p 4 -m 8 -v 3",
                       "sim --schedule dualpipev -p 4 -m 8 -v 1",
                       "sim --schedule dualpipev -p 4 -m 6"};
  for (int i = 0; i < 3; i++) {
    snprintf(cmd, sizeof cmd, "'%s' %s 2>&1 >/dev/null; echo \"rc=$?\"", cli, bad[i]);
    FILE *f = popen(cmd, "r");
    size_t n = f ? fread(out, 1, sizeof out - 1, f) : 0;
    out[n] = 0;
    if (f) pclose(f);
    CHECK_STR_CONTAINS(out, "rc=2");
    CHECK_STR_CONTAINS(out, i < 2 ? "needs exactly 2 chunks per rank" : "needs M >= 2P");
  }
  snprintf(cmd, sizeof cmd,
           "'%s' compare -p 8 -m 24 --tf 18.5 --tb 18.1 --tw 9.3 --comm 0.6 2>&1; echo \"rc=$?\"",
           cli);
  FILE *f = popen(cmd, "r");
  size_t n = f ? fread(out, 1, sizeof out - 1, f) : 0;
  out[n] = 0;
  if (f) pclose(f);
  CHECK_STR_CONTAINS(out, "rc=0");
  const char *rows[] = {"\n1f1b ", "\ninterleaved ", "\nzb-h1 ",  "\nzb-h2 ",
                        "\nzbv ",  "\ndualpipev ",   "\nzb-auto "};
  for (int i = 0; i < 7; i++) CHECK_STR_CONTAINS(out, rows[i]);
  CHECK_STR_CONTAINS(out, "messages");
  CHECK(!strstr(out, "not applicable"));
}

int main(void) {
  test_paper_numbers();
  test_zbv();
  test_dualpipev();
  test_dualpipev_pairs();
  test_closed_forms();
  test_closed_forms_memory();
  test_interleaved_zb();
  test_interleaved_zb_torch_order();
  test_random_costs_never_deadlock();
  test_zb_auto();
  test_zb_auto_params();
  test_cli();
  return kt_test_done(__FILE__);
}
