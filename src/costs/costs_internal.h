/* Internal to src/costs/: the value checks the flag and JSON readers share. */
#ifndef KAITEN_COSTS_INTERNAL_H
#define KAITEN_COSTS_INTERNAL_H

#include "kaiten/costs.h"

/* 1 when x is 0 or in lo..KT_COST_MAX (not NaN). */
int kt__costs_value_ok(double x, double lo);
/* 1 when field names a cost with per-stage values (tf, mem-act, ...), 0
 * for a scalar (comm, overlap, ...) or an unknown name. */
int kt__costs_is_list(const char *field);
/* Sets field ("tf", "mem-act", "comm", ... or "mem_act", "comm_bytes",
 * ...) to n values (1: uniform, else per stage; a scalar takes one), each
 * checked. EINVAL naming the bad value, ENOMEM. */
kt_status kt__costs_set_values(kt_costs *c, const char *field, const double *vals, int n,
                               kt_error *err);

#endif
