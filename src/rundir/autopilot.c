/* The autopilot's fields of a metrics.jsonl line (kaiten/rundir.h):
 * "fault", the rank or link named slow at the step, and "switch", the
 * plan made before it. Written by the step's writer, read by its reader. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "rundir/internal.h"

static void number(kt_buf *b, const char *key, double x) {
  kt_buf_printf(b, ",\"%s\":", key);
  kt_buf_json_number(b, x);
}

void kt_run_fault_json(const kt_run_fault *f, kt_buf *b) {
  if (f->kind == KT_FAULT_RANK) kt_buf_printf(b, "{\"rank\":%d", f->rank);
  else if (f->kind == KT_FAULT_LINK) kt_buf_printf(b, "{\"link\":\"%d-%d\"", f->a, f->b);
  else return kt_buf_puts(b, "null");
  number(b, "factor", f->factor);
  if (f->kind == KT_FAULT_LINK) number(b, "delay", f->delay);
  kt_buf_printf(b, ",\"since\":%d}", f->since);
}

void kt_run_switch_json(const kt_run_switch *w, kt_buf *b) {
  if (!w->made) return kt_buf_puts(b, "null");
  kt_buf_puts(b, "{\"kind\":");
  kt_buf_json_string(b, w->kind);
  kt_buf_puts(b, ",\"from\":");
  kt_buf_json_string(b, w->from);
  kt_buf_puts(b, ",\"to\":");
  kt_buf_json_string(b, w->to);
  if (w->partition[0]) {
    kt_buf_puts(b, ",\"partition\":");
    kt_buf_json_string(b, w->partition);
  }
  number(b, "predicted_before", w->predicted_before);
  number(b, "predicted_after", w->predicted_after);
  number(b, "lower_bound", w->lower_bound);
  number(b, "cost", w->cost);
  number(b, "replan_seconds", w->replan_seconds);
  number(b, "replan_cpu_seconds", w->replan_cpu);
  number(b, "replan_fraction", w->replan_fraction);
  number(b, "switch_seconds", w->switch_seconds);
  kt_buf_puts(b, "}");
}

/* "A-B" of two ranks: 0, else -1. */
static int link_of(const char *s, int *a, int *b) {
  int n = 0;
  if (!s || sscanf(s, "%d-%d%n", a, b, &n) != 2 || s[n] || *a < 0 || *b <= *a || *b >= 1 << 20)
    return -1;
  return 0;
}

void kt__rd_fault_parse(const cJSON *o, kt_run_fault *f) {
  memset(f, 0, sizeof *f);
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, "fault");
  if (!cJSON_IsObject(x)) return;
  int rank, a, b, since = 0;
  if (!kt__rd_int(x, "rank", 0, 1 << 20, &rank)) f->kind = KT_FAULT_RANK, f->rank = rank;
  else if (!link_of(kt__rd_str(x, "link"), &a, &b)) f->kind = KT_FAULT_LINK, f->a = a, f->b = b;
  else return;
  f->factor = kt__rd_num(x, "factor");
  f->delay = kt__rd_num(x, "delay");
  if (!kt__rd_int(x, "since", 0, 2000000000, &since)) f->since = since;
}

static void copy_str(char *dst, size_t n, const char *src) {
  snprintf(dst, n, "%s", src ? src : "");
}

void kt__rd_switch_parse(const cJSON *o, kt_run_switch *w) {
  memset(w, 0, sizeof *w);
  const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, "switch");
  const char *kind = cJSON_IsObject(x) ? kt__rd_str(x, "kind") : NULL;
  if (!kind) return;
  w->made = 1;
  copy_str(w->kind, sizeof w->kind, kind);
  copy_str(w->from, sizeof w->from, kt__rd_str(x, "from"));
  copy_str(w->to, sizeof w->to, kt__rd_str(x, "to"));
  copy_str(w->partition, sizeof w->partition, kt__rd_str(x, "partition"));
  w->predicted_before = kt__rd_num(x, "predicted_before");
  w->predicted_after = kt__rd_num(x, "predicted_after");
  w->lower_bound = kt__rd_num(x, "lower_bound");
  w->cost = kt__rd_num(x, "cost");
  w->replan_seconds = kt__rd_num(x, "replan_seconds");
  w->replan_cpu = kt__rd_num(x, "replan_cpu_seconds");
  w->replan_fraction = kt__rd_num(x, "replan_fraction");
  w->switch_seconds = kt__rd_num(x, "switch_seconds");
}
