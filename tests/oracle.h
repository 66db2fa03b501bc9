/* Reading the zero-bubble authors' oracle tables (tests/data/oracles, TSV):
 * tab-separated rows after '#' comment lines and one header line; columns
 * are looked up by their header name. An order column becomes a kaiten
 * schedule (the tables' B is the input-gradient backward, kaiten's I). */
#ifndef KAITEN_TEST_ORACLE_H
#define KAITEN_TEST_ORACLE_H

#include <stdlib.h>
#include <string.h>

#include "kaiten/core.h"
#include "kaiten/schedule.h"

#define ORACLE_MAX_COLS 32

typedef struct {
  char *text;                    /* the whole file, split in place */
  char *header[ORACLE_MAX_COLS]; /* column names */
  int n_cols;
  char **rows; /* n_rows * n_cols cells */
  int n_rows;
} oracle_table;

static inline void oracle_free(oracle_table *t) {
  free(t->text);
  free(t->rows);
  memset(t, 0, sizeof *t);
}

/* Splits line at tabs into out (at most max cells); returns the count. */
static inline int oracle_split(char *line, char **out, int max) {
  int n = 0;
  for (char *p = line; n < max;) {
    out[n++] = p;
    char *tab = strchr(p, '\t');
    if (!tab) break;
    *tab = 0;
    p = tab + 1;
  }
  return n;
}

/* 0 on success; -1 (with a message on stderr) when the file is missing or malformed. */
static inline int oracle_load(const char *path, oracle_table *t) {
  memset(t, 0, sizeof *t);
  kt_error err;
  if (kt_read_file(path, &t->text, NULL, &err)) {
    fprintf(stderr, "%s: %s\n", path, err.msg);
    return -1;
  }
  size_t cap = 0;
  for (char *line = t->text, *next; line && *line; line = next) {
    next = strchr(line, '\n');
    if (next) *next++ = 0;
    if (line[0] == '#' || !line[0]) continue;
    if (!t->n_cols) {
      t->n_cols = oracle_split(line, t->header, ORACLE_MAX_COLS);
      continue;
    }
    if ((size_t)(t->n_rows + 1) * (size_t)t->n_cols > cap) {
      cap = cap ? 2 * cap : 256 * (size_t)t->n_cols;
      char **grown = realloc(t->rows, cap * sizeof *grown);
      if (!grown) return -1;
      t->rows = grown;
    }
    char **cells = t->rows + (size_t)t->n_rows * (size_t)t->n_cols;
    if (oracle_split(line, cells, t->n_cols) != t->n_cols) {
      fprintf(stderr, "%s: row %d has too few columns\n", path, t->n_rows + 1);
      return -1;
    }
    t->n_rows++;
  }
  return t->n_rows > 0 ? 0 : -1;
}

/* The cell of row i under the named column ("" when there is no such column). */
static inline const char *oracle_cell(const oracle_table *t, int i, const char *col) {
  for (int c = 0; c < t->n_cols; c++)
    if (!strcmp(t->header[c], col)) return t->rows[(size_t)i * (size_t)t->n_cols + (size_t)c];
  fprintf(stderr, "oracle table: no column '%s'\n", col);
  return "";
}

static inline double oracle_num(const oracle_table *t, int i, const char *col) {
  return atof(oracle_cell(t, i, col));
}

/* Builds the order column into s: ranks separated by '|', tokens "F3"
 * (stage = rank, one chunk per rank) or "B2@6" (stage given, V = 2 in v
 * placement when v2 is set). B is the input-gradient backward (kaiten I). */
static inline int oracle_order(const char *order, int p, int m, int v2, kt_schedule *s) {
  kt_error err;
  if (kt_schedule_init(s, p, v2 ? 2 : 1, m, v2 ? KT_PLACEMENT_V : KT_PLACEMENT_LOOP, &err))
    return -1;
  int r = 0;
  for (const char *c = order; *c && r < p;) {
    if (*c == '|') {
      r++, c++;
      continue;
    }
    if (*c == ' ') {
      c++;
      continue;
    }
    kt_op op = *c == 'F' ? KT_OP_F : *c == 'B' ? KT_OP_I : *c == 'W' ? KT_OP_W : KT_OP_COUNT;
    if (op == KT_OP_COUNT) {
      kt_schedule_free(s);
      return -1;
    }
    char *end;
    long mb = strtol(c + 1, &end, 10), stage = r;
    if (*end == '@') stage = strtol(end + 1, &end, 10);
    if (kt_schedule_push(s, r, (int)stage, op, (int)mb)) {
      kt_schedule_free(s);
      return -1;
    }
    c = end;
  }
  return 0;
}

#endif
