/* The simulator's metrics-only path (kt_simulate_metrics, no timeline
 * stored) gives exactly the metrics of the timeline kt_simulate records, for
 * every built-in schedule, on uniform and per-stage costs with
 * communication and transient memory, and for lowered programs; and a
 * rank's bytes sent are the same whether its messages leave with compute
 * actions or by the SENDs of the lowered program. */
#include "check.h"
#include "kaiten/generators.h"
#include "kaiten/sim.h"

static int same(const kt_metrics *a, const kt_metrics *b, const char *what) {
  int ok = a->p == b->p && a->makespan == b->makespan && a->period == b->period &&
           a->span == b->span && a->step_sync == b->step_sync &&
           a->bubble_ratio == b->bubble_ratio && a->total_busy == b->total_busy;
  for (int r = 0; ok && r < a->p; r++) {
    const kt_rank_metrics *x = &a->ranks[r], *y = &b->ranks[r];
    ok = x->start == y->start && x->end == y->end && x->busy == y->busy && x->idle == y->idle &&
         x->peak_memory == y->peak_memory && x->peak_inflight == y->peak_inflight &&
         x->actions == y->actions && x->bytes_sent == y->bytes_sent;
    if (!ok)
      fprintf(stderr, "%s rank %d: busy %g/%g peak %g/%g inflight %d/%d\n", what, r, x->busy,
              y->busy, x->peak_memory, y->peak_memory, x->peak_inflight, y->peak_inflight);
  }
  return ok;
}

static int64_t total_sent(const kt_metrics *m) {
  int64_t n = 0;
  for (int r = 0; r < m->p; r++) n += m->ranks[r].bytes_sent;
  return n;
}

static void compare(const kt_schedule *s, const kt_costs *c, const char *what) {
  kt_timeline tl;
  kt_metrics from_tl, direct, both;
  kt_error err = {{0}};
  CHECK_MSG(!kt_simulate(s, c, &tl, &err), "%s: %s", what, err.msg);
  CHECK(!kt_timeline_metrics(&tl, &from_tl, &err));
  CHECK(!kt_sim_period(s, c, &from_tl, &err)); /* what the simulations add to a timeline's */
  CHECK_MSG(!kt_simulate_metrics(s, c, &direct, &err), "%s: %s", what, err.msg);
  CHECK_MSG(same(&from_tl, &direct, what), "%s: metrics-only differs from the timeline's", what);
  kt_timeline tl2;
  CHECK(!kt_simulate_both(s, c, &tl2, &both, &err));
  CHECK_MSG(same(&from_tl, &both, what), "%s: kt_simulate_both differs", what);
  CHECK_EQ_INT(tl2.n_events, tl.n_events);
  CHECK(from_tl.makespan > 0);
  kt_timeline_free(&tl);
  kt_timeline_free(&tl2);
  kt_metrics_free(&from_tl);
  kt_metrics_free(&direct);
  kt_metrics_free(&both);
}

int main(void) {
  int cases = 0;
  for (int k = 0; k < KT_SCHED_COUNT; k++)
    for (int pm = 0; pm < 2; pm++) {
      int p = pm ? 8 : 4, m = pm ? 24 : 8;
      int v = kt_gen_default_chunks((kt_gen_kind)k);
      if (v < 1) v = 1;
      int S = p * v;
      /* uneven stage costs, unequal F/B/W, transient scratch, a hop */
      kt_costs c;
      kt_costs_default(&c);
      c.comm = 0.25, c.mem_wgrad = 0.5, c.mem_transient = 0.3;
      c.comm_bytes = 1000; /* counted per message sent, not timed (no bandwidth) */
      double tf[256], tb[256], tw[256], act[256];
      c.n_stages = S, c.stage_tf = tf, c.stage_tb = tb, c.stage_tw = tw, c.stage_mem_act = act;
      for (int i = 0; i < S; i++)
        tf[i] = 1 + 0.1 * (i % 3), tb[i] = 1.3 + 0.05 * (i % 4), tw[i] = 0.6, act[i] = 1 + (i % 2);
      kt_gen_params params = {.p = p, .m = m, .v = v, .costs = &c};
      kt_schedule s;
      kt_error err = {{0}};
      if (kt_generate((kt_gen_kind)k, &params, &s, &err)) {
        fprintf(stderr, "skipped %s P=%d M=%d: %s\n", kt_gen_kind_name((kt_gen_kind)k), p, m,
                err.msg);
        continue;
      }
      char what[96];
      snprintf(what, sizeof what, "%s P=%d M=%d", kt_gen_kind_name((kt_gen_kind)k), p, m);
      compare(&s, &c, what);
      compare(&s, NULL, what);
      kt_schedule lowered;
      CHECK_MSG(!kt_schedule_lower(&s, &lowered, &err), "%s: %s", what, err.msg);
      compare(&lowered, &c, what);
      /* the same messages whether sent by compute actions or by SENDs */
      kt_metrics plain, low;
      if (!kt_simulate_metrics(&s, &c, &plain, &err) &&
          !kt_simulate_metrics(&lowered, &c, &low, &err)) {
        CHECK_MSG(total_sent(&plain) == total_sent(&low) && total_sent(&plain) > 0,
                  "%s: %lld bytes sent, lowered %lld", what, (long long)total_sent(&plain),
                  (long long)total_sent(&low));
        if (k == KT_SCHED_1F1B) /* M activations and M gradients over each of P-1 boundaries */
          CHECK_EQ_INT((int)total_sent(&plain), 2 * (p - 1) * m * 1000);
        kt_metrics_free(&plain);
        kt_metrics_free(&low);
      }
      kt_schedule_free(&lowered);
      kt_schedule_free(&s);
      cases++;
    }
  CHECK_MSG(cases >= 2 * KT_SCHED_COUNT - 4, "only %d schedule cases ran", cases);
  return kt_test_done(__FILE__);
}
