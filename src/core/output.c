/* Writing a file the user named without ever destroying what is there.
 *
 * A regular file (or a path that does not exist yet) is replaced atomically:
 * a temp file in the same directory, fsync, rename, fsync of the directory
 * (kt_write_output leaves out the fsyncs: a crash of the process still
 * leaves one whole file, a power cut may lose the new one).
 * A symlink is followed and its target replaced the same way (the link
 * stays a link). A character device, FIFO or socket is written through
 * (`-o /dev/null` and `-o >(gzip ...)` work; a device is never replaced by
 * a regular file). A directory or a block device is refused. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "kaiten/core.h"

static double write_pause_seconds;

void kt_set_write_pause(double seconds) { write_pause_seconds = seconds > 0 ? seconds : 0; }

/* Writes all of data to fd. With pause > 0, sleeps half-way (fault tests). */
static int write_all(int fd, const void *data, size_t len, double pause) {
  const char *p = data;
  size_t left = len, pause_at = pause > 0 && len > 1 ? len / 2 : SIZE_MAX;
  while (left > 0) {
    size_t done = len - left, chunk = left;
    if (done >= pause_at) {
      fsync(fd);
      struct timespec ts = {.tv_sec = (time_t)pause,
                            .tv_nsec = (long)((pause - (double)(time_t)pause) * 1e9)};
      nanosleep(&ts, NULL);
      pause_at = SIZE_MAX;
    } else if (pause_at - done < chunk) {
      chunk = pause_at - done;
    }
    ssize_t w = write(fd, p, chunk);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    p += w;
    left -= (size_t)w;
  }
  return 0;
}

kt_status kt_file_size_check(const char *path, double end, kt_error *err) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_FSIZE, &rl) || rl.rlim_cur == RLIM_INFINITY || end <= (double)rl.rlim_cur)
    return KT_OK;
  char has[32], most[32];
  kt_format_size(has, sizeof has, end);
  kt_format_size(most, sizeof most, (double)rl.rlim_cur);
  return kt_fail(err, KT_EIO,
                 "cannot write '%s': %s: it would hold %s, more than the file-size "
                 "limit (ulimit -f) of %s",
                 path, strerror(EFBIG), has, most);
}

/* The path a symlink chain ends at (which may not exist yet), in out. */
static int resolve_links(const char *path, char *out, size_t n) {
  snprintf(out, n, "%s", path);
  for (int depth = 0; depth < 40; depth++) {
    struct stat st;
    if (lstat(out, &st) != 0 || !S_ISLNK(st.st_mode)) return 0;
    char target[PATH_MAX];
    ssize_t len = readlink(out, target, sizeof target - 1);
    if (len < 0) return -1;
    target[len] = 0;
    char dir[PATH_MAX] = "";
    if (target[0] != '/') { /* relative to the link's own directory */
      snprintf(dir, sizeof dir, "%s", out);
      char *slash = strrchr(dir, '/');
      if (slash) slash[1] = 0;
      else dir[0] = 0;
    }
    if ((size_t)snprintf(out, n, "%s%s", dir, target) >= n) {
      errno = ENAMETOOLONG;
      return -1;
    }
  }
  errno = ELOOP;
  return -1;
}

static kt_status write_through(const char *path, const struct stat *st, const void *data,
                               size_t len, kt_error *err) {
  int fd;
  if (S_ISSOCK(st->st_mode)) {
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof addr.sun_path)
      return kt_fail(err, KT_EIO, "cannot write '%s': socket path too long", path);
    strcpy(addr.sun_path, path);
    fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
      close(fd);
      fd = -1;
    }
  } else {
    /* a FIFO without a reader would block forever: refuse it instead */
    fd = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY);
    if (fd >= 0) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  }
  if (fd < 0) {
    if (errno == ENXIO && S_ISFIFO(st->st_mode))
      return kt_fail(err, KT_EIO, "cannot write '%s': a FIFO with no reader", path);
    return kt_fail(err, KT_EIO, "cannot write '%s': %s", path, strerror(errno));
  }
  /* a reader that goes away must give an error, not kill the process */
  struct sigaction ign = {.sa_handler = SIG_IGN}, old;
  sigemptyset(&ign.sa_mask);
  sigaction(SIGPIPE, &ign, &old);
  int bad = write_all(fd, data, len, 0);
  int saved = errno;
  sigaction(SIGPIPE, &old, NULL);
  if (close(fd) != 0 && !bad) bad = 1, saved = errno;
  if (bad) return kt_fail(err, KT_EIO, "cannot write '%s': %s", path, strerror(saved));
  return KT_OK;
}

static void sync_dir(const char *dir) {
  int dfd = open(dir, O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
}

static kt_status replace_atomically(const char *user_path, const char *path, const struct stat *old,
                                    const void *data, size_t len, int durable, kt_error *err) {
  char dir[PATH_MAX], tmp[PATH_MAX + 64];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  const char *base = slash ? slash + 1 : path;
  if (slash == dir) slash[1] = 0;
  else if (slash) *slash = 0;
  else snprintf(dir, sizeof dir, ".");
  if (snprintf(tmp, sizeof tmp, "%s/.%s.tmp.XXXXXX", dir, base) >= (int)sizeof tmp)
    return kt_fail(err, KT_EIO, "cannot write '%s': path too long", user_path);
  /* past the file-size limit the write would fail half-way (or SIGXFSZ end the process) */
  kt_status st = kt_file_size_check(user_path, (double)len, err);
  if (st) return st;
  int fd = mkstemp(tmp);
  if (fd < 0 && (errno == ENOENT || errno == ENOTDIR))
    return kt_fail(err, KT_EIO, "cannot write '%s': its directory '%s' does not exist", user_path,
                   dir);
  if (fd < 0) return kt_fail(err, KT_EIO, "cannot write '%s': %s", user_path, strerror(errno));
  /* keep the mode of the file being replaced; a new file gets 0644 (umask applies) */
  mode_t mode = 0644;
  if (old) mode = old->st_mode & 07777;
  else {
    mode_t mask = umask(0);
    umask(mask);
    mode &= ~mask;
  }
  fchmod(fd, mode);
  int bad = write_all(fd, data, len, write_pause_seconds);
  int saved = errno;
  if (!bad && durable && fsync(fd) != 0) bad = 1, saved = errno;
  if (close(fd) != 0 && !bad) bad = 1, saved = errno;
  if (!bad && rename(tmp, path) != 0) bad = 1, saved = errno;
  if (bad) {
    unlink(tmp);
    return kt_fail(err, KT_EIO, "cannot write '%s': %s", user_path, strerror(saved));
  }
  if (durable) sync_dir(dir); /* the rename itself must reach the disk too */
  return KT_OK;
}

static kt_status write_file(const char *path, const void *data, size_t len, int durable,
                            kt_error *err) {
  if (!path || !*path) return kt_fail(err, KT_EINVAL, "empty output path");
  char target[PATH_MAX];
  if (strlen(path) >= sizeof target || resolve_links(path, target, sizeof target) != 0)
    return kt_fail(err, KT_EIO, "cannot write '%s': %s", path, strerror(errno));
  struct stat st;
  if (stat(target, &st) != 0) {
    if (errno != ENOENT)
      return kt_fail(err, KT_EIO, "cannot write '%s': %s", path, strerror(errno));
    return replace_atomically(path, target, NULL, data, len, durable, err);
  }
  if (S_ISDIR(st.st_mode))
    return kt_fail(err, KT_EINVAL, "'%s' is a directory; give a file name", path);
  if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))
    return write_through(target, &st, data, len, err);
  if (!S_ISREG(st.st_mode))
    return kt_fail(err, KT_EINVAL, "'%s' is a block device or special file; refusing to write it",
                   path);
  return replace_atomically(path, target, &st, data, len, durable, err);
}

kt_status kt_write_file_atomic(const char *path, const void *data, size_t len, kt_error *err) {
  return write_file(path, data, len, 1, err);
}

kt_status kt_write_output(const char *path, const void *data, size_t len, kt_error *err) {
  return write_file(path, data, len, 0, err);
}
