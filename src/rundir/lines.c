/* Reading run files within bounds: a whole file up to a size (JSON), and
 * metrics.jsonl line by line, a line at most KT__RD_MAX_LINE long, so no
 * file, however large or strange (a NUL byte, a 2 GB line, a FIFO), costs
 * more memory than what it holds of use.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rundir/internal.h"

#define CHUNK (64 * 1024)

kt_status kt__rd_open(const char *path, long long max, int *fd_out, struct stat *sb,
                      kt_error *err) {
  /* non-blocking: a FIFO must not hang the open (it is refused below) */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return kt_fail(err, errno == ENOENT || errno == EACCES || errno == ENOTDIR ? KT_EINVAL : KT_EIO,
                   "cannot open %s: %s", path, strerror(errno));
  if (fstat(fd, sb) || !S_ISREG(sb->st_mode)) {
    close(fd);
    return kt_fail(err, KT_EINVAL, "%s is not a regular file", path);
  }
  if (max > 0 && sb->st_size > max) {
    char has[32], most[32];
    kt_format_size(has, sizeof has, (double)sb->st_size);
    kt_format_size(most, sizeof most, (double)max);
    close(fd);
    return kt_fail(err, KT_EINVAL,
                   "%s holds %s, far more than kaiten writes there (at most %s "
                   "is read): refused",
                   path, has, most);
  }
  int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  *fd_out = fd;
  return KT_OK;
}

kt_status kt__rd_read_bounded(const char *path, long long max, char **out, size_t *len,
                              kt_error *err) {
  int fd;
  struct stat sb;
  kt_status st = kt__rd_open(path, max, &fd, &sb, err);
  if (st) return st;
  /* the size may change while we read (a file being rewritten): read to EOF, within max */
  size_t cap = (size_t)sb.st_size + 1, n = 0;
  char *buf = malloc(cap);
  for (;;) {
    if (!buf) {
      close(fd);
      return kt_fail(err, KT_ENOMEM, "out of memory reading %s", path);
    }
    if (n + 1 >= cap) {
      if ((long long)cap > max) {
        free(buf);
        close(fd);
        return kt_fail(err, KT_EINVAL, "%s grew past %lld bytes while read: refused", path, max);
      }
      char *nb = realloc(buf, cap * 2);
      if (!nb) free(buf);
      buf = nb, cap *= 2;
      continue;
    }
    ssize_t r = read(fd, buf + n, cap - n - 1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int e = errno;
      free(buf);
      close(fd);
      return kt_fail(err, KT_EIO, "error reading %s: %s", path, strerror(e));
    }
    if (r == 0) break;
    n += (size_t)r;
  }
  close(fd);
  buf[n] = 0;
  *out = buf;
  if (len) *len = n;
  return KT_OK;
}

/* ---- lines ------------------------------------------------------------------------ */

kt_status kt__rd_lines(const char *path, long long from, long long max_total, int *lineno,
                       kt__rd_line_fn fn, void *ctx, long long *end, kt_error *err) {
  int fd;
  struct stat sb;
  kt_status st = kt__rd_open(path, max_total, &fd, &sb, err);
  if (st) return st;
  if (from > 0 && lseek(fd, (off_t)from, SEEK_SET) < 0) {
    close(fd);
    return kt_fail(err, KT_EIO, "cannot seek in %s: %s", path, strerror(errno));
  }
  size_t cap = CHUNK + KT__RD_MAX_LINE + 1, len = 0; /* bytes held, from buffer start */
  char *buf = malloc(cap);
  if (!buf) {
    close(fd);
    return kt_fail(err, KT_ENOMEM, "out of memory reading %s", path);
  }
  long long at = from; /* file offset of buf[0] */
  int line = *lineno, eof = 0;
  while (!st) {
    if (!eof) {
      ssize_t r = read(fd, buf + len, cap - len - 1);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) {
        st = kt_fail(err, KT_EIO, "error reading %s: %s", path, strerror(errno));
        break;
      }
      eof = r == 0;
      len += (size_t)r;
    }
    /* every complete line held; the last one unterminated at EOF */
    size_t start = 0;
    while (!st && start < len) {
      char *nl = memchr(buf + start, '\n', len - start);
      if (!nl && !eof) break;
      size_t n = nl ? (size_t)(nl - (buf + start)) : len - start;
      if (n > KT__RD_MAX_LINE) break; /* refused below */
      buf[start + n] = 0;
      line++;
      int used = fn(ctx, buf + start, n, line, nl != NULL);
      if (used < 0) {
        st = kt_fail(err, KT_ENOMEM, "out of memory reading %s", path);
        break;
      }
      if (!used) { /* an unterminated last line left for later */
        line--;
        eof = 2;
        break;
      }
      start += n + (nl != NULL);
    }
    if (st) break;
    at += (long long)start;
    memmove(buf, buf + start, len - start);
    len -= start;
    if (len > KT__RD_MAX_LINE) {
      st = kt_fail(err, KT_EINVAL,
                   "%s line %d is longer than %d MiB, far longer than any kaiten "
                   "writes: refused",
                   path, line + 1, KT__RD_MAX_LINE >> 20);
    } else if (max_total > 0 && at > max_total) {
      st = kt_fail(err, KT_EINVAL,
                   "%s holds more than %lld MiB, far more than kaiten writes "
                   "there: refused",
                   path, max_total >> 20);
    }
    if (eof) break;
  }
  free(buf);
  close(fd);
  if (!st) *end = at, *lineno = line;
  return st;
}
