/* The size guard: what a simulation needs against what this process may
 * have (the machine's memory, or less under an address-space limit). */
#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

#include "kaiten/sim.h"

kt_status kt_sim_memory_check(double actions, double bytes_per_action, kt_error *err) {
  double need = actions * bytes_per_action;
  double have = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGE_SIZE);
  char where[96];
  snprintf(where, sizeof where, "this machine has %.1f GiB", have / 1073741824.0);
  struct rlimit rl;
  if (!getrlimit(RLIMIT_AS, &rl) && rl.rlim_cur != RLIM_INFINITY && (double)rl.rlim_cur < have) {
    have = (double)rl.rlim_cur;
    snprintf(where, sizeof where, "the address-space limit (ulimit -v) allows %.2f GiB",
             have / 1073741824.0);
  }
  if (!(have > 0) || need <= 0.75 * have) return KT_OK;
  return kt_fail(err, KT_EINVAL,
                 "up to %.3g actions would need about %.1f GiB of memory (%s); "
                 "simulate fewer ranks or micro-batches",
                 actions, need / 1073741824.0, where);
}
