/* Reading a run directory back: config.json (as data and flattened to
 * key/value pairs for display), metrics.jsonl (metrics.c), timeline.json
 * rebuilt into two kt_timeline objects, trace.json's memory counters added
 * to the measured one; and following a run a trainer still writes.
 *
 * Every failure names the file (and the line of metrics.jsonl). Every file
 * is read within a bound (lines.c).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rundir/internal.h"

#define MAX_RANKS 4096
#define MAX_CONFIG (4LL << 20)
#define MAX_TIMELINE (64LL << 20)

/* ---- files and JSON ---------------------------------------------------------- */

static int is_file(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

char *kt__rd_join(const char *dir, const char *name) {
  size_t n = strlen(dir) + strlen(name) + 2;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s/%s", dir, name);
  return p;
}

/* Line number (1-based) of position pos in text. */
static int line_of(const char *text, const char *pos) {
  int line = 1;
  for (const char *c = text; c < pos && *c; c++) line += *c == '\n';
  return line;
}

/* Parses a whole file (at most max bytes) as one JSON value; EPARSE names
 * the file and line. */
static kt_status read_json_max(const char *path, long long max, cJSON **out, kt_error *err) {
  char *text = NULL;
  size_t len = 0;
  kt_status st = kt__rd_read_bounded(path, max, &text, &len, err);
  if (st) return st;
  const char *end = NULL;
  *out = strlen(text) == len ? cJSON_ParseWithOpts(text, &end, 1) : NULL;
  if (!*out)
    st = kt_fail(err, KT_EPARSE, "%s: malformed JSON at line %d", path,
                 line_of(text, end ? end : text + strlen(text)));
  free(text);
  return st;
}

kt_status kt__rd_read_json(const char *path, cJSON **out, kt_error *err) {
  return read_json_max(path, MAX_CONFIG, out, err);
}

double kt__rd_num(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

const char *kt__rd_str(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

int kt__rd_int(const cJSON *o, const char *key, int lo, int hi, int *out) {
  double v = kt__rd_num(o, key);
  if (!(v >= lo && v <= hi) || v != floor(v)) return -1;
  *out = (int)v;
  return 0;
}

/* ---- config.json ------------------------------------------------------------- */

static void scalar_text(kt_buf *b, const cJSON *v) {
  if (cJSON_IsString(v)) kt_buf_puts(b, v->valuestring);
  else if (cJSON_IsNumber(v)) kt_buf_printf(b, "%.10g", v->valuedouble);
  else if (cJSON_IsBool(v)) kt_buf_puts(b, cJSON_IsTrue(v) ? "true" : "false");
  else if (cJSON_IsNull(v)) kt_buf_puts(b, "null");
  else kt_buf_puts(b, "\xe2\x80\xa6"); /* nested deeper than a list of scalars */
}

static int add_item(kt_run *r, size_t *cap, const char *key, const char *value) {
  if (kt_grow((void **)&r->config, cap, r->n_config + 1, sizeof *r->config)) return -1;
  kt_run_config_item *it = &r->config[r->n_config];
  it->key = strdup(key);
  it->value = strdup(value);
  if (!it->key || !it->value) {
    free(it->key);
    free(it->value);
    return -1;
  }
  r->n_config++;
  return 0;
}

/* Objects become "a.b" keys; lists of scalars one "x, y, z" value. */
static int flatten(kt_run *r, size_t *cap, const char *prefix, const cJSON *o, int depth) {
  for (const cJSON *v = o->child; v; v = v->next) {
    if (depth == 0 && v->string && !strcmp(v->string, "segments")) continue; /* cfg.segments */
    kt_buf key, val;
    kt_buf_init(&key);
    kt_buf_init(&val);
    kt_buf_printf(&key, "%s%s%s", prefix, *prefix ? "." : "", v->string ? v->string : "?");
    int rc = 0;
    if (cJSON_IsObject(v) && depth < 4) {
      rc = key.failed ? -1 : flatten(r, cap, key.data, v, depth + 1);
    } else {
      int i = 0;
      if (cJSON_IsArray(v)) {
        for (const cJSON *e = v->child; e; e = e->next, i++) {
          if (i == 32) {
            kt_buf_printf(&val, ", \xe2\x80\xa6 (%d values)", cJSON_GetArraySize(v));
            break;
          }
          if (i) kt_buf_puts(&val, ", ");
          scalar_text(&val, e);
        }
        if (i == 0) kt_buf_puts(&val, "[]");
      } else {
        scalar_text(&val, v);
      }
      rc = key.failed || val.failed ? -1 : add_item(r, cap, key.data, val.data ? val.data : "");
    }
    kt_buf_free(&key);
    kt_buf_free(&val);
    if (rc) return rc;
  }
  return 0;
}

static void copy_str(char *dst, size_t n, const char *s) { snprintf(dst, n, "%s", s ? s : ""); }

static kt_status load_config(kt_run *r, const char *path, kt_error *err) {
  cJSON *root;
  kt_status st = kt__rd_read_json(path, &root, err);
  if (st) return st;
  size_t cap = 0;
  st = kt__rd_config_parse(root, path, &r->cfg, err);
  if (!st && flatten(r, &cap, "", root, 0))
    st = kt_fail(err, KT_ENOMEM, "out of memory reading %s", path);
  cJSON_Delete(root);
  if (st) return st;
  const kt_run_config *c = &r->cfg;
  copy_str(r->model, sizeof r->model, c->model);
  r->layers = c->layers, r->hidden = c->hidden, r->steps_planned = c->steps;
  if (c->n_segments > 0) {
    const kt_run_segment *last = &c->segments[c->n_segments - 1];
    copy_str(r->schedule, sizeof r->schedule, last->schedule);
    copy_str(r->transport, sizeof r->transport, last->transport);
    r->p = last->p, r->v = last->v, r->m = last->m;
  }
  return KT_OK;
}

/* ---- timeline.json and trace.json -------------------------------------------- */

/* Rebuilds one timeline from sim-json events, counting from its first
 * action (a measured step starts wherever the clock was); *t0 = that start. */
static kt_status load_events(kt_timeline *t, const cJSON *o, const char *path, const char *which,
                             double *t0, kt_error *err) {
  int p;
  if (!cJSON_IsObject(o)) return kt_fail(err, KT_EPARSE, "%s: no \"%s\" object", path, which);
  if (kt__rd_int(o, "p", 1, MAX_RANKS, &p))
    return kt_fail(err, KT_EPARSE, "%s: %s.p is not a rank count in 1..%d", path, which, MAX_RANKS);
  const char *unit = kt__rd_str(o, "time_unit");
  if (kt_timeline_init(t, p, unit && strlen(unit) < sizeof t->time_unit ? unit : "s", "B"))
    return kt_fail(err, KT_ENOMEM, "out of memory reading %s", path);
  const cJSON *events = cJSON_GetObjectItemCaseSensitive(o, "events");
  if (!cJSON_IsArray(events)) return kt_fail(err, KT_EPARSE, "%s: %s has no events[]", path, which);
  int i = 0;
  *t0 = INFINITY;
  for (const cJSON *e = events->child; e; e = e->next, i++) {
    kt_event ev = {.start = kt__rd_num(e, "start"), .end = kt__rd_num(e, "end"), .comm_time = 0};
    const char *op = kt__rd_str(e, "op");
    const char *ops = "FBIW", *at = op && strlen(op) == 1 ? strchr(ops, op[0]) : NULL;
    double bytes = kt__rd_num(e, "bytes");
    const char *bad = kt__rd_int(e, "rank", 0, p - 1, &ev.rank)       ? "rank"
                      : kt__rd_int(e, "stage", 0, 1 << 20, &ev.stage) ? "stage"
                      : kt__rd_int(e, "mb", 0, 1 << 24, &ev.mb)       ? "mb"
                      : !at                                           ? "op"
                      : !isfinite(ev.start)                           ? "start"
                      : !(ev.end >= ev.start && isfinite(ev.end))     ? "end"
                                                                      : NULL;
    if (bad) {
      char *v = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(e, bad));
      kt_fail(err, KT_EPARSE, "%s: %s event %d: %s %s is not %s", path, which, i, bad,
              v ? v : "(missing)",
              !strcmp(bad, "rank")  ? "a rank of the timeline's p"
              : !strcmp(bad, "op")  ? "\"F\", \"B\", \"I\" or \"W\""
              : !strcmp(bad, "end") ? "a time at or after start"
                                    : "a valid number");
      free(v);
      return KT_EPARSE;
    }
    ev.op = (uint8_t)(at - ops);
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "overlap_next")))
      ev.flags = KT_ACTION_OVERLAP_NEXT;
    ev.bytes = isfinite(bytes) && bytes > 0 ? (int64_t)bytes : 0;
    if (kt_timeline_add_event(t, &ev)) return kt_fail(err, KT_ENOMEM, "out of memory");
    if (ev.start < *t0) *t0 = ev.start;
  }
  if (!isfinite(*t0)) *t0 = 0;
  for (size_t k = 0; k < t->n_events; k++) {
    kt_event *e = &t->events[k];
    /* counted from the first start, a time may overflow (1e308 - -1e308) */
    if (!isfinite(e->end - *t0))
      return kt_fail(err, KT_EPARSE,
                     "%s: %s event %zu: end %g is too far from the first "
                     "start %g (the step would last forever)",
                     path, which, k, e->end, *t0);
    e->start -= *t0, e->end -= *t0;
  }
  return KT_OK;
}

/* timeline.json's predicted.costs (kt_render_costs_json's form: its
 * "per_stage" says what the lists say) into c; an absent object leaves c
 * as it is (*found 0). EPARSE naming the file, ENOMEM. */
static kt_status parse_costs(const cJSON *pred, const char *path, kt_costs *c, int *found,
                             kt_error *err) {
  const cJSON *o = cJSON_GetObjectItemCaseSensitive(pred, "costs");
  *found = 0;
  if (!cJSON_IsObject(o)) return KT_OK;
  cJSON *copy = cJSON_Duplicate(o, 1);
  if (copy) cJSON_DeleteItemFromObjectCaseSensitive(copy, "per_stage");
  /* "links": each link's hop as the prediction charged it (its delay
   * included): read as the per-link comm (kaiten/costs.h), the same hops */
  cJSON *links = copy ? cJSON_DetachItemFromObjectCaseSensitive(copy, "links") : NULL;
  if (cJSON_IsArray(links) && cJSON_GetArraySize(links) > 0) {
    cJSON_DeleteItemFromObjectCaseSensitive(copy, "comm");
    cJSON_AddItemToObject(copy, "comm", links);
    links = NULL;
  }
  cJSON_Delete(links);
  char *text = copy ? cJSON_PrintUnformatted(copy) : NULL;
  cJSON_Delete(copy);
  if (!text) return kt_fail(err, KT_ENOMEM, "out of memory reading %s", path);
  char origin[600];
  snprintf(origin, sizeof origin, "%s: predicted.costs", path);
  kt_error e = {{0}};
  kt_status st = kt_costs_parse_json(c, text, origin, &e);
  free(text);
  if (st == KT_ENOMEM) return kt_fail(err, st, "%s", e.msg);
  if (st) return kt_fail(err, KT_EPARSE, "%s", e.msg);
  *found = 1;
  return KT_OK;
}

/* Each rank's bytes sent (measured.ranks[].bytes_sent), or NULL. */
static double *sent_of(const cJSON *m, int p) {
  const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(m, "ranks");
  if (!cJSON_IsArray(ranks) || cJSON_GetArraySize(ranks) != p) return NULL;
  double *v = kt_calloc((size_t)p, sizeof *v);
  int i = 0;
  for (const cJSON *e = ranks->child; v && e; e = e->next, i++) {
    double b = kt__rd_num(e, "bytes_sent");
    v[i] = isfinite(b) && b >= 0 ? b : 0;
  }
  return v;
}

static kt_status load_timeline(kt_run *r, const char *path, double *t0, kt_error *err) {
  cJSON *root;
  kt_status st = read_json_max(path, MAX_TIMELINE, &root, err);
  if (st) return st;
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "measured");
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "predicted");
  double pt0;
  st = load_events(&r->measured, m, path, "measured", t0, err);
  if (!st) st = load_events(&r->predicted, p, path, "predicted", &pt0, err);
  if (!st) {
    /* costs the reader does not know are said, not fatal: the timelines stand */
    kt_error e = {{0}};
    kt_status cs = parse_costs(p, path, &r->calibrated, &r->has_calibrated, &e);
    if (cs == KT_ENOMEM) st = kt_fail(err, cs, "%s", e.msg);
    else if (cs && kt__rd_warn(r, "%s (the what-if starts from the default costs)", e.msg))
      st = kt_fail(err, KT_ENOMEM, "out of memory");
    if (cs) kt_costs_free(&r->calibrated), kt_costs_default(&r->calibrated);
  }
  if (!st) {
    r->sent_bytes = sent_of(m, r->measured.p);
    r->measured_period = kt__rd_num(m, "period");
    r->predicted_period = kt__rd_num(p, "period");
    const cJSON *sync = cJSON_GetObjectItemCaseSensitive(m, "step_sync");
    r->step_sync = cJSON_IsString(sync) ? kt_step_sync_from_name(sync->valuestring) : -1;
    r->has_timeline = 1;
  }
  cJSON_Delete(root);
  return st;
}

/* The segment's memory per stage (bytes) into costs of as many stages. */
static kt_status add_memory(kt_costs *c, const kt_run_segment *seg, kt_error *err) {
  int n = seg->n_mem;
  if (n <= 0 || !seg->mem_act_bytes || (c->n_stages > 0 && c->n_stages != n)) return KT_OK;
  const double *from[3] = {seg->mem_act_bytes, seg->mem_wgrad_bytes, seg->mem_transient_bytes};
  double **to[3] = {&c->stage_mem_act, &c->stage_mem_wgrad, &c->stage_mem_transient};
  c->n_stages = n;
  for (int k = 0; k < 3; k++) {
    if (!from[k]) continue;
    double *v = kt_calloc((size_t)n, sizeof *v);
    if (!v) return kt_fail(err, KT_ENOMEM, "out of memory");
    memcpy(v, from[k], sizeof *v * (size_t)n);
    free(*to[k]);
    *to[k] = v;
  }
  return KT_OK;
}

/* The memory counters of the Chrome trace ("memory rank N", ts in µs). */
static kt_status load_trace_memory(kt_run *r, const char *path, double t0, kt_error *err) {
  cJSON *root;
  struct stat sb;
  if (stat(path, &sb) == 0 && sb.st_size > MAX_TIMELINE) /* optional: skipped, said */
    return kt__rd_warn(r,
                       "%s holds %lld MiB, more than kaiten writes: its memory counters "
                       "are not read",
                       path, (long long)(sb.st_size >> 20))
               ? KT_ENOMEM
               : KT_OK;
  kt_status st = read_json_max(path, MAX_TIMELINE, &root, err);
  if (st) return st;
  const cJSON *ev = cJSON_GetObjectItemCaseSensitive(root, "traceEvents");
  if (!cJSON_IsArray(ev)) st = kt_fail(err, KT_EPARSE, "%s: no traceEvents[]", path);
  for (const cJSON *e = ev && !st ? ev->child : NULL; e && !st; e = e->next) {
    const char *ph = kt__rd_str(e, "ph"), *name = kt__rd_str(e, "name");
    int rank;
    if (!ph || strcmp(ph, "C") || !name || strncmp(name, "memory rank", 11)) continue;
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
    double ts = kt__rd_num(e, "ts"),
           v = args && args->child && cJSON_IsNumber(args->child) ? args->child->valuedouble : NAN;
    if (kt__rd_int(e, "tid", 0, r->measured.p - 1, &rank) || !isfinite(ts) || !isfinite(v))
      continue;
    if (kt_timeline_add_mem(&r->measured, rank, ts * 1e-6 - t0, v))
      st = kt_fail(err, KT_ENOMEM, "out of memory reading %s", path);
    else r->has_memory = 1;
  }
  cJSON_Delete(root);
  return st;
}

/* ---- the directory ----------------------------------------------------------- */

void kt_run_free(kt_run *r) {
  if (!r) return;
  for (size_t i = 0; i < r->n_config; i++) free(r->config[i].key), free(r->config[i].value);
  free(r->config);
  kt_run_config_free(&r->cfg);
  free(r->steps);
  free(r->rank_steps);
  free(r->dir);
  for (size_t i = 0; i < r->n_warnings; i++) free(r->warnings[i]);
  kt_timeline_free(&r->measured);
  kt_timeline_free(&r->predicted);
  kt_costs_free(&r->calibrated);
  free(r->sent_bytes);
  memset(r, 0, sizeof *r);
}

int kt__rd_warn(kt_run *r, const char *fmt, ...) {
  if (r->n_warnings >= KT_RUN_MAX_WARNINGS) return 0;
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (!(r->warnings[r->n_warnings] = strdup(buf))) return -1;
  r->n_warnings++;
  return 0;
}

/* timeline.json's identity: device, inode, size, mtime; zeros when absent. */
static void timeline_id(const char *path, unsigned long long id[4]) {
  struct stat sb;
  memset(id, 0, 4 * sizeof *id);
  if (stat(path, &sb) || !S_ISREG(sb.st_mode)) return;
  id[0] = (unsigned long long)sb.st_dev, id[1] = (unsigned long long)sb.st_ino;
  id[2] = (unsigned long long)sb.st_size;
  id[3] = (unsigned long long)sb.st_mtim.tv_sec * 1000000000ull +
          (unsigned long long)sb.st_mtim.tv_nsec;
}

/* The traced step: timeline.json and trace.json's memory counters, into r
 * (which holds no timeline yet). */
static kt_status load_traced(kt_run *r, kt_error *err) {
  char *tl = kt__rd_join(r->dir, "timeline.json"), *tr = kt__rd_join(r->dir, "trace.json");
  kt_status st = tl && tr ? KT_OK : kt_fail(err, KT_ENOMEM, "out of memory");
  double t0 = 0;
  if (!st) timeline_id(tl, r->follow.timeline_id);
  if (!st && is_file(tl)) st = load_timeline(r, tl, &t0, err);
  if (!st && r->has_timeline && is_file(tr) && !strcmp(r->measured.time_unit, "s"))
    st = load_trace_memory(r, tr, t0, err);
  if (!st && r->has_timeline) kt_timeline_sort(&r->measured), kt_timeline_sort(&r->predicted);
  if (!st && r->has_calibrated && r->cfg.n_segments > 0)
    st = add_memory(&r->calibrated, &r->cfg.segments[r->cfg.n_segments - 1], err);
  free(tl);
  free(tr);
  return st;
}

kt_status kt_run_load(const char *dir, kt_run *out, kt_error *err) {
  memset(out, 0, sizeof *out);
  kt_costs_default(&out->calibrated);
  out->measured_period = out->predicted_period = NAN, out->step_sync = -1;
  struct stat sb;
  if (!dir || !*dir) return kt_fail(err, KT_EINVAL, "no run directory given");
  if (stat(dir, &sb) != 0) return kt_fail(err, KT_EINVAL, "run directory '%s' does not exist", dir);
  if (!S_ISDIR(sb.st_mode))
    return kt_fail(err, KT_EINVAL,
                   "'%s' is not a directory (a run directory holds config.json "
                   "and metrics.jsonl)",
                   dir);
  out->dir = strdup(dir);
  char *cfg = kt__rd_join(dir, "config.json"), *met = kt__rd_join(dir, "metrics.jsonl");
  kt_status st = KT_OK;
  if (!out->dir || !cfg || !met) st = kt_fail(err, KT_ENOMEM, "out of memory");
  const char *need[2] = {cfg, met};
  for (int i = 0; i < 2 && !st; i++)
    if (stat(need[i], &sb) != 0)
      st = kt_fail(err, KT_EINVAL, "%s is missing (not a training run's directory?)", need[i]);
  if (!st) st = load_config(out, cfg, err);
  if (!st) st = kt__rd_load_metrics(out, met, err);
  if (!st) st = load_traced(out, err);
  free(cfg);
  free(met);
  if (st) kt_run_free(out);
  return st;
}

kt_status kt_run_follow(kt_run *r, kt_run_news *news, kt_error *err) {
  memset(news, 0, sizeof *news);
  char *met = kt__rd_join(r->dir, "metrics.jsonl"), *tl = kt__rd_join(r->dir, "timeline.json");
  kt_status st = met && tl ? KT_OK : kt_fail(err, KT_ENOMEM, "out of memory");
  if (!st) st = kt__rd_follow_metrics(r, met, &news->steps, err);
  unsigned long long id[4];
  if (!st) timeline_id(tl, id);
  if (!st && memcmp(id, r->follow.timeline_id, sizeof id)) {
    /* read into a copy: on failure (a file half replaced) r keeps what it had */
    kt_run t = {.dir = r->dir};
    kt_costs_default(&t.calibrated);
    /* config.json too: the trainer writes its segment's end with timeline.json */
    kt_error ignored;
    if (kt_rundir_read_config(r->dir, &t.cfg, &ignored) || t.cfg.n_segments < 1) {
      kt_run_config_free(&t.cfg);
      t.cfg = r->cfg;
      memset(&r->cfg, 0, sizeof r->cfg);
    }
    st = load_traced(&t, err);
    if (!st) {
      kt_timeline_free(&r->measured);
      kt_timeline_free(&r->predicted);
      kt_costs_free(&r->calibrated);
      free(r->sent_bytes);
      r->measured = t.measured, r->predicted = t.predicted;
      r->calibrated = t.calibrated, r->has_calibrated = t.has_calibrated;
      r->sent_bytes = t.sent_bytes;
      r->measured_period = t.measured_period, r->predicted_period = t.predicted_period;
      r->step_sync = t.step_sync;
      r->has_timeline = t.has_timeline, r->has_memory = t.has_memory;
      memcpy(r->follow.timeline_id, t.follow.timeline_id, sizeof id);
      news->timeline = 1;
      memset(&t.measured, 0, sizeof t.measured);
      memset(&t.predicted, 0, sizeof t.predicted);
      kt_costs_default(&t.calibrated);
      t.sent_bytes = NULL;
    }
    /* the newer config.json when it was read, else r's back */
    if (r->cfg.n_segments == 0 || (!st && t.cfg.n_segments > 0)) {
      kt_run_config tmp = r->cfg;
      r->cfg = t.cfg;
      t.cfg = tmp;
    }
    for (size_t i = 0; i < t.n_warnings; i++)
      if (kt__rd_warn(r, "%s", t.warnings[i])) st = kt_fail(err, KT_ENOMEM, "out of memory");
    t.dir = NULL;
    kt_run_free(&t);
  }
  free(met);
  free(tl);
  return st;
}

kt_status kt_rundir_read_costs(const char *dir, kt_costs *out, kt_run_segment *layout,
                               kt_error *err) {
  kt_costs_default(out);
  kt_run r = {0};
  kt_costs_default(&r.calibrated);
  kt_status st = kt_rundir_read_config(dir, &r.cfg, err);
  char *tl = st ? NULL : kt__rd_join(dir, "timeline.json");
  cJSON *root = NULL;
  if (!st && !tl) st = kt_fail(err, KT_ENOMEM, "out of memory");
  if (!st && !is_file(tl))
    st = kt_fail(err, KT_EINVAL,
                 "'%s' has no timeline.json: a run's costs are written when "
                 "its training ends",
                 dir);
  if (!st) st = read_json_max(tl, MAX_TIMELINE, &root, err);
  if (!st)
    st = parse_costs(cJSON_GetObjectItemCaseSensitive(root, "predicted"), tl, &r.calibrated,
                     &r.has_calibrated, err);
  if (!st && !r.has_calibrated)
    st = kt_fail(err, KT_EINVAL,
                 "%s: no predicted.costs (a run's costs are calibrated on its "
                 "traced step)",
                 tl);
  const kt_run_segment *seg = r.cfg.n_segments > 0 ? &r.cfg.segments[r.cfg.n_segments - 1] : NULL;
  if (!st && seg) st = add_memory(&r.calibrated, seg, err);
  if (!st && layout) {
    *layout = seg ? *seg : (kt_run_segment){.last_step = -1};
    layout->partition = NULL, layout->n_partition = 0;
    layout->mem_act_bytes = layout->mem_wgrad_bytes = layout->mem_transient_bytes = NULL;
    layout->n_mem = 0;
  }
  if (!st) *out = r.calibrated, kt_costs_default(&r.calibrated);
  cJSON_Delete(root);
  free(tl);
  kt_costs_free(&r.calibrated);
  kt_run_config_free(&r.cfg);
  return st;
}
