/* What the front binary replaces of the C library when it is linked
 * against musl (CMakeLists.txt: KT_MUSL_FRONT): the memory allocator and
 * memcpy. musl starts a process in a third of what glibc takes on a
 * virtual machine (glibc asks the CPU for its cache sizes through dozens of
 * CPUID instructions, each a trap to the hypervisor), but:
 *
 * - its allocator hands freed pages straight back to the kernel: a small
 *   `sim` mapped and unmapped 17 pages, each a system call and a page fault
 *   later, and spent more in that than in its scheduling. This one keeps
 *   what is freed: blocks of 16 bytes to 1 MiB in power-of-two classes,
 *   each class a free list over 4 MiB regions that are never unmapped;
 *   larger blocks are mapped whole (the kernel's fresh pages are zero, so
 *   calloc skips clearing them), grown by moving their pages (mremap), and
 *   when freed, up to 16 of them and 128 MiB in all are kept for a later
 *   request of half their size or more (fresh pages cost a fault and a
 *   clearing each: a tenth of a P=64, M=1024 `sim`), as glibc does. The
 *   front runs one thread; a spin lock keeps the lists whole should that
 *   change.
 * - its x86-64 memcpy starts every copy with `rep movsq`, slow to start
 *   for the few bytes a JSON token is: a 25 MB `--format json` spent a
 *   fifth of its time there. This one copies up to 64 bytes with moves
 *   and hands longer copies to `rep movsb`.
 *
 * musl allows a program to replace malloc, free, calloc, realloc and
 * their relatives, and memcpy (on x86-64 with __memcpy_fwd, the forward
 * copy its memmove calls, which lives in the same object; a musl that
 * moved it would fail to link, not misbehave). */
#define _GNU_SOURCE /* mremap */
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HEADER 16 /* keeps every block 16-byte aligned */
#define CLASSES 17 /* 16 B << 0 .. 16 B << 16 = 1 MiB */
#define REGION ((size_t)4 << 20)
#define MAPPED CLASSES /* the class of a block mapped on its own, its pages fresh (zero) */
#define MAPPED_USED (CLASSES + 1) /* the same, handed out before */
#define KEEP_BLOCKS 16 /* freed mapped blocks kept for reuse ... */
#define KEEP_BYTES ((size_t)128 << 20) /* ... up to this much in all */

typedef struct {
  size_t cls;
  size_t mapped; /* bytes mapped, for a MAPPED block */
} header;

static void *free_list[CLASSES];
static header *kept[KEEP_BLOCKS]; /* freed mapped blocks */
static int n_kept;
static size_t kept_bytes;
static char *region, *region_end;
static atomic_flag lock = ATOMIC_FLAG_INIT;

/* Prototypes for the replacements musl does not declare. */
size_t malloc_usable_size(void *p);
void *memalign(size_t align, size_t n);

static void take(void) {
  while (atomic_flag_test_and_set_explicit(&lock, memory_order_acquire)) {
  }
}
static void give(void) { atomic_flag_clear_explicit(&lock, memory_order_release); }

static header *header_of(void *p) { return (header *)((char *)p - HEADER); }

static size_t capacity(void *p) {
  header *h = header_of(p);
  return h->cls >= MAPPED ? h->mapped - HEADER : (size_t)16 << h->cls;
}

/* The smallest kept block of len to 2 len bytes, taken out of the kept
 * ones, or NULL. */
static header *reuse(size_t len) {
  int at = -1;
  for (int k = 0; k < n_kept; k++)
    if (kept[k]->mapped >= len && kept[k]->mapped / 2 <= len &&
        (at < 0 || kept[k]->mapped < kept[at]->mapped))
      at = k;
  if (at < 0) return NULL;
  header *h = kept[at];
  kept[at] = kept[--n_kept];
  kept_bytes -= h->mapped;
  return h;
}

static void *map_alone(size_t n) {
  size_t len = (n + HEADER + 4095) & ~(size_t)4095;
  if (len < n) return NULL;
  take();
  header *old = reuse(len);
  give();
  if (old) { /* glibc too serves a large request from freed memory, not fresh pages */
    old->cls = MAPPED_USED;
    return (char *)old + HEADER;
  }
  char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return NULL;
  header *h = (header *)p;
  h->cls = MAPPED, h->mapped = len;
  return p + HEADER;
}

static void *from_class(size_t cls) {
  void *p = free_list[cls];
  if (p) {
    free_list[cls] = *(void **)p;
    return p;
  }
  size_t need = HEADER + ((size_t)16 << cls);
  if ((size_t)(region_end - region) < need) {
    char *r = mmap(NULL, REGION, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED) return NULL;
    region = r, region_end = r + REGION;
  }
  header *h = (header *)region;
  h->cls = cls, h->mapped = 0;
  region += need;
  return (char *)h + HEADER;
}

/* malloc's work, under a name the compiler gives no meaning to (it would
 * otherwise reason about, or merge, the calls below as the C library's). */
static void *allocate(size_t n) {
  void *p;
  if (n > (size_t)16 << (CLASSES - 1)) {
    p = map_alone(n);
  } else {
    size_t cls = 0;
    while (((size_t)16 << cls) < n) cls++;
    take();
    p = from_class(cls);
    give();
  }
  if (!p) errno = ENOMEM;
  return p;
}

void *malloc(size_t n) { return allocate(n); }

void free(void *p) {
  if (!p) return;
  header *h = header_of(p);
  if (h->cls >= MAPPED) {
    take();
    int keep = n_kept < KEEP_BLOCKS && kept_bytes + h->mapped <= KEEP_BYTES;
    if (keep) kept[n_kept++] = h, kept_bytes += h->mapped;
    give();
    if (!keep) munmap(h, h->mapped);
    return;
  }
  take();
  *(void **)p = free_list[h->cls];
  free_list[h->cls] = p;
  give();
}

void *calloc(size_t count, size_t size) {
  size_t n;
  if (__builtin_mul_overflow(count, size, &n)) {
    errno = ENOMEM;
    return NULL;
  }
  void *p = allocate(n);
  if (p && header_of(p)->cls != MAPPED) memset(p, 0, n);
  return p;
}

void *realloc(void *p, size_t n) {
  if (!p) return allocate(n);
  size_t have = capacity(p);
  if (n && n <= have) return p;
  header *h = header_of(p);
  if (h->cls >= MAPPED) { /* the kernel moves the pages: no copy, no fresh zeroed pages */
    size_t len = (n + HEADER + 4095) & ~(size_t)4095;
    if (len < n) {
      errno = ENOMEM;
      return NULL;
    }
    void *r = mremap(h, h->mapped, len, MREMAP_MAYMOVE);
    if (r == MAP_FAILED) {
      errno = ENOMEM;
      return NULL;
    }
    h = r;
    h->mapped = len;
    return (char *)r + HEADER;
  }
  void *q = allocate(n);
  if (!q) return NULL;
  memcpy(q, p, have < n ? have : n);
  free(p);
  return q;
}

size_t malloc_usable_size(void *p) { return p ? capacity(p) : 0; }

/* Alignments above 16 bytes are not asked for in kaiten: refused, never
 * wrong. */
void *aligned_alloc(size_t align, size_t n) {
  if (align > HEADER) {
    errno = EINVAL;
    return NULL;
  }
  return allocate(n);
}

void *memalign(size_t align, size_t n) { return aligned_alloc(align, n); }

int posix_memalign(void **out, size_t align, size_t n) {
  if (align > HEADER) return EINVAL;
  void *p = allocate(n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}

/* ---- memcpy -------------------------------------------------------------- */

void *__memcpy_fwd(void *restrict d, const void *restrict s, size_t n);

/* Eight bytes from s to d (an unaligned load and store). */
static void copy8(unsigned char *d, const unsigned char *s) {
  uint64_t x;
  __builtin_memcpy(&x, s, 8);
  __builtin_memcpy(d, &x, 8);
}

void *memcpy(void *restrict d, const void *restrict s, size_t n) {
  unsigned char *dp = d;
  const unsigned char *sp = s;
  if (n <= 16) { /* two overlapping moves cover the range */
    if (n >= 8) {
      uint64_t a, b;
      __builtin_memcpy(&a, sp, 8), __builtin_memcpy(&b, sp + n - 8, 8);
      __builtin_memcpy(dp, &a, 8), __builtin_memcpy(dp + n - 8, &b, 8);
    } else if (n >= 4) {
      uint32_t a, b;
      __builtin_memcpy(&a, sp, 4), __builtin_memcpy(&b, sp + n - 4, 4);
      __builtin_memcpy(dp, &a, 4), __builtin_memcpy(dp + n - 4, &b, 4);
    } else if (n) {
      unsigned char a = sp[0], b = sp[n / 2], c = sp[n - 1];
      dp[0] = a, dp[n / 2] = b, dp[n - 1] = c;
    }
    return d;
  }
  if (n <= 64) { /* 16 bytes at a time, the last 16 overlapping */
    for (size_t k = 0; k + 16 <= n; k += 16) copy8(dp + k, sp + k), copy8(dp + k + 8, sp + k + 8);
    uint64_t a, b;
    __builtin_memcpy(&a, sp + n - 16, 8), __builtin_memcpy(&b, sp + n - 8, 8);
    __builtin_memcpy(dp + n - 16, &a, 8), __builtin_memcpy(dp + n - 8, &b, 8);
    return d;
  }
  __asm__ volatile("rep movsb" : "+D"(dp), "+S"(sp), "+c"(n) : : "memory");
  return d;
}

/* memmove's forward copy (destination below the source): byte by byte in
 * order, which an overlap cannot disturb. */
void *__memcpy_fwd(void *restrict d, const void *restrict s, size_t n) {
  void *r = d;
  __asm__ volatile("rep movsb" : "+D"(d), "+S"(s), "+c"(n) : : "memory");
  return r;
}
