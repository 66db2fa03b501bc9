/* Internal to src/sim/: when each (stage, micro-batch) pair's results are
 * available, the table the simulation reads and writes on every action.
 *
 * A result is read once, by the one action that consumes it, and most
 * schedules keep few micro-batches in flight (1F1B: at most P), so a
 * compute-only run keeps a window of micro-batches: a ring of rows, each
 * held by one micro-batch from its first result to its last read. At 1F1B
 * P=1024, M=16384 that is 2048 rows where the whole table was 16384 (0.4
 * GB written once: page faults and the NaN fill were a third of the run).
 * A micro-batch that finds its ring row still held (GPipe runs every
 * forward first) turns the window into the whole table, rows copied. */
#ifndef KAITEN_SIM_PAIRS_H
#define KAITEN_SIM_PAIRS_H

#include <math.h>
#include <stddef.h>

#include "kaiten/schedule.h"

/* A pair's cell: when its results reach their consumer, indexed by
 * kt_output (F, BI, I); NAN = not yet. F and BI as their consumer sees
 * them (after the hop when it is on another rank); I is the end of I (W on
 * the same rank needs it). Kept together so a dependency check touches one
 * cache line; a schedule without I and W keeps F and BI only (16 bytes a
 * pair, where 24 held an I never made). */
typedef struct {
  double *rows;   /* rows of `row` cells of `width` times: the ring, or one per micro-batch */
  int row, width; /* cells per row (stages + padding), times per cell (2 or 3) */
  int m;          /* micro-batches */
  int mask;       /* ring rows - 1; -1: the whole table (row mb is mb's) */
  int *held;      /* ring: the micro-batch a row holds, -1 free */
  int *left;      /* ring: reads the row's results still have coming */
  int *reads;     /* ring: per micro-batch, the reads of its results */
} kt__pairs;

/* The whole table when window_rows <= 0 or it would hold m anyway, else a
 * ring of window_rows (a power of two) rows; width: 3, or 2 when no action
 * makes or reads an I; reads (m counts, may be NULL for the whole table)
 * is taken over. 0 ok, -1 out of memory (t then holds nothing to free). */
int kt__pairs_init(kt__pairs *t, int stages, int m, int width, int window_rows, int *reads);
void kt__pairs_free(kt__pairs *t);
/* The ring turned into the whole table (rows held copied). 0 ok, -1 out of memory. */
int kt__pairs_grow(kt__pairs *t);

/* Where mb's results are or will be: its row's cell for stage. */
static inline double *kt__pairs_cell(const kt__pairs *t, int stage, int mb) {
  size_t r = t->mask < 0 ? (size_t)mb : (size_t)(mb & t->mask);
  return &t->rows[(r * (size_t)t->row + (size_t)stage) * (size_t)t->width];
}

/* The time result r of (stage, mb) is available, NAN while it is not. */
static inline double kt__pairs_get(const kt__pairs *t, kt_output r, int stage, int mb) {
  if (t->mask >= 0 && t->held[mb & t->mask] != mb) return NAN;
  return kt__pairs_cell(t, stage, mb)[r];
}

void kt__pairs_take(kt__pairs *t, int slot, int mb);

/* The slot result r of (stage, mb) is written to, its row taken for mb
 * when free; NULL out of memory (growing the ring). */
static inline double *kt__pairs_put(kt__pairs *t, kt_output r, int stage, int mb) {
  if (t->mask >= 0) {
    int slot = mb & t->mask;
    if (t->held[slot] != mb) {
      if (t->held[slot] >= 0 && kt__pairs_grow(t)) return NULL;
      if (t->mask >= 0) kt__pairs_take(t, slot, mb);
    }
  }
  return &kt__pairs_cell(t, stage, mb)[r];
}

/* One of mb's results has been read by its consumer: the row is free once
 * the last is. */
static inline void kt__pairs_read(kt__pairs *t, int mb) {
  if (t->mask < 0) return;
  int slot = mb & t->mask;
  if (t->held[slot] == mb && --t->left[slot] <= 0) t->held[slot] = -1;
}

#endif
