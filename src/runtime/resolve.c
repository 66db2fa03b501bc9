/* A rank's program resolved once (before its first step): for every action
 * the chunk it runs on, where its input comes from and where its result
 * goes (this rank, or a peer's world rank), the message tags (round 0's;
 * kt_tag_round adds the round) and the buffer slots. The worker reads
 * these and asks the schedule nothing while it runs. */
#include <stdlib.h>

#include "runtime/internal.h"

/* A tensor slot of this rank: its chunk, the micro-batch, F (0) or BI (1). */
static size_t slot_of(const kt_runtime *rt, int chunk, int mb, kt_output r) {
  return ((size_t)chunk * (size_t)rt->M + (size_t)mb) * 2 + (r == KT_OUT_F ? 0 : 1);
}

static size_t pair_of(const kt_runtime *rt, int stage, int mb) {
  return (size_t)stage * (size_t)rt->M + (size_t)mb;
}

static uint64_t tag_of(kt_output r, int stage, int mb) {
  return kt_tag(r == KT_OUT_F ? KT_TAG_ACT : KT_TAG_GRAD, stage, mb, 0);
}

/* What action a of this rank needs and makes. */
static void resolve(const kt__worker *w, const kt_action *a, kt__resolved *x) {
  const kt_runtime *rt = w->rt;
  int S = rt->S, mb = a->mb;
  *x = (kt__resolved){.chunk = kt_stage_chunk(&rt->sched_copy, a->stage),
                      .input = KT_OUT_NONE,
                      .output = KT_OUT_NONE,
                      .in_peer = -1,
                      .out_peer = -1};
  if (x->chunk < 0) x->chunk = 0; /* a per-stage action of a stage elsewhere: no tensor */
  int from = -1;
  if (a->op < KT_OP_COUNT) {
    kt_output need = kt_action_needs(a->op, a->stage, S, &from);
    if (need == KT_OUT_F || need == KT_OUT_BI) x->input = need;
    if (a->op == KT_OP_F && a->stage + 1 < S) x->output = KT_OUT_F;
    if ((a->op == KT_OP_I || a->op == KT_OP_B) && a->stage > 0) x->output = KT_OUT_BI;
  } else if (a->op == KT_OP_RECV_F || a->op == KT_OP_RECV_B) {
    x->input = a->op == KT_OP_RECV_F ? KT_OUT_F : KT_OUT_BI;
    from = x->input == KT_OUT_F ? a->stage - 1 : a->stage + 1;
  } else if (a->op == KT_OP_SEND_F || a->op == KT_OP_SEND_B) {
    x->output = a->op == KT_OP_SEND_F ? KT_OUT_F : KT_OUT_BI;
  }
  if (x->input != KT_OUT_NONE && from != a->stage) {
    x->in_peer = kt__stage_world_rank(rt, from, w->replica);
    x->in_local = x->in_peer == w->world_rank;
    x->in_tag = tag_of(x->input, a->stage, mb);
    x->in_slot = slot_of(rt, x->chunk, mb, x->input);
    x->in_pair = pair_of(rt, a->stage, mb);
  } else {
    x->input = KT_OUT_NONE;
  }
  if (x->output != KT_OUT_NONE) {
    int to = kt_output_consumer(x->output, a->stage, S);
    x->out_peer = kt__stage_world_rank(rt, to, w->replica);
    x->out_local = x->out_peer == w->world_rank;
    x->out_tag = tag_of(x->output, to, mb);
    x->out_slot = slot_of(rt, x->chunk, mb, x->output);
    x->out_pair = pair_of(rt, to, mb);
  }
}

kt_status kt__worker_resolve(kt__worker *w, kt_error *err) {
  const kt_rank_actions *ra = &w->rt->program.ranks[w->stage_rank];
  free(w->plan);
  w->plan = kt_calloc(ra->n ? ra->n : 1, sizeof *w->plan);
  if (!w->plan) return kt_fail(err, KT_ENOMEM, "out of memory");
  for (size_t i = 0; i < ra->n; i++) resolve(w, &ra->actions[i], &w->plan[i]);
  return KT_OK;
}
