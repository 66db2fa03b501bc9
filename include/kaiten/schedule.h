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

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { KT_OP_F, KT_OP_B, KT_OP_I, KT_OP_W, KT_OP_COUNT } kt_op;

/* Non-compute ops of PyTorch's lowered IR (torch 2.15). They appear only in
 * a lowered schedule (kt_schedule_lower) or a file read with them, never in a
 * compute schedule.
 *
 * Point-to-point: SEND_F on stage s sends F(s)'s output; its RECV_F is
 * written on the receiving stage s+1. SEND_B on stage s sends the input
 * gradient of B/I(s); its RECV_B is written on stage s-1. WAIT_SEND_F/B on the
 * sender's stage retires that send (the send is complete, its buffer free);
 * it blocks until the peer has posted the matching receive.
 *
 * Per stage, no micro-batch (text "0REDUCE_GRAD"): REDUCE_GRAD starts the
 * stage's gradient reduction across micro-batches (PyTorch scales the summed
 * gradients by 1/M there) and WAIT_REDUCE_GRAD completes it; UNSHARD/RESHARD
 * gather and free an FSDP-sharded stage's parameters. kaiten's executors
 * treat all four as free (zero cost, no effect). */
typedef enum {
  KT_OP_SEND_F = KT_OP_COUNT,
  KT_OP_RECV_F,
  KT_OP_SEND_B,
  KT_OP_RECV_B,
  KT_OP_WAIT_SEND_F,
  KT_OP_WAIT_SEND_B,
  KT_OP_REDUCE_GRAD,
  KT_OP_WAIT_REDUCE_GRAD,
  KT_OP_UNSHARD,
  KT_OP_RESHARD,
  KT_OP_ANY_COUNT
} kt_comm_op;

/* 'F', 'B', 'I', 'W' ('?' for communication ops) */
char kt_op_letter(kt_op op);
/* "F" .. "W", "SEND_F", ..., "UNSHARD", "RESHARD" */
const char *kt_op_name(int op);
/* 1 for ops written with a micro-batch (all but REDUCE_GRAD, WAIT_REDUCE_GRAD,
 * UNSHARD, RESHARD, which are per stage and store mb = -1). */
int kt_op_has_mb(int op);
/* 1 for SEND_F, RECV_F, SEND_B, RECV_B, WAIT_SEND_F, WAIT_SEND_B. Inline
 * (the simulator asks it per action); schedule.c emits the linkable copy. */
inline int kt_op_is_p2p(int op) { return op >= KT_OP_SEND_F && op <= KT_OP_WAIT_SEND_B; }

typedef enum {
  KT_PLACEMENT_LOOP,     /* stage s on rank s mod P (interleaved, looped-bfs) */
  KT_PLACEMENT_V,        /* s < P on rank s, else rank 2P-1-s (zbv, dualpipev) */
  KT_PLACEMENT_EXPLICIT, /* a stage -> rank table (imported schedules); ranks may hold
                            different numbers of stages */
  KT_PLACEMENT_COUNT
} kt_placement;

const char *kt_placement_name(kt_placement p); /* "loop" | "v" | "explicit" */
int kt_placement_from_name(const char *name);  /* the placement named, or -1 */

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
  /* v: chunk slots per rank, the most stages any rank holds. Every rank
   * holds exactly V stages (S = P*V) unless an explicit placement says
   * otherwise; then n_stages is S (0 means P*V). */
  int p, v, m;
  kt_placement placement;
  char name[32];          /* generator name, or "" for imported schedules */
  kt_rank_actions *ranks; /* p entries */
  /* Explicit placement only (NULL otherwise): stage -> rank and stage ->
   * chunk (its index among its rank's stages, in stage order), S entries
   * each; rank*V + chunk -> stage, P*V entries, -1 for a slot a rank with
   * fewer than V stages leaves empty. One allocation. */
  int32_t *stage_rank, *stage_chunk, *chunk_stage;
  int n_stages;
  /* A large schedule's lists side by side in one block on huge pages
   * (kt_schedule_reserve; NULL: every list its own allocation). A list
   * that outgrows its room there moves out (kt_schedule_room); whole sets
   * of lists change schedules only with their block (kt_schedule_swap_lists). */
  kt_action *block;
  size_t block_n;
} kt_schedule;

/* Sets up an empty schedule. EINVAL on out-of-range sizes, ENOMEM. An
 * explicit placement starts as loop until kt_schedule_set_stage_ranks. */
kt_status kt_schedule_init(kt_schedule *s, int p, int v, int m, kt_placement placement,
                           kt_error *err);
/* Makes the placement explicit: stage_rank[s] for every stage s < P*V. Every
 * rank must hold exactly V stages (EINVAL naming the first that does not). */
kt_status kt_schedule_set_stage_ranks(kt_schedule *s, const int *stage_rank, kt_error *err);
/* Makes the placement explicit with n_stages stages, stage_rank[s] for each:
 * ranks may hold different numbers of stages (PyTorch allows it), each at
 * least one. V becomes the most any rank holds. EINVAL naming the bad stage
 * or the empty rank. */
kt_status kt_schedule_set_stage_table(kt_schedule *s, int n_stages, const int *stage_rank,
                                      kt_error *err);
/* An empty schedule with src's P, V, placement (table included) and name and
 * the given M. */
kt_status kt_schedule_init_like(kt_schedule *s, const kt_schedule *src, int m, kt_error *err);
/* dst (uninitialised) becomes a deep copy of src: every rank's actions
 * with their flags, the placement and the name. ENOMEM (dst then holds
 * nothing to free). */
kt_status kt_schedule_copy(kt_schedule *dst, const kt_schedule *src, kt_error *err);
void kt_schedule_free(kt_schedule *s);
/* rounds copies of src back to back on every rank (micro-batch ids offset
 * by k*M, flags kept): a step of gradient accumulation, each round with its
 * own fill and drain. ENOMEM. */
kt_status kt_schedule_repeat(const kt_schedule *src, int rounds, kt_schedule *out, kt_error *err);
/* Room for per_rank actions on every rank's list. Empty lists of at least
 * 16 MiB in all are laid out in one block backed by huge pages (a large
 * simulation visits every rank's list in turns: 1F1B at P=1024 M=16384
 * has 0.4 GB of them). ENOMEM. */
kt_status kt_schedule_reserve(kt_schedule *s, size_t per_rank);
/* Room for need actions on rank's list (moved out of the block when it
 * lies there). ENOMEM. */
kt_status kt_schedule_room(kt_schedule *s, int rank, size_t need);
/* Exchanges every rank's list, and the blocks they lie in, between two
 * schedules of the same P. */
void kt_schedule_swap_lists(kt_schedule *a, kt_schedule *b);
/* Appends an action to rank's list. ENOMEM on allocation failure. */
kt_status kt_schedule_push(kt_schedule *s, int rank, int stage, kt_op op, int mb);
size_t kt_schedule_total_actions(const kt_schedule *s);

static inline int kt_schedule_stages(const kt_schedule *s) {
  return s->n_stages > 0 ? s->n_stages : s->p * s->v;
}
/* Stages rank holds (V unless the placement is uneven). */
int kt_rank_stage_count(const kt_schedule *s, int rank);
/* 1 when every rank holds the same number of stages. */
static inline int kt_schedule_even(const kt_schedule *s) {
  return kt_schedule_stages(s) == s->p * s->v;
}
/* Rank that owns stage under the schedule's placement. */
int kt_stage_rank(const kt_schedule *s, int stage);
/* Index of the stage among its rank's chunks (0 .. V-1). */
int kt_stage_chunk(const kt_schedule *s, int stage);
/* Stage held by rank as its chunk c; -1 for an empty slot (uneven placement). */
int kt_rank_chunk_stage(const kt_schedule *s, int rank, int chunk);
/* Point-to-point messages one step sends (activations + gradients across ranks). */
size_t kt_schedule_messages(const kt_schedule *s);
/* The same for a valid s (kt_schedule_validate: every stage runs one F and
 * one B or I per micro-batch on its own rank): M each way across every
 * stage boundary between two ranks, without a walk over its actions. */
size_t kt_schedule_messages_valid(const kt_schedule *s);
/* The placement as reports state it, into buf (n >= 32): "loop", "v", or
 * "explicit (stage:rank 0:0 1:1 ...)" with as many pairs as fit. Returns buf. */
const char *kt_schedule_placement_text(const kt_schedule *s, char *buf, size_t n);

/* ---- text and CSV forms ------------------------------------------------- */

/* Formats one action ("0F0"); returns the length written (buf >= 32 bytes). */
int kt_action_format(const kt_action *a, char *buf, size_t n);
/* The same into buf (KT_ACTION_TEXT bytes), returned: for messages that
 * name several actions. */
#define KT_ACTION_TEXT 40
const char *kt_action_text(const kt_action *a, char buf[KT_ACTION_TEXT]);
/* Parses one action from s[0..len). EPARSE with a reason naming the text. */
kt_status kt_action_parse(const char *s, size_t len, kt_action *out, kt_error *err);

/* PyTorch has written the backward ops two ways. Current: B = full backward,
 * I = backward for inputs, W = backward for weights. Legacy: B = backward
 * for inputs, BW = full backward, W = backward for weights. */
typedef enum { KT_NOTATION_AUTO, KT_NOTATION_CURRENT, KT_NOTATION_LEGACY } kt_notation;
const char *kt_notation_name(kt_notation n); /* "auto" | "current" | "legacy" */
int kt_notation_from_name(const char *name); /* the notation named, or -1 */

typedef struct {
  kt_notation notation; /* in: how to read B and BW (AUTO: detect) */
  /* out */
  kt_notation detected;     /* CURRENT or LEGACY: how the file was read */
  const char *detected_why; /* one phrase: what decided it */
  size_t comm_actions;      /* non-compute actions in the file (all kinds) */
  size_t p2p_actions;       /* of those: SEND/RECV/WAIT_SEND (the file is lowered) */
  int placement_inferred;   /* 1 when no header pinned the placement */
  kt_schedule *lowered;     /* in, optional: receives the whole file, comms included,
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
/* The same from a file, read by kt_read_text: at most KT_SCHEDULE_FILE_MAX
 * bytes, a line (one rank's actions) at most KT_SCHEDULE_LINE_MAX, no NUL
 * byte; a device, FIFO or pipe within the same limits. EINVAL naming the
 * path and the limit, EPARSE. */
#define KT_SCHEDULE_FILE_MAX (256LL << 20)
#define KT_SCHEDULE_LINE_MAX (64LL << 20)
kt_status kt_schedule_parse_file(const char *path, kt_schedule *out, kt_error *err);
kt_status kt_schedule_parse_file_opts(const char *path, kt_parse_opts *opts, kt_schedule *out,
                                      kt_error *err);

/* CSV in PyTorch's current compute-only notation (also writes a lowered
 * schedule's communication actions). */
void kt_schedule_write_csv(const kt_schedule *s, kt_buf *b);
/* The same in the given notation (LEGACY: I as B, B as BW). */
void kt_schedule_write_csv_notation(const kt_schedule *s, kt_notation n, kt_buf *b);
void kt_schedule_write_text(const kt_schedule *s, kt_buf *b); /* with header line */

/* ---- lowered form: compute plus communication ------------------------------ */

/* The lowered IR of a PyTorch release. 2.15 retires every send with a
 * WAIT_SEND and brackets each stage's gradient reduction with REDUCE_GRAD /
 * WAIT_REDUCE_GRAD; earlier releases have neither (their runtime waits for
 * sends at the end of the step and scales gradients itself), and their
 * action parser does not know WAIT_SEND or WAIT_REDUCE_GRAD. */
typedef enum { KT_TORCH_IR_2_15, KT_TORCH_IR_PRE_2_15 } kt_torch_ir;
/* "2.15" | "pre-2.15" */
const char *kt_torch_ir_name(kt_torch_ir ir);
/* A torch version ("2.15", "2.15.0", "2.9.1", "latest") to the IR it speaks.
 * EINVAL naming the text when it is not a version. */
kt_status kt_torch_ir_from_version(const char *text, kt_torch_ir *out, kt_error *err);

/* Adds the communication actions where adjacent stages live on different
 * ranks. A SEND follows the action (or overlapped group) that produces the
 * data; RECVs are posted in the sender's order, each before the action that
 * consumes it, so each pair of ranks matches its messages in the same order
 * on both sides (as NCCL requires). The result is deadlock-free whenever the
 * compute schedule is. out is a fresh schedule (idle slots dropped).
 * KT_TORCH_IR_2_15 also places, as torch 2.15's lowering does, one WAIT_SEND
 * per SEND (a forward send is retired right after the local backward of the
 * same stage and micro-batch, which proves the peer received it; backward
 * sends, and forward sends with no such backward, at the end of the list, in
 * send order) and REDUCE_GRAD then WAIT_REDUCE_GRAD for each stage right
 * after its M-th B or W (and that action's sends). */
kt_status kt_schedule_lower_ir(const kt_schedule *s, kt_torch_ir ir, kt_schedule *out,
                               kt_error *err);
/* kt_schedule_lower_ir(s, KT_TORCH_IR_2_15, out, err) */
kt_status kt_schedule_lower(const kt_schedule *s, kt_schedule *out, kt_error *err);

/* Checks a schedule with communication actions (a lowered file, or a
 * compute-only file that carries REDUCE_GRAD/UNSHARD actions, as PyTorch's
 * GPipe and 1F1B orders do):
 * - its compute actions form a valid schedule (kt_schedule_validate);
 * - every non-compute action sits on the rank that owns its stage;
 * - when the file has any SEND/RECV/WAIT_SEND: every cross-rank hand-over
 *   has exactly one SEND after its producer and one RECV before its
 *   consumer, and nothing else; each pair of ranks receives in the order it
 *   sends; each WAIT_SEND retires a send its rank issued before and not yet
 *   retired; under KT_TORCH_IR_2_15 every send is retired (as torch's
 *   _validate_send_waits demands);
 * - REDUCE_GRAD/WAIT_REDUCE_GRAD as torch pairs them (at most one reduction
 *   pending per rank, each wait for the pending stage, none left open), and
 *   beyond torch: none or every stage reduces, once, after its last backward
 *   (else the gradients PyTorch scales are incomplete);
 * - UNSHARD/RESHARD alternate per stage, start unsharded-free and end
 *   resharded, and a stage that uses them computes only while unsharded;
 * - running it cannot deadlock, with SENDs and RECVs posted without
 *   blocking (isend/irecv), a compute action waiting until its input was
 *   sent, and a WAIT_SEND until the peer has posted the matching RECV.
 * EINVALID_SCHEDULE / EDEADLOCK with the reason. */
kt_status kt_lowered_validate_ir(const kt_schedule *lowered, kt_torch_ir ir, kt_error *err);
/* kt_lowered_validate_ir(lowered, KT_TORCH_IR_2_15, err) */
kt_status kt_lowered_validate(const kt_schedule *lowered, kt_error *err);

/* ---- the rules: what an action waits for, what it publishes, what it
 * does to memory ---------------------------------------------------------
 *
 * The one definition every executor follows (the simulator, the validator,
 * the lowering and its checker, the list schedulers of the generators, the
 * planner's memory model and the runtime). A (stage, micro-batch) pair has
 * three results others wait for: its forward output (F), its input
 * gradient (BI, from B or I) and its split input gradient (I, which W
 * needs). */
typedef enum { KT_OUT_NONE = -1, KT_OUT_F, KT_OUT_BI, KT_OUT_I, KT_OUT_COUNT } kt_output;

/* The result a compute action waits for, and in *stage the stage that makes
 * it (the micro-batch is the action's): F(s) needs F(s-1); B or I(s) needs
 * B/I(s+1), or F(S-1) on the last stage; W(s) needs I(s). KT_OUT_NONE for
 * F of stage 0, which needs nothing. */
static inline kt_output kt_action_needs(int op, int stage, int n_stages, int *from_stage) {
  switch (op) {
    case KT_OP_F: *from_stage = stage - 1; return stage > 0 ? KT_OUT_F : KT_OUT_NONE;
    case KT_OP_B:
    case KT_OP_I:
      if (stage == n_stages - 1) return *from_stage = stage, KT_OUT_F;
      return *from_stage = stage + 1, KT_OUT_BI;
    case KT_OP_W: return *from_stage = stage, KT_OUT_I;
    default: return *from_stage = -1, KT_OUT_NONE;
  }
}

/* The results a finished compute action publishes, as bits 1 << kt_output:
 * F publishes F, B publishes BI, I publishes BI and I, W nothing. */
static inline unsigned kt_action_publishes(int op) {
  return op == KT_OP_F   ? 1u << KT_OUT_F
         : op == KT_OP_B ? 1u << KT_OUT_BI
         : op == KT_OP_I ? (1u << KT_OUT_BI) | (1u << KT_OUT_I)
                         : 0u;
}

/* The other stage that waits for a stage's result: F(s) feeds stage s+1,
 * BI(s) feeds stage s-1; -1 when the result stays on its stage (I, or F of
 * the last stage, BI of the first). Across ranks this is a message. */
static inline int kt_output_consumer(kt_output r, int stage, int n_stages) {
  if (r == KT_OUT_F) return stage + 1 < n_stages ? stage + 1 : -1;
  if (r == KT_OUT_BI) return stage > 0 ? stage - 1 : -1;
  return -1;
}

/* The message a point-to-point action (SEND, RECV, WAIT_SEND) of stage s
 * names: the result it carries, returned, and in *producer the stage that
 * made it: SEND_F/WAIT_SEND_F: F(s); RECV_F: F(s-1); SEND_B/WAIT_SEND_B:
 * BI(s); RECV_B: BI(s+1). The stage at the other end is the producer for a
 * RECV and kt_output_consumer for a send. KT_OUT_NONE for other ops. */
static inline kt_output kt_comm_message(int op, int stage, int *producer) {
  switch (op) {
    case KT_OP_SEND_F:
    case KT_OP_WAIT_SEND_F: return *producer = stage, KT_OUT_F;
    case KT_OP_RECV_F: return *producer = stage - 1, KT_OUT_F;
    case KT_OP_SEND_B:
    case KT_OP_WAIT_SEND_B: return *producer = stage, KT_OUT_BI;
    case KT_OP_RECV_B: return *producer = stage + 1, KT_OUT_BI;
    default: return *producer = -1, KT_OUT_NONE;
  }
}

/* What a finished compute action does to its rank's memory, given the
 * stage's M_B (activation an F keeps) and M_W (what an I keeps for its W):
 * F adds M_B, I turns M_B into M_W, W frees M_W, a full B frees M_B. */
static inline double kt_action_memory(int op, double mem_act, double mem_wgrad) {
  switch (op) {
    case KT_OP_F: return mem_act;
    case KT_OP_B: return -mem_act;
    case KT_OP_I: return mem_wgrad - mem_act;
    case KT_OP_W: return -mem_wgrad;
    default: return 0;
  }
}

/* Whether an op ends the backward of its pair (B, or W after I): the pair is
 * no longer in flight. */
static inline int kt_op_ends_pair(int op) { return op == KT_OP_B || op == KT_OP_W; }

/* A rank that cannot go on: the action it is at, what that waits for, and
 * on which rank. */
typedef struct {
  int rank;
  kt_action at, on;
  int on_rank;
} kt_blocked;
/* The one deadlock report every executor gives: EDEADLOCK "deadlock: rank r
 * waits at X for Y (rank q); ..." for the first six of n blocked ranks (a
 * backward waited for is written "sBj/sIj": either form unblocks it). */
kt_status kt_deadlock_fail(const kt_blocked *b, int n, kt_error *err);

/* ---- validation ----------------------------------------------------------- */

/* Checks that every (stage, mb) has exactly one F and one complete backward
 * (B, or I then W) on the rank that owns the stage, in a valid per-rank order,
 * and that the schedule cannot deadlock. EINVALID_SCHEDULE or EDEADLOCK with
 * the specific reason. */
kt_status kt_schedule_validate(const kt_schedule *s, kt_error *err);

#ifdef __cplusplus
}
#endif

#endif
