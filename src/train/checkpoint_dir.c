/* A run directory's checkpoints (kaiten/checkpoint.h): RUN_DIR/checkpoints/
 * step_NNNNNNNN.ckpt and "latest", saved, found again and pruned. Only
 * names of that form inside checkpoints/ are read: "latest" is a hint that
 * must name one of them (so a "../../other/run/..." there is never
 * followed), a symbolic link or special file among them is passed over
 * unopened (it could lead out of the directory, or block a reader
 * forever), and the newest file that verifies wins, with what was passed
 * over said in one line. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kaiten/checkpoint.h"

#define LATEST_MAX 256 /* "latest" holds one name; more is not kaiten's */

/* The names kaiten writes in checkpoints/ are its own: an entry there that
 * is not a regular file (a link, which a write would follow out of the
 * directory, a FIFO, which would take the write or refuse it) is removed,
 * so that the write replaces the entry itself. EIO when it cannot be. */
static kt_status clear_entry(const char *path, kt_error *err) {
  struct stat sb;
  if (lstat(path, &sb) != 0 || S_ISREG(sb.st_mode)) return KT_OK;
  if (S_ISDIR(sb.st_mode) ? rmdir(path) == 0 : unlink(path) == 0) return KT_OK;
  return kt_fail(err, KT_EIO, "cannot replace '%s' (not a regular file): %s", path,
                 strerror(errno));
}

kt_status kt_checkpoint_save_in_run(kt_runtime *rt, const char *run_dir,
                                    const kt_checkpoint_meta *meta, kt_error *err) {
  char dir[4096], path[4200], latest[4200];
  kt_transport *t = kt_runtime_transport(rt);
  if (!kt_runtime_all_local(rt) && kt_transport_rank(t) != 0) /* rank 0 writes; the others send */
    return kt_checkpoint_save(rt, "", meta, err);
  snprintf(dir, sizeof dir, "%s/checkpoints", run_dir);
  if (mkdir(dir, 0755) != 0 && errno != EEXIST)
    return kt_fail(err, KT_EIO, "cannot create '%s': %s", dir, strerror(errno));
  char name[64];
  snprintf(name, sizeof name, "step_%08d.ckpt", meta->step);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  snprintf(latest, sizeof latest, "%s/latest", dir);
  kt_status st = clear_entry(path, err);
  if (!st) st = clear_entry(latest, err);
  if (!st) st = kt_checkpoint_save(rt, path, meta, err);
  if (st) return st;
  char line[80];
  int n = snprintf(line, sizeof line, "%s\n", name);
  return kt_write_file_atomic(latest, line, (size_t)n, err);
}

/* The step a checkpoint's file name says ("step_" digits ".ckpt"), or -1
 * for any other name. */
static int step_of_name(const char *name) {
  if (strncmp(name, "step_", 5)) return -1;
  const char *d = name + 5;
  size_t n = strspn(d, "0123456789");
  if (n < 8 || n > 10 || strcmp(d + n, ".ckpt")) return -1;
  long long v = 0;
  for (size_t i = 0; i < n; i++) v = v * 10 + (d[i] - '0');
  return v <= INT_MAX ? (int)v : -1;
}

static int cmp_desc(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x < y) - (x > y);
}

/* The steps of the checkpoint names in dir, highest first (*steps: caller
 * frees). EINVAL without the directory, ENOMEM. */
static kt_status list_steps(const char *dir, const char *run_dir, int **steps, int *n,
                            kt_error *err) {
  *steps = NULL, *n = 0;
  DIR *dh = opendir(dir);
  if (!dh) return kt_fail(err, KT_EINVAL, "no checkpoints in '%s' (not a run directory?)", run_dir);
  int cap = 0;
  kt_status st = KT_OK;
  struct dirent *de;
  while (!st && (de = readdir(dh))) {
    int step = step_of_name(de->d_name);
    if (step < 0) continue;
    if (*n == cap) {
      int *grown = realloc(*steps, sizeof **steps * (size_t)(cap = cap ? 2 * cap : 16));
      if (!grown) st = kt_fail(err, KT_ENOMEM, "out of memory");
      else *steps = grown;
    }
    if (!st) (*steps)[(*n)++] = step;
  }
  closedir(dh);
  if (st) free(*steps), *steps = NULL, *n = 0;
  else if (*n) qsort(*steps, (size_t)*n, sizeof **steps, cmp_desc);
  return st;
}

/* What was passed over, as one line: the first reason in full, then a count. */
static void note_skip(kt_checkpoint_found *f, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void note_skip(kt_checkpoint_found *f, const char *fmt, ...) {
  f->n_skipped++;
  if (f->n_skipped > 1) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(f->skipped, sizeof f->skipped, fmt, ap);
  va_end(ap);
}

static const char *entry_kind(mode_t m) {
  return S_ISLNK(m)                 ? "a symbolic link"
         : S_ISFIFO(m)              ? "a FIFO"
         : S_ISDIR(m)               ? "a directory"
         : S_ISCHR(m) || S_ISBLK(m) ? "a device"
         : S_ISSOCK(m)              ? "a socket"
                                    : "not a regular file";
}

/* "latest" must name a checkpoint of this directory that exists; what is
 * wrong with it is noted (a missing "latest" is no fault). It decides
 * nothing: the highest intact step wins, also over a "latest" that a
 * crash kept from being updated. */
static void check_latest(const char *dir, kt_checkpoint_found *f) {
  char path[4096 + 2 + LATEST_MAX + 1], text[LATEST_MAX + 1];
  snprintf(path, sizeof path, "%s/latest", dir);
  struct stat sb;
  if (lstat(path, &sb) != 0) return;
  if (!S_ISREG(sb.st_mode)) {
    note_skip(f, "checkpoints/latest is %s: not followed", entry_kind(sb.st_mode));
    return;
  }
  int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  ssize_t n = fd < 0 ? -1 : read(fd, text, LATEST_MAX);
  if (fd >= 0) close(fd);
  if (n < 0) return;
  text[n] = 0;
  text[strcspn(text, "\r\n")] = 0;
  if (step_of_name(text) < 0) {
    for (char *c = text; *c; c++)
      if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
    note_skip(f,
              "checkpoints/latest names '%.200s', not a checkpoint of this run directory: not "
              "followed",
              text);
    return;
  }
  snprintf(path, sizeof path, "%s/%s", dir, text);
  if (lstat(path, &sb) != 0) note_skip(f, "checkpoints/latest names %s, which is missing", text);
}

/* Whether the checkpoint of `step` is intact: a regular file that verifies
 * and holds that step (else why it is not is noted). */
static int intact(const char *dir, int step, kt_checkpoint_found *f, char *path, size_t n) {
  char name[64];
  snprintf(name, sizeof name, "step_%08d.ckpt", step);
  snprintf(path, n, "%s/%s", dir, name);
  struct stat sb;
  if (lstat(path, &sb) != 0) return 0; /* gone since it was listed */
  if (!S_ISREG(sb.st_mode)) {
    note_skip(f, "checkpoints/%s is %s", name, entry_kind(sb.st_mode));
    return 0;
  }
  kt_error sub;
  if (kt_checkpoint_verify(path, &f->meta, &sub) != KT_OK) {
    size_t skip = strncmp(sub.msg, path, strlen(path)) ? 0 : strlen(path) + 2;
    note_skip(f, "checkpoints/%s: %s", name, skip < strlen(sub.msg) ? sub.msg + skip : sub.msg);
    return 0;
  }
  if (f->meta.step != step) {
    note_skip(f, "checkpoints/%s holds step %d", name, f->meta.step);
    return 0;
  }
  return 1;
}

static void finish_note(kt_checkpoint_found *f) {
  size_t len = strlen(f->skipped);
  if (f->n_skipped > 1)
    snprintf(f->skipped + len, sizeof f->skipped - len, " (and %d more passed over)",
             f->n_skipped - 1);
}

kt_status kt_checkpoint_find(const char *run_dir, kt_checkpoint_found *out, kt_error *err) {
  memset(out, 0, sizeof *out);
  char dir[4096], path[4200];
  snprintf(dir, sizeof dir, "%s/checkpoints", run_dir);
  int *steps, n;
  kt_status st = list_steps(dir, run_dir, &steps, &n, err);
  if (st) return st;
  check_latest(dir, out);
  int found = 0;
  for (int i = 0; i < n && !found; i++) found = intact(dir, steps[i], out, path, sizeof path);
  free(steps);
  finish_note(out);
  if (!found) {
    st = n || out->n_skipped
             ? kt_fail(err, KT_EPARSE, "no intact checkpoint in '%s': %s", dir, out->skipped)
             : kt_fail(err, KT_EINVAL, "no complete checkpoint in '%s'", dir);
    memset(out, 0, sizeof *out);
    return st;
  }
  if (!(out->path = strdup(path))) {
    memset(out, 0, sizeof *out);
    return kt_fail(err, KT_ENOMEM, "out of memory");
  }
  return KT_OK;
}

void kt_checkpoint_found_free(kt_checkpoint_found *f) {
  free(f->path);
  memset(f, 0, sizeof *f);
}

kt_status kt_checkpoint_latest(const char *run_dir, char **path, kt_error *err) {
  kt_checkpoint_found f;
  kt_status st = kt_checkpoint_find(run_dir, &f, err);
  *path = st ? NULL : f.path;
  return st;
}

kt_status kt_checkpoint_prune(const char *run_dir, int keep, int newest, int *removed,
                              kt_error *err) {
  if (removed) *removed = 0;
  if (keep <= 0) return KT_OK;
  char dir[4096], path[4200];
  snprintf(dir, sizeof dir, "%s/checkpoints", run_dir);
  int *steps, n;
  kt_status st = list_steps(dir, run_dir, &steps, &n, err);
  if (st) return st;
  int kept = 1; /* newest itself */
  for (int i = 0; i < n; i++) {
    if (steps[i] >= newest) continue;
    snprintf(path, sizeof path, "%s/step_%08d.ckpt", dir, steps[i]);
    struct stat sb;
    if (lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
    if (kept < keep) {
      kept++;
      continue;
    }
    if (unlink(path) != 0 && errno != ENOENT && !st)
      st = kt_fail(err, KT_EIO, "cannot remove old checkpoint '%s': %s", path, strerror(errno));
    else if (removed) (*removed)++;
  }
  free(steps);
  return st;
}
