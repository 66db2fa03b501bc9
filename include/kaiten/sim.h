/* kaiten simulator: runs a schedule against a cost model, event by event.
 *
 * Semantics (DESIGN.md): each rank runs its actions strictly in order; an
 * action starts at max(end of the previous action on its rank, time its
 * inputs are ready). F(s,j) needs F(s-1,j) (+T_comm across ranks); B/I(s,j)
 * needs B/I(s+1,j) (+T_comm across ranks), or F(S-1,j) on the last stage;
 * W(s,j) needs I(s,j). B costs T_B + T_W.
 *
 * Overlapped pairs (KT_ACTION_OVERLAP_NEXT, DualPipeV's F&B slots) start when
 * both inputs are ready, occupy the rank for the sum of both costs (one device
 * computes both one after the other) unless kt_costs.overlap credits some
 * overlap, and publish both results when the pair ends.
 */
#ifndef KAITEN_SIM_H
#define KAITEN_SIM_H

#include "kaiten/schedule.h"
#include "kaiten/timeline.h"

typedef struct kt_costs {
  double tf, tb, tw;         /* uniform per-stage costs of F, I (B = I + W) and W */
  double comm;               /* per hop between ranks (used when comm_bandwidth == 0) */
  double comm_latency;       /* with comm_bandwidth > 0: hop = latency + bytes / bandwidth */
  double comm_bytes;
  double comm_bandwidth;
  double mem_act;            /* M_B: activation memory one F adds */
  double mem_wgrad;          /* M_W: memory an I keeps for its W */
  /* Overlapped groups (OVERLAP_F_B cells): 0 = run one after the other, as
   * PyTorch's default runtime does (default); 1 = the shorter ops are fully
   * hidden behind the longest. A group takes sum - overlap * (sum - max). */
  double overlap;
  /* Optional per-stage values (n_stages entries each; NULL = the uniform value). */
  int n_stages;
  double *stage_tf, *stage_tb, *stage_tw, *stage_mem_act, *stage_mem_wgrad;
} kt_costs;

/* T_F = T_B = T_W = 1, T_comm = 0, M_B = 1, M_W = 0. */
void kt_costs_default(kt_costs *c);
/* Frees the per-stage arrays. */
void kt_costs_free(kt_costs *c);
/* Deep copy (per-stage arrays duplicated). ENOMEM. */
kt_status kt_costs_copy(kt_costs *dst, const kt_costs *src);
/* Checks values are finite and >= 0 and per-stage arrays match n_stages. */
kt_status kt_costs_check(const kt_costs *c, int n_stages, kt_error *err);

double kt_cost_tf(const kt_costs *c, int stage);
double kt_cost_tb(const kt_costs *c, int stage);
double kt_cost_tw(const kt_costs *c, int stage);
double kt_cost_op(const kt_costs *c, int stage, kt_op op);
double kt_cost_mem_act(const kt_costs *c, int stage);
double kt_cost_mem_wgrad(const kt_costs *c, int stage);
double kt_cost_comm(const kt_costs *c);

/* Parses "X" (uniform) or "x0,x1,...,xn" (per stage) into the named field
 * ("tf", "tb", "tw", "mem-act", "mem-wgrad"). EINVAL naming the bad value. */
kt_status kt_costs_set(kt_costs *c, const char *field, const char *text, kt_error *err);
/* Loads a JSON cost file: {"tf": 1 or [..], "tb": .., "tw": .., "comm": x,
 * "mem_act": .., "mem_wgrad": ..}. EIO / EPARSE / EINVAL. */
kt_status kt_costs_load_json(kt_costs *c, const char *path, kt_error *err);
/* The same from JSON text; origin names it in error messages. */
kt_status kt_costs_parse_json(kt_costs *c, const char *json, const char *origin, kt_error *err);

/* Simulates the schedule; fills a fresh timeline (caller frees). out may be
 * NULL to only check that the schedule runs to completion.
 * EDEADLOCK names every blocked rank, its next action and what it waits for;
 * EINVALID_SCHEDULE for actions outside the schedule's stages/micro-batches. */
kt_status kt_simulate(const kt_schedule *s, const kt_costs *c, kt_timeline *out, kt_error *err);

/* Convenience: simulate and compute metrics in one call. */
kt_status kt_simulate_metrics(const kt_schedule *s, const kt_costs *c, kt_metrics *out,
                              kt_error *err);

#endif
