/* Fault traces in PipeMorph's format (its dynamic stragglers' generator
 * writes them): one line per change, `time_s;links;delays`, e.g.
 * `0.1834;0_1,1_2,2_3;0.0301,0.0,0.0254`: from 0.1834 s on, the links
 * 0-1, 1-2 and 2-3 add those delays (seconds) to every message. */
#include <stdlib.h>
#include <string.h>

#include "costs/costs_internal.h"

/* The most links one line of a trace names. */
#define TRACE_LINKS 512

/* Splits s at commas into at most max fields (in place). -1 past max. */
static int split(char *s, char **out, int max) {
  int n = 0;
  for (char *tok = s; tok;) {
    if (n >= max) return -1;
    char *comma = strchr(tok, ',');
    if (comma) *comma = 0;
    out[n++] = tok;
    tok = comma ? comma + 1 : NULL;
  }
  return n;
}

static void trim(char **s) {
  while (**s == ' ' || **s == '\t') ++*s;
  size_t n = strlen(*s);
  while (n && ((*s)[n - 1] == ' ' || (*s)[n - 1] == '\t' || (*s)[n - 1] == '\r')) (*s)[--n] = 0;
}

/* "A_B" into *a < *b. -1 when not two pipeline ranks. */
static int link_of(const char *t, int *a, int *b) {
  const char *u = strchr(t, '_');
  char left[24];
  long x, y;
  if (!u || (size_t)(u - t) >= sizeof left) return -1;
  memcpy(left, t, (size_t)(u - t));
  left[u - t] = 0;
  if (kt_parse_int(left, 0, KT_MAX_RANKS - 1, &x) || kt_parse_int(u + 1, 0, KT_MAX_RANKS - 1, &y) ||
      x == y)
    return -1;
  *a = (int)(x < y ? x : y), *b = (int)(x < y ? y : x);
  return 0;
}

/* The links of the first line, into f (n_trace_links set), each once; a
 * later line's, checked to be the first's in the same order (its delays
 * are read by position). */
static kt_status line_links(kt_faults *f, char **links, int n, const char *origin, int line,
                            kt_error *err) {
  int first = f->n_points == 0;
  if (first) {
    f->trace_a = malloc(sizeof(int) * (size_t)n);
    f->trace_b = malloc(sizeof(int) * (size_t)n);
    if (!f->trace_a || !f->trace_b) return kt_fail(err, KT_ENOMEM, "out of memory");
    f->n_trace_links = n;
  } else if (n != f->n_trace_links) {
    return kt_fail(err, KT_EINVAL, "%s:%d: %d links; the first line names %d", origin, line, n,
                   f->n_trace_links);
  }
  for (int k = 0; k < n; k++) {
    char *t = links[k];
    int a, b;
    trim(&t);
    if (link_of(t, &a, &b))
      return kt_fail(err, KT_EINVAL, "%s:%d: link '%.40s' is not two pipeline ranks A_B", origin,
                     line, t);
    if (!first && (a != f->trace_a[k] || b != f->trace_b[k]))
      return kt_fail(err, KT_EINVAL,
                     "%s:%d: link '%.40s' where the first line names %d_%d (every line lists "
                     "the same links in the same order)",
                     origin, line, t, f->trace_a[k], f->trace_b[k]);
    for (int j = 0; first && j < k; j++)
      if (f->trace_a[j] == a && f->trace_b[j] == b)
        return kt_fail(err, KT_EINVAL, "%s:%d: link '%.40s' is named twice", origin, line, t);
    if (first) f->trace_a[k] = a, f->trace_b[k] = b;
  }
  return KT_OK;
}

/* One line's fields: its time (rising), its links (the first line's), its
 * delays (one per link) appended to the trace. */
static kt_status trace_line(kt_faults *f, char *text, const char *origin, int line, int cap,
                            kt_error *err) {
  char *parts[3], *links[TRACE_LINKS], *delays[TRACE_LINKS];
  char *semi1 = strchr(text, ';'), *semi2 = semi1 ? strchr(semi1 + 1, ';') : NULL;
  if (!semi2 || strchr(semi2 + 1, ';'))
    return kt_fail(err, KT_EINVAL, "%s:%d: expected time_s;links;delays", origin, line);
  *semi1 = *semi2 = 0;
  parts[0] = text, parts[1] = semi1 + 1, parts[2] = semi2 + 1;
  for (int i = 0; i < 3; i++) trim(&parts[i]);
  double t;
  if (kt_parse_double(parts[0], &t) || !(t >= 0) || t > 1e9 ||
      (f->n_points > 0 && t < f->trace_t[f->n_points - 1]))
    return kt_fail(err, KT_EINVAL,
                   "%s:%d: time '%s' is not a number of seconds at or after the "
                   "line before's",
                   origin, line, parts[0]);
  int nl = split(parts[1], links, TRACE_LINKS), nd = split(parts[2], delays, TRACE_LINKS);
  if (nl < 1 || nl != nd)
    return kt_fail(err, KT_EINVAL, "%s:%d: %d links but %d delays", origin, line, nl, nd);
  kt_status st = line_links(f, links, nl, origin, line, err);
  if (st) return st;
  if (f->n_points >= cap) return kt_fail(err, KT_EINVAL, "%s:%d: too many lines", origin, line);
  f->trace_t[f->n_points] = t;
  for (int k = 0; k < nl; k++) {
    double d;
    trim(&delays[k]);
    if (kt_parse_double(delays[k], &d) || !(d >= 0) || d > 1e6)
      return kt_fail(err, KT_EINVAL, "%s:%d: delay '%s' is not a number of seconds >= 0", origin,
                     line, delays[k]);
    f->trace_delay[(size_t)f->n_points * (size_t)nl + (size_t)k] = d;
  }
  f->n_points++;
  return KT_OK;
}

kt_status kt_faults_parse_trace(kt_faults *f, const char *text, const char *origin, int onset,
                                kt_error *err) {
  if (f->n_points > 0) return kt_fail(err, KT_EINVAL, "%s: one fault trace per run", origin);
  size_t len = strlen(text);
  int cap = 1;
  for (size_t i = 0; i < len; i++) cap += text[i] == '\n';
  char *copy = malloc(len + 1);
  f->trace_t = malloc(sizeof(double) * (size_t)cap);
  /* each line holds at most one delay per two bytes */
  f->trace_delay = malloc(sizeof(double) * (len / 2 + 1));
  kt_status st =
      copy && f->trace_t && f->trace_delay ? KT_OK : kt_fail(err, KT_ENOMEM, "out of memory");
  if (!st) memcpy(copy, text, len + 1);
  int line = 0;
  for (char *ln = copy; !st && ln && *ln;) {
    char *nl = strchr(ln, '\n');
    if (nl) *nl = 0;
    line++;
    char *t = ln;
    trim(&t);
    if (*t && *t != '#') st = trace_line(f, t, origin, line, cap, err);
    ln = nl ? nl + 1 : NULL;
  }
  free(copy);
  if (!st && f->n_points == 0) st = kt_fail(err, KT_EINVAL, "%s: no change in the trace", origin);
  f->trace_onset = onset;
  if (st) {
    free(f->trace_t), free(f->trace_delay), free(f->trace_a), free(f->trace_b);
    f->trace_t = f->trace_delay = NULL, f->trace_a = f->trace_b = NULL;
    f->n_points = f->n_trace_links = 0;
  }
  return st;
}

kt_status kt_faults_load_trace(kt_faults *f, const char *path, int onset, kt_error *err) {
  char *text;
  kt_status st = kt_read_text(path, KT_COSTS_FILE_MAX, 0, &text, NULL, err);
  if (st) return st;
  st = kt_faults_parse_trace(f, text, path, onset, err);
  free(text);
  return st;
}
