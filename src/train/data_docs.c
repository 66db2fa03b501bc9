/* Documents of varying length for the GPT: each step draws document
 * lengths (kaiten/packing.h's lognormal spec), cuts those longer than T
 * into pieces of T, takes their bytes from places of the training text,
 * and packs them (kaiten/packing.h: fifo or balanced) into micro-batches
 * of b T tokens with per-token positions (block-diagonal attention,
 * kaiten/model.h), each as `chunks` chunks along the sequence; balanced's
 * micro-batches run in the order the simulator finds shortest for the
 * run's own pipeline (kt_data_docs_order). */
#include <stdlib.h>
#include <string.h>

#include "kaiten/data.h"
#include "kaiten/packing.h"
#include "kaiten/train.h"

typedef struct {
  int *tokens, *targets, *pos, *row; /* (D K M, b T) each */
  size_t cap;
} docs_turn;

typedef struct {
  kt_dataset *ds;
  int seq_len;
  uint64_t seed;
  kt_doc_lengths spec;
  kt_packing packing;
  double attn; /* the token model's attention share (kt_token_model) */
  /* balanced's order (kt_data_docs_order): searched for this pipeline */
  int ordered;
  kt_schedule sched; /* what the run runs (its micro-batches: a step's) */
  double mem_limit;  /* in base's memory units; 0: none */
  kt_costs base;     /* a micro-batch of one document of b T tokens, every stage */
  int cal_from;      /* from this step on the calibrated share (-1: never) */
  double cal_attn;
  int chunks; /* each micro-batch runs as this many chunks along the sequence */
  docs_turn turn[KT_DATA_KEEPS];
  int next, n_val;
  int *drawn, *len; /* one replica's document lengths, and their pieces of at most T */
  size_t *off;      /* each piece's place in the training text */
  int cap_drawn, cap_len;
} docs_src;

/* A place in the text for piece i of (seed, step, replica): a hash of them. */
static size_t place(const docs_src *t, int64_t step, int d, int i, size_t span) {
  uint64_t h = t->seed ^ 0xD1B54A32D192ED03ull * (uint64_t)(step + 1);
  h ^= 0x9E3779B97F4A7C15ull * ((uint64_t)d << 32 | (uint32_t)i);
  h = (h ^ (h >> 29)) * 0xBF58476D1CE4E5B9ull;
  h = (h ^ (h >> 32)) * 0x94D049BB133111EBull;
  return (size_t)((h ^ (h >> 29)) % span);
}

static int grow_ints(int **a, int *cap, int n) {
  if (n <= *cap) return 0;
  int *p = realloc(*a, (size_t)n * sizeof *p);
  if (!p) return -1;
  *a = p, *cap = n;
  return 0;
}

/* n lengths of replica d's stream at a step cut into pieces of at most T
 * with their places; returns the pieces, -1 when out of memory. */
static int draw(docs_src *t, int64_t step, int d, int n) {
  int T = t->seq_len, pieces = 0, cap = t->cap_len;
  if (grow_ints(&t->drawn, &t->cap_drawn, n)) return -1;
  kt_doc_lengths_sample(&t->spec,
                        t->seed * 0x9E3779B97F4A7C15ull ^ ((uint64_t)step << 20) ^ (uint64_t)d, n,
                        t->drawn);
  for (int i = 0; i < n; i++) pieces += (t->drawn[i] + T - 1) / T;
  if (grow_ints(&t->len, &t->cap_len, pieces)) return -1;
  if (t->cap_len != cap || !t->off) {
    size_t *o = realloc(t->off, (size_t)t->cap_len * sizeof *o);
    if (!o) return -1;
    t->off = o;
  }
  size_t text = kt_dataset_bytes(t->ds, KT_SPLIT_TRAIN);
  int at = 0;
  for (int i = 0; i < n; i++)
    for (int rest = t->drawn[i]; rest > 0; rest -= T, at++) {
      t->len[at] = rest < T ? rest : T;
      t->off[at] = place(t, step, d, at, text - (size_t)t->len[at]); /* + len < text */
    }
  return pieces;
}

/* Replica d's documents of a step packed into n_pack micro-batches: enough
 * drawn that fifo fills them all (or the packing ends on a full step). */
static kt_status pack_step(docs_src *t, int64_t step, int d, int n_pack, const kt_token_model *tm,
                           kt_pack *pk, kt_error *err) {
  for (int n = 4 * n_pack;; n *= 2) {
    int pieces = draw(t, step, d, n);
    if (pieces < 0) return kt_fail(err, KT_ENOMEM, "out of memory drawing documents");
    kt_status st = kt_pack_documents(t->len, pieces, n_pack, tm, t->packing, pk, err);
    if (st || pk->n_docs < pieces || n > 1 << 24) return st; /* fifo stopped before the end */
    kt_pack_free(pk);
  }
}

/* Replica d's packing of a step, balanced's in the order searched for the
 * run's pipeline (when it was given); the token model of the step. */
static kt_status packing_of(docs_src *t, int step, int d, int n_pack, int b, kt_pack *pk,
                            kt_error *err) {
  int cal = t->cal_from >= 0 && step >= t->cal_from;
  kt_token_model tm = {.budget = b * t->seq_len, .attn = cal ? t->cal_attn : t->attn};
  kt_status st = pack_step(t, step, d, n_pack, &tm, pk, err);
  if (st || !t->ordered || t->packing != KT_PACK_BALANCED) return st;
  if ((st =
           kt_pack_order_for(pk, &tm, &t->base, &t->sched, t->mem_limit, KT_PACK_ORDER_EVALS, err)))
    kt_pack_free(pk);
  return st;
}

/* Rows [lo, hi) of a document of L tokens in chunk k of `chunks`. */
static void piece(int L, int k, int chunks, int *lo, int *hi) {
  *lo = (int)((long long)L * k / chunks), *hi = (int)((long long)L * (k + 1) / chunks);
}

/* Lays replica d's packed micro-batches into the turn's buffers, in run
 * order, each as t->chunks chunks along the sequence (piece k of every
 * document in chunk k); returns the tokens they hold. */
static size_t lay_out(docs_src *t, docs_turn *u, int d, const kt_pack *pk, int b,
                      kt_microbatch *out) {
  const unsigned char *text = kt_dataset_text(t->ds, KT_SPLIT_TRAIN);
  size_t per = (size_t)b * t->seq_len, total = 0;
  int K = t->chunks;
  for (int q = 0; q < pk->m; q++)
    for (int k = 0; k < K; k++) {
      size_t idx = ((size_t)d * pk->m + q) * K + k;
      int *tok = u->tokens + idx * per, *tgt = u->targets + idx * per, *pos = u->pos + idx * per;
      int *row = u->row + idx * per, n = 0, whole = 0, mb = pk->order[q];
      for (int x = pk->first[mb]; x < pk->first[mb + 1]; x++) {
        int i = pk->doc_of[x], lo, hi;
        piece(t->len[i], k, K, &lo, &hi);
        for (int p = lo; p < hi; p++, n++) {
          tok[n] = text[t->off[i] + (size_t)p];
          tgt[n] = text[t->off[i] + (size_t)p + 1];
          pos[n] = p, row[n] = whole + p;
        }
        whole += t->len[i];
      }
      out[idx] = (kt_microbatch){.b = b,
                                 .tokens = tok,
                                 .targets = tgt,
                                 .n_tokens = n,
                                 .pos = pos,
                                 .row = K > 1 ? row : NULL};
      total += (size_t)n;
    }
  return total;
}

static kt_status docs_train(docs_src *t, docs_turn *u, int step, int D, int n_mb, int b,
                            kt_microbatch *out, kt_error *err) {
  if (n_mb % t->chunks)
    return kt_fail(err, KT_EINVAL, "%d micro-batches are not whole micro-batches of %d chunks",
                   n_mb, t->chunks);
  size_t total = 0;
  for (int d = 0; d < D; d++) {
    kt_pack pk;
    kt_status st = packing_of(t, step, d, n_mb / t->chunks, b, &pk, err);
    if (st) return st;
    total += lay_out(t, u, d, &pk, b, out);
    kt_pack_free(&pk);
  }
  double scale = (double)D * n_mb / (double)total; /* mean over the step's tokens */
  for (int i = 0; i < D * n_mb; i++) out[i].loss_scale = scale;
  return KT_OK;
}

static kt_status docs_fill(kt_data_source *src, int split, int step, int D, int K, int M, int b,
                           kt_microbatch *out, kt_error *err) {
  docs_src *t = src->impl;
  size_t per = (size_t)b * t->seq_len, n = (size_t)D * K * M * per;
  docs_turn *u = &t->turn[t->next];
  if (n > u->cap) {
    int **p[4] = {&u->tokens, &u->targets, &u->pos, &u->row};
    for (int i = 0; i < 4; i++) {
      int *q = realloc(*p[i], n * sizeof(int));
      if (!q) return kt_fail(err, KT_ENOMEM, "out of memory for a batch of %zu tokens", n);
      *p[i] = q;
    }
    u->cap = n;
  }
  t->next = (t->next + 1) % KT_DATA_KEEPS;
  if (split == 0) return docs_train(t, u, step, D, K * M, b, out, err);
  for (int i = 0; i < D * K * M; i++) { /* validation: the held-out windows */
    int index = (int)(((size_t)step * D * K * M + (size_t)i) % (size_t)t->n_val);
    int *tok = u->tokens + (size_t)i * per, *tgt = u->targets + (size_t)i * per;
    kt_status st = kt_data_val_batch(t->ds, t->seq_len, b, index, tok, tgt, err);
    if (st) return st;
    out[i] = (kt_microbatch){.b = b, .tokens = tok, .targets = tgt};
  }
  return KT_OK;
}

static void docs_destroy(kt_data_source *src) {
  docs_src *t = src->impl;
  kt_dataset_destroy(t->ds);
  for (int u = 0; u < KT_DATA_KEEPS; u++)
    free(t->turn[u].tokens), free(t->turn[u].targets), free(t->turn[u].pos), free(t->turn[u].row);
  free(t->drawn), free(t->len), free(t->off);
  kt_costs_free(&t->base);
  if (t->ordered) kt_schedule_free(&t->sched);
  free(t);
  free(src);
}

kt_status kt_data_docs_source_create(const char *path, int seq_len, int micro_batch, uint64_t seed,
                                     const char *doc_lengths, const char *packing,
                                     double attn_share, int seq_chunks, kt_data_source **out,
                                     kt_error *err) {
  *out = NULL;
  kt_doc_lengths spec;
  kt_status st = kt_doc_lengths_parse(doc_lengths, &spec, err);
  if (st) return st;
  int how = kt_packing_from_name(packing ? packing : "fifo");
  if (how < 0) return kt_fail(err, KT_EINVAL, "--packing %s: expected fifo or balanced", packing);
  kt_dataset *ds;
  if ((st = kt_dataset_create(path, KT_DATA_VAL_FRACTION, &ds, err))) return st;
  if (kt_dataset_bytes(ds, KT_SPLIT_TRAIN) < 2 * (size_t)seq_len + 2) {
    st = kt_fail(err, KT_EINVAL,
                 "%s: %zu training bytes are too few for documents of up to %d tokens",
                 kt_dataset_name(ds), kt_dataset_bytes(ds, KT_SPLIT_TRAIN), seq_len);
    kt_dataset_destroy(ds);
    return st;
  }
  kt_data_source *src = calloc(1, sizeof *src);
  docs_src *t = calloc(1, sizeof *t);
  if (!src || !t) {
    free(src), free(t);
    kt_dataset_destroy(ds);
    return kt_fail(err, KT_ENOMEM, "out of memory");
  }
  *t = (docs_src){.ds = ds,
                  .seq_len = seq_len,
                  .seed = seed,
                  .spec = spec,
                  .packing = (kt_packing)how,
                  .attn = attn_share,
                  .chunks = seq_chunks > 1 ? seq_chunks : 1,
                  .cal_from = -1,
                  .n_val = kt_data_val_batches(ds, seq_len, micro_batch)};
  src->has_validation = t->n_val > 0;
  src->tokens_per_sample = (size_t)seq_len;
  src->impl = t;
  src->fill = docs_fill;
  src->destroy = docs_destroy;
  src->keeps = KT_DATA_KEEPS;
  *out = src;
  return KT_OK;
}

static docs_src *docs_of(kt_data_source *src) {
  return src && src->fill == docs_fill ? src->impl : NULL;
}

kt_status kt_data_docs_order(kt_data_source *src, const kt_schedule *s, double mem_limit,
                             const kt_costs *base, kt_error *err) {
  docs_src *t = docs_of(src);
  if (!t) return kt_fail(err, KT_EINVAL, "an order for packed documents needs a documents source");
  if (t->chunks > 1)
    return kt_fail(err, KT_EINVAL,
                   "micro-batches in %d chunks run Seq1F1B's order, not a generator's", t->chunks);
  kt_costs copy;
  kt_schedule sched;
  if (kt_costs_copy(&copy, base)) return kt_fail(err, KT_ENOMEM, "out of memory");
  kt_status st = kt_schedule_copy(&sched, s, err);
  if (st) {
    kt_costs_free(&copy);
    return st;
  }
  kt_costs_free(&t->base);
  if (t->ordered) kt_schedule_free(&t->sched);
  t->base = copy, t->sched = sched, t->mem_limit = mem_limit > 0 ? mem_limit : 0;
  t->ordered = 1;
  return KT_OK;
}

kt_status kt_data_docs_calibrate(kt_data_source *src, int from_step, double attn_share,
                                 kt_error *err) {
  docs_src *t = docs_of(src);
  if (!t) return kt_fail(err, KT_EINVAL, "a calibration for packed documents needs their source");
  if (!(attn_share >= 0 && attn_share <= 1) || from_step < 0)
    return kt_fail(err, KT_EINVAL, "attention share %g from step %d: expected 0..1 from step >= 0",
                   attn_share, from_step);
  t->cal_from = from_step, t->cal_attn = attn_share;
  return KT_OK;
}
