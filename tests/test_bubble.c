/* Bubble ratios and in-flight counts of the classic schedules against the
 * closed forms and the source documents' worked examples. */
#include "check.h"
#include "kaiten/generators.h"
#include "kaiten/schedule.h"
#include "kaiten/sim.h"

static int sim(kt_gen_kind kind, int p, int m, int v, kt_metrics *out) {
  kt_schedule s;
  kt_error err;
  kt_gen_params params = {.p = p, .m = m, .v = v};
  if (kt_generate(kind, &params, &s, &err)) {
    fprintf(stderr, "generate %s p=%d m=%d v=%d: %s\n", kt_gen_kind_name(kind), p, m, v, err.msg);
    return -1;
  }
  kt_status st = kt_simulate_metrics(&s, NULL, out, &err);
  if (st) fprintf(stderr, "simulate: %s\n", err.msg);
  kt_schedule_free(&s);
  return st ? -1 : 0;
}

int main(void) {
  kt_metrics m;
  /* gpipe and 1f1b: (P-1)/(M+P-1) over P 1..16, M 1..64 */
  for (int p = 1; p <= 16; p++)
    for (int mb = 1; mb <= 64; mb++)
      for (int k = 0; k < 2; k++) {
        kt_gen_kind kind = k ? KT_SCHED_1F1B : KT_SCHED_GPIPE;
        if (sim(kind, p, mb, 0, &m)) {
          CHECK(0);
          continue;
        }
        double expect = (double)(p - 1) / (mb + p - 1);
        CHECK_MSG(fabs(m.bubble_ratio - expect) < 1e-9, "%s P=%d M=%d bubble %.12f expected %.12f",
                  kt_gen_kind_name(kind), p, mb, m.bubble_ratio, expect);
        /* in flight: gpipe M on every rank; 1f1b min(P-r, M) on rank r */
        for (int r = 0; r < p; r++) {
          int want = kind == KT_SCHED_GPIPE ? mb : (p - r < mb ? p - r : mb);
          CHECK_MSG(m.ranks[r].peak_inflight == want, "%s P=%d M=%d rank %d inflight %d want %d",
                    kt_gen_kind_name(kind), p, mb, r, m.ranks[r].peak_inflight, want);
        }
        kt_metrics_free(&m);
      }
  /* interleaved (and looped-bfs): (P-1)/(V*M+P-1) for M a multiple of P */
  for (int p = 1; p <= 16; p++)
    for (int v = 2; v <= 4; v++)
      for (int mb = p; mb <= 64; mb += p)
        for (int k = 0; k < 2; k++) {
          kt_gen_kind kind = k ? KT_SCHED_LOOPED_BFS : KT_SCHED_INTERLEAVED;
          if (sim(kind, p, mb, v, &m)) {
            CHECK(0);
            continue;
          }
          double expect = (double)(p - 1) / (v * mb + p - 1);
          CHECK_MSG(fabs(m.bubble_ratio - expect) < 1e-9,
                    "%s P=%d V=%d M=%d bubble %.12f expected %.12f", kt_gen_kind_name(kind), p, v,
                    mb, m.bubble_ratio, expect);
          kt_metrics_free(&m);
        }
  /* the source documents' numbers (1f1b; gpipe is identical) */
  struct {
    int p, m;
    double pct;
  } doc[] = {{8, 16, 30.4}, {8, 64, 9.9},  {16, 64, 19.0}, {6, 12, 29.4},
             {4, 8, 27.3},  {8, 32, 17.9}, {2, 4, 20.0},   {4, 3, 50.0}};
  for (size_t i = 0; i < sizeof doc / sizeof *doc; i++) {
    if (sim(KT_SCHED_1F1B, doc[i].p, doc[i].m, 0, &m)) {
      CHECK(0);
      continue;
    }
    CHECK_MSG(fabs(100 * m.bubble_ratio - doc[i].pct) < 0.05, "P=%d M=%d: %.2f%% vs %.1f%%",
              doc[i].p, doc[i].m, 100 * m.bubble_ratio, doc[i].pct);
    kt_metrics_free(&m);
  }
  /* interleaved accepts M >= P that is not a multiple of P, rejects M < P */
  for (int p = 2; p <= 8; p++)
    for (int mb = p; mb <= 3 * p + 1; mb++) {
      CHECK_MSG(sim(KT_SCHED_INTERLEAVED, p, mb, 2, &m) == 0, "interleaved P=%d M=%d", p, mb);
      if (m.ranks) kt_metrics_free(&m);
    }
  /* any M >= P: one more micro-batch costs at most its own work per rank,
   * V*(T_F + T_B + T_W) at unit stage costs, and never shortens the step */
  for (int k = 0; k < 2; k++)
    for (int p = 2; p <= 8; p++)
      for (int v = 2; v <= 4; v++) {
        kt_gen_kind kind = k ? KT_SCHED_LOOPED_BFS : KT_SCHED_INTERLEAVED;
        const char *name = kt_gen_kind_name(kind);
        double prev = -1;
        for (int mb = p; mb <= 4 * p; mb++) {
          if (sim(kind, p, mb, v, &m)) {
            CHECK(0);
            continue;
          }
          if (prev >= 0) {
            CHECK_MSG(m.makespan >= prev - 1e-9, "%s P=%d V=%d: M=%d makespan %g < M=%d's %g", name,
                      p, v, mb, m.makespan, mb - 1, prev);
            CHECK_MSG(m.makespan <= prev + 3.0 * v + 1e-9,
                      "%s P=%d V=%d: M=%d makespan %g > M=%d's %g + V*3", name, p, v, mb,
                      m.makespan, mb - 1, prev);
          }
          prev = m.makespan;
          kt_metrics_free(&m);
        }
      }
  {
    kt_schedule s;
    kt_error err;
    kt_gen_params params = {.p = 4, .m = 3, .v = 2};
    CHECK(kt_generate(KT_SCHED_INTERLEAVED, &params, &s, &err) == KT_EINVAL);
    CHECK_STR_CONTAINS(err.msg, "M >= P");
    params = (kt_gen_params){.p = 4, .m = 8, .v = 1};
    CHECK(kt_generate(KT_SCHED_INTERLEAVED, &params, &s, &err) == KT_EINVAL);
    CHECK_STR_CONTAINS(err.msg, "V >= 2");
    params = (kt_gen_params){.p = 4, .m = 8, .v = 2};
    CHECK(kt_generate(KT_SCHED_1F1B, &params, &s, &err) == KT_EINVAL);
    CHECK_STR_CONTAINS(err.msg, "one chunk per rank");
    params = (kt_gen_params){.p = 0, .m = 8};
    CHECK(kt_generate(KT_SCHED_GPIPE, &params, &s, &err) == KT_EINVAL);
  }
  return kt_test_done(__FILE__);
}
