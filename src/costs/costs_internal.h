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

/* Per-link lists (link_costs.c): whether field is one ("comm",
 * "comm-latency", "comm-bandwidth", "link-delay"), setting it (1 value:
 * the uniform one, where the field has it), freeing, copying (1 on
 * ENOMEM) and checking them. */
int kt__costs_is_link_field(const char *field);
kt_status kt__costs_set_links(kt_costs *c, const char *field, const double *vals, int n,
                              kt_error *err);
void kt__costs_links_free(kt_costs *c);
int kt__costs_links_copy(kt_costs *dst, const kt_costs *src);
kt_status kt__costs_links_check(const kt_costs *c, kt_error *err);

#endif
