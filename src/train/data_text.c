/* Text data source for the GPT: kaiten data's deterministic byte batches
 * laid out as the trainer asks (D replicas x K rounds x M micro-batches). */
#include <stdlib.h>
#include <string.h>

#include "kaiten/data.h"
#include "kaiten/train.h"

typedef struct {
  kt_dataset *ds;
  int seq_len;
  uint64_t seed;
  /* the batches of the last KT_DATA_KEEPS fills, the next one goes to turn */
  int *tokens[KT_DATA_KEEPS], *targets[KT_DATA_KEEPS];
  size_t cap[KT_DATA_KEEPS]; /* ints per buffer */
  int turn;
  int n_val;
} text_src;

static kt_status text_fill(kt_data_source *src, int split, int step, int D, int K, int M, int b,
                           kt_microbatch *out, kt_error *err) {
  text_src *t = src->impl;
  size_t per = (size_t)b * t->seq_len, n = (size_t)D * K * M * per;
  int u = t->turn;
  if (n > t->cap[u]) {
    int *tok = realloc(t->tokens[u], n * sizeof(int)),
        *tgt = tok ? realloc(t->targets[u], n * sizeof(int)) : NULL;
    if (tok) t->tokens[u] = tok;
    if (tgt) t->targets[u] = tgt;
    if (!tok || !tgt) return kt_fail(err, KT_ENOMEM, "out of memory for a batch of %zu tokens", n);
    t->cap[u] = n;
  }
  t->turn = (u + 1) % KT_DATA_KEEPS;
  kt_batch_spec spec = {.seq_len = t->seq_len,
                        .micro_batch = b,
                        .micro_batches = K * M,
                        .replicas = D,
                        .seed = t->seed};
  for (int d = 0; d < D; d++)
    for (int k = 0; k < K; k++)
      for (int j = 0; j < M; j++) {
        size_t idx = ((size_t)d * K + k) * M + j;
        int *tok = t->tokens[u] + idx * per, *tgt = t->targets[u] + idx * per;
        kt_status st;
        if (split == 0) {
          st = kt_data_train_batch(t->ds, &spec, step, d, k * M + j, tok, tgt, err);
        } else {
          /* validation batch `step` covers consecutive held-out windows */
          int index = (int)(((size_t)step * D * K * M + idx) % (size_t)t->n_val);
          st = kt_data_val_batch(t->ds, t->seq_len, b, index, tok, tgt, err);
        }
        if (st) return st;
        out[idx] = (kt_microbatch){.b = b, .tokens = tok, .targets = tgt};
      }
  return KT_OK;
}

static void text_destroy(kt_data_source *src) {
  text_src *t = src->impl;
  kt_dataset_destroy(t->ds);
  for (int u = 0; u < KT_DATA_KEEPS; u++) free(t->tokens[u]), free(t->targets[u]);
  free(t);
  free(src);
}

kt_status kt_data_text_source_create(const char *path, int seq_len, int micro_batch, uint64_t seed,
                                     kt_data_source **out, kt_error *err) {
  *out = NULL;
  kt_dataset *ds;
  kt_status st = kt_dataset_create(path, KT_DATA_VAL_FRACTION, &ds, err);
  if (st) return st;
  if (kt_data_train_windows(ds, seq_len) == 0) {
    st = kt_fail(err, KT_EINVAL,
                 "%s: %zu training bytes are too few for a sequence length of %d (need %d)",
                 kt_dataset_name(ds), kt_dataset_bytes(ds, KT_SPLIT_TRAIN), seq_len, 2 * seq_len);
    kt_dataset_destroy(ds);
    return st;
  }
  kt_data_source *src = calloc(1, sizeof *src);
  text_src *t = calloc(1, sizeof *t);
  if (!src || !t) {
    free(src);
    free(t);
    kt_dataset_destroy(ds);
    return kt_fail(err, KT_ENOMEM, "out of memory");
  }
  t->ds = ds;
  t->seq_len = seq_len;
  t->seed = seed;
  t->n_val = kt_data_val_batches(ds, seq_len, micro_batch);
  src->impl = t;
  src->fill = text_fill;
  src->destroy = text_destroy;
  src->has_validation = t->n_val > 0;
  src->tokens_per_sample = (size_t)seq_len;
  src->keeps = KT_DATA_KEEPS;
  *out = src;
  return KT_OK;
}
