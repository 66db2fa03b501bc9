/* Signals during `kaiten train`: the first SIGINT, SIGTERM or SIGUSR1 asks
 * the run to stop after the step it is in (then it checkpoints, prints how
 * to resume and exits 128 + the signal); a second one ends the process at
 * once (files are only ever replaced whole, so none is left half-written).
 * SIGUSR1 is the one mpirun forwards to every rank at once. SIGWINCH marks
 * the terminal resized for the live view. */
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "cli/train_cli.h"

static volatile sig_atomic_t stop_signal, resized;
static int my_rank = -1, replicas = 1; /* MPI: this process's world rank, D */

static char *put_int(char *p, int v) {
  char d[12];
  int n = 0;
  if (v < 0) *p++ = '-', v = -v;
  do d[n++] = (char)('0' + v % 10), v /= 10;
  while (v);
  while (n) *p++ = d[--n];
  return p;
}

static char *put_str(char *p, const char *s) {
  while (*s) *p++ = *s++;
  return p;
}

/* mpirun ends the job (SIGTERM) when a machine is lost: if this rank waits
 * for another one at that moment, that is the one that went away. One line,
 * written with async-signal-safe calls only. */
static void name_lost_peer(void) {
  double since = 0;
  int peer = my_rank >= 0 ? kt_transport_mpi_waiting_for(&since) : -1;
  /* a stop asked for while a message is merely in flight is not a loss */
  if (peer < 0 || kt_now() - since < 0.5) return;
  char line[192], *p = line;
  p = put_str(p, "kaiten: rank ");
  p = put_int(p, my_rank);
  p = put_str(p, " (stage ");
  p = put_int(p, my_rank / replicas);
  p = put_str(p, "): the job was ended while waiting for rank ");
  p = put_int(p, peer);
  p = put_str(p, " (stage ");
  p = put_int(p, peer / replicas);
  p = put_str(p, "): lost rank ");
  p = put_int(p, peer);
  p = put_str(p, " (stage ");
  p = put_int(p, peer / replicas);
  p = put_str(p, ") or its machine\n");
  ssize_t w = write(STDERR_FILENO, line, (size_t)(p - line));
  (void)w;
}

void cli_signals_set_rank(int world_rank, int d) {
  my_rank = world_rank;
  replicas = d > 0 ? d : 1;
}

static void on_stop(int sig) {
  if (sig == SIGTERM) name_lost_peer();
  if (stop_signal) { /* the second one: now */
    static const char msg[] = "\nkaiten: interrupted again, stopping now\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  stop_signal = sig;
}

static void on_winch(int sig) {
  (void)sig;
  resized = 1;
}

void cli_signals_install(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sigemptyset(&sa.sa_mask);
  /* no SA_RESTART: a write blocked on a stdout nobody reads any more (mpirun
   * shutting its forwarding down) returns, and the run goes on to save */
  sa.sa_handler = on_stop;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGUSR1, &sa, NULL);
  sa.sa_handler = on_winch;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGWINCH, &sa, NULL);
  /* a closed stdout (mpirun tearing its forwarding down, a pager quit) must
   * not kill the run before it saves: writes then just fail */
  signal(SIGPIPE, SIG_IGN);
}

void cli_signals_restore(void) {
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGUSR1, SIG_DFL);
  signal(SIGWINCH, SIG_DFL);
  signal(SIGPIPE, SIG_DFL);
}

int cli_stop_requested(void) { return stop_signal; }

void cli_note_stop(int sig) {
  if (!stop_signal) stop_signal = sig;
}

int cli_take_resize(void) {
  int r = resized;
  resized = 0;
  return r;
}

const char *cli_signal_name(int sig) {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    default: return "a signal";
  }
}
