/* Helpers shared by the planner tests (tests/test_plan*.c). */
#ifndef KAITEN_TEST_PLAN_CHECK_H
#define KAITEN_TEST_PLAN_CHECK_H

#include "check.h"

/* Like REQUIRE, for void helpers: counts a failure and returns; evaluates once. */
#define NEED(cond)                                                               \
  do {                                                                           \
    kt_test_checks++;                                                            \
    if (!(cond)) {                                                               \
      kt_test_failures++;                                                        \
      fprintf(stderr, "%s:%d: NEED failed: %s\n", __FILE__, __LINE__, #cond);    \
      return;                                                                    \
    }                                                                            \
  } while (0)

#endif
