/* The memory allocator of the front binary when it is linked against musl
 * (CMakeLists.txt: KT_MUSL_FRONT). musl starts a process in a third of what
 * glibc takes on a virtual machine (glibc asks the CPU for its cache sizes
 * through dozens of CPUID instructions, each a trap to the hypervisor), but
 * its own allocator hands freed pages straight back to the kernel: a small
 * `sim` mapped and unmapped 17 pages, each a system call and a page fault
 * later, and spent more in that than in its scheduling. This one keeps
 * what is freed: blocks of 16 bytes to 1 MiB in power-of-two classes, each
 * class a free list over 4 MiB regions that are never unmapped; larger
 * blocks are mapped and unmapped whole (the kernel's fresh pages are zero,
 * so calloc skips clearing them). The front runs one thread; a spin lock
 * keeps the lists whole should that change. musl allows a program to
 * replace malloc, free, calloc, realloc and their relatives. */
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
#define MAPPED CLASSES /* the class of a block mapped on its own */

typedef struct {
  size_t cls;
  size_t mapped; /* bytes mapped, for a MAPPED block */
} header;

static void *free_list[CLASSES];
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
  return h->cls == MAPPED ? h->mapped - HEADER : (size_t)16 << h->cls;
}

static void *map_alone(size_t n) {
  size_t len = (n + HEADER + 4095) & ~(size_t)4095;
  if (len < n) return NULL;
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
  if (h->cls == MAPPED) {
    munmap(h, h->mapped);
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
