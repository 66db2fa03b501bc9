/* Activation stash keyed by micro-batch, with a buffer pool; and the
 * allocation of large tensors. */
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

#include "nn/nn.h"

#define HUGE_PAGE ((size_t)2 << 20)

/* Tensors of a few MiB are read by sgemm in strided panels: on 4 KiB pages
 * every panel row is another TLB entry. Buffers of at least a huge page are
 * aligned to one and offered to transparent huge pages (where the kernel's
 * policy is "madvise", the default on Debian); smaller ones start on a
 * cache line. malloc's own blocks start 16 bytes into one (glibc), so every
 * 64-byte vector a kernel loads or stores in them straddles two lines. */
float *kt__alloc_floats(size_t n) {
  size_t bytes = n * sizeof(float) + 64;
  void *p = NULL;
  if (bytes < HUGE_PAGE) return posix_memalign(&p, 64, bytes) ? NULL : p;
  bytes = (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE;
  if (posix_memalign(&p, HUGE_PAGE, bytes)) return NULL;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  madvise(p, bytes, MADV_HUGEPAGE); /* advice only: ignore a refusal */
#endif
  return p;
}

kt_status kt__stash_init(kt__stash *s, int n_microbatches, kt_error *err) {
  memset(s, 0, sizeof *s);
  s->n_slots = n_microbatches;
  s->slot = kt_calloc((size_t)n_microbatches, sizeof *s->slot);
  s->size = kt_calloc((size_t)n_microbatches, sizeof *s->size);
  s->cap = kt_calloc((size_t)n_microbatches, sizeof *s->cap);
  s->pool = kt_calloc((size_t)n_microbatches, sizeof *s->pool);
  s->pool_cap = kt_calloc((size_t)n_microbatches, sizeof *s->pool_cap);
  if (!s->slot || !s->size || !s->cap || !s->pool || !s->pool_cap) {
    kt__stash_free(s);
    return kt_fail(err, KT_ENOMEM, "out of memory for the activation stash");
  }
  return KT_OK;
}

void kt__stash_free(kt__stash *s) {
  if (s->slot)
    for (int i = 0; i < s->n_slots; i++) free(s->slot[i]);
  if (s->pool)
    for (int i = 0; i < s->n_pool; i++) free(s->pool[i]);
  free(s->slot);
  free(s->size);
  free(s->cap);
  free(s->pool);
  free(s->pool_cap);
  memset(s, 0, sizeof *s);
}

float *kt__stash_acquire(kt__stash *s, kt_chunk *c, int mb, size_t floats) {
  if (mb < 0 || mb >= s->n_slots) return NULL;
  if (s->slot[mb] && s->cap[mb] >= floats) {
    c->stash_bytes += (floats - s->size[mb]) * sizeof(float);
    s->size[mb] = floats;
  } else {
    /* take the smallest pooled buffer that fits, else allocate */
    int best = -1;
    for (int i = 0; i < s->n_pool; i++)
      if (s->pool_cap[i] >= floats && (best < 0 || s->pool_cap[i] < s->pool_cap[best])) best = i;
    float *buf;
    size_t cap;
    if (best >= 0) {
      buf = s->pool[best];
      cap = s->pool_cap[best];
      s->pool[best] = s->pool[--s->n_pool];
      s->pool_cap[best] = s->pool_cap[s->n_pool];
    } else {
      buf = kt__alloc_floats(floats);
      cap = floats;
      if (!buf) return NULL;
    }
    if (s->slot[mb]) { /* growing: keep the contents (none with sizes only) */
      if (!c->sizes_only) memcpy(buf, s->slot[mb], s->size[mb] * sizeof(float));
      c->stash_bytes -= s->size[mb] * sizeof(float);
      free(s->slot[mb]);
    }
    s->slot[mb] = buf;
    s->cap[mb] = cap;
    s->size[mb] = floats;
    c->stash_bytes += floats * sizeof(float);
  }
  if (c->stash_bytes > c->peak_stash_bytes) c->peak_stash_bytes = c->stash_bytes;
  return s->slot[mb];
}

void kt__stash_release(kt__stash *s, kt_chunk *c, int mb) {
  if (mb < 0 || mb >= s->n_slots || !s->slot[mb]) return;
  c->stash_bytes -= s->size[mb] * sizeof(float);
  if (s->n_pool < s->n_slots) {
    s->pool[s->n_pool] = s->slot[mb];
    s->pool_cap[s->n_pool++] = s->cap[mb];
  } else {
    free(s->slot[mb]);
  }
  s->slot[mb] = NULL;
  s->size[mb] = s->cap[mb] = 0;
}
