/* Option parsing, help text and error printing shared by all commands. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>

#include "kaiten/generators.h"
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cli/cli.h"

int cli_usage_error(const char *fmt, ...) {
  va_list ap;
  fputs("kaiten: ", stderr);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  return 2;
}

int cli_fail(kt_status st, const kt_error *err) {
  fprintf(stderr, "kaiten: %s\n", err && err->msg[0] ? err->msg : kt_status_message(st));
  return kt_status_exit_code(st) ? kt_status_exit_code(st) : 1;
}

void cli_print_help(const cli_command *cmd, FILE *f) {
  fprintf(f, "kaiten %s — %s\n\nusage: kaiten %s %s\n\noptions:\n", cmd->name, cmd->summary,
          cmd->name, cmd->usage);
  for (int i = 0; i < cmd->n_opts; i++) {
    const cli_opt *o = &cmd->opts[i];
    char head[64];
    if (o->short_name)
      snprintf(head, sizeof head, "-%c, --%s%s%s", o->short_name, o->name, o->arg ? " " : "",
               o->arg ? o->arg : "");
    else
      snprintf(head, sizeof head, "    --%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
    fprintf(f, "  %-26s %s\n", head, o->help);
  }
  fprintf(f, "  %-26s %s\n", "-h, --help", "show this help");
  if (cmd->details) fprintf(f, "\n%s", cmd->details);
}

static int find_long(const cli_command *cmd, const char *name, size_t len) {
  for (int i = 0; i < cmd->n_opts; i++)
    if (strlen(cmd->opts[i].name) == len && !strncmp(cmd->opts[i].name, name, len)) return i;
  return -1;
}

int cli_parse(const cli_command *cmd, int argc, char **argv, cli_args *out) {
  memset(out, 0, sizeof *out);
  out->opts = cmd->opts;
  out->n_opts = cmd->n_opts;
  for (int i = 0; i < argc; i++) {
    const char *arg = argv[i];
    if (!strcmp(arg, "-h") || !strcmp(arg, "--help")) {
      cli_print_help(cmd, stdout);
      return 1;
    }
    int idx = -1;
    const char *inline_val = NULL;
    if (arg[0] == '-' && arg[1] == '-' && arg[2]) {
      const char *name = arg + 2, *eq = strchr(name, '=');
      size_t len = eq ? (size_t)(eq - name) : strlen(name);
      idx = find_long(cmd, name, len);
      if (eq) inline_val = eq + 1;
    } else if (arg[0] == '-' && arg[1] && arg[1] != '-' && !(arg[1] >= '0' && arg[1] <= '9')) {
      for (int k = 0; k < cmd->n_opts; k++)
        if (cmd->opts[k].short_name == arg[1]) idx = k;
      if (idx >= 0 && arg[2]) inline_val = arg + 2;
    } else {
      if (out->n_pos >= CLI_MAX_POS)
        return cli_usage_error("too many arguments for 'kaiten %s' at '%s'", cmd->name, arg);
      out->pos[out->n_pos++] = arg;
      continue;
    }
    if (idx < 0)
      return cli_usage_error("unknown option '%s' for 'kaiten %s' (see kaiten %s --help)", arg,
                             cmd->name, cmd->name);
    const cli_opt *o = &cmd->opts[idx];
    if (o->arg) {
      if (!inline_val) {
        if (i + 1 >= argc)
          return cli_usage_error("option --%s needs a value (%s)", o->name, o->arg);
        inline_val = argv[++i];
      }
      out->value[idx] = inline_val;
    } else {
      if (inline_val) return cli_usage_error("option --%s takes no value", o->name);
      out->value[idx] = "1";
    }
    out->given[idx] = 1;
  }
  return 0;
}

static int opt_index(const cli_args *a, const char *name) {
  for (int i = 0; i < a->n_opts; i++)
    if (!strcmp(a->opts[i].name, name)) return i;
  return -1;
}

const char *cli_get(const cli_args *a, const char *name) {
  int i = opt_index(a, name);
  return i >= 0 && a->given[i] ? a->value[i] : NULL;
}

int cli_has(const cli_args *a, const char *name) { return cli_get(a, name) != NULL; }

const char *cli_program = "kaiten";

int cli_int(const cli_args *a, const char *name, long lo, long hi, long dflt, long *out) {
  const char *v = cli_get(a, name);
  if (!v) {
    *out = dflt;
    return 0;
  }
  if (kt_parse_int(v, lo, hi, out) != 0) {
    cli_usage_error("%s%s '%s': expected an integer in %ld..%ld", name[1] ? "--" : "-", name, v, lo,
                    hi);
    return -1;
  }
  return 0;
}

int cli_double(const cli_args *a, const char *name, double lo, double hi, double dflt,
               double *out) {
  const char *v = cli_get(a, name);
  if (!v) {
    *out = dflt;
    return 0;
  }
  if (kt_parse_double(v, out) != 0 || *out < lo || *out > hi) {
    cli_usage_error("%s%s '%s': expected a number in %g..%g", name[1] ? "--" : "-", name, v, lo, hi);
    return -1;
  }
  return 0;
}

/* Flags that would each set the hop time, or that mean nothing alone. */
static int check_comm_flags(const cli_args *a) {
  int bw = cli_has(a, "comm-bandwidth");
  if (cli_has(a, "comm") && bw)
    return cli_usage_error("--comm %s and --comm-bandwidth %s both set the time of a hop; give "
                           "--comm, or --comm-latency/--comm-bytes/--comm-bandwidth",
                           cli_get(a, "comm"), cli_get(a, "comm-bandwidth"));
  if (!bw && cli_has(a, "comm-bytes"))
    return cli_usage_error("--comm-bytes %s needs --comm-bandwidth (hop = latency + "
                           "bytes/bandwidth)", cli_get(a, "comm-bytes"));
  if (!bw && cli_has(a, "comm-latency"))
    return cli_usage_error("--comm-latency %s needs --comm-bandwidth; for a fixed hop time give "
                           "--comm", cli_get(a, "comm-latency"));
  return 0;
}

static int read_costs(const cli_args *a, kt_costs *c) {
  kt_costs_default(c);
  kt_error err = {{0}};
  if (check_comm_flags(a)) return 2;
  const char *file = cli_get(a, "costs");
  kt_status st;
  if (file && (st = kt_costs_load_json(c, file, &err))) return cli_fail(st == KT_EIO ? KT_EINVAL : st, &err);
  static const char *const fields[] = {"tf", "tb", "tw", "tu", "mem-act", "mem-wgrad"};
  for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
    const char *v = cli_get(a, fields[i]);
    if (v && kt_costs_set(c, fields[i], v, &err)) return cli_usage_error("--%s", err.msg);
  }
  static const char *const scalars[] = {"comm",          "comm-latency", "comm-bytes",
                                        "comm-bandwidth", "send-overhead", "op-overhead",
                                        "t-norm",        "t-dp"};
  double *targets[] = {&c->comm,          &c->comm_latency,  &c->comm_bytes,
                       &c->comm_bandwidth, &c->send_overhead, &c->op_overhead,
                       &c->t_norm,         &c->t_dp};
  for (size_t i = 0; i < sizeof targets / sizeof *targets; i++) {
    const char *v = cli_get(a, scalars[i]);
    if (v && strchr(v, ',')) { /* --comm, --comm-latency, --comm-bandwidth: one per link */
      if (kt_costs_set(c, scalars[i], v, &err)) return cli_usage_error("--%s", err.msg);
    } else if (cli_double(a, scalars[i], 0, 1e300, *targets[i], targets[i])) {
      return 2;
    }
  }
  if (cli_double(a, "overlap", 0, 1, c->overlap, &c->overlap)) return 2;
  if (cli_has(a, "tie")) {
    if (cli_double(a, "tie", 0, 1e300, 0, &c->t_tie)) return 2;
    c->tied = 1;
  }
  if (cli_step_sync(a, &c->step_sync)) return 2;
  if (kt_costs_compute_free(c))
    return cli_usage_error("--tf, --tb and --tw are all 0: every action takes no time, so there is "
                           "no makespan or bubble to compute; give a cost above 0");
  return 0;
}

int cli_step_sync(const cli_args *a, kt_step_sync *sync) {
  const char *v = cli_get(a, "step-sync");
  if (!v) return 0;
  int k = kt_step_sync_from_name(v);
  if (k < 0) return cli_usage_error("--step-sync '%s': expected overlap or barrier", v);
  *sync = (kt_step_sync)k;
  return 0;
}

const char *cli_cost_basis(const cli_args *a) { return cli_has(a, "per-stage") ? "stage" : "rank"; }

int cli_stage_costs(const cli_args *a, const kt_costs *given, int v, kt_costs *out) {
  kt_error err = {{0}};
  kt_status st = kt_costs_for_chunks(given, cli_has(a, "per-stage") ? 1 : v, out, &err);
  return st ? cli_fail(st, &err) : 0;
}

int cli_check_sim_size(const char *what, long p, long v, long m) {
  /* at most three actions (F, I, W) per stage and micro-batch; each costs its
   * IR entry, an event, two memory samples and the simulator's pair state */
  double actions = 3.0 * (double)p * (double)(v > 0 ? v : 2) * (double)m;
  double need = actions * (12 + 56 + 48 + 8);
  double have = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGE_SIZE);
  if (have > 0 && need > 0.75 * have)
    return cli_usage_error("%s -p %ld -m %ld: up to %.3g actions would need about %.1f GiB of "
                           "memory (this machine has %.1f GiB); simulate fewer ranks or "
                           "micro-batches",
                           what, p, m, actions, need / 1073741824.0, have / 1073741824.0);
  return 0;
}

int cli_read_costs(const cli_args *a, kt_costs *c) {
  int rc = read_costs(a, c);
  if (rc) kt_costs_free(c); /* per-stage arrays read before the bad value */
  return rc;
}

int cli_mem_limit_parse(const cli_args *a, int allow_bytes, cli_mem_limit *out) {
  *out = (cli_mem_limit){CLI_MEM_UNITS, 0};
  const char *v = cli_get(a, "mem-limit");
  if (!v) return 0;
  static const struct { const char *suffix; double scale; } bytes[] = {
      {"TiB", 1099511627776.0}, {"GiB", 1073741824.0}, {"MiB", 1048576.0}, {"KiB", 1024.0},
      {"B", 1.0}};
  size_t n = strlen(v);
  char num[64];
  double x;
  cli_mem_kind kind = CLI_MEM_UNITS;
  double scale = 1;
  if (n > 1 && (v[n - 1] == 'x' || v[n - 1] == 'X')) {
    kind = CLI_MEM_FRACTION, n--;
  } else {
    for (size_t i = 0; i < sizeof bytes / sizeof *bytes; i++) {
      size_t k = strlen(bytes[i].suffix);
      if (n > k && !strcmp(v + n - k, bytes[i].suffix)) {
        kind = CLI_MEM_BYTES, scale = bytes[i].scale, n -= k;
        break;
      }
    }
  }
  if (n == 0 || n >= sizeof num) goto bad;
  memcpy(num, v, n);
  num[n] = 0;
  if (kt_parse_double(num, &x) != 0 || !(x >= 0) || isinf(x) || (kind != CLI_MEM_UNITS && x <= 0))
    goto bad;
  if (kind == CLI_MEM_BYTES && !allow_bytes)
    return cli_usage_error("--mem-limit '%s': bytes need a model (kaiten train); here give "
                           "--mem-act units (e.g. 12) or a fraction of 1F1B's peak (e.g. 0.5x)", v);
  *out = (cli_mem_limit){kind, x * scale};
  return 0;
bad:
  return cli_usage_error("--mem-limit '%s': expected --mem-act units per rank (12), a fraction "
                         "of 1F1B's peak (0.5x)%s", v, allow_bytes ? " or bytes (2GiB, 512MiB)" : "");
}

double cli_mem_limit_units(const cli_mem_limit *ml, kt_gen_kind kind, int p, int m, int v,
                           const kt_costs *c) {
  if (ml->kind != CLI_MEM_FRACTION) return ml->value;
  kt_gen_params params = {.p = p, .m = m, .v = v, .costs = c};
  /* of 1F1B's whole peak, the scratch of the op that runs at it included
   * (as kaiten train measures it); the order keeps the rest */
  double scratch = 0;
  for (int s = 0; s < p * (v > 0 ? v : 1); s++) scratch = fmax(scratch, kt_cost_mem_transient(c, s));
  double peak = kt_gen_1f1b_peak(kind, &params) + scratch;
  double limit = ml->value * peak - scratch;
  return limit > 0 ? limit : 1e-9 * peak; /* below any order: the generator says what it needs */
}

void cli_memory_model_line(const cli_args *a, const kt_costs *c, kt_buf *b) {
  if (!cli_has(a, "mem-wgrad")) kt_render_memory_model_line(c, b);
}

static void announce_search(const char *schedule, size_t actions, void *ctx) {
  (void)ctx;
  fprintf(stderr, "kaiten: %s: tuning its order to the costs over %zu actions (seconds per "
                  "million)\n", schedule, actions);
}

int cli_generate(const cli_args *a, kt_gen_kind kind, int p, int m, int v, const kt_costs *c,
                 double mem_limit, kt_schedule *out, kt_error *err) {
  kt_gen_params params = {.p = p, .m = m, .v = v, .costs = c, .mem_limit = mem_limit,
                          .thorough = cli_has(a, "thorough"), .on_long_search = announce_search};
  kt_status st = kt_generate(kind, &params, out, err);
  return st ? kt_status_exit_code(st) : 0;
}

int cli_emit(const char *path, const kt_buf *b, int durable) {
  if (b->failed) {
    fprintf(stderr, "kaiten: out of memory rendering output\n");
    return 1;
  }
  if (!path || !strcmp(path, "-")) {
    if (b->len && fwrite(b->data, 1, b->len, stdout) != b->len) return 1;
    return fflush(stdout) ? 1 : 0;
  }
  kt_error err;
  const char *data = b->data ? b->data : "";
  kt_status st = durable ? kt_write_file_atomic(path, data, b->len, &err)
                         : kt_write_output(path, data, b->len, &err);
  return st ? cli_fail(st, &err) : 0;
}

int cli_use_color(const char *mode) {
  if (mode && !strcmp(mode, "always")) return 1;
  if (mode && !strcmp(mode, "never")) return 0;
  if (getenv("NO_COLOR")) return 0;
  const char *term = getenv("TERM");
  return isatty(STDOUT_FILENO) && term && strcmp(term, "dumb") != 0;
}

int cli_term_width(void) {
  const char *cols = getenv("COLUMNS");
  long w;
  if (cols && kt_parse_int(cols, 20, 10000, &w) == 0) return (int)w;
  struct winsize ws;
  if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20)
    return ws.ws_col;
  return 120;
}
