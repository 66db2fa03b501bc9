/* The simulation's per-pair table (sim/pairs.h): a window of micro-batches,
 * or the whole table. */
#include "sim/pairs.h"

#include <stdlib.h>
#include <string.h>

#include "kaiten/core.h"

/* Rows are padded past the stages: with S a power of two every
 * micro-batch's first stage would otherwise fall in the same cache sets. */
#define ROW_PAD 8

static void fill_nan(double *times, size_t n) {
  for (size_t i = 0; i < n; i++) times[i] = NAN;
}

int kt__pairs_init(kt__pairs *t, int stages, int m, int width, int window_rows, int *reads) {
  memset(t, 0, sizeof *t);
  t->row = stages + ROW_PAD, t->width = width, t->m = m, t->mask = -1;
  int ring = window_rows > 0 && window_rows < m && reads;
  size_t rows = ring ? (size_t)window_rows : (size_t)m;
  if (ring) {
    t->mask = window_rows - 1;
    t->reads = reads;
    t->held = malloc(rows * sizeof *t->held);
    t->left = kt_calloc(rows, sizeof *t->left);
  } else {
    free(reads);
  }
  size_t row = (size_t)t->row * (size_t)width; /* times */
  t->rows = malloc(rows * row * sizeof *t->rows);
  if (!t->rows || (ring && (!t->held || !t->left))) {
    kt__pairs_free(t);
    return -1;
  }
  if (ring) memset(t->held, 0xff, rows * sizeof *t->held); /* -1: free */
  else fill_nan(t->rows, rows * row);
  return 0;
}

void kt__pairs_free(kt__pairs *t) {
  free(t->rows);
  free(t->held);
  free(t->left);
  free(t->reads);
  memset(t, 0, sizeof *t);
  t->mask = -1;
}

void kt__pairs_take(kt__pairs *t, int slot, int mb) {
  t->held[slot] = mb;
  t->left[slot] = t->reads[mb];
  size_t row = (size_t)t->row * (size_t)t->width;
  fill_nan(&t->rows[(size_t)slot * row], row);
}

int kt__pairs_grow(kt__pairs *t) {
  size_t row = (size_t)t->row * (size_t)t->width, times = (size_t)t->m * row;
  double *all = malloc(times * sizeof *all);
  if (!all) return -1;
  fill_nan(all, times);
  for (int slot = 0; slot <= t->mask; slot++)
    if (t->held[slot] >= 0)
      memcpy(&all[(size_t)t->held[slot] * row], &t->rows[(size_t)slot * row], row * sizeof *all);
  kt__pairs t2 = *t;
  kt__pairs_free(&t2);
  t->rows = all, t->mask = -1;
  t->held = t->left = t->reads = NULL;
  return 0;
}
