/* Synthetic regression data for the MLP: deterministic per sample index. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/train.h"

typedef struct {
  int hidden;
  uint64_t seed;
  float *x, *y;      /* the current step's samples */
  size_t cap;        /* samples allocated */
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
  if (n > d->cap) {
    float *x = realloc(d->x, n * H * sizeof(float)), *y = x ? realloc(d->y, n * H * sizeof(float)) : NULL;
    if (x) d->x = x;
    if (y) d->y = y;
    if (!x || !y) return kt_fail(err, KT_ENOMEM, "out of memory for %zu samples", n);
    d->cap = n;
  }
  /* validation samples come from a disjoint stream */
  uint64_t base = (split ? (1ull << 62) : 0) + (uint64_t)step * n;
  for (size_t i = 0; i < n; i++) sample(d, base + i, d->x + i * H, d->y + i * H);
  for (size_t m = 0; m < (size_t)D * K * M; m++)
    out[m] = (kt_microbatch){.b = b, .x = d->x + m * b * H, .y = d->y + m * b * H};
  return KT_OK;
}

static void mlp_destroy(kt_data_source *src) {
  mlp_data *d = src->impl;
  free(d->x);
  free(d->y);
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
  *out = src;
  return KT_OK;
}
