/* Internal to src/rundir/: JSON helpers shared by the reader and config.c. */
#ifndef KAITEN_RUNDIR_INTERNAL_H
#define KAITEN_RUNDIR_INTERNAL_H

#include <cjson/cJSON.h>

#include "kaiten/rundir.h"

/* "DIR/name" (caller frees), NULL when out of memory. */
char *kt__rd_join(const char *dir, const char *name);
/* Parses a whole file as one JSON value; EPARSE names the file and line. */
kt_status kt__rd_read_json(const char *path, cJSON **out, kt_error *err);
/* A member as a number (NAN when absent or not a number) or a string (NULL). */
double kt__rd_num(const cJSON *o, const char *key);
const char *kt__rd_str(const cJSON *o, const char *key);
/* A member that is an integer in lo..hi: 0, else -1 (*out untouched). */
int kt__rd_int(const cJSON *o, const char *key, int lo, int hi, int *out);

/* config.json's text of c. */
void kt__rd_config_json(const kt_run_config *c, kt_buf *b);
/* config.json's object into c (path names it in errors). EPARSE, ENOMEM. */
kt_status kt__rd_config_parse(const cJSON *root, const char *path, kt_run_config *c,
                              kt_error *err);

#endif
