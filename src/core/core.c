/* Status table, error buffers, allocation, parsing and file helpers. */
#include "kaiten/core.h"
#include "kaiten/version.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

static const char *const status_names[] = {
#define X(name, code, msg) #name,
    KT_STATUS_MAP(X)
#undef X
};
static const char *const status_messages[] = {
#define X(name, code, msg) msg,
    KT_STATUS_MAP(X)
#undef X
};
static const int status_codes[] = {
#define X(name, code, msg) code,
    KT_STATUS_MAP(X)
#undef X
};
_Static_assert(sizeof(status_names) / sizeof(status_names[0]) == KT_STATUS_COUNT,
               "status table out of sync");

const char *kt_status_name(kt_status s) {
  return (unsigned)s < KT_STATUS_COUNT ? status_names[s] : "EUNKNOWN";
}

int kt_name_index(const char *name, const char *const *names, int n) {
  for (int i = 0; name && i < n; i++)
    if (names[i] && !strcmp(name, names[i])) return i;
  return -1;
}
const char *kt_status_message(kt_status s) {
  return (unsigned)s < KT_STATUS_COUNT ? status_messages[s] : "unknown status";
}
int kt_status_exit_code(kt_status s) { return (unsigned)s < KT_STATUS_COUNT ? status_codes[s] : 1; }

kt_status kt_fail(kt_error *err, kt_status s, const char *fmt, ...) {
  if (err) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    /* keep it one line */
    for (char *c = err->msg; *c; c++)
      if (*c == '\n' || *c == '\r') *c = ' ';
  }
  return s;
}

void *kt_calloc(size_t n, size_t size) {
  if (n == 0 || size == 0) return calloc(1, 1);
  if (n > SIZE_MAX / size) return NULL;
  return calloc(n, size);
}

void kt_advise_huge(void *p, size_t len) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  const uintptr_t huge = (uintptr_t)2 << 20;
  uintptr_t lo = ((uintptr_t)p + huge - 1) & ~(huge - 1), hi = ((uintptr_t)p + len) & ~(huge - 1);
  /* a hint: a refusal (no THP) leaves the small pages */
  if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
  (void)p, (void)len;
#endif
}

int kt_rank_queue_init(kt_rank_queue *q, int n) {
  *q = (kt_rank_queue){kt_calloc((size_t)n, sizeof *q->ring),
                       kt_calloc((size_t)n, sizeof *q->queued), n, 0, 0};
  if (q->ring && q->queued) return 0;
  kt_rank_queue_free(q);
  return -1;
}

void kt_rank_queue_free(kt_rank_queue *q) {
  free(q->ring);
  free(q->queued);
  *q = (kt_rank_queue){0};
}

void kt_rank_queue_fill(kt_rank_queue *q) {
  for (int r = 0; r < q->n; r++) q->ring[r] = r, q->queued[r] = 1;
  q->head = 0, q->len = q->n;
}

int kt_grow(void **ptr, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return 0;
  size_t c = *cap ? *cap : 16;
  while (c < need) {
    if (c > SIZE_MAX / 2) return -1;
    c *= 2;
  }
  if (c > SIZE_MAX / elem) return -1;
  void *p = realloc(*ptr, c * elem);
  if (!p) return -1;
  *ptr = p;
  *cap = c;
  return 0;
}

int kt_parse_int(const char *s, long lo, long hi, long *out) {
  if (!s || !*s) return -1;
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

int kt_parse_double(const char *s, double *out) {
  if (!s || !*s) return -1;
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || *end || !isfinite(v)) return -1;
  *out = v;
  return 0;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

double kt_median(double *v, size_t n) {
  if (n == 0) return 0;
  qsort(v, n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double kt_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double kt_thread_cpu_now(void) {
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)) return 0;
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

kt_status kt_read_file(const char *path, char **out, size_t *len, kt_error *err) {
  FILE *f = fopen(path, "rb");
  /* a path that names nothing readable is bad input (exit 2), not an I/O failure */
  if (!f)
    return kt_fail(err, errno == ENOENT || errno == ENOTDIR || errno == EACCES ? KT_EINVAL : KT_EIO,
                   "cannot open '%s': %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fileno(f), &sb) == 0 && S_ISDIR(sb.st_mode)) {
    fclose(f);
    return kt_fail(err, KT_EINVAL, "'%s' is a directory, not a file", path);
  }
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  if (!buf) {
    fclose(f);
    return kt_fail(err, KT_ENOMEM, "out of memory reading '%s'", path);
  }
  for (;;) {
    if (n + 1 >= cap) {
      char *nb = cap < SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
      if (!nb) {
        free(buf);
        fclose(f);
        return kt_fail(err, KT_ENOMEM, "out of memory reading '%s'", path);
      }
      buf = nb;
      cap *= 2;
    }
    size_t r = fread(buf + n, 1, cap - n - 1, f);
    n += r;
    if (r == 0) break;
  }
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    free(buf);
    return kt_fail(err, KT_EIO, "error reading '%s'", path);
  }
  buf[n] = 0;
  *out = buf;
  if (len) *len = n;
  return KT_OK;
}

void kt_buf_init(kt_buf *b) { memset(b, 0, sizeof *b); }
void kt_buf_free(kt_buf *b) {
  free(b->data);
  memset(b, 0, sizeof *b);
}

void kt_buf_append(kt_buf *b, const char *s, size_t n) {
  if (b->failed) return;
  if (kt_grow((void **)&b->data, &b->cap, b->len + n + 1, 1) != 0) {
    b->failed = 1;
    return;
  }
  memcpy(b->data + b->len, s, n);
  b->len += n;
  b->data[b->len] = 0;
}

void kt_buf_puts(kt_buf *b, const char *s) { kt_buf_append(b, s, strlen(s)); }

void kt_buf_printf(kt_buf *b, const char *fmt, ...) {
  char small[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n < sizeof small) {
    kt_buf_append(b, small, (size_t)n);
    return;
  }
  char *big = malloc((size_t)n + 1);
  if (!big) {
    b->failed = 1;
    return;
  }
  va_start(ap, fmt);
  vsnprintf(big, (size_t)n + 1, fmt, ap);
  va_end(ap);
  kt_buf_append(b, big, (size_t)n);
  free(big);
}

void kt_buf_json_string(kt_buf *b, const char *s) {
  kt_buf_append(b, "\"", 1);
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    switch (*c) {
      case '"': kt_buf_puts(b, "\\\""); break;
      case '\\': kt_buf_puts(b, "\\\\"); break;
      case '\n': kt_buf_puts(b, "\\n"); break;
      case '\t': kt_buf_puts(b, "\\t"); break;
      case '\r': kt_buf_puts(b, "\\r"); break;
      default:
        if (*c < 0x20) kt_buf_printf(b, "\\u%04x", *c);
        else kt_buf_append(b, (const char *)c, 1);
    }
  }
  kt_buf_append(b, "\"", 1);
}

/* The decimal digits of v (a '-' first when neg) into out; the length.
 * The JSON writers' hot path: snprintf parses its format every time. */
static size_t whole_digits(char *out, int neg, unsigned long long v) {
  char rev[24];
  size_t n = 0, k = 0;
  do rev[n++] = (char)('0' + v % 10), v /= 10;
  while (v);
  if (neg) out[k++] = '-';
  while (n) out[k++] = rev[--n];
  return k;
}

void kt_buf_json_number(kt_buf *b, double x) {
  if (!isfinite(x)) {
    kt_buf_puts(b, "null");
    return;
  }
  /* at most 24 characters are written; the room is for any %g, so that no
   * compiler sees a truncation in the bisection's %.*g below */
  char tmp[320];
  if (fabs(x) < 1e15 && x == (double)(long long)x) { /* whole: the digits (most times and bytes) */
    size_t n = whole_digits(tmp, x < 0, (unsigned long long)fabs(x));
    kt_buf_append(b, tmp, n);
    return;
  }
  /* a multiple of 1/16 below 2^31 (half-unit costs, V = 2 or 4 chunks of a
   * whole cost): its exact decimal has at most 4 fractional digits, and no
   * shorter decimal reads back to it (neighbouring doubles are 2^-21 apart
   * there), so it is the shortest form the search below would find */
  double sixteenths = x * 16;
  if (fabs(x) < 2147483648.0 && sixteenths == (double)(long long)sixteenths) {
    long long q = (long long)fabs(sixteenths);
    int frac = (int)(q % 16) * 625, digits = 4; /* ten-thousandths */
    while (frac % 10 == 0) frac /= 10, digits--;
    size_t n = whole_digits(tmp, x < 0, (unsigned long long)(q / 16));
    tmp[n++] = '.';
    for (int k = digits - 1; k >= 0; k--, frac /= 10) tmp[n + (size_t)k] = (char)('0' + frac % 10);
    kt_buf_append(b, tmp, n + (size_t)digits);
    return;
  }
  /* a decimal of at most 6 fractional digits (costs like 1.2 and the times
   * they add up to): k fractional digits read back exactly when the
   * integer a nearest x * 10^k, divided by 10^k (one correctly rounded
   * division, as strtod rounds the decimal), is x again; the least such k is
   * the shortest form, as the search below would find it (fixed notation:
   * |x| >= 1e-4, and a fraction means more digits than the exponent) */
  static const double tens[] = {1, 10, 100, 1e3, 1e4, 1e5, 1e6};
  if (fabs(x) >= 1e-4 && fabs(x) < 1e9)
    for (int k = 1; k <= 6; k++) {
      double a = nearbyint(x * tens[k]);
      if (a / tens[k] != x) continue;
      unsigned long long q = (unsigned long long)fabs(a), whole = q / (unsigned long long)tens[k];
      unsigned long long frac = q % (unsigned long long)tens[k];
      size_t n = whole_digits(tmp, x < 0, whole);
      tmp[n++] = '.';
      for (int d = k - 1; d >= 0; d--, frac /= 10) tmp[n + (size_t)d] = (char)('0' + frac % 10);
      kt_buf_append(b, tmp, n + (size_t)k);
      return;
    }
  /* the shortest representation that round-trips: %.17g always reads back,
   * and a precision that reads back makes every longer one read back too
   * (its rounding is at least as close to x, the shorter digits being one
   * of its candidates). Most numbers here are sums that picked up a
   * rounding error and need 16 or 17 digits: those two are tried first,
   * and only a number that 15 digits also read back to is bisected */
  snprintf(tmp, sizeof tmp, "%.16g", x);
  if (strtod(tmp, NULL) != x) {
    snprintf(tmp, sizeof tmp, "%.17g", x);
    kt_buf_puts(b, tmp);
    return;
  }
  char t15[sizeof tmp];
  snprintf(t15, sizeof t15, "%.15g", x);
  if (strtod(t15, NULL) != x) {
    kt_buf_puts(b, tmp);
    return;
  }
  int lo = 6, hi = 15;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    snprintf(tmp, sizeof tmp, "%.*g", mid, x);
    if (strtod(tmp, NULL) == x) hi = mid;
    else lo = mid + 1;
  }
  snprintf(tmp, sizeof tmp, "%.*g", lo, x);
  kt_buf_puts(b, tmp);
}

const char *kt_version(void) { return KT_VERSION_STRING; }
