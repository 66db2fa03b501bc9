/* Reading a user's text file within bounds (schedule, cost and planner
 * files): whatever the path names (a 2 GB file, /dev/zero, a FIFO that
 * never ends a line), at most a stated number of bytes is read, and a NUL
 * byte or an over-long line stops the read where it is found. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kaiten/core.h"

#define CHUNK (64 * 1024)

void kt_format_size(char *buf, size_t n, double bytes) {
  static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int k = 0;
  while (bytes >= 1024 && k < 4) bytes /= 1024, k++;
  snprintf(buf, n, "%.4g %s", bytes, unit[k]);
}

/* The reader's state: what was read, and where the line being read began. */
typedef struct {
  const char *path;
  long long max, max_line;
  char *buf;
  size_t n, cap, line_start;
  long long line;
} text_read;

static kt_status too_much(const text_read *t, int line_limit, kt_error *err) {
  char most[32], line_most[32];
  kt_format_size(most, sizeof most, (double)t->max);
  kt_format_size(line_most, sizeof line_most, (double)t->max_line);
  if (line_limit)
    return kt_fail(err, KT_EINVAL,
                   "'%s' line %lld is longer than %s (at most %s a line and %s "
                   "in all are read as text): refused",
                   t->path, t->line, line_most, line_most, most);
  return kt_fail(err, KT_EINVAL, "'%s' holds more than %s (at most %s is read as text): refused",
                 t->path, most, most);
}

/* Checks the r bytes just read at buf + n: no NUL byte, no line longer
 * than max_line. */
static kt_status scan(text_read *t, size_t r, kt_error *err) {
  const char *p = t->buf + t->n, *end = p + r;
  const char *nul = memchr(p, 0, r);
  if (nul) {
    char most[32];
    kt_format_size(most, sizeof most, (double)t->max);
    return kt_fail(err, KT_EINVAL,
                   "'%s' is not a text file: a NUL byte at offset %zu (at most %s "
                   "of text is read): refused",
                   t->path, (size_t)(nul - t->buf), most);
  }
  for (const char *nl; (nl = memchr(p, '\n', (size_t)(end - p))); p = nl + 1) {
    if ((long long)(nl - t->buf - (ptrdiff_t)t->line_start) > t->max_line)
      return too_much(t, 1, err);
    t->line++;
    t->line_start = (size_t)(nl + 1 - t->buf);
  }
  if ((long long)(end - t->buf - (ptrdiff_t)t->line_start) > t->max_line)
    return too_much(t, 1, err);
  return KT_OK;
}

static kt_status read_all(text_read *t, int fd, kt_error *err) {
  for (;;) {
    if (t->n + CHUNK + 1 > t->cap) {
      size_t want = t->cap ? t->cap * 2 : CHUNK + 1;
      if (want > (size_t)t->max + CHUNK + 1) want = (size_t)t->max + CHUNK + 1;
      if (want <= t->cap) return too_much(t, 0, err);
      char *nb = realloc(t->buf, want);
      if (!nb) return kt_fail(err, KT_ENOMEM, "out of memory reading '%s'", t->path);
      t->buf = nb, t->cap = want;
    }
    ssize_t r = read(fd, t->buf + t->n, CHUNK);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return kt_fail(err, KT_EIO, "error reading '%s': %s", t->path, strerror(errno));
    if (r == 0) return KT_OK;
    kt_status st = scan(t, (size_t)r, err);
    if (st) return st;
    t->n += (size_t)r;
    if ((long long)t->n > t->max) return too_much(t, 0, err);
  }
}

kt_status kt_read_text(const char *path, long long max, long long max_line, char **out, size_t *len,
                       kt_error *err) {
  *out = NULL;
  if (max <= 0) max = 1;
  text_read t = {.path = path, .max = max, .max_line = max_line > 0 ? max_line : max, .line = 1};
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  /* EIO, as kt_read_file says it (the CLI's readers make it exit 2) */
  if (fd < 0) return kt_fail(err, KT_EIO, "cannot open '%s': %s", path, strerror(errno));
  struct stat sb;
  kt_status st = KT_OK;
  if (fstat(fd, &sb)) st = kt_fail(err, KT_EIO, "cannot read '%s': %s", path, strerror(errno));
  else if (S_ISDIR(sb.st_mode))
    st = kt_fail(err, KT_EINVAL, "'%s' is a directory, not a file", path);
  else if (S_ISREG(sb.st_mode) && sb.st_size > max) st = too_much(&t, 0, err); /* before reading */
  if (!st) st = read_all(&t, fd, err);
  close(fd);
  if (st) {
    free(t.buf);
    return st;
  }
  if (!t.buf && !(t.buf = malloc(1))) return kt_fail(err, KT_ENOMEM, "out of memory");
  t.buf[t.n] = 0;
  *out = t.buf;
  if (len) *len = t.n;
  return KT_OK;
}
