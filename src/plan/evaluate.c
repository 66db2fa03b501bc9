/* Planner: evaluating one configuration.
 *
 * layer costs (t, b, recompute) -> min-max partition into S = P*V stages by
 * layer time -> per-stage times and activation bytes -> peak memory per rank
 * from the schedule's order (retrying a memory-capped partition when V = 1
 * and the time-balanced cut does not fit) -> simulated makespan of one round
 * -> step = K * round + gradient synchronisation.
 *
 * Ranks are laid out tensor-parallel innermost, then data-parallel, then
 * pipeline: a tensor group spans t devices, a data-parallel group t*D, the
 * pipeline t*D*P. A group inside one node uses the intra-node link.
 */
#include <math.h>
#include "kaiten/generators.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan_internal.h"

void kt__plan_link(const kt_plan_cluster *c, long span, double *bw, double *lat) {
  int intra = span <= c->devices_per_node;
  *bw = intra ? c->intra_bw : c->inter_bw;
  *lat = intra ? c->intra_latency : c->inter_latency;
}

static const char *const node_layout_names[] = {"dp-inside", "pp-inside"};
_Static_assert(sizeof node_layout_names / sizeof *node_layout_names == KT_NODES_COUNT,
               "node layout names out of sync");

const char *kt_node_layout_name(kt_node_layout p) {
  return (unsigned)p < KT_NODES_COUNT ? node_layout_names[p] : "?";
}

int kt_node_layout_from_name(const char *name) {
  return kt_name_index(name, node_layout_names, KT_NODES_COUNT);
}

/* The link a group of `span` consecutive devices uses, and how many such
 * groups on one node cross it at once (`per_node` of them fit a node, at
 * most `groups`): the bandwidth each gets is the link's over that count. */
static void shared_link(const kt_plan_cluster *c, long span, long per_node, long groups, double *bw,
                        double *lat) {
  kt__plan_link(c, span, bw, lat);
  if (span <= c->devices_per_node) return;
  long share = per_node < groups ? per_node : groups;
  if (share > 1) *bw /= (double)share;
}

/* One stage-to-stage hop of `bytes`. DP_INSIDE: the pipeline spans t*D*P
 * devices and the D replicas on a node cross together; PP_INSIDE: a
 * pipeline spans t*P. */
double kt__plan_hop(const kt_plan_cluster *c, const kt_plan_config *cfg, double bytes) {
  if (cfg->p <= 1) return 0;
  double bw, lat;
  long t = cfg->t, per_node = c->devices_per_node / t;
  if (cfg->nodes == KT_NODES_PP_INSIDE) kt__plan_link(c, t * cfg->p, &bw, &lat);
  else shared_link(c, t * cfg->d * cfg->p, per_node, cfg->d, &bw, &lat);
  return lat + bytes / bw;
}

double kt__plan_dp_time(const kt__plan_ctx *x, const kt_plan_config *cfg, double rank_params) {
  if (cfg->d <= 1) return 0;
  double bw, lat, d = cfg->d;
  long tp = cfg->t, per_node = x->c->devices_per_node / tp;
  /* PP_INSIDE: a group spans the whole job, and every pipeline rank on a
   * node all-reduces over the same link at once */
  if (cfg->nodes == KT_NODES_PP_INSIDE)
    shared_link(x->c, tp * cfg->p * cfg->d, per_node, cfg->p, &bw, &lat);
  else kt__plan_link(x->c, tp * cfg->d, &bw, &lat);
  /* ring all-reduce (or reduce-scatter + all-gather under zero): 2(D-1)/D of the bytes */
  double t = 2 * lat + 2 * (d - 1) / d * rank_params * x->o->grad_bytes / bw;
  if (x->o->zero >= 3) /* weights gathered for forward and backward in every round */
    t += cfg->k * 2 * (lat + (d - 1) / d * rank_params * x->o->weight_bytes / bw);
  return t;
}

static int chunks_ok(kt_gen_kind kind, int v) {
  int defv = kt_gen_default_chunks(kind);
  if (kt_gen_kind_placement(kind) == KT_PLACEMENT_V) return v == 2;
  if (defv > 1) return v >= 2;
  return kind == KT_SCHED_ZB_AUTO ? v >= 1 : v == 1;
}

/* Schedules generated for each configuration's costs and memory. */
static int cost_dependent(kt_gen_kind kind) {
  return kind == KT_SCHED_ZB_AUTO || kind == KT_SCHED_ZBV_AUTO;
}

/* Sizes and schedule constraints of cfg against the model and cluster (and
 * the batch when global_batch > 0). EINVAL with the reason. */
static kt_status check_config(const kt__plan_ctx *x, const kt_plan_config *cfg, long global_batch,
                              kt_error *err) {
  const kt_plan_model *m = x->m;
  const kt_plan_cluster *c = x->c;
  const int *dims[] = {&cfg->p, &cfg->d, &cfg->t, &cfg->v, &cfg->m, &cfg->b, &cfg->k};
  static const char *const names[] = {"P", "D", "t", "V", "M", "b", "K"};
  for (int i = 0; i < 7; i++)
    if (*dims[i] < 1) return kt_fail(err, KT_EINVAL, "%s=%d: must be >= 1", names[i], *dims[i]);
  if ((unsigned)cfg->schedule >= KT_SCHED_COUNT || (unsigned)cfg->recompute >= KT_RECOMPUTE_COUNT)
    return kt_fail(err, KT_EINVAL, "unknown schedule or recompute mode");
  double used = (double)cfg->p * cfg->d * cfg->t; /* no overflow for any int sizes */
  if (used != c->devices)
    return kt_fail(err, KT_EINVAL, "P*D*t = %d*%d*%d = %.0f, but the cluster has %d devices",
                   cfg->p, cfg->d, cfg->t, used, c->devices);
  if (cfg->t > c->devices_per_node)
    return kt_fail(err, KT_EINVAL, "t=%d: tensor parallelism must stay inside a node of %d devices",
                   cfg->t, c->devices_per_node);
  if (m->transformer && (m->heads % cfg->t || m->kv_heads % cfg->t))
    return kt_fail(err, KT_EINVAL, "t=%d does not divide heads=%d / kv_heads=%d", cfg->t, m->heads,
                   m->kv_heads);
  if (cfg->p > KT_MAX_RANKS || cfg->v > KT_MAX_CHUNKS || cfg->m > KT_MAX_MICROBATCHES)
    return kt_fail(err, KT_EINVAL, "P=%d V=%d M=%d: over the limits %d/%d/%d", cfg->p, cfg->v,
                   cfg->m, KT_MAX_RANKS, KT_MAX_CHUNKS, KT_MAX_MICROBATCHES);
  if ((long)cfg->p * cfg->v > m->n_layers)
    return kt_fail(err, KT_EINVAL, "P*V = %d stages for %d layers: a stage would be empty",
                   cfg->p * cfg->v, m->n_layers);
  if (!chunks_ok(cfg->schedule, cfg->v))
    return kt_fail(err, KT_EINVAL, "%s with V=%d chunks per rank: %s",
                   kt_gen_kind_name(cfg->schedule), cfg->v,
                   kt_gen_kind_placement(cfg->schedule) == KT_PLACEMENT_V ? "it needs V=2"
                   : kt_gen_default_chunks(cfg->schedule) > 1             ? "it needs V >= 2"
                                                                          : "it needs V=1");
  double batch = (double)cfg->k * cfg->m * cfg->b * cfg->d;
  if (global_batch > 0 && batch != (double)global_batch)
    return kt_fail(err, KT_EINVAL, "K*M*b*D = %d*%d*%d*%d = %.0f, not the global batch %ld", cfg->k,
                   cfg->m, cfg->b, cfg->d, batch, global_batch);
  return KT_OK;
}

void kt_plan_result_free(kt_plan_result *r) {
  free(r->mem_rank);
  free(r->mem_state);
  free(r->partition);
  free(r->stage_f);
  free(r->stage_i);
  free(r->stage_w);
  memset(r, 0, sizeof *r);
}

typedef struct {
  double *act, *wgrad, *params, *tp; /* per stage */
} stage_bufs;

/* Per-stage sums of the layer costs under r->partition; returns the p2p
 * bytes (largest activation crossing a stage boundary). */
static double stage_sums(const kt_layer_cost *lc, int S, kt_plan_result *r, const stage_bufs *sb) {
  double boundary = 0;
  for (int j = 0, i = 0; j < S; j++) {
    r->stage_f[j] = r->stage_i[j] = r->stage_w[j] = 0;
    sb->act[j] = sb->wgrad[j] = sb->params[j] = sb->tp[j] = 0;
    for (int k = 0; k < r->partition[j]; k++, i++) {
      r->stage_f[j] += lc[i].f;
      r->stage_i[j] += lc[i].i;
      r->stage_w[j] += lc[i].w;
      sb->act[j] += lc[i].act;
      sb->wgrad[j] += lc[i].wgrad;
      sb->params[j] += lc[i].params;
      sb->tp[j] += lc[i].tp;
    }
    if (j + 1 < S) boundary = fmax(boundary, lc[i - 1].out_bytes);
  }
  return boundary;
}

/* Parameters held by rank k (all its chunks). A tied head shares the
 * embedding's table when both sit on the same rank (P = 1, or zbv's rank 0). */
static double rank_params(const kt__plan_ctx *x, const kt_schedule *shape,
                          const kt_plan_config *cfg, const stage_bufs *sb, int k) {
  double params = 0;
  int first = 0, last = 0, S = cfg->p * cfg->v;
  for (int c = 0; c < cfg->v; c++) {
    int j = kt_rank_chunk_stage(shape, k, c);
    params += sb->params[j];
    first |= j == 0, last |= j == S - 1;
  }
  const kt_plan_model *m = x->m;
  if (m->transformer && m->tie_embeddings && first && last)
    params -= (double)m->vocab * m->hidden / cfg->t;
  return params;
}

/* Fills mem_rank / mem_state for the stage sums in sb. */
static void rank_memory(const kt__plan_ctx *x, const kt__sched_entry *se, const kt_plan_config *cfg,
                        const stage_bufs *sb, kt_plan_result *r) {
  r->mem_peak = 0;
  r->peak_inflight = 0;
  for (int rank = 0; rank < cfg->p; rank++) {
    double params = rank_params(x, &se->s, cfg, sb, rank);
    int inflight;
    double act = kt__plan_rank_activation(se, rank, sb->act, sb->wgrad, &inflight);
    r->mem_state[rank] = kt_plan_state_bytes(params, x->o, 1, cfg->d);
    r->mem_rank[rank] = r->mem_state[rank] + act;
    r->mem_peak = fmax(r->mem_peak, r->mem_rank[rank]);
    if (inflight > r->peak_inflight) r->peak_inflight = inflight;
  }
  r->fits = r->mem_peak <= x->budget;
}

/* Search shortcut before generating the schedule: every rank holds its
 * model states and, at some point, at least one micro-batch of each of its
 * stages. When that already exceeds the budget the configuration cannot fit;
 * mem_rank then holds this lower bound. */
static int surely_over(const kt__plan_ctx *x, const kt_plan_config *cfg, const stage_bufs *sb,
                       kt_plan_result *r) {
  kt_schedule shape = {.p = cfg->p, .v = cfg->v, .placement = kt_gen_kind_placement(cfg->schedule)};
  r->mem_peak = 0;
  for (int k = 0; k < cfg->p; k++) {
    double params = rank_params(x, &shape, cfg, sb, k), act = 0;
    for (int c = 0; c < cfg->v; c++) act = fmax(act, sb->act[kt_rank_chunk_stage(&shape, k, c)]);
    r->mem_state[k] = kt_plan_state_bytes(params, x->o, 1, cfg->d);
    r->mem_rank[k] = r->mem_state[k] + act;
    r->mem_peak = fmax(r->mem_peak, r->mem_rank[k]);
  }
  r->fits = 0;
  return r->mem_peak > x->budget;
}

/* A lower bound on one round's wall clock for the stage costs in r, valid
 * for any schedule: rank k cannot start before micro-batch 0 has gone
 * forward through the stages before it (they sit on other ranks in loop and
 * v placement), and then runs M times its stages' F + I + W. With one chunk
 * per rank, its last input-gradient also waits for all its F and I and is
 * followed by the input-gradients of the stages before it. */
/* A lower bound on a round's period without a barrier (each rank's span
 * holds its work; with V = 1 rank 0, which starts at 0, ends after any
 * rank's forwards and input gradients and the chain of input gradients
 * back to it) and, with wall set, on its makespan (a rank starts after the
 * forwards before it). */
static double round_bound(const kt_schedule *shape, const kt_plan_result *r,
                          const kt_plan_config *cfg, int wall) {
  double best = 0, fill = 0, back = 0, M = cfg->m, c = r->p2p_time;
  for (int k = 0; k < cfg->p; k++) {
    double work = 0;
    for (int ch = 0; ch < cfg->v; ch++) {
      int j = kt_rank_chunk_stage(shape, k, ch);
      work += r->stage_f[j] + r->stage_i[j] + r->stage_w[j];
    }
    best = fmax(best, (wall ? fill : 0) + M * work);
    if (cfg->v == 1) best = fmax(best, fill + M * (r->stage_f[k] + r->stage_i[k]) + back);
    fill += r->stage_f[k] + c;
    back += r->stage_i[k] + c;
  }
  return best;
}

/* A lower bound on the step time: K - 1 rounds back to back, then the
 * last with the step's end (simulate_round says how the step is timed). */
static double step_bound(const kt__plan_ctx *x, const kt_schedule *shape, const kt_plan_result *r,
                         const kt_plan_config *cfg, double dp_time) {
  int barrier = x->o->step_sync == KT_STEP_BARRIER;
  return (cfg->k - 1) * round_bound(shape, r, cfg, 0) + round_bound(shape, r, cfg, barrier) +
         dp_time;
}

static void set_reason(const kt__plan_ctx *x, kt_plan_result *r) {
  if (!r->fits) {
    int worst = 0;
    for (int i = 1; i < r->cfg.p; i++)
      if (r->mem_rank[i] > r->mem_rank[worst]) worst = i;
    snprintf(r->reason, sizeof r->reason, "rank %d needs %.1f GB > %.1f GB budget", worst,
             r->mem_rank[worst] / 1e9, x->budget / 1e9);
    return;
  }
  double step = r->step_time > 0 ? r->step_time : 1;
  double bubble = r->bubble_ratio * r->cfg.k * r->round_time / step;
  double tp = (double)r->cfg.k * r->cfg.m * r->tp_time / step;
  snprintf(r->reason, sizeof r->reason,
           "bubble %.1f%% of step, dp sync %.1f%%, tp comm %.1f%%, imbalance %.1f%%, "
           "memory %.0f%% of budget",
           100 * bubble, 100 * r->dp_time / step, 100 * tp, 100 * r->imbalance,
           100 * r->mem_peak / x->budget);
}

static kt_status alloc_result(kt_plan_result *r, int P, int S, double **bufs) {
  r->mem_rank = kt_calloc((size_t)P, sizeof(double));
  r->mem_state = kt_calloc((size_t)P, sizeof(double));
  r->partition = kt_calloc((size_t)S, sizeof(int));
  r->stage_f = kt_calloc((size_t)S, sizeof(double));
  r->stage_i = kt_calloc((size_t)S, sizeof(double));
  r->stage_w = kt_calloc((size_t)S, sizeof(double));
  *bufs = kt_calloc((size_t)S * 4, sizeof(double));
  return r->mem_rank && r->mem_state && r->partition && r->stage_f && r->stage_i && r->stage_w &&
                 *bufs
             ? KT_OK
             : KT_ENOMEM;
}

/* zb-auto / zbv-auto for this configuration: its stage times and the
 * activation bytes each rank may hold beside its model states. */
static kt__sched_entry *own_schedule(const kt__plan_ctx *x, const kt_plan_config *cfg,
                                     const kt_plan_result *r, const stage_bufs *sb, double boundary,
                                     kt_error *err) {
  int S = cfg->p * cfg->v;
  double state = 0;
  kt_costs c;
  kt_costs_default(&c);
  c.n_stages = S, c.stage_tf = r->stage_f, c.stage_tb = r->stage_i, c.stage_tw = r->stage_w;
  c.stage_mem_act = sb->act, c.stage_mem_wgrad = sb->wgrad;
  c.comm = kt__plan_hop(x->c, cfg, boundary);
  c.step_sync = x->o->step_sync; /* zb-auto searches the period the step will have */
  for (int k = 0; k < cfg->p; k++) state = fmax(state, r->mem_state[k]);
  double limit = x->budget - state; /* <= 0 would mean "the default": keep it a budget */
  return kt__plan_sched_for(cfg->schedule, cfg->p, cfg->v, cfg->m, &c, fmax(limit, 1e-300), err);
}

/* Whether the configuration cannot beat cutoff by a bound that needs only
 * the placement (the schedule is not built then). */
static int cut_by_bound(kt__plan_ctx *x, const kt_plan_config *cfg, double cutoff,
                        const stage_bufs *sb, double boundary, kt_plan_result *r) {
  kt_schedule shape = {.p = cfg->p, .v = cfg->v, .placement = kt_gen_kind_placement(cfg->schedule)};
  double largest = 0;
  r->p2p_time = kt__plan_hop(x->c, cfg, boundary);
  for (int rank = 0; rank < cfg->p; rank++)
    largest = fmax(largest, rank_params(x, &shape, cfg, sb, rank));
  return step_bound(x, &shape, r, cfg, kt__plan_dp_time(x, cfg, largest)) > cutoff;
}

/* The time-balanced cut does not fit: cut again under the memory cap with
 * each rank's peak in-flight count times max(act, wgrad) per layer (an
 * upper bound of the exact peak, so a cut found there fits). Updates
 * *boundary. */
static kt_status recut_for_memory(kt__plan_ctx *x, const kt_plan_config *cfg,
                                  const kt__cost_entry *ce, const kt__sched_entry *se,
                                  stage_bufs *sb, double *boundary, kt_plan_result *r,
                                  kt_error *err) {
  int S = cfg->p * cfg->v;
  const kt__part_entry *capped = kt__plan_ctx_partition(x, S, ce, cfg->d, se->rank_inflight, err);
  if (!capped) return KT_ENOMEM;
  if (capped->ok) {
    memcpy(r->partition, capped->counts, sizeof(int) * (size_t)S);
    *boundary = stage_sums(ce->costs, S, r, sb);
    rank_memory(x, se, cfg, sb, r);
  }
  return KT_OK;
}

/* Balance between ranks (a rank runs all its chunks), the point-to-point
 * and data-parallel times. */
static void rank_times(kt__plan_ctx *x, const kt_plan_config *cfg, const kt__sched_entry *se,
                       const stage_bufs *sb, double boundary, kt_plan_result *r) {
  int P = cfg->p;
  double total = 0;
  for (int rank = 0; rank < P; rank++) {
    double load = 0, tp = 0;
    for (int c = 0; c < cfg->v; c++) {
      int j = kt_rank_chunk_stage(&se->s, rank, c);
      load += r->stage_f[j] + r->stage_i[j] + r->stage_w[j];
      tp += sb->tp[j];
    }
    total += load;
    if (load > r->bottleneck) r->bottleneck = load, r->tp_time = tp;
  }
  r->imbalance = total > 0 ? r->bottleneck / (total / P) - 1 : 0;
  double largest = 0;
  r->p2p_time = kt__plan_hop(x->c, cfg, boundary);
  for (int rank = 0; rank < P; rank++)
    largest = fmax(largest, rank_params(x, &se->s, cfg, sb, rank));
  r->dp_time = kt__plan_dp_time(x, cfg, largest);
}

/* The step simulated with the stage costs. A step runs K rounds back to
 * back on each rank (no barrier between them: the runtime's rounds), then
 * its end (the data-parallel all-reduce and, under a barrier, the wait for
 * every rank): (K - 1) periods of a round without a step's end, then the
 * period of one with it (kaiten/sim.h). round_time: a round's share;
 * bubble: of the rounds, the step's end left out. */
static kt_status simulate_round(kt__plan_ctx *x, const kt_plan_config *cfg,
                                const kt__sched_entry *se, kt_plan_result *r, kt_error *err) {
  int S = cfg->p * cfg->v;
  kt_costs sc;
  kt_costs_default(&sc);
  sc.n_stages = S, sc.stage_tf = r->stage_f, sc.stage_tb = r->stage_i, sc.stage_tw = r->stage_w;
  sc.comm = r->p2p_time;
  double inner = 0, last, busy;
  kt_status st = KT_OK;
  if (cfg->k > 1) st = kt__plan_ctx_simulate(x, &se->s, cfg->schedule, &sc, 1, &inner, &busy, err);
  sc.t_dp = r->dp_time, sc.step_sync = x->o->step_sync;
  if (!st) st = kt__plan_ctx_simulate(x, &se->s, cfg->schedule, &sc, 1, &last, &busy, err);
  if (st) return st;
  r->step_time = (cfg->k - 1) * inner + last;
  double rounds = r->step_time - r->dp_time;
  r->round_time = rounds / cfg->k;
  r->bubble_ratio = rounds > 0 ? 1 - cfg->k * busy / (cfg->p * rounds) : 0;
  return KT_OK;
}

kt_status kt__plan_ctx_evaluate(kt__plan_ctx *x, const kt_plan_config *cfg, double cutoff,
                                kt_plan_result *r, int *cut, kt_error *err) {
  memset(r, 0, sizeof *r);
  if (cut) *cut = 0;
  kt_status st = check_config(x, cfg, 0, err);
  if (st) return st;
  const kt__cost_entry *ce = kt__plan_ctx_cost_entry(x, cfg->t, cfg->b, cfg->recompute, err);
  if (!ce) return KT_EINVAL;
  int S = cfg->p * cfg->v, P = cfg->p;
  const kt__part_entry *pe = kt__plan_ctx_partition(x, S, ce, 0, NULL, err);
  if (!pe) return KT_EINVAL;
  r->cfg = *cfg;
  double *bufs = NULL;
  kt__sched_entry *sched = NULL;
  if (alloc_result(r, P, S, &bufs)) {
    st = kt_fail(err, KT_ENOMEM, "out of memory evaluating a configuration");
    goto done;
  }
  stage_bufs sb = {bufs, bufs + S, bufs + 2 * S, bufs + 3 * S};
  memcpy(r->partition, pe->counts, sizeof(int) * (size_t)S);
  double boundary = stage_sums(ce->costs, S, r, &sb);
  int own = cost_dependent(cfg->schedule);
  if (((cut && cfg->v > 1) || own) && surely_over(x, cfg, &sb, r)) {
    set_reason(x, r); /* the partition is final with V > 1: no need for the schedule */
    goto done;
  }
  if (cut && cutoff < INFINITY && (*cut = cut_by_bound(x, cfg, cutoff, &sb, boundary, r)))
    goto done;
  const kt__sched_entry *se = own ? (sched = own_schedule(x, cfg, r, &sb, boundary, err))
                                  : kt__plan_ctx_schedule(x, cfg->schedule, P, cfg->v, cfg->m, err);
  if (!se && own && !strstr(err->msg, "out of memory")) {
    r->fits = 0; /* the budget left beside the model states holds no micro-batch */
    set_reason(x, r);
    goto done;
  }
  if (!se) {
    st = strstr(err->msg, "out of memory") ? KT_ENOMEM : KT_EINVAL;
    goto done;
  }
  rank_memory(x, se, cfg, &sb, r);
  if (!r->fits && cfg->v == 1 && P > 1 && !own &&
      (st = recut_for_memory(x, cfg, ce, se, &sb, &boundary, r, err)))
    goto done;
  rank_times(x, cfg, se, &sb, boundary, r);
  if (r->fits && cut) {
    *cut = step_bound(x, &se->s, r, cfg, r->dp_time) > cutoff;
    if (*cut) goto done; /* cannot beat the cutoff: skip the simulation */
  }
  if (r->fits && (st = simulate_round(x, cfg, se, r, err))) goto done;
  set_reason(x, r);
done:
  kt__plan_sched_free(sched);
  free(bufs);
  if (st) kt_plan_result_free(r);
  return st;
}

kt_status kt_plan_evaluate(const kt_plan_model *m, const kt_plan_cluster *c,
                           const kt_plan_options *o, const kt_plan_config *cfg, kt_plan_result *out,
                           kt_error *err) {
  memset(out, 0, sizeof *out);
  kt__plan_ctx *x;
  kt_status st = kt__plan_ctx_create(m, c, o, &x, err);
  if (st) return st;
  st = kt__plan_ctx_evaluate(x, cfg, INFINITY, out, NULL, err);
  kt__plan_ctx_destroy(x);
  return st;
}
