/* src/cli/front_libc.c, the allocator and memcpy of the musl front, checked
 * directly (tests/front.cmake builds this with musl-gcc beside it, as the
 * front is built; the sanitizers cannot see into a replaced allocator):
 * copies and overlapping moves of every small length and offset against a
 * byte loop, and the allocator's promises (16-byte alignment, calloc's
 * zeros also in a reused block, realloc keeping the contents across its
 * classes, its mapped blocks and their growth, no two live blocks
 * overlapping). Exits 1 on the first failure, naming it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fails;
#define EXPECT(cond, ...)                                          \
  do {                                                             \
    if (!(cond)) {                                                 \
      fprintf(stderr, "front_libc_check: " __VA_ARGS__);           \
      fputc('\n', stderr);                                         \
      fails++;                                                     \
    }                                                              \
  } while (0)

static uint64_t state = 88172645463325252ull;
static uint64_t draw(void) {
  state ^= state << 13, state ^= state >> 7, state ^= state << 17;
  return state;
}

static void fill(unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = (unsigned char)draw();
}

/* memcpy and memmove of every length to 300 at every offset pair mod 16,
 * and longer ones, against byte loops. */
static void check_copies(void) {
  static unsigned char src[5000], dst[5000], want[5000];
  for (size_t n = 0; n <= 300; n++)
    for (size_t so = 0; so < 16; so++)
      for (size_t dof = 0; dof < 16; dof += 3) {
        fill(src, sizeof src), fill(dst, sizeof dst);
        memcpy(want, dst, sizeof dst);
        for (size_t i = 0; i < n; i++) want[dof + i] = src[so + i];
        memcpy(dst + dof, src + so, n);
        EXPECT(!memcmp(dst, want, sizeof dst), "memcpy of %zu bytes (offsets %zu, %zu)", n, so, dof);
      }
  for (int k = 0; k < 3000; k++) { /* overlapping moves, both directions */
    size_t n = (size_t)(draw() % 4000), from = (size_t)(draw() % 900), to = (size_t)(draw() % 900);
    fill(dst, sizeof dst);
    memcpy(want, dst, sizeof dst);
    memcpy(src, dst + from, n); /* what the move carries */
    for (size_t i = 0; i < n; i++) want[to + i] = src[i];
    memmove(dst + to, dst + from, n);
    EXPECT(!memcmp(dst, want, sizeof dst), "memmove of %zu bytes from %zu to %zu", n, from, to);
  }
}

/* Blocks of every class and beyond stay aligned, apart and whole. */
static void check_blocks(void) {
  enum { N = 400 };
  unsigned char *p[N];
  size_t len[N];
  for (int round = 0; round < 6; round++) {
    for (int i = 0; i < N; i++) {
      int big = draw() % 50 == 0;
      len[i] = big ? (size_t)(draw() % (3u << 20)) + (1u << 20) : (size_t)(draw() % 5000);
      p[i] = malloc(len[i]);
      EXPECT(p[i] != NULL && (uintptr_t)p[i] % 16 == 0, "malloc(%zu): %p", len[i], (void *)p[i]);
      if (!p[i]) return;
      memset(p[i], i & 0xff, len[i]);
    }
    for (int i = 0; i < N; i++) { /* nothing overwrote another block */
      size_t bad = 0;
      for (size_t k = 0; k < len[i]; k++) bad += p[i][k] != (unsigned char)(i & 0xff);
      EXPECT(!bad, "block %d of %zu bytes: %zu bytes changed", i, len[i], bad);
    }
    for (int i = 0; i < N; i += 1 + round % 2) { /* grow or shrink half or all of them */
      size_t n = draw() % 3 ? len[i] * 2 + 1 : len[i] / 3;
      unsigned char *q = realloc(p[i], n);
      EXPECT(q != NULL, "realloc to %zu", n);
      if (!q) return;
      size_t keep = n < len[i] ? n : len[i], bad = 0;
      for (size_t k = 0; k < keep; k++) bad += q[k] != (unsigned char)(i & 0xff);
      EXPECT(!bad, "realloc of %zu to %zu bytes lost %zu of them", len[i], n, bad);
      memset(q, i & 0xff, n); /* all of it is the caller's now */
      p[i] = q, len[i] = n;
    }
    for (int i = 0; i < N; i++) { /* and no grown block reached into another */
      size_t bad = 0;
      for (size_t k = 0; k < len[i]; k++) bad += p[i][k] != (unsigned char)(i & 0xff);
      EXPECT(!bad, "block %d of %zu bytes after realloc: %zu bytes changed", i, len[i], bad);
      free(p[i]);
    }
    /* calloc: zeros, in fresh and in reused blocks alike */
    for (int i = 0; i < 40; i++) {
      size_t n = i % 4 == 0 ? (size_t)(draw() % (2u << 20)) + (1u << 20) : (size_t)(draw() % 3000);
      unsigned char *z = calloc(n, 1);
      EXPECT(z != NULL, "calloc(%zu)", n);
      if (!z) return;
      size_t bad = 0;
      for (size_t k = 0; k < n; k++) bad += z[k] != 0;
      EXPECT(!bad, "calloc(%zu): %zu bytes not zero", n, bad);
      memset(z, 0xab, n);
      free(z);
    }
  }
  EXPECT(calloc((size_t)1 << 62, 16) == NULL, "calloc with an overflowing size");
  EXPECT(malloc(SIZE_MAX - 8) == NULL, "malloc(SIZE_MAX - 8)");
}

int main(void) {
  check_copies();
  check_blocks();
  printf("front_libc_check: %s\n", fails ? "FAIL" : "OK");
  return fails != 0;
}
