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

/* Communication ops of the lowered form (PyTorch's comms notation). They
 * appear only in a lowered schedule (kt_schedule_lower), never in a compute
 * schedule. SEND_F on stage s sends F(s)'s output; its RECV_F is written on
 * the receiving stage s+1. SEND_B on stage s sends the input gradient of
 * B/I(s); its RECV_B is written on stage s-1. */
typedef enum {
  KT_OP_SEND_F = KT_OP_COUNT,
  KT_OP_RECV_F,
  KT_OP_SEND_B,
  KT_OP_RECV_B,
  KT_OP_ANY_COUNT
} kt_comm_op;

/* 'F', 'B', 'I', 'W' ('?' for communication ops) */
char kt_op_letter(kt_op op);
/* "F" .. "W", "SEND_F", "RECV_F", "SEND_B", "RECV_B" */
const char *kt_op_name(int op);

typedef enum {
  KT_PLACEMENT_LOOP,     /* stage s on rank s mod P (interleaved, looped-bfs) */
  KT_PLACEMENT_V,        /* s < P on rank s, else rank 2P-1-s (zbv, dualpipev) */
  KT_PLACEMENT_EXPLICIT, /* a stage -> rank table (imported schedules), V stages per rank */
  KT_PLACEMENT_COUNT
} kt_placement;

const char *kt_placement_name(kt_placement p); /* "loop" | "v" | "explicit" */

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
  /* Explicit placement only (NULL otherwise): stage -> rank and stage ->
   * chunk (its index among its rank's stages, in stage order), S entries;
   * rank*V + chunk -> stage, S entries. */
  int32_t *stage_rank, *stage_chunk, *chunk_stage;
} kt_schedule;

/* Sets up an empty schedule. EINVAL on out-of-range sizes, ENOMEM. An
 * explicit placement starts as loop until kt_schedule_set_stage_ranks. */
kt_status kt_schedule_init(kt_schedule *s, int p, int v, int m, kt_placement placement,
                           kt_error *err);
/* Makes the placement explicit: stage_rank[s] for every stage s < P*V. Every
 * rank must hold exactly V stages (EINVAL naming the first that does not). */
kt_status kt_schedule_set_stage_ranks(kt_schedule *s, const int *stage_rank, kt_error *err);
/* An empty schedule with src's P, V, placement (table included) and name and
 * the given M. */
kt_status kt_schedule_init_like(kt_schedule *s, const kt_schedule *src, int m, kt_error *err);
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

/* PyTorch has written the backward ops two ways. Current: B = full backward,
 * I = backward for inputs, W = backward for weights. Legacy: B = backward
 * for inputs, BW = full backward, W = backward for weights. */
typedef enum { KT_NOTATION_AUTO, KT_NOTATION_CURRENT, KT_NOTATION_LEGACY } kt_notation;
const char *kt_notation_name(kt_notation n); /* "auto" | "current" | "legacy" */

typedef struct {
  kt_notation notation; /* in: how to read B and BW (AUTO: detect) */
  /* out */
  kt_notation detected;      /* CURRENT or LEGACY: how the file was read */
  const char *detected_why;  /* one phrase: what decided it */
  size_t comm_actions;       /* SEND_F/RECV_F/SEND_B/RECV_B actions in the file */
  int placement_inferred;    /* 1 when no header pinned the placement */
  kt_schedule *lowered;      /* in, optional: receives the whole file, comms included,
                                when it has communication actions (else left empty) */
} kt_parse_opts;

/* Parses a schedule in CSV form (rows = ranks, cells = slots, empty = idle)
 * or text form (lines = ranks, whitespace-separated actions, "-" = idle,
 * '#' comment lines; an optional header "# kaiten p=4 v=1 m=8 placement=loop").
 * P is the number of rows; S = max stage + 1 and M = max micro-batch + 1
 * unless the header gives them; V = S / P. The placement is inferred from
 * where each stage's actions sit: loop, v, or an explicit stage -> rank
 * table. Communication actions (the lowered form) are accepted and left
 * out of the compute schedule. opts may be NULL (auto notation). */
kt_status kt_schedule_parse_opts(const char *text, kt_parse_opts *opts, kt_schedule *out,
                                 kt_error *err);
kt_status kt_schedule_parse(const char *text, kt_schedule *out, kt_error *err);
kt_status kt_schedule_parse_file(const char *path, kt_schedule *out, kt_error *err);
kt_status kt_schedule_parse_file_opts(const char *path, kt_parse_opts *opts, kt_schedule *out,
                                      kt_error *err);

/* CSV in PyTorch's current compute-only notation (also writes a lowered
 * schedule's communication actions). */
void kt_schedule_write_csv(const kt_schedule *s, kt_buf *b);
/* The same in the given notation (LEGACY: I as B, B as BW). */
void kt_schedule_write_csv_notation(const kt_schedule *s, kt_notation n, kt_buf *b);
void kt_schedule_write_text(const kt_schedule *s, kt_buf *b); /* with header line */

/* ---- lowered form: compute plus SEND/RECV ----------------------------------- */

/* Adds SEND_F/RECV_F/SEND_B/RECV_B where adjacent stages live on different
 * ranks. A SEND follows the action (or overlapped group) that produces the
 * data; RECVs are posted in the sender's order, each before the action that
 * consumes it, so each pair of ranks matches its messages in the same order
 * on both sides (as NCCL requires). The result is deadlock-free whenever the
 * compute schedule is. out is a fresh schedule (idle slots dropped). */
kt_status kt_schedule_lower(const kt_schedule *s, kt_schedule *out, kt_error *err);

/* Checks a lowered schedule: its compute actions form a valid schedule
 * (kt_schedule_validate); every cross-rank hand-over has exactly one SEND
 * after its producer and one RECV before its consumer, and no other comm
 * action exists; every pair of ranks sends and receives in the same order;
 * and running it cannot deadlock, with SENDs and RECVs posted without
 * blocking (isend/irecv) and a compute action waiting until its input was
 * sent. EINVALID_SCHEDULE / EDEADLOCK with the reason. */
kt_status kt_lowered_validate(const kt_schedule *lowered, kt_error *err);

/* ---- validation ----------------------------------------------------------- */

/* Checks that every (stage, mb) has exactly one F and one complete backward
 * (B, or I then W) on the rank that owns the stage, in a valid per-rank order,
 * and that the schedule cannot deadlock. EINVALID_SCHEDULE or EDEADLOCK with
 * the specific reason. */
kt_status kt_schedule_validate(const kt_schedule *s, kt_error *err);

#endif
