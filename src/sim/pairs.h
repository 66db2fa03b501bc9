/* Internal to src/sim/: when each (stage, micro-batch) pair's results are
 * available, the table the simulation reads and writes on every action.
 *
 * A result is read once, by the one action that consumes it, and most
 * schedules keep few micro-batches in flight (1F1B: at most P), so a
 * compute-only run keeps a window of micro-batches: rows, each held by one
 * micro-batch from its first result to its last read. At 1F1B P=1024,
 * M=16384 that is 2048 rows where the whole table was 16384 (0.4 GB
 * written once: page faults and the NaN fill were a third of the run). A
 * micro-batch takes the row freed last: the rows in use are as many as
 * the micro-batches in flight, and the one it takes is still in the cache
 * (1F1B P=1024: 1024 rows of 2048, where a row per micro-batch number
 * modulo 2048 went through them all). A micro-batch that finds no row
 * free (GPipe runs every forward first) turns the window into the whole
 * table, rows copied. */
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
  double *rows;   /* rows of `row` cells of `width` times: the window, or one per micro-batch */
  int row, width; /* cells per row (stages + padding), times per cell (2 or 3) */
  int m;          /* micro-batches */
  int window;     /* rows in the window; 0: the whole table (row mb is mb's) */
  int *row_of;    /* window: per micro-batch, the row it holds, -1 none */
  int *free_rows; /* window: the rows no micro-batch holds, the last freed on top */
  int n_free;
  int *left;  /* window: per row, reads its results still have coming */
  int *reads; /* window: per micro-batch, the reads of its results */
} kt__pairs;

/* The whole table when window_rows <= 0 or it would hold m anyway, else a
 * window of window_rows rows; width: 3, or 2 when no action makes or reads
 * an I; reads (m counts, may be NULL for the whole table) is taken over.
 * 0 ok, -1 out of memory (t then holds nothing to free). */
int kt__pairs_init(kt__pairs *t, int stages, int m, int width, int window_rows, int *reads);
void kt__pairs_free(kt__pairs *t);
/* The window turned into the whole table (rows held copied). 0 ok, -1 out of memory. */
int kt__pairs_grow(kt__pairs *t);

/* The row mb's results are in: its own, or the window's row it holds
 * (-1: none yet). */
static inline int kt__pairs_row(const kt__pairs *t, int mb) {
  return t->window ? t->row_of[mb] : mb;
}

/* Where mb's results are (mb holds row r: kt__pairs_row). */
static inline double *kt__pairs_cell_in(const kt__pairs *t, int r, int stage) {
  return &t->rows[((size_t)r * (size_t)t->row + (size_t)stage) * (size_t)t->width];
}

/* The time result r of (stage, mb) is available, NAN while it is not. */
static inline double kt__pairs_get(const kt__pairs *t, kt_output r, int stage, int mb) {
  int row = kt__pairs_row(t, mb);
  if (row < 0) return NAN;
  return kt__pairs_cell_in(t, row, stage)[r];
}

/* A free row of the window taken for mb, NaN filled: 0, or -1 when none
 * is free (the caller grows the table). */
int kt__pairs_take(kt__pairs *t, int mb);

/* The slot result r of (stage, mb) is written to, a row taken for mb
 * when it holds none; NULL out of memory (growing the window). */
static inline double *kt__pairs_put(kt__pairs *t, kt_output r, int stage, int mb) {
  if (t->window && t->row_of[mb] < 0 && kt__pairs_take(t, mb) && kt__pairs_grow(t)) return NULL;
  return &kt__pairs_cell_in(t, kt__pairs_row(t, mb), stage)[r];
}

/* One of mb's results has been read by its consumer: the row is free once
 * the last is. */
static inline void kt__pairs_read(kt__pairs *t, int mb) {
  if (!t->window) return;
  int row = t->row_of[mb];
  if (row >= 0 && --t->left[row] <= 0) t->row_of[mb] = -1, t->free_rows[t->n_free++] = row;
}

#endif
