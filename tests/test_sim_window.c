/* The simulator's window of micro-batches (src/sim/pairs.h): a row holds
 * one micro-batch's results until their last read, the next micro-batch
 * takes the row freed last, one that finds no row free turns the window
 * into the whole table with every held result kept; and simulations that
 * recycle the rows many times (and one that outgrows them halfway) give
 * every event the time the lowered program, which keeps the whole table,
 * gives it. */
#include "check.h"
#include "kaiten/generators.h"
#include "kaiten/sim.h"
#include "sim/pairs.h"

static void ring_rows(void) {
  kt__pairs t;
  int m = 16, *reads = calloc((size_t)m, sizeof *reads);
  CHECK(reads != NULL);
  for (int mb = 0; mb < m; mb++) reads[mb] = 2;
  CHECK_EQ_INT(kt__pairs_init(&t, 3, m, 3, 4, reads), 0);
  CHECK_EQ_INT(t.window, 4);
  CHECK(isnan(kt__pairs_get(&t, KT_OUT_F, 0, 1))); /* nothing written yet */
  *kt__pairs_put(&t, KT_OUT_F, 0, 1) = 2.5;
  CHECK_EQ_INT(t.row_of[1], 0); /* the first free row */
  CHECK(kt__pairs_get(&t, KT_OUT_F, 0, 1) == 2.5);
  CHECK(isnan(kt__pairs_get(&t, KT_OUT_BI, 0, 1)));
  CHECK(isnan(kt__pairs_get(&t, KT_OUT_F, 0, 5))); /* 5 holds no row */
  kt__pairs_read(&t, 1);
  CHECK_EQ_INT(t.row_of[1], 0); /* one read still to come */
  kt__pairs_read(&t, 1);
  CHECK_EQ_INT(t.row_of[1], -1);
  *kt__pairs_put(&t, KT_OUT_BI, 2, 5) = 7; /* 5 takes the row freed last */
  CHECK_EQ_INT(t.row_of[5], 0);
  CHECK(isnan(kt__pairs_get(&t, KT_OUT_F, 0, 5))); /* 1's results are not 5's */
  CHECK(isnan(kt__pairs_get(&t, KT_OUT_F, 0, 1)));
  *kt__pairs_put(&t, KT_OUT_I, 1, 2) = 3;
  *kt__pairs_put(&t, KT_OUT_F, 0, 3) = 1;
  *kt__pairs_put(&t, KT_OUT_F, 2, 4) = 6;
  CHECK_EQ_INT(t.n_free, 0);
  /* 9 finds no row free: the whole table, every held result kept */
  double *slot = kt__pairs_put(&t, KT_OUT_F, 1, 9);
  CHECK(slot != NULL);
  if (slot) *slot = 4;
  CHECK_EQ_INT(t.window, 0);
  CHECK(kt__pairs_get(&t, KT_OUT_BI, 2, 5) == 7);
  CHECK(kt__pairs_get(&t, KT_OUT_I, 1, 2) == 3);
  CHECK(kt__pairs_get(&t, KT_OUT_F, 0, 3) == 1);
  CHECK(kt__pairs_get(&t, KT_OUT_F, 2, 4) == 6);
  CHECK(kt__pairs_get(&t, KT_OUT_F, 1, 9) == 4);
  CHECK(isnan(kt__pairs_get(&t, KT_OUT_F, 0, 1)));
  kt__pairs_read(&t, 9); /* the whole table frees nothing */
  CHECK(kt__pairs_get(&t, KT_OUT_F, 1, 9) == 4);
  kt__pairs_free(&t);
}

/* Every event of s at the same times as in its lowered program's run. */
static void same_as_lowered(const kt_schedule *s, const kt_costs *c, const char *what) {
  kt_schedule low;
  kt_timeline a, b;
  kt_error err = {{0}};
  CHECK_MSG(!kt_schedule_lower(s, &low, &err), "%s: %s", what, err.msg);
  CHECK_MSG(!kt_simulate(s, c, &a, &err), "%s: %s", what, err.msg);
  CHECK_MSG(!kt_simulate(&low, c, &b, &err), "%s lowered: %s", what, err.msg);
  kt_timeline_sort(&a);
  kt_timeline_sort(&b);
  CHECK_EQ_INT(a.n_events, b.n_events);
  size_t differ = 0;
  for (size_t i = 0; i < a.n_events && i < b.n_events; i++)
    differ += a.events[i].start != b.events[i].start || a.events[i].end != b.events[i].end ||
              a.events[i].mb != b.events[i].mb || a.events[i].stage != b.events[i].stage;
  CHECK_MSG(differ == 0, "%s: %zu of %zu events differ from the lowered run", what, differ,
            a.n_events);
  kt_timeline_free(&a);
  kt_timeline_free(&b);
  kt_schedule_free(&low);
}

/* 1F1B for the first half of the micro-batches, then every forward of the
 * rest before their backwards: the ring outgrown halfway. */
static void ring_then_table(const kt_costs *c) {
  kt_schedule a, g;
  kt_error err = {{0}};
  kt_gen_params p = {.p = 4, .m = 64, .v = 1, .costs = c};
  CHECK(!kt_generate(KT_SCHED_1F1B, &p, &a, &err));
  CHECK(!kt_generate(KT_SCHED_GPIPE, &p, &g, &err));
  /* a's rank r: its 1F1B order up to micro-batch 32, then GPipe's */
  for (int r = 0; r < a.p; r++) {
    size_t k = 0;
    for (size_t i = 0; i < a.ranks[r].n; i++)
      if (a.ranks[r].actions[i].mb < 32) a.ranks[r].actions[k++] = a.ranks[r].actions[i];
    for (size_t i = 0; i < g.ranks[r].n; i++)
      if (g.ranks[r].actions[i].mb >= 32) a.ranks[r].actions[k++] = g.ranks[r].actions[i];
    CHECK_EQ_INT(k, a.ranks[r].n);
  }
  same_as_lowered(&a, c, "1F1B then GPipe");
  kt_schedule_free(&a);
  kt_schedule_free(&g);
}

/* Action lists large enough to share one block on huge pages
 * (kt_schedule_reserve): every action where 1F1B puts it, the
 * simulation's closed forms, a list that outgrows its room moving out of
 * the block with its actions, and the lists changing schedules with their
 * block (ASan checks what is freed). */
static void huge_lists(void) {
  int P = 96, M = 8192; /* 18 MiB of lists */
  kt_gen_params p = {.p = P, .m = M, .v = 1};
  kt_schedule s;
  kt_error err = {{0}};
  CHECK_MSG(!kt_generate(KT_SCHED_1F1B, &p, &s, &err), "%s", err.msg);
  size_t wrong = 0;
  for (int r = 0; r < P; r++) {
    const kt_rank_actions *ra = &s.ranks[r];
    int warm = P - 1 - r, nf = 0, nb = 0;
    CHECK_EQ_INT((int)ra->n, 2 * M);
    for (size_t i = 0; i < ra->n; i++) {
      const kt_action *a = &ra->actions[i];
      int fwd = (int)i < warm || (nf < M && ((int)i - warm) % 2 == 0);
      wrong += a->stage != r || a->op != (fwd ? KT_OP_F : KT_OP_B) || a->mb != (fwd ? nf : nb);
      fwd ? nf++ : nb++;
    }
  }
  CHECK_EQ_INT((int)wrong, 0);
  kt_metrics met;
  CHECK_MSG(!kt_simulate_metrics(&s, NULL, &met, &err), "%s", err.msg);
  CHECK(met.makespan == 3.0 * (M + P - 1)); /* tf = 1, B = tb + tw = 2 */
  CHECK(met.ranks[0].peak_memory == P && met.ranks[P - 1].peak_memory == 1);
  kt_metrics_free(&met);
  CHECK(s.block != NULL && s.ranks[1].actions == s.block + 2 * (size_t)M);
  kt_schedule copy;
  CHECK(!kt_schedule_copy(&copy, &s, &err));
  CHECK(!kt_schedule_push(&s, 1, 1, KT_OP_F, M)); /* no room left in the block */
  CHECK(s.ranks[1].actions < s.block || s.ranks[1].actions >= s.block + s.block_n);
  CHECK(s.ranks[1].n == 2 * (size_t)M + 1 && s.ranks[1].actions[2 * M].mb == M);
  CHECK(!memcmp(s.ranks[1].actions, copy.ranks[1].actions, 2 * (size_t)M * sizeof(kt_action)));
  kt_action *block = s.block;
  kt_schedule_swap_lists(&s, &copy);
  CHECK(copy.block == block && s.block == NULL && copy.ranks[1].n == 2 * (size_t)M + 1);
  kt_schedule_free(&s);
  kt_schedule_free(&copy);
}

int main(void) {
  ring_rows();
  huge_lists();
  kt_costs c;
  kt_costs_default(&c);
  c.comm = 0.25, c.tf = 1.1, c.tb = 1.7, c.tw = 0.6, c.mem_wgrad = 0.5;
  const kt_gen_kind kinds[] = {KT_SCHED_1F1B,  KT_SCHED_GPIPE, KT_SCHED_INTERLEAVED,
                               KT_SCHED_ZB_H1, KT_SCHED_ZB_H2, KT_SCHED_ZBV};
  for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
    int v = kt_gen_default_chunks(kinds[k]);
    kt_gen_params p = {.p = 4, .m = 64, .v = v < 1 ? 1 : v, .costs = &c};
    kt_schedule s;
    kt_error err = {{0}};
    CHECK_MSG(!kt_generate(kinds[k], &p, &s, &err), "%s: %s", kt_gen_kind_name(kinds[k]), err.msg);
    same_as_lowered(&s, &c, kt_gen_kind_name(kinds[k]));
    kt_schedule_free(&s);
  }
  ring_then_table(&c);
  return kt_test_done(__FILE__);
}
