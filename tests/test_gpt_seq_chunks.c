/* Micro-batches in chunks along the sequence (--seq-chunks K, Seq1F1B):
 * the chunked data holds exactly the unchunked micro-batches' tokens; the
 * gradients and loss equal the unchunked run's (P = 1, 2, 4; K = 2, 4), and
 * the chunked runs equal each other bit for bit across P; stage 0's peak
 * activation memory falls; a chunk run out of order is refused. */
#include "check.h"
#include "kaiten/generators.h"
#include "kaiten/model_impl.h"
#include "kaiten/train.h"
#include "train/session_internal.h"

#define M 4
#define B 2
#define T 320 /* pieces of up to 160 rows: several query blocks (KT__ATT_QB) */
#define MAXK 4

static kt_model_config gpt(int K) {
  kt_model_config m;
  kt_model_config_default(&m, KT_MODEL_GPT);
  m.layers = 2;
  m.hidden = 16;
  m.heads = 2;
  m.seq_len = T;
  m.seed = 9;
  m.seq_chunks = K;
  return m;
}

static kt_data_source *source(int K, kt_microbatch *mbs) {
  kt_data_source *src;
  kt_error err;
  if (kt_data_docs_source_create(NULL, T, B, 4, "lognormal:1:16:320", "balanced", 0.25, K, &src,
                                 &err)) {
    CHECK_MSG(0, "%s", err.msg);
    return NULL;
  }
  if (src->fill(src, 0, 2, 1, 1, M * K, B, mbs, &err)) {
    CHECK_MSG(0, "%s", err.msg);
    src->destroy(src);
    return NULL;
  }
  return src;
}

/* The K chunks of each micro-batch put back by row are the unchunked one. */
static void data_pieces(void) {
  kt_microbatch whole[M], parts[M * MAXK];
  kt_data_source *a = source(1, whole), *b = source(MAXK, parts);
  if (a && b)
    for (int j = 0; j < M; j++) {
      int tok[B * T], tgt[B * T], seen = 0, ok = 1;
      for (int k = 0; k < MAXK; k++) {
        const kt_microbatch *p = &parts[j * MAXK + k];
        for (int i = 0; i < p->n_tokens; i++, seen++)
          tok[p->row[i]] = p->tokens[i], tgt[p->row[i]] = p->targets[i];
      }
      CHECK_EQ_INT(seen, whole[j].n_tokens);
      for (int i = 0; i < whole[j].n_tokens && seen == whole[j].n_tokens; i++)
        ok &= tok[i] == whole[j].tokens[i] && tgt[i] == whole[j].targets[i];
      CHECK_MSG(ok, "micro-batch %d: chunks do not hold its tokens", j);
    }
  if (a) a->destroy(a);
  if (b) b->destroy(b);
}

static int run(const kt_schedule *s, int K, const kt_microbatch *mbs, float *g, size_t *n,
               double *loss, size_t *peak0) {
  kt_runtime_config rc;
  kt_runtime_config_default(&rc);
  rc.schedule = s;
  rc.micro_batch = B;
  rc.model = gpt(K);
  kt_runtime *rt;
  kt_error err;
  if (kt_runtime_create_threads(&rc, &rt, &err)) {
    CHECK_MSG(0, "%s: %s", s->name, err.msg);
    return -1;
  }
  kt_step_result res;
  int bad = kt_runtime_step(rt, 0, mbs, 0, &res, &err) != KT_OK;
  CHECK_MSG(!bad, "%s P=%d K=%d: %s", s->name, s->p, K, err.msg);
  if (!bad) {
    *n = 0;
    for (int st = 0; st < s->p; st++) {
      kt_chunk *c = kt_runtime_chunk(rt, st, 0);
      memcpy(g + *n, c->grads, c->n_params * sizeof(float));
      *n += c->n_params;
    }
    *loss = res.loss;
    kt_metrics met;
    if (!kt_timeline_metrics(kt_runtime_timeline(rt), &met, &err)) {
      *peak0 = (size_t)met.ranks[0].peak_memory;
      kt_metrics_free(&met);
    }
  }
  kt_runtime_destroy(rt);
  return bad ? -1 : 0;
}

static void equivalence(void) {
  static float ref[100000], got[100000], first[100000];
  kt_microbatch whole[M], parts[M * MAXK];
  kt_data_source *a = source(1, whole);
  if (!a) return;
  kt_schedule one;
  kt_error err;
  kt_gen_params gp = {.p = 1, .m = M};
  size_t nref = 0, n = 0, nfirst = 0, peak = 0, peak_1f1b = 0;
  double ref_loss = 0, loss = 0;
  if (kt_generate(KT_SCHED_GPIPE, &gp, &one, &err) ||
      run(&one, 1, whole, ref, &nref, &ref_loss, &peak)) {
    CHECK(0);
    a->destroy(a);
    return;
  }
  kt_schedule_free(&one);
  kt_schedule s4;
  gp.p = 4;
  if (!kt_generate(KT_SCHED_1F1B, &gp, &s4, &err)) {
    run(&s4, 1, whole, got, &n, &loss, &peak_1f1b);
    kt_schedule_free(&s4);
  }
  for (int K = 2; K <= MAXK; K *= 2) {
    kt_data_source *b = source(K, parts);
    if (!b) continue;
    for (int P = 1; P <= 4; P *= 2) {
      kt_schedule s;
      size_t peak_k = 0;
      if (kt__seq1f1b(&s, P, M, K, &err)) {
        CHECK_MSG(0, "seq1f1b P=%d K=%d: %s", P, K, err.msg);
        continue;
      }
      if (!run(&s, K, parts, got, &n, &loss, &peak_k)) {
        double e = kt_test_rel_err(got, ref, n);
        CHECK_MSG(n == nref && e < 1e-5, "K=%d P=%d: gradient rel err %.3g vs unchunked", K, P, e);
        CHECK_MSG(fabs(loss - ref_loss) < 1e-6 * ref_loss, "K=%d P=%d loss %.9g vs %.9g", K, P,
                  loss, ref_loss);
        if (P == 1) memcpy(first, got, n * sizeof(float)), nfirst = n;
        else
          CHECK_MSG(n == nfirst && !memcmp(got, first, n * sizeof(float)),
                    "K=%d: P=%d differs from P=1 (rel err %.3g)", K, P,
                    kt_test_rel_err(got, first, n));
        if (P == 4) {
          printf("K=%d P=4: stage 0 peak activation memory %zu, 1f1b unchunked %zu (%.2fx)\n", K,
                 peak_k, peak_1f1b, (double)peak_k / (double)peak_1f1b);
          CHECK_MSG(peak_k < peak_1f1b, "K=%d: peak %zu not below 1f1b's %zu", K, peak_k,
                    peak_1f1b);
        }
      }
      kt_schedule_free(&s);
    }
    b->destroy(b);
  }
  a->destroy(a);
}

/* A chunk's forward before the one ahead of it, or its input gradient
 * before a later chunk's: ERUNTIME naming the chunk. */
static void order(void) {
  kt_microbatch parts[M * 2];
  kt_data_source *b = source(2, parts);
  if (!b) return;
  kt_model_config m = gpt(2);
  kt_chunk *c;
  kt_error err;
  if (kt_chunk_create(&m, 0, kt_model_units(&m), B, M * 2, &c, &err)) {
    b->destroy(b);
    return;
  }
  double loss;
  CHECK(kt_chunk_forward(c, 1, &parts[1], NULL, NULL, &loss, &err) == KT_ERUNTIME);
  CHECK_STR_CONTAINS(err.msg, "chunk 1 of micro-batch 0");
  CHECK(kt_chunk_forward(c, 0, &parts[0], NULL, NULL, &loss, &err) == KT_OK);
  CHECK(kt_chunk_forward(c, 1, &parts[1], NULL, NULL, &loss, &err) == KT_OK);
  CHECK(kt_chunk_backward_input(c, 0, &parts[0], NULL, NULL, &err) == KT_ERUNTIME);
  CHECK_STR_CONTAINS(err.msg, "reverse");
  CHECK(kt_chunk_backward_input(c, 1, &parts[1], NULL, NULL, &err) == KT_OK);
  CHECK(kt_chunk_backward_input(c, 0, &parts[0], NULL, NULL, &err) == KT_OK);
  CHECK(kt_chunk_backward_weight(c, 1, &err) == KT_OK);
  CHECK(kt_chunk_backward_weight(c, 0, &err) == KT_OK);
  CHECK_EQ_INT(kt_chunk_stash_bytes(c), 0);
  kt_chunk_destroy(c);
  m.recompute = 1;
  CHECK(kt_model_config_check(&m, &err) == KT_EINVAL);
  b->destroy(b);
}

int main(void) {
  kt_blas_choose_core();
  data_pieces();
  equivalence();
  order();
  return kt_test_done(__FILE__);
}
