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

static void on_stop(int sig) {
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
