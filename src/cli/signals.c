/* Signals during `kaiten train`: the first SIGINT, SIGTERM or SIGUSR1 asks
 * the run to stop after the step it is in (then it checkpoints, prints how
 * to resume and exits 128 + the signal). The same signal again is the same
 * request while the step is still running or within 2 s of the first:
 * `timeout -s INT` signals the process and then its process group, Slurm
 * signals every process of a step, a terminal's Ctrl-C reaches the whole
 * foreground group, so one request often arrives twice. Once the
 * checkpoint is being written (every rank agreed to stop) and 2 s have
 * passed, the same signal again, or another stop signal at any time, ends
 * the process at once (files are only ever replaced whole, so none is left
 * half-written; the previous checkpoint stays). SIGUSR1 is the one mpirun
 * forwards to every rank at once. SIGWINCH marks the terminal resized for
 * the live view. Everything here is async-signal-safe: atomics, write(2),
 * fcntl(2), clock_gettime(2). */
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/train_cli.h"

/* A repeat of the first signal within this long is the same request. */
#define REPEAT_WINDOW_NS 2000000000LL

static volatile sig_atomic_t resized;
static atomic_int stop_signal;     /* the first stop signal, 0 before */
static atomic_llong stop_first_ns; /* when it came (CLOCK_MONOTONIC) */
static atomic_int stopping;        /* the agreed stop is under way: the checkpoint is next */
static atomic_flag repeat_said = ATOMIC_FLAG_INIT;
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

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void say(const char *msg, size_t n) {
  ssize_t w = write(STDERR_FILENO, msg, n);
  (void)w;
}

/* Whether a stop signal after the first is the same request. */
static int same_request(int sig, int first) {
  if (sig != first) return 0;
  if (!atomic_load(&stopping)) return 1;
  long long t0 = atomic_load(&stop_first_ns);
  return t0 == 0 || now_ns() - t0 < REPEAT_WINDOW_NS;
}

/* mpirun ends a job (its own SIGTERM or SIGINT, a machine lost) by sending
 * the ranks SIGTERM and then sleeping until it kills them, and while it
 * sleeps it reads none of their output: a rank whose next step line finds
 * the pipe full would block there, never reaching the checkpoint, and the
 * ranks waiting for it with it (seen under load: no checkpoint in 1 of 3
 * runs). So once an MPI rank is told to end, its output stops blocking;
 * what does not fit is dropped (nobody reads it). Only MPI ranks: their
 * stdout and stderr are pipes of their own, never a descriptor shared
 * with a shell. */
static void unblock_output(void) {
  for (int fd = STDOUT_FILENO; fd <= STDERR_FILENO; fd++) {
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  }
}

static void on_stop(int sig) {
  /* only a first SIGTERM can be the job ending for a lost machine: later
   * ones find this rank waiting while rank 0 writes the checkpoint */
  if (sig == SIGTERM && !atomic_load(&stop_signal)) name_lost_peer();
  if (sig == SIGTERM && my_rank >= 0) unblock_output();
  int first = 0;
  if (atomic_compare_exchange_strong(&stop_signal, &first, sig)) {
    atomic_store(&stop_first_ns, now_ns());
    return;
  }
  if (same_request(sig, first)) {
    /* a person pressing Ctrl-C again during a long step hears it was taken */
    if (now_ns() - atomic_load(&stop_first_ns) >= REPEAT_WINDOW_NS &&
        !atomic_flag_test_and_set(&repeat_said)) {
      static const char msg[] = "\nkaiten: already stopping after this step; the same signal "
                                "again once its checkpoint is being written stops at once\n";
      say(msg, sizeof msg - 1);
    }
    return;
  }
  static const char msg[] = "\nkaiten: interrupted again, stopping now\n";
  say(msg, sizeof msg - 1);
  signal(sig, SIG_DFL);
  raise(sig);
}

void cli_signals_stopping(void) { atomic_store(&stopping, 1); }

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

int cli_stop_requested(void) { return atomic_load(&stop_signal); }

void cli_note_stop(int sig) {
  int none = 0;
  if (atomic_compare_exchange_strong(&stop_signal, &none, sig))
    atomic_store(&stop_first_ns, now_ns());
  cli_signals_stopping();
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
