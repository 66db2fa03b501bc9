/* The what-if settings: blank-separated key=value, named and read as
 * kaiten sim's flags (cost lists by kt_costs_set, numbers by the same
 * strict parsers). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "web/web_internal.h"

#define KEY_LEN 32
#define VALUE_LEN 65536 /* a per-stage list of a few thousand stages */

static const char *const cost_lists[] = {"tf", "tb", "tw", "mem-act", "mem-wgrad"};
static const char *const scalars[] = {"comm", "comm-latency", "comm-bytes", "comm-bandwidth",
                                      "send-overhead", "op-overhead", "overlap"};

static double *scalar_of(kt_costs *c, int i) {
  double *at[] = {&c->comm, &c->comm_latency, &c->comm_bytes, &c->comm_bandwidth,
                  &c->send_overhead, &c->op_overhead, &c->overlap};
  return at[i];
}

static int index_of(const char *key, const char *const *names, int n) {
  for (int i = 0; i < n; i++)
    if (!strcmp(key, names[i])) return i;
  return -1;
}

static kt_status set_int(const char *key, const char *val, long lo, long hi, long *out,
                         kt_error *err) {
  if (kt_parse_int(val, lo, hi, out))
    return kt_fail(err, KT_EINVAL, "%s '%s': expected an integer in %ld..%ld", key, val, lo, hi);
  return KT_OK;
}

static kt_status set_flag(const char *key, const char *val, int *out, kt_error *err) {
  if (strcmp(val, "0") && strcmp(val, "1"))
    return kt_fail(err, KT_EINVAL, "%s '%s': expected 0 or 1", key, val);
  *out = val[0] == '1';
  return KT_OK;
}

/* "12" (units) or "0.5x" (a fraction of 1F1B's peak) */
static kt_status set_limit(const char *val, kt__web_req *rq, kt_error *err) {
  char num[64];
  size_t n = strlen(val);
  int fraction = n > 1 && val[n - 1] == 'x';
  if (fraction) n--;
  double x;
  if (n == 0 || n >= sizeof num) goto bad;
  memcpy(num, val, n);
  num[n] = 0;
  if (kt_parse_double(num, &x) || !isfinite(x) || x < 0 || (fraction && x == 0)) goto bad;
  rq->mem_limit = x, rq->limit_fraction = fraction, rq->have_limit = 1;
  return KT_OK;
bad:
  return kt_fail(err, KT_EINVAL, "mem-limit '%s': expected mem-act units (12) or a fraction of "
                                 "1F1B's peak (0.5x)", val);
}

/* "R:F": rank R's compute F times as long */
static kt_status set_slow(const char *val, kt__web_req *rq, kt_error *err) {
  const char *colon = strchr(val, ':');
  char num[32];
  long r;
  double f;
  if (!colon || (size_t)(colon - val) >= sizeof num) goto bad;
  memcpy(num, val, (size_t)(colon - val));
  num[colon - val] = 0;
  if (kt_parse_int(num, 0, KT_MAX_RANKS - 1, &r) || kt_parse_double(colon + 1, &f) ||
      !isfinite(f) || f <= 0)
    goto bad;
  rq->slow_rank = (int)r, rq->slow_factor = f;
  return KT_OK;
bad:
  return kt_fail(err, KT_EINVAL, "slow-rank '%s': expected RANK:FACTOR with FACTOR > 0 (2:1.5)",
                 val);
}

static kt_status set_one(const char *key, const char *val, kt__web_req *rq, kt_error *err) {
  int i;
  if (!strcmp(key, "schedule")) {
    if (strlen(val) >= sizeof rq->schedule)
      return kt_fail(err, KT_EINVAL, "unknown schedule '%.40s'", val);
    snprintf(rq->schedule, sizeof rq->schedule, "%s", val);
    return KT_OK;
  }
  if (!strcmp(key, "p")) return set_int(key, val, 1, KT_MAX_RANKS, &rq->p, err);
  if (!strcmp(key, "m")) return set_int(key, val, 1, KT_MAX_MICROBATCHES, &rq->m, err);
  if (!strcmp(key, "v")) return set_int(key, val, 0, KT_MAX_CHUNKS, &rq->v, err);
  if (!strcmp(key, "per-stage")) return set_flag(key, val, &rq->per_stage, err);
  if (!strcmp(key, "exports")) return set_flag(key, val, &rq->exports, err);
  if (!strcmp(key, "quick")) return set_flag(key, val, &rq->quick, err);
  if (!strcmp(key, "mem-limit")) return set_limit(val, rq, err);
  if (!strcmp(key, "slow-rank")) return set_slow(val, rq, err);
  if (!strcmp(key, "slow-link")) return kt_faults_add_link(&rq->links, val, 1, 0, err);
  if (!strcmp(key, "replan")) return set_flag(key, val, &rq->replan, err);
  if (index_of(key, cost_lists, 5) >= 0) return kt_costs_set(&rq->given, key, val, err);
  if ((i = index_of(key, scalars, 7)) >= 0) {
    double x;
    if (kt_parse_double(val, &x) || !isfinite(x) || x < 0 || (i == 6 && x > 1))
      return kt_fail(err, KT_EINVAL, "%s '%s': expected a number >= 0%s", key, val,
                     i == 6 ? " and <= 1" : "");
    *scalar_of(&rq->given, i) = x;
    return KT_OK;
  }
  return kt_fail(err, KT_EINVAL, "unknown setting '%s' (known: schedule, p, m, v, tf, tb, tw, "
                                 "mem-act, mem-wgrad, per-stage, comm, comm-latency, comm-bytes, "
                                 "comm-bandwidth, send-overhead, op-overhead, overlap, mem-limit, "
                                 "slow-rank, slow-link, replan, exports, quick)", key);
}

kt_status kt__web_parse(const char *args, kt__web_req *rq, kt_error *err) {
  memset(rq, 0, sizeof *rq);
  snprintf(rq->schedule, sizeof rq->schedule, "1f1b");
  rq->p = 4, rq->m = 8, rq->slow_rank = -1;
  kt_costs_default(&rq->given);
  static const char blanks[] = " \t\r\n";
  char key[KEY_LEN];
  char *val = malloc(VALUE_LEN);
  if (!val) return kt_fail(err, KT_ENOMEM, "out of memory");
  kt_status st = KT_OK;
  for (const char *at = args + strspn(args, blanks); *at && !st; at += strspn(at, blanks)) {
    size_t len = strcspn(at, blanks), klen = strcspn(at, "=");
    if (klen >= len || klen == 0 || klen >= KEY_LEN || len - klen - 1 >= VALUE_LEN) {
      st = kt_fail(err, KT_EINVAL, "setting '%.*s': expected key=value", (int)(len < 60 ? len : 60),
                   at);
      break;
    }
    memcpy(key, at, klen);
    key[klen] = 0;
    memcpy(val, at + klen + 1, len - klen - 1);
    val[len - klen - 1] = 0;
    st = set_one(key, val, rq, err);
    at += len;
  }
  free(val);
  if (!st && rq->given.comm > 0 && rq->given.comm_bandwidth > 0)
    st = kt_fail(err, KT_EINVAL, "comm and comm-bandwidth both set the time of a hop; give one");
  return st;
}
