/* Internal to src/rundir/: JSON helpers shared by the reader and config.c. */
#ifndef KAITEN_RUNDIR_INTERNAL_H
#define KAITEN_RUNDIR_INTERNAL_H

#include <cjson/cJSON.h>
#include <sys/stat.h>

#include "kaiten/rundir.h"

/* "DIR/name" (caller frees), NULL when out of memory. */
char *kt__rd_join(const char *dir, const char *name);
/* Parses a whole file as one JSON value; EPARSE names the file and line. */
kt_status kt__rd_read_json(const char *path, cJSON **out, kt_error *err);
/* A member as a number (NAN when absent or not a number) or a string (NULL). */
double kt__rd_num(const cJSON *o, const char *key);
const char *kt__rd_str(const cJSON *o, const char *key);
/* A member that is an integer in lo..hi: 0, else -1 (*out untouched). */
int kt__rd_int(const cJSON *o, const char *key, int lo, int hi, int *out);

/* Describes one more skipped thing in r->warnings (when there is room).
 * 0, or -1 when out of memory. */
int kt__rd_warn(kt_run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- lines.c: bounded reading ---- */

/* A line of metrics.jsonl is at most this long: kaiten's longest, 4096 ranks
 * with their idle causes, is about 1.2 MiB. */
#define KT__RD_MAX_LINE (1 << 21)
/* Opens a regular file for reading (a FIFO or device is EINVAL, and the
 * open never blocks); larger than max bytes (0: any) is EINVAL naming both
 * sizes. */
kt_status kt__rd_open(const char *path, long long max, int *fd, struct stat *sb, kt_error *err);
/* The whole file, NUL-terminated, at most max bytes (see kt__rd_open). */
kt_status kt__rd_read_bounded(const char *path, long long max, char **out, size_t *len,
                              kt_error *err);
/* Called per line (NUL-terminated at len; it may hold NULs before):
 * complete = it ended with a newline (else it is the last, at EOF). Returns
 * 1 when the line is taken, 0 to leave an unterminated last line for a
 * later read, -1 when out of memory. */
typedef int (*kt__rd_line_fn)(void *ctx, char *line, size_t len, int lineno, int complete);
/* Every line of path from byte `from`, numbered after *lineno; on success
 * *end is the offset after the last line taken and *lineno its number. A
 * line longer than KT__RD_MAX_LINE, or more than max_total bytes (0: any),
 * is EINVAL. */
kt_status kt__rd_lines(const char *path, long long from, long long max_total, int *lineno,
                       kt__rd_line_fn fn, void *ctx, long long *end, kt_error *err);

/* ---- autopilot.c: a step's "fault" and "switch" ---- */

/* Reads them from a step's object (kind NONE / made 0 when absent or bad). */
void kt__rd_fault_parse(const cJSON *o, kt_run_fault *f);
void kt__rd_switch_parse(const cJSON *o, kt_run_switch *w);

/* ---- metrics.c ---- */

/* Reads DIR/metrics.jsonl into r (sorted by step), setting r->follow. */
kt_status kt__rd_load_metrics(kt_run *r, const char *path, kt_error *err);
/* The lines added since (kt_run_follow); *added: steps appended. */
kt_status kt__rd_follow_metrics(kt_run *r, const char *path, size_t *added, kt_error *err);

/* config.json's text of c. */
void kt__rd_config_json(const kt_run_config *c, kt_buf *b);
/* config.json's object into c (path names it in errors). EPARSE, ENOMEM. */
kt_status kt__rd_config_parse(const cJSON *root, const char *path, kt_run_config *c, kt_error *err);

#endif
