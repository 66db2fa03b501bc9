/* A link fault that no message of a schedule crosses (kaiten/sim.h). */
#include <stdlib.h>

#include "sim/internal.h"

kt_status kt_sim_check_fault_links(const kt_faults *f, const kt_schedule *sc, kt_error *err) {
  if (!kt_faults_on_links(f)) return KT_OK;
  int S = kt_schedule_stages(sc), a, b;
  int *stage_rank = kt_calloc((size_t)S, sizeof *stage_rank);
  if (!stage_rank) return kt_fail(err, KT_ENOMEM, "out of memory");
  for (int k = 0; k < S; k++) stage_rank[k] = kt_stage_rank(sc, k);
  kt_status st = KT_OK;
  if (kt_faults_unused_link(f, stage_rank, S, &a, &b))
    st = kt_fail(err, KT_EINVAL,
                 "slow link %d-%d: no message of %s crosses it (no two consecutive stages "
                 "run on ranks %d and %d), so the fault would change nothing",
                 a, b, sc->name[0] ? sc->name : "the schedule", a, b);
  free(stage_rank);
  return st;
}
