/* Fuzz target: the public C API as a foreign caller uses it (kaiten/ffi.h),
 * with fuzzed arguments. The input is a program: each step picks an entry
 * point and its arguments, every number either one of the edges (0, -1,
 * INT_MAX, 4097, 1e308, 5e-324, NaN, ...) or read from the input, every
 * text a slice of the input. Properties beyond the sanitizers: every call
 * returns a known status with a one-line reason, leaves its outputs empty
 * when it fails, and refuses arguments outside the CLI's ranges (EINVAL);
 * what it renders holds no NaN or infinity. Calls whose arguments are in
 * range but large are not made (a search or a simulation of millions of
 * actions is not what a fuzzer should spend its time on), nor are the
 * searching generators run (their budgets take seconds, see README.md). */
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
  static const int edges[] = {0, 1, 2, 3, 4, -1, -2, 40, 63, 64, 65, 4096, 4097, 100000, 100001,
                              1000000, 1000001, INT_MAX, INT_MIN, 1 << 30, 39, 256, 257};
  unsigned b = byte(in);
  if (b < 128) return (int)(b % 9) - 1; /* small: -1..7 */
  if (b < 224) return edges[b % (sizeof edges / sizeof *edges)];
  int v = 0;
  for (int i = 0; i < 4; i++) v = (int)((unsigned)v << 8 | byte(in));
  return v;
}

static double edge_double(input *in) {
  static const double edges[] = {0, -0.0, 1, 0.5, 2, -1, 1e308, 9e307, -1e308, 5e-324, 1e-300,
                                 1e15, 1e-15, 1.0000000001e15, 9.9e-16, 2147483648.0, 1e16, 1e6,
                                 1e-3, 9.9e-4, 1000001, DBL_MAX, DBL_MIN, 4096};
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

static int in_cli_range(int p, int v, int m) {
  return p >= 1 && p <= KT_MAX_RANKS && v >= 0 && v <= KT_MAX_CHUNKS && m >= 1 &&
         m <= KT_MAX_MICROBATCHES;
}

static int searches(int kind) {
  static const char *const names[] = {"zbv", "zb-auto", "zbv-auto", "v-half", "v-min"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (!strcmp(kt_gen_kind_name((kt_gen_kind)kind), names[i])) return 1;
  return 0;
}

typedef struct {
  kt_costs *costs;
  kt_schedule *sched;
  kt_ffi_sim *sim;
  kt_ffi_info *info;
} state;

/* The simulation and its info read the schedule and costs they were made
 * of (kaiten/ffi.h): dropped before either changes. */
static void drop_sim(state *s) {
  kt_ffi_info_free(s->info), s->info = NULL;
  kt_ffi_sim_free(s->sim), s->sim = NULL;
}

static void op_generate(state *s, input *in) {
  kt_error err = {{0}};
  int kind = edge_int(in), p = edge_int(in), v = edge_int(in), m = edge_int(in);
  double limit = edge_double(in);
  int runnable = kind >= 0 && kind < KT_SCHED_COUNT && !searches(kind) && in_cli_range(p, v, m) &&
                 3.0 * p * (v > 0 ? v : 2) * m <= 4096;
  if (in_cli_range(p, v, m) && !runnable) return; /* in range but large or searching */
  drop_sim(s);
  kt_status st = kt_ffi_generate(kind, p, v, m, s->costs, limit, 0, s->sched, &err);
  check_status(st, &err);
  if (!in_cli_range(p, v, m) && st != KT_EINVAL) abort();
  if (!isfinite(limit) && st != KT_EINVAL) abort();
  if (st) return;
  st = kt_ffi_simulate(s->sched, s->costs, &s->sim, &err);
  check_status(st, &err);
  if (st && s->sim) abort();
  if (st) return;
  s->info = kt_ffi_info_new(s->sched, s->costs, "rank", kind, limit > 0 ? limit : -1, NULL, s->sim);
}

static void op_costs(state *s, input *in) {
  kt_error err = {{0}};
  char *json = text(in);
  drop_sim(s);
  kt_status st = kt_costs_parse_json(s->costs, json, "fuzz", &err);
  check_status(st, &err);
  free(json);
  if (!st && kt_costs_check(s->costs, s->costs->n_stages, &err)) abort(); /* what it read is in range */
  if (st) { /* a failed read may leave part of it: start again */
    kt_ffi_costs_free(s->costs);
    s->costs = kt_ffi_costs_new();
    if (!s->costs) abort();
  }
}

static void op_parse(state *s, input *in) {
  kt_error err = {{0}};
  char *t = text(in);
  long info[3];
  drop_sim(s);
  kt_status st = kt_ffi_parse(t, edge_int(in), s->sched, NULL, info, &err);
  check_status(st, &err);
  free(t);
  if (!st && kt_schedule_total_actions(s->sched) <= 4096) {
    st = kt_ffi_simulate(s->sched, s->costs, &s->sim, &err);
    check_status(st, &err);
    if (!st) s->info = kt_ffi_info_new(s->sched, s->costs, NULL, -1, -1, NULL, s->sim);
  }
}

static void op_render(state *s, input *in) {
  kt_error err = {{0}};
  char *out = NULL;
  int width = edge_int(in), choice = byte(in) % 4;
  kt_status st;
  if (choice == 0) st = kt_ffi_sim_json(s->info, s->sim, byte(in) & 1, &out, &err);
  else if (choice == 1) st = kt_ffi_sim_gantt(s->info, s->sim, width, &out, &err);
  else if (choice == 2) st = kt_ffi_schedule_write(s->sched, width, &out, &err);
  else st = kt_ffi_costs_json(s->costs, &out, &err);
  check_status(st, &err);
  if (st && out) abort();
  if (choice == 1 && width != 0 && (width < 40 || width > 100000) && st != KT_EINVAL) abort();
  if (!st && choice <= 1) check_finite(out, choice == 0);
  kt_ffi_free(out);
}

/* A comparison of n rows (arrays of n entries: a C function cannot know
 * their length), row 0 the simulation, the others not applying; a name
 * may be missing. More rows than FFI_MAX_ROWS (256) must be refused. */
static void op_compare(state *s, input *in) {
  kt_error err = {{0}};
  int n = edge_int(in), p = edge_int(in), m = edge_int(in), v = edge_int(in);
  int rows = n > 0 && n <= 256 ? n : 1, table = byte(in) & 1, unnamed = byte(in) % 8;
  const kt_ffi_info **infos = calloc((size_t)rows, sizeof *infos);
  const kt_ffi_sim **sims = calloc((size_t)rows, sizeof *sims);
  const char **names = calloc((size_t)rows, sizeof *names), **reasons = calloc((size_t)rows, sizeof *reasons);
  if (!infos || !sims || !names || !reasons) abort();
  infos[0] = s->info, sims[0] = s->sim;
  for (int i = 0; i < rows; i++) names[i] = i == unnamed ? NULL : "fuzz", reasons[i] = "does not apply";
  char *out = NULL;
  kt_status st = kt_ffi_compare(n, infos, sims, names, reasons, edge_double(in), p, m, v, "rank",
                                s->costs, table, &out, &err);
  check_status(st, &err);
  if ((n > 256 || n < 0 || (unnamed < n)) && st != KT_EINVAL) abort();
  if (!st) check_finite(out, !table);
  kt_ffi_free(out);
  free(infos), free(sims), free(names), free(reasons);
}

static void op_small(state *s, input *in) {
  kt_error err = {{0}};
  int kind = edge_int(in), p = edge_int(in), v = edge_int(in), m = edge_int(in);
  double limit = edge_double(in), t = edge_double(in);
  double peak = kt_ffi_1f1b_peak(kind, p, v, m, s->costs);
  double lim = kt_ffi_mem_limit(p, v, m, s->costs, limit);
  if (!isfinite(peak) || !isfinite(lim)) abort();
  if (!in_cli_range(p, v, m) && (peak != -1 || lim != -1)) abort();
  /* optimal: run only where it proves at once (and searches for 10 ms at
   * most); a time limit out of range is refused */
  int t_ok = t <= 0 || (t >= 1e-3 && t <= 1e6);
  if (in_cli_range(p, v, m) && (v == 1 || v == 2) && t_ok && isfinite(limit)) {
    if (p > 2 || m > 2) return; /* its starting order (zb-auto's search) took 2 s at P=3, M=3, V=2 */
    t = 0.01;
  }
  drop_sim(s);
  kt_ffi_search *search = NULL;
  kt_status st = kt_ffi_optimal(p, v, m, s->costs, limit, t, s->sched, &search, &err);
  check_status(st, &err);
  if (st && search) abort();
  if (isnan(t) && st != KT_EINVAL) abort();
  kt_ffi_search_free(search);
}

static void op_partition(input *in) {
  kt_error err = {{0}};
  int n = byte(in) % 65, stages = edge_int(in);
  double load[64], fixed[64], act[64], mult[64];
  for (int i = 0; i < n; i++) load[i] = edge_double(in), fixed[i] = edge_double(in),
                              act[i] = edge_double(in), mult[i] = edge_double(in);
  int counts[64];
  double bottleneck = 0;
  int with_mem = byte(in) & 1;
  if (stages > 64) stages = 64 + (stages & 1); /* counts[] holds 64: 65 must be refused (> n) */
  kt_status st = kt_ffi_partition(n, n ? load : NULL, with_mem ? fixed : NULL,
                                  with_mem ? act : NULL, with_mem ? mult : NULL,
                                  with_mem ? edge_double(in) : 0, stages, counts, &bottleneck, &err);
  check_status(st, &err);
  if (!st && !isfinite(bottleneck)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  input in = {data, size};
  state s = {kt_ffi_costs_new(), kt_ffi_schedule_new(), NULL, NULL};
  if (!s.costs || !s.sched) abort();
  for (int steps = 0; in.n && steps < 16; steps++) {
    switch (byte(&in) % 7) {
      case 0: op_generate(&s, &in); break;
      case 1: op_costs(&s, &in); break;
      case 2: op_parse(&s, &in); break;
      case 3: op_render(&s, &in); break;
      case 4: op_compare(&s, &in); break;
      case 5: op_small(&s, &in); break;
      default: op_partition(&in); break;
    }
  }
  kt_ffi_info_free(s.info);
  kt_ffi_sim_free(s.sim);
  kt_ffi_schedule_free(s.sched);
  kt_ffi_costs_free(s.costs);
  return 0;
}
