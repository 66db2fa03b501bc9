/* The GPT on packed documents of varying length: attention never crosses a
 * document (a packed micro-batch's loss and gradient are the sums of its
 * documents' alone), positions restart per document, the step's loss is
 * the mean over its real tokens, every schedule's gradients equal the
 * unpipelined model's bit for bit on the same packed batch (a tied
 * embedding's to float rounding: its two gradients meet in another order;
 * fifo and
 * balanced packing, with and without recompute), balanced packing keeps the
 * documents and evens the micro-batches' load, balanced's order searched
 * for the run's pipeline runs the same micro-batches in a shorter simulated
 * step, and bad layouts are refused. */
#include "check.h"
#include "kaiten/generators.h"
#include "kaiten/model_impl.h"
#include "kaiten/packing.h"
#include "kaiten/train.h"

#define M 4
#define B 2
#define T 16
#define ATTN 0.5 /* the packing's attention share (kaiten/packing.h) */

static kt_model_config gpt(int tie, int recompute) {
  kt_model_config m;
  kt_model_config_default(&m, KT_MODEL_GPT);
  m.layers = 2;
  m.hidden = 16;
  m.heads = 2;
  m.seq_len = T;
  m.tie_embeddings = tie;
  m.recompute = recompute;
  m.seed = 5;
  return m;
}

/* One step's packed micro-batches from the documents source; with order_p
 * > 0 balanced's order is searched for 1F1B at that P (kt_data_docs_order:
 * unit stage costs). */
static kt_data_source *packed_for(const char *packing, int step, int order_p, kt_microbatch *mbs) {
  kt_data_source *src;
  kt_error err;
  if (kt_data_docs_source_create(NULL, T, B, 7, "lognormal:1:2:40", packing, ATTN, 1, &src, &err)) {
    CHECK_MSG(0, "docs source: %s", err.msg);
    return NULL;
  }
  kt_costs base;
  kt_costs_default(&base);
  kt_gen_params gp = {.p = order_p, .m = M};
  kt_schedule s;
  kt_status st = KT_OK;
  if (order_p > 0 && !(st = kt_generate(KT_SCHED_1F1B, &gp, &s, &err))) {
    st = kt_data_docs_order(src, &s, 0, &base, &err);
    kt_schedule_free(&s);
  }
  if (!st) st = src->fill(src, 0, step, 1, 1, M, B, mbs, &err);
  if (st) {
    CHECK_MSG(0, "fill: %s", err.msg);
    src->destroy(src);
    return NULL;
  }
  return src;
}

static kt_data_source *packed(const char *packing, int step, kt_microbatch *mbs) {
  return packed_for(packing, step, 0, mbs);
}

static size_t gather(kt_runtime *rt, float *out) {
  int S = kt_schedule_stages(kt_runtime_config_of(rt)->schedule);
  size_t n = 0;
  for (int s = 0; s < S; s++) {
    kt_chunk *c = kt_runtime_chunk(rt, s, 0);
    memcpy(out + n, c->grads, c->n_params * sizeof(float));
    n += c->n_params;
  }
  return n;
}

static int step_grads(const kt_schedule *s, kt_model_config m, const kt_microbatch *mbs, float *out,
                      size_t *n, double *loss) {
  kt_runtime_config rc;
  kt_runtime_config_default(&rc);
  rc.schedule = s;
  rc.micro_batch = B;
  rc.model = m;
  kt_runtime *rt;
  kt_error err;
  if (kt_runtime_create_threads(&rc, &rt, &err)) {
    CHECK_MSG(0, "%s: %s", s->name, err.msg);
    return -1;
  }
  kt_step_result res;
  int rcode = kt_runtime_step(rt, 0, mbs, 0, &res, &err) ? -1 : 0;
  CHECK_MSG(rcode == 0, "%s P=%d: %s", s->name, s->p, err.msg);
  if (!rcode) *n = gather(rt, out), *loss = res.loss;
  kt_runtime_destroy(rt);
  return rcode;
}

/* Every schedule at P = 2 and 4 equals P = 1 on the same packed batch:
 * the same micro-batches accumulate in the same order, so bit for bit. */
static void equivalence(const char *packing, int order_p) {
  kt_microbatch mbs[M];
  kt_data_source *src = packed_for(packing, 0, order_p, mbs);
  if (!src) return;
  static float ref[100000], got[100000];
  int tested = 0;
  for (int tie = 0; tie < 2; tie++)
    for (int rec = 0; rec < 2; rec++) {
      kt_schedule one;
      kt_error err;
      kt_gen_params op = {.p = 1, .m = M};
      if (kt_generate(KT_SCHED_GPIPE, &op, &one, &err)) continue;
      size_t nref = 0, n = 0;
      double ref_loss = 0, loss = 0;
      int rc = step_grads(&one, gpt(tie, 0), mbs, ref, &nref, &ref_loss);
      kt_schedule_free(&one);
      if (rc) continue;
      kt_gen_kind kinds[] = {KT_SCHED_1F1B, KT_SCHED_GPIPE, KT_SCHED_ZB_H1, KT_SCHED_INTERLEAVED};
      for (int k = 0; k < 4; k++)
        for (int p = 2; p <= 4; p += 2) {
          kt_schedule s;
          kt_gen_params gp = {.p = p, .m = M};
          if (kinds[k] == KT_SCHED_INTERLEAVED && p == 4) continue; /* 8 stages > 4 units */
          if (kt_generate(kinds[k], &gp, &s, &err)) continue;
          if (!step_grads(&s, gpt(tie, rec), mbs, got, &n, &loss)) {
            tested++;
            CHECK_EQ_INT(n, nref);
            /* a tied embedding's two gradients meet in another order when
             * the head sits on another stage: equal to float rounding */
            int same = n == nref && (tie ? kt_test_rel_err(got, ref, n) < 1e-6
                                         : !memcmp(got, ref, n * sizeof(float)));
            CHECK_MSG(same, "%s %s P=%d tie=%d recompute=%d: gradients differ (rel err %.3g)",
                      packing, s.name, p, tie, rec, kt_test_rel_err(got, ref, n));
            CHECK_MSG(loss == ref_loss, "%s %s P=%d loss %.17g vs %.17g", packing, s.name, p, loss,
                      ref_loss);
          }
          kt_schedule_free(&s);
        }
    }
  CHECK(tested >= 24);
  src->destroy(src);
}

/* Loss (summed, scale 1) and gradient of one micro-batch on one chunk. */
static double forward_backward(kt_chunk *c, const kt_microbatch *mb) {
  kt_error err;
  double loss = NAN;
  kt_status st = kt_chunk_forward(c, 0, mb, NULL, NULL, &loss, &err);
  if (!st) st = kt_chunk_backward_input(c, 0, mb, NULL, NULL, &err);
  if (!st) st = kt_chunk_backward_weight(c, 0, &err);
  CHECK_MSG(st == KT_OK, "%s", err.msg);
  return loss;
}

/* A packed micro-batch is its documents side by side: its loss and gradient
 * equal the sums over each document run alone (attention leaking across
 * documents, or positions not restarting, would change both). The step
 * loss is the mean over the step's real tokens. */
static void block_diagonal(void) {
  kt_microbatch mbs[M];
  kt_data_source *src = packed("fifo", 3, mbs);
  if (!src) return;
  kt_model_config m = gpt(0, 0);
  kt_chunk *c;
  kt_error err;
  if (kt_chunk_create(&m, 0, kt_model_units(&m), B, 1, &c, &err)) {
    CHECK_MSG(0, "%s", err.msg);
    src->destroy(src);
    return;
  }
  size_t np = c->n_params;
  float *whole = calloc(np, sizeof(float)), *parts = calloc(np, sizeof(float));
  double step_sum = 0;
  int step_tokens = 0, docs_seen = 0;
  for (int j = 0; j < M; j++) {
    kt_microbatch mb = mbs[j];
    CHECK(mb.n_tokens > 0 && mb.n_tokens <= B * T && mb.pos && mb.pos[0] == 0);
    step_tokens += mb.n_tokens;
    mb.loss_scale = 1; /* summed */
    kt_chunk_zero_grad(c);
    double loss = forward_backward(c, &mb);
    memcpy(whole, c->grads, np * sizeof(float));
    step_sum += loss;
    kt_chunk_zero_grad(c);
    double sum = 0;
    int docs = 0;
    for (int i = 0; i < mb.n_tokens; docs++) {
      int L = 1;
      while (i + L < mb.n_tokens && mb.pos[i + L]) L++;
      kt_microbatch one = {.b = B,
                           .tokens = mb.tokens + i,
                           .targets = mb.targets + i,
                           .n_tokens = L,
                           .pos = mb.pos + i,
                           .loss_scale = 1};
      sum += forward_backward(c, &one);
      i += L;
    }
    memcpy(parts, c->grads, np * sizeof(float));
    docs_seen += docs;
    CHECK_MSG(fabs(sum - loss) <= 1e-4 * fabs(loss),
              "mb %d (%d documents): packed loss %.9g, "
              "documents alone %.9g",
              j, docs, loss, sum);
    double e = kt_test_rel_err(whole, parts, np);
    CHECK_MSG(e < 1e-5, "mb %d: packed gradient vs documents alone rel err %.3g", j, e);
  }
  CHECK_MSG(docs_seen > M, "%d documents in %d micro-batches", docs_seen, M);
  /* the runtime's step loss: the mean over the step's real tokens */
  kt_schedule s;
  kt_gen_params gp = {.p = 2, .m = M};
  static float g[100000];
  size_t n;
  double loss = 0;
  if (!kt_generate(KT_SCHED_1F1B, &gp, &s, &err)) {
    if (!step_grads(&s, m, mbs, g, &n, &loss))
      CHECK_NEAR(loss, step_sum / step_tokens, 1e-5 * step_sum / step_tokens);
    kt_schedule_free(&s);
  }
  free(whole);
  free(parts);
  kt_chunk_destroy(c);
  src->destroy(src);
}

/* Load of a micro-batch as the balanced packing counts it (kt_token_model). */
static double work(const kt_microbatch *mb) {
  double sq = 0, budget = B * T;
  for (int i = 0; i < mb->n_tokens;) {
    int L = 1;
    while (i + L < mb->n_tokens && mb->pos[i + L]) L++;
    sq += (double)L * L;
    i += L;
  }
  return (1 - ATTN) * mb->n_tokens / budget + ATTN * sq / (budget * budget);
}

/* Balanced packing holds the documents fifo holds (all its tokens, in
 * budget, on these steps) and never leaves the heaviest micro-batch
 * heavier. */
static void packing(void) {
  int better = 0;
  for (int step = 0; step < 8; step++) {
    kt_microbatch f[M], b[M];
    kt_data_source *sf = packed("fifo", step, f), *sb = packed("balanced", step, b);
    if (!sf || !sb) {
      if (sf) sf->destroy(sf);
      if (sb) sb->destroy(sb);
      return;
    }
    int tf = 0, tb = 0;
    double wf = 0, wb = 0;
    for (int j = 0; j < M; j++) {
      tf += f[j].n_tokens, tb += b[j].n_tokens;
      CHECK(b[j].n_tokens >= 1 && b[j].n_tokens <= B * T);
      wf = fmax(wf, work(&f[j])), wb = fmax(wb, work(&b[j]));
    }
    CHECK_MSG(tb == tf, "step %d: balanced holds %d tokens, fifo %d", step, tb, tf);
    CHECK_MSG(wb <= wf + 1e-9, "step %d: balanced heaviest %.3f > fifo's %.3f", step, wb, wf);
    better += wb < wf;
    sf->destroy(sf);
    sb->destroy(sb);
  }
  CHECK_MSG(better >= 4, "balanced lightened the heaviest micro-batch on %d of 8 steps", better);
}

/* Tokens and the sum of squared document lengths a micro-batch holds. */
static void held(const kt_microbatch *mb, int *tokens, double *sq) {
  *tokens = mb->n_tokens, *sq = 0;
  for (int i = 0; i < mb->n_tokens;) {
    int L = 1;
    while (i + L < mb->n_tokens && mb->pos[i + L]) L++;
    *sq += (double)L * L;
    i += L;
  }
}

/* The simulated 1F1B period at P of the micro-batches in their run order
 * (unit stage costs scaled by each one's load, kaiten/packing.h). */
static double period_of(const kt_microbatch *mbs, int P) {
  int len[M];
  double sq[M];
  for (int j = 0; j < M; j++) held(&mbs[j], &len[j], &sq[j]);
  kt_token_model tm = {.budget = B * T, .attn = ATTN};
  kt_pack pk;
  kt_costs base, c;
  kt_schedule s;
  kt_metrics met;
  kt_error err;
  double period = -1;
  kt_costs_default(&base);
  if (kt_pack_given(len, sq, M, &pk, &err)) return -1;
  if (!kt_pack_costs(&pk, &tm, &base, P, &c, &err)) {
    kt_gen_params gp = {.p = P, .m = M, .costs = &c};
    if (!kt_generate(KT_SCHED_1F1B, &gp, &s, &err)) {
      if (!kt_simulate_metrics(&s, &c, &met, &err)) period = met.period, kt_metrics_free(&met);
      kt_schedule_free(&s);
    }
    kt_costs_free(&c);
  }
  kt_pack_free(&pk);
  CHECK_MSG(period > 0, "simulating the order: %s", err.msg);
  return period;
}

/* Whether two micro-batches hold the same tokens at the same positions. */
static int same_mb(const kt_microbatch *a, const kt_microbatch *b) {
  return a->n_tokens == b->n_tokens &&
         !memcmp(a->tokens, b->tokens, (size_t)a->n_tokens * sizeof(int)) &&
         !memcmp(a->pos, b->pos, (size_t)a->n_tokens * sizeof(int));
}

/* Balanced's order for the run's pipeline (1F1B at P = 2 and 4): the same
 * micro-batches as the packing's own order, never a longer simulated step,
 * on most steps another order and a shorter step; the order is the same
 * on every fill of the step (a pure function of seed and step). */
static void ordered(void) {
  for (int P = 2; P <= 4; P += 2) {
    int moved = 0, shorter = 0, steps = 12;
    for (int step = 0; step < steps; step++) {
      kt_microbatch own[M], got[M], again[M];
      kt_data_source *a = packed("balanced", step, own), *b = packed_for("balanced", step, P, got);
      kt_data_source *c = packed_for("balanced", step, P, again);
      if (a && b && c) {
        int used[M] = {0}, differs = 0;
        for (int j = 0; j < M; j++) {
          int k = 0;
          while (k < M && (used[k] || !same_mb(&got[j], &own[k]))) k++;
          CHECK_MSG(k < M, "P=%d step %d: micro-batch %d of the order is not one of the packing's",
                    P, step, j);
          if (k < M) used[k] = 1, differs |= k != j;
          CHECK_MSG(same_mb(&got[j], &again[j]), "P=%d step %d: mb %d differs between fills", P,
                    step, j);
        }
        double po = period_of(own, P), pg = period_of(got, P);
        CHECK_MSG(pg <= po * (1 + 1e-12), "P=%d step %d: ordered step %.4f > the packing's %.4f", P,
                  step, pg, po);
        moved += differs, shorter += pg < po * (1 - 1e-3);
      }
      if (a) a->destroy(a);
      if (b) b->destroy(b);
      if (c) c->destroy(c);
    }
    CHECK_MSG(moved >= steps / 2 && shorter >= steps / 2,
              "P=%d: the order moved micro-batches on %d and shortened the step on %d of %d steps",
              P, moved, shorter, steps);
  }
  /* not a documents source, or one in chunks along the sequence: refused */
  kt_data_source *src;
  kt_error err;
  kt_costs base;
  kt_costs_default(&base);
  kt_gen_params gp = {.p = 2, .m = M + 1};
  kt_schedule s;
  kt_microbatch mbs[M];
  if (kt_generate(KT_SCHED_1F1B, &gp, &s, &err)) return;
  if (!kt_data_mlp_create(8, 1, &src, &err)) {
    CHECK(kt_data_docs_order(src, &s, 0, &base, &err) == KT_EINVAL);
    src->destroy(src);
  }
  if (!kt_data_docs_source_create(NULL, T, B, 7, "lognormal:1:2:40", "balanced", ATTN, 2, &src,
                                  &err)) {
    CHECK(kt_data_docs_order(src, &s, 0, &base, &err) == KT_EINVAL);
    CHECK_STR_CONTAINS(err.msg, "Seq1F1B");
    src->destroy(src);
  }
  /* a schedule of another number of micro-batches than the step's */
  if (!kt_data_docs_source_create(NULL, T, B, 7, "lognormal:1:2:40", "balanced", ATTN, 1, &src,
                                  &err)) {
    CHECK(kt_data_docs_order(src, &s, 0, &base, &err) == KT_OK);
    CHECK(src->fill(src, 0, 0, 1, 1, M, B, mbs, &err) == KT_EINVAL);
    CHECK_STR_CONTAINS(err.msg, "micro-batches");
    src->destroy(src);
  }
  kt_schedule_free(&s);
}

/* A session with balanced packing runs its micro-batches in the order
 * searched for its own pipeline (1F1B, P = 2): the order of a documents
 * source given that pipeline, not the packing's own. */
static void session_order(void) {
  kt_session_params p = kt_session_default_params();
  p.model = gpt(0, 0);
  p.p = 2, p.m = M, p.micro_batch = B, p.steps = 1, p.val_every = 0;
  p.doc_lengths = "lognormal:1:2:40", p.packing = "balanced", p.data_seed = 7;
  p.attn_share = ATTN;
  kt_session *ses;
  kt_error err;
  kt_status st = kt_session_open(&p, &ses, &err);
  if (!st) st = kt_session_run(ses, &err);
  CHECK_MSG(st == KT_OK, "session: %s", err.msg);
  const kt_session_result *res = kt_session_get_result(ses);
  kt_microbatch own[M], got[M];
  kt_data_source *a = packed("balanced", 0, own), *b = packed_for("balanced", 0, 2, got);
  if (!st && a && b && res->train.n_mb_costs == M) {
    int as_ordered = 1, as_own = 1;
    for (int j = 0; j < M; j++) {
      const kt_mb_cost *c = &res->train.mb_costs[j];
      int to, tg;
      double so, sg;
      held(&own[j], &to, &so), held(&got[j], &tg, &sg);
      as_ordered &= c->tokens == tg && c->attn_tokens2 == sg;
      as_own &= c->tokens == to && c->attn_tokens2 == so;
    }
    CHECK_MSG(as_ordered && !as_own, "the session ran the %s order",
              as_own ? "packing's own" : "another");
    CHECK_NEAR(res->attn_share, ATTN, 0);
  } else CHECK_MSG(0, "%d micro-batches recorded", res->train.n_mb_costs);
  if (a) a->destroy(a);
  if (b) b->destroy(b);
  kt_session_close(ses);
}

/* The attention share fitted on micro-batches whose times follow the token
 * model (share 0.6 at 1,024 tokens; two of eight 5x slow, the rest within
 * 2%): 0.6; times of a fixed overhead per micro-batch, or micro-batches
 * that cannot tell the two parts apart: none (-1). */
static void attn_fit(void) {
  enum { N = 8, BUDGET = 1024 };
  static const int docs[N][3] = {{1024, 0, 0}, {512, 512, 0},  {700, 200, 100}, {300, 300, 300},
                                 {900, 0, 0},  {100, 100, 50}, {600, 400, 0},   {1000, 20, 0}};
  double tf[N][2], tb[N][2], tw[N][2] = {{0}};
  kt_mb_cost c[N];
  double x = 0.4 / BUDGET, y = 0.6 / ((double)BUDGET * BUDGET); /* per token, per token^2 */
  for (int form = 0; form < 3; form++) {
    for (int i = 0; i < N; i++) {
      double L1 = 0, L2 = 0;
      for (int d = 0; d < 3; d++) L1 += docs[i][d], L2 += (double)docs[i][d] * docs[i][d];
      double t = form == 1 ? 0.01 : (x * L1 + y * L2) * (1 + 0.02 * ((i % 3) - 1));
      if (form == 0 && (i == 2 || i == 5)) t *= 5;
      tf[i][0] = tf[i][1] = t / 6, tb[i][0] = tb[i][1] = t / 3;
      c[i] = (kt_mb_cost){.tokens = (int)L1,
                          .attn_tokens2 = form == 2 ? 512 * L1 : L2, /* one L2 / L1 */
                          .tf = tf[i],
                          .tb = tb[i],
                          .tw = tw[i]};
    }
    double a = kt_mb_cost_attn_fit(c, N, 2, BUDGET);
    if (form == 0) CHECK_NEAR(a, 0.6, 0.02);
    else CHECK_MSG(a == -1, "form %d: fitted %g", form, a);
  }
}

/* Positions that neither start nor continue a document, past T, or more
 * tokens than the micro-batch holds: EINVAL naming the value. */
static void bad_layouts(void) {
  kt_model_config m = gpt(0, 0);
  kt_chunk *c;
  kt_error err;
  if (kt_chunk_create(&m, 0, kt_model_units(&m), B, 1, &c, &err)) return;
  int tok[B * T] = {0}, pos[B * T];
  for (int i = 0; i < B * T; i++) pos[i] = i % T;
  kt_microbatch mb = {.b = B, .tokens = tok, .targets = tok, .n_tokens = 5, .pos = pos};
  double loss;
  pos[3] = 7;
  CHECK(kt_chunk_forward(c, 0, &mb, NULL, NULL, &loss, &err) == KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "position 7");
  pos[3] = 3;
  mb.n_tokens = B * T + 1;
  CHECK(kt_chunk_forward(c, 0, &mb, NULL, NULL, &loss, &err) == KT_EINVAL);
  mb.n_tokens = T + 1, pos[T] = T;
  CHECK(kt_chunk_forward(c, 0, &mb, NULL, NULL, &loss, &err) == KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "sequence length");
  kt_chunk_destroy(c);
  kt_data_source *src;
  CHECK(kt_data_docs_source_create(NULL, T, B, 1, "lognormal:1:9:3", NULL, ATTN, 1, &src, &err) ==
        KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "lognormal:1:9:3");
  CHECK(kt_data_docs_source_create(NULL, T, B, 1, "uniform:1:9", NULL, ATTN, 1, &src, &err) ==
        KT_EINVAL);
  CHECK(kt_data_docs_source_create(NULL, T, B, 1, "lognormal:1:2:9", "lpt", ATTN, 1, &src, &err) ==
        KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "lpt");
}

int main(void) {
  kt_blas_choose_core();
  equivalence("fifo", 0);
  equivalence("balanced", 0);
  equivalence("balanced", 2);
  ordered();
  session_order();
  attn_fit();
  block_diagonal();
  packing();
  bad_layouts();
  return kt_test_done(__FILE__);
}
