/* The what-if call's pieces (src/web): its settings, its run, and the
 * answer's writer. */
#ifndef KAITEN_WEB_INTERNAL_H
#define KAITEN_WEB_INTERNAL_H

#include "kaiten/costs.h"
#include "kaiten/schedule.h"
#include "kaiten/sim.h"
#include "kaiten/timeline.h"

/* The settings of one request (kaiten/web.h names them). */
typedef struct {
  char schedule[32];
  long p, m, v;
  int per_stage, exports, quick;
  kt_costs given; /* as kaiten sim reads its flags */
  double mem_limit;
  int have_limit, limit_fraction;
  int slow_rank; /* -1: none */
  double slow_factor;
  kt_faults links; /* slow-link=A-B:+D (the costs' unit) */
  int replan;      /* replan=1: also the order zb-auto makes for the faulted costs, and the
                      order's period without the faults */
} kt__web_req;

typedef struct {
  kt__web_req rq;
  int kind;                 /* the generator, -1 for an order the page sent */
  kt_schedule sched, program; /* program: a lowered order, run as written */
  kt_costs costs;           /* every stage's */
  double limit;             /* mem-act units, -1: none */
  kt_timeline tl;
  kt_metrics met;
  int have_tl, have_met;
  kt_critical cr;
  /* replan=1: the order's period without the faults, and zb-auto's (zbv-auto's)
   * order for the faulted costs: its name, period and the lower bound */
  double clean, replanned, bound;
  char replanned_name[32];
} kt__web_run;

/* Reads args into rq (defaults: schedule 1f1b, P=4, M=8, kaiten sim's
 * costs). EINVAL naming the bad setting. */
kt_status kt__web_parse(const char *args, kt__web_req *rq, kt_error *err);
/* Appends the answer of a run that simulated. ENOMEM, or the lowering's
 * error when an export fails. */
kt_status kt__web_answer(const kt__web_run *w, kt_buf *out, kt_error *err);
void kt__web_run_free(kt__web_run *w);

#endif
