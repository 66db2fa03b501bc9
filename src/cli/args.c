/* Option parsing, help text and error printing shared by all commands. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>

#include "kaiten/generators.h"
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"

int cli_usage_error(const char *fmt, ...) {
  /* one line of at most KT_ERROR_LEN * 2 bytes: a value it names (a 50 MB
   * argument) is echoed as a prefix */
  char line[KT_ERROR_LEN * 2];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (n >= (int)sizeof line) memcpy(line + sizeof line - 4, "...", 4);
  for (char *c = line; *c; c++)
    if (*c == '\n' || *c == '\r') *c = ' ';
  fprintf(stderr, "kaiten: %s\n", line);
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
    out->given[idx]++;
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
    cli_usage_error("%s%s '%s': expected a number in %g..%g", name[1] ? "--" : "-", name, v, lo,
                    hi);
    return -1;
  }
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

int cli_emit(const char *path, const kt_buf *b, int durable) {
  if (b->failed) {
    fprintf(stderr, "kaiten: out of memory rendering output\n");
    return 1;
  }
  if (!path || !strcmp(path, "-")) {
    struct stat out;
    off_t at = ftello(stdout);
    kt_error err;
    if (!fstat(STDOUT_FILENO, &out) && S_ISREG(out.st_mode) &&
        kt_file_size_check("stdout", (double)(at > out.st_size ? at : out.st_size) + (double)b->len,
                           &err))
      return cli_fail(KT_EIO, &err);
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
