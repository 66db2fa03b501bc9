/* kaiten core: status codes, error buffers and small shared helpers.
 *
 * Every library function that can fail returns a kt_status (0 = ok) and, when
 * given a non-NULL kt_error, writes a one-line reason into it. The library
 * never prints and never exits; only the CLI turns a status into an exit code.
 */
#ifndef KAITEN_CORE_H
#define KAITEN_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* X(name, exit_code, message) */
#define KT_STATUS_MAP(X) \
  X(OK, 0, "ok") \
  X(EINVAL, 2, "invalid argument or input") \
  X(EPARSE, 2, "malformed input") \
  X(EINVALID_SCHEDULE, 2, "invalid schedule") \
  X(EDEADLOCK, 2, "schedule deadlocks") \
  X(ENOMEM, 1, "out of memory") \
  X(EIO, 1, "input/output error") \
  X(ETIMEOUT, 1, "timed out") \
  X(ERUNTIME, 1, "runtime failure") \
  X(EPEER, 1, "a peer rank failed") \
  X(EBUSY, 2, "in use by another process") \
  X(EMEMLIMIT, 2, "no order fits the memory limit")

typedef enum {
#define KT__STATUS_ENUM(name, code, msg) KT_##name,
  KT_STATUS_MAP(KT__STATUS_ENUM)
#undef KT__STATUS_ENUM
      KT_STATUS_COUNT
} kt_status;

const char *kt_status_name(kt_status s); /* "EINVAL" */
/* The index of name in a table of n names (an enum's name table), or -1
 * when name is NULL or not in it. */
int kt_name_index(const char *name, const char *const *names, int n);
const char *kt_status_message(kt_status s); /* "invalid argument or input" */
int kt_status_exit_code(kt_status s);       /* 0, 1 or 2 (CLI convention) */

#define KT_ERROR_LEN 512
typedef struct {
  char msg[KT_ERROR_LEN];
} kt_error;

/* Writes a formatted one-line reason into err (if non-NULL) and returns s. */
kt_status kt_fail(kt_error *err, kt_status s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Size limits (ranks, chunks per rank, micro-batches) that keep every size
 * computation far from overflow. */
#define KT_MAX_RANKS 4096
#define KT_MAX_CHUNKS 64
#define KT_MAX_MICROBATCHES 1000000

/* Allocation helpers: NULL on overflow or failure. */
void *kt_calloc(size_t n, size_t size);
/* Grows *ptr (an array of elem bytes, capacity *cap) to hold at least need. 0 ok, -1 on failure. */
int kt_grow(void **ptr, size_t *cap, size_t need, size_t elem);
/* Asks the kernel to back the whole 2 MiB pages inside [p, p + len) with
 * huge pages when they are first touched (Linux transparent huge pages in
 * madvise mode; elsewhere nothing): one TLB entry and one page fault per
 * 2 MiB instead of 512, for the large tables a pass walks in many places
 * at once. A range with a page already touched keeps small pages there.
 * A hint only; the memory stays p's allocator's. */
void kt_advise_huge(void *p, size_t len);

/* A first-in first-out queue of ranks 0..n-1 holding each at most once:
 * the work list of every walk that runs each rank's actions while their
 * inputs are known and wakes the rank a result is for (the validator, the
 * simulator, the zero-bubble evaluator). A ring of n entries, so a wake is
 * a store and no division. */
typedef struct {
  int *ring;
  int *queued; /* not bytes: a store through a char pointer may alias anything,
                * and the walks would reload their state after every wake */
  int n, head, len;
} kt_rank_queue;

/* 0 ok, -1 out of memory (q then holds nothing to free). Starts empty. */
int kt_rank_queue_init(kt_rank_queue *q, int n);
void kt_rank_queue_free(kt_rank_queue *q);
/* Every rank queued, in order 0..n-1 (whatever q held). */
void kt_rank_queue_fill(kt_rank_queue *q);

/* Queues rank r unless it is queued already (r < 0: nothing). */
static inline void kt_rank_queue_wake(kt_rank_queue *q, int r) {
  if (r < 0 || q->queued[r]) return;
  q->queued[r] = 1;
  int at = q->head + q->len++;
  q->ring[at >= q->n ? at - q->n : at] = r;
}

/* The rank queued first, taken off the queue; -1 when it is empty. */
static inline int kt_rank_queue_next(kt_rank_queue *q) {
  if (q->len == 0) return -1;
  int r = q->ring[q->head];
  q->head = q->head + 1 == q->n ? 0 : q->head + 1;
  q->len--;
  q->queued[r] = 0;
  return r;
}

/* x (a count computed in floating point: a quotient, already rounded as
 * wanted) as an int clamped to lo..hi, NaN as hi. Every such conversion
 * in the search, the bound and the simulator goes through it: converting
 * a double outside int's range is undefined behaviour in C. */
static inline int kt_to_int(double x, int lo, int hi) {
  if (!(x <= hi)) return hi;
  return x < lo ? lo : (int)x;
}

/* Parsing helpers: strict, whole-string; 0 ok, -1 on garbage or overflow. */
int kt_parse_int(const char *s, long lo, long hi, long *out);
int kt_parse_double(const char *s, double *out);

/* The one tolerance of kaiten's comparisons of a time or memory figure
 * against a limit: x and a hair above it (relative and absolute 1e-12),
 * so a sum that meets the limit with rounding error still meets it. */
static inline double kt_tolerance(double x) { return x * (1 + 1e-12) + 1e-12; }
/* v meets limit within that tolerance. */
static inline int kt_within_limit(double v, double limit) { return v <= kt_tolerance(limit); }

/* Median of v[0..n) (sorts v in place); 0 when n == 0. */
double kt_median(double *v, size_t n);

/* Monotonic clock in seconds. */
double kt_now(void);
/* CPU time the calling thread has used, in seconds (CLOCK_THREAD_CPUTIME_ID):
 * the wall time of a stretch beyond it is time the thread was not running. */
double kt_thread_cpu_now(void);

/* Reads a whole file into a NUL-terminated buffer (caller frees). */
kt_status kt_read_file(const char *path, char **out, size_t *len, kt_error *err);
/* Reads a user's text file (a schedule, a cost or planner file) into a
 * NUL-terminated buffer (caller frees): a regular file, or a device, FIFO
 * or pipe, read the same way. At most max bytes and lines of at most
 * max_line bytes (0: max) are read: a larger regular file is refused
 * before reading, and anything else stops the read at once where it is
 * found (a NUL byte, a line or a file past its limit), with EINVAL naming
 * the path and the limit. A directory is EINVAL; EIO, ENOMEM. */
kt_status kt_read_text(const char *path, long long max, long long max_line, char **out, size_t *len,
                       kt_error *err);
/* "1.5 MiB": bytes in the largest binary unit below them. */
void kt_format_size(char *buf, size_t n, double bytes);
/* Writes a file without ever destroying what the path names: a regular file
 * (or a new path) is replaced atomically (temp file beside it, fsync,
 * rename; its mode kept); a symlink's target is replaced the same way; a
 * character device, FIFO (with a reader) or socket is written through; a
 * directory or block device is refused (EINVAL). Errors name `path`, never
 * the temp file. EIO with the reason. */
kt_status kt_write_file_atomic(const char *path, const void *data, size_t len, kt_error *err);
/* KT_OK when a regular file may grow to end bytes under the process's
 * file-size limit (ulimit -f); else EIO naming path and both sizes, the
 * full-disk case's status: past it a write fails with EFBIG, or SIGXFSZ
 * ends a process that does not ignore it (kaiten's commands do). The
 * writers here ask it before they write. */
kt_status kt_file_size_check(const char *path, double end, kt_error *err);
/* The same replacement without waiting for the disk (no fsync): for
 * outputs a command can make again (sim, compare, plan, reports). A crash of
 * the process still leaves the old file or the new one whole; the two
 * fsyncs took 0.6 ms of a 1 ms `kaiten sim -o FILE` here. */
kt_status kt_write_output(const char *path, const void *data, size_t len, kt_error *err);
/* Fault injection for tests: every later atomic write stops half-way for
 * `seconds`, its temp file partly written (0 = off). */
void kt_set_write_pause(double seconds);

/* A growable string buffer for renderers. */
typedef struct {
  char *data;
  size_t len, cap;
  int failed; /* set when an allocation failed; further appends are ignored */
} kt_buf;

void kt_buf_init(kt_buf *b);
void kt_buf_free(kt_buf *b);
void kt_buf_append(kt_buf *b, const char *s, size_t n);
void kt_buf_puts(kt_buf *b, const char *s);
void kt_buf_printf(kt_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s as a JSON string literal (with quotes and escapes). */
void kt_buf_json_string(kt_buf *b, const char *s);
/* Appends a finite double in the shortest %.17g-exact form ("null" if not finite). */
void kt_buf_json_number(kt_buf *b, double x);

#ifdef __cplusplus
}
#endif

#endif
