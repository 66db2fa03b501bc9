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

/* "x0,x1,..." into a new array (*out, *count values), each a number. EINVAL, ENOMEM. */
kt_status kt__costs_parse_list(const char *field, const char *text, double **out, int *count,
                               kt_error *err);
/* "x0,x1,..." (one value or one per stage) into field. */
kt_status kt__costs_set_list(kt_costs *c, const char *field, const char *text, kt_error *err);

/* ---- per (stage, micro-batch) values: costs_mb.c ---- */
/* "a0,a1;b0,b1;..." into field (kt_costs_set_mb). */
kt_status kt__costs_set_mb_text(kt_costs *c, const char *field, const char *text, kt_error *err);
/* Frees the per-micro-batch arrays (n_mb 0). */
void kt__costs_free_mb(kt_costs *c);
/* Forgets field's per-micro-batch list (n_mb 0 when none is left). */
void kt__costs_drop_mb(kt_costs *c, const char *field);
/* Every per-micro-batch value finite and >= 0. */
kt_status kt__costs_check_mb(const kt_costs *c, kt_error *err);

#endif
