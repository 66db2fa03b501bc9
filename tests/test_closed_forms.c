/* Every closed form kaiten prints is exact where it is printed: for every
 * built-in schedule over a grid of P, V, M and uniform costs, whenever
 * kt_gen_closed_form_bubble or _peak_memory gives a value, the
 * simulation of the generated schedule has that bubble and that peak memory
 * (the largest over the ranks). Where a form does not hold it must say so
 * (a negative value), never print a wrong number. zbv's forms are those of
 * its fixed order (generated without costs); tuned to the costs it is never
 * slower and never needs more memory, and the CLI prints the forms only
 * where they still hold (test_cost_basis.sh). */
#include <math.h>

#include "check.h"
#include "kaiten/generators.h"
#include "kaiten/schedule.h"
#include "kaiten/sim.h"

typedef struct {
  double tf, tb, tw, act, wgrad;
} cost_set;

static const cost_set sets[] = {{1, 1, 1, 1, 0},     {2, 1, 1, 1, 0.5},      {1, 2, 0.5, 2, 1},
                                {1, 1.2, 0.7, 1, 0}, {2, 1.5, 1.2, 1, 0.25}, {1, 1, 0, 1, 0},
                                {0.5, 1, 2, 1, 1}};

static int checked_bubble, checked_memory;

/* quick: without the random walk of v-half, v-min and zbv (its orders are
 * no slower and within the same per-rank budget; the grid below runs with
 * quick, a few sizes without) */
static void check_one(kt_gen_kind k, int p, int v, int m, const cost_set *cs, int quick) {
  kt_costs c;
  kt_costs_default(&c);
  c.tf = cs->tf, c.tb = cs->tb, c.tw = cs->tw, c.mem_act = cs->act, c.mem_wgrad = cs->wgrad;
  int V = v ? v : kt_gen_default_chunks(k);
  const char *bexpr = NULL, *mexpr = NULL;
  double bubble = kt_gen_closed_form_bubble(k, p, V, m, c.tf, c.tb, c.tw, &bexpr);
  double peak = kt_gen_closed_form_peak_memory(k, p, V, m, c.mem_act, c.mem_wgrad, &mexpr);
  CHECK((bubble >= 0) == (bexpr != NULL));
  if (bubble < 0 && peak < 0) return; /* nothing printed, nothing to check */
  kt_gen_params params = {
      .p = p, .v = v, .m = m, .costs = k == KT_SCHED_ZBV ? NULL : &c, .quick = quick};
  kt_schedule s;
  kt_error err;
  if (kt_generate(k, &params, &s, &err) != KT_OK) return; /* not a size it takes */
  if (k == KT_SCHED_ZBV) {                                /* tuned: within both forms */
    kt_schedule tuned;
    kt_metrics met;
    params.costs = &c;
    REQUIRE_VOID(kt_generate(k, &params, &tuned, &err) == KT_OK);
    if (kt_simulate_metrics(&tuned, &c, &met, &err) == KT_OK) {
      double top = 0;
      for (int r = 0; r < met.p; r++) top = fmax(top, met.ranks[r].peak_memory);
      CHECK_MSG(met.bubble_ratio <= bubble + 1e-9 && top <= peak + 1e-9,
                "tuned zbv P=%d M=%d costs %g/%g/%g: bubble %.6f (form %.6f), peak %g (form %g)", p,
                m, c.tf, c.tb, c.tw, met.bubble_ratio, bubble, top, peak);
      kt_metrics_free(&met);
    } else CHECK_MSG(0, "tuned zbv P=%d M=%d: %s", p, m, err.msg);
    kt_schedule_free(&tuned);
  }
  {
    kt_metrics met;
    if (kt_simulate_metrics(&s, &c, &met, &err) != KT_OK) {
      CHECK_MSG(0, "%s P=%d V=%d M=%d: %s", kt_gen_kind_name(k), p, s.v, m, err.msg);
    } else {
      double top = 0;
      for (int r = 0; r < met.p; r++) top = fmax(top, met.ranks[r].peak_memory);
      if (bubble >= 0) {
        checked_bubble++;
        CHECK_MSG(fabs(met.bubble_ratio - bubble) < 1e-9,
                  "%s P=%d V=%d M=%d costs %g/%g/%g: simulated bubble %.6f, closed form %s = %.6f",
                  kt_gen_kind_name(k), p, s.v, m, c.tf, c.tb, c.tw, met.bubble_ratio,
                  bexpr ? bexpr : "?", bubble);
      }
      if (peak >= 0) {
        checked_memory++;
        CHECK_MSG(fabs(top - peak) < 1e-9,
                  "%s P=%d V=%d M=%d M_B=%g M_W=%g: simulated peak %.6f, closed form %s = %.6f",
                  kt_gen_kind_name(k), p, s.v, m, c.mem_act, c.mem_wgrad, top, mexpr ? mexpr : "?",
                  peak);
      }
      kt_metrics_free(&met);
    }
  }
  kt_schedule_free(&s);
}

int main(void) {
  for (int k = 0; k < KT_SCHED_COUNT; k++)
    for (int p = 1; p <= 8; p++)
      for (int v = 0; v <= 4; v++) {
        if (v == 1) continue; /* 0 is the schedule's default */
        for (int m = 1; m <= 4 * p + 1; m++)
          for (size_t c = 0; c < sizeof sets / sizeof *sets; c++)
            check_one((kt_gen_kind)k, p, v, m, &sets[c], 1);
      }
  /* with the walk: the tuned v-half, v-min and zbv at a few sizes */
  kt_gen_kind walked[] = {KT_SCHED_V_HALF, KT_SCHED_V_MIN, KT_SCHED_ZBV};
  for (int k = 0; k < 3; k++)
    for (int p = 2; p <= 8; p += 3)
      for (int f = 1; f <= 2; f++)
        for (size_t c = 0; c < sizeof sets / sizeof *sets; c++)
          check_one(walked[k], p, 0, 2 * f * p + 1, &sets[c], 0);
  printf("closed forms checked: %d bubbles, %d peak memories\n", checked_bubble, checked_memory);
  CHECK(checked_bubble > 2000 && checked_memory > 2000);
  return kt_test_done(__FILE__);
}
