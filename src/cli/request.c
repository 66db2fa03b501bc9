/* argv onto the request (kaiten/request.h): every option a command takes
 * that names a setting goes to kt_request_set as the user wrote it. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"

/* The option as typed in messages: "-p" for a one-letter name with its
 * short form, "--name" otherwise (as cli_int names them). */
static void typed(const cli_opt *o, char *buf, size_t n) {
  if (o->short_name && !o->name[1]) snprintf(buf, n, "-%c", o->short_name);
  else snprintf(buf, n, "--%s", o->name);
}

/* Sets the given options whose names are settings; only those named in
 * keys when keys is not NULL (a NULL-terminated list). */
static int apply(const cli_args *a, kt_request *rq, const char *const *keys) {
  for (int i = 0; i < a->n_opts; i++) {
    const cli_opt *o = &a->opts[i];
    if (!a->given[i] || !kt_request_knows(o->name)) continue;
    int wanted = !keys;
    for (const char *const *k = keys; k && *k && !wanted; k++) wanted = !strcmp(*k, o->name);
    if (!wanted) continue;
    char key[64];
    typed(o, key, sizeof key);
    /* a value stated twice is ambiguous, as a key twice in a cost file */
    if (a->given[i] > 1)
      return cli_usage_error("%s is given %d times: give it once", key, a->given[i]);
    kt_error err = {{0}};
    kt_status st = kt_request_set(rq, key, a->value[i], &err);
    if (st) return cli_fail(st, &err);
    /* v=0 is the page's "the schedule's own V"; on the command line that
     * is leaving -v out, and -v 0 a mistake */
    if ((!strcmp(o->name, "v") || !strcmp(o->name, "chunks")) && rq->v == 0)
      return cli_usage_error("%s '%s': expected an integer in 1..%d (leave it out for the "
                             "schedule's own)",
                             key, a->value[i], KT_MAX_CHUNKS);
  }
  return 0;
}

/* The order in path, named after the file. */
static int read_order(const char *path, kt_request *rq) {
  kt_error err = {{0}};
  kt_status st = kt_request_read_order(rq, path, NULL, &err);
  return st ? cli_fail(st == KT_EIO ? KT_EINVAL : st, &err) : 0;
}

static int command_takes(const cli_args *a, const char *name) {
  for (int i = 0; i < a->n_opts; i++)
    if (!strcmp(a->opts[i].name, name)) return 1;
  return 0;
}

/* --costs runs/NAME: the costs the run's traced step was predicted with
 * and its memory per stage (the rundir module reads them), per stage; the
 * run's P and M, and for sim its schedule, V and memory limit, unless given. */
static int read_run_costs(const cli_args *a, const char *dir, kt_request *rq) {
  kt_run_segment lay;
  kt_error err = {{0}};
  kt_costs c;
  kt_status st = kt_rundir_read_costs(dir, &c, &lay, &err);
  if (st) return cli_fail(st == KT_EIO ? KT_EINVAL : st, &err);
  kt_costs_free(&rq->costs);
  rq->costs = c;
  char p[16], m[16], v[16];
  snprintf(p, sizeof p, "%d", lay.p), snprintf(m, sizeof m, "%d", lay.m),
      snprintf(v, sizeof v, "%d", lay.v);
  int sim = command_takes(a, "schedule") && !cli_has(a, "schedule") && !cli_has(a, "from") &&
            !cli_has(a, "schedule-file") && kt_gen_kind_from_name(lay.schedule) >= 0;
  st = kt_request_set(rq, "per-stage", "1", &err);
  if (!st && lay.p > 0) st = kt_request_set(rq, "p", p, &err);
  if (!st && lay.m > 0) st = kt_request_set(rq, "m", m, &err);
  if (!st && sim) st = kt_request_set(rq, "schedule", lay.schedule, &err);
  if (!st && sim && lay.v > 0) st = kt_request_set(rq, "v", v, &err);
  if (!st && sim && lay.mem_limit[0] && !cli_has(a, "mem-limit"))
    st = kt_request_set(rq, "mem-limit", lay.mem_limit, &err);
  return st ? cli_fail(st, &err) : 0;
}

/* --packing, --mb-tokens, --attn-share and --seed say how documents are
 * packed: without --doc-lengths there are none, and they would be ignored. */
static int packing_without_docs(const cli_args *a) {
  static const char *const keys[] = {"packing", "mb-tokens", "attn-share", "seed"};
  if (cli_has(a, "doc-lengths")) return 0;
  for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
    if (command_takes(a, "doc-lengths") && cli_has(a, keys[i]))
      return cli_usage_error("--%s %.40s: --packing, --mb-tokens, --attn-share and --seed need "
                             "--doc-lengths (the documents they pack)",
                             keys[i], cli_get(a, keys[i]));
  return 0;
}

int cli_request_read(const cli_args *a, kt_request *rq) {
  kt_request_init(rq);
  if (packing_without_docs(a)) return 2;
  const char *file = cli_get(a, "costs");
  kt_error err = {{0}};
  kt_status st;
  struct stat sb = {0};
  int rc = 0;
  if (file && stat(file, &sb) == 0 && S_ISDIR(sb.st_mode)) rc = read_run_costs(a, file, rq);
  else if (file && (st = kt_costs_load_json(&rq->costs, file, &err)))
    return cli_fail(st == KT_EIO ? KT_EINVAL : st, &err);
  if (!rc) rc = apply(a, rq, NULL);
  /* a run's costs per micro-batch (its micro-batches differed) hold for its
   * own M; at another M (or its K rounds) each stage's mean */
  if (!rc && file && S_ISDIR(sb.st_mode) && rq->costs.n_mb > 0 && rq->costs.n_mb != rq->m)
    kt_costs_clear_mb(&rq->costs);
  const char *order =
      cli_get(a, "schedule-file") ? cli_get(a, "schedule-file") : cli_get(a, "from");
  if (!rc && order && cli_has(a, "schedule"))
    rc = cli_usage_error("give either --schedule or --schedule-file, not both");
  if (!rc && order) rc = read_order(order, rq);
  if (!rc && (st = kt_request_check(rq, &err))) rc = cli_fail(st, &err);
  return rc;
}

int cli_order_read(const cli_args *a, const char *path, kt_result *res) {
  static const char *const keys[] = {
      "p", "m", "v", "stages", "microbatches", "chunks", "torch-notation", "torch-version", NULL};
  kt_request rq;
  kt_request_init(&rq);
  int rc = apply(a, &rq, keys);
  if (!rc) rc = read_order(path, &rq);
  kt_error err = {{0}};
  kt_status st;
  if (!rc && (st = kt_request_build(&rq, res, &err))) rc = cli_fail(st, &err);
  kt_request_free(&rq);
  return rc;
}
