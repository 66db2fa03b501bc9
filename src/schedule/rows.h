/* Internal: the rows of a schedule file as read, before the notation and the
 * placement are decided (text.c reads them, import.c interprets them). */
#ifndef KAITEN_SCHEDULE_ROWS_H
#define KAITEN_SCHEDULE_ROWS_H

#include "kaiten/schedule.h"

/* Legacy full backward "BW": only exists between reading and interpreting. */
enum { KT__RAW_BW = KT_OP_ANY_COUNT };

typedef struct {
  kt_rank_actions *rows; /* actions carry raw ops: F/B/I/W, BW, or communication ops */
  size_t n, cap;
} kt__row_list;

typedef struct {
  int p, v, m, placement; /* from a "# kaiten" header line; -1 = not given */
  int s;                  /* stages=S (uneven placements); -1 = not given */
  char name[32];
  int seen; /* the file has a "# kaiten" header: kaiten's own text form */
} kt__header;

/* Splits text (CSV or text form) into rows of actions. EPARSE naming the line. */
kt_status kt__read_rows(const char *text, kt__row_list *rl, kt__header *h, kt_error *err);
void kt__rows_free(kt__row_list *rl);

#endif
