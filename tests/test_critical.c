/* kt_timeline_critical against an independent replay of the simulator's
 * rules: replaying a simulated timeline reproduces its start times; delaying
 * any action by its slack keeps the step's end, and by slack + d moves the
 * end by d; the critical path runs from the first F to the last action,
 * every step on it binding (the next action starts when it releases it)
 * and every action on it with slack 0. Over every generator, with uniform,
 * per-stage, communication, send-overhead and overlap costs. */
#include "check.h"
#include "kaiten/generators.h"
#include "kaiten/sim.h"

/* The event on rank r with the largest start below `before` (-1: none). */
static long rank_prev(const kt_timeline *t, size_t x) {
  long best = -1;
  for (size_t i = 0; i < t->n_events; i++)
    if (t->events[i].rank == t->events[x].rank && t->events[i].start < t->events[x].start &&
        (best < 0 || t->events[i].start > t->events[best].start))
      best = (long)i;
  return best;
}

static long rank_next(const kt_timeline *t, size_t x) {
  long best = -1;
  for (size_t i = 0; i < t->n_events; i++)
    if (t->events[i].rank == t->events[x].rank && t->events[i].start > t->events[x].start &&
        (best < 0 || t->events[i].start < t->events[best].start))
      best = (long)i;
  return best;
}

static long find_ev(const kt_timeline *t, int stage, int mb, int op_a, int op_b) {
  for (size_t i = 0; i < t->n_events; i++)
    if (t->events[i].stage == stage && t->events[i].mb == mb &&
        (t->events[i].op == op_a || t->events[i].op == op_b))
      return (long)i;
  return -1;
}

/* The maker of x's input, written out from the rules (F from the stage
 * before; a backward from the stage after, or the last stage's F; W from
 * its I). */
static long maker(const kt_timeline *t, size_t x, int S) {
  const kt_event *e = &t->events[x];
  if (e->op == KT_OP_F) return e->stage ? find_ev(t, e->stage - 1, e->mb, KT_OP_F, KT_OP_F) : -1;
  if (e->op == KT_OP_W) return find_ev(t, e->stage, e->mb, KT_OP_I, KT_OP_I);
  if (e->stage == S - 1) return find_ev(t, e->stage, e->mb, KT_OP_F, KT_OP_F);
  return find_ev(t, e->stage + 1, e->mb, KT_OP_B, KT_OP_I);
}

/* Messages x sends to other ranks. */
static int sends(const kt_timeline *t, size_t x) {
  const kt_event *e = &t->events[x];
  int n = 0;
  for (size_t i = 0; i < t->n_events; i++) {
    const kt_event *c = &t->events[i];
    if (c->mb != e->mb || c->rank == e->rank) continue;
    if (e->op == KT_OP_F && c->op == KT_OP_F && c->stage == e->stage + 1) n++;
    if ((e->op == KT_OP_B || e->op == KT_OP_I) && (c->op == KT_OP_B || c->op == KT_OP_I) &&
        c->stage == e->stage - 1)
      n++;
  }
  return n;
}

static int by_start_tl_cmp(const kt_timeline *t, size_t a, size_t b) {
  return t->events[a].start < t->events[b].start ||
         (t->events[a].start == t->events[b].start && a < b);
}

/* Replays the timeline with one action held back by delay: new starts in
 * st[], returns the new end. */
static double replay(const kt_timeline *t, int S, double hop, double ovh, size_t delayed,
                     double delay, double *st) {
  size_t n = t->n_events, *ord = calloc(n, sizeof *ord);
  double *en = calloc(n, sizeof *en), *pub = calloc(n, sizeof *pub), end = 0;
  for (size_t i = 0; i < n; i++) ord[i] = i;
  for (size_t i = 1; i < n; i++) /* insertion sort by start: small timelines */
    for (size_t j = i; j > 0 && by_start_tl_cmp(t, ord[j], ord[j - 1]); j--) {
      size_t x = ord[j];
      ord[j] = ord[j - 1], ord[j - 1] = x;
    }
  for (size_t k = 0; k < n; k++) {
    size_t x = ord[k];
    long p = rank_prev(t, x);
    double s = 0;
    if (p >= 0 && (t->events[p].flags & KT_ACTION_OVERLAP_NEXT)) {
      s = en[p]; /* a group's later member runs right after the one before */
    } else {
      if (p >= 0) {
        int sent = 0;
        for (long m = p; m >= 0; m = rank_prev(t, (size_t)m)) { /* p's whole group */
          sent += sends(t, (size_t)m);
          long before = rank_prev(t, (size_t)m);
          if (before < 0 || !(t->events[before].flags & KT_ACTION_OVERLAP_NEXT)) break;
        }
        s = en[p] + sent * ovh;
      }
      for (long m = (long)x; m >= 0;) { /* every member's input */
        long q = maker(t, (size_t)m, S);
        if (q >= 0) s = fmax(s, pub[q] + (t->events[q].rank != t->events[m].rank ? hop : 0));
        m = (t->events[m].flags & KT_ACTION_OVERLAP_NEXT) ? rank_next(t, (size_t)m) : -1;
      }
    }
    if (x == delayed) s += delay;
    st[x] = s;
    en[x] = s + (t->events[x].end - t->events[x].start);
    end = fmax(end, en[x]);
    /* a group's results leave when it ends: set for all members at its last */
    if (!(t->events[x].flags & KT_ACTION_OVERLAP_NEXT))
      for (long m = (long)x; m >= 0; m = rank_prev(t, (size_t)m)) {
        pub[m] = en[x];
        long before = rank_prev(t, (size_t)m);
        if (before < 0 || !(t->events[before].flags & KT_ACTION_OVERLAP_NEXT)) break;
      }
  }
  free(ord);
  free(en);
  free(pub);
  return end;
}

static void check_case(kt_gen_kind k, const kt_costs *given, const char *what) {
  kt_gen_params prm = {.p = 4, .m = 8, .costs = given};
  kt_schedule s;
  kt_error err;
  if (kt_generate(k, &prm, &s, &err)) return; /* not for these sizes */
  kt_costs c;
  REQUIRE_VOID(kt_costs_for_chunks(given, s.v, &c, &err) == KT_OK);
  kt_timeline t;
  REQUIRE_VOID(kt_simulate(&s, &c, &t, &err) == KT_OK);
  int S = kt_schedule_stages(&s);
  double hop = kt_cost_comm(&c), ovh = c.send_overhead;
  kt_critical cr;
  REQUIRE_VOID(kt_timeline_critical(&t, hop, ovh, &cr, &err) == KT_OK);
  size_t n = t.n_events;
  double *st = calloc(n, sizeof *st), end = 0;
  for (size_t i = 0; i < n; i++) end = fmax(end, t.events[i].end);
  CHECK_NEAR(cr.end, end, 0);
  /* the replay is the simulator */
  double e0 = replay(&t, S, hop, ovh, (size_t)-1, 0, st);
  CHECK_NEAR(e0, end, 1e-9);
  int off = 0;
  for (size_t i = 0; i < n; i++) off += fabs(st[i] - t.events[i].start) > 1e-9;
  CHECK_MSG(off == 0, "%s %s: the replay moves %d of %zu starts", kt_gen_kind_name(k), what, off,
            n);
  /* slack: held back that long the end stays, a little longer it moves */
  int bad = 0;
  for (size_t i = 0; i < n; i++) {
    double e1 = replay(&t, S, hop, ovh, i, cr.slack[i], st);
    double e2 = replay(&t, S, hop, ovh, i, cr.slack[i] + 0.125, st);
    if (e1 > end + 1e-9 || fabs(e2 - (end + 0.125)) > 1e-9) {
      if (bad++ < 3)
        fprintf(stderr, "%s %s: event %zu (rank %d %d%c%d) slack %g: end %g -> %g, %g\n",
                kt_gen_kind_name(k), what, i, t.events[i].rank, t.events[i].stage,
                kt_op_letter((kt_op)t.events[i].op), t.events[i].mb, cr.slack[i], end, e1, e2);
    }
  }
  CHECK_MSG(bad == 0, "%s %s: %d wrong slacks", kt_gen_kind_name(k), what, bad);
  /* the path: from a start at 0 to the end, binding at every step, no slack */
  REQUIRE_VOID(cr.n_path > 0);
  CHECK_NEAR(t.events[cr.path[0]].start, 0, 1e-12);
  CHECK_NEAR(t.events[cr.path[cr.n_path - 1]].end, end, 1e-12);
  int loose = 0;
  for (size_t j = 0; j < cr.n_path; j++) {
    loose += cr.slack[cr.path[j]] != 0;
    if (j == 0) continue;
    /* held back a little, the step's end moves by as much */
    double e = replay(&t, S, hop, ovh, cr.path[j - 1], 0.0625, st);
    loose += fabs(e - (end + 0.0625)) > 1e-9;
    CHECK(t.events[cr.path[j]].start >= t.events[cr.path[j - 1]].end - 1e-12);
  }
  CHECK_MSG(loose == 0, "%s %s: %d loose steps on the critical path", kt_gen_kind_name(k), what,
            loose);
  free(st);
  kt_critical_free(&cr);
  kt_timeline_free(&t);
  kt_costs_free(&c);
  kt_schedule_free(&s);
}

int main(void) {
  kt_costs c;
  kt_error err;
  for (int k = 0; k < KT_SCHED_COUNT; k++) {
    kt_costs_default(&c);
    check_case((kt_gen_kind)k, &c, "unit costs");
    c.tb = 1.5, c.tw = 0.75, c.comm = 0.3, c.send_overhead = 0.1, c.op_overhead = 0.05;
    check_case((kt_gen_kind)k, &c, "comm and overheads");
    c.overlap = 0.5;
    check_case((kt_gen_kind)k, &c, "overlap credit");
    kt_costs_free(&c);
  }
  /* per stage (one value per stage of V = 1 schedules) */
  kt_costs_default(&c);
  REQUIRE(kt_costs_set(&c, "tf", "1,2.5,1,1.25", &err) == KT_OK);
  REQUIRE(kt_costs_set(&c, "tb", "1,3,1,1", &err) == KT_OK);
  c.comm = 0.2;
  for (int k = 0; k < KT_SCHED_COUNT; k++)
    if (kt_gen_default_chunks((kt_gen_kind)k) == 1)
      check_case((kt_gen_kind)k, &c, "per-stage costs");
  kt_costs_free(&c);

  /* bad arguments */
  kt_timeline t;
  kt_critical cr;
  REQUIRE(kt_timeline_init(&t, 1, "unit", "unit") == KT_OK);
  CHECK_EQ_INT(kt_timeline_critical(&t, -1, 0, &cr, &err), KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "hop -1");
  CHECK_EQ_INT(kt_timeline_critical(&t, 0, 0, &cr, &err), KT_OK); /* empty: nothing to walk */
  CHECK_EQ_INT(cr.n_path, 0);
  kt_critical_free(&cr);
  kt_event e = {.rank = 3, .op = KT_OP_F, .start = 0, .end = 1};
  REQUIRE(kt_timeline_add_event(&t, &e) == KT_OK);
  CHECK_EQ_INT(kt_timeline_critical(&t, 0, 0, &cr, &err), KT_EINVAL);
  kt_timeline_free(&t);
  return kt_test_done(__FILE__);
}
