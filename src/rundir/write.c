/* Writing a run directory: one writer at a time (an advisory flock on
 * DIR/.lock, held while the directory is open), a fresh run never mixed
 * with an old one, config.json and the rendered files replaced atomically,
 * metrics.jsonl appended one complete line per step. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "rundir/internal.h"

struct kt_rundir {
  char *dir;
  int lock_fd;
};

static const char *const file_names[KT_RUNDIR_FILE_COUNT] = {"timeline.json", "trace.json"};

/* The files kaiten writes at the top of a run directory (FORCE removes them). */
static const char *const own_files[] = {"config.json", "metrics.jsonl", "timeline.json",
                                        "trace.json", "report.html"};

const char *kt_rundir_file_name(kt_rundir_file f) {
  return (unsigned)f < KT_RUNDIR_FILE_COUNT ? file_names[f] : "?";
}

const char *kt_rundir_path(const kt_rundir *rd) { return rd->dir; }

static int mkdir_p(const char *dir) {
  char buf[4096];
  if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf) return errno = ENAMETOOLONG, -1;
  for (char *p = buf + 1; *p; p++)
    if (*p == '/') {
      *p = 0;
      if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
      *p = '/';
    }
  return mkdir(buf, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

static int is_own_file(const char *name) {
  for (size_t i = 0; i < sizeof own_files / sizeof *own_files; i++)
    if (!strcmp(name, own_files[i])) return 1;
  return 0;
}

/* Removes checkpoints/ and what is in it when everything there is kaiten's
 * (step_*.ckpt, latest, temp files); 0 when removed or absent. */
static int remove_checkpoints(const char *dir) {
  char *ck = kt__rd_join(dir, "checkpoints");
  if (!ck) return -1;
  DIR *d = opendir(ck);
  int foreign = 0;
  if (d) {
    struct dirent *e;
    while ((e = readdir(d))) {
      const char *n = e->d_name;
      if (!strcmp(n, ".") || !strcmp(n, "..")) continue;
      int own = !strcmp(n, "latest") || (!strncmp(n, "step_", 5) && strstr(n, ".ckpt")) ||
                (n[0] == '.' && strstr(n, ".tmp."));
      char *path = own ? kt__rd_join(ck, n) : NULL;
      if (!own || !path || unlink(path) != 0) foreign++;
      free(path);
    }
    closedir(d);
    if (!foreign) rmdir(ck);
  }
  free(ck);
  return foreign;
}

/* Entries of dir other than ".lock" (with clear: after removing kaiten's own). */
static int count_entries(const char *dir, int clear) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    const char *name = e->d_name;
    if (!strcmp(name, ".") || !strcmp(name, "..") || !strcmp(name, ".lock")) continue;
    if (clear && (is_own_file(name) || (name[0] == '.' && strstr(name, ".tmp.")))) {
      char *path = kt__rd_join(dir, name);
      int gone = path && unlink(path) == 0;
      free(path);
      if (gone) continue;
    }
    if (clear && !strcmp(name, "checkpoints") && remove_checkpoints(dir) == 0) continue;
    n++;
  }
  closedir(d);
  return n;
}

static kt_status busy(int fd, const char *dir, kt_error *err) {
  char pid[32] = "";
  ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
  pid[n > 0 ? n : 0] = 0;
  pid[strcspn(pid, "\n")] = 0;
  close(fd);
  return kt_fail(err, KT_EBUSY, "run directory '%s' is in use by another kaiten train (PID %s)",
                 dir, pid[0] ? pid : "unknown");
}

/* Opens DIR/.lock (flags: O_RDONLY, or O_RDWR | O_CREAT) into *fd as a
 * regular file only: a FIFO there would block the open, a link would have
 * the PID written through it into another file. *fd -1 and KT_OK when
 * there is none (and O_CREAT was not asked). EINVAL, EIO, ENOMEM. */
static kt_status open_lock(const char *dir, int flags, int *fd, kt_error *err) {
  char *path = kt__rd_join(dir, ".lock");
  if (!path) return kt_fail(err, KT_ENOMEM, "out of memory");
  *fd = open(path, flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0644);
  int saved = errno;
  struct stat sb;
  if (*fd >= 0 && (fstat(*fd, &sb) != 0 || !S_ISREG(sb.st_mode))) {
    close(*fd);
    *fd = -1, saved = ELOOP;
  }
  kt_status st = KT_OK;
  if (*fd < 0 && saved == ELOOP)
    st = kt_fail(err, KT_EINVAL, "%s is not a regular file (a link, FIFO or device?): remove it",
                 path);
  else if (*fd < 0 && saved != ENOENT)
    st = kt_fail(err, KT_EIO, "cannot lock run directory '%s': %s", dir, strerror(saved));
  free(path);
  return st;
}

kt_status kt_rundir_check_free(const char *dir, kt_error *err) {
  int fd = -1;
  kt_status st = open_lock(dir, O_RDONLY, &fd, err);
  if (st || fd < 0) return st;
  /* a shared probe: several processes of one job may probe at once */
  if (flock(fd, LOCK_SH | LOCK_NB) != 0) return busy(fd, dir, err);
  close(fd);
  return KT_OK;
}

/* The holder of an exclusive flock on the file (dev, ino) in the kernel's
 * lock table: 1 and its PID, 0 when none, -1 when the table cannot be read. */
static int lock_table_holder(const struct stat *sb, long *pid) {
  FILE *f = fopen("/proc/locks", "r");
  if (!f) return -1;
  char line[256];
  int found = 0;
  while (!found && fgets(line, sizeof line, f)) {
    char kind[16], mode[16], type[16];
    long holder;
    unsigned maj, min;
    unsigned long long ino;
    /* "1: FLOCK  ADVISORY  WRITE 1810 fe:00:10969149 0 EOF" */
    const char *p = strchr(line, ':');
    if (p &&
        sscanf(p + 1, "%15s %15s %15s %ld %x:%x:%llu", kind, mode, type, &holder, &maj, &min,
               &ino) == 7 &&
        !strcmp(kind, "FLOCK") && !strcmp(type, "WRITE") && ino == (unsigned long long)sb->st_ino &&
        maj == major(sb->st_dev) && min == minor(sb->st_dev))
      found = 1, *pid = holder;
  }
  fclose(f);
  return found;
}

int kt_rundir_writer(const char *dir, long *pid) {
  *pid = 0;
  char *path = kt__rd_join(dir, ".lock");
  if (!path) return 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  free(path);
  struct stat sb;
  if (fd < 0) return 0;
  if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
    close(fd);
    return 0;
  }
  int held = lock_table_holder(&sb, pid);
  if (held <= 0 && flock(fd, LOCK_SH | LOCK_NB) != 0) { /* no table (or another device name) */
    char text[32] = "";
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    text[n > 0 ? n : 0] = 0;
    *pid = strtol(text, NULL, 10);
    held = 1;
  } else if (held < 0) {
    held = 0;
  }
  close(fd); /* releases a probe's shared lock */
  return held;
}

/* Takes DIR/.lock; EBUSY names the process holding it. */
static kt_status take_lock(kt_rundir *rd, kt_error *err) {
  int fd = -1;
  kt_status st = open_lock(rd->dir, O_RDWR | O_CREAT, &fd, err);
  if (st) return st;
  if (fd < 0) return kt_fail(err, KT_EIO, "cannot lock run directory '%s': it is gone", rd->dir);
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) return busy(fd, rd->dir, err);
  char line[32];
  int n = snprintf(line, sizeof line, "%ld\n", (long)getpid());
  if (ftruncate(fd, 0) != 0 || pwrite(fd, line, (size_t)n, 0) != n) { /* the lock still holds */
  }
  rd->lock_fd = fd;
  return KT_OK;
}

static kt_status check_contents(kt_rundir *rd, kt_rundir_mode mode, int *kept, kt_error *err) {
  if (mode == KT_RUNDIR_RESUME) {
    char *cfg = kt__rd_join(rd->dir, "config.json");
    struct stat sb;
    int has = cfg && stat(cfg, &sb) == 0 && S_ISREG(sb.st_mode);
    free(cfg);
    if (!has)
      return kt_fail(err, KT_EINVAL, "'%s' has no config.json: not a run directory of kaiten train",
                     rd->dir);
    return KT_OK;
  }
  int n = count_entries(rd->dir, mode == KT_RUNDIR_FORCE);
  if (n < 0) return kt_fail(err, KT_EIO, "cannot read '%s': %s", rd->dir, strerror(errno));
  if (kept) *kept = n;
  if (mode == KT_RUNDIR_NEW && n > 0)
    return kt_fail(err, KT_EINVAL, "run directory '%s' is not empty", rd->dir);
  return KT_OK;
}

kt_status kt_rundir_create(const char *dir, kt_rundir_mode mode, int *kept, kt_rundir **out,
                           kt_error *err) {
  *out = NULL;
  if (kept) *kept = 0;
  if (!dir || !*dir) return kt_fail(err, KT_EINVAL, "empty run directory name");
  struct stat sb;
  if (stat(dir, &sb) == 0 && !S_ISDIR(sb.st_mode))
    return kt_fail(err, KT_EINVAL, "'%s' exists and is not a directory", dir);
  if (mode == KT_RUNDIR_RESUME && stat(dir, &sb) != 0)
    return kt_fail(err, KT_EINVAL, "run directory '%s' does not exist", dir);
  if (mode != KT_RUNDIR_RESUME && mkdir_p(dir) != 0)
    return kt_fail(err, KT_EIO, "cannot create run directory '%s': %s", dir, strerror(errno));
  kt_rundir *rd = kt_calloc(1, sizeof *rd);
  if (!rd || !(rd->dir = strdup(dir))) {
    free(rd);
    return kt_fail(err, KT_ENOMEM, "out of memory");
  }
  rd->lock_fd = -1;
  kt_status st = take_lock(rd, err);
  if (!st) st = check_contents(rd, mode, kept, err);
  if (st) {
    kt_rundir_destroy(rd);
    return st;
  }
  *out = rd;
  return KT_OK;
}

void kt_rundir_destroy(kt_rundir *rd) {
  if (!rd) return;
  if (rd->lock_fd >= 0) close(rd->lock_fd); /* releases the flock */
  free(rd->dir);
  free(rd);
}

static kt_status write_named(kt_rundir *rd, const char *name, const kt_buf *b, kt_error *err) {
  if (b->failed) return kt_fail(err, KT_ENOMEM, "out of memory rendering %s", name);
  char *path = kt__rd_join(rd->dir, name);
  if (!path) return kt_fail(err, KT_ENOMEM, "out of memory");
  kt_status st = kt_write_file_atomic(path, b->data ? b->data : "", b->len, err);
  free(path);
  return st;
}

kt_status kt_rundir_write_config(kt_rundir *rd, const kt_run_config *c, kt_error *err) {
  kt_buf b;
  kt_buf_init(&b);
  kt__rd_config_json(c, &b);
  kt_status st = write_named(rd, "config.json", &b, err);
  kt_buf_free(&b);
  return st;
}

kt_status kt_rundir_write_file(kt_rundir *rd, kt_rundir_file f, const kt_buf *text, kt_error *err) {
  if ((unsigned)f >= KT_RUNDIR_FILE_COUNT) return kt_fail(err, KT_EINVAL, "unknown run file %d", f);
  return write_named(rd, file_names[f], text, err);
}

/* Keeps the lines of steps <= keep->steps (a NUL byte or a bad line in the
 * file ends nothing: every line is looked at). */
typedef struct {
  kt_buf out;
  int steps;
} keep_ctx;

static int keep_line(void *ctx, char *line, size_t len, int lineno, int complete) {
  (void)lineno;
  keep_ctx *k = ctx;
  int step;
  if (!complete) return 1; /* a torn last line */
  if (!memchr(line, 0, len) && sscanf(line, "{\"step\":%d", &step) == 1 && step <= k->steps) {
    kt_buf_append(&k->out, line, len);
    kt_buf_puts(&k->out, "\n");
  }
  return k->out.failed ? -1 : 1;
}

kt_status kt_rundir_keep_steps(kt_rundir *rd, int steps, kt_error *err) {
  char *path = kt__rd_join(rd->dir, "metrics.jsonl");
  if (!path) return kt_fail(err, KT_ENOMEM, "out of memory");
  keep_ctx k = {.steps = steps};
  kt_buf_init(&k.out);
  struct stat sb;
  kt_status st = KT_OK;
  if (lstat(path, &sb) == 0) { /* a missing file becomes an empty one */
    long long end;
    int lineno = 0;
    st = kt__rd_lines(path, 0, 0, &lineno, keep_line, &k, &end, err);
  }
  if (!st)
    st = k.out.failed ? kt_fail(err, KT_ENOMEM, "out of memory")
                      : kt_write_file_atomic(path, k.out.data ? k.out.data : "", k.out.len, err);
  kt_buf_free(&k.out);
  free(path);
  return st;
}

static void step_json(kt_buf *b, const kt_run_step *s, const kt_run_rank_step *ranks, int n) {
  kt_buf_printf(b, "{\"step\":%d,%s\"loss\":", s->step, s->skipped ? "\"skipped\":true," : "");
  kt_buf_json_number(b, s->loss);
  kt_buf_puts(b, ",\"val_loss\":");
  kt_buf_json_number(b, s->val_loss); /* null when not evaluated */
  const struct {
    const char *k;
    double v;
  } nums[] = {{"lr", s->lr},
              {"grad_norm", s->grad_norm},
              {"seconds", s->seconds},
              {"tokens_per_s", s->tokens_per_s},
              {"samples_per_s", s->samples_per_s},
              {"bubble", s->bubble}};
  for (size_t i = 0; i < sizeof nums / sizeof *nums; i++) {
    kt_buf_printf(b, ",\"%s\":", nums[i].k);
    kt_buf_json_number(b, nums[i].v);
  }
  if (s->fault.kind != KT_FAULT_NONE) {
    kt_buf_puts(b, ",\"fault\":");
    kt_run_fault_json(&s->fault, b);
  }
  if (s->sw.made) {
    kt_buf_puts(b, ",\"switch\":");
    kt_run_switch_json(&s->sw, b);
  }
  if (n > 0) {
    kt_buf_puts(b, ",\"ranks\":[");
    for (int r = 0; r < n; r++) {
      const kt_run_rank_step *q = &ranks[r];
      kt_buf_printf(b, "%s{\"busy\":", r ? "," : "");
      kt_buf_json_number(b, q->busy);
      kt_buf_puts(b, ",\"bytes_sent\":");
      kt_buf_json_number(b, q->bytes_sent);
      kt_buf_puts(b, ",\"comm_time\":");
      kt_buf_json_number(b, q->comm_time);
      kt_buf_puts(b, ",\"peak_act_bytes\":");
      kt_buf_json_number(b, q->peak_act_bytes);
      if (!isnan(q->idle.busy)) {
        kt_buf_puts(b, ",\"idle_causes\":");
        kt_idle_split_json(&q->idle, b);
      }
      kt_buf_puts(b, "}");
    }
    kt_buf_puts(b, "]");
  }
  kt_buf_puts(b, "}\n");
}

kt_status kt_rundir_append_step(kt_rundir *rd, const kt_run_step *s, const kt_run_rank_step *ranks,
                                int n_ranks, kt_error *err) {
  kt_buf b;
  kt_buf_init(&b);
  step_json(&b, s, ranks, n_ranks);
  char *path = kt__rd_join(rd->dir, "metrics.jsonl");
  kt_status st = KT_OK;
  if (b.failed || !path) {
    st = kt_fail(err, KT_ENOMEM, "out of memory");
  } else {
    /* one write() of the whole line: a crash or a full disk tears at most the last line */
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    struct stat at;
    if (fd >= 0 && !fstat(fd, &at) &&
        (st = kt_file_size_check(path, (double)at.st_size + (double)b.len, err))) {
      close(fd);
      free(path);
      kt_buf_free(&b);
      return st;
    }
    ssize_t w = fd >= 0 ? write(fd, b.data, b.len) : -1;
    /* a short write: the disk is full, or the file reached a limit (the next write says which) */
    int saved = w < 0                                                                ? errno
                : w < (ssize_t)b.len && write(fd, b.data + w, b.len - (size_t)w) < 0 ? errno
                                                                                     : ENOSPC;
    if (fd >= 0 && close(fd) != 0 && w == (ssize_t)b.len) w = -1, saved = errno;
    if (w != (ssize_t)b.len) {
      struct stat sb; /* take a torn line back so the file stays whole */
      if (fd >= 0 && w > 0 && stat(path, &sb) == 0 && sb.st_size >= w &&
          truncate(path, sb.st_size - w) != 0) {
      }
      st = kt_fail(err, KT_EIO, "cannot append to '%s': %s", path, strerror(saved));
    }
  }
  free(path);
  kt_buf_free(&b);
  return st;
}
