/* Planner internals shared by the files of src/plan (not part of the public API). */
#ifndef KAITEN_PLAN_INTERNAL_H
#define KAITEN_PLAN_INTERNAL_H

#include "kaiten/generators.h"
#include "kaiten/plan.h"
#include "kaiten/sim.h"

/* Fills a transformer model's unit chain (embed, blocks, head) from its
 * shape fields: params, FLOPs and bytes per sample at t = 1. ENOMEM. */
kt_status kt__plan_build_layers(kt_plan_model *m, kt_error *err);

/* Model presets (spec.c) for the JSON reader (spec_json.c): whether name is
 * one, and applying it to m's shape fields (0 when it is not a preset). */
int kt__plan_is_preset(const char *name);
int kt__plan_apply_preset(kt_plan_model *m, const char *name);

/* Checks a transformer shape (positive sizes, heads | hidden, kv | heads). */
kt_status kt__plan_check_shape(const kt_plan_model *m, kt_error *err);

/* ---- evaluation context: caches shared by every candidate of one search ---- */

typedef struct {
  uint64_t hash;
  void *val;
} kt__map_slot;

typedef struct {
  kt__map_slot *slots;
  size_t cap, n;
} kt__map;

typedef struct {
  int t, b;
  kt_recompute r;
  kt_layer_cost *costs; /* n_layers */
  double total_load, max_load;
  double total_params; /* over all ranks, at least: a tied head counted once */
} kt__cost_entry;

typedef struct {
  kt_gen_kind kind;
  int p, v, m;
  kt_status status; /* generation failure is cached too */
  kt_error err;
  kt_schedule s;
  size_t *n_snap, *snap_off; /* per rank: snapshots in snaps (2V ints each) */
  int *snaps;
  int *rank_inflight; /* per rank: peak (stage, mb) pairs between F and their last op */
  int peak_inflight;
} kt__sched_entry;

typedef struct {
  int S, t, b, d; /* d only for memory-capped cuts */
  kt_recompute r;
  const int *mult; /* memory-capped cuts: in-flight count per stage (owned copy), else NULL */
  int ok;          /* a cut exists */
  int *counts;
  double bottleneck;
} kt__part_entry;

typedef struct {
  kt_gen_kind kind;
  int p, v, m, len;
  double *vec; /* per stage tf, tb, tw, then comm; divided by the largest stage */
  double makespan, busy;
} kt__sim_entry;

typedef struct kt__plan_ctx {
  const kt_plan_model *m;
  const kt_plan_cluster *c;
  const kt_plan_options *o;
  double budget; /* kt_plan_cluster_budget */
  kt__map costs, scheds, parts, capped, sims;
  size_t n_simulations;
} kt__plan_ctx;

kt_status kt__plan_ctx_create(const kt_plan_model *m, const kt_plan_cluster *c,
                              const kt_plan_options *o, kt__plan_ctx **out, kt_error *err);
void kt__plan_ctx_destroy(kt__plan_ctx *x);
size_t kt__plan_ctx_simulations(const kt__plan_ctx *x);

/* Per-layer costs for (t, b, recompute) with their totals, cached; NULL with
 * err on failure. */
const kt__cost_entry *kt__plan_ctx_cost_entry(kt__plan_ctx *x, int t, int b, kt_recompute r,
                                              kt_error *err);
const kt_layer_cost *kt__plan_ctx_costs(kt__plan_ctx *x, int t, int b, kt_recompute r,
                                        kt_error *err);
/* The schedule (kind, P, V, M) with its memory profile, cached; NULL with the
 * generator's reason. */
const kt__sched_entry *kt__plan_ctx_schedule(kt__plan_ctx *x, kt_gen_kind kind, int p, int v, int m,
                                             kt_error *err);
/* A schedule that depends on the configuration's costs and memory (zb-auto,
 * zbv-auto: the quick search under mem_limit bytes of activations per rank),
 * with its memory profile; not cached. NULL with the reason in err. */
kt__sched_entry *kt__plan_sched_for(kt_gen_kind kind, int p, int v, int m, const kt_costs *c,
                                    double mem_limit, kt_error *err);
void kt__plan_sched_free(kt__sched_entry *e);
/* Peak activation bytes on rank for per-stage sizes; *inflight = peak count. */
double kt__plan_rank_activation(const kt__sched_entry *e, int rank, const double *stage_act,
                                const double *stage_wgrad, int *inflight);
/* Min-max partition of the layer times into S stages, cached. With mult
 * (S in-flight counts, V = 1) the cut must also keep every stage within the
 * memory budget: state(d) + mult[j] * max(act, wgrad) per layer; then
 * entry->ok says whether one exists. NULL on allocation failure. */
const kt__part_entry *kt__plan_ctx_partition(kt__plan_ctx *x, int S, const kt__cost_entry *ce,
                                             int d, const int *mult, kt_error *err);
/* Simulates s under c (per-stage arrays set); results cached up to scale. */
kt_status kt__plan_ctx_simulate(kt__plan_ctx *x, const kt_schedule *s, kt_gen_kind kind,
                                const kt_costs *c, int cacheable, double *makespan, double *busy,
                                kt_error *err);

/* Evaluates cfg with the context's caches (see kt_plan_evaluate). With cut
 * non-NULL, a fitting configuration whose step time provably exceeds cutoff
 * is not simulated: *cut = 1 and its times stay 0. */
kt_status kt__plan_ctx_evaluate(kt__plan_ctx *x, const kt_plan_config *cfg, double cutoff,
                                kt_plan_result *out, int *cut, kt_error *err);

/* Gradient synchronisation time per step (all-reduce of the largest rank's
 * gradients over D replicas, plus zero-3 parameter gathers over K rounds). */
double kt__plan_dp_time(const kt__plan_ctx *x, const kt_plan_config *cfg, double rank_params);

/* Bandwidth/latency of a group: intra-node when span <= devices per node. */
void kt__plan_link(const kt_plan_cluster *c, long span, double *bw, double *lat);
/* One stage-to-stage hop of bytes under cfg's placement (0 with P = 1). */
double kt__plan_hop(const kt_plan_cluster *c, const kt_plan_config *cfg, double bytes);

/* Deterministic hash used by the caches. */
static inline uint64_t kt__plan_hash(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

#endif
