/* The GPT's documents on the session's side: their source, packed with the
 * token model (kaiten/packing.h), balanced's order searched for the run's
 * own generated schedule, and the attention share calibrated on the run's
 * second step and recorded in config.json (a resumed run keeps it). */
#include <string.h>

#include "train/session_internal.h"

static int balanced(const kt_session_params *p) {
  return p->packing && !strcmp(p->packing, "balanced");
}

/* Balanced's micro-batches run in the order the simulator finds shortest
 * on the run's own compute schedule (its K rounds with grad_accum K) and
 * memory limit, each micro-batch costing its load on the model's bytes per
 * stage and unit times (what build_schedule generates with). Seq1F1B's
 * chunks keep the packing's order. */
static kt_status docs_order(kt_session *s, kt_error *err) {
  const kt_session_params *p = &s->p;
  if (!balanced(p) || p->model.seq_chunks > 1) return KT_OK;
  kt_costs base; /* the model's bytes borrowed: never freed here */
  kt_costs_default(&base);
  if (s->mem.n_stages) {
    base.n_stages = s->mem.n_stages;
    base.stage_mem_act = s->mem.stage_mem_act, base.stage_mem_wgrad = s->mem.stage_mem_wgrad;
  }
  int K = p->grad_accum > 1 ? p->grad_accum : 1;
  kt_schedule rounds;
  kt_status st = kt_schedule_repeat(&s->sched, K, &rounds, err);
  if (st) return st;
  st = kt_data_docs_order(s->data, &rounds, s->gen_limit, &base, err);
  kt_schedule_free(&rounds);
  return st;
}

static double budget(const kt_session_params *p) {
  return (double)p->micro_batch * p->model.seq_len;
}

/* The attention share of the model's FLOPs for a micro-batch of one
 * document of b T tokens: 4 L C of 24 C^2 + 4 L C per token
 * (kt_model_unit_flops). */
static double flops(const kt_session_params *p) {
  return budget(p) / (6.0 * p->model.hidden + budget(p));
}

/* The token model's attention share starts at the model's FLOPs' (or the
 * one given for the whole run). */
kt_status kt__session_docs_open(kt_session *s, kt_error *err) {
  const kt_session_params *p = &s->p;
  double first = p->attn_share >= 0 && p->attn_from <= 0 ? p->attn_share : flops(p);
  kt_status st = kt_data_docs_source_create(p->data_path, p->model.seq_len, p->micro_batch,
                                            p->data_seed, p->doc_lengths, p->packing, first,
                                            p->model.seq_chunks, &s->data, err);
  if (!st && p->attn_share >= 0 && p->attn_from > 0)
    st = kt_data_docs_calibrate(s->data, p->attn_from, p->attn_share, err);
  int later = p->attn_share >= 0 && p->attn_from > 0;
  s->result.attn_share = later ? p->attn_share : first,
  s->result.attn_from = later ? p->attn_from : 0;
  return st ? st : docs_order(s, err);
}

kt_status kt__session_docs_step(kt_session *s, const kt_train_progress *tp, kt_error *err) {
  kt_session_params *p = &s->p;
  const kt_train_result *r = &s->result.train;
  /* under MPI each rank would fit its own measurements: the FLOPs' share stays */
  if (!s->data || !p->doc_lengths || !balanced(p) || p->attn_share >= 0 || p->use_mpi ||
      p->model.seq_chunks > 1 || tp->step != s->first_step + 1 || tp->skipped)
    return KT_OK;
  double a = kt_mb_cost_attn_fit(r->mb_costs, r->n_mb_costs, r->mb_cost_stages, (int)budget(p));
  int from = tp->step + KT_DATA_KEEPS; /* filled after this step was taken */
  kt_status st = a < 0 ? KT_OK : kt_data_docs_calibrate(s->data, from, a, err);
  if (st) return st;
  if (a < 0) /* the times do not fit: the FLOPs' share stays, recorded so a resumed run keeps it */
    a = flops(p), from = 0;
  else
    kt__session_note(s, KT_NOTE_CALIBRATED, "attn_share", from,
                     "documents: attention is %.2f of a full micro-batch's time as measured (the "
                     "model's FLOPs say %.2f); balanced packs and orders with it from step %d",
                     a, flops(p), from + 1);
  p->attn_share = a, p->attn_from = from;
  s->result.attn_share = a, s->result.attn_from = from;
  s->cfg.attn_share = a, s->cfg.attn_from = from, s->cfg.has_attn = 1;
  return s->rd ? kt_rundir_write_config(s->rd, &s->cfg, err) : KT_OK;
}
