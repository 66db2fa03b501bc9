/* The what-if panel in the pages (whatif.c; the panel itself is
 * whatif*.js): internal to the report and serve layers. */
#ifndef KAITEN_REPORT_WHATIF_H
#define KAITEN_REPORT_WHATIF_H

#include <stddef.h>

#include "kaiten/report.h"

/* What a panel starts from. */
typedef struct {
  const char *name; /* the schedule's name (a generator's: the panel can regenerate it) */
  int p, m, v;
  const char *basis;           /* "rank" | "stage": how costs read (kaiten sim's cost basis) */
  const kt_costs *costs;       /* as given */
  double mem_limit;            /* zb-auto's limit (mem-act units); 0: none */
  const kt_timeline *order;    /* the timeline whose order the panel starts from; NULL: none */
  const kt_timeline *measured; /* a measured step (its critical path, slack, diff) or NULL */
  const char *measured_svg;    /* the id of that step's Gantt in the page */
  const double *busy;          /* the measured step's busy time per rank (n_busy) */
  const kt_idle_split *idle;   /* why each rank idled in it (n_busy), or NULL */
  int n_busy;
} kt__whatif_seed;

/* The panel's styles and the simulator (every page, before its script). */
void kt__whatif_assets(kt_buf *b);
/* The panel's scripts (inside the page's script). */
void kt__whatif_scripts(kt_buf *b);
/* One panel, closed until opened. */
void kt__whatif_panel(kt_buf *b, const kt__whatif_seed *w);
/* Costs as a panel's seed holds them: the request's keys ("tf", "mem-act",
 * "comm", "tu", "step-sync", ...), numbers or per-stage lists. */
void kt__whatif_costs_json(kt_buf *b, const kt_costs *c);
/* The panel of a run report's traced step. */
void kt__whatif_run(kt_buf *b, const kt_run *r);

/* The build's wasm module (empty without the toolchain) and the scripts. */
extern const unsigned char kt__wasm[];
extern const size_t kt__wasm_len;
extern const char kt__whatif_js[], kt__whatif_draw_js[], kt__whatif_ui_js[], kt__whatif_edit_js[];

#endif
