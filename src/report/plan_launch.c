/* A planned configuration as the frameworks users run take it: the
 * Megatron-LM flags, torchtitan's [parallelism] settings and kaiten.torch's
 * call, with the planned partition in each (docs/planner.md#launch-settings). */
#include <stdio.h>
#include <string.h>

#include "kaiten/generators.h"
#include "kaiten/report.h"

/* PyTorch's schedule class for a kaiten schedule, NULL when torch has none
 * (torchtitan then reads kaiten's order from a CSV). */
static const char *torch_schedule(kt_gen_kind k) {
  switch (k) {
    case KT_SCHED_GPIPE: return "GPipe";
    case KT_SCHED_1F1B: return "1F1B";
    case KT_SCHED_INTERLEAVED: return "Interleaved1F1B";
    case KT_SCHED_LOOPED_BFS: return "LoopedBFS";
    case KT_SCHED_ZBV: return "ZBVZeroBubble";
    case KT_SCHED_DUALPIPEV: return "DualPipeV";
    case KT_SCHED_INTERLEAVED_ZB: return "InterleavedZeroBubble";
    default: return NULL;
  }
}

/* Stage j's layers in Megatron's layout notation: E (embedding), t (a
 * block, t*N for N), L (final norm, head and loss). */
static void megatron_stage(const kt_plan_model *m, int first, int count, kt_buf *b) {
  int blocks = 0;
  for (int i = first; i < first + count; i++) {
    kt_layer_kind k = m->layers[i].kind;
    if (k == KT_LAYER_BLOCK) {
      blocks++;
      continue;
    }
    if (blocks) kt_buf_printf(b, blocks > 1 ? "t*%d" : "t", blocks), blocks = 0;
    kt_buf_puts(b, k == KT_LAYER_EMBED ? "E" : "L");
  }
  if (blocks) kt_buf_printf(b, blocks > 1 ? "t*%d" : "t", blocks);
}

static void megatron(const kt_plan_model *m, const kt_plan_options *o, const kt_plan_result *r,
                     long B, kt_buf *b) {
  const kt_plan_config *g = &r->cfg;
  kt_buf_printf(b,
                "--tensor-model-parallel-size %d --pipeline-model-parallel-size %d "
                "--micro-batch-size %d --global-batch-size %ld --pipeline-model-parallel-layout \"",
                g->t, g->p, g->b, B);
  for (int j = 0, i = 0; j < g->p * g->v; i += r->partition[j], j++) {
    if (j) kt_buf_puts(b, "|");
    megatron_stage(m, i, r->partition[j], b);
  }
  kt_buf_puts(b, "\"");
  if (g->t > 1 && o->sequence_parallel) kt_buf_puts(b, " --sequence-parallel");
  if (g->recompute == KT_RECOMPUTE_SELECTIVE) kt_buf_puts(b, " --recompute-granularity selective");
  if (g->recompute == KT_RECOMPUTE_FULL)
    kt_buf_puts(
        b, " --recompute-granularity full --recompute-method uniform --recompute-num-layers 1");
  if (o->zero >= 1) kt_buf_puts(b, " --use-distributed-optimizer");
}

/* The module names of torchtitan's Llama for the stage's layers. */
static void titan_stage(const kt_plan_model *m, int first, int count, kt_buf *b) {
  kt_buf_puts(b, "[");
  for (int i = first, n = 0; i < first + count; i++) {
    kt_layer_kind k = m->layers[i].kind;
    const char *sep = n++ ? ", " : "";
    if (k == KT_LAYER_EMBED) kt_buf_printf(b, "%s\"tok_embeddings\"", sep);
    else if (k == KT_LAYER_HEAD) kt_buf_printf(b, "%s\"norm\", \"output\"", sep);
    else kt_buf_printf(b, "%s\"layers.%d\"", sep, i - 1);
  }
  kt_buf_puts(b, "]");
}

/* The kaiten command that writes the schedule's order for torch, on the
 * planned stage costs (an order generated for the costs it will run). */
static void csv_command(const kt_plan_result *r, kt_buf *b) {
  const kt_plan_config *g = &r->cfg;
  int S = g->p * g->v;
  kt_buf_printf(b, "kaiten sim --schedule %s -p %d -m %d", kt_gen_kind_name(g->schedule), g->p,
                g->m);
  if (g->v > 1) kt_buf_printf(b, " -v %d", g->v);
  kt_buf_puts(b, " --per-stage");
  const double *cost[] = {r->stage_f, r->stage_i, r->stage_w};
  const char *flag[] = {"tf", "tb", "tw"};
  for (int k = 0; k < 3; k++) {
    kt_buf_printf(b, " --%s ", flag[k]);
    for (int j = 0; j < S; j++) kt_buf_printf(b, "%s%.6g", j ? "," : "", cost[k][j]);
  }
  kt_buf_printf(b, " --format torch-csv -o %s.csv", kt_gen_kind_name(g->schedule));
}

static void torchtitan(const kt_plan_model *m, const kt_plan_options *o, const kt_plan_result *r,
                       long B, const char *indent, kt_buf *b) {
  const kt_plan_config *g = &r->cfg;
  const char *cls = torch_schedule(g->schedule);
  kt_buf_printf(b, "[parallelism]\n%spipeline_parallel_degree = %d\n", indent, g->p);
  if (cls) kt_buf_printf(b, "%spipeline_parallel_schedule = \"%s\"\n", indent, cls);
  else
    kt_buf_printf(b, "%spipeline_parallel_schedule_csv = \"%s.csv\"\n", indent,
                  kt_gen_kind_name(g->schedule));
  kt_buf_printf(b, "%spipeline_parallel_microbatch_size = %d\n%smodule_fqns_per_model_part = [",
                indent, g->b, indent);
  for (int j = 0, i = 0; j < g->p * g->v; i += r->partition[j], j++) {
    if (j) kt_buf_puts(b, ", ");
    titan_stage(m, i, r->partition[j], b);
  }
  kt_buf_printf(b, "]\n%stensor_parallel_degree = %d\n%sdata_parallel_%s_degree = %d\n", indent,
                g->t, indent, o->zero >= 1 ? "shard" : "replicate", g->d);
  /* a replica's round is local_batch_size: M micro-batches of b; the K
   * rounds of a step are torchtitan's gradient accumulation */
  kt_buf_printf(b, "%s[training]\n%sglobal_batch_size = %ld\n%slocal_batch_size = %d\n", indent,
                indent, B, indent, g->m * g->b);
  if (!cls) {
    kt_buf_printf(b, "%s# %s.csv: ", indent, kt_gen_kind_name(g->schedule));
    csv_command(r, b);
    kt_buf_puts(b, "\n");
  }
}

static void kaiten_torch(const kt_plan_result *r, kt_buf *b) {
  const kt_plan_config *g = &r->cfg;
  kt_buf_printf(b,
                "kaiten.torch.build_schedule(stages, n_microbatches=%d, loss_fn=loss_fn, "
                "kind=\"%s\")  # stages cut ",
                g->m, kt_gen_kind_name(g->schedule));
  for (int j = 0; j < g->p * g->v; j++) kt_buf_printf(b, "%s%d", j ? "," : "", r->partition[j]);
  kt_buf_printf(b, " (kaiten.torch.partition), %d micro-batch%s of %d, %d round%s a step", g->m,
                g->m == 1 ? "" : "es", g->b, g->k, g->k == 1 ? "" : "s");
}

void kt_render_plan_launch(const kt_plan_model *m, const kt_plan_options *o,
                           const kt_plan_result *r, long B, int json, kt_buf *out) {
  const kt_plan_config *g = &r->cfg;
  kt_buf mg, tt, kt;
  kt_buf_init(&mg), kt_buf_init(&tt), kt_buf_init(&kt);
  if (m->transformer) megatron(m, o, r, B, &mg);
  if (m->transformer) torchtitan(m, o, r, B, json ? "" : "    ", &tt);
  kaiten_torch(r, &kt);
  if (json) {
    kt_buf_puts(out, ",\"launch\":{\"megatron\":");
    kt_buf_json_string(out, m->transformer ? mg.data : "");
    kt_buf_puts(out, ",\"torchtitan\":");
    kt_buf_json_string(out, m->transformer ? tt.data : "");
    kt_buf_puts(out, ",\"kaiten_torch\":");
    kt_buf_json_string(out, kt.data);
    kt_buf_puts(out, "}");
  } else {
    kt_buf_printf(out, "\nlaunch settings for #1 (P=%d D=%d t=%d V=%d M=%d b=%d K=%d, %s):\n", g->p,
                  g->d, g->t, g->v, g->m, g->b, g->k, kt_gen_kind_name(g->schedule));
    if (m->transformer) {
      kt_buf_printf(out, "  Megatron-LM: %s\n", mg.data);
      if (g->k > 1)
        kt_buf_printf(out,
                      "    (Megatron-LM runs a step's %ld micro-batches as one round; "
                      "kaiten's plan is %d rounds of %d)\n",
                      (long)g->k * g->m, g->k, g->m);
      if (g->schedule != KT_SCHED_1F1B && g->schedule != KT_SCHED_INTERLEAVED)
        kt_buf_printf(out,
                      "    (Megatron-LM runs 1F1B, interleaved with V > 1: %s's order is "
                      "kaiten's, run it with torchtitan or kaiten.torch)\n",
                      kt_gen_kind_name(g->schedule));
      kt_buf_printf(out, "  torchtitan (Llama module names):\n    %s", tt.data);
    }
    kt_buf_printf(out, "  kaiten.torch: %s\n", kt.data);
  }
  kt_buf_free(&mg), kt_buf_free(&tt), kt_buf_free(&kt);
}
