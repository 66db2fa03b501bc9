/* Fuzz target: the run-directory readers and the run report over what they
 * read. The input is up to four files separated by lines "%%": config.json,
 * metrics.jsonl, timeline.json, trace.json (a missing part: no such file).
 * They go into a directory private to this process; kt_run_load reads it,
 * and when it succeeds kt_render_run_report renders it; then more metrics
 * lines (the metrics part again) are appended and kt_run_follow reads them.
 *
 * Properties beyond sanitizers: a load either fails with a one-line message
 * or holds only steps of complete or parseable lines (steps + bad lines +
 * blank lines never exceed the lines given) with at most KT_RUN_MAX_WARNINGS
 * warnings, each naming metrics.jsonl or trace.json; following adds at most
 * as many steps as lines appended; the report renders. */
#include <sys/stat.h>

#include "fuzz_common.h"
#include "kaiten/report.h"
#include "kaiten/rundir.h"

static char dir[128];

static void remove_dir(void) {
  static const char *const names[] = {"config.json", "metrics.jsonl", "timeline.json",
                                      "trace.json"};
  char path[192];
  for (int i = 0; i < 4; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    unlink(path);
  }
  rmdir(dir);
}

static void put(const char *name, const char *data, size_t n, const char *mode) {
  char path[192];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  if (!data) {
    unlink(path);
    return;
  }
  FILE *f = fopen(path, mode);
  if (!f) abort();
  if (n && fwrite(data, 1, n, f) != n) abort();
  if (fclose(f)) abort();
}

static size_t count_lines(const char *p, size_t n) {
  size_t lines = 0;
  for (size_t i = 0; i < n; i++) lines += p[i] == '\n';
  return lines + (n && p[n - 1] != '\n');
}

static void check_run(const kt_run *r, size_t lines) {
  if (r->n_steps + r->bad_lines > lines) abort();
  if (r->n_warnings > KT_RUN_MAX_WARNINGS) abort();
  for (size_t i = 0; i < r->n_warnings; i++)
    if (!strstr(r->warnings[i], "metrics.jsonl") && !strstr(r->warnings[i], "trace.json")) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!dir[0]) {
    const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(dir, sizeof dir, "%s/kaiten-fuzz-rundir-%ld", tmp, (long)getpid());
    if (mkdir(dir, 0700) && errno != EEXIST) abort();
    atexit(remove_dir);
  }
  /* the parts, split at lines "%%" */
  const char *part[4] = {NULL, NULL, NULL, NULL};
  size_t len[4] = {0, 0, 0, 0};
  const char *p = (const char *)data, *end = p + size;
  for (int k = 0; k < 4 && p <= end; k++) {
    const char *sep = NULL;
    for (const char *q = p; q + 3 <= end && !sep; q++)
      if ((q == (const char *)data || q[-1] == '\n') && !memcmp(q, "%%\n", 3)) sep = q;
    part[k] = p, len[k] = (size_t)((sep ? sep : end) - p);
    if (!sep) break;
    p = sep + 3;
  }
  static const char *const names[] = {"config.json", "metrics.jsonl", "timeline.json",
                                      "trace.json"};
  for (int k = 0; k < 4; k++) put(names[k], part[k], len[k], "wb");
  kt_run r;
  kt_error err = {{0}};
  kt_status st = kt_run_load(dir, &r, &err);
  if (st) {
    if (!err.msg[0] || strchr(err.msg, '\n')) abort();
    return 0;
  }
  check_run(&r, count_lines(part[1], len[1]));
  kt_buf b;
  kt_buf_init(&b);
  fuzz_quiet q = fuzz_quiet_begin();
  kt_render_run_report(&b, &r, "fuzz");
  fuzz_quiet_end(q);
  kt_buf_free(&b);
  /* a trainer appends the same lines again */
  size_t before = r.n_steps;
  put("metrics.jsonl", part[1] ? part[1] : "", len[1], "ab");
  kt_run_news news;
  if (kt_run_follow(&r, &news, &err) == KT_OK && news.steps > count_lines(part[1], len[1]) + 1)
    abort();
  if (r.n_steps < before) abort();
  kt_run_free(&r);
  return 0;
}
