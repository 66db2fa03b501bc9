/* Document lengths and packing (see doc_packing.h). */
#include "train/doc_packing.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const packing_names[] = {"fifo", "balanced"};
_Static_assert(sizeof packing_names / sizeof *packing_names == KT__PACK_COUNT, "packing names");

int kt__packing_from_name(const char *name) {
  for (int i = 0; name && i < KT__PACK_COUNT; i++)
    if (!strcmp(name, packing_names[i])) return i;
  return -1;
}

const char *kt__packing_name(kt__packing p) { return packing_names[p]; }

static int parse_int(const char *s, char **end, int *out) {
  errno = 0;
  long v = strtol(s, end, 10);
  if (*end == s || errno || v < 1 || v > 1 << 24) return -1;
  *out = (int)v;
  return 0;
}

kt_status kt__doc_spec_parse(const char *text, kt__doc_spec *out, kt_error *err) {
  const char *pre = "lognormal:";
  if (!text || strncmp(text, pre, strlen(pre)))
    return kt_fail(err, KT_EINVAL, "--doc-lengths %s: expected lognormal:SIGMA:MIN:MAX",
                   text ? text : "(none)");
  const char *p = text + strlen(pre);
  char *end;
  errno = 0;
  double sigma = strtod(p, &end);
  if (end == p || *end != ':' || errno || !isfinite(sigma) || sigma < 0 || sigma > 10)
    return kt_fail(err, KT_EINVAL, "--doc-lengths %s: SIGMA must be a number in 0..10", text);
  int lo, hi;
  if (parse_int(end + 1, &end, &lo) || *end != ':' || parse_int(end + 1, &end, &hi) || *end)
    return kt_fail(err, KT_EINVAL, "--doc-lengths %s: MIN and MAX must be whole tokens >= 1",
                   text);
  if (lo > hi) return kt_fail(err, KT_EINVAL, "--doc-lengths %s: MIN %d exceeds MAX %d", text, lo, hi);
  *out = (kt__doc_spec){sigma, lo, hi};
  return KT_OK;
}

uint64_t kt__doc_rand(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static double uniform01(uint64_t *s) { return ((double)(kt__doc_rand(s) >> 11) + 0.5) / 9007199254740992.0; }

int kt__doc_length_draw(const kt__doc_spec *s, uint64_t *state) {
  double u1 = uniform01(state), u2 = uniform01(state);
  double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
  double mu = 0.5 * (log((double)s->min) + log((double)s->max));
  double L = floor(exp(mu + s->sigma * z) + 0.5);
  return L < s->min ? s->min : L > s->max ? s->max : (int)L;
}

/* fifo: micro-batch j fills in order; returns the documents used. */
static int pack_fifo(const int *len, int n, int M, int budget, int *mb_of) {
  int j = 0, used = 0, i = 0;
  for (; i < n; i++) {
    if (len[i] > budget) { mb_of[i] = -1; continue; }
    if (used + len[i] > budget) j++, used = 0;
    if (j == M) break;
    mb_of[i] = j;
    used += len[i];
  }
  for (; i < n; i++) mb_of[i] = -1;
  return 0;
}

/* Keys (L << 32) | (2^32 - 1 - i): descending order is longest first, then
 * data order. */
static int key_desc(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x < y) - (x > y);
}

/* Longest first onto the least-loaded micro-batch with room. */
static void pack_lpt(const int *len, int n, int M, int budget, double attn, int *mb_of,
                     double *work, int *tokens) {
  uint64_t *key = malloc((size_t)(n > 0 ? n : 1) * sizeof *key);
  int k = 0;
  if (!key) return; /* keeps fifo's assignment */
  for (int i = 0; i < n; i++)
    if (mb_of[i] >= 0) key[k++] = (uint64_t)len[i] << 32 | (uint32_t)(UINT32_MAX - (uint32_t)i);
  qsort(key, (size_t)k, sizeof *key, key_desc);
  for (int j = 0; j < M; j++) work[j] = 0, tokens[j] = 0;
  for (int t = 0; t < k; t++) {
    int i = (int)(UINT32_MAX - (uint32_t)key[t]), best = -1;
    for (int j = 0; j < M; j++)
      if (tokens[j] + len[i] <= budget && (best < 0 || work[j] < work[best])) best = j;
    mb_of[i] = best;
    if (best < 0) continue;
    tokens[best] += len[i];
    work[best] += len[i] + (double)len[i] * len[i] / attn;
  }
  free(key);
}

int kt__pack(kt__packing how, const int *len, int n, int M, int budget, double attn_tokens,
             int *mb_of, int *order) {
  pack_fifo(len, n, M, budget, mb_of);
  for (int j = 0; j < M; j++) order[j] = j;
  double *work = how == KT__PACK_BALANCED ? calloc((size_t)M, sizeof *work) : NULL;
  int *tokens = work ? calloc((size_t)M, sizeof *tokens) : NULL;
  if (tokens) {
    pack_lpt(len, n, M, budget, attn_tokens > 0 ? attn_tokens : 1, mb_of, work, tokens);
    for (int a = 1; a < M; a++) /* heaviest first (insertion sort, stable) */
      for (int b = a; b > 0 && work[order[b]] > work[order[b - 1]]; b--) {
        int t = order[b];
        order[b] = order[b - 1], order[b - 1] = t;
      }
  }
  free(work);
  free(tokens);
  int assigned = 0;
  for (int i = 0; i < n; i++) assigned += mb_of[i] >= 0;
  return assigned;
}
