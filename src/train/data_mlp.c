/* Synthetic regression data for the MLP: deterministic per sample index. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/train.h"

typedef struct {
  int hidden;
  uint64_t seed;
  /* the samples of the last KT_DATA_KEEPS fills, the next one goes to turn */
  float *x[KT_DATA_KEEPS], *y[KT_DATA_KEEPS];
  size_t cap[KT_DATA_KEEPS]; /* samples allocated */
  int turn;
} mlp_data;

static uint64_t mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static void sample(const mlp_data *d, uint64_t index, float *x, float *y) {
  int H = d->hidden;
  uint64_t s = mix(d->seed * 0x2545F4914F6CDD1Dull + index);
  for (int i = 0; i < H; i++) {
    s = mix(s);
    x[i] = (float)((s >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
  }
  for (int i = 0; i < H; i++) y[i] = 0.5f * sinf(2.0f * x[(i + 1) % H]) + 0.3f * x[i];
}

static kt_status mlp_fill(kt_data_source *src, int split, int step, int D, int K, int M, int b,
                          kt_microbatch *out, kt_error *err) {
  mlp_data *d = src->impl;
  size_t n = (size_t)D * K * M * b, H = (size_t)d->hidden;
  int u = d->turn;
  if (n > d->cap[u]) {
    float *x = realloc(d->x[u], n * H * sizeof(float)),
          *y = x ? realloc(d->y[u], n * H * sizeof(float)) : NULL;
    if (x) d->x[u] = x;
    if (y) d->y[u] = y;
    if (!x || !y) return kt_fail(err, KT_ENOMEM, "out of memory for %zu samples", n);
    d->cap[u] = n;
  }
  d->turn = (u + 1) % KT_DATA_KEEPS;
  /* validation samples come from a disjoint stream */
  uint64_t base = (split ? (1ull << 62) : 0) + (uint64_t)step * n;
  for (size_t i = 0; i < n; i++) sample(d, base + i, d->x[u] + i * H, d->y[u] + i * H);
  for (size_t m = 0; m < (size_t)D * K * M; m++)
    out[m] = (kt_microbatch){.b = b, .x = d->x[u] + m * b * H, .y = d->y[u] + m * b * H};
  return KT_OK;
}

static void mlp_destroy(kt_data_source *src) {
  mlp_data *d = src->impl;
  for (int u = 0; u < KT_DATA_KEEPS; u++) free(d->x[u]), free(d->y[u]);
  free(d);
  free(src);
}

kt_status kt_data_mlp_create(int hidden, uint64_t seed, kt_data_source **out, kt_error *err) {
  kt_data_source *src = calloc(1, sizeof *src);
  mlp_data *d = calloc(1, sizeof *d);
  if (!src || !d) {
    free(src);
    free(d);
    return kt_fail(err, KT_ENOMEM, "out of memory");
  }
  d->hidden = hidden;
  d->seed = seed;
  src->impl = d;
  src->fill = mlp_fill;
  src->destroy = mlp_destroy;
  src->has_validation = 1;
  src->tokens_per_sample = 1;
  src->keeps = KT_DATA_KEEPS;
  *out = src;
  return KT_OK;
}
