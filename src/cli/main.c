/* kaiten command-line entry point: dispatches to the subcommands. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "kaiten/model.h"
#include "kaiten/transport.h"
#include "kaiten/version.h"

static const cli_command *const commands[] = {
    &cli_cmd_sim,  &cli_cmd_compare, &cli_cmd_validate, &cli_cmd_train,    &cli_cmd_sample,
    &cli_cmd_plan, &cli_cmd_report,  &cli_cmd_serve,    &cli_cmd_calibrate};
#define N_COMMANDS (sizeof commands / sizeof *commands)

static void usage(FILE *f) {
  fprintf(f,
          "kaiten %s — pipeline-parallel training: plan, simulate, visualise, run\n\n"
          "usage: kaiten COMMAND [options]   (kaiten COMMAND --help for details)\n\ncommands:\n",
          kt_version());
  for (size_t i = 0; i < N_COMMANDS; i++)
    fprintf(f, "  %-10s %s\n", commands[i]->name, commands[i]->summary);
}

/* Fault injection for tests (docs/testing.md): KAITEN_TEST_WRITE_PAUSE=SECONDS
 * stops every atomic file write half-way, its temp file partly written. */
static void test_hooks(void) {
  const char *pause = getenv("KAITEN_TEST_WRITE_PAUSE");
  double seconds;
  if (pause && kt_parse_double(pause, &seconds) == 0) kt_set_write_pause(seconds);
}

/* Where --gemm auto keeps what it measured: $XDG_CACHE_HOME/kaiten/gemm.tsv
 * or ~/.cache/kaiten/gemm.tsv (directories made as needed); nowhere when
 * neither names an absolute directory or it cannot be made. */
static void gemm_cache(void) {
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  char dir[900], path[1000];
  int n;
  if (xdg && *xdg == '/') n = snprintf(dir, sizeof dir, "%s", xdg);
  else if (home && *home == '/') n = snprintf(dir, sizeof dir, "%s/.cache", home);
  else return;
  if (n <= 0 || (size_t)n + 8 >= sizeof dir) return;
  (void)mkdir(dir, 0700);
  snprintf(dir + n, sizeof dir - (size_t)n, "/kaiten");
  if (mkdir(dir, 0700) && errno != EEXIST) return;
  snprintf(path, sizeof path, "%s/gemm.tsv", dir);
  kt_gemm_set_cache(path);
}

int main(int argc, char **argv) {
  /* a file past the file-size limit (ulimit -f) is an error the writers
   * report, as a full disk is, not a signal that ends the run silently */
  signal(SIGXFSZ, SIG_IGN);
  test_hooks();
  cli_program = argv[0];
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const char *name = argv[1];
  if (!strcmp(name, "-h") || !strcmp(name, "--help") || !strcmp(name, "help")) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(name, "--version") || !strcmp(name, "version")) {
    /* what a speed report needs beside the version: which kernels run */
    kt_blas_choose_core();
    const char *chosen, *core = kt_blas_core(&chosen);
    printf("kaiten %s\nkernels: OpenBLAS %s%s, element-wise %s; MPI transport: %s\n", kt_version(),
           core, chosen ? " (chosen by kaiten)" : "", kt_kernel_isa(),
           kt_transport_mpi_available() ? "built in" : "not built");
    fputs("GEMM libraries (--gemm): openblas", stdout);
    for (int k = KT_GEMM_BLIS; k < KT_GEMM_COUNT; k++) {
      const char *v;
      if (kt_gemm_available((kt_gemm_kind)k, &v))
        printf(", %s %s", kt_gemm_name((kt_gemm_kind)k), v);
      else printf(", %s not installed", kt_gemm_name((kt_gemm_kind)k));
    }
    putchar('\n');
    return 0;
  }
  for (size_t i = 0; i < N_COMMANDS; i++) {
    if (strcmp(name, commands[i]->name)) continue;
    cli_args a;
    int rc = cli_parse(commands[i], argc - 2, argv + 2, &a);
    if (rc == 1) return 0;
    if (rc) return rc;
    if (commands[i]->linear_algebra) { /* no other command loads OpenBLAS */
      kt_blas_choose_core();
      gemm_cache();
    }
    return commands[i]->run(&a);
  }
  fprintf(stderr, "kaiten: unknown command '%.40s' (try kaiten --help)\n", name);
  return 2;
}
