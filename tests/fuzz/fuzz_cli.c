/* Fuzz target: command-line arguments. The input is one argument per line
 * (or NUL-separated), the first naming the command. A line "%%" ends the
 * arguments: the bytes after it become a file, and the argument "@" names it.
 *
 * Every command's options go through cli_parse; `train` also through its
 * option reader and --partition. `validate`, `sim` and `compare` run
 * in-process when they would only read that file and print (output
 * discarded), and when the sizes asked for keep a run short. */
#include "cli/cli.h"
#include "cli/train_cli.h"
#include "fuzz_common.h"
#include "kaiten/generators.h"
#include "kaiten/model.h"

#define MAX_ARGS 64
/* Largest P * M * max(V, 2) a command may simulate per input. */
#define MAX_WORK 4096L
/* Largest P: the lower bound every sim and compare prints sweeps each
 * rank's stages, so few micro-batches on many ranks cost more than P * M
 * says (compare -p 156 took 31 s, -p 64 -m 32 14 s in the fuzz build;
 * -p 32 -m 64 takes 2 s). */
#define MAX_P 32L
#define MAX_WIDTH 1000L

static const cli_command *const commands[] = {&cli_cmd_sim,    &cli_cmd_compare,  &cli_cmd_validate,
                                              &cli_cmd_train,  &cli_cmd_sample,   &cli_cmd_plan,
                                              &cli_cmd_report, &cli_cmd_calibrate};

static long int_or(const cli_args *a, const char *name, long dflt) {
  const char *v = cli_get(a, name);
  long x;
  return v && kt_parse_int(v, 1, 1L << 30, &x) == 0 ? x : dflt;
}

/* A file option may only name the fuzz input's own file. */
static int reads_only(const cli_args *a, const char *name, const char *file) {
  const char *v = cli_get(a, name);
  return !v || (file && !strcmp(v, file));
}

/* The searching generators spend a fixed budget of simulated evaluations,
 * hundreds even at P = 2: 0.3 to 5 s per input under ASan and UBSan, and a
 * default `compare` (all schedules) about 10 s, the fuzzer's hang limit.
 * Their options are parsed here but they never run; their own tests
 * (test_zero_bubble, test_memory_schedules) cover them. */
static int is_search(const char *name) {
  switch (kt_gen_kind_from_name(name)) {
    case KT_SCHED_ZBV:
    case KT_SCHED_ZB_AUTO:
    case KT_SCHED_ZBV_AUTO:
    case KT_SCHED_V_HALF:
    case KT_SCHED_V_MIN: return 1;
    default: return 0;
  }
}

/* Whether a comma-separated list names a searching generator. */
static int list_has_search(const char *list) {
  char name[64];
  for (const char *p = list; *p;) {
    size_t n = strcspn(p, ",");
    snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1), p);
    if (is_search(name)) return 1;
    p += n + (p[n] == ',');
  }
  return 0;
}

/* Every schedule but the searching ones: what `compare` runs here by default. */
static const char *quick_schedules(void) {
  static char list[512];
  if (!list[0])
    for (int k = 0; k < KT_SCHED_COUNT; k++) {
      const char *name = kt_gen_kind_name((kt_gen_kind)k);
      if (is_search(name)) continue;
      size_t len = strlen(list);
      snprintf(list + len, sizeof list - len, "%s%s", len ? "," : "", name);
    }
  return list;
}

static int safe_to_run(const cli_command *cmd, const cli_args *a, const char *file) {
  const char *out = cli_get(a, "output");
  if ((out && strcmp(out, "-")) || cli_has(a, "report")) return 0;
  if (!reads_only(a, "from", file) || !reads_only(a, "costs", file)) return 0;
  if (cmd == &cli_cmd_validate) return a->n_pos == 1 && file && !strcmp(a->pos[0], file);
  if (cli_get(a, "schedule") && is_search(cli_get(a, "schedule"))) return 0;
  if (cli_get(a, "schedules") && list_has_search(cli_get(a, "schedules"))) return 0;
  long p = int_or(a, "p", 4), m = int_or(a, "m", 8), v = int_or(a, "v", 2);
  if (v < 2) v = 2;
  if (p > MAX_P || m > MAX_WORK || v > MAX_WORK || p * m * v > MAX_WORK) return 0;
  if (int_or(a, "width", 0) > MAX_WIDTH) return 0;
  /* per-stage cost lists are read in full even when P is small */
  static const char *const lists[] = {"tf", "tb", "tw", "mem-act", "mem-wgrad"};
  for (size_t i = 0; i < sizeof lists / sizeof *lists; i++)
    if (cli_get(a, lists[i]) && strlen(cli_get(a, lists[i])) > 4096) return 0;
  return 1;
}

static void train_options(const cli_args *a) {
  train_opts o;
  if (train_parse(a, &o) || !o.sp.partition) return;
  long stages = (long)o.sp.p * (o.sp.v ? o.sp.v : 1);
  if (stages > 4096) return;
  int *counts = calloc((size_t)stages, sizeof *counts);
  kt_error err;
  (void)kt_partition_parse(o.sp.partition, (int)stages, kt_model_units(&o.sp.model), counts, &err);
  free(counts);
}

static void run_command(char **argv, int argc, const char *file) {
  for (size_t i = 0; i < sizeof commands / sizeof *commands; i++) {
    const cli_command *cmd = commands[i];
    if (strcmp(argv[0], cmd->name)) continue;
    cli_args a;
    if (cli_parse(cmd, argc - 1, argv + 1, &a)) return;
    char *with[MAX_ARGS + 3];
    if (cmd == &cli_cmd_compare && !cli_has(&a, "schedules")) { /* all but the searches */
      memcpy(with, argv, (size_t)argc * sizeof *with);
      with[argc] = "--schedules";
      with[argc + 1] = (char *)quick_schedules();
      with[argc + 2] = NULL;
      if (cli_parse(cmd, argc + 1, with + 1, &a)) return;
    }
    if (cmd == &cli_cmd_train) train_options(&a);
    else if ((cmd == &cli_cmd_sim || cmd == &cli_cmd_compare || cmd == &cli_cmd_validate) &&
             safe_to_run(cmd, &a, file))
      (void)cmd->run(&a);
    return;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fuzz_cstr(data, size);
  const char *file = NULL;
  char *argv[MAX_ARGS + 1];
  int argc = 0;
  char *p = text, *end = text + size;
  while (p < end && argc < MAX_ARGS) {
    char *eol = p;
    while (eol < end && *eol != '\n' && *eol) eol++;
    *eol = 0;
    if (!strcmp(p, "%%")) {
      const char *body = eol < end ? eol + 1 : end;
      file = fuzz_temp_file(body, (size_t)(end - body));
      break;
    }
    argv[argc++] = p;
    p = eol + 1;
  }
  for (int i = 0; i < argc && file; i++)
    if (!strcmp(argv[i], "@")) argv[i] = (char *)file;
  argv[argc] = NULL;
  if (argc > 0) {
    fuzz_quiet q = fuzz_quiet_begin();
    run_command(argv, argc, file);
    fuzz_quiet_end(q);
  }
  free(text);
  return 0;
}
