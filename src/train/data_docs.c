/* Documents of varying length for the GPT: each step draws document
 * lengths (doc_packing.h), takes their bytes from random places of the
 * training text, and packs them into micro-batches of b T tokens with
 * per-token positions (block-diagonal attention, kaiten/model.h). */
#include <stdlib.h>
#include <string.h>

#include "kaiten/data.h"
#include "kaiten/train.h"
#include "train/doc_packing.h"

typedef struct {
  int *tokens, *targets, *pos, *row; /* (D K M, b T) each */
  size_t cap;
} docs_turn;

typedef struct {
  kt_dataset *ds;
  int seq_len;
  uint64_t seed;
  kt__doc_spec spec;
  kt__packing packing;
  int chunks; /* each micro-batch runs as this many chunks along the sequence */
  docs_turn turn[KT_DATA_KEEPS];
  int next, n_val;
  int *len, *mb_of, *order; /* one replica's documents and micro-batches */
  size_t *off;
  int cap_docs, cap_mbs;
} docs_src;

static int grow(docs_src *t, int docs, int mbs) {
  if (docs > t->cap_docs) {
    int n = docs * 2;
    int *len = realloc(t->len, (size_t)n * sizeof *len);
    if (len) t->len = len;
    int *mb = len ? realloc(t->mb_of, (size_t)n * sizeof *mb) : NULL;
    if (mb) t->mb_of = mb;
    size_t *off = mb ? realloc(t->off, (size_t)n * sizeof *off) : NULL;
    if (!off) return -1;
    t->off = off, t->cap_docs = n;
  }
  if (mbs > t->cap_mbs) {
    int *o = realloc(t->order, (size_t)mbs * sizeof *o);
    if (!o) return -1;
    t->order = o, t->cap_mbs = mbs;
  }
  return 0;
}

/* Draws replica d's documents of a step until fifo would fill n_mb
 * micro-batches (pieces of at most T tokens); returns how many, -1 when out
 * of memory. */
static int draw_docs(docs_src *t, int64_t step, int d, int n_mb, int budget) {
  uint64_t st = t->seed * 0x9E3779B97F4A7C15ull ^ ((uint64_t)step << 20) ^ (uint64_t)d;
  size_t text = kt_dataset_bytes(t->ds, KT_SPLIT_TRAIN);
  int n = 0, j = 0, used = 0, T = t->seq_len;
  while (j < n_mb) {
    int L = kt__doc_length_draw(&t->spec, &st);
    for (int rest = L; rest > 0 && j < n_mb; rest -= T) {
      int piece = rest < T ? rest : T;
      if (used + piece > budget) j++, used = 0;
      if (j == n_mb) break;
      if (grow(t, n + 1, n_mb)) return -1;
      t->len[n] = piece;
      t->off[n] = (size_t)(kt__doc_rand(&st) % (text - (size_t)piece)); /* + piece < text */
      used += piece, n++;
    }
  }
  return n;
}

/* Rows [lo, hi) of document i: piece k of `chunks`. */
static void piece(int L, int k, int chunks, int *lo, int *hi) {
  *lo = (int)((long long)L * k / chunks), *hi = (int)((long long)L * (k + 1) / chunks);
}

/* Lays replica d's packed micro-batches into the turn's buffers, in run
 * order, each as t->chunks chunks along the sequence (piece k of every
 * document in chunk k); returns the tokens they hold. */
static size_t lay_out(docs_src *t, docs_turn *u, int d, int n_docs, int n_pack, int b,
                      kt_microbatch *out) {
  const unsigned char *text = kt_dataset_text(t->ds, KT_SPLIT_TRAIN);
  size_t per = (size_t)b * t->seq_len, total = 0;
  int K = t->chunks;
  for (int q = 0; q < n_pack; q++)
    for (int k = 0; k < K; k++) {
      size_t idx = ((size_t)d * n_pack + q) * K + k;
      int *tok = u->tokens + idx * per, *tgt = u->targets + idx * per, *pos = u->pos + idx * per;
      int *row = u->row + idx * per, n = 0, whole = 0;
      for (int i = 0; i < n_docs; i++) {
        if (t->mb_of[i] != t->order[q]) continue;
        int lo, hi;
        piece(t->len[i], k, K, &lo, &hi);
        for (int p = lo; p < hi; p++, n++) {
          tok[n] = text[t->off[i] + (size_t)p];
          tgt[n] = text[t->off[i] + (size_t)p + 1];
          pos[n] = p, row[n] = whole + p;
        }
        whole += t->len[i];
      }
      out[idx] = (kt_microbatch){.b = b, .tokens = tok, .targets = tgt, .n_tokens = n, .pos = pos,
                                 .row = K > 1 ? row : NULL};
      total += (size_t)n;
    }
  return total;
}

static kt_status docs_train(docs_src *t, docs_turn *u, int step, int D, int n_mb, int b,
                            kt_microbatch *out, kt_error *err) {
  int budget = b * t->seq_len, n_pack = n_mb / t->chunks;
  if (n_mb % t->chunks)
    return kt_fail(err, KT_EINVAL, "%d micro-batches are not whole micro-batches of %d chunks",
                   n_mb, t->chunks);
  size_t total = 0;
  for (int d = 0; d < D; d++) {
    int n = draw_docs(t, step, d, n_pack, budget);
    if (n < 0) return kt_fail(err, KT_ENOMEM, "out of memory drawing documents");
    kt__pack(t->packing, t->len, n, n_pack, budget, t->seq_len, t->mb_of, t->order);
    total += lay_out(t, u, d, n, n_pack, b, out);
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
  free(t->len), free(t->mb_of), free(t->order), free(t->off);
  free(t);
  free(src);
}

kt_status kt_data_docs_source_create(const char *path, int seq_len, int micro_batch,
                                     uint64_t seed, const char *doc_lengths, const char *packing,
                                     int seq_chunks, kt_data_source **out, kt_error *err) {
  *out = NULL;
  kt__doc_spec spec;
  kt_status st = kt__doc_spec_parse(doc_lengths, &spec, err);
  if (st) return st;
  int how = kt__packing_from_name(packing ? packing : "fifo");
  if (how < 0)
    return kt_fail(err, KT_EINVAL, "--packing %s: expected fifo or balanced", packing);
  kt_dataset *ds;
  if ((st = kt_dataset_create(path, KT_DATA_VAL_FRACTION, &ds, err))) return st;
  if (kt_dataset_bytes(ds, KT_SPLIT_TRAIN) < 2 * (size_t)seq_len + 2) {
    st = kt_fail(err, KT_EINVAL, "%s: %zu training bytes are too few for documents of up to %d tokens",
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
  *t = (docs_src){.ds = ds, .seq_len = seq_len, .seed = seed, .spec = spec,
                  .packing = (kt__packing)how, .chunks = seq_chunks > 1 ? seq_chunks : 1, .n_val = kt_data_val_batches(ds, seq_len, micro_batch)};
  src->has_validation = t->n_val > 0;
  src->tokens_per_sample = (size_t)seq_len;
  src->impl = t;
  src->fill = docs_fill;
  src->destroy = docs_destroy;
  src->keeps = KT_DATA_KEEPS;
  *out = src;
  return KT_OK;
}
