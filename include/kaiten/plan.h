/* kaiten planner: model + cluster -> the layout to train with.
 *
 * Legend: P pipeline ranks, D data-parallel replicas, t tensor-parallel
 * degree, V chunks per rank (S = P*V stages), M micro-batches per round,
 * b samples per micro-batch, K accumulation rounds per step, so the global
 * batch is B = K*M*b*D and the devices used are P*D*t. s = sequence length,
 * h = hidden, a = heads.
 *
 * The planner has four parts, each usable alone:
 *   1. specs: a model (transformer shapes or an explicit layer list) and a
 *      cluster (devices, memory, FLOP/s, bandwidths), from JSON or presets;
 *   2. cost model: per-layer parameters, F/I/W times and activation bytes
 *      for one micro-batch under (t, b, recompute, sequence parallel);
 *   3. partitioner: exact min-max contiguous partition of weighted layers
 *      into S non-empty stages, optionally under a per-stage memory cap;
 *   4. search: enumerate (P, D, t, V, M, b, K, schedule, recompute), drop
 *      what does not fit, rank by step time from simulating the schedule.
 *
 * Units: seconds, bytes, FLOPs. Nothing here prints or exits.
 */
#ifndef KAITEN_PLAN_H
#define KAITEN_PLAN_H

#include "kaiten/generators.h"
#include "kaiten/core.h"
#include "kaiten/schedule.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- specs ----------------------------------------------------------------- */

typedef enum {
  KT_RECOMPUTE_NONE,      /* keep every activation */
  KT_RECOMPUTE_SELECTIVE, /* recompute the attention core (drops the 5as/h term) */
  KT_RECOMPUTE_FULL,      /* keep each block's input, recompute the block in backward */
  KT_RECOMPUTE_COUNT
} kt_recompute;

const char *kt_recompute_name(kt_recompute r); /* "none" | "selective" | "full" */
int kt_recompute_from_name(const char *name);  /* -1 when unknown */

typedef enum {
  KT_LAYER_EMBED,  /* token (+ position) embedding: first unit */
  KT_LAYER_BLOCK,  /* transformer block */
  KT_LAYER_HEAD,   /* final norm + LM head + loss: last unit */
  KT_LAYER_CUSTOM, /* explicit layer with given costs */
  KT_LAYER_KIND_COUNT
} kt_layer_kind;

/* One unit of the chain the partitioner cuts. Custom layers carry their own
 * costs (per sample, t = 1); the others derive theirs from the model shape. */
typedef struct {
  char name[32];
  kt_layer_kind kind;
  double params;      /* parameters */
  double flops;       /* forward FLOPs per sample (backward = 2x: I and W) */
  double act_bytes;   /* activation bytes kept from F to backward, per sample */
  double wgrad_bytes; /* bytes an I keeps for its W, per sample */
  double out_bytes;   /* bytes of the output sent to the next stage, per sample */
} kt_plan_layer;

#define KT_PLAN_MAX_LAYERS 4096

typedef struct {
  char name[64];
  int transformer; /* 1: the fields below define embed/block/head costs */
  int blocks, hidden, heads, kv_heads, ffn, vocab, seq_len;
  int swiglu;            /* gated FFN (3 matrices) instead of GELU (2) */
  int learned_positions; /* GPT-2 style position table of seq_len x hidden */
  int tie_embeddings;    /* head reuses the embedding (one copy per stage holding it) */
  kt_plan_layer *layers; /* the unit chain: embed, blocks..., head (or custom) */
  int n_layers;
} kt_plan_model;

/* Built-in presets; the list is comma-separated for help and errors. */
const char *kt_plan_preset_list(void);
/* Fills out from a preset name. EINVAL naming the unknown preset. */
kt_status kt_plan_model_preset(const char *name, kt_plan_model *out, kt_error *err);
/* Parses a model spec (format in docs/planner.md): transformer shapes
 * {"blocks", "hidden", "heads", ...} or {"layers": [{...}, ...]}.
 * EPARSE / EINVAL naming the bad field. */
kt_status kt_plan_model_parse(const char *json, kt_plan_model *out, kt_error *err);
/* A preset name, or else a JSON file path (read by kt_read_text, at most
 * KT_PLAN_FILE_MAX bytes; so is a cluster file). EIO / EPARSE / EINVAL. */
#define KT_PLAN_FILE_MAX (64LL << 20)
kt_status kt_plan_model_load(const char *preset_or_path, kt_plan_model *out, kt_error *err);
/* Changes the sequence length of a transformer model (rebuilds its layers). */
kt_status kt_plan_model_set_seq_len(kt_plan_model *m, int seq_len, kt_error *err);
void kt_plan_model_free(kt_plan_model *m);
/* Unique parameters (a tied head counts once). */
double kt_plan_model_params(const kt_plan_model *m);

/* Cluster: measured numbers (a future `kaiten calibrate`) plug in as
 * achieved_flops and the bandwidth / latency fields. */
typedef struct {
  int devices;           /* N */
  int devices_per_node;  /* tensor-parallel groups stay inside a node */
  double mem_bytes;      /* memory per device */
  double mem_reserved;   /* bytes per device kept back (runtime, buffers); < 0: the default,
                         * kt_plan_cluster_reserved */
  double peak_flops;     /* FLOP/s per device (dense, training precision) */
  double efficiency;     /* achieved fraction of peak_flops for matmuls */
  double achieved_flops; /* > 0: measured FLOP/s, overrides peak * efficiency */
  double intra_bw, intra_latency; /* inside a node: bytes/s, s */
  double inter_bw, inter_latency; /* between nodes */
  double inter_burst; /* bytes a link between nodes passes at once after idling (0: none) */
} kt_plan_cluster;

/* 8 devices per node, 80 GB, 312 TFLOP/s at 0.5, NVLink 300 GB/s 5 us,
 * network 25 GB/s 10 us (an A100 node; measure and override). */
void kt_plan_cluster_default(kt_plan_cluster *c);
/* Overrides the fields present in the JSON object. EPARSE / EINVAL. */
kt_status kt_plan_cluster_parse(const char *json, kt_plan_cluster *c, kt_error *err);
kt_status kt_plan_cluster_load(const char *path, kt_plan_cluster *c, kt_error *err);
kt_status kt_plan_cluster_check(const kt_plan_cluster *c, kt_error *err);
double kt_plan_cluster_flops(const kt_plan_cluster *c); /* achieved FLOP/s */
/* What a real device loses before the model gets any: the runtime's
 * context and the communication buffers (2 GB, at most a tenth of the
 * memory) and fragmentation (5% of it), bytes: KT_PLAN_RESERVE_* below.
 * mem_reserved when it is given (>= 0), else this default. */
#define KT_PLAN_RESERVE_FIXED 2e9
#define KT_PLAN_RESERVE_SHARE 0.05
double kt_plan_cluster_reserved(const kt_plan_cluster *c);
/* The bytes a device's model state and activations may take: memory less
 * what is reserved. */
double kt_plan_cluster_budget(const kt_plan_cluster *c);

/* Training options that are not searched. */
typedef struct {
  double weight_bytes, grad_bytes, optimizer_bytes; /* per parameter: 2, 2, 12 */
  int zero;              /* 0: none; 1: optimizer state sharded over D; 2: + gradients;
                            3: + weights (all-gathered per round) */
  int sequence_parallel; /* with t > 1 (default 1) */
  /* How ranks go from one step to the next (kaiten/costs.h): the step
   * time is the period the simulator gives under it (default overlap) */
  kt_step_sync step_sync;
} kt_plan_options;

void kt_plan_options_default(kt_plan_options *o);

/* ---- cost model ------------------------------------------------------------- */

/* Activation bytes one transformer block keeps per micro-batch (Korthikanti et
 * al. 2022, GPT block with 4h FFN): none: sbh(34 + 5as/h) at t = 1;
 * sbh(10 + 24/t + 5as/(ht)) with t-way tensor parallelism; sbh(34 + 5as/h)/t
 * with sequence parallelism. selective drops the 5as/h term; full keeps the
 * block input, 2sbh (/t with sequence parallelism). */
double kt_plan_block_activation(double s, double b, double h, double a, int t, int sp,
                                kt_recompute r);
/* Model-state bytes on one device: params * (weight + grad + optimizer)
 * bytes, divided by ways; with zero >= 1 the sharded parts also by d. */
double kt_plan_state_bytes(double params, const kt_plan_options *o, int ways, int d);

/* The layout-dependent knobs of the cost model. */
typedef struct {
  int t, b;
  kt_recompute recompute;
} kt_plan_shape;

/* Costs of one layer on one device for one micro-batch. */
typedef struct {
  double params;     /* parameters held (after tensor parallelism) */
  double f, i, w;    /* seconds: forward, input gradient (with recompute), weight gradient */
  double act, wgrad; /* bytes kept F -> backward; bytes an I keeps for its W */
  double out_bytes;  /* bytes sent to the next stage */
  double flops;      /* forward FLOPs (after tensor parallelism) */
  double tp;         /* seconds of tensor-parallel collectives inside f + i */
} kt_layer_cost;

/* Fills costs[m->n_layers]. EINVAL for impossible shapes (t not dividing heads). */
kt_status kt_plan_layer_costs(const kt_plan_model *m, const kt_plan_cluster *c,
                              const kt_plan_options *o, const kt_plan_shape *sh,
                              kt_layer_cost *costs, kt_error *err);

/* The partitioner (kt_partition_minmax) is in kaiten/costs.h. */

/* ---- one configuration --------------------------------------------------------- */

/* Where the P x D pipelines sit when the job spans nodes: ranks fill a node
 * tensor-parallel group first, then the next axis. DP_INSIDE puts the D
 * replicas of a pipeline rank next to each other (the pipeline crosses
 * nodes, the all-reduce stays inside); PP_INSIDE puts a pipeline's ranks
 * together (its hops stay inside, the all-reduce crosses). */
typedef enum { KT_NODES_DP_INSIDE, KT_NODES_PP_INSIDE, KT_NODES_COUNT } kt_node_layout;
const char *kt_node_layout_name(kt_node_layout p); /* "dp-inside" | "pp-inside" */
int kt_node_layout_from_name(const char *name);    /* -1 when unknown */

typedef struct {
  int p, d, t, v, m, b, k;
  kt_gen_kind schedule;
  kt_recompute recompute;
  kt_node_layout nodes;
} kt_plan_config;

typedef struct {
  kt_plan_config cfg;
  int fits; /* every device within mem_bytes - mem_reserved */
  /* The simulated period of a step (kaiten/sim.h, under the options'
   * step sync): K rounds of M micro-batches back to back on each rank,
   * then the step's end (dp_time, and a barrier's wait) */
  double step_time;    /* K * round_time + dp_time */
  double round_time;   /* a round's share of the step, its end left out */
  double bubble_ratio; /* 1 - busy / (P * round_time): idle share of the rounds */
  double dp_time;      /* gradient sync per step (+ zero-3 weight gathers per round) */
  double p2p_time;     /* one stage-to-stage hop (the replicas crossing one link share it) */
  double tp_time;      /* tensor-parallel collectives per micro-batch, busiest rank */
  double bottleneck;   /* largest rank load (F + I + W over its chunks) per micro-batch */
  double imbalance;    /* bottleneck / mean rank load - 1 */
  double mem_peak;     /* max over ranks */
  double *mem_rank;    /* p: peak bytes per pipeline rank (all its chunks) */
  double *mem_state;   /* p: model-state bytes per rank */
  int *partition;      /* p*v: layers per stage */
  double *stage_f, *stage_i, *stage_w; /* p*v: seconds per micro-batch */
  int peak_inflight;                   /* max over ranks */
  char reason[128];                    /* one line: what limits it */
  int m_min, m_max;                    /* collapsed search: the M range of the equivalent
                          configurations it stands for (else both cfg.m) */
  int equivalent;                      /* collapsed search: how many others it stands for */
} kt_plan_result;

void kt_plan_result_free(kt_plan_result *r);

/* Evaluates one fully specified configuration (partition, memory, simulated
 * step time). A configuration that does not fit still gets its memory
 * figures (fits = 0, step_time = 0). EINVAL when the configuration is
 * impossible (sizes, batch, schedule constraints) with the reason. */
kt_status kt_plan_evaluate(const kt_plan_model *m, const kt_plan_cluster *c,
                           const kt_plan_options *o, const kt_plan_config *cfg, kt_plan_result *out,
                           kt_error *err);

/* ---- search ------------------------------------------------------------------ */

typedef struct {
  long global_batch;     /* B */
  kt_plan_config pin;    /* a field > 0 (or >= 0 for enums, see below) is pinned */
  unsigned schedules;    /* bit mask of kt_gen_kind; 0 = the default set */
  unsigned recomputes;   /* bit mask of kt_recompute; 0 = all */
  unsigned node_layouts; /* bit mask of kt_node_layout; 0 = both where the job spans nodes */
  double max_bubble;     /* <= 0: no limit */
  int max_microbatches;  /* default 1024 */
  int max_chunks;        /* interleaved / looped-bfs V up to this (default 4) */
  int top;               /* configurations kept (0 = every one that fits) */
  /* 1: configurations that differ only in how the step is cut into rounds
   * (M and K with the same M*K) or, with one rank, in schedule, and that
   * have the same step time and memory, count as one result (the
   * best-ranked one, with the M range in m_min..m_max and the count in
   * equivalent). 0 (default): every configuration is its own result. */
  int collapse;
} kt_plan_search_params;

/* pin.schedule / pin.recompute are ignored: use the masks. */
void kt_plan_search_params_default(kt_plan_search_params *sp);

typedef struct {
  kt_plan_result *configs; /* best first */
  int n;
  size_t enumerated;     /* candidates consistent with B and N */
  size_t pruned_memory;  /* dropped: model state alone over the budget (a bound) */
  size_t pruned_time;    /* dropped: time lower bound above the N-th best */
  size_t evaluated;      /* fully evaluated (partition, memory, simulation) */
  size_t no_fit;         /* evaluated and over the memory budget */
  size_t not_applicable; /* the schedule rejects the layout */
  size_t over_bubble;    /* above max_bubble */
  size_t simulations;    /* schedule simulations run (the rest reused) */
  double min_memory;     /* smallest peak (or bound) seen, bytes: why nothing fits */
  char not_applicable_reason[KT_ERROR_LEN]; /* the first schedule rejection, if any */
  double seconds;
} kt_plan_report;

void kt_plan_report_free(kt_plan_report *r);

/* Searches the space; r->n may be 0 when nothing fits. EINVAL when the pins
 * contradict each other or the batch (named in the reason). */
kt_status kt_plan_search(const kt_plan_model *m, const kt_plan_cluster *c, const kt_plan_options *o,
                         const kt_plan_search_params *sp, kt_plan_report *r, kt_error *err);

/* ---- partition only ---------------------------------------------------------------
 * The exact min-max cut of the layers into `stages` by time per micro-batch
 * (capped: also under the device memory with 1F1B's in-flight counts); the
 * inputs first, then the cut and its per-stage figures. */
typedef struct {
  int stages, t, b, m, d;
  kt_recompute recompute;
  int capped;     /* cut under the device memory with 1F1B in-flight counts */
  int *counts;    /* stages */
  double *load;   /* stages: seconds per micro-batch (F + I + W) */
  double *params; /* stages */
  double *mem;    /* stages: model state + in-flight activations (capped mode) */
  double bottleneck, mean;
} kt_plan_partition_view;

kt_status kt_plan_partition_only(const kt_plan_model *m, const kt_plan_cluster *c,
                                 const kt_plan_options *o, kt_plan_partition_view *pv,
                                 kt_error *err);
void kt_plan_partition_view_free(kt_plan_partition_view *pv);

#ifdef __cplusplus
}
#endif

#endif
