/* kaiten cost model: what an action costs (time) and holds (memory).
 *
 * Costs are uniform or per stage: T_F, T_B (input gradient; a full backward
 * B costs T_B + T_W), T_W, a per-hop communication time (or latency +
 * bytes / bandwidth), M_B (activation one F adds) and M_W (what an I keeps
 * for its W). The simulator, the schedule generators that search with it,
 * and the planner read them.
 */
#ifndef KAITEN_COSTS_H
#define KAITEN_COSTS_H

#include "kaiten/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kt_links kt_links;

/* How a rank goes from one training step to the next (docs/schedules.md,
 * "What a step is"). OVERLAP: a rank starts its next step as soon as its
 * own update is done (the update runs on what the rank has; the global
 * gradient norm and a non-finite check are all-reduced behind it and a
 * wrong update is rolled back: post-validation). BARRIER: every rank waits
 * for all, after the global-norm all-reduce, before the next step. */
typedef enum { KT_STEP_OVERLAP, KT_STEP_BARRIER, KT_STEP_SYNC_COUNT } kt_step_sync;
/* "overlap", "barrier"; "?" out of range. */
const char *kt_step_sync_name(kt_step_sync s);
/* The value named, or -1. */
int kt_step_sync_from_name(const char *name);

typedef struct kt_costs {
  double tf, tb, tw;   /* uniform per-stage costs of F, I (B = I + W) and W */
  double comm;         /* per hop between ranks (used when comm_bandwidth == 0) */
  double comm_latency; /* with comm_bandwidth > 0: hop = latency + bytes / bandwidth */
  double comm_bytes;
  double comm_bandwidth;
  /* Seconds a rank is held by each message it sends to another rank (what
   * posting a send takes it, LogP's o: a copy into a TCP socket is paid by
   * the sender); the message still leaves when the send starts. Default 0. */
  double send_overhead;
  /* Time every compute action holds its rank beyond its cost (a kernel
   * launch, the framework's bookkeeping): F, B, I and W each pay it once,
   * so splitting a B into I and W pays it twice. Not divided by V under the
   * rank cost basis (it is per action, not per share). Default 0. */
  double op_overhead;
  double mem_act;       /* M_B: activation memory one F adds */
  double mem_wgrad;     /* M_W: memory an I keeps for its W */
  double mem_transient; /* what an action of the stage holds while it runs beyond the
                                larger of the levels before and after it (scratch) */
  /* Overlapped groups (OVERLAP_F_B cells): 0 = run one after the other, as
   * PyTorch's default runtime does (default); 1 = the shorter ops are fully
   * hidden behind the longest. A group takes sum - overlap * (sum - max). */
  double overlap;
  /* Optional: where the ranks live. When set, a hop between pipeline ranks
   * costs what kt_links_transfer says (link class, shared links) for
   * comm_bytes instead of the per-hop value. Not owned, and never written
   * by the simulator: it books transfers on a copy of its own
   * (kt_links_clone), so one cost table may serve simulations in several
   * threads at once. */
  const kt_links *links;
  /* Optional: each action's own duration instead of its stage's cost (a
   * measured step replayed in the simulator): one entry per action of the
   * schedule, rank 0's list first, each rank's in list order (entries of
   * communication actions unused). Not owned; NULL: the stage costs. */
  const double *action_time;
  /* The step's end: what a rank does after its last action before its
   * next step can start (src/sim/step.c). All default 0 / overlap / no tie. */
  kt_step_sync step_sync;
  double tu;     /* the optimizer update of one stage's parameters (per stage, like tf) */
  double t_norm; /* the global-norm (and loss) all-reduce over the pipeline ranks */
  double t_dp;   /* one rank's data-parallel gradient all-reduce */
  int tied;      /* tied embeddings: the first and the last stage exchange a gradient */
  double t_tie;  /* ... and the exchange takes this long */
  /* Optional: the earliest time each rank may start its first action (a
   * step that follows another without a barrier); NULL: 0 on every rank.
   * Not owned. */
  const double *rank_release;
  /* Optional: the links between pipeline ranks one by one (n_links
   * entries each; NULL: the uniform hop above). Link i joins ranks i and
   * i + 1 (both ways); a P-th entry, link P - 1, joins the last rank and
   * rank 0 (interleaved's wrap). link_comm: the hop's time; with
   * link_bandwidth, link_latency + comm_bytes / link_bandwidth instead
   * (a NULL list there: the uniform value); link_delay: latency added to
   * the link on top of either (a slow link, kt_faults). A hop between
   * ranks no link joins costs the uniform hop. kt_cost_link reads them. */
  int n_links;
  double *link_comm, *link_latency, *link_bandwidth, *link_delay;
  /* Optional per-stage values (n_stages entries each; NULL = the uniform value). */
  int n_stages;
  double *stage_tf, *stage_tb, *stage_tw, *stage_mem_act, *stage_mem_wgrad, *stage_mem_transient;
  double *stage_tu;
  /* Optional per (stage, micro-batch) values: each micro-batch its own cost
   * (its token count, its attention's length). n_stages * n_mb entries,
   * stage-major (stage s, micro-batch j at s * n_mb + j); NULL: the stage's
   * value. Like per-stage lists they are stage costs as given (never
   * divided by V). kt_costs_set_mb keeps the stage arrays as each stage's
   * summary (mean time, largest memory) for whatever reads stages only. */
  int n_mb;
  double *mb_tf, *mb_tb, *mb_tw, *mb_mem_act, *mb_mem_wgrad;
} kt_costs;

/* The range of every cost and memory value (times, overheads, memory,
 * bytes, bandwidths): 0, or KT_COST_MIN..KT_COST_MAX as given; a
 * schedule's stage costs (a value for one rank's share divided by its V
 * chunks, V <= KT_MAX_CHUNKS) down to KT_COST_STAGE_MIN. Within it every
 * sum over the largest schedule (3 * KT_MAX_RANKS * KT_MAX_CHUNKS *
 * KT_MAX_MICROBATCHES actions), every quotient (bytes / bandwidth) and
 * their products stay far from overflow: no simulation, bound or search
 * forms a number that is not finite. */
#define KT_COST_MAX 1e15
#define KT_COST_MIN 1e-15
#define KT_COST_STAGE_MIN (KT_COST_MIN / KT_MAX_CHUNKS)
#define KT__COST_RANGE_TEXT "expected 0 or a number in 1e-15..1e+15"
/* 1 when x is 0 or in KT_COST_STAGE_MIN..KT_COST_MAX (not NaN). */
int kt_cost_in_range(double x);
/* The rule for a value as given: KT_OK when x is 0 or in
 * KT_COST_MIN..KT_COST_MAX, else EINVAL naming it ("tf 1e+308: expected 0
 * or a number in 1e-15..1e+15"). */
kt_status kt_cost_value_check(const char *name, double x, kt_error *err);

/* T_F = T_B = T_W = 1, T_comm = 0, M_B = 1, M_W = 0. */
void kt_costs_default(kt_costs *c);
/* Frees the per-stage arrays. */
void kt_costs_free(kt_costs *c);
/* Deep copy (per-stage arrays duplicated). ENOMEM. */
kt_status kt_costs_copy(kt_costs *dst, const kt_costs *src);
/* 1 when no compute action takes time: T_F, T_B and T_W 0 on every stage
 * and no op overhead (a simulation then has no makespan to speak of). */
int kt_costs_compute_free(const kt_costs *c);
/* Checks every value is in range (kt_cost_in_range; overlap a fraction in
 * 0..1) and per-stage arrays match n_stages. EINVAL naming the value. */
kt_status kt_costs_check(const kt_costs *c, int n_stages, kt_error *err);

double kt_cost_tf(const kt_costs *c, int stage);
double kt_cost_tb(const kt_costs *c, int stage);
double kt_cost_tw(const kt_costs *c, int stage);
double kt_cost_mem_act(const kt_costs *c, int stage);
double kt_cost_mem_wgrad(const kt_costs *c, int stage);
double kt_cost_mem_transient(const kt_costs *c, int stage);
double kt_cost_tu(const kt_costs *c, int stage);
double kt_cost_comm(const kt_costs *c);
/* A hop between pipeline ranks from and to: 0 on one rank, else the link
 * that joins them (n_links, plus its delay) or the uniform hop. */
double kt_cost_link(const kt_costs *c, int from, int to);
/* Link l's hop (kt_costs.n_links; its delay included; outside the lists:
 * the uniform hop). */
double kt_cost_link_at(const kt_costs *c, int l);
/* The link joining pipeline ranks a and b: a and a + 1 are link a, 0 and
 * n - 1 (n > 2) link n - 1; -1 for ranks no link joins. */
int kt_link_index(int a, int b, int n);
/* Gives c per-link lists for p ranks (n_links = p, or 1 for two ranks;
 * each list filled with its uniform value) where it has none, keeping any
 * it has (resized to p entries when it lists p - 1). EINVAL when it lists
 * another count, ENOMEM. */
kt_status kt_costs_links_for(kt_costs *c, int p, kt_error *err);
/* Micro-batch mb's own value on stage (the stage's value when none is
 * given per micro-batch, or mb is outside the lists). */
double kt_cost_tf_mb(const kt_costs *c, int stage, int mb);
double kt_cost_tb_mb(const kt_costs *c, int stage, int mb);
double kt_cost_tw_mb(const kt_costs *c, int stage, int mb);
double kt_cost_mem_act_mb(const kt_costs *c, int stage, int mb);
double kt_cost_mem_wgrad_mb(const kt_costs *c, int stage, int mb);
/* 1 when some value is given per micro-batch. */
static inline int kt_costs_per_mb(const kt_costs *c) { return c->n_mb > 0; }
/* Sets field ("tf", "tb", "tw", "mem-act", "mem-wgrad"; "_" for "-") per
 * (stage, micro-batch): vals holds n_stages lists of n_mb values, stage-major.
 * The stage array becomes the stage's mean (times) or largest value
 * (memory), exactly the value when a stage's values are all equal. EINVAL
 * naming a bad value or a count that disagrees with another list's, ENOMEM. */
kt_status kt_costs_set_mb(kt_costs *c, const char *field, const double *vals, int n_stages,
                          int n_mb, kt_error *err);
/* 1 when some stage's micro-batches differ in a per-micro-batch value (equal
 * lists are a per-stage list). */
int kt_costs_mb_differ(const kt_costs *c);
/* A deep copy of c without per-micro-batch lists, each stage's times and
 * memory the least of its micro-batches': no step under c is shorter than
 * under dst (a lower bound's costs). ENOMEM. */
kt_status kt_costs_least(const kt_costs *c, kt_costs *dst, kt_error *err);
/* Forgets every per-micro-batch list (the stage arrays keep their summaries). */
void kt_costs_clear_mb(kt_costs *c);
/* With per-micro-batch values, EINVAL unless they list m micro-batches. */
kt_status kt_costs_check_m(const kt_costs *c, int m, kt_error *err);

/* The costs of one stage of a schedule with v chunks per rank when c
 * describes one rank's share of the model: every uniform value (T_F, T_B,
 * T_W, M_B, M_W, the transient) divided by v; per-stage lists and the
 * communication costs unchanged. dst is a deep copy (free it). ENOMEM. */
kt_status kt_costs_for_chunks(const kt_costs *c, int v, kt_costs *dst, kt_error *err);

/* "tf=2,1,1,3 tb=1 tw=1 comm=0" (lists where per stage), for headers. */
void kt_costs_describe(const kt_costs *c, char *buf, size_t n);

/* Parses "X" (uniform) or "x0,x1,...,xn" (per stage) into the named field
 * ("tf", "tb", "tw", "tu", "mem-act", "mem-wgrad", "mem-transient"), or
 * "a0,a1,...;b0,b1,...;..." (per stage and micro-batch: one ';'-separated
 * group per stage, one value per micro-batch; tf, tb, tw, mem-act,
 * mem-wgrad), or
 * "X" into a scalar ("comm", "comm-latency", "comm-bytes",
 * "comm-bandwidth", "send-overhead", "op-overhead", "overlap", "t-norm",
 * "t-dp", "tie": the last also marks the embeddings tied; "comm",
 * "comm-latency", "comm-bandwidth" and "link-delay" also take a list of
 * P - 1 or P links); the cost file's names ("mem_act", ...) too. Each value within
 * kt_cost_value_check's range (overlap: 0..1). EINVAL naming the bad value. */
kt_status kt_costs_set(kt_costs *c, const char *field, const char *text, kt_error *err);
/* Loads a JSON cost file: {"tf": 1 or [..] or [[..], ..], "tb": .., "tw": .., "tu": .., "comm": x or
 * [per link], "comm_latency" and "comm_bandwidth" (x or [per link]), "link_delay": [..],
 * "mem_act": .., "mem_wgrad": .., "mem_transient": .., "comm_latency",
 * "comm_bytes", "comm_bandwidth", "send_overhead", "overlap", "t_norm",
 * "t_dp", "tie", "step_sync": "overlap"|"barrier"}, each number as
 * kt_costs_set takes it; any other key, or a key given twice, is refused
 * (EINVAL naming it), malformed JSON is EPARSE. The file is read as
 * kt_read_text reads (at most KT_COSTS_FILE_MAX bytes, no NUL byte; a
 * device or FIFO too). A list of lists gives one list per stage of
 * per-micro-batch values (tf, tb, tw, mem_act, mem_wgrad; kt_costs_set_mb).
 * EIO / EPARSE / EINVAL. */
#define KT_COSTS_FILE_MAX (64LL << 20)
kt_status kt_costs_load_json(kt_costs *c, const char *path, kt_error *err);
/* The same from JSON text; origin names it in error messages. */
kt_status kt_costs_parse_json(kt_costs *c, const char *json, const char *origin, kt_error *err);

/* ---- partitioner ------------------------------------------------------------ */

/* Contiguous partition of n weighted layers into S stages that minimises the
 * largest stage load (exact), every stage non-empty. With mem_cap > 0, stage
 * j must also satisfy sum(fixed) + mult[j] * sum(act) <= mem_cap over its
 * layers (fixed/act per layer, mult per stage, NULL = 0 / 1). */
typedef struct {
  int n;
  const double *load;
  const double *fixed, *act, *mult;
  double mem_cap;
  /* Optional: stage j's load is scale[j] times its layers' (a slower rank
   * runs it: the autopilot's re-partition); NULL: 1 everywhere. Solved
   * exactly by dynamic programming over the cuts, O(S n^2). */
  const double *scale;
} kt_partition_problem;

/* counts[stages] receives layers per stage; *bottleneck the largest load.
 * EINVAL when stages > n, stages * (n + 1) > KT_PARTITION_MAX_CELLS (its
 * work and tables grow with it: at the cap it takes seconds), a value is
 * negative or not finite, the sums of the values overflow, or no partition
 * meets the memory cap. */
#define KT_PARTITION_MAX_CELLS (1 << 25)
kt_status kt_partition_minmax(const kt_partition_problem *pb, int stages, int *counts,
                              double *bottleneck, kt_error *err);

/* ---- links: which ranks share a node, and what crossing a link costs ----
 *
 * Two link classes: inside a node and between nodes (latency + bytes /
 * bandwidth each). Each node has one link to the network, used by everything
 * it sends (its uplink) and everything it receives (its downlink); transfers
 * that overlap on one of them share its bandwidth. The world has P pipeline
 * ranks times D replicas (world rank = stage_rank * D + replica); the
 * simulator follows replica 0, and the other replicas' copies of a transfer,
 * made at the same moment, share the links with it. */
typedef struct {
  double intra_latency, intra_bw; /* s, bytes/s */
  double inter_latency, inter_bw;
  double inter_burst; /* bytes a link between nodes passes at once after idling (a token
                       * bucket's burst: refilled at the link's rate while it idles); 0: none */
} kt_link_classes;

/* node_of: P*D node ids (world rank order), or NULL to fill nodes with
 * devices_per_node consecutive world ranks each. EINVAL naming a bad value
 * (bandwidth <= 0, negative latency or node id), ENOMEM. */
kt_status kt_links_create(const kt_link_classes *lc, int p, int d, const int *node_of,
                          int devices_per_node, kt_links **out, kt_error *err);
void kt_links_destroy(kt_links *l);
/* A new links object with l's topology and all-reduce (kt_links_set_sync)
 * and nothing booked, for a simulation of its own: l is only read.
 * ENOMEM. */
kt_status kt_links_clone(const kt_links *l, kt_links **out, kt_error *err);
int kt_links_nodes(const kt_links *l);
int kt_links_node(const kt_links *l, int world_rank);
const kt_link_classes *kt_links_classes(const kt_links *l);
/* Forgets every booked transfer (a new simulation starts). */
void kt_links_reset(kt_links *l);

/* One transfer between world ranks on idle links: latency + bytes /
 * bandwidth of the class it crosses (0 to itself). */
double kt_cost_hop(const kt_links *l, int from, int to, double bytes);
/* Replica 0's transfer of bytes from pipeline rank from_rank to to_rank,
 * sent at t: books it and, after it, the other replicas' copies that share
 * its links, and returns when replica 0's arrives. */
double kt_links_transfer(kt_links *l, int from_rank, int to_rank, double bytes, double t);
/* How far the last replica's pipeline runs behind replica 0's: the copies
 * of a transfer that share a link go after replica 0's (the largest such
 * wait booked since the last reset). */
double kt_links_replica_lag(const kt_links *l);
/* Transfers between nodes that overlap in time share the links' bandwidth
 * (links_fluid.c). A simulation books them in turns (it does not run in
 * time order); kt_links_share then replays that run's transfers in time
 * order, each active one getting an equal share of the more crowded of its
 * two links, and the next run (after kt_links_reset) takes every transfer's
 * duration from that replay. Returns the largest change of a duration
 * (seconds; INFINITY when the replay could not run): run again until it is
 * small. kt_links_share_forget goes back to booking in turns. */
double kt_links_share(kt_links *l);
void kt_links_share_forget(kt_links *l);
/* Replicas side by side: a simulation run that follows replica k (0..D-1)
 * books only that replica's own transfers, so runs for every replica in
 * turn (without a reset between them) put all of them on the links; -1
 * goes back to replica 0 with the others' copies. Following replica 0
 * forgets the ends noted so far; kt_links_note_end keeps, per pipeline
 * rank, the latest end any replica's run reached (kt_links_last_end). */
void kt_links_follow_replica(kt_links *l, int replica);
int kt_links_replica(const kt_links *l);
int kt_links_replicas(const kt_links *l); /* D */
void kt_links_note_end(kt_links *l, int rank, double t);
double kt_links_last_end(const kt_links *l, int rank);
/* The all-reduce of bytes over the D replicas of pipeline rank stage_rank,
 * starting at t: a ring when every member is on its own node or all share
 * one; hierarchical (each node's other members send their buffers to its
 * leader in turn, a ring between the leaders, the sum sent back in turn)
 * when the group spans nodes with several members on some, as the MPI
 * transport runs it. Books
 * the inter-node steps, so concurrent all-reduces share links; returns the
 * end time. */
double kt_links_allreduce(kt_links *l, int stage_rank, double bytes, double t);
/* Every pipeline rank's all-reduce (bytes[P]), rank r's starting at
 * start[r] (NULL: all at 0), booked in order of start: end[r] (may be NULL)
 * receives each end, the latest is returned. */
double kt_links_allreduce_all(kt_links *l, const double *bytes, const double *start, double *end);
/* The step's gradient all-reduce inside the simulation: with bytes[P] set
 * (copied; NULL: none), every simulation on these links ends by
 * all-reducing them, each pipeline rank's starting when the last replica
 * there ends (kt_links_sync, called by the simulator after its runs), so
 * the rings' transfers share links with the pipeline's last ones in the
 * replay. kt_links_synced: when the last such simulation's step ended
 * (its last all-reduce, or its last rank when none). */
void kt_links_set_sync(kt_links *l, const double *bytes);
double kt_links_sync(kt_links *l);
double kt_links_synced(const kt_links *l);

/* ---- faults: a rank or link that slows down mid-run ---------------------------
 *
 * `--slow-rank R:F[@S]`: pipeline rank R's compute takes F times as long
 * from step S on; `--slow-link A-B:+D[@S]`: every message between
 * pipeline ranks A and B (both ways) arrives D later from step S on;
 * `--fault-trace FILE`: link delays that change over time, one line per
 * change in PipeMorph's format `time_s;links;delays` (e.g.
 * `0.25;0_1,1_2,2_3;0.03,0,0.021`: from 0.25 s on, link 0-1 adds 30 ms,
 * 2-3 adds 21 ms), times counted from the start of step S. Steps S are
 * 1-based as the user counts them (absent: 1); kt_faults holds them
 * 0-based. A simulation takes delays in its costs' unit; a run in
 * seconds. */
#define KT_MAX_FAULTS 16

typedef struct {
  int rank;      /* pipeline rank */
  double factor; /* its compute takes this many times as long (>= 1) */
  int onset;     /* from this step on (0-based) */
} kt_rank_fault;

typedef struct {
  int a, b;     /* the link between pipeline ranks a < b */
  double delay; /* added to every message on it, both ways */
  int onset;
} kt_link_fault;

typedef struct {
  int n_rank, n_link;
  kt_rank_fault rank[KT_MAX_FAULTS];
  kt_link_fault link[KT_MAX_FAULTS];
  /* a trace: n_points changes; from trace_t[i] seconds after the start of
   * step trace_onset until the next change, link (trace_a[k], trace_b[k])
   * adds trace_delay[i * n_trace_links + k] (before the first change: 0) */
  int n_points, n_trace_links, trace_onset;
  double *trace_t, *trace_delay;
  int *trace_a, *trace_b;
} kt_faults;

void kt_faults_init(kt_faults *f);
void kt_faults_free(kt_faults *f);
/* Deep copy. ENOMEM. */
kt_status kt_faults_copy(kt_faults *dst, const kt_faults *src, kt_error *err);
/* Adds "R:F" or "R:F@S" (--slow-rank). EINVAL naming the bad part. */
kt_status kt_faults_add_rank(kt_faults *f, const char *spec, kt_error *err);
/* Adds "A-B:+D" or "A-B:+D@S" (--slow-link); D is in unit (1: as given;
 * 1e-3: milliseconds, a run's default), or carries its own: "120ms",
 * "0.12s", "500us" (only where seconds is 1, a run). EINVAL. */
kt_status kt_faults_add_link(kt_faults *f, const char *spec, double unit, double seconds,
                             kt_error *err);
/* A trace in PipeMorph's format (text; origin names it in errors), its
 * times counted from the start of step onset (0-based). Lines are
 * `time_s;links;delays`: times rising, links `A_B` (ranks next to each
 * other; every line names the same ones), delays in seconds; blank lines
 * and lines starting with # are skipped. EINVAL naming the line. */
kt_status kt_faults_parse_trace(kt_faults *f, const char *text, const char *origin, int onset,
                                kt_error *err);
kt_status kt_faults_load_trace(kt_faults *f, const char *path, int onset, kt_error *err);
/* The ranks within 0..p-1 and each link between ranks next to each other
 * (or rank 0 and p - 1). EINVAL naming the fault. */
kt_status kt_faults_check(const kt_faults *f, int p, kt_error *err);
/* 1 with *a < *b the first link fault (a slow link or a trace's link)
 * that no message of a schedule crosses: no two consecutive stages of
 * stage_rank[n_stages] run on its ranks (the wrap P-1 to 0 in 1F1B), so
 * the fault would change nothing. 0 when every one is crossed. */
int kt_faults_unused_link(const kt_faults *f, const int *stage_rank, int n_stages, int *a, int *b);
/* Whether any fault is set; whether any is on a link (a run then stamps
 * its messages with when they are due). */
int kt_faults_any(const kt_faults *f);
int kt_faults_on_links(const kt_faults *f);
/* Rank r's factor at step (0-based): the largest of its faults begun. */
double kt_faults_rank_factor(const kt_faults *f, int r, int step);
/* The delay of the link between ranks a and b at step, t seconds after the
 * trace's step began (t < 0: not yet): the sum of its faults begun. */
double kt_faults_link_delay(const kt_faults *f, int a, int b, int step, double t);
/* c as the faults make it at step and trace time t: the compute costs of
 * stages on a slow rank (stage_rank[n_stages]) times its factor (the
 * costs made per stage), each link's delay into link_delay (the costs made
 * per link for p ranks). EINVAL, ENOMEM. */
kt_status kt_faults_apply(const kt_faults *f, int step, double t, int p, const int *stage_rank,
                          int n_stages, kt_costs *c, kt_error *err);

#ifdef __cplusplus
}
#endif

#endif
