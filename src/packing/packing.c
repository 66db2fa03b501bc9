/* Documents into micro-batches (fifo, balanced), the synthetic document
 * lengths, and the per-micro-batch costs of a packing. The order search
 * is in order.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "packing/internal.h"

static const char *const packing_names[] = {"fifo", "balanced"};
_Static_assert(sizeof packing_names / sizeof *packing_names == KT_PACK_COUNT,
               "one name per packing");

const char *kt_packing_name(kt_packing p) {
  return (unsigned)p < KT_PACK_COUNT ? packing_names[p] : "?";
}

int kt_packing_from_name(const char *name) {
  return kt_name_index(name, packing_names, KT_PACK_COUNT);
}

/* ---- synthetic documents ------------------------------------------------------ */

#define MAX_DOC_TOKENS 1048576

kt_status kt_doc_lengths_parse(const char *text, kt_doc_lengths *out, kt_error *err) {
  const char *pre = "lognormal:";
  if (!text || strncmp(text, pre, strlen(pre)))
    return kt_fail(err, KT_EINVAL, "doc-lengths '%.40s': expected lognormal:SIGMA:MIN:MAX",
                   text ? text : "");
  char buf[96];
  if (strlen(text) >= sizeof buf)
    return kt_fail(err, KT_EINVAL, "doc-lengths '%.40s...': too long", text);
  strcpy(buf, text + strlen(pre));
  char *parts[3] = {buf, NULL, NULL};
  for (int i = 1; i < 3; i++) {
    char *colon = parts[i - 1] ? strchr(parts[i - 1], ':') : NULL;
    if (colon) *colon = 0, parts[i] = colon + 1;
  }
  long lo, hi;
  if (!parts[2] || strchr(parts[2], ':'))
    return kt_fail(err, KT_EINVAL, "doc-lengths '%.40s': expected lognormal:SIGMA:MIN:MAX", text);
  if (kt_parse_double(parts[0], &out->sigma) || !(out->sigma >= 0 && out->sigma <= 16))
    return kt_fail(err, KT_EINVAL, "doc-lengths '%.40s': SIGMA '%s' must be a number in 0..16",
                   text, parts[0]);
  if (kt_parse_int(parts[1], 1, MAX_DOC_TOKENS, &lo) ||
      kt_parse_int(parts[2], 1, MAX_DOC_TOKENS, &hi) || lo > hi)
    return kt_fail(err, KT_EINVAL,
                   "doc-lengths '%.40s': MIN '%s' and MAX '%s' must be token counts "
                   "with 1 <= MIN <= MAX <= %d",
                   text, parts[1], parts[2], MAX_DOC_TOKENS);
  out->min = (int)lo, out->max = (int)hi;
  return KT_OK;
}

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* A uniform number in (0, 1). */
static double uniform01(uint64_t *x) {
  return ((double)(splitmix64(x) >> 11) + 0.5) / 9007199254740992.0;
}

void kt_doc_lengths_sample(const kt_doc_lengths *spec, uint64_t seed, int n, int *len) {
  uint64_t x = seed;
  double mu = 0.5 * (log((double)spec->min) + log((double)spec->max));
  for (int i = 0; i < n; i++) {
    double u1 = uniform01(&x), u2 = uniform01(&x);
    double z = sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
    double l = floor(exp(mu + spec->sigma * z) + 0.5);
    len[i] = l < spec->min ? spec->min : l > spec->max ? spec->max : (int)l;
  }
}

/* ---- packing ------------------------------------------------------------------ */

void kt_pack_free(kt_pack *pk) {
  free(pk->tokens), free(pk->sq), free(pk->first), free(pk->doc_of), free(pk->order);
  memset(pk, 0, sizeof *pk);
}

static kt_status pack_alloc(kt_pack *pk, int m, int n_docs, kt_error *err) {
  memset(pk, 0, sizeof *pk);
  pk->m = m, pk->n_docs = n_docs;
  pk->tokens = kt_calloc((size_t)m, sizeof *pk->tokens);
  pk->sq = kt_calloc((size_t)m, sizeof *pk->sq);
  pk->first = kt_calloc((size_t)m + 1, sizeof *pk->first);
  pk->doc_of = kt_calloc((size_t)n_docs + 1, sizeof *pk->doc_of);
  pk->order = kt_calloc((size_t)m, sizeof *pk->order);
  if (!pk->tokens || !pk->sq || !pk->first || !pk->doc_of || !pk->order) {
    kt_pack_free(pk);
    return kt_fail(err, KT_ENOMEM, "out of memory packing %d documents", n_docs);
  }
  for (int k = 0; k < m; k++) pk->order[k] = k;
  return KT_OK;
}

/* The documents fifo takes for a step: *n_docs of them in *used micro-batches. */
static void fifo_extent(const int *len, int n, int m, int budget, int *n_docs, int *used) {
  int k = 0, fill = 0, i = 0;
  for (; i < n; i++) {
    if (fill + len[i] > budget) {
      if (k + 1 >= m) break;
      k++, fill = 0;
    }
    fill += len[i];
  }
  *n_docs = i, *used = n ? k + 1 : 0;
}

static void fifo_pack(const int *len, kt_pack *pk, int budget) {
  int k = 0;
  for (int i = 0; i < pk->n_docs; i++) {
    if (pk->tokens[k] + len[i] > budget) pk->first[++k] = i;
    pk->doc_of[i] = i;
    pk->tokens[k] += len[i], pk->sq[k] += (double)len[i] * len[i];
  }
  for (int j = k + 1; j <= pk->m; j++) pk->first[j] = pk->n_docs;
}

/* A micro-batch's relative cost (kt_token_model): what balanced evens out. */
double kt__pack_load(const kt_token_model *tm, double tokens, double sq) {
  double b = tm->budget;
  return (1 - tm->attn) * tokens / b + tm->attn * sq / (b * b);
}
#define load kt__pack_load

double kt_pack_load(const kt_pack *pk, const kt_token_model *model, int k) {
  int b = pk->order[k];
  return load(model, pk->tokens[b], pk->sq[b]);
}

typedef struct {
  int len, i;
} doc;

static int longer_first(const void *a, const void *b) {
  const doc *x = a, *y = b;
  if (x->len != y->len) return y->len - x->len;
  return x->i - y->i;
}

/* The micro-batches as a binary min-heap on (load, index): the order the
 * first-cheapest scan picks them in. */
typedef struct {
  int *at, n;
  const kt_pack *pk;
  const kt_token_model *tm;
} bin_heap;

static int cheaper(const bin_heap *h, int a, int b) {
  double la = load(h->tm, h->pk->tokens[a], h->pk->sq[a]);
  double lb = load(h->tm, h->pk->tokens[b], h->pk->sq[b]);
  return la < lb || (la == lb && a < b);
}

static void heap_push(bin_heap *h, int k) {
  int i = h->n++;
  for (; i > 0 && cheaper(h, k, h->at[(i - 1) / 2]); i = (i - 1) / 2) h->at[i] = h->at[(i - 1) / 2];
  h->at[i] = k;
}

static int heap_pop(bin_heap *h) {
  int top = h->at[0], last = h->at[--h->n], i = 0;
  for (int c; (c = 2 * i + 1) < h->n; i = c) {
    if (c + 1 < h->n && cheaper(h, h->at[c + 1], h->at[c])) c++;
    if (!cheaper(h, h->at[c], last)) break;
    h->at[i] = h->at[c];
  }
  if (h->n) h->at[i] = last;
  return top;
}

/* The cheapest micro-batch with room for a document of len tokens (-1:
 * none), taken off the heap; those passed over go back, except any too
 * full for the shortest document still to come (shortest). */
static int cheapest_with_room(bin_heap *h, int len, int shortest, int *skipped) {
  int n_skip = 0, best = -1;
  while (h->n && best < 0) {
    int k = heap_pop(h);
    if (h->pk->tokens[k] + len <= h->tm->budget) best = k;
    else if (h->pk->tokens[k] + shortest <= h->tm->budget) skipped[n_skip++] = k;
  }
  for (int j = 0; j < n_skip; j++) heap_push(h, skipped[j]);
  return best;
}

/* LPT: documents longest first, each onto the cheapest micro-batch with room. */
static kt_status balanced_pack(const int *len, kt_pack *pk, const kt_token_model *tm,
                               kt_error *err) {
  int n = pk->n_docs, m = pk->m;
  doc *idx = malloc(sizeof(doc) * (size_t)(n + 1));
  int *bin = malloc(sizeof(int) * (size_t)(n + 1));
  int *heap = malloc(sizeof(int) * 2 * (size_t)m);
  if (!idx || !bin || !heap) {
    free(idx), free(bin), free(heap);
    return kt_fail(err, KT_ENOMEM, "out of memory packing %d documents", n);
  }
  for (int i = 0; i < n; i++) idx[i] = (doc){len[i], i};
  qsort(idx, (size_t)n, sizeof *idx, longer_first);
  bin_heap h = {heap, 0, pk, tm};
  for (int k = 0; k < m; k++) heap_push(&h, k);
  for (int r = 0; r < n; r++) {
    int i = idx[r].i, best = cheapest_with_room(&h, len[i], idx[n - 1].len, heap + m);
    bin[i] = best;
    if (best < 0) {
      pk->left_out++;
      continue;
    }
    pk->tokens[best] += len[i], pk->sq[best] += (double)len[i] * len[i];
    heap_push(&h, best);
  }
  /* documents grouped by micro-batch, in data order inside each */
  for (int k = 0; k <= m; k++) pk->first[k] = 0;
  for (int i = 0; i < n; i++)
    if (bin[i] >= 0) pk->first[bin[i] + 1]++;
  for (int k = 0; k < m; k++) pk->first[k + 1] += pk->first[k];
  for (int i = 0; i < n; i++) /* first[k] walks micro-batch k's slots, then is set back */
    if (bin[i] >= 0) pk->doc_of[pk->first[bin[i]]++] = i;
  for (int k = m; k > 0; k--) pk->first[k] = pk->first[k - 1];
  pk->first[0] = 0;
  free(idx), free(bin), free(heap);
  return KT_OK;
}

static kt_status check_model(const kt_token_model *tm, kt_error *err) {
  if (tm->budget < 1 || tm->budget > MAX_DOC_TOKENS * 64)
    return kt_fail(err, KT_EINVAL, "tokens %d: a micro-batch's token budget must be 1..%d",
                   tm->budget, MAX_DOC_TOKENS * 64);
  if (!(tm->attn >= 0 && tm->attn <= 1))
    return kt_fail(err, KT_EINVAL, "attn-share %g: expected a fraction in 0..1", tm->attn);
  return KT_OK;
}

kt_status kt_pack_documents(const int *len, int n, int m, const kt_token_model *model,
                            kt_packing how, kt_pack *out, kt_error *err) {
  memset(out, 0, sizeof *out);
  kt_status st = check_model(model, err);
  if (st) return st;
  if (m < 1 || m > KT_MAX_MICROBATCHES || n < 0)
    return kt_fail(err, KT_EINVAL, "packing %d documents into %d micro-batches", n, m);
  if ((unsigned)how >= KT_PACK_COUNT)
    return kt_fail(err, KT_EINVAL, "packing %d: unknown", (int)how);
  for (int i = 0; i < n; i++)
    if (len[i] < 1 || len[i] > model->budget)
      return kt_fail(err, KT_EINVAL,
                     "document %d has %d tokens: a micro-batch holds 1..%d (tokens)", i, len[i],
                     model->budget);
  int n_docs, used;
  fifo_extent(len, n, m, model->budget, &n_docs, &used);
  if ((st = pack_alloc(out, m, n_docs, err))) return st;
  out->how = how;
  if (how == KT_PACK_FIFO) fifo_pack(len, out, model->budget);
  else st = balanced_pack(len, out, model, err);
  if (st) kt_pack_free(out);
  return st;
}

kt_status kt_pack_given(const int *len, const double *sq, int m, kt_pack *out, kt_error *err) {
  if (m < 1 || m > KT_MAX_MICROBATCHES)
    return kt_fail(err, KT_EINVAL, "%d micro-batches: expected 1..%d", m, KT_MAX_MICROBATCHES);
  for (int k = 0; k < m; k++)
    if (len[k] < 0 || (sq && !(sq[k] >= 0 && isfinite(sq[k]))))
      return kt_fail(err, KT_EINVAL, "micro-batch %d: %d tokens: expected a count >= 0", k, len[k]);
  kt_status st = pack_alloc(out, m, m, err);
  if (st) return st;
  for (int k = 0; k < m; k++) {
    out->tokens[k] = len[k], out->sq[k] = sq ? sq[k] : (double)len[k] * len[k];
    out->first[k] = k, out->doc_of[k] = k;
  }
  out->first[m] = m;
  return KT_OK;
}

kt_status kt_pack_costs(const kt_pack *pk, const kt_token_model *model, const kt_costs *base, int S,
                        kt_costs *out, kt_error *err) {
  kt_status st = check_model(model, err);
  if (st) return st;
  if (S < 1 || S > KT_MAX_RANKS * KT_MAX_CHUNKS) return kt_fail(err, KT_EINVAL, "%d stages", S);
  if (kt_costs_copy(out, base)) return kt_fail(err, KT_ENOMEM, "out of memory");
  double *vals = malloc(sizeof(double) * (size_t)S * (size_t)pk->m);
  if (!vals) {
    kt_costs_free(out);
    return kt_fail(err, KT_ENOMEM, "out of memory");
  }
  static const char *const fields[] = {"tf", "tb", "tw", "mem-act", "mem-wgrad"};
  double (*const stage_value[])(const kt_costs *, int) = {kt_cost_tf, kt_cost_tb, kt_cost_tw,
                                                          kt_cost_mem_act, kt_cost_mem_wgrad};
  for (int f = 0; f < 5 && !st; f++) {
    for (int s = 0; s < S; s++)
      for (int k = 0; k < pk->m; k++) {
        int b = pk->order[k];
        double scale =
            f < 3 ? load(model, pk->tokens[b], pk->sq[b]) : (double)pk->tokens[b] / model->budget;
        vals[(size_t)s * (size_t)pk->m + (size_t)k] = stage_value[f](base, s) * scale;
      }
    st = kt_costs_set_mb(out, fields[f], vals, S, pk->m, err);
  }
  free(vals);
  if (st) kt_costs_free(out);
  return st;
}
