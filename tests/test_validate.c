/* Validator: every generated schedule passes; hand-broken ones are rejected
 * with the specific reason. */
#include "check.h"
#include "kaiten/generators.h"
#include "kaiten/schedule.h"
#include "kaiten/sim.h"

static void expect_invalid(const char *text, kt_status want, const char *needle) {
  kt_schedule s;
  kt_error err = {{0}};
  if (kt_schedule_parse(text, &s, &err) != KT_OK) {
    CHECK_MSG(0, "parse failed: %s", err.msg);
    return;
  }
  kt_status st = kt_schedule_validate(&s, &err);
  CHECK_MSG(st == want, "status %d, want %d (%s) for:\n%s", (int)st, (int)want, err.msg, text);
  CHECK_STR_CONTAINS(err.msg, needle);
  kt_schedule_free(&s);
}

/* Random reorderings of real schedules: the validator's deadlock verdict
 * equals the simulator's, schedule by schedule. */
static void deadlock_verdicts_match_the_simulator(void) {
  unsigned seed = 1;
  int deadlocks = 0, fine = 0;
  kt_gen_kind kinds[] = {KT_SCHED_1F1B, KT_SCHED_INTERLEAVED, KT_SCHED_ZB_H2, KT_SCHED_DUALPIPEV};
  for (int trial = 0; trial < 400; trial++) {
    kt_error err;
    kt_schedule s;
    kt_gen_params params = {.p = 2 + trial % 3, .m = 4 + 2 * (trial % 4)};
    if (kt_generate(kinds[trial % 4], &params, &s, &err)) continue;
    for (int swaps = 0; swaps < 1 + trial % 5; swaps++) {
      seed = seed * 1103515245u + 12345u;
      kt_rank_actions *ra = &s.ranks[(seed >> 8) % (unsigned)s.p];
      if (ra->n < 2) continue;
      size_t i = (seed >> 12) % (ra->n - 1);
      kt_action t = ra->actions[i];
      ra->actions[i] = ra->actions[i + 1];
      ra->actions[i + 1] = t;
    }
    kt_status v = kt_schedule_validate(&s, &err);
    if (v == KT_OK || v == KT_EDEADLOCK) {
      kt_status sim = kt_simulate(&s, NULL, NULL, &err);
      CHECK_MSG(v == sim, "trial %d: validate %d, simulate %d", trial, (int)v, (int)sim);
      deadlocks += v == KT_EDEADLOCK;
      fine += v == KT_OK;
    }
    kt_schedule_free(&s);
  }
  CHECK_MSG(deadlocks >= 20 && fine >= 20, "%d deadlocks, %d fine", deadlocks, fine);
}

int main(void) {
  deadlock_verdicts_match_the_simulator();
  kt_error err;
  int generated = 0;
  for (int k = 0; k < KT_SCHED_COUNT; k++)
    for (int p = 1; p <= 8; p++)
      for (int m = 1; m <= 16; m++)
        for (int v = 0; v <= 3; v++) {
          kt_schedule s;
          kt_gen_params params = {.p = p, .m = m, .v = v};
          if (kt_generate((kt_gen_kind)k, &params, &s, &err)) continue;
          generated++;
          kt_status st = kt_schedule_validate(&s, &err);
          CHECK_MSG(st == KT_OK, "%s P=%d M=%d V=%d invalid: %s", s.name, p, m, s.v, err.msg);
          /* a valid order's messages follow from its placement alone */
          CHECK_MSG(kt_schedule_messages_valid(&s) == kt_schedule_messages(&s),
                    "%s P=%d M=%d V=%d: %zu messages by placement, %zu by a walk", s.name, p, m,
                    s.v, kt_schedule_messages_valid(&s), kt_schedule_messages(&s));
          kt_schedule_free(&s);
        }
  CHECK(generated > 1000);

  /* a valid 1f1b P=2 M=2 for reference */
  const char *good = "0F0 0F1 0B0 0B1\n1F0 1B0 1F1 1B1\n";
  kt_schedule s;
  REQUIRE(kt_schedule_parse(good, &s, &err) == KT_OK);
  CHECK(kt_schedule_validate(&s, &err) == KT_OK);
  kt_schedule_free(&s);

  expect_invalid("0F0 0F1 0B0 0B1\n1F0 1B0 1F1\n", KT_EINVALID_SCHEDULE,
                 "missing backward: 1B1 never runs");
  expect_invalid("0F0 0B0 0B1\n1F0 1B0 1F1 1B1\n", KT_EINVALID_SCHEDULE,
                 "missing forward: 0F1 never runs");
  expect_invalid("0F0 0B0 0F1 0B1\n1F0 1F1 1B0 1B1\n", KT_EDEADLOCK, "rank 0 waits at 0B0 for 1B0");
  expect_invalid("# kaiten p=2 v=1 m=1000000\n0F0 0B0\n1F0 1B0\n", KT_EINVALID_SCHEDULE,
                 "4 actions cannot cover 2 stages x 1000000 micro-batches");
  expect_invalid("0F0 0F1 0B0 0B1 1F1\n1F0 1B0 1B1\n", KT_EINVALID_SCHEDULE,
                 "wrong rank: rank 0 runs 1F1 but stage 1 belongs to rank 1");
  expect_invalid("0F0 0F1 0B0 0B1 0B1\n1F0 1B0 1F1 1B1\n", KT_EINVALID_SCHEDULE,
                 "duplicate action: rank 0 runs 0B1 twice");
  expect_invalid("0F0 0B1 0F1 0B0\n1F0 1B0 1F1 1B1\n", KT_EINVALID_SCHEDULE,
                 "bad order: rank 0 runs 0B1 before 0F1");
  expect_invalid("0F0 0F1 0B0 0B1\n1F0 1I0 1F1 1B1\n", KT_EINVALID_SCHEDULE,
                 "1I0 runs but its weight gradient W never does");
  expect_invalid("0F0 0F1 0B0 0B1\n1F0 1W0 1I0 1F1 1B1\n", KT_EINVALID_SCHEDULE,
                 "bad order: rank 1 runs 1W0 before 1I0");
  expect_invalid("0F0 0F1 0B0 0B1\n1F0 1B0 1I0 1W0 1F1 1B1\n", KT_EINVALID_SCHEDULE,
                 "two backwards");
  /* a cross-rank cycle in a deeper pipeline names every blocked rank */
  expect_invalid("0F0 0F1 0B0 0B1\n1F0 1B0 1F1 1B1\n2F1 2F0 2B0 2B1\n", KT_EDEADLOCK,
                 "rank 2 waits at 2F1 for 1F1 (rank 1)");
  return kt_test_done(__FILE__);
}
