/* The exact search's table of visited states. Two partial orders that have
 * run the same ops (the key: counts per stage, and what each rank may not
 * run next) differ only in their clocks; when every clock of one is no
 * later than the other's, every completion of the later one does no better
 * when applied to the earlier one, so the later one need not be searched.
 * States live in one arena (never freed one by one) under a memory cap;
 * once it is full the table stops learning and only answers. */
#include <stdlib.h>
#include <string.h>

#include "generators/optimal_internal.h"

struct kt__opt_memo {
  uint32_t *bucket; /* entry offset / 8 + 1, 0 = empty */
  size_t mask;
  double *arena;    /* entries, in 8-byte words (headers and keys copied in) */
  size_t used, cap; /* words */
  size_t states;
};

/* An entry: hash, next (offset + 1 in words, 0 = none) and sizes in two
 * words, then the key padded to words, then the values. */
typedef struct {
  uint64_t hash;
  uint32_t next;
  uint16_t key_len, n_vals;
} entry_head;

_Static_assert(sizeof(entry_head) <= 2 * sizeof(double), "an entry's head fits two words");
#define HEAD_WORDS 2
#define MAX_CHECKS 48 /* same-key entries compared before a new one is stored */

kt__opt_memo *kt__opt_memo_new(size_t bytes) {
  kt__opt_memo *mm = kt_calloc(1, sizeof *mm);
  if (!mm) return NULL;
  size_t buckets = 1u << 16;
  while (buckets * 64 < bytes && buckets < ((size_t)1 << 26)) buckets <<= 1;
  mm->bucket = kt_calloc(buckets, sizeof *mm->bucket);
  mm->mask = buckets - 1;
  mm->cap = bytes / 8 > buckets ? bytes / 8 - buckets / 2 : 1024;
  if (mm->cap > (size_t)UINT32_MAX - 1) mm->cap = (size_t)UINT32_MAX - 1;
  mm->arena = malloc(mm->cap * sizeof *mm->arena);
  if (!mm->bucket || !mm->arena) {
    kt__opt_memo_free(mm);
    return NULL;
  }
  return mm;
}

void kt__opt_memo_free(kt__opt_memo *mm) {
  if (!mm) return;
  free(mm->bucket);
  free(mm->arena);
  free(mm);
}

size_t kt__opt_memo_states(const kt__opt_memo *mm) { return mm ? mm->states : 0; }

static uint64_t fnv1a(const uint8_t *k, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ k[i]) * 1099511628211ull;
  return h ? h : 1;
}

static size_t key_words(size_t key_len) { return (key_len + 7) / 8; }

/* -1: a <= b everywhere (a is at least as good); 1: b <= a everywhere; 0: neither. */
static int compare(const double *a, const double *b, size_t n) {
  int a_le = 1, b_le = 1;
  for (size_t i = 0; i < n && (a_le || b_le); i++) {
    double tol = 1e-12 * (1 + (a[i] < 0 ? -a[i] : a[i]));
    if (a[i] > b[i] + tol) a_le = 0;
    if (b[i] > a[i] + tol) b_le = 0;
  }
  return a_le ? -1 : b_le ? 1 : 0;
}

int kt__opt_memo_seen(kt__opt_memo *mm, const uint8_t *key, size_t key_len, const double *vals,
                      size_t n_vals) {
  uint64_t h = fnv1a(key, key_len);
  uint32_t *slot = &mm->bucket[h & mm->mask];
  int checks = 0;
  for (uint32_t at = *slot; at && checks < MAX_CHECKS;) {
    double *e = mm->arena + (at - 1);
    entry_head eh;
    memcpy(&eh, e, sizeof eh);
    if (eh.hash == h && eh.key_len == key_len && eh.n_vals == n_vals &&
        !memcmp(e + HEAD_WORDS, key, key_len)) {
      double *old = e + HEAD_WORDS + key_words(key_len);
      int c = compare(old, vals, n_vals);
      if (c < 0) return 1;
      if (c > 0) { /* the new state is better: it takes the old one's place */
        memcpy(old, vals, n_vals * sizeof *vals);
        return 0;
      }
      checks++;
    }
    at = eh.next;
  }
  size_t words = HEAD_WORDS + key_words(key_len) + n_vals;
  if (mm->used + words > mm->cap) return 0; /* full: answer only */
  double *e = mm->arena + mm->used;
  entry_head eh = {h, *slot, (uint16_t)key_len, (uint16_t)n_vals};
  memcpy(e, &eh, sizeof eh);
  memset(e + HEAD_WORDS, 0, key_words(key_len) * sizeof *e); /* the key's padding */
  memcpy(e + HEAD_WORDS, key, key_len);
  memcpy(e + HEAD_WORDS + key_words(key_len), vals, n_vals * sizeof *vals);
  *slot = (uint32_t)(mm->used + 1);
  mm->used += words;
  mm->states++;
  return 0;
}
