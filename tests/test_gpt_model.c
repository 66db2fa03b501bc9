/* The GPT model through the chunk interface:
 *  - finite-difference gradient check of the whole model (tied and untied),
 *  - chunked equivalence: P chunks run in random dependency-respecting orders
 *    (F chains forward, I chains backward, W anywhere after its I) give the
 *    loss and gradients of one chunk holding every unit, with and without
 *    recompute and tied embeddings,
 *  - the stash: exact byte accounting, and recompute lowering the first
 *    chunk's peak by the expected factor; sizes-only chunks count the same
 *    bytes after every action and compute nothing,
 *  - identical initialisation for any partition, error reporting,
 *  - sampling and evaluation through any partition,
 *  - kt_chunk_parallel: every index once, in whole aligned blocks, on a
 *    chunk with two compute threads and on one with one,
 *  - a GEMM plan's classes of products: a product runs on its class's
 *    library whatever its rows, any other on the chosen one. */
#include <stdint.h>

#include "check.h"
#include "kaiten/model_impl.h"
#include "kaiten/model.h"
#include "nn/gpt.h"
#include "nn/nn.h"

static uint64_t rng_state = 7;
static uint32_t urand32(void) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(rng_state >> 33);
}
static float urand(void) { return (float)(urand32() * (2.0 / 2147483648.0)) - 1.0f; }

/* Runs expr (a kt_status); on failure records it with err's reason and returns. */
#define TRY(expr) \
  do { \
    kt_status _st = (expr); \
    CHECK_MSG(!_st, "%s: %s", #expr, err.msg); \
    if (_st) return; \
  } while (0)

static kt_model_config small_config(int tie, int recompute) {
  kt_model_config cfg;
  kt_model_config_default(&cfg, KT_MODEL_GPT);
  cfg.layers = 4;
  cfg.hidden = 16;
  cfg.heads = 2;
  cfg.seq_len = 8;
  cfg.vocab = 32;
  cfg.tie_embeddings = tie;
  cfg.recompute = recompute;
  cfg.seed = 5;
  return cfg;
}

static void fill_batch(int *tokens, int *targets, int n, int V) {
  for (int i = 0; i < n; i++) tokens[i] = (int)(urand32() % (uint32_t)V);
  for (int i = 0; i < n; i++) targets[i] = (int)(urand32() % (uint32_t)V);
}

/* ---- whole-model finite differences ------------------------------------------- */

static double eval_loss(kt_chunk *c, const kt_microbatch *mb) {
  double loss = 0;
  kt_error err;
  kt_status st = kt_gpt_chunk_eval(c, mb, NULL, NULL, &loss, NULL, &err);
  CHECK_MSG(!st, "%s", err.msg);
  return loss;
}

static void test_model_fd(int tie) {
  kt_model_config cfg = small_config(tie, 0);
  cfg.layers = 2, cfg.hidden = 8, cfg.seq_len = 5, cfg.vocab = 11;
  int Bm = 2, n = Bm * cfg.seq_len, U = kt_model_units(&cfg);
  kt_chunk *c;
  kt_error err;
  TRY(kt_chunk_create(&cfg, 0, U, Bm, 1, &c, &err));
  /* larger weights than the 0.02 init make every path matter */
  kt__gpt_params p;
  for (size_t i = 0; i < c->n_params; i++) c->params[i] = 0.3f * urand();
  for (int u = 1; u <= cfg.layers + 1; u++) {
    kt__gpt_params_point(&p, c->params + c->unit_offset[u], &cfg, u);
    float *gains[] = {p.ln1w, p.ln2w, p.lnfw};
    for (int g = 0; g < 3; g++)
      if (gains[g])
        for (int i = 0; i < cfg.hidden; i++) gains[g][i] = 1.0f + 0.3f * urand();
  }
  kt__gpt_params emb, head;
  kt__gpt_params_point(&emb, c->params, &cfg, 0);
  kt__gpt_params_point(&head, c->params + c->unit_offset[U - 1], &cfg, U - 1);
  size_t VC = (size_t)cfg.vocab * cfg.hidden;
  if (tie) memcpy(head.headw, emb.wte, VC * sizeof(float));
  int tokens[64], targets[64];
  fill_batch(tokens, targets, n, cfg.vocab);
  kt_microbatch mb = {.b = Bm, .tokens = tokens, .targets = targets};
  double loss;
  kt_chunk_zero_grad(c);
  TRY(c->ops->forward(c, 0, &mb, NULL, NULL, &loss, &err));
  CHECK_NEAR(loss, eval_loss(c, &mb), 1e-6);
  TRY(c->ops->backward_input(c, 0, &mb, NULL, NULL, &err));
  TRY(c->ops->backward_weight(c, 0, &err));
  if (tie) CHECK(!memcmp(c->grads + (head.headw - c->params), c->grads, VC * sizeof(float)));
  /* per parameter tensor: all coordinates, central differences */
  const float eps = 1e-2f;
  double worst = 0;
  for (int u = 0; u < U; u++) {
    kt_param_tensor t[16];
    int nt = kt_gpt_unit_tensors(&cfg, u, t, 16);
    for (int k = 0; k < nt; k++) {
      if (tie && u == U - 1 && !strcmp(t[k].name, "headw")) continue; /* moves with wte */
      int tied_wte = tie && u == 0 && !strcmp(t[k].name, "wte");
      double num = 0, den = 0;
      for (size_t i = 0; i < t[k].size; i++) {
        size_t at = c->unit_offset[u] + t[k].offset + i;
        float *x = c->params + at, *mirror = tied_wte ? head.headw + i : x;
        float keep = *x;
        *x = *mirror = keep + eps;
        double lp = eval_loss(c, &mb);
        *x = *mirror = keep - eps;
        double lm = eval_loss(c, &mb);
        *x = *mirror = keep;
        double fd = (lp - lm) / (2 * eps), g = c->grads[at];
        num += (fd - g) * (fd - g);
        den += g * g;
      }
      double rel = sqrt(num) / (sqrt(den) + 1e-9);
      if (rel > worst) worst = rel;
      CHECK_MSG(rel < 1e-2, "unit %d %s: relative error %.3g", u, t[k].name, rel);
    }
  }
  printf("whole model (%s): worst per-tensor relative error vs finite differences %.2e\n",
         tie ? "tied" : "untied", worst);
  kt_chunk_destroy(c);
}

/* ---- pipelines of chunks -------------------------------------------------------- */

enum { MAXP = 8, MAXM = 8 };
enum { ORDER_GPIPE, ORDER_ALL_I_THEN_W, ORDER_RANDOM };

typedef struct {
  double loss;   /* summed over micro-batches */
  float *grads;  /* every unit's gradient, in unit order (tied copies summed) */
  float *params; /* every unit's parameters after creation */
  size_t n;
  size_t peak0; /* chunk 0's peak stash bytes */
  int ok;
} run_result;

static void free_result(run_result *r) {
  free(r->grads);
  free(r->params);
}

/* The next action of the order among the ready ones (state: 0 none, 1 F,
 * 2 I, 3 W per chunk and micro-batch): *pp, *pj; 0 when none is ready. */
static int next_action(int state[MAXP][MAXM], int P, int M, int order, uint64_t *rs, int *pp,
                       int *pj) {
  int cand_p[3 * MAXP * MAXM], cand_j[3 * MAXP * MAXM], nc = 0;
  int any_f = 0, any_i = 0;
  for (int q = 0; q < P; q++)
    for (int k = 0; k < M; k++) any_f |= state[q][k] == 0, any_i |= state[q][k] < 2;
  for (int p = 0; p < P; p++)
    for (int j = 0; j < M; j++) {
      int s = state[p][j];
      int ready = (s == 0 && (p == 0 || state[p - 1][j] >= 1)) ||
                  (s == 1 && (p == P - 1 || state[p + 1][j] >= 2)) || s == 2;
      if (!ready) continue;
      /* order policies restrict which ready actions may run */
      if (order != ORDER_RANDOM && s >= 1 && any_f) continue;       /* F first */
      if (order == ORDER_ALL_I_THEN_W && s == 2 && any_i) continue; /* then all I */
      cand_p[nc] = p, cand_j[nc] = j, nc++;
    }
  if (!nc) return 0;
  int pick = 0;
  if (order == ORDER_GPIPE) { /* F in (mb, stage) order, then each mb's I, W down the stages */
    for (int k = 1; k < nc; k++)
      if (cand_j[k] < cand_j[pick] ||
          (cand_j[k] == cand_j[pick] &&
           (state[cand_p[k]][cand_j[k]] == 0 ? cand_p[k] < cand_p[pick]
                                             : cand_p[k] > cand_p[pick])))
        pick = k;
  } else {
    *rs = *rs * 6364136223846793005ull + 1442695040888963407ull;
    pick = (int)((*rs >> 33) % (uint64_t)nc);
  }
  *pp = cand_p[pick], *pj = cand_j[pick];
  return 1;
}

/* The chunks' gradients and parameters by unit (tied copies get the sum of
 * both chunks' gradients), and chunk 0's peak stash. */
static void gather_result(const kt_model_config *cfg, kt_chunk **ch, int P, run_result *r) {
  int U = kt_model_units(cfg);
  r->n = 0;
  for (int u = 0; u < U; u++) r->n += kt_model_unit_params(cfg, u);
  r->grads = calloc(r->n, sizeof(float));
  r->params = calloc(r->n, sizeof(float));
  size_t at = 0;
  for (int p = 0; p < P; p++) {
    memcpy(r->grads + at, ch[p]->grads, ch[p]->n_params * sizeof(float));
    memcpy(r->params + at, ch[p]->params, ch[p]->n_params * sizeof(float));
    at += ch[p]->n_params;
    CHECK_EQ_INT(ch[p]->stash_bytes, 0);
  }
  if (cfg->tie_embeddings && P > 1) {
    kt_chunk *a = ch[0], *b = ch[P - 1];
    CHECK(a->tied && b->tied && a->tied_elems == b->tied_elems);
    CHECK(!memcmp(a->tied, b->tied, a->tied_elems * sizeof(float)));
    float *ga = r->grads + (a->tied_grad - a->grads);
    float *gb = r->grads + (r->n - b->n_params) + (b->tied_grad - b->grads);
    for (size_t i = 0; i < a->tied_elems; i++) ga[i] = gb[i] = ga[i] + gb[i];
  }
  r->peak0 = ch[0]->peak_stash_bytes;
}

/* Whether run_pipeline runs each I with its W as one full B
 * (kt_chunk_backward), in the I's place. */
static int full_b;

/* Runs M micro-batches through chunks of counts[0..P) in the given order. */
static run_result run_pipeline(const kt_model_config *cfg, const int *counts, int P, int M, int Bm,
                               int order, uint64_t order_seed, int *const *tok, int *const *tgt) {
  run_result r = {0};
  kt_error err;
  kt_chunk *ch[MAXP];
  /* boundary k sits between chunks k - 1 and k (0 and P: none) */
  float *act[MAXP + 1][MAXM] = {{0}}, *dact[MAXP + 1][MAXM] = {{0}};
  int first = 0;
  size_t BE = kt_model_boundary_elems(cfg) * (size_t)Bm;
  for (int p = 0; p < P; p++) {
    kt_status st = kt_chunk_create(cfg, first, counts[p], Bm, M, &ch[p], &err);
    CHECK_MSG(!st, "%s", err.msg);
    if (st) return r;
    kt_chunk_zero_grad(ch[p]);
    first += counts[p];
    for (int j = 0; j < M; j++)
      if (p > 0) act[p][j] = calloc(BE, sizeof(float)), dact[p][j] = calloc(BE, sizeof(float));
  }
  int state[MAXP][MAXM] = {{0}};
  int remaining = 3 * P * M, p, j;
  uint64_t rs = order_seed * 2654435761u + 1;
  while (remaining > 0) {
    int found = next_action(state, P, M, order, &rs, &p, &j);
    CHECK(found);
    if (!found) break;
    kt_chunk *c = ch[p];
    kt_microbatch mb = {.b = Bm, .tokens = tok[j], .targets = tgt[j]};
    kt_status st;
    if (state[p][j] == 0) {
      double loss = 0;
      st = c->ops->forward(c, j, &mb, act[p][j], act[p + 1][j], &loss, &err);
      if (p == P - 1) r.loss += loss;
    } else if (state[p][j] == 1 && full_b) { /* I and W as one full B */
      st = kt_chunk_backward(c, j, &mb, dact[p + 1][j], dact[p][j], &err);
      state[p][j]++, remaining--;
    } else if (state[p][j] == 1) {
      st = c->ops->backward_input(c, j, &mb, dact[p + 1][j], dact[p][j], &err);
    } else {
      st = c->ops->backward_weight(c, j, &err);
    }
    CHECK_MSG(!st, "%s", err.msg);
    if (st) break;
    state[p][j]++;
    remaining--;
  }
  r.ok = remaining == 0;
  gather_result(cfg, ch, P, &r);
  for (p = 0; p < P; p++) {
    kt_chunk_destroy(ch[p]);
    for (j = 0; j < M; j++) free(act[p][j]), free(dact[p][j]);
  }
  return r;
}

/* max over units of ||a - b||_inf / ||b||_inf */
static double max_unit_rel(const kt_model_config *cfg, const float *a, const float *b) {
  double worst = 0;
  size_t at = 0;
  for (int u = 0; u < kt_model_units(cfg); u++) {
    size_t n = kt_model_unit_params(cfg, u);
    double diff = 0, mag = 0;
    for (size_t i = 0; i < n; i++) {
      diff = fmax(diff, fabs((double)a[at + i] - b[at + i]));
      mag = fmax(mag, fabs((double)b[at + i]));
    }
    if (mag > 0 && diff / mag > worst) worst = diff / mag;
    at += n;
  }
  return worst;
}

static void test_chunked_equivalence(void) {
  const int M = 4, Bm = 2;
  static const int parts[][MAXP + 1] = {
      /* P, counts... over L + 2 = 6 units */
      {2, 3, 3}, {2, 1, 5}, {3, 2, 2, 2}, {4, 1, 2, 2, 1}, {4, 2, 1, 1, 2}, {6, 1, 1, 1, 1, 1, 1}};
  int *tok[MAXM], *tgt[MAXM];
  kt_model_config base = small_config(0, 0);
  int n = Bm * base.seq_len;
  for (int j = 0; j < M; j++) {
    tok[j] = malloc(n * sizeof(int)), tgt[j] = malloc(n * sizeof(int));
    fill_batch(tok[j], tgt[j], n, base.vocab);
  }
  double worst_grad = 0, worst_loss = 0;
  for (int tie = 0; tie <= 1; tie++) {
    kt_model_config ref_cfg = small_config(tie, 0);
    int all[1] = {kt_model_units(&ref_cfg)};
    run_result ref = run_pipeline(&ref_cfg, all, 1, M, Bm, ORDER_GPIPE, 0, tok, tgt);
    CHECK(ref.ok);
    for (int rc = 0; rc <= 1; rc++) {
      kt_model_config cfg = small_config(tie, rc);
      for (size_t k = 0; k < sizeof parts / sizeof *parts; k++)
        for (int order = ORDER_GPIPE; order <= ORDER_RANDOM + 1; order++) {
          int o = order > ORDER_RANDOM ? ORDER_RANDOM : order;
          run_result r = run_pipeline(&cfg, parts[k] + 1, parts[k][0], M, Bm, o,
                                      (uint64_t)order + k, tok, tgt);
          CHECK(r.ok);
          if (!r.ok) {
            free_result(&r);
            continue;
          }
          CHECK(!memcmp(r.params, ref.params, r.n * sizeof(float))); /* same init */
          double lrel = fabs(r.loss - ref.loss) / fabs(ref.loss);
          double grel = max_unit_rel(&cfg, r.grads, ref.grads);
          worst_loss = fmax(worst_loss, lrel);
          worst_grad = fmax(worst_grad, grel);
          CHECK_MSG(lrel <= 1e-5 && grel <= 1e-5,
                    "tie %d recompute %d partition %zu order %d: loss rel %.3g grad rel %.3g", tie,
                    rc, k, order, lrel, grel);
          free_result(&r);
        }
    }
    free_result(&ref);
  }
  printf("chunked equivalence (P in 1,2,3,4,6; gpipe / all-I-then-W / random orders; recompute "
         "and tied on/off): max relative error loss %.2e, gradients %.2e\n",
         worst_loss, worst_grad);
  for (int j = 0; j < M; j++) free(tok[j]), free(tgt[j]);
}

/* A full B (kt_chunk_backward, which runs each block's W right after its
 * I) gives the gradients, loss and peak stash of an I then a W, bit for
 * bit: in GPipe order each chunk's W directly follows its I. */
static void test_full_backward(void) {
  const int M = 3, Bm = 2;
  static const int parts[][MAXP + 1] = {{1, 6}, {2, 3, 3}, {3, 1, 3, 2}};
  int *tok[MAXM], *tgt[MAXM];
  kt_model_config base = small_config(0, 0);
  int n = Bm * base.seq_len, cases = 0;
  for (int j = 0; j < M; j++) {
    tok[j] = malloc(n * sizeof(int)), tgt[j] = malloc(n * sizeof(int));
    fill_batch(tok[j], tgt[j], n, base.vocab);
  }
  for (int tie = 0; tie <= 1; tie++)
    for (int rc = 0; rc <= 1; rc++)
      for (size_t k = 0; k < sizeof parts / sizeof *parts; k++) {
        kt_model_config cfg = small_config(tie, rc);
        full_b = 0;
        run_result apart =
            run_pipeline(&cfg, parts[k] + 1, parts[k][0], M, Bm, ORDER_GPIPE, 0, tok, tgt);
        full_b = 1;
        run_result full =
            run_pipeline(&cfg, parts[k] + 1, parts[k][0], M, Bm, ORDER_GPIPE, 0, tok, tgt);
        full_b = 0;
        CHECK(apart.ok && full.ok && apart.n == full.n);
        CHECK_MSG(apart.ok && full.ok && !memcmp(apart.grads, full.grads, apart.n * sizeof(float)),
                  "tie %d recompute %d partition %zu: a full B's gradients differ from I then W",
                  tie, rc, k);
        CHECK(apart.loss == full.loss);
        CHECK_EQ_INT(apart.peak0, full.peak0);
        cases++;
        free_result(&apart);
        free_result(&full);
      }
  printf("full B vs I then W: %d cases (P 1, 2, 3; tied and recompute on/off), bit for bit\n",
         cases);
  for (int j = 0; j < M; j++) free(tok[j]), free(tgt[j]);
}

/* Floats of one micro-batch's segment over units [first, first + n). */
static size_t seg_floats(const kt_model_config *cfg, int seg, int first, int n, int Bm) {
  size_t s = 0;
  kt__gpt_rows r = {.N = Bm * cfg->seq_len, .B = Bm, .T = cfg->seq_len};
  r.att = kt__gpt_att_floats(&r, cfg->heads);
  for (int u = first; u < first + n; u++) s += kt__gpt_acts_point(NULL, NULL, seg, cfg, u, &r);
  return s;
}

/* GPipe order on two stages: chunk 0 holds every micro-batch's forward state
 * when the first input gradient arrives. Without recompute its peak is
 * M (act + keep) + wgrad; with it M inputs + act + keep + wgrad. */
static void test_recompute_memory(kt_model_config cfg, int Bm, int M) {
  int U = kt_model_units(&cfg), counts[2] = {U / 2, U - U / 2};
  int n = Bm * cfg.seq_len, *tok[MAXM], *tgt[MAXM];
  for (int j = 0; j < M; j++) {
    tok[j] = malloc(n * sizeof(int)), tgt[j] = malloc(n * sizeof(int));
    fill_batch(tok[j], tgt[j], n, cfg.vocab);
  }
  cfg.recompute = 0;
  run_result plain = run_pipeline(&cfg, counts, 2, M, Bm, ORDER_GPIPE, 0, tok, tgt);
  cfg.recompute = 1;
  run_result rc = run_pipeline(&cfg, counts, 2, M, Bm, ORDER_GPIPE, 0, tok, tgt);
  size_t A = seg_floats(&cfg, KT__GPT_ACT, 0, counts[0], Bm);
  size_t K = seg_floats(&cfg, KT__GPT_KEEP, 0, counts[0], Bm);
  size_t W = seg_floats(&cfg, KT__GPT_WGRAD, 0, counts[0], Bm);
  size_t in = (size_t)n; /* the first stage keeps its tokens */
  size_t want_plain = (M * (A + K) + W) * sizeof(float),
         want_rc = (M * in + A + K + W) * sizeof(float);
  CHECK_EQ_INT(plain.peak0, want_plain);
  CHECK_EQ_INT(rc.peak0, want_rc);
  double factor = (double)want_plain / (double)want_rc,
         got = (double)plain.peak0 / (double)rc.peak0;
  printf(
      "recompute (L=%d C=%d T=%d b=%d M=%d, stage 0 = %d units): peak stash %.2f MiB -> %.2f MiB, "
      "ratio %.2f (expected %.2f)\n",
      cfg.layers, cfg.hidden, cfg.seq_len, Bm, M, counts[0], plain.peak0 / 1048576.0,
      rc.peak0 / 1048576.0, got, factor);
  CHECK(got >= factor * 0.999);
  CHECK(got > 2.0);
  CHECK(fabs(plain.loss - rc.loss) <= 1e-6 * fabs(plain.loss));
  CHECK(max_unit_rel(&cfg, rc.grads, plain.grads) <= 1e-6);
  free_result(&plain);
  free_result(&rc);
  for (int j = 0; j < M; j++) free(tok[j]), free(tgt[j]);
}

/* Sizes only: the same order of F, I and W on chunks that compute and on
 * sizes-only chunks holds the same stash bytes (now and peak) after every
 * action, and the sizes-only chunks leave their outputs and gradients
 * untouched. */
#define GRAD_MARK 7.0f /* each gradient before the order runs */

static size_t sizes_trace(const kt_model_config *cfg, const int *counts, int P, int M, int Bm,
                          uint64_t seed, int sizes_only, int *const *tok, int *const *tgt,
                          size_t *trace, int *untouched) {
  kt_error err;
  kt_chunk *ch[MAXP];
  float *act[MAXP + 1][MAXM] = {{0}}, *dact[MAXP + 1][MAXM] = {{0}};
  size_t BE = kt_model_boundary_elems(cfg) * (size_t)Bm, n = 0;
  *untouched = 0;
  for (int p = 0, first = 0; p < P; first += counts[p], p++) {
    kt_status st = sizes_only
                       ? kt_chunk_create_sizes_only(cfg, first, counts[p], Bm, M, &ch[p], &err)
                       : kt_chunk_create(cfg, first, counts[p], Bm, M, &ch[p], &err);
    CHECK_MSG(!st, "%s", err.msg);
    if (st) return 0;
    for (size_t i = 0; i < ch[p]->n_params; i++) ch[p]->grads[i] = GRAD_MARK;
    for (int j = 0; j < M && p > 0; j++)
      act[p][j] = calloc(BE, sizeof(float)), dact[p][j] = calloc(BE, sizeof(float));
  }
  int state[MAXP][MAXM] = {{0}}, p, j;
  uint64_t rs = seed;
  while (next_action(state, P, M, ORDER_RANDOM, &rs, &p, &j)) {
    kt_chunk *c = ch[p];
    kt_microbatch mb = {.b = Bm, .tokens = tok[j], .targets = tgt[j]};
    double loss = 0;
    kt_status st =
        state[p][j] == 0   ? kt_chunk_forward(c, j, &mb, act[p][j], act[p + 1][j], &loss, &err)
        : state[p][j] == 1 ? kt_chunk_backward_input(c, j, &mb, dact[p + 1][j], dact[p][j], &err)
                           : kt_chunk_backward_weight(c, j, &err);
    CHECK_MSG(!st, "%s", err.msg);
    if (st) break;
    state[p][j]++;
    trace[n++] = kt_chunk_stash_bytes(c), trace[n++] = kt_chunk_peak_stash_bytes(c);
  }
  *untouched = 1;
  for (p = 0; p < P; p++) {
    for (size_t i = 0; i < ch[p]->n_params; i++) *untouched &= ch[p]->grads[i] == GRAD_MARK;
    for (j = 0; j < M; j++)
      for (size_t i = 0; p > 0 && i < BE; i++)
        *untouched &= act[p][j][i] == 0 && dact[p][j][i] == 0;
    kt_chunk_destroy(ch[p]);
    for (j = 0; j < M; j++) free(act[p][j]), free(dact[p][j]);
  }
  return n;
}

static void test_sizes_only(kt_model_config cfg, int Bm, int M) {
  int U = kt_model_units(&cfg), counts[3] = {1, U - 2, 1}, P = 3;
  int n = Bm * cfg.seq_len, *tok[MAXM], *tgt[MAXM];
  for (int j = 0; j < M; j++) {
    tok[j] = malloc(n * sizeof(int)), tgt[j] = malloc(n * sizeof(int));
    fill_batch(tok[j], tgt[j], n, cfg.vocab);
  }
  size_t real[6 * MAXP * MAXM], dry[6 * MAXP * MAXM];
  int real_untouched = 0, dry_untouched = 0;
  for (uint64_t seed = 1; seed <= 3; seed++) {
    size_t nr = sizes_trace(&cfg, counts, P, M, Bm, seed, 0, tok, tgt, real, &real_untouched);
    size_t nd = sizes_trace(&cfg, counts, P, M, Bm, seed, 1, tok, tgt, dry, &dry_untouched);
    CHECK_EQ_INT(nr, (size_t)6 * P * M);
    CHECK_EQ_INT(nd, nr);
    size_t differ = 0, peak = 0;
    for (size_t i = 0; i < nr && i < nd; i++)
      differ += real[i] != dry[i], peak = real[i] > peak ? real[i] : peak;
    CHECK_MSG(!differ, "recompute %d tie %d seed %d: %zu of %zu byte counts differ", cfg.recompute,
              cfg.tie_embeddings, (int)seed, differ, nr);
    CHECK(peak > 0);
    CHECK(!real_untouched); /* the computing run wrote gradients */
    CHECK(dry_untouched);
  }
  for (int j = 0; j < M; j++) free(tok[j]), free(tgt[j]);
}

static void test_errors(void) {
  kt_model_config cfg = small_config(0, 0);
  kt_chunk *c;
  kt_error err;
  TRY(kt_chunk_create(&cfg, 0, 2, 1, 2, &c, &err));
  int tok[8] = {0}, bad[8] = {0};
  bad[3] = cfg.vocab;
  float out[8 * 16], d[8 * 16] = {0};
  kt_microbatch mb = {.b = 1, .tokens = tok};
  CHECK_EQ_INT(c->ops->backward_input(c, 0, &mb, d, NULL, &err), KT_ERUNTIME);
  CHECK_STR_CONTAINS(err.msg, "without its forward");
  CHECK_EQ_INT(c->ops->forward(c, 2, &mb, NULL, out, NULL, &err), KT_EINVAL);
  kt_microbatch badmb = {.b = 1, .tokens = bad};
  CHECK_EQ_INT(c->ops->forward(c, 0, &badmb, NULL, out, NULL, &err), KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "token 32");
  CHECK_EQ_INT(c->ops->forward(c, 0, NULL, NULL, out, NULL, &err), KT_EINVAL);
  CHECK_EQ_INT(c->ops->forward(c, 0, &mb, NULL, out, NULL, &err), KT_OK);
  CHECK_EQ_INT(c->ops->backward_weight(c, 0, &err), KT_ERUNTIME);
  CHECK_EQ_INT(c->ops->backward_input(c, 0, &mb, d, NULL, &err), KT_OK);
  CHECK_EQ_INT(c->ops->backward_weight(c, 0, &err), KT_OK);
  CHECK_EQ_INT(c->stash_bytes, 0);
  kt_chunk_destroy(c);
  /* the tensor table covers each unit exactly */
  for (int u = 0; u < kt_model_units(&cfg); u++) {
    kt_param_tensor t[16];
    int nt = kt_gpt_unit_tensors(&cfg, u, t, 16);
    CHECK_EQ_INT(t[nt - 1].offset + t[nt - 1].size, kt_model_unit_params(&cfg, u));
  }
}

/* The sampler gives the same text from one chunk or from a partition, and
 * evaluation through chunks gives forward's loss. */
static void test_sample_partitions(void) {
  kt_model_config cfg = small_config(1, 0);
  int U = kt_model_units(&cfg), parts[3] = {2, 2, U - 4};
  kt_chunk *one, *three[3];
  kt_error err;
  TRY(kt_chunk_create(&cfg, 0, U, 1, 1, &one, &err));
  for (int p = 0, first = 0; p < 3; first += parts[p++])
    TRY(kt_chunk_create(&cfg, first, parts[p], 1, 1, &three[p], &err));
  int prompt[3] = {1, 2, 3}, a[20], b[20];
  kt_sample_params sp = {0.9f, 5, 3};
  TRY(kt_gpt_sample(&one, 1, prompt, 3, 20, &sp, a, &err));
  TRY(kt_gpt_sample(three, 3, prompt, 3, 20, &sp, b, &err));
  CHECK(!memcmp(a, b, sizeof a));
  int in_vocab = 1;
  for (int i = 0; i < 20; i++) in_vocab &= a[i] >= 0 && a[i] < cfg.vocab;
  CHECK(in_vocab);
  CHECK_EQ_INT(kt_gpt_sample(three + 1, 2, prompt, 3, 1, &sp, a, &err), KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "starts at unit");
  /* eval through the three chunks = forward of the one */
  int tok[8], tgt[8];
  fill_batch(tok, tgt, 8, cfg.vocab);
  kt_microbatch mb = {.b = 1, .tokens = tok, .targets = tgt};
  float h1[8 * 16], h2[8 * 16];
  double l1 = 0, l3 = 0;
  TRY(one->ops->forward(one, 0, &mb, NULL, NULL, &l1, &err));
  TRY(kt_gpt_chunk_eval(three[0], &mb, NULL, h1, NULL, NULL, &err));
  TRY(kt_gpt_chunk_eval(three[1], &mb, h1, h2, NULL, NULL, &err));
  TRY(kt_gpt_chunk_eval(three[2], &mb, h2, NULL, &l3, NULL, &err));
  CHECK_NEAR(l1, l3, 1e-6 * l1);
  CHECK(one->stash_bytes > 0 && three[0]->stash_bytes == 0); /* eval keeps nothing */
  kt_chunk_destroy(one);
  for (int p = 0; p < 3; p++) kt_chunk_destroy(three[p]);
}

typedef struct {
  int *count;
  size_t n, block;
  int misaligned;
} cover_job;

static void cover_range(void *ctx, size_t lo, size_t hi) {
  cover_job *j = ctx;
  if (lo % j->block || hi <= lo || hi - lo > j->block || (hi - lo < j->block && hi != j->n))
    j->misaligned = 1; /* a block is [k * block, min((k + 1) * block, n)) */
  for (size_t i = lo; i < hi; i++) j->count[i]++; /* one writer per index */
}

static void test_chunk_parallel(int threads) {
  kt_error err;
  kt_blas_set_threads(threads);
  kt_model_config cfg = small_config(0, 0);
  kt_chunk *c = NULL;
  TRY(kt_chunk_create(&cfg, 0, kt_model_units(&cfg), 2, 2, &c, &err));
  kt_blas_set_threads(1);
  const size_t sizes[] = {1, 7, 1000, 65536, 65537, 200003};
  const size_t blocks[] = {1, 3, 1000, 65536};
  for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
    for (size_t b = 0; b < sizeof blocks / sizeof *blocks; b++) {
      cover_job j = {calloc(sizes[s], sizeof(int)), sizes[s], blocks[b], 0};
      if (!j.count) break;
      kt_chunk_parallel(c, j.n, j.block, cover_range, &j);
      size_t wrong = 0;
      for (size_t i = 0; i < j.n; i++) wrong += j.count[i] != 1;
      CHECK_MSG(!wrong && !j.misaligned, "threads %d n %zu block %zu: %zu indices not run once%s",
                threads, j.n, j.block, wrong, j.misaligned ? ", a block misaligned" : "");
      free(j.count);
    }
  size_t n;
  float *g = kt_chunk_grads(c, &n);
  for (size_t i = 0; i < n; i++) g[i] = 1.0f;
  kt_chunk_zero_grad(c);
  size_t left = 0;
  for (size_t i = 0; i < n; i++) left += g[i] != 0.0f;
  CHECK_MSG(!left, "threads %d: zero_grad left %zu of %zu gradients", threads, left, n);
  kt_chunk_destroy(c);
}

static void test_gemm_plan(void) {
  kt_gemm_choice plan = {.kind = KT_GEMM_ONEDNN, .n_shapes = 2};
  plan.shapes[0] = (kt_gemm_shape){1, 0, {1536, 384}, KT_GEMM_OPENBLAS, 1.2}; /* a^T b: m, n */
  plan.shapes[1] = (kt_gemm_shape){0, 1, {1152, 384}, KT_GEMM_BLIS, 1.1};     /* a b^T: n, k */
  kt__exec e = {.gemm = KT_GEMM_ONEDNN, .plan = &plan};
  /* kt__gemm_for(e, m, n, k, trans_a, trans_b) */
  CHECK(kt__gemm_for(&e, 1536, 384, 4096, 1, 0) == KT_GEMM_OPENBLAS);
  CHECK(kt__gemm_for(&e, 1536, 384, 512, 1, 0) == KT_GEMM_OPENBLAS); /* other rows (k) */
  CHECK(kt__gemm_for(&e, 384, 1536, 4096, 1, 0) == KT_GEMM_ONEDNN);  /* dims swapped */
  CHECK(kt__gemm_for(&e, 1536, 384, 4096, 1, 1) == KT_GEMM_ONEDNN);  /* other transposition */
  CHECK(kt__gemm_for(&e, 4096, 1152, 384, 0, 1) == KT_GEMM_BLIS);
  CHECK(kt__gemm_for(&e, 64, 1152, 384, 0, 1) == KT_GEMM_BLIS);     /* other rows (m) */
  CHECK(kt__gemm_for(&e, 4096, 1152, 384, 0, 0) == KT_GEMM_ONEDNN); /* b not transposed */
  e.plan = NULL;
  CHECK(kt__gemm_for(&e, 1536, 384, 4096, 1, 0) == KT_GEMM_ONEDNN);
}

int main(void) {
  kt_blas_choose_core(); /* as kaiten's main does */
  test_gemm_plan();
  test_chunk_parallel(2);
  test_chunk_parallel(1);
  test_model_fd(0);
  test_model_fd(1);
  test_chunked_equivalence();
  test_full_backward();
  test_recompute_memory(small_config(0, 0), 2, 4);
  kt_model_config def;
  kt_model_config_default(&def, KT_MODEL_GPT);
  test_recompute_memory(def, 4, 4);
  test_sizes_only(small_config(0, 0), 2, 3);
  test_sizes_only(small_config(1, 0), 2, 3);
  test_sizes_only(small_config(0, 1), 2, 3);
  test_errors();
  test_sample_partitions();
  return kt_test_done(__FILE__);
}
