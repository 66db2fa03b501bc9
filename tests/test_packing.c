/* Documents into micro-batches (kaiten/packing.h): the lognormal spec and
 * its sampler, fifo's and balanced's invariants (every document of the
 * step once, the token budget, data order for fifo), the per-micro-batch
 * costs of a packing, balanced's order never slower than the packing's own
 * and faster than fifo across seeds, and the request's settings. */
#include "check.h"
#include "kaiten/packing.h"
#include "kaiten/request.h"

static void test_spec(void) {
  kt_doc_lengths d;
  kt_error err = {{0}};
  CHECK_EQ_INT(kt_doc_lengths_parse("lognormal:1:16:1024", &d, &err), KT_OK);
  CHECK(d.sigma == 1 && d.min == 16 && d.max == 1024);
  const char *bad[] = {
      "lognormal:1:16",         "normal:1:16:1024",   "lognormal:x:16:1024",   "lognormal:1:0:1024",
      "lognormal:1:64:16",      "lognormal:-1:16:32", "lognormal:1:16:1024:5", "",
      "lognormal:1:16:99999999"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    CHECK_MSG(kt_doc_lengths_parse(bad[i], &d, &err) == KT_EINVAL, "'%s' accepted", bad[i]);
  kt_doc_lengths_parse("lognormal:1:16:1024", &d, &err);
  enum { N = 20000 };
  static int a[N], b[N];
  kt_doc_lengths_sample(&d, 42, N, a);
  kt_doc_lengths_sample(&d, 42, N, b);
  CHECK(!memcmp(a, b, sizeof a)); /* the same seed, the same documents */
  int below = 0, lo = 0, hi = 0;
  for (int i = 0; i < N; i++) {
    CHECK(a[i] >= 16 && a[i] <= 1024);
    below += a[i] < 128, lo += a[i] == 16, hi += a[i] == 1024;
  }
  /* median sqrt(16 * 1024) = 128; P(z < -ln 8) = 1.9% clamped at each end */
  CHECK_MSG(fabs(below / (double)N - 0.5) < 0.02, "%d of %d below the median", below, N);
  CHECK_MSG(lo > N / 100 && lo < N / 30 && hi > N / 100 && hi < N / 30, "clamped %d, %d", lo, hi);
  kt_doc_lengths_sample(&d, 43, N, b);
  CHECK(memcmp(a, b, sizeof a) != 0);
}

/* Every document of the step in exactly one micro-batch, none over budget. */
static void check_pack(const kt_pack *pk, const int *len, int budget) {
  int *seen = calloc((size_t)pk->n_docs + 1, sizeof(int));
  for (int k = 0; k < pk->m; k++) {
    long tokens = 0;
    double sq = 0;
    for (int i = pk->first[k]; i < pk->first[k + 1]; i++) {
      int d = pk->doc_of[i];
      CHECK(d >= 0 && d < pk->n_docs);
      seen[d]++;
      tokens += len[d], sq += (double)len[d] * len[d];
    }
    CHECK_EQ_INT(tokens, pk->tokens[k]);
    CHECK_NEAR(sq, pk->sq[k], 0);
    CHECK(pk->tokens[k] <= budget);
  }
  int placed = 0;
  for (int d = 0; d < pk->n_docs; d++) {
    CHECK(seen[d] <= 1);
    placed += seen[d];
  }
  CHECK_EQ_INT(placed + pk->left_out, pk->n_docs);
  free(seen);
}

static void test_pack(void) {
  kt_doc_lengths d = {1, 16, 1024};
  int len[600];
  kt_doc_lengths_sample(&d, 1, 600, len);
  kt_token_model tm = {.budget = 1024, .attn = 0.25};
  kt_pack f, b;
  kt_error err = {{0}};
  CHECK_EQ_INT(kt_pack_documents(len, 600, 8, &tm, KT_PACK_FIFO, &f, &err), KT_OK);
  check_pack(&f, len, 1024);
  CHECK_EQ_INT(f.left_out, 0);
  /* fifo: data order, a micro-batch closed only when the next document does not fit */
  for (int i = 0; i < f.n_docs; i++) CHECK_EQ_INT(f.doc_of[i], i);
  for (int k = 0; k + 1 < f.m; k++) CHECK(f.tokens[k] + len[f.first[k + 1]] > 1024);
  CHECK(f.tokens[f.m - 1] + len[f.n_docs] > 1024); /* the step ends where the 9th would open */
  CHECK_EQ_INT(kt_pack_documents(len, 600, 8, &tm, KT_PACK_BALANCED, &b, &err), KT_OK);
  check_pack(&b, len, 1024);
  CHECK_EQ_INT(b.n_docs, f.n_docs); /* the same documents */
  /* balanced evens the load: its heaviest micro-batch no heavier than fifo's */
  double fmax_load = 0, bmax_load = 0;
  for (int k = 0; k < 8; k++) {
    fmax_load = fmax(fmax_load, 0.75 * f.tokens[k] / 1024.0 + 0.25 * f.sq[k] / (1024.0 * 1024));
    bmax_load = fmax(bmax_load, 0.75 * b.tokens[k] / 1024.0 + 0.25 * b.sq[k] / (1024.0 * 1024));
  }
  CHECK_MSG(bmax_load <= fmax_load, "balanced %g, fifo %g", bmax_load, fmax_load);
  /* per-micro-batch costs: the stage value times the micro-batch's load */
  kt_costs base, c;
  kt_costs_default(&base);
  base.tf = 2, base.mem_act = 3;
  CHECK_EQ_INT(kt_pack_costs(&f, &tm, &base, 4, &c, &err), KT_OK);
  CHECK(c.n_mb == 8 && c.n_stages == 4);
  for (int k = 0; k < 8; k++) {
    double load = 0.75 * f.tokens[k] / 1024.0 + 0.25 * f.sq[k] / (1024.0 * 1024);
    CHECK_NEAR(kt_cost_tf_mb(&c, 3, k), 2 * load, 1e-12);
    CHECK_NEAR(kt_cost_mem_act_mb(&c, 1, k), 3 * f.tokens[k] / 1024.0, 1e-12);
  }
  kt_costs_free(&c);
  /* balanced's order: never slower than the packing's own */
  kt_gen_params gp = {.p = 4, .m = 8};
  int own[8];
  memcpy(own, b.order, sizeof own);
  CHECK_EQ_INT(kt_pack_order(&b, &tm, &base, KT_SCHED_1F1B, &gp, 60, &err), KT_OK);
  int sorted[8] = {0};
  for (int k = 0; k < 8; k++) sorted[b.order[k]]++;
  for (int k = 0; k < 8; k++) CHECK_EQ_INT(sorted[k], 1); /* a permutation */
  kt_pack plain = b;
  plain.order = own;
  kt_schedule s;
  kt_metrics met;
  CHECK_EQ_INT(kt_pack_costs(&plain, &tm, &base, 4, &c, &err), KT_OK);
  CHECK_EQ_INT(kt_generate(KT_SCHED_1F1B, &gp, &s, &err), KT_OK);
  CHECK_EQ_INT(kt_simulate_metrics(&s, &c, &met, &err), KT_OK);
  CHECK_MSG(b.period <= met.period * (1 + 1e-12), "searched %g, own order %g", b.period,
            met.period);
  kt_metrics_free(&met), kt_schedule_free(&s), kt_costs_free(&c);
  /* a document longer than the budget */
  len[3] = 2000;
  kt_pack_free(&f);
  CHECK_EQ_INT(kt_pack_documents(len, 600, 8, &tm, KT_PACK_FIFO, &f, &err), KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "document 3 has 2000 tokens");
  kt_pack_free(&b);
  kt_costs_free(&base);
}

/* balanced's first pass is LPT: each document, longest first (ties: data
 * order), onto the micro-batch of least load with room (ties: the first).
 * The packing's tree search must pick exactly what a scan of every
 * micro-batch picks, full micro-batches and ties included. */
static double lpt_load(const kt_token_model *tm, double tokens, double sq) {
  double b = tm->budget; /* the packing's own expression (src/packing/packing.c) */
  return (1 - tm->attn) * tokens / b + tm->attn * sq / (b * b);
}

static void test_balanced_is_lpt(void) {
  static const int ms[] = {1, 3, 17, 300};
  for (int t = 0; t < 8; t++) {
    int m = ms[t % 4], n = 40 * m + 7, budget = t < 4 ? 1024 : 64;
    kt_doc_lengths d = {t < 4 ? 1.0 : 0.2, 1, budget};
    int *len = malloc(sizeof(int) * (size_t)n), *bin = malloc(sizeof(int) * (size_t)n);
    kt_doc_lengths_sample(&d, (uint64_t)t + 11, n, len);
    kt_token_model tm = {.budget = budget, .attn = t % 2 ? 0.73 : 0};
    kt_pack pk;
    kt_error err = {{0}};
    CHECK_EQ_INT(kt_pack_documents(len, n, m, &tm, KT_PACK_BALANCED, &pk, &err), KT_OK);
    check_pack(&pk, len, budget);
    for (int i = 0; i < pk.n_docs; i++) bin[i] = -1;
    for (int k = 0; k < m; k++)
      for (int i = pk.first[k]; i < pk.first[k + 1]; i++) bin[pk.doc_of[i]] = k;
    /* the reference: a scan, documents in LPT order */
    size_t nm = (size_t)(m > 0 ? m : 1), nd = (size_t)(pk.n_docs > 0 ? pk.n_docs : 1);
    int *tok = calloc(nm, sizeof(int)), *done = calloc(nd, sizeof(int));
    double *sq = calloc(nm, sizeof(double));
    int mismatches = 0;
    for (int r = 0; r < pk.n_docs; r++) {
      int i = -1;
      for (int j = 0; j < pk.n_docs; j++)
        if (!done[j] && (i < 0 || len[j] > len[i])) i = j;
      done[i] = 1;
      int best = -1;
      for (int k = 0; k < m; k++)
        if (tok[k] + len[i] <= budget &&
            (best < 0 || lpt_load(&tm, tok[k], sq[k]) < lpt_load(&tm, tok[best], sq[best])))
          best = k;
      mismatches += best != bin[i];
      if (best >= 0) tok[best] += len[i], sq[best] += (double)len[i] * len[i];
    }
    CHECK_MSG(mismatches == 0, "m=%d: %d documents placed unlike the scan", m, mismatches);
    free(tok), free(done), free(sq), free(len), free(bin);
    kt_pack_free(&pk);
  }
}

/* tokens per unit of time of the request's step */
static double throughput(const char *text, double *period) {
  kt_request rq;
  kt_result res;
  kt_error err = {{0}};
  kt_request_init(&rq);
  double tps = -1;
  if (!kt_request_parse(&rq, text, &err) && !kt_request_run(&rq, &res, KT_RESULT_METRICS, &err)) {
    tps = res.step_tokens / res.met.period;
    *period = res.met.period;
    kt_result_free(&res);
  } else {
    fprintf(stderr, "%s: %s\n", text, err.msg);
  }
  kt_request_free(&rq);
  return tps;
}

/* Across seeds, balanced's step is never slower than fifo's on the same
 * documents, and faster on most. */
static void test_balanced_faster(void) {
  int faster = 0, runs = 0;
  for (int seed = 1; seed <= 10; seed++) {
    char text[256];
    double pf, pb;
    snprintf(text, sizeof text,
             "schedule=1f1b p=4 m=8 per-stage=1 doc-lengths=lognormal:1:16:1024 "
             "seed=%d packing=fifo",
             seed);
    double f = throughput(text, &pf);
    snprintf(text, sizeof text,
             "schedule=1f1b p=4 m=8 per-stage=1 doc-lengths=lognormal:1:16:1024 "
             "seed=%d packing=balanced",
             seed);
    double b = throughput(text, &pb);
    CHECK(f > 0 && b > 0);
    CHECK_MSG(b >= f * (1 - 1e-9), "seed %d: balanced %g tokens/unit, fifo %g", seed, b, f);
    faster += b > f * 1.05;
    runs++;
  }
  CHECK_MSG(faster >= runs / 2, "balanced 5%% faster on %d of %d seeds", faster, runs);
}

static void test_request(void) {
  kt_request rq, back;
  kt_error err = {{0}};
  kt_request_init(&rq);
  CHECK_EQ_INT(kt_request_parse(&rq,
                                "doc-lengths=lognormal:0.5:8:512 seed=7 packing=balanced "
                                "mb-tokens=512 attn-share=0.5",
                                &err),
               KT_OK);
  kt_buf b;
  kt_buf_init(&b);
  kt_request_print(&rq, &b);
  CHECK_STR_CONTAINS(
      b.data,
      "doc-lengths=lognormal:0.5:8:512 seed=7 packing=balanced mb-tokens=512 attn-share=0.5");
  kt_request_init(&back);
  CHECK_EQ_INT(kt_request_parse(&back, b.data, &err), KT_OK);
  CHECK(back.seed == 7 && back.packing == KT_PACK_BALANCED && back.tokens.budget == 512);
  kt_request_free(&back);
  kt_buf_free(&b);
  const char *bad[] = {"packing=lpt", "seed=-1", "mb-tokens=0", "attn-share=2",
                       "doc-lengths=lognormal:1:2"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    CHECK_MSG(kt_request_parse(&rq, bad[i], &err) == KT_EINVAL, "%s accepted", bad[i]);
  /* documents longer than a micro-batch holds */
  kt_result res;
  CHECK_EQ_INT(kt_request_parse(&rq, "mb-tokens=256 doc-lengths=lognormal:1:16:1024", &err), KT_OK);
  CHECK_EQ_INT(kt_request_run(&rq, &res, KT_RESULT_METRICS, &err), KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "mb-tokens=256");
  CHECK_EQ_INT(kt_request_set(&rq, "schedule", "optimal", &err), KT_OK);
  CHECK_EQ_INT(kt_request_set(&rq, "mb-tokens", "1024", &err), KT_OK);
  /* optimal packs the documents too and searches their micro-batches'
   * sequences, each with its own costs */
  CHECK_EQ_INT(kt_request_run(&rq, &res, KT_RESULT_METRICS, &err), KT_OK);
  CHECK(res.packed && res.info.search_sequences >= 1);
  CHECK(res.info.lower_bound <= res.met.period * (1 + 1e-9));
  kt_result_free(&res);
  kt_request_free(&rq);
}

int main(void) {
  test_spec();
  test_pack();
  test_balanced_is_lpt();
  test_request();
  test_balanced_faster();
  return kt_test_done(__FILE__);
}
