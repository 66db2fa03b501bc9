/* Choosing a chunk's GEMM library: the one asked for, or (auto) the
 * fastest here on the model's own matmuls. The matmuls are recorded from
 * one forward and backward of a probe chunk of the model's last units
 * (its last block and head), then replayed on each library, one thread
 * each, in interleaved rounds, each class of products timed at its best
 * round, on operands from memory as in a step (timed in cache, oneDNN
 * came out fastest for some models, and a step on it alone ran 1.25x
 * auto's). The choice is kept per model shape in this process and in a
 * cache file shared by the machine's runs. Also each chunk's threads
 * (kt__chunk_exec_init). */
#define _GNU_SOURCE /* flock */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nn/nn.h"

#define PROBE_ROWS 2048  /* rows (b * T) of the probe micro-batch, at most */
#define SMALL_FLOPS 20e6 /* less work than this: OpenBLAS, unmeasured */
#define ROUNDS 5         /* timed rounds per library */
#define KEY_LEN 400
/* The replay's operand sets: each product takes the next set, so its
 * operands come from memory as a step's do (a step's activations and
 * weights are tens of MiB, read once a micro-batch); sets enough for
 * COLD_BYTES (past the last-level cache), at most MAX_SETS. A small model's
 * sets all stay in cache, as its step's operands do. */
#define COLD_BYTES (64u << 20)
#define MAX_SETS 64
#define PROBE_KIND "probe=cold" /* in the cache key: choices timed in cache are not reused */

/* ---- the probe: record the matmuls of the model's last units --------------- */

static kt_status probe_run(kt_chunk *c, kt_error *err) {
  size_t rows = (size_t)c->micro_batch * (c->cfg.kind == KT_MODEL_GPT ? c->cfg.seq_len : 1);
  size_t vals = rows * (size_t)c->cfg.hidden;
  int *ints = calloc(rows, sizeof *ints);
  float *x = calloc(vals, sizeof *x), *y = calloc(vals, sizeof *y);
  float *in = calloc(c->in_elems + 1, sizeof *in);
  kt_status st = KT_OK;
  if (!ints || !x || !y || !in) st = kt_fail(err, KT_ENOMEM, "out of memory");
  kt_microbatch mb = {.b = c->micro_batch, .x = x, .y = y, .tokens = ints, .targets = ints};
  double loss;
  if (!st) st = c->ops->forward(c, 0, &mb, c->is_first ? NULL : in, NULL, &loss, err);
  if (!st) st = c->ops->backward_input(c, 0, &mb, NULL, NULL, err);
  if (!st) st = c->ops->backward_weight(c, 0, err);
  free(ints), free(x), free(y), free(in);
  return st;
}

/* The probe's micro-batch: the run's, cut to PROBE_ROWS rows. */
static int probe_batch(const kt_model_config *cfg, int micro_batch) {
  int T = cfg->kind == KT_MODEL_GPT ? cfg->seq_len : 1, most = PROBE_ROWS / T;
  most = most < 1 ? 1 : most;
  return micro_batch < most ? micro_batch : most;
}

/* Records the probe's matmuls into *log (malloc'd copy, *n entries). */
static kt_status probe_record(const kt_model_config *cfg, int b, kt__matmul_shape **log, size_t *n,
                              kt_error *err) {
  kt_model_config pc = *cfg;
  pc.gemm = KT_GEMM_OPENBLAS;
  pc.recompute = 0;
  int units = kt_model_units(cfg), first = units > 2 ? units - 2 : 0;
  kt_chunk *c = NULL;
  kt_status st = cfg->kind == KT_MODEL_GPT
                     ? kt__gpt_chunk_create(&pc, first, units - first, b, 1, 0, &c, err)
                     : kt__mlp_chunk_create(&pc, first, units - first, b, 1, 0, &c, err);
  if (st) return st;
  kt__exec saved = kt__exec_enter(NULL, KT_GEMM_OPENBLAS, NULL);
  kt__matmul_record(1);
  st = probe_run(c, err);
  kt__matmul_record(0);
  kt__exec_leave(saved);
  c->ops->destroy(c);
  const kt__matmul_shape *sh = kt__matmul_recorded(n);
  *log = st ? NULL : malloc((*n ? *n : 1) * sizeof **log);
  if (!st && !*log) st = kt_fail(err, KT_ENOMEM, "out of memory");
  if (!st) memcpy(*log, sh, *n * sizeof **log);
  return st;
}

/* ---- the replay ------------------------------------------------------------ */

static size_t operand_floats(const kt__matmul_shape *s, int which) {
  if (which == 0) return (size_t)(s->trans_a ? s->k : s->m) * (size_t)s->lda;
  if (which == 1) return (size_t)(s->trans_b ? s->n : s->k) * (size_t)s->ldb;
  return (size_t)s->m * (size_t)s->ldo;
}

/* ---- classes of products: the dimensions that do not grow with the rows ---- */

static void shape_dims(int m, int n, int k, int trans_a, int dims[2]) {
  dims[0] = trans_a ? m : n, dims[1] = trans_a ? n : k;
}

typedef struct {
  int trans_a, trans_b, dims[2];
  double round[KT_GEMM_COUNT]; /* this round's seconds on each library */
  double best[KT_GEMM_COUNT];  /* the best round's (0: not timed) */
} shape_class;

/* The class of each product of the log (cls_of[i]); the classes in *cls. */
static kt_status classify(const kt__matmul_shape *log, size_t n, shape_class **cls, size_t *n_cls,
                          size_t *cls_of, kt_error *err) {
  size_t cap = 0;
  *cls = NULL, *n_cls = 0;
  for (size_t i = 0; i < n; i++) {
    int d[2];
    shape_dims(log[i].m, log[i].n, log[i].k, log[i].trans_a, d);
    size_t c = 0;
    while (c < *n_cls &&
           ((*cls)[c].trans_a != log[i].trans_a || (*cls)[c].trans_b != log[i].trans_b ||
            (*cls)[c].dims[0] != d[0] || (*cls)[c].dims[1] != d[1]))
      c++;
    if (c == *n_cls) {
      if (kt_grow((void **)cls, &cap, *n_cls + 1, sizeof **cls))
        return kt_fail(err, KT_ENOMEM, "out of memory timing the GEMM libraries");
      (*cls)[(*n_cls)++] = (shape_class){log[i].trans_a, log[i].trans_b, {d[0], d[1]}, {0}, {0}};
    }
    cls_of[i] = c;
  }
  return KT_OK;
}

kt_gemm_kind kt__gemm_for(const kt__exec *e, int m, int n, int k, int trans_a, int trans_b) {
  if (!e->plan) return e->gemm;
  int d[2];
  shape_dims(m, n, k, trans_a, d);
  for (int i = 0; i < e->plan->n_shapes; i++) {
    const kt_gemm_shape *s = &e->plan->shapes[i];
    if (s->trans_a == trans_a && s->trans_b == trans_b && s->dims[0] == d[0] && s->dims[1] == d[1])
      return s->kind;
  }
  return e->gemm;
}

/* The replay's operands: a, b, c, and d for a GELU's derivative, in each
 * of n_sets sets of `floats` floats each, one block; next: the set the
 * next product takes. */
typedef struct {
  float *block;
  size_t floats, n_sets, next;
} replay_sets;

typedef struct {
  float *a, *b, *c, *d;
} replay_buffers;

static replay_buffers next_set(replay_sets *rs) {
  float *s = rs->block + 4 * rs->floats * rs->next;
  rs->next = (rs->next + 1) % rs->n_sets;
  return (replay_buffers){s, s + rs->floats, s + 2 * rs->floats, s + 3 * rs->floats};
}

/* The log on library k, once, each product with its epilogue (fused on
 * kaiten's kernel, a pass on a library: its cost counts) on the next
 * operand set; each product's seconds added to its class's round. */
static double replay_once(kt_gemm_kind k, const kt__matmul_shape *log, size_t n, replay_sets *rs,
                          shape_class *cls, const size_t *cls_of) {
  double t0 = kt_now(), t = t0;
  for (size_t i = 0; i < n; i++) {
    const kt__matmul_shape *s = &log[i];
    replay_buffers set = next_set(rs), *r = &set;
    kt__epilogue ep = kt__epilogue_of_kind(s->epi, r->a, r->b, s->ldo, r->d);
    kt__gemm_call_ep(k, s->trans_a, s->trans_b, s->m, s->n, s->k, r->a, s->lda, r->b, s->ldb,
                     s->accumulate ? 1.0f : 0.0f, r->c, s->ldo, s->epi ? &ep : NULL);
    double now = kt_now();
    cls[cls_of[i]].round[k] += now - t;
    t = now;
  }
  return t - t0;
}

/* A class that moves to another library, and the seconds that saves. */
typedef struct {
  kt_gemm_shape shape;
  double saves;
} shape_move;

static int by_saving(const void *x, const void *y) {
  double a = ((const shape_move *)x)->saves, b = ((const shape_move *)y)->saves;
  return a > b ? -1 : a < b;
}

/* out->shapes: the classes another library runs 5% or more faster than
 * out->kind, each 1% or more of its time, the largest savings first. */
static void choose_shapes(kt_gemm_choice *out, const shape_class *cls, size_t n_cls) {
  shape_move *moves = calloc(n_cls ? n_cls : 1, sizeof *moves);
  size_t n_moves = 0;
  double total = out->seconds[out->kind];
  for (size_t c = 0; moves && c < n_cls; c++) {
    double mine = cls[c].best[out->kind], best = mine;
    kt_gemm_kind lib = out->kind;
    for (int k = 1; k < KT_GEMM_COUNT; k++)
      if (cls[c].best[k] > 0 && cls[c].best[k] * 1.05 <= best)
        best = cls[c].best[k], lib = (kt_gemm_kind)k;
    if (lib == out->kind || !(mine >= 0.01 * total)) continue;
    moves[n_moves++] = (shape_move){
        {cls[c].trans_a, cls[c].trans_b, {cls[c].dims[0], cls[c].dims[1]}, lib, mine / best},
        mine - best};
  }
  if (n_moves) qsort(moves, n_moves, sizeof *moves, by_saving);
  out->n_shapes = 0;
  for (size_t i = 0; i < n_moves && out->n_shapes < KT_GEMM_MAX_SHAPES; i++)
    out->shapes[out->n_shapes++] = moves[i].shape;
  free(moves);
}

/* Each available library's best time on the log (0: not available) and
 * each class's best round (cls, cls_of: classify). */
static kt_status replay_all(const kt__matmul_shape *log, size_t n, double *seconds,
                            shape_class *cls, size_t n_cls, const size_t *cls_of, kt_error *err) {
  size_t big = 16; /* whole 64-byte lines: the sets stay aligned */
  for (size_t i = 0; i < n; i++)
    for (int w = 0; w < 3; w++)
      if (operand_floats(&log[i], w) > big) big = operand_floats(&log[i], w);
  big = (big + 15) / 16 * 16;
  size_t set_bytes = 4 * big * sizeof(float), n_sets = (COLD_BYTES + set_bytes - 1) / set_bytes;
  replay_sets rs = {NULL, big, n_sets > MAX_SETS ? MAX_SETS : n_sets, 0};
  if (!(rs.block = kt__alloc_floats(4 * big * rs.n_sets)))
    return kt_fail(err, KT_ENOMEM, "out of memory timing the GEMM libraries");
  for (size_t i = 0; i < 4 * big * rs.n_sets; i++) rs.block[i] = 0.01f * (float)(i % 97);
  kt__exec saved = kt__exec_enter(NULL, KT_GEMM_OPENBLAS, NULL); /* one thread per library */
  for (int k = 1; k < KT_GEMM_COUNT; k++) {
    seconds[k] = 0;
    if (kt_gemm_available((kt_gemm_kind)k, NULL))
      seconds[k] = -1, replay_once(k, log, n, &rs, cls, cls_of);
  }
  for (int r = 0; r < ROUNDS; r++) /* interleaved: a slow second hits every library */
    for (int k = 1; k < KT_GEMM_COUNT; k++) {
      if (seconds[k] == 0) continue;
      for (size_t j = 0; j < n_cls; j++) cls[j].round[k] = 0;
      replay_once(k, log, n, &rs, cls, cls_of);
      for (size_t j = 0; j < n_cls; j++) /* each class's best round, apart */
        if (r == 0 || cls[j].round[k] < cls[j].best[k]) cls[j].best[k] = cls[j].round[k];
    }
  /* A library's time: its classes each at their best round. Libraries a few
   * percent apart flipped on the best whole round: a burst of load in one
   * round slowed every class of the library it hit. */
  for (int k = 1; k < KT_GEMM_COUNT; k++)
    if (seconds[k] != 0) {
      seconds[k] = 0;
      for (size_t j = 0; j < n_cls; j++) seconds[k] += cls[j].best[k];
    }
  kt__exec_leave(saved);
  free(rs.block);
  return KT_OK;
}

static kt_gemm_kind fastest(const double *seconds) {
  kt_gemm_kind best = KT_GEMM_OPENBLAS;
  for (int k = 1; k < KT_GEMM_COUNT; k++) /* a cache line can name one gone since */
    if (seconds[k] > 0 && seconds[k] < seconds[best] && kt_gemm_available((kt_gemm_kind)k, NULL))
      best = (kt_gemm_kind)k;
  return best;
}

/* ---- the cache --------------------------------------------------------------- */

/* The model's matmul shapes, this CPU and the libraries' versions. */
static void cache_key(const kt_model_config *cfg, int b, char *key, size_t len) {
  char cpu[128] = "?";
  FILE *f = fopen("/proc/cpuinfo", "r");
  char line[256];
  while (f && fgets(line, sizeof line, f))
    if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
      snprintf(cpu, sizeof cpu, "%s", strchr(line, ':') + 2);
      cpu[strcspn(cpu, "\n")] = 0;
      break;
    }
  if (f) fclose(f);
  int n = snprintf(key, len, "%s C=%d T=%d NH=%d V=%d b=%d|%s", kt_model_kind_name(cfg->kind),
                   cfg->hidden, cfg->seq_len, cfg->heads, cfg->vocab, b, cpu);
  for (int k = 1; k < KT_GEMM_COUNT && n > 0 && (size_t)n < len; k++) {
    const char *v = NULL;
    kt_gemm_available((kt_gemm_kind)k, &v);
    n += snprintf(key + n, len - (size_t)n, "|%s %s", kt_gemm_name((kt_gemm_kind)k), v ? v : "-");
  }
  if (n > 0 && (size_t)n < len) snprintf(key + n, len - (size_t)n, "|%s", PROBE_KIND);
  for (char *p = key; *p; p++)
    if (*p == '\t' || *p == '\n') *p = ' ';
}

/* The cache file (kt_gemm_set_cache); NULL: none. */
static char *cache_path;
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;

void kt_gemm_set_cache(const char *path) {
  char *copy = path ? strdup(path) : NULL;
  pthread_mutex_lock(&cache_mu);
  free(cache_path);
  cache_path = copy;
  pthread_mutex_unlock(&cache_mu);
}

/* The cached line for key: its library and times; 0 when absent. */
/* The classes of a cached line: " shapes=N" then N of
 * " trans_a,trans_b,dim,dim,library,speedup"; 0 when malformed. */
static int parse_shapes(const char *p, kt_gemm_choice *out) {
  int n, used;
  if (sscanf(p, " shapes=%d%n", &n, &used) != 1 || n < 0 || n > KT_GEMM_MAX_SHAPES) return 0;
  p += used;
  for (int i = 0; i < n; i++) {
    kt_gemm_shape *s = &out->shapes[i];
    char name[16];
    if (sscanf(p, " %d,%d,%d,%d,%15[a-z],%lf%n", &s->trans_a, &s->trans_b, &s->dims[0], &s->dims[1],
               name, &s->speedup, &used) != 6 ||
        kt_gemm_from_name(name) <= 0)
      return 0;
    s->kind = (kt_gemm_kind)kt_gemm_from_name(name);
    p += used;
  }
  out->n_shapes = n;
  return 1;
}

/* The cached line for key (its times and classes) into out; 0 when
 * absent (lines from before classes were kept do not count). */
static int cache_find(const char *text, const char *key, kt_gemm_choice *out) {
  int found = 0;
  size_t kl = strlen(key);
  for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
    if (strncmp(p, key, kl) || p[kl] != '\t') continue;
    kt_gemm_choice c = {0};
    char name[16];
    int used, ok = sscanf(p + kl + 1, "%15s%n", name, &used) == 1;
    const char *q = p + kl + 1 + (ok ? used : 0);
    for (int k = 1; ok && k < KT_GEMM_COUNT; k++, q += used) /* each library's seconds */
      ok = sscanf(q, " %lf%n", &c.seconds[k], &used) == 1;
    if (ok && kt_gemm_from_name(name) > 0 && parse_shapes(q, &c)) {
      memcpy(out->seconds, c.seconds, sizeof c.seconds);
      memcpy(out->shapes, c.shapes, sizeof c.shapes);
      out->n_shapes = c.n_shapes;
      found = 1; /* the last line for a key wins */
    }
  }
  return found;
}

static void cache_add(const char *path, const char *old, const char *key, const kt_gemm_choice *c) {
  size_t old_len = old ? strlen(old) : 0,
         len = old_len + strlen(key) + 128 + 64 * KT_GEMM_MAX_SHAPES;
  char *text = malloc(len);
  if (!text) return;
  const char *sep = old_len && old[old_len - 1] != '\n' ? "\n" : ""; /* keys start lines */
  int n = snprintf(text, len, "%s%s%s\t%s", old ? old : "", sep, key,
                   kt_gemm_name(fastest(c->seconds)));
  for (int k = 1; k < KT_GEMM_COUNT && n > 0 && (size_t)n < len; k++)
    n += snprintf(text + n, len - (size_t)n, " %.6g", c->seconds[k]);
  if (n > 0 && (size_t)n < len) n += snprintf(text + n, len - (size_t)n, " shapes=%d", c->n_shapes);
  for (int i = 0; i < c->n_shapes && n > 0 && (size_t)n < len; i++) {
    const kt_gemm_shape *h = &c->shapes[i];
    n += snprintf(text + n, len - (size_t)n, " %d,%d,%d,%d,%s,%.4g", h->trans_a, h->trans_b,
                  h->dims[0], h->dims[1], kt_gemm_name(h->kind), h->speedup);
  }
  if (n > 0 && (size_t)n + 1 < len) n += snprintf(text + n, len - (size_t)n, "\n");
  kt_error err;
  if (n > 0 && (size_t)n < len) /* a cache: best effort */
    (void)kt_write_file_atomic(path, text, (size_t)n, &err);
  free(text);
}

/* Records the probe's matmuls and times them on every library: out's
 * seconds, kind and classes. */
static kt_status measure(const kt_model_config *cfg, int b, kt_gemm_choice *out, kt_error *err) {
  kt__matmul_shape *log = NULL;
  size_t n = 0, n_cls = 0, *cls_of = NULL;
  shape_class *cls = NULL;
  kt_status st = probe_record(cfg, b, &log, &n, err);
  if (!st && !(cls_of = malloc((n ? n : 1) * sizeof *cls_of)))
    st = kt_fail(err, KT_ENOMEM, "out of memory timing the GEMM libraries");
  if (!st) st = classify(log, n, &cls, &n_cls, cls_of, err);
  if (!st) st = replay_all(log, n, out->seconds, cls, n_cls, cls_of, err);
  out->kind = fastest(out->seconds);
  if (!st) choose_shapes(out, cls, n_cls);
  free(log), free(cls), free(cls_of);
  return st;
}

/* Measures, or takes the machine's earlier measurement of the same key
 * (under path's lock, when there is a cache). */
static kt_status measure_cached(const kt_model_config *cfg, int b, const char *key,
                                kt_gemm_choice *out, kt_error *err) {
  char path[1024] = "", lock[1040];
  pthread_mutex_lock(&cache_mu);
  if (cache_path && snprintf(path, sizeof path, "%s", cache_path) >= (int)sizeof path)
    *path = 0; /* a path this long: no cache rather than another, shorter one */
  pthread_mutex_unlock(&cache_mu);
  int fd = -1, writable = 0;
  char *text = NULL;
  if (*path) {
    snprintf(lock, sizeof lock, "%s.lock", path);
    fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0 && flock(fd, LOCK_EX)) close(fd), fd = -1;
    size_t tl = 0;
    struct stat sb;
    if (fd >= 0 && kt_read_file(path, &text, &tl, NULL))
      text = NULL, writable = stat(path, &sb) && errno == ENOENT; /* unreadable: left alone */
    else if (fd >= 0)
      writable = !memchr(text, 0, tl); /* rewritten from its text: a NUL would cut it */
  }
  kt_status st = KT_OK;
  if (text && cache_find(text, key, out)) {
    out->how = "cached";
    out->kind = fastest(out->seconds);
    /* a class cached for a library gone since runs on the chosen one */
    for (int i = 0; i < out->n_shapes; i++)
      if (!kt_gemm_available(out->shapes[i].kind, NULL)) out->shapes[i].kind = out->kind;
  } else {
    st = measure(cfg, b, out, err);
    out->how = "measured";
    if (!st && fd >= 0 && writable) cache_add(path, text, key, out);
  }
  free(text);
  if (fd >= 0) close(fd); /* releases the lock */
  return st;
}

/* ---- the choice, once per shape in this process ------------------------------ */

typedef struct {
  char key[KEY_LEN];
  kt_gemm_choice choice;
} memo_entry;

static pthread_mutex_t memo_mu = PTHREAD_MUTEX_INITIALIZER;
static memo_entry *memo;
static size_t n_memo, cap_memo;

static double probe_flops(const kt_model_config *cfg, int b) {
  double C = cfg->hidden, N = (double)b * (cfg->kind == KT_MODEL_GPT ? cfg->seq_len : 1);
  if (cfg->kind != KT_MODEL_GPT) return 6 * N * C * C;
  return 6 * N * (12 * C * C + cfg->vocab * C) + 12 * N * cfg->seq_len * C;
}

kt_status kt_gemm_choose(const kt_model_config *cfg, int micro_batch, kt_gemm_choice *out,
                         kt_error *err) {
  memset(out, 0, sizeof *out);
  kt_status st = kt_model_config_check(cfg, err);
  if (st) return st;
  if ((unsigned)cfg->gemm >= KT_GEMM_COUNT)
    return kt_fail(err, KT_EINVAL, "unknown GEMM library %d", (int)cfg->gemm);
  if (cfg->gemm != KT_GEMM_AUTO) {
    if (!kt_gemm_available(cfg->gemm, NULL))
      return kt_fail(err, KT_EINVAL, "GEMM library '%s' is not installed here (%s)",
                     kt_gemm_name(cfg->gemm),
                     cfg->gemm == KT_GEMM_BLIS     ? "no libblis.so.4; Debian: libblis4"
                     : cfg->gemm == KT_GEMM_ONEDNN ? "no libdnnl.so.2 or .3; Debian: libdnnl2"
                                                   : "it needs a CPU with AVX-512F");
    out->kind = cfg->gemm, out->how = "given";
    return KT_OK;
  }
  int b = probe_batch(cfg, micro_batch < 1 ? 1 : micro_batch);
  if (probe_flops(cfg, b) < SMALL_FLOPS) {
    out->kind = KT_GEMM_OPENBLAS, out->how = "small";
    return KT_OK;
  }
  char key[KEY_LEN];
  cache_key(cfg, b, key, sizeof key);
  pthread_mutex_lock(&memo_mu);
  for (size_t i = 0; i < n_memo; i++)
    if (!strcmp(memo[i].key, key)) *out = memo[i].choice;
  if (!out->how) {
    st = measure_cached(cfg, b, key, out, err);
    if (!st && !kt_grow((void **)&memo, &cap_memo, n_memo + 1, sizeof *memo)) {
      snprintf(memo[n_memo].key, KEY_LEN, "%s", key);
      memo[n_memo++].choice = *out;
    }
  }
  pthread_mutex_unlock(&memo_mu);
  return st;
}

/* ---- a chunk's library and threads ----------------------------------------- */

kt_status kt__chunk_exec_init(kt_chunk *c, kt_error *err) {
  kt_status st = kt_gemm_choose(&c->cfg, c->micro_batch, &c->gemm, err);
  if (st) return st;
  c->pool = kt__pool_create(kt_blas_threads());
  return KT_OK;
}

kt_gemm_kind kt_chunk_gemm(const kt_chunk *c, kt_gemm_choice *how) {
  if (how) *how = c->gemm;
  return c->gemm.kind ? c->gemm.kind : KT_GEMM_OPENBLAS;
}
