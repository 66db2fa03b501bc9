/* metrics.jsonl read back, once (kt_run_load) and as it grows
 * (kt_run_follow): one step per line, read line by line within bounds.
 *
 * A complete line that holds no step (malformed JSON, a NUL byte, an object
 * without an integer "step") is skipped and described, never the lines
 * after it; an unterminated last line that is not JSON is a write in
 * progress or torn by a crash: left for the next read, and counted as
 * skipped by kt_run_load.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rundir/internal.h"

#define MAX_RANKS 4096
#define MAX_METRICS_BYTES (1LL << 30)

typedef struct {
  kt_run_step s;
  kt_run_rank_step *r;
  int n;
} parsed_line;

typedef struct {
  kt_run *run;
  const char *path;
  parsed_line *lines;
  size_t n, cap;
  int after; /* following a rewritten file: only steps above this one */
  int torn;  /* an unterminated last line was left */
} reader;

static kt_idle_split no_idle(void) { return (kt_idle_split){NAN, NAN, NAN, NAN, NAN, NAN}; }
static kt_run_rank_step no_rank(void) {
  return (kt_run_rank_step){
      .busy = NAN, .comm_time = NAN, .bytes_sent = NAN, .peak_act_bytes = NAN, .idle = no_idle()};
}

/* A rank's idle_causes (all NAN when absent or not numbers). */
static kt_idle_split idle_causes(const cJSON *rank) {
  const cJSON *c = cJSON_GetObjectItemCaseSensitive(rank, "idle_causes");
  /* "compute" (the ops' own time); runs before it was named apart wrote "busy" */
  double own = kt__rd_num(c, "compute");
  kt_idle_split o = {.busy = isnan(own) ? kt__rd_num(c, "busy") : own,
                     .schedule = kt__rd_num(c, "schedule"),
                     .core_wait = kt__rd_num(c, "core_wait"),
                     .comm = kt__rd_num(c, "comm"),
                     .overhead = kt__rd_num(c, "overhead"),
                     .optimizer = kt__rd_num(c, "optimizer")};
  double all = o.busy + o.schedule + o.core_wait + o.comm + o.overhead + o.optimizer;
  if (!cJSON_IsObject(c) || !isfinite(all)) o = no_idle();
  return o;
}

/* 0 ok, 1 not a step line (reason in why), -1 out of memory. */
static int parse_step(const cJSON *o, parsed_line *pl, const char **why) {
  if (!cJSON_IsObject(o)) return *why = "not a JSON object", 1;
  double step = kt__rd_num(o, "step");
  if (!(step >= 0 && step <= 2e9) || step != floor(step)) return *why = "no integer \"step\"", 1;
  pl->s = (kt_run_step){.step = (int)step,
                        .skipped = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "skipped")),
                        .loss = kt__rd_num(o, "loss"),
                        .val_loss = kt__rd_num(o, "val_loss"),
                        .lr = kt__rd_num(o, "lr"),
                        .grad_norm = kt__rd_num(o, "grad_norm"),
                        .seconds = kt__rd_num(o, "seconds"),
                        .tokens_per_s = kt__rd_num(o, "tokens_per_s"),
                        .samples_per_s = kt__rd_num(o, "samples_per_s"),
                        .bubble = kt__rd_num(o, "bubble")};
  kt__rd_fault_parse(o, &pl->s.fault);
  kt__rd_switch_parse(o, &pl->s.sw);
  const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(o, "ranks");
  int n = cJSON_IsArray(ranks) ? cJSON_GetArraySize(ranks) : 0;
  if (n > MAX_RANKS) return *why = "more than 4096 ranks", 1;
  pl->n = n;
  pl->r = n ? kt_calloc((size_t)n, sizeof *pl->r) : NULL;
  if (n && !pl->r) return -1;
  int i = 0;
  for (const cJSON *e = ranks ? ranks->child : NULL; e && i < n; e = e->next, i++)
    pl->r[i] = (kt_run_rank_step){.busy = kt__rd_num(e, "busy"),
                                  .comm_time = kt__rd_num(e, "comm_time"),
                                  .bytes_sent = kt__rd_num(e, "bytes_sent"),
                                  .peak_act_bytes = kt__rd_num(e, "peak_act_bytes"),
                                  .idle = idle_causes(e)};
  return 0;
}

/* Counts a skipped line and describes the first ones. 0, or -1 (memory). */
static int skip_line(reader *rd, int lineno, const char *why) {
  if (++rd->run->bad_lines > KT_RUN_LINES_DESCRIBED) return 0;
  return kt__rd_warn(rd->run, "%s line %d: %s (skipped)", rd->path, lineno, why);
}

static int on_line(void *ctx, char *line, size_t len, int lineno, int complete) {
  reader *rd = ctx;
  if (strspn(line, " \t\r") == len) return 1; /* blank (a NUL is not blank) */
  if (memchr(line, 0, len)) {
    if (!complete) return rd->torn = 1, 0;
    return skip_line(rd, lineno, "a NUL byte in the line") ? -1 : 1;
  }
  if (kt_grow((void **)&rd->lines, &rd->cap, rd->n + 1, sizeof *rd->lines)) return -1;
  cJSON *o = cJSON_ParseWithOpts(line, NULL, 1);
  const char *why = "malformed JSON";
  parsed_line *pl = &rd->lines[rd->n];
  memset(pl, 0, sizeof *pl);
  int rc = o ? parse_step(o, pl, &why) : 1;
  cJSON_Delete(o);
  if (rc < 0) return -1;
  if (rc == 0) {
    if (pl->s.step > rd->after) rd->n++;
    else free(pl->r);
    return 1;
  }
  free(pl->r);
  if (!complete) return rd->torn = 1, 0; /* being written, or torn by a crash */
  return skip_line(rd, lineno, why) ? -1 : 1;
}

static int cmp_line(const void *a, const void *b) {
  const parsed_line *x = a, *y = b;
  return (x->s.step > y->s.step) - (x->s.step < y->s.step);
}

/* Appends rd's lines to r's steps; the rank table widens when a line has
 * more ranks than any before. ENOMEM. */
static kt_status append_lines(kt_run *r, reader *rd, kt_error *err) {
  size_t n = r->n_steps + rd->n;
  int ranks = r->ranks;
  for (size_t i = 0; i < rd->n; i++)
    if (rd->lines[i].n > ranks) ranks = rd->lines[i].n;
  kt_run_step *steps = realloc(r->steps, (n ? n : 1) * sizeof *steps);
  if (steps) r->steps = steps;
  kt_run_rank_step *rs = ranks ? kt_calloc(n * (size_t)ranks, sizeof *rs) : NULL;
  if (!steps || (ranks && !rs)) {
    free(rs);
    return kt_fail(err, KT_ENOMEM, "out of memory reading %s", rd->path);
  }
  for (size_t i = 0; ranks && i < r->n_steps; i++)
    for (int k = 0; k < ranks; k++)
      rs[i * (size_t)ranks + (size_t)k] =
          k < r->ranks ? r->rank_steps[i * (size_t)r->ranks + (size_t)k] : no_rank();
  for (size_t j = 0; j < rd->n; j++) {
    size_t i = r->n_steps + j;
    steps[i] = rd->lines[j].s;
    for (int k = 0; k < ranks; k++)
      rs[i * (size_t)ranks + (size_t)k] = k < rd->lines[j].n ? rd->lines[j].r[k] : no_rank();
  }
  free(r->rank_steps);
  r->rank_steps = rs;
  r->ranks = ranks;
  r->n_steps = n;
  return KT_OK;
}

static void reader_free(reader *rd) {
  for (size_t i = 0; i < rd->n; i++) free(rd->lines[i].r);
  free(rd->lines);
}

/* Reads path from the follow state's offset into r (sorted when sort). */
static kt_status read_from(kt_run *r, const char *path, int after, int sort, size_t *added,
                           kt_error *err) {
  reader rd = {.run = r, .path = path, .after = after};
  long long end = 0;
  int lineno = r->follow.metrics_lines;
  kt_status st = kt__rd_lines(path, r->follow.metrics_end, MAX_METRICS_BYTES, &lineno, on_line, &rd,
                              &end, err);
  if (!st && sort && rd.n > 1) qsort(rd.lines, rd.n, sizeof *rd.lines, cmp_line);
  if (!st) st = append_lines(r, &rd, err);
  if (!st) {
    r->follow.metrics_lines = lineno;
    r->follow.metrics_end = end;
    *added = rd.n;
  }
  if (sort) r->skipped_lines = (size_t)rd.torn;
  reader_free(&rd);
  return st;
}

/* The file's identity (device, inode) and size; -1 when it cannot be read. */
static int file_id(const char *path, unsigned long long id[2], long long *size) {
  struct stat sb;
  if (stat(path, &sb)) return -1;
  id[0] = (unsigned long long)sb.st_dev, id[1] = (unsigned long long)sb.st_ino;
  *size = (long long)sb.st_size;
  return 0;
}

kt_status kt__rd_load_metrics(kt_run *r, const char *path, kt_error *err) {
  memset(&r->follow, 0, sizeof r->follow);
  long long size;
  file_id(path, r->follow.metrics_id, &size);
  size_t added = 0;
  return read_from(r, path, -1, 1, &added, err);
}

kt_status kt__rd_follow_metrics(kt_run *r, const char *path, size_t *added, kt_error *err) {
  unsigned long long id[2];
  long long size;
  *added = 0;
  if (file_id(path, id, &size)) return KT_OK; /* between a rewrite's remove and rename */
  int after = -1;
  if (id[0] != r->follow.metrics_id[0] || id[1] != r->follow.metrics_id[1] ||
      size < r->follow.metrics_end) { /* rewritten (a resume keeps its steps): read again */
    r->follow.metrics_end = 0, r->follow.metrics_lines = 0;
    memcpy(r->follow.metrics_id, id, sizeof id);
    after = r->n_steps ? r->steps[r->n_steps - 1].step : -1;
  } else if (size == r->follow.metrics_end) {
    return KT_OK;
  }
  return read_from(r, path, after, 0, added, err);
}
