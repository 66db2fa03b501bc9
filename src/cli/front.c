/* kaiten's entry point. sim, compare and validate run here, in a binary
 * linked statically against the schedule, simulator and report layers and
 * libc (no dynamic loader, no shared library to map and relocate; musl
 * where it is installed, whose start-up is a third of glibc's: front_libc.c
 * brings the allocator and memcpy it needs); every other command, --help,
 * --version and any call that reads a JSON cost file (--costs: cJSON has
 * no static library on Debian) run in kaiten-full
 * beside it (src/cli/main.c: the training runtime, OpenBLAS, MPI and the
 * dashboard's HTTP server), which this process becomes by exec. Loading
 * and starting those libraries costs several milliseconds a call: more
 * than a small `sim` takes (bench/README.md). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

static const cli_command *const commands[] = {&cli_cmd_sim, &cli_cmd_compare, &cli_cmd_validate};

static char **full_argv; /* this call's arguments, for kaiten-full */

/* Becomes kaiten-full from this binary's directory, with the same
 * arguments; returns only when that fails (exit code). */
static int run_full(char **argv) {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) {
    fprintf(stderr, "kaiten: cannot find this binary's directory (/proc/self/exe): %s\n",
            strerror(errno));
    return 1;
  }
  self[n] = 0;
  char *slash = strrchr(self, '/');
  const char *name = "kaiten-full";
  if (!slash || (size_t)(slash - self) + 1 + strlen(name) >= sizeof self) {
    fprintf(stderr, "kaiten: cannot place kaiten-full beside %s\n", self);
    return 1;
  }
  strcpy(slash + 1, name);
  execv(self, argv);
  fprintf(stderr, "kaiten: cannot run %s: %s\n", self, strerror(errno));
  return 1;
}

/* A cost file is read by kaiten-full (main() sends such calls there before
 * they start; this is what the commands' reader is in this binary). */
kt_status cli_costs_file(kt_costs *c, const char *path, kt_error *err) {
  (void)c;
  int rc = run_full(full_argv);
  return kt_fail(err, KT_EIO, "%s: the cost file is read by kaiten-full, which did not start "
                 "(exit %d)", path, rc);
}

int main(int argc, char **argv) {
  cli_program = argv[0];
  full_argv = argv;
  for (size_t i = 0; argc >= 2 && i < sizeof commands / sizeof *commands; i++) {
    if (strcmp(argv[1], commands[i]->name)) continue;
    cli_args a;
    int rc = cli_parse(commands[i], argc - 2, argv + 2, &a);
    if (rc == 1) return 0;
    if (rc) return rc;
    if (cli_has(&a, "costs")) return run_full(argv); /* before anything is written */
    return commands[i]->run(&a);
  }
  return run_full(argv);
}
