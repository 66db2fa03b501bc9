/* Internal to src/costs/: the value checks the flag and JSON readers share. */
#ifndef KAITEN_COSTS_INTERNAL_H
#define KAITEN_COSTS_INTERNAL_H

#include "kaiten/costs.h"

/* A value no cost or memory may take: not finite, or negative. */
int kt__costs_bad_value(double x);
/* Sets field ("tf", "mem-act", ...) to n values (1: uniform, else per
 * stage), each checked. EINVAL naming the bad value, ENOMEM. */
kt_status kt__costs_set_values(kt_costs *c, const char *field, const double *vals, int n,
                               kt_error *err);

#endif
