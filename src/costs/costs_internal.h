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
