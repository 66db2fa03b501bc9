/* Fuzz target: the public C API as a foreign caller uses it (kaiten/ffi.h),
 * with fuzzed arguments. The input is a program: each step picks an entry
 * point and its arguments, every number either one of the edges (0, -1,
 * INT_MAX, 4097, 1e308, 5e-324, NaN, ...) or read from the input, every
 * text a slice of the input. Properties beyond the sanitizers: every call
 * returns a known status with a one-line reason, leaves its outputs empty
 * when it fails, and refuses arguments outside the CLI's ranges (EINVAL):
 * sizes, costs, memory limits, a chart's width; a request printed reads
 * back to the same text; what it renders holds no NaN or infinity. Runs
 * whose arguments are in range but large are not made (a simulation of
 * millions of actions is not what a fuzzer should spend its time on), nor
 * the searching generators and optimal above P, M = 2 (their budgets take
 * seconds, see README.md). */
#include <float.h>
#include <limits.h>
#include <math.h>

#include "fuzz_common.h"
#include "kaiten/ffi.h"
#include "kaiten/generators.h"

typedef struct {
  const uint8_t *p;
  size_t n;
} input;

static unsigned byte(input *in) {
  if (!in->n) return 0;
  in->n--;
  return *in->p++;
}

static int edge_int(input *in) {
  static const int edges[] = {0,       1,       2,       3,       4,    -1,     -2,     40,
                              63,      64,      65,      4096,    4097, 100000, 100001, 1000000,
                              1000001, INT_MAX, INT_MIN, 1 << 30, 39,   256,    257};
  unsigned b = byte(in);
  if (b < 128) return (int)(b % 9) - 1; /* small: -1..7 */
  if (b < 224) return edges[b % (sizeof edges / sizeof *edges)];
  int v = 0;
  for (int i = 0; i < 4; i++) v = (int)((unsigned)v << 8 | byte(in));
  return v;
}

static double edge_double(input *in) {
  static const double edges[] = {
      0,       -0.0,         1,      0.5,    2,    -1,     1e308,
      9e307,   -1e308,       5e-324, 1e-300, 1e15, 1e-15,  1.0000000001e15,
      9.9e-16, 2147483648.0, 1e16,   1e6,    1e-3, 9.9e-4, 1000001,
      DBL_MAX, DBL_MIN,      4096};
  unsigned b = byte(in);
  if (b < 96) return (double)(b % 12) / 2;
  if (b < 224) {
    double e = edges[b % (sizeof edges / sizeof *edges)];
    return b == 200 ? NAN : b == 201 ? INFINITY : b == 202 ? -INFINITY : e;
  }
  uint64_t bits = 0;
  for (int i = 0; i < 8; i++) bits = bits << 8 | byte(in);
  double d;
  memcpy(&d, &bits, sizeof d);
  return d;
}

/* A NUL-terminated slice of the input (caller frees). */
static char *text(input *in) {
  size_t len = byte(in) * 4;
  if (len > in->n) len = in->n;
  char *s = fuzz_cstr(in->p, len);
  in->p += len, in->n -= len;
  return s;
}

/* A status the library knows, and a one-line reason when it failed. */
static void check_status(kt_status st, const kt_error *err) {
  if ((unsigned)st >= KT_STATUS_COUNT) abort();
  if (st && (!err->msg[0] || strchr(err->msg, '\n'))) abort();
}

/* Rendered JSON whose figures are numbers (a value that is not finite is
 * written as null), and a chart without "nan" or "inf". */
static void check_finite(const char *out, int json) {
  static const char *const figures[] = {"\"makespan\":null", "\"bubble_ratio\":null",
                                        "\"busy\":null", "\"peak_memory\":null"};
  static const char *const words[] = {" nan", "-nan", " inf ", " -inf", " inf%", " inf\n"};
  for (size_t i = 0; out && json && i < sizeof figures / sizeof *figures; i++)
    if (strstr(out, figures[i])) abort();
  for (size_t i = 0; out && !json && i < sizeof words / sizeof *words; i++)
    if (strstr(out, words[i])) abort();
}

typedef struct {
  kt_request *rq;
  kt_result *res;
  kt_comparison *cmp;
} state;

/* ---- settings ---------------------------------------------------------------- */

enum { K_SIZE, K_COST, K_LIMIT, K_OTHER };
static const struct {
  const char *key;
  int kind;
  long lo, hi;
} keys[] = {{"p", K_SIZE, 1, KT_MAX_RANKS},
            {"m", K_SIZE, 1, KT_MAX_MICROBATCHES},
            {"v", K_SIZE, 0, KT_MAX_CHUNKS},
            {"stages", K_SIZE, 1, KT_MAX_RANKS},
            {"tf", K_COST, 0, 0},
            {"tb", K_COST, 0, 0},
            {"tw", K_COST, 0, 0},
            {"tu", K_COST, 0, 0},
            {"mem-act", K_COST, 0, 0},
            {"mem_wgrad", K_COST, 0, 0},
            {"mem-transient", K_COST, 0, 0},
            {"comm", K_COST, 0, 0},
            {"comm-latency", K_COST, 0, 0},
            {"comm_bytes", K_COST, 0, 0},
            {"comm-bandwidth", K_COST, 0, 0},
            {"send-overhead", K_COST, 0, 0},
            {"op-overhead", K_COST, 0, 0},
            {"t-norm", K_COST, 0, 0},
            {"t-dp", K_COST, 0, 0},
            {"tie", K_COST, 0, 0},
            {"mem-limit", K_LIMIT, 0, 0},
            {"overlap", K_OTHER, 0, 0},
            {"schedule", K_OTHER, 0, 0},
            {"schedules", K_OTHER, 0, 0},
            {"placement", K_OTHER, 0, 0},
            {"step-sync", K_OTHER, 0, 0},
            {"per-stage", K_OTHER, 0, 0},
            {"effort", K_OTHER, 0, 0},
            {"time-limit", K_OTHER, 0, 0},
            {"slow-rank", K_OTHER, 0, 0},
            {"torch-notation", K_OTHER, 0, 0},
            {"no-such-key", K_OTHER, 0, 0}};
#define N_KEYS (sizeof keys / sizeof *keys)

static const char *const names[] = {"1f1b",      "gpipe",      "interleaved", "zb-h1",
                                    "zb-h2",     "zbv",        "zb-auto",     "optimal",
                                    "dualpipev", "1f1b,zb-h1", "v",           "loop",
                                    "barrier",   "quick",      "1:2",         "gpipe,gpipe"};

/* The range of a cost as given: 0, or 1e-15..1e15. */
static int cost_ok(double x) { return x == 0 || (x >= KT_COST_MIN && x <= KT_COST_MAX); }

static void op_set(state *s, input *in) {
  unsigned k = byte(in) % N_KEYS, form = byte(in) % 5;
  char buf[64], *slice = NULL;
  const char *val = buf;
  long i = 0;
  double d = 0;
  if (form == 0) snprintf(buf, sizeof buf, "%ld", i = edge_int(in));
  else if (form == 1) snprintf(buf, sizeof buf, "%.17g", d = edge_double(in));
  else if (form == 2) snprintf(buf, sizeof buf, "%.17gx", d = edge_double(in));
  else if (form == 3) val = names[byte(in) % (sizeof names / sizeof *names)];
  else val = slice = text(in);
  kt_error err = {{0}};
  kt_status st = kt_ffi_request_set(s->rq, keys[k].key, val, &err);
  check_status(st, &err);
  /* the CLI's ranges hold whatever the door */
  if (form == 0 && keys[k].kind == K_SIZE && (i < keys[k].lo || i > keys[k].hi) && !st) abort();
  if (form == 1 && keys[k].kind == K_COST && !cost_ok(d) && !st) abort();
  if (form <= 2 && keys[k].kind == K_LIMIT && !st &&
      !((form ? d : (double)i) >= KT_COST_MIN && (form ? d : (double)i) <= KT_COST_MAX))
    abort();
  free(slice);
}

static void op_text(state *s, input *in) {
  kt_error err = {{0}};
  char *t = text(in);
  kt_status st;
  switch (byte(in) % 4) {
    case 0: st = kt_ffi_request_parse(s->rq, t, &err); break;
    case 1: st = kt_ffi_request_costs(s->rq, t, &err); break;
    case 2:
      st = kt_ffi_request_order(s->rq, t, strlen(t), byte(in) & 1 ? "fuzz" : NULL, &err);
      break;
    default: {
      const char *path = fuzz_temp_file(t, strlen(t));
      st = kt_ffi_request_order_file(s->rq, path, NULL, &err);
    }
  }
  check_status(st, &err);
  free(t);
  /* the costs that read are in range */
  kt_error e2;
  if (!st && kt_costs_check(&s->rq->costs, s->rq->costs.n_stages, &e2)) abort();
}

/* A request printed reads back to the same text. */
static void op_print(state *s) {
  kt_error err = {{0}};
  char *a = NULL, *b = NULL;
  kt_status st = kt_ffi_request_text(s->rq, &a, &err);
  check_status(st, &err);
  if (st) return;
  kt_request *again = kt_ffi_request_new();
  if (!again) abort();
  if (kt_ffi_request_parse(again, a, &err) || kt_ffi_request_text(again, &b, &err)) abort();
  if (strcmp(a, b)) abort();
  kt_ffi_free(a), kt_ffi_free(b);
  kt_ffi_request_free(again);
}

/* ---- runs -------------------------------------------------------------------- */

static int searches(const char *name) {
  static const char *const slow[] = {"zbv", "zb-auto", "zbv-auto", "v-half", "v-min", "optimal"};
  int k = kt_gen_kind_from_name(name);
  const char *own = k >= 0 ? kt_gen_kind_name((kt_gen_kind)k) : name;
  for (size_t i = 0; i < sizeof slow / sizeof *slow; i++)
    if (!strcmp(own, slow[i])) return 1;
  return 0;
}

/* Whether running the request stays in the milliseconds (see above). */
static int small(const kt_request *rq, const char *name) {
  if (rq->order) return 1;
  int v = rq->v > 2 ? rq->v : 2;
  if (searches(name))
    return rq->p <= 2 && rq->m <= 2 && rq->v <= 2 && rq->effort != KT_EFFORT_THOROUGH;
  return rq->p <= 32 && (long)rq->p * v * rq->m <= 4096;
}

static void op_run(state *s, input *in) {
  int detail = edge_int(in);
  if (!small(s->rq, s->rq->schedule)) return;
  kt_ffi_result_free(s->res);
  s->res = NULL;
  kt_error err = {{0}};
  kt_status st = kt_ffi_run(s->rq, detail, &s->res, &err);
  check_status(st, &err);
  if ((st != 0) != (s->res == NULL)) abort();
  if ((detail < 0 || detail > 2) && !st) abort();
}

static void op_render(state *s, input *in) {
  if (!s->res) return;
  kt_error err = {{0}};
  char *out = NULL;
  kt_status st;
  int width = edge_int(in);
  switch (byte(in) % 4) {
    case 0:
      st = kt_ffi_result_json(s->res, byte(in) & 1, &out, &err);
      if (!st) check_finite(out, 1);
      break;
    case 1:
      if (width > 4096) width = 100001; /* in range but wide: not drawn here */
      st = kt_ffi_result_gantt(s->res, width, &out, &err);
      if (!st && (width < 40 || width > 100000)) abort();
      if (!st) check_finite(out, 0);
      break;
    case 2: st = kt_ffi_result_costs_json(s->res, &out, &err); break;
    default:
      st = kt_ffi_schedule_write(kt_ffi_result_order(s->res), edge_int(in), edge_int(in), &out,
                                 &err);
  }
  check_status(st, &err);
  if ((st != 0) != (out == NULL)) abort();
  kt_ffi_free(out);
  if (!s->res->simulated && byte(in) & 1) {
    st = kt_ffi_result_simulate(s->res, 1 + (byte(in) & 1), &err);
    check_status(st, &err);
  }
}

static void op_compare(state *s, input *in) {
  const kt_request *rq = s->rq;
  if (!rq->schedules) return; /* every generator: the searches too */
  char list[1024];
  snprintf(list, sizeof list, "%s", rq->schedules);
  for (char *save = NULL, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save))
    if (!small(rq, t)) return;
  kt_ffi_comparison_free(s->cmp);
  s->cmp = NULL;
  kt_error err = {{0}};
  kt_status st = kt_ffi_compare(rq, 1 + (byte(in) & 1), &s->cmp, &err);
  check_status(st, &err);
  if ((st != 0) != (s->cmp == NULL)) abort();
  if (st) return;
  char *out = NULL;
  int json = byte(in) & 1;
  st = kt_ffi_comparison_text(s->cmp, json, &out, &err);
  check_status(st, &err);
  if (!st) check_finite(out, json);
  kt_ffi_free(out);
}

static void op_partition(input *in) {
  kt_error err = {{0}};
  int n = byte(in) % 65, stages = edge_int(in);
  double load[64], fixed[64], act[64], mult[64];
  for (int i = 0; i < n; i++)
    load[i] = edge_double(in), fixed[i] = edge_double(in), act[i] = edge_double(in),
    mult[i] = edge_double(in);
  int counts[64];
  double bottleneck = 0;
  int with_mem = byte(in) & 1;
  if (stages > 64) stages = 64 + (stages & 1); /* counts[] holds 64: 65 must be refused (> n) */
  kt_status st = kt_ffi_partition(
      n, n ? load : NULL, with_mem ? fixed : NULL, with_mem ? act : NULL, with_mem ? mult : NULL,
      with_mem ? edge_double(in) : 0, stages, counts, &bottleneck, &err);
  check_status(st, &err);
  if (!st && !isfinite(bottleneck)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  input in = {data, size};
  state s = {kt_ffi_request_new(), NULL, NULL};
  if (!s.rq) abort();
  for (int steps = 0; in.n && steps < 16; steps++) {
    switch (byte(&in) % 8) {
      case 0:
      case 1: op_set(&s, &in); break;
      case 2: op_text(&s, &in); break;
      case 3: op_print(&s); break;
      case 4: op_run(&s, &in); break;
      case 5: op_render(&s, &in); break;
      case 6: op_compare(&s, &in); break;
      default: op_partition(&in); break;
    }
  }
  /* the comparison reads the request's costs: freed first */
  kt_ffi_comparison_free(s.cmp);
  kt_ffi_result_free(s.res);
  kt_ffi_request_free(s.rq);
  return 0;
}
