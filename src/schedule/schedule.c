/* Schedule IR basics: construction, placement maps, message counts. */
#include "kaiten/schedule.h"

#include <stdlib.h>
#include <string.h>

static const char op_letters[] = {'F', 'B', 'I', 'W'};
_Static_assert(sizeof op_letters == KT_OP_COUNT, "op letter table out of sync");

char kt_op_letter(kt_op op) { return (unsigned)op < KT_OP_COUNT ? op_letters[op] : '?'; }

static const char *const placement_names[] = {"loop", "v"};
_Static_assert(sizeof placement_names / sizeof *placement_names == KT_PLACEMENT_COUNT,
               "placement table out of sync");

const char *kt_placement_name(kt_placement p) {
  return (unsigned)p < KT_PLACEMENT_COUNT ? placement_names[p] : "?";
}

kt_status kt_schedule_init(kt_schedule *s, int p, int v, int m, kt_placement placement,
                           kt_error *err) {
  memset(s, 0, sizeof *s);
  if (p < 1 || p > KT_MAX_RANKS)
    return kt_fail(err, KT_EINVAL, "ranks P=%d out of range 1..%d", p, KT_MAX_RANKS);
  if (v < 1 || v > KT_MAX_CHUNKS)
    return kt_fail(err, KT_EINVAL, "chunks V=%d out of range 1..%d", v, KT_MAX_CHUNKS);
  if (m < 1 || m > KT_MAX_MICROBATCHES)
    return kt_fail(err, KT_EINVAL, "micro-batches M=%d out of range 1..%d", m,
                   KT_MAX_MICROBATCHES);
  if ((unsigned)placement >= KT_PLACEMENT_COUNT)
    return kt_fail(err, KT_EINVAL, "unknown placement %d", (int)placement);
  if (placement == KT_PLACEMENT_V && v != 2)
    return kt_fail(err, KT_EINVAL, "v placement needs exactly 2 chunks per rank (got V=%d)", v);
  s->ranks = kt_calloc((size_t)p, sizeof *s->ranks);
  if (!s->ranks) return kt_fail(err, KT_ENOMEM, "out of memory");
  s->p = p;
  s->v = v;
  s->m = m;
  s->placement = placement;
  return KT_OK;
}

void kt_schedule_free(kt_schedule *s) {
  if (s->ranks)
    for (int r = 0; r < s->p; r++) free(s->ranks[r].actions);
  free(s->ranks);
  memset(s, 0, sizeof *s);
}

kt_status kt_schedule_push(kt_schedule *s, int rank, int stage, kt_op op, int mb) {
  kt_rank_actions *ra = &s->ranks[rank];
  if (kt_grow((void **)&ra->actions, &ra->cap, ra->n + 1, sizeof(kt_action)) != 0)
    return KT_ENOMEM;
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
  if (s->placement == KT_PLACEMENT_V) return stage < s->p ? stage : 2 * s->p - 1 - stage;
  return stage % s->p;
}

int kt_stage_chunk(const kt_schedule *s, int stage) { return stage / s->p; }

int kt_rank_chunk_stage(const kt_schedule *s, int rank, int chunk) {
  if (s->placement == KT_PLACEMENT_V) return chunk == 0 ? rank : 2 * s->p - 1 - rank;
  return chunk * s->p + rank;
}

size_t kt_schedule_messages(const kt_schedule *s) {
  int S = kt_schedule_stages(s);
  size_t n = 0;
  for (int r = 0; r < s->p; r++)
    for (size_t i = 0; i < s->ranks[r].n; i++) {
      const kt_action *a = &s->ranks[r].actions[i];
      if (a->op == KT_OP_F && a->stage + 1 < S && kt_stage_rank(s, a->stage + 1) != r) n++;
      if ((a->op == KT_OP_B || a->op == KT_OP_I) && a->stage > 0 &&
          kt_stage_rank(s, a->stage - 1) != r)
        n++;
    }
  return n;
}
