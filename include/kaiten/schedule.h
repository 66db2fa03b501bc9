/* kaiten schedule IR: per-rank ordered lists of compute actions.
 *
 * A schedule is plain data. P ranks, V chunks (stages) per rank, S = P*V
 * stages, M micro-batches. Rank r runs its action list strictly in order.
 * Each action is an op (F forward, B full backward, I backward for inputs,
 * W backward for weights) on one (stage, micro-batch).
 *
 * Text form of one action (PyTorch pipelining notation): <stage><op><mb>,
 * e.g. "0F0", "3I2". Two actions that run as one overlapped slot (DualPipeV)
 * are written "(0F7;7B3)OVERLAP_F_B"; in the IR the first carries
 * KT_ACTION_OVERLAP_NEXT.
 */
#ifndef KAITEN_SCHEDULE_H
#define KAITEN_SCHEDULE_H

#include "kaiten/core.h"

typedef enum { KT_OP_F, KT_OP_B, KT_OP_I, KT_OP_W, KT_OP_COUNT } kt_op;

/* 'F', 'B', 'I', 'W' */
char kt_op_letter(kt_op op);

typedef enum {
  KT_PLACEMENT_LOOP, /* stage s on rank s mod P (interleaved, looped-bfs) */
  KT_PLACEMENT_V,    /* s < P on rank s, else rank 2P-1-s (zbv, dualpipev) */
  KT_PLACEMENT_COUNT
} kt_placement;

const char *kt_placement_name(kt_placement p); /* "loop" | "v" */

/* flags */
#define KT_ACTION_OVERLAP_NEXT 0x1u /* runs overlapped with the next action on the rank */

typedef struct {
  int32_t stage;
  int32_t mb;
  uint8_t op;           /* kt_op */
  uint8_t flags;        /* KT_ACTION_* */
  uint16_t idle_before; /* idle slots before it in CSV/text layout (ignored by executors) */
} kt_action;

typedef struct {
  kt_action *actions;
  size_t n, cap;
  uint32_t idle_after; /* trailing idle slots in CSV/text layout */
} kt_rank_actions;

typedef struct {
  int p, v, m;
  kt_placement placement;
  char name[32]; /* generator name, or "" for imported schedules */
  kt_rank_actions *ranks; /* p entries */
} kt_schedule;

/* Limits that keep every size computation far from overflow. */
#define KT_MAX_RANKS 4096
#define KT_MAX_CHUNKS 64
#define KT_MAX_MICROBATCHES 1000000

/* Sets up an empty schedule. EINVAL on out-of-range sizes, ENOMEM. */
kt_status kt_schedule_init(kt_schedule *s, int p, int v, int m, kt_placement placement,
                           kt_error *err);
void kt_schedule_free(kt_schedule *s);
/* Appends an action to rank's list. ENOMEM on allocation failure. */
kt_status kt_schedule_push(kt_schedule *s, int rank, int stage, kt_op op, int mb);
size_t kt_schedule_total_actions(const kt_schedule *s);

static inline int kt_schedule_stages(const kt_schedule *s) { return s->p * s->v; }
/* Rank that owns stage under the schedule's placement. */
int kt_stage_rank(const kt_schedule *s, int stage);
/* Index of the stage among its rank's chunks (0 .. V-1). */
int kt_stage_chunk(const kt_schedule *s, int stage);
/* Stage held by rank as its chunk c. */
int kt_rank_chunk_stage(const kt_schedule *s, int rank, int chunk);
/* Point-to-point messages one step sends (activations + gradients across ranks). */
size_t kt_schedule_messages(const kt_schedule *s);

/* ---- text and CSV forms ------------------------------------------------- */

/* Formats one action ("0F0"); returns the length written (buf >= 32 bytes). */
int kt_action_format(const kt_action *a, char *buf, size_t n);
/* Parses one action from s[0..len). EPARSE with a reason naming the text. */
kt_status kt_action_parse(const char *s, size_t len, kt_action *out, kt_error *err);

/* Parses a schedule in CSV form (rows = ranks, cells = slots, empty = idle)
 * or text form (lines = ranks, whitespace-separated actions, "-" = idle,
 * '#' comment lines; an optional header "# kaiten p=4 v=1 m=8 placement=loop").
 * P is the number of rows; S, M and placement are taken from the header or
 * inferred (V = ceil(S/P); placement is the one that fits the most actions). */
kt_status kt_schedule_parse(const char *text, kt_schedule *out, kt_error *err);
kt_status kt_schedule_parse_file(const char *path, kt_schedule *out, kt_error *err);

void kt_schedule_write_csv(const kt_schedule *s, kt_buf *b);
void kt_schedule_write_text(const kt_schedule *s, kt_buf *b); /* with header line */

/* ---- generators ---------------------------------------------------------- */

typedef enum {
  KT_SCHED_GPIPE,
  KT_SCHED_1F1B,
  KT_SCHED_INTERLEAVED,
  KT_SCHED_LOOPED_BFS,
  KT_SCHED_ZB_H1,
  KT_SCHED_ZB_H2,
  KT_SCHED_ZBV,
  KT_SCHED_DUALPIPEV,
  KT_SCHED_ZB_AUTO,
  KT_SCHED_COUNT
} kt_schedule_kind;

const char *kt_schedule_kind_name(kt_schedule_kind k);
/* Accepts names and aliases ("interleaved-1f1b"). -1 when unknown. */
int kt_schedule_kind_from_name(const char *name);
/* Comma-separated list of all names, for help and error messages. */
const char *kt_schedule_kind_list(void);
/* Chunks per rank a schedule uses when the user gives none (1 or 2). */
int kt_schedule_default_chunks(kt_schedule_kind k);
/* Closed-form bubble ratio under uniform per-stage costs and T_comm = 0, or a
 * negative value when the schedule has none for these sizes (zb-h1 needs
 * M >= P; zb-h2, zbv, dualpipev M >= 2P); expr (if non-NULL) receives the
 * formula as text, NULL when there is none. docs/schedules.md derives them. */
double kt_schedule_closed_form_bubble(kt_schedule_kind k, int p, int v, int m, double tf,
                                      double tb, double tw, const char **expr);
/* Closed-form peak memory (the largest over the ranks, in mem_act units)
 * under uniform per-stage M_B = mem_act and M_W = mem_wgrad, or a negative
 * value when there is none (interleaved with M not a multiple of P, the
 * zero-bubble schedules below their M bound or with M_W > M_B, zb-auto). */
double kt_schedule_closed_form_peak_memory(kt_schedule_kind k, int p, int v, int m,
                                           double mem_act, double mem_wgrad, const char **expr);

struct kt_costs; /* sim.h */

typedef struct {
  int p, v, m; /* v = 0: the schedule's default chunk count */
  /* zb-auto only: the cost model to optimise against (NULL = unit costs)
   * and the memory limit in the units of mem_act (<= 0: P * mem_act). */
  const struct kt_costs *costs;
  double mem_limit;
} kt_schedule_params;

/* The memory limit zb-auto keeps every rank under: params->mem_limit, or
 * when that is <= 0, P * max over stages of max(mem_act, mem_wgrad) (P*M_B). */
double kt_schedule_mem_limit(const kt_schedule_params *params);

/* Builds the named schedule. EINVAL with a one-line reason when the
 * parameters are impossible for it (e.g. interleaved with M < P). */
kt_status kt_schedule_generate(kt_schedule_kind kind, const kt_schedule_params *params,
                               kt_schedule *out, kt_error *err);

/* ---- validation ----------------------------------------------------------- */

/* Checks that every (stage, mb) has exactly one F and one complete backward
 * (B, or I then W) on the rank that owns the stage, in a valid per-rank order,
 * and that the schedule cannot deadlock. EINVALID_SCHEDULE or EDEADLOCK with
 * the specific reason. */
kt_status kt_schedule_validate(const kt_schedule *s, kt_error *err);

#endif
