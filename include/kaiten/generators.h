/* kaiten schedule generators: gpipe, 1f1b, interleaved, looped-bfs, the
 * zero-bubble family and zb-auto, their closed forms, and dispatch by name.
 * They build kaiten/schedule.h's IR; zb-auto searches with the simulator,
 * so this layer sits above both the schedule IR and the simulator.
 */
#ifndef KAITEN_GENERATORS_H
#define KAITEN_GENERATORS_H

#include "kaiten/costs.h"
#include "kaiten/schedule.h"

typedef enum {
  KT_SCHED_GPIPE,
  KT_SCHED_1F1B,
  KT_SCHED_INTERLEAVED,
  KT_SCHED_LOOPED_BFS,
  KT_SCHED_ZB_H1,
  KT_SCHED_ZB_H2,
  KT_SCHED_ZBV,
  KT_SCHED_DUALPIPEV,
  KT_SCHED_ZB_AUTO,
  KT_SCHED_COUNT
} kt_schedule_kind;

const char *kt_schedule_kind_name(kt_schedule_kind k);
/* Accepts names and aliases ("interleaved-1f1b"). -1 when unknown. */
int kt_schedule_kind_from_name(const char *name);
/* Comma-separated list of all names, for help and error messages. */
const char *kt_schedule_kind_list(void);
/* Chunks per rank a schedule uses when the user gives none (1 or 2). */
int kt_schedule_default_chunks(kt_schedule_kind k);
/* Closed-form bubble ratio under uniform per-stage costs and T_comm = 0, or a
 * negative value when the schedule has none for these sizes (zb-h1 needs
 * M >= P; zb-h2, zbv, dualpipev M >= 2P); expr (if non-NULL) receives the
 * formula as text, NULL when there is none. docs/schedules.md derives them. */
double kt_schedule_closed_form_bubble(kt_schedule_kind k, int p, int v, int m, double tf,
                                      double tb, double tw, const char **expr);
/* Closed-form peak memory (the largest over the ranks, in mem_act units)
 * under uniform per-stage M_B = mem_act and M_W = mem_wgrad, or a negative
 * value when there is none (interleaved with M not a multiple of P, the
 * zero-bubble schedules below their M bound or with M_W > M_B, zb-auto). */
double kt_schedule_closed_form_peak_memory(kt_schedule_kind k, int p, int v, int m,
                                           double mem_act, double mem_wgrad, const char **expr);

typedef struct {
  int p, v, m; /* v = 0: the schedule's default chunk count */
  /* zb-auto only: the cost model to optimise against (NULL = unit costs)
   * and the memory limit in the units of mem_act (<= 0: P * mem_act). */
  const kt_costs *costs;
  double mem_limit;
} kt_schedule_params;

/* The memory limit zb-auto keeps every rank under: params->mem_limit, or
 * when that is <= 0, P * max over stages of max(mem_act, mem_wgrad) (P*M_B). */
double kt_schedule_mem_limit(const kt_schedule_params *params);

/* Builds the named schedule. EINVAL with a one-line reason when the
 * parameters are impossible for it (e.g. interleaved with M < P). */
kt_status kt_schedule_generate(kt_schedule_kind kind, const kt_schedule_params *params,
                               kt_schedule *out, kt_error *err);

#endif
