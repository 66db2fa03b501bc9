/* Schedule IR basics: construction, placement maps, message counts. */
#include "kaiten/schedule.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char op_letters[] = {'F', 'B', 'I', 'W'};
_Static_assert(sizeof op_letters == KT_OP_COUNT, "op letter table out of sync");

char kt_op_letter(kt_op op) { return (unsigned)op < KT_OP_COUNT ? op_letters[op] : '?'; }

static const char *const op_names[] = {
    "F",       "B",      "I",           "W",           "SEND_F",      "RECV_F",
    "SEND_B",  "RECV_B", "WAIT_SEND_F", "WAIT_SEND_B", "REDUCE_GRAD", "WAIT_REDUCE_GRAD",
    "UNSHARD", "RESHARD"};
_Static_assert(sizeof op_names / sizeof *op_names == KT_OP_ANY_COUNT, "op name table out of sync");

const char *kt_op_name(int op) { return (unsigned)op < KT_OP_ANY_COUNT ? op_names[op] : "?"; }

int kt_op_has_mb(int op) { return op < KT_OP_REDUCE_GRAD; }

extern inline int kt_op_is_p2p(int op); /* the external definition of the inline */

static const char *const placement_names[] = {"loop", "v", "explicit"};
_Static_assert(sizeof placement_names / sizeof *placement_names == KT_PLACEMENT_COUNT,
               "placement table out of sync");

const char *kt_placement_name(kt_placement p) {
  return (unsigned)p < KT_PLACEMENT_COUNT ? placement_names[p] : "?";
}

int kt_placement_from_name(const char *name) {
  return kt_name_index(name, placement_names, KT_PLACEMENT_COUNT);
}

const char *kt_schedule_placement_text(const kt_schedule *s, char *buf, size_t n) {
  if (s->placement != KT_PLACEMENT_EXPLICIT) {
    snprintf(buf, n, "%s", kt_placement_name(s->placement));
    return buf;
  }
  size_t k = (size_t)snprintf(buf, n, "explicit (stage:rank");
  int S = kt_schedule_stages(s), st = 0;
  for (; st < S && k + 24 < n; st++)
    k += (size_t)snprintf(buf + k, n - k, " %d:%d", st, kt_stage_rank(s, st));
  snprintf(buf + k, n - k, "%s)", st < S ? " ..." : "");
  return buf;
}

kt_status kt_schedule_init(kt_schedule *s, int p, int v, int m, kt_placement placement,
                           kt_error *err) {
  memset(s, 0, sizeof *s);
  if (p < 1 || p > KT_MAX_RANKS)
    return kt_fail(err, KT_EINVAL, "ranks P=%d out of range 1..%d", p, KT_MAX_RANKS);
  if (v < 1 || v > KT_MAX_CHUNKS)
    return kt_fail(err, KT_EINVAL, "chunks V=%d out of range 1..%d", v, KT_MAX_CHUNKS);
  if (m < 1 || m > KT_MAX_MICROBATCHES)
    return kt_fail(err, KT_EINVAL, "micro-batches M=%d out of range 1..%d", m, KT_MAX_MICROBATCHES);
  if ((unsigned)placement >= KT_PLACEMENT_COUNT)
    return kt_fail(err, KT_EINVAL, "unknown placement %d", (int)placement);
  if (placement == KT_PLACEMENT_V && v != 2)
    return kt_fail(err, KT_EINVAL, "v placement needs exactly 2 chunks per rank (got V=%d)", v);
  s->ranks = kt_calloc((size_t)p, sizeof *s->ranks);
  if (!s->ranks) return kt_fail(err, KT_ENOMEM, "out of memory");
  s->p = p;
  s->v = v;
  s->m = m;
  s->placement = placement == KT_PLACEMENT_EXPLICIT ? KT_PLACEMENT_LOOP : placement;
  return KT_OK;
}

/* Builds the three placement tables (one allocation: 2*S + P*V entries).
 * even: every rank must hold exactly s->v stages; otherwise V becomes the
 * most any rank holds and every rank needs at least one. */
static kt_status build_tables(kt_schedule *s, int S, const int *stage_rank, int even,
                              kt_error *err) {
  int *held = kt_calloc((size_t)s->p, sizeof *held);
  if (!held) return kt_fail(err, KT_ENOMEM, "out of memory");
  kt_status st = KT_OK;
  int v = 0;
  for (int stage = 0; stage < S && !st; stage++) {
    int r = stage_rank[stage];
    if (r < 0 || r >= s->p)
      st = kt_fail(err, KT_EINVAL, "stage %d is placed on rank %d, outside 0..%d", stage, r,
                   s->p - 1);
    else if (even && held[r] == s->v)
      st = kt_fail(err, KT_EINVAL,
                   "rank %d holds more than %d stages (stage %d is its %d-th); every rank must "
                   "hold the same number of stages",
                   r, s->v, stage, s->v + 1);
    else if (++held[r] > v) v = held[r];
  }
  for (int r = 0; r < s->p && !st; r++)
    if (held[r] == 0)
      st = kt_fail(err, KT_EINVAL, "rank %d holds no stage (%d stages on %d ranks)", r, S, s->p);
  if (!st && v > KT_MAX_CHUNKS)
    st = kt_fail(err, KT_EINVAL, "a rank holds %d stages, more than %d", v, KT_MAX_CHUNKS);
  int32_t *table = st ? NULL : kt_calloc(2 * (size_t)S + (size_t)s->p * v, sizeof *table);
  if (!st && !table) st = kt_fail(err, KT_ENOMEM, "out of memory");
  if (st) {
    free(held);
    return st;
  }
  int32_t *rank_of = table, *chunk_of = table + S, *stage_at = table + 2 * S;
  for (size_t i = 0; i < (size_t)s->p * v; i++) stage_at[i] = -1;
  memset(held, 0, (size_t)s->p * sizeof *held);
  for (int stage = 0; stage < S; stage++) {
    int r = stage_rank[stage];
    rank_of[stage] = r;
    chunk_of[stage] = held[r];
    stage_at[r * v + held[r]++] = stage;
  }
  free(held);
  free(s->stage_rank);
  s->stage_rank = rank_of;
  s->stage_chunk = chunk_of;
  s->chunk_stage = stage_at;
  s->placement = KT_PLACEMENT_EXPLICIT;
  s->v = v;
  s->n_stages = S == s->p * v ? 0 : S;
  return KT_OK;
}

kt_status kt_schedule_set_stage_ranks(kt_schedule *s, const int *stage_rank, kt_error *err) {
  return build_tables(s, s->p * s->v, stage_rank, 1, err);
}

kt_status kt_schedule_set_stage_table(kt_schedule *s, int n_stages, const int *stage_rank,
                                      kt_error *err) {
  if (n_stages < 1 || n_stages > s->p * KT_MAX_CHUNKS)
    return kt_fail(err, KT_EINVAL, "%d stages on %d ranks: expected 1..%d", n_stages, s->p,
                   s->p * KT_MAX_CHUNKS);
  return build_tables(s, n_stages, stage_rank, 0, err);
}

int kt_rank_stage_count(const kt_schedule *s, int rank) {
  if (kt_schedule_even(s)) return s->v;
  int n = 0;
  for (int c = 0; c < s->v; c++) n += s->chunk_stage[rank * s->v + c] >= 0;
  return n;
}

kt_status kt_schedule_init_like(kt_schedule *s, const kt_schedule *src, int m, kt_error *err) {
  kt_status st = kt_schedule_init(s, src->p, src->v, m, src->placement, err);
  if (st) return st;
  memcpy(s->name, src->name, sizeof s->name);
  if (src->placement == KT_PLACEMENT_EXPLICIT) { /* the three tables, already checked */
    size_t S = (size_t)kt_schedule_stages(src), n = 2 * S + (size_t)src->p * src->v;
    int32_t *table = kt_calloc(n, sizeof *table);
    if (!table) {
      kt_schedule_free(s);
      return kt_fail(err, KT_ENOMEM, "out of memory");
    }
    memcpy(table, src->stage_rank, n * sizeof *table);
    s->stage_rank = table;
    s->stage_chunk = table + S;
    s->chunk_stage = table + 2 * S;
    s->placement = KT_PLACEMENT_EXPLICIT;
    s->n_stages = src->n_stages;
  }
  return st;
}

kt_status kt_schedule_repeat(const kt_schedule *src, int rounds, kt_schedule *out, kt_error *err) {
  kt_status st = kt_schedule_init_like(out, src, src->m * rounds, err);
  if (st) return st;
  for (int k = 0; k < rounds; k++)
    for (int r = 0; r < src->p; r++)
      for (size_t i = 0; i < src->ranks[r].n; i++) {
        const kt_action *a = &src->ranks[r].actions[i];
        if (kt_schedule_push(out, r, a->stage, (kt_op)a->op, a->mb + k * src->m)) {
          kt_schedule_free(out);
          return kt_fail(err, KT_ENOMEM, "out of memory");
        }
        out->ranks[r].actions[out->ranks[r].n - 1].flags = a->flags;
      }
  return KT_OK;
}

kt_status kt_schedule_copy(kt_schedule *dst, const kt_schedule *src, kt_error *err) {
  kt_status st = kt_schedule_init_like(dst, src, src->m, err);
  if (st) return st;
  for (int r = 0; r < src->p; r++) {
    size_t n = src->ranks[r].n;
    dst->ranks[r].actions = kt_calloc(n ? n : 1, sizeof(kt_action));
    if (!dst->ranks[r].actions) {
      kt_schedule_free(dst);
      return kt_fail(err, KT_ENOMEM, "out of memory");
    }
    if (n) memcpy(dst->ranks[r].actions, src->ranks[r].actions, n * sizeof(kt_action));
    dst->ranks[r].n = dst->ranks[r].cap = n;
  }
  return KT_OK;
}

/* Whether a list lies in s's block (and is freed with it). */
static int in_block(const kt_schedule *s, const kt_action *a) {
  uintptr_t at = (uintptr_t)a, lo = (uintptr_t)s->block;
  return s->block && at >= lo && at < lo + s->block_n * sizeof *a;
}

void kt_schedule_free(kt_schedule *s) {
  if (s->ranks)
    for (int r = 0; r < s->p; r++)
      if (!in_block(s, s->ranks[r].actions)) free(s->ranks[r].actions);
  free(s->ranks);
  free(s->block);
  free(s->stage_rank); /* one allocation holds all three tables */
  memset(s, 0, sizeof *s);
}

/* Lists from which they share one block on huge pages, in bytes. */
#define BLOCK_BYTES ((size_t)16 << 20)

kt_status kt_schedule_reserve(kt_schedule *s, size_t per_rank) {
  const size_t huge = (size_t)2 << 20;
  int fresh = !s->block && s->p > 0 && per_rank <= SIZE_MAX / sizeof(kt_action) / (size_t)s->p;
  for (int r = 0; fresh && r < s->p; r++) fresh = s->ranks[r].n == 0;
  size_t bytes = fresh ? (size_t)s->p * per_rank * sizeof(kt_action) : 0;
  kt_action *block =
      bytes >= BLOCK_BYTES ? aligned_alloc(huge, (bytes + huge - 1) / huge * huge) : NULL;
  if (block) { /* its pages are first touched where the lists are written */
    kt_advise_huge(block, bytes);
    for (int r = 0; r < s->p; r++) {
      free(s->ranks[r].actions);
      s->ranks[r].actions = block + (size_t)r * per_rank, s->ranks[r].cap = per_rank;
    }
    s->block = block, s->block_n = (size_t)s->p * per_rank;
    return KT_OK;
  }
  for (int r = 0; r < s->p; r++)
    if (kt_schedule_room(s, r, per_rank)) return KT_ENOMEM;
  return KT_OK;
}

kt_status kt_schedule_room(kt_schedule *s, int rank, size_t need) {
  kt_rank_actions *ra = &s->ranks[rank];
  if (need <= ra->cap) return KT_OK;
  if (!in_block(s, ra->actions))
    return kt_grow((void **)&ra->actions, &ra->cap, need, sizeof(kt_action)) ? KT_ENOMEM : KT_OK;
  size_t cap = ra->cap > need / 2 ? 2 * ra->cap : need;
  kt_action *own = kt_calloc(cap, sizeof *own);
  if (!own) return KT_ENOMEM;
  memcpy(own, ra->actions, ra->n * sizeof *own);
  ra->actions = own, ra->cap = cap;
  return KT_OK;
}

void kt_schedule_swap_lists(kt_schedule *a, kt_schedule *b) {
  for (int r = 0; r < a->p; r++) {
    kt_rank_actions tmp = a->ranks[r];
    a->ranks[r] = b->ranks[r];
    b->ranks[r] = tmp;
  }
  kt_action *block = a->block;
  size_t n = a->block_n;
  a->block = b->block, a->block_n = b->block_n;
  b->block = block, b->block_n = n;
}

kt_status kt_schedule_push(kt_schedule *s, int rank, int stage, kt_op op, int mb) {
  kt_rank_actions *ra = &s->ranks[rank];
  if (ra->n == ra->cap && kt_schedule_room(s, rank, ra->n + 1)) return KT_ENOMEM;
  kt_action a = {.stage = stage, .mb = mb, .op = (uint8_t)op, .flags = 0, .idle_before = 0};
  ra->actions[ra->n++] = a;
  return KT_OK;
}

size_t kt_schedule_total_actions(const kt_schedule *s) {
  size_t n = 0;
  for (int r = 0; r < s->p; r++) n += s->ranks[r].n;
  return n;
}

int kt_stage_rank(const kt_schedule *s, int stage) {
  if (s->placement == KT_PLACEMENT_EXPLICIT) return s->stage_rank[stage];
  if (s->placement == KT_PLACEMENT_V) return stage < s->p ? stage : 2 * s->p - 1 - stage;
  return stage % s->p;
}

int kt_stage_chunk(const kt_schedule *s, int stage) {
  if (s->placement == KT_PLACEMENT_EXPLICIT) return s->stage_chunk[stage];
  return stage / s->p;
}

int kt_rank_chunk_stage(const kt_schedule *s, int rank, int chunk) {
  if (s->placement == KT_PLACEMENT_EXPLICIT) return s->chunk_stage[rank * s->v + chunk];
  if (s->placement == KT_PLACEMENT_V) return chunk == 0 ? rank : 2 * s->p - 1 - rank;
  return chunk * s->p + rank;
}

size_t kt_schedule_messages(const kt_schedule *s) {
  int S = kt_schedule_stages(s);
  size_t n = 0;
  for (int r = 0; r < s->p; r++) {
    /* whether the stage's F and backward send: looked up when the stage
     * changes (a rank's actions stay on one of its few stages for a while) */
    int stage = -1, f_sends = 0, b_sends = 0;
    for (size_t i = 0; i < s->ranks[r].n; i++) {
      const kt_action *a = &s->ranks[r].actions[i];
      if (a->stage != stage) {
        stage = a->stage;
        f_sends = stage + 1 < S && kt_stage_rank(s, stage + 1) != r;
        b_sends = stage > 0 && kt_stage_rank(s, stage - 1) != r;
      }
      n += (a->op == KT_OP_F && f_sends) + ((a->op == KT_OP_B || a->op == KT_OP_I) && b_sends);
    }
  }
  return n;
}

size_t kt_schedule_messages_valid(const kt_schedule *s) {
  int S = kt_schedule_stages(s);
  size_t crossings = 0; /* stage boundaries between two ranks */
  for (int stage = 0; stage + 1 < S; stage++)
    crossings += kt_stage_rank(s, stage) != kt_stage_rank(s, stage + 1);
  return 2 * crossings * (size_t)s->m;
}
