/* The request's vocabulary: one table of settings, each with its reader and
 * its writer (kaiten/request.h). argv (src/cli), the page's key=value
 * (src/web), the ffi and Python all come through kt_request_set. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/request.h"
#include "request/internal.h"

/* A value is echoed in a message up to this many characters. */
#define ECHO_MAX 60
#define ECHO(v) \
  (int)(strlen(v) > ECHO_MAX ? ECHO_MAX : strlen(v)), (v), strlen(v) > ECHO_MAX ? "..." : ""

static const char *const effort_names[] = {"default", "quick", "thorough"};
#define N_EFFORTS (int)(sizeof effort_names / sizeof *effort_names)

const char *kt_effort_name(kt_effort e) { return (unsigned)e < N_EFFORTS ? effort_names[e] : "?"; }

void kt_request_init(kt_request *rq) {
  memset(rq, 0, sizeof *rq);
  snprintf(rq->schedule, sizeof rq->schedule, "1f1b");
  rq->p = 4, rq->m = 8, rq->placement = -1;
  kt_costs_default(&rq->costs);
  rq->time_limit = 10;
  kt_faults_init(&rq->faults);
  rq->notation = KT_NOTATION_AUTO, rq->ir = KT_TORCH_IR_2_15;
  kt__request_packing_init(rq);
}

void kt_request_free(kt_request *rq) {
  kt_costs_free(&rq->costs);
  kt_faults_free(&rq->faults);
  free(rq->schedules);
  free(rq->order);
  free(rq->order_origin);
  rq->schedules = rq->order = rq->order_origin = NULL;
}

static char *dup_or_null(const char *s, int *fail) {
  if (!s) return NULL;
  char *d = strdup(s);
  if (!d) *fail = 1;
  return d;
}

kt_status kt_request_copy(kt_request *dst, const kt_request *src) {
  *dst = *src;
  int fail = 0;
  dst->schedules = dup_or_null(src->schedules, &fail);
  dst->order = dup_or_null(src->order, &fail);
  dst->order_origin = dup_or_null(src->order_origin, &fail);
  kt_faults_init(&dst->faults);
  if (kt_costs_copy(&dst->costs, &src->costs)) fail = 1;
  kt_error e;
  if (kt_faults_copy(&dst->faults, &src->faults, &e)) fail = 1;
  if (!fail) return KT_OK;
  kt_request_free(dst);
  return KT_ENOMEM;
}

kt_status kt_request_set_order(kt_request *rq, const char *text, const char *name,
                               const char *origin, kt_error *err) {
  char *t = strdup(text ? text : ""), *o = origin ? strdup(origin) : NULL;
  if (!t || (origin && !o)) {
    free(t), free(o);
    return kt_fail(err, KT_ENOMEM, "out of memory");
  }
  free(rq->order), free(rq->order_origin);
  rq->order = t, rq->order_origin = o;
  snprintf(rq->order_name, sizeof rq->order_name, "%s", name ? name : "");
  return KT_OK;
}

kt_status kt_request_read_order(kt_request *rq, const char *path, const char *name, kt_error *err) {
  char *text = NULL;
  size_t len = 0;
  kt_status st = kt_read_text(path, KT_SCHEDULE_FILE_MAX, KT_SCHEDULE_LINE_MAX, &text, &len, err);
  if (st) return st;
  if (len == 0) {
    free(text);
    return kt_fail(err, KT_EINVAL, "'%.200s' is empty", path);
  }
  char base[KT_REQUEST_NAME_LEN];
  if (!name) { /* the file's name without its extension */
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    snprintf(base, sizeof base, "%.*s", (int)strcspn(b, "."), b);
    name = base;
  }
  st = kt_request_set_order(rq, text, name, path, err);
  free(text);
  return st;
}

/* ---- readers ------------------------------------------------------------------ */

typedef kt_status (*setter)(kt_request *rq, int field, const char *key, const char *val,
                            kt_error *err);

static kt_status bad(kt_error *err, const char *key, const char *val, const char *expected) {
  return kt_fail(err, KT_EINVAL, "%s '%.*s%s': expected %s", key, ECHO(val), expected);
}

enum { F_P, F_M, F_V };
static kt_status set_size(kt_request *rq, int field, const char *key, const char *val,
                          kt_error *err) {
  static const long hi[] = {KT_MAX_RANKS, KT_MAX_MICROBATCHES, KT_MAX_CHUNKS};
  long lo = field == F_V ? 0 : 1, x; /* v=0: the schedule's own V */
  if (kt_parse_int(val, lo, hi[field], &x))
    return kt_fail(err, KT_EINVAL, "%s '%.*s%s': expected an integer in %ld..%ld", key, ECHO(val),
                   lo, hi[field]);
  int *at[] = {&rq->p, &rq->m, &rq->v};
  *at[field] = (int)x;
  if (x) rq->given |= 1u << field;
  else rq->given &= ~(1u << field);
  snprintf(rq->size_key[field], sizeof rq->size_key[field], "%s", key);
  return KT_OK;
}

/* "0"/"1" (and "true"/"false", as JSON and Python write them) */
static int flag_value(const char *val) {
  if (!strcmp(val, "1") || !strcmp(val, "true")) return 1;
  if (!strcmp(val, "0") || !strcmp(val, "false")) return 0;
  return -1;
}

enum { F_PER_STAGE, F_THOROUGH, F_QUICK };
static kt_status set_flag(kt_request *rq, int field, const char *key, const char *val,
                          kt_error *err) {
  int x = flag_value(val);
  if (x < 0) return bad(err, key, val, "0 or 1");
  if (field == F_PER_STAGE) rq->per_stage = x;
  else if (x) rq->effort = field == F_THOROUGH ? KT_EFFORT_THOROUGH : KT_EFFORT_QUICK;
  else if (rq->effort == (field == F_THOROUGH ? KT_EFFORT_THOROUGH : KT_EFFORT_QUICK))
    rq->effort = KT_EFFORT_DEFAULT;
  return KT_OK;
}

static kt_status set_effort(kt_request *rq, int field, const char *key, const char *val,
                            kt_error *err) {
  (void)field;
  int e = kt_name_index(val, effort_names, N_EFFORTS);
  if (e < 0) return bad(err, key, val, "quick, default or thorough");
  rq->effort = (kt_effort)e;
  return KT_OK;
}

static kt_status check_schedule_name(const char *key, const char *name, kt_error *err) {
  if (!strcmp(name, KT_OPTIMAL_NAME) || kt_gen_kind_from_name(name) >= 0) return KT_OK;
  return kt_fail(err, KT_EINVAL, "%s: unknown schedule '%.*s%s' (known: %s, %s)", key, ECHO(name),
                 kt_gen_kind_list(), KT_OPTIMAL_NAME);
}

static kt_status set_schedule(kt_request *rq, int field, const char *key, const char *val,
                              kt_error *err) {
  (void)field;
  kt_status st = check_schedule_name(key, val, err);
  if (!st) snprintf(rq->schedule, sizeof rq->schedule, "%s", val);
  return st;
}

/* The kind a name in a list stands for (aliases alike): a generator, or
 * KT_SIM_OPTIMAL. */
static int kind_of(const char *name) {
  return !strcmp(name, KT_OPTIMAL_NAME) ? KT_SIM_OPTIMAL : kt_gen_kind_from_name(name);
}

/* "a,b,c": each a schedule, none twice */
static kt_status set_schedules(kt_request *rq, int field, const char *key, const char *val,
                               kt_error *err) {
  (void)field;
  char *copy = strdup(val);
  if (!copy) return kt_fail(err, KT_ENOMEM, "out of memory");
  kt_status st = KT_OK;
  int kinds[KT_SCHED_COUNT + 1], n = 0;
  for (char *tok = copy, *next; tok && !st; tok = next) {
    next = strchr(tok, ',');
    if (next) *next++ = 0;
    if (!*tok) {
      st = kt_fail(err, KT_EINVAL, "%s '%.*s%s': an empty name in the list", key, ECHO(val));
      break;
    }
    if ((st = check_schedule_name(key, tok, err))) break;
    int k = kind_of(tok);
    for (int i = 0; i < n && !st; i++)
      if (kinds[i] == k)
        st = kt_fail(err, KT_EINVAL, "%s lists '%.*s%s' twice (%s is %s)", key, ECHO(tok), tok,
                     k == KT_SIM_OPTIMAL ? KT_OPTIMAL_NAME : kt_gen_kind_name((kt_gen_kind)k));
    if (!st) kinds[n++] = k;
  }
  free(copy);
  if (st) return st;
  char *list = strdup(val);
  if (!list) return kt_fail(err, KT_ENOMEM, "out of memory");
  free(rq->schedules);
  rq->schedules = list;
  return KT_OK;
}

static kt_status set_placement(kt_request *rq, int field, const char *key, const char *val,
                               kt_error *err) {
  (void)field;
  int pl = kt_placement_from_name(val);
  if (pl != KT_PLACEMENT_LOOP && pl != KT_PLACEMENT_V) return bad(err, key, val, "loop or v");
  rq->placement = pl;
  return KT_OK;
}

/* The cost table's fields, by the names kt_costs_set reads. */
enum { F_TF, F_TB, F_TW, F_TU, F_MEM_ACT, F_MEM_WGRAD, F_MEM_TRANSIENT, F_COST_LISTS };
static const char *const list_fields[] = {"tf",      "tb",        "tw",           "tu",
                                          "mem-act", "mem-wgrad", "mem-transient"};

/* One cost field as kt_costs_set reads it (its range: kt_cost_value_check),
 * its error naming the key as the caller wrote it. */
static kt_status set_cost(kt_request *rq, const char *field, const char *key, const char *val,
                          kt_error *err) {
  kt_error e = {{0}};
  kt_status st = kt_costs_set(&rq->costs, field, val, &e);
  if (!st) return KT_OK;
  /* kt_costs_set names its field first: say it as the caller wrote it */
  size_t n = strlen(field);
  const char *rest = !strncmp(e.msg, field, n) ? e.msg + n : e.msg;
  return kt_fail(err, st, "%s%s%s", key, rest == e.msg ? ": " : "", rest);
}

static kt_status set_cost_list(kt_request *rq, int field, const char *key, const char *val,
                               kt_error *err) {
  return set_cost(rq, list_fields[field], key, val, err);
}

enum {
  F_COMM,
  F_COMM_LATENCY,
  F_COMM_BYTES,
  F_COMM_BANDWIDTH,
  F_SEND_OVERHEAD,
  F_OP_OVERHEAD,
  F_T_NORM,
  F_T_DP,
  F_OVERLAP,
  F_TIE
};
static const char *const scalar_fields[] = {
    "comm",        "comm-latency", "comm-bytes", "comm-bandwidth", "send-overhead",
    "op-overhead", "t-norm",       "t-dp",       "overlap",        "tie"};
static double *scalar_of(kt_costs *c, int field) {
  double *at[] = {&c->comm,          &c->comm_latency, &c->comm_bytes, &c->comm_bandwidth,
                  &c->send_overhead, &c->op_overhead,  &c->t_norm,     &c->t_dp,
                  &c->overlap,       &c->t_tie};
  return at[field];
}

static kt_status set_scalar(kt_request *rq, int field, const char *key, const char *val,
                            kt_error *err) {
  return set_cost(rq, scalar_fields[field], key, val, err);
}

static kt_status set_step_sync(kt_request *rq, int field, const char *key, const char *val,
                               kt_error *err) {
  (void)field;
  int k = kt_step_sync_from_name(val);
  if (k < 0) return bad(err, key, val, "overlap or barrier");
  rq->costs.step_sync = (kt_step_sync)k;
  return KT_OK;
}

static kt_status set_mem_limit(kt_request *rq, int field, const char *key, const char *val,
                               kt_error *err) {
  (void)field;
  /* a schedule's memory is in mem-act units: bytes need a model (train) */
  return kt_mem_limit_parse(key, val, 0, &rq->mem_limit, err);
}

static kt_status set_time_limit(kt_request *rq, int field, const char *key, const char *val,
                                kt_error *err) {
  (void)field;
  double x;
  if (kt_parse_double(val, &x) || !(x >= 1e-3 && x <= 1e6))
    return bad(err, key, val, "seconds in 0.001..1e+06");
  rq->time_limit = x;
  return KT_OK;
}

/* A fault's reader's message (it names the setting first) with the key as
 * the caller wrote it. */
static kt_status fault_error(kt_error *err, const char *name, const char *key, const kt_error *e) {
  size_t n = strlen(name);
  return kt_fail(err, KT_EINVAL, "%s%s", key, !strncmp(e->msg, name, n) ? e->msg + n : e->msg);
}

enum { F_SLOW_RANK, F_SLOW_LINK };
/* "R:F[@S]": rank R's compute F times as long; "A-B:+D[@S]": the link
 * between ranks A and B D longer (kt_faults reads both); each replaces the
 * one before it. */
static kt_status set_fault(kt_request *rq, int field, const char *key, const char *val,
                           kt_error *err) {
  kt_faults one;
  kt_faults_init(&one);
  kt_error e = {{0}};
  if (field == F_SLOW_RANK) {
    if (kt_faults_add_rank(&one, val, &e)) return fault_error(err, "slow-rank", key, &e);
    rq->faults.rank[0] = one.rank[0], rq->faults.n_rank = 1;
  } else {
    if (kt_faults_add_link(&one, val, 1, 0, &e)) return fault_error(err, "slow-link", key, &e);
    rq->faults.link[0] = one.link[0], rq->faults.n_link = 1;
  }
  return KT_OK;
}

static kt_status set_link_delay(kt_request *rq, int field, const char *key, const char *val,
                                kt_error *err) {
  (void)field;
  return set_cost(rq, "link-delay", key, val, err);
}

static kt_status set_notation(kt_request *rq, int field, const char *key, const char *val,
                              kt_error *err) {
  (void)field;
  int n = kt_notation_from_name(val);
  if (n < 0) return bad(err, key, val, "auto, current or legacy");
  rq->notation = (kt_notation)n;
  return KT_OK;
}

static kt_status set_torch_version(kt_request *rq, int field, const char *key, const char *val,
                                   kt_error *err) {
  (void)field;
  kt_error e = {{0}};
  if (!kt_torch_ir_from_version(val, &rq->ir, &e)) return KT_OK;
  return kt_fail(err, KT_EINVAL, "%s: %s", key, e.msg);
}

/* ---- the table ---------------------------------------------------------------- */

typedef struct {
  const char *name, *alias; /* the CLI's long flag; the Python API's name, or NULL */
  setter set;
  int field;
} setting;

static const setting settings[] = {
    {"schedule", NULL, set_schedule, 0},
    {"schedules", NULL, set_schedules, 0},
    {"p", "stages", set_size, F_P},
    {"m", "microbatches", set_size, F_M},
    {"v", "chunks", set_size, F_V},
    {"placement", NULL, set_placement, 0},
    {"tf", NULL, set_cost_list, F_TF},
    {"tb", NULL, set_cost_list, F_TB},
    {"tw", NULL, set_cost_list, F_TW},
    {"tu", NULL, set_cost_list, F_TU},
    {"mem-act", NULL, set_cost_list, F_MEM_ACT},
    {"mem-wgrad", NULL, set_cost_list, F_MEM_WGRAD},
    {"mem-transient", NULL, set_cost_list, F_MEM_TRANSIENT},
    {"comm", NULL, set_scalar, F_COMM},
    {"comm-latency", NULL, set_scalar, F_COMM_LATENCY},
    {"comm-bytes", NULL, set_scalar, F_COMM_BYTES},
    {"comm-bandwidth", NULL, set_scalar, F_COMM_BANDWIDTH},
    {"send-overhead", NULL, set_scalar, F_SEND_OVERHEAD},
    {"op-overhead", NULL, set_scalar, F_OP_OVERHEAD},
    {"t-norm", NULL, set_scalar, F_T_NORM},
    {"t-dp", NULL, set_scalar, F_T_DP},
    {"overlap", NULL, set_scalar, F_OVERLAP},
    {"tie", NULL, set_scalar, F_TIE},
    {"step-sync", NULL, set_step_sync, 0},
    {"per-stage", NULL, set_flag, F_PER_STAGE},
    {"mem-limit", NULL, set_mem_limit, 0},
    {"effort", NULL, set_effort, 0},
    {"thorough", NULL, set_flag, F_THOROUGH},
    {"quick", NULL, set_flag, F_QUICK},
    {"time-limit", NULL, set_time_limit, 0},
    {"link-delay", NULL, set_link_delay, 0},
    {"slow-rank", NULL, set_fault, F_SLOW_RANK},
    {"slow-link", NULL, set_fault, F_SLOW_LINK},
    {"torch-notation", "notation", set_notation, 0},
    {"torch-version", NULL, set_torch_version, 0},
    {"doc-lengths", NULL, kt__request_set_packing, KT__REQ_DOC_LENGTHS},
    {"seed", NULL, kt__request_set_packing, KT__REQ_SEED},
    {"packing", NULL, kt__request_set_packing, KT__REQ_PACKING},
    {"mb-tokens", NULL, kt__request_set_packing, KT__REQ_MB_TOKENS},
    {"attn-share", NULL, kt__request_set_packing, KT__REQ_ATTN_SHARE},
};
#define N_SETTINGS (int)(sizeof settings / sizeof *settings)

/* key without its leading dashes, "_" read as "-", equals name */
static int same_key(const char *key, const char *name) {
  while (*key == '-') key++;
  for (; *key && *name; key++, name++)
    if ((*key == '_' ? '-' : *key) != *name) return 0;
  return !*key && !*name;
}

static const setting *find(const char *key) {
  for (int i = 0; i < N_SETTINGS; i++)
    if (same_key(key, settings[i].name) || (settings[i].alias && same_key(key, settings[i].alias)))
      return &settings[i];
  return NULL;
}

int kt_request_knows(const char *key) { return key && find(key) != NULL; }

kt_status kt_request_set(kt_request *rq, const char *key, const char *value, kt_error *err) {
  if (!key || !value) return kt_fail(err, KT_EINVAL, "a setting needs a key and a value");
  const setting *s = find(key);
  size_t dashes = strspn(key, "-");
  /* a short option (-p, -m) says nothing of how the long ones are written */
  if (dashes != 1)
    snprintf(rq->key_prefix, sizeof rq->key_prefix, "%.*s", (int)(dashes > 2 ? 2 : dashes), key);
  if (!s) {
    char known[512] = "";
    size_t at = 0;
    for (int i = 0; i < N_SETTINGS && at < sizeof known; i++)
      at +=
          (size_t)snprintf(known + at, sizeof known - at, "%s%s", i ? ", " : "", settings[i].name);
    return kt_fail(err, KT_EINVAL, "unknown setting '%.*s%s' (known: %s)", ECHO(key), known);
  }
  return s->set(rq, s->field, key, value, err);
}

kt_status kt_request_parse(kt_request *rq, const char *text, kt_error *err) {
  static const char blanks[] = " \t\r\n";
  char key[64];
  kt_status st = KT_OK;
  for (const char *at = text + strspn(text, blanks); *at && !st; at += strspn(at, blanks)) {
    size_t len = strcspn(at, blanks), klen = strcspn(at, "=");
    if (klen >= len || klen == 0 || klen >= sizeof key)
      return kt_fail(err, KT_EINVAL, "setting '%.*s%s': expected key=value",
                     (int)(len < ECHO_MAX ? len : ECHO_MAX), at, len > ECHO_MAX ? "..." : "");
    memcpy(key, at, klen);
    key[klen] = 0;
    char *val = strndup(at + klen + 1, len - klen - 1);
    if (!val) return kt_fail(err, KT_ENOMEM, "out of memory");
    st = kt_request_set(rq, key, val, err);
    free(val);
    at += len;
  }
  return st;
}

/* The largest entry of a per-link list (0: none). */
static double list_max(const double *a, int n) {
  double x = 0;
  for (int i = 0; a && i < n; i++) x = a[i] > x ? a[i] : x;
  return x;
}

kt_status kt_request_check(const kt_request *rq, kt_error *err) {
  const kt_costs *c = &rq->costs;
  const char *k = rq->key_prefix; /* the settings named as the caller names them */
  /* a setting per link counts as given as its uniform value does */
  double comm = fmax(c->comm, list_max(c->link_comm, c->n_links));
  double bw = fmax(c->comm_bandwidth, list_max(c->link_bandwidth, c->n_links));
  double lat = fmax(c->comm_latency, list_max(c->link_latency, c->n_links));
  if (comm > 0 && bw > 0)
    return kt_fail(err, KT_EINVAL,
                   "%scomm %g and %scomm-bandwidth %g both set the time of a hop; "
                   "give %scomm, or %scomm-latency/%scomm-bytes/%scomm-bandwidth",
                   k, comm, k, bw, k, k, k, k);
  if (bw == 0 && c->comm_bytes > 0)
    return kt_fail(err, KT_EINVAL,
                   "%scomm-bytes %g needs %scomm-bandwidth (hop = latency + "
                   "bytes/bandwidth)",
                   k, c->comm_bytes, k);
  if (bw == 0 && lat > 0)
    return kt_fail(err, KT_EINVAL,
                   "%scomm-latency %g needs %scomm-bandwidth; for a fixed hop time "
                   "give %scomm",
                   k, lat, k, k);
  for (int l = 0; c->link_bandwidth && l < c->n_links; l++)
    if (c->link_bandwidth[l] == 0)
      return kt_fail(err, KT_EINVAL,
                     "%scomm-bandwidth: link %d has 0; a link's bandwidth is above 0 (hop = "
                     "latency + bytes/bandwidth)",
                     k, l);
  if (kt_costs_compute_free(c))
    return kt_fail(err, KT_EINVAL,
                   "%stf, %stb and %stw are all 0: every action takes no time, so "
                   "there is no period or bubble to compute; give a cost above 0",
                   k, k, k);
  return KT_OK;
}

/* ---- the writer --------------------------------------------------------------- */

static void print_number(kt_buf *b, double x) { kt_buf_printf(b, "%.17g", x); }

/* A list per stage of per-micro-batch values, "a0,a1;b0,b1;..." (kt_costs_set). */
static void print_mb_lists(kt_buf *b, const char *name, const double *mb, int n, int n_mb) {
  kt_buf_printf(b, " %s=", name);
  for (int i = 0; i < n * n_mb; i++) {
    if (i) kt_buf_puts(b, i % n_mb ? "," : ";");
    print_number(b, mb[i]);
  }
}

static void print_cost_list(kt_buf *b, const char *name, double uniform, const double *per, int n,
                            double dflt) {
  if (!per && uniform == dflt) return;
  kt_buf_printf(b, " %s=", name);
  if (!per) {
    print_number(b, uniform);
    return;
  }
  for (int i = 0; i < n; i++) {
    if (i) kt_buf_puts(b, ",");
    print_number(b, per[i]);
  }
}

/* slow-rank=R:F[@S], slow-link=A-B:+D[@S] */
static void print_faults(kt_buf *b, const kt_faults *f) {
  for (int i = 0; i < f->n_rank; i++) {
    kt_buf_printf(b, " slow-rank=%d:", f->rank[i].rank);
    print_number(b, f->rank[i].factor);
    if (f->rank[i].onset > 0) kt_buf_printf(b, "@%d", f->rank[i].onset + 1);
  }
  for (int i = 0; i < f->n_link; i++) {
    kt_buf_printf(b, " slow-link=%d-%d:+", f->link[i].a, f->link[i].b);
    print_number(b, f->link[i].delay);
    if (f->link[i].onset > 0) kt_buf_printf(b, "@%d", f->link[i].onset + 1);
  }
}

void kt_request_print(const kt_request *rq, kt_buf *out) {
  kt_request d;
  kt_request_init(&d);
  kt_buf b;
  kt_buf_init(&b);
  kt_buf_printf(&b, " schedule=%s", rq->schedule);
  if (rq->schedules) kt_buf_printf(&b, " schedules=%s", rq->schedules);
  kt_buf_printf(&b, " p=%d m=%d", rq->p, rq->m);
  if (rq->v > 0) kt_buf_printf(&b, " v=%d", rq->v);
  if (rq->placement >= 0) kt_buf_printf(&b, " placement=%s", kt_placement_name(rq->placement));
  const kt_costs *c = &rq->costs, *dc = &d.costs;
  int n = c->n_stages;
  const struct {
    const char *name;
    double u, d;
    const double *per, *mb;
  } lists[] = {{"tf", c->tf, dc->tf, c->stage_tf, c->mb_tf},
               {"tb", c->tb, dc->tb, c->stage_tb, c->mb_tb},
               {"tw", c->tw, dc->tw, c->stage_tw, c->mb_tw},
               {"tu", c->tu, dc->tu, c->stage_tu, NULL},
               {"mem-act", c->mem_act, dc->mem_act, c->stage_mem_act, c->mb_mem_act},
               {"mem-wgrad", c->mem_wgrad, dc->mem_wgrad, c->stage_mem_wgrad, c->mb_mem_wgrad}};
  for (size_t i = 0; i < sizeof lists / sizeof *lists; i++)
    if (lists[i].mb) print_mb_lists(&b, lists[i].name, lists[i].mb, n, c->n_mb);
    else print_cost_list(&b, lists[i].name, lists[i].u, lists[i].per, n, lists[i].d);
  print_cost_list(&b, "mem-transient", c->mem_transient, c->stage_mem_transient, n,
                  dc->mem_transient);
  for (int i = 0; i < N_SETTINGS; i++) {
    if (settings[i].set != set_scalar) continue;
    int f = settings[i].field;
    double x = *scalar_of((kt_costs *)c, f);
    const double *links = f == F_COMM             ? c->link_comm
                          : f == F_COMM_LATENCY   ? c->link_latency
                          : f == F_COMM_BANDWIDTH ? c->link_bandwidth
                                                  : NULL;
    if (links && c->n_links > 0) {
      print_cost_list(&b, settings[i].name, x, links, c->n_links, x);
      continue;
    }
    if (f == F_TIE ? !c->tied : x == *scalar_of(&d.costs, f)) continue;
    kt_buf_printf(&b, " %s=", settings[i].name);
    print_number(&b, x);
  }
  if (c->step_sync != dc->step_sync)
    kt_buf_printf(&b, " step-sync=%s", kt_step_sync_name(c->step_sync));
  if (rq->per_stage) kt_buf_puts(&b, " per-stage=1");
  if (kt_mem_limit_given(&rq->mem_limit)) {
    char text[40];
    kt_mem_limit_format(&rq->mem_limit, text, sizeof text);
    kt_buf_printf(&b, " mem-limit=%s", text);
  }
  if (rq->effort) kt_buf_printf(&b, " effort=%s", kt_effort_name(rq->effort));
  if (rq->time_limit != d.time_limit) {
    kt_buf_puts(&b, " time-limit=");
    print_number(&b, rq->time_limit);
  }
  if (c->link_delay && c->n_links > 0)
    print_cost_list(&b, "link-delay", 0, c->link_delay, c->n_links, 0);
  print_faults(&b, &rq->faults);
  if (rq->notation != d.notation)
    kt_buf_printf(&b, " torch-notation=%s", kt_notation_name(rq->notation));
  if (rq->ir != d.ir) kt_buf_puts(&b, " torch-version=2.14"); /* any release before 2.15 */
  kt__request_print_packing(rq, &b);
  if (b.failed) out->failed = 1;
  else kt_buf_append(out, b.data + 1, b.len - 1);
  kt_buf_free(&b);
  kt_request_free(&d);
}
