/* Byte-level datasets: loading, the train / validation split, and batches
 * that are pure functions of (seed, step, replica, micro-batch). */
#include "kaiten/data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nn/nn.h"

struct kt_dataset {
  unsigned char *bytes;
  size_t len, train_len; /* validation = bytes[train_len, len) */
  char name[256];
};

static uint64_t mix(uint64_t x) { /* splitmix64 finaliser */
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

kt_status kt_dataset_from_bytes(const void *bytes, size_t len, const char *name,
                                double val_fraction, kt_dataset **out, kt_error *err) {
  *out = NULL;
  if (!(val_fraction >= 0.0 && val_fraction <= 0.5))
    return kt_fail(err, KT_EINVAL, "validation fraction %g: expected 0..0.5", val_fraction);
  if (len == 0) return kt_fail(err, KT_EINVAL, "%s: the text is empty", name);
  kt_dataset *d = calloc(1, sizeof *d);
  if (d) d->bytes = malloc(len);
  if (!d || !d->bytes) {
    free(d);
    return kt_fail(err, KT_ENOMEM, "out of memory for %zu bytes of text", len);
  }
  memcpy(d->bytes, bytes, len);
  d->len = len;
  d->train_len = len - (size_t)((double)len * val_fraction);
  snprintf(d->name, sizeof d->name, "%s", name);
  *out = d;
  return KT_OK;
}

kt_status kt_dataset_create(const char *path, double val_fraction, kt_dataset **out,
                            kt_error *err) {
  char *text;
  size_t len;
  int builtin = !path || !strcmp(path, "builtin");
  kt_status st =
      builtin ? kt_data_builtin_text(&text, &len, err) : kt_read_file(path, &text, &len, err);
  if (st) return st;
  st = kt_dataset_from_bytes(text, len, builtin ? "builtin" : path, val_fraction, out, err);
  free(text);
  return st;
}

void kt_dataset_destroy(kt_dataset *d) {
  if (!d) return;
  free(d->bytes);
  free(d);
}

const char *kt_dataset_name(const kt_dataset *d) { return d->name; }

size_t kt_dataset_bytes(const kt_dataset *d, kt_split split) {
  return split == KT_SPLIT_TRAIN ? d->train_len : d->len - d->train_len;
}

const unsigned char *kt_dataset_text(const kt_dataset *d, kt_split split) {
  return split == KT_SPLIT_TRAIN ? d->bytes : d->bytes + d->train_len;
}

uint64_t kt_dataset_fingerprint(const kt_dataset *d) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (size_t i = 0; i < d->len; i++) h = (h ^ d->bytes[i]) * 0x100000001B3ull;
  return mix(h ^ d->train_len);
}

uint64_t kt_data_train_windows(const kt_dataset *d, int seq_len) {
  if (seq_len < 1 || d->train_len / (size_t)seq_len < 2) return 0;
  return d->train_len / (size_t)seq_len - 1;
}

/* A bijection of [0, n) keyed by key: a 4-round Feistel network on the
 * smallest even number of bits covering n, cycle-walking values >= n. */
static uint64_t permute(uint64_t x, uint64_t n, uint64_t key) {
  if (n <= 1) return 0;
  int bits = 0;
  while ((1ull << bits) < n) bits++;
  int half = (bits + 1) / 2;
  uint64_t mask = (1ull << half) - 1;
  do {
    uint64_t l = x >> half, r = x & mask;
    for (int round = 0; round < 4; round++) {
      uint64_t f = mix(r ^ key ^ (uint64_t)(round + 1) * 0x9E3779B97F4A7C15ull) & mask;
      uint64_t t = r;
      r = l ^ f;
      l = t;
    }
    x = (l << half) | r;
  } while (x >= n);
  return x;
}

static void copy_window(const unsigned char *text, size_t start, int T, int *tokens, int *targets) {
  for (int t = 0; t < T; t++) {
    tokens[t] = text[start + (size_t)t];
    targets[t] = text[start + (size_t)t + 1];
  }
}

kt_status kt_data_train_batch(const kt_dataset *d, const kt_batch_spec *s, int64_t step,
                              int replica, int mb, int *tokens, int *targets, kt_error *err) {
  if (s->seq_len < 1 || s->micro_batch < 1 || s->micro_batches < 1 || s->replicas < 1)
    return kt_fail(err, KT_EINVAL,
                   "batch spec T=%d b=%d micro-batches=%d replicas=%d: all must be >= 1",
                   s->seq_len, s->micro_batch, s->micro_batches, s->replicas);
  if (step < 0 || replica < 0 || replica >= s->replicas || mb < 0 || mb >= s->micro_batches)
    return kt_fail(err, KT_EINVAL, "batch step %lld replica %d micro-batch %d out of range",
                   (long long)step, replica, mb);
  uint64_t W = kt_data_train_windows(d, s->seq_len);
  if (W == 0)
    return kt_fail(err, KT_EINVAL,
                   "%s: %zu training bytes are too few for sequences of %d (need %d)", d->name,
                   d->train_len, s->seq_len, 2 * s->seq_len);
  int T = s->seq_len;
  uint64_t first =
      (((uint64_t)step * (uint64_t)s->replicas + (uint64_t)replica) * (uint64_t)s->micro_batches +
       (uint64_t)mb) *
      (uint64_t)s->micro_batch;
  for (int i = 0; i < s->micro_batch; i++) {
    uint64_t n = first + (uint64_t)i, epoch = n / W;
    uint64_t key = mix(s->seed * 0x2545F4914F6CDD1Dull + epoch);
    uint64_t offset = mix(key ^ 0x5851F42D4C957F2Dull) % (uint64_t)T;
    uint64_t window = permute(n % W, W, key);
    copy_window(d->bytes, (size_t)(offset + window * (uint64_t)T), T, tokens + (size_t)i * T,
                targets + (size_t)i * T);
  }
  return KT_OK;
}

static uint64_t val_windows(const kt_dataset *d, int seq_len) {
  size_t len = d->len - d->train_len;
  return seq_len < 1 || len < 1 ? 0 : (len - 1) / (size_t)seq_len;
}

int kt_data_val_batches(const kt_dataset *d, int seq_len, int micro_batch) {
  uint64_t W = val_windows(d, seq_len);
  if (W == 0 || micro_batch < 1) return 0;
  uint64_t n = W / (uint64_t)micro_batch;
  return n == 0 ? 1 : n > 1000000 ? 1000000 : (int)n;
}

kt_status kt_data_val_batch(const kt_dataset *d, int seq_len, int micro_batch, int index,
                            int *tokens, int *targets, kt_error *err) {
  int n = kt_data_val_batches(d, seq_len, micro_batch);
  if (index < 0 || index >= n)
    return kt_fail(err, KT_EINVAL,
                   "%s: validation batch %d outside 0..%d (held-out %zu bytes, T=%d)", d->name,
                   index, n - 1, d->len - d->train_len, seq_len);
  uint64_t W = val_windows(d, seq_len);
  for (int i = 0; i < micro_batch; i++) {
    uint64_t w = ((uint64_t)index * (uint64_t)micro_batch + (uint64_t)i) % W;
    copy_window(d->bytes + d->train_len, (size_t)(w * (uint64_t)seq_len), seq_len,
                tokens + (size_t)i * seq_len, targets + (size_t)i * seq_len);
  }
  return KT_OK;
}

void kt_data_encode(const char *text, size_t len, int *tokens) {
  for (size_t i = 0; i < len; i++) tokens[i] = (unsigned char)text[i];
}

void kt_data_decode(const int *tokens, size_t len, char *out) {
  for (size_t i = 0; i < len; i++)
    out[i] = tokens[i] >= 0 && tokens[i] < 256 ? (char)(unsigned char)tokens[i] : '?';
  out[len] = '\0';
}
