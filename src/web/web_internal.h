/* The what-if call's pieces (src/web): its run and the answer's writer. */
#ifndef KAITEN_WEB_INTERNAL_H
#define KAITEN_WEB_INTERNAL_H

#include "kaiten/request.h"
#include "kaiten/timeline.h"

/* One what-if call: the request (kaiten/request.h) and the page's own
 * settings, the result with every event, and the critical path. */
typedef struct {
  kt_request rq;
  int exports; /* exports=1: the schedule as text and CSV too */
  int replan;  /* replan=1: also the order zb-auto makes for the faulted costs, and the
                  order's period without the faults */
  kt_result res;
  int have_res;
  kt_critical cr;
  /* replan=1: the order's period without the faults, and zb-auto's (zbv-auto's)
   * order for the faulted costs: its name, period and the lower bound */
  double clean, replanned, bound;
  char replanned_name[32];
} kt__web_run;

/* Appends the answer of a run that simulated. ENOMEM, or the lowering's
 * error when an export fails. */
kt_status kt__web_answer(const kt__web_run *w, kt_buf *out, kt_error *err);

#endif
