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
  t->row = stages + ROW_PAD, t->width = width, t->m = m;
  int window = window_rows > 0 && window_rows < m && reads;
  size_t rows = window ? (size_t)window_rows : (size_t)m;
  if (window) {
    t->window = window_rows;
    t->reads = reads;
    t->row_of = malloc((size_t)m * sizeof *t->row_of);
    t->free_rows = malloc(rows * sizeof *t->free_rows);
    t->left = kt_calloc(rows, sizeof *t->left);
  } else {
    free(reads);
  }
  size_t row = (size_t)t->row * (size_t)width; /* times */
  t->rows = malloc(rows * row * sizeof *t->rows);
  if (t->rows) kt_advise_huge(t->rows, rows * row * sizeof *t->rows);
  if (!t->rows || (window && (!t->row_of || !t->free_rows || !t->left))) {
    kt__pairs_free(t);
    return -1;
  }
  if (window) {
    memset(t->row_of, 0xff, (size_t)m * sizeof *t->row_of); /* -1: none */
    /* row 0 on top: the first micro-batches take the rows in order */
    for (int k = 0; k < window_rows; k++) t->free_rows[k] = window_rows - 1 - k;
    t->n_free = window_rows;
  } else {
    fill_nan(t->rows, rows * row);
  }
  return 0;
}

void kt__pairs_free(kt__pairs *t) {
  free(t->rows);
  free(t->row_of);
  free(t->free_rows);
  free(t->left);
  free(t->reads);
  memset(t, 0, sizeof *t);
}

int kt__pairs_take(kt__pairs *t, int mb) {
  if (t->n_free == 0) return -1;
  int r = t->free_rows[--t->n_free];
  t->row_of[mb] = r;
  t->left[r] = t->reads[mb];
  size_t row = (size_t)t->row * (size_t)t->width;
  fill_nan(&t->rows[(size_t)r * row], row);
  return 0;
}

int kt__pairs_grow(kt__pairs *t) {
  size_t row = (size_t)t->row * (size_t)t->width, times = (size_t)t->m * row;
  double *all = malloc(times * sizeof *all);
  if (!all) return -1;
  kt_advise_huge(all, times * sizeof *all);
  fill_nan(all, times);
  for (int mb = 0; mb < t->m; mb++)
    if (t->row_of[mb] >= 0)
      memcpy(&all[(size_t)mb * row], &t->rows[(size_t)t->row_of[mb] * row], row * sizeof *all);
  kt__pairs t2 = *t;
  kt__pairs_free(&t2);
  t->rows = all, t->window = 0;
  t->row_of = t->free_rows = t->left = t->reads = NULL;
  t->n_free = 0;
  return 0;
}
