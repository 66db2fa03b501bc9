/* config.json: what a run is (model, optimizer, steps, data) and the layout
 * segments it trained under. The one definition of the file's form: the
 * writer and the reader below. "layout" repeats the last segment, so older
 * readers (and people) find the current layout where it always was. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rundir/internal.h"

/* A segment's three per-stage memory lists, in file order. */
#define MEM_LISTS 3
static const char *const mem_keys[MEM_LISTS] = {"mem_act_bytes", "mem_wgrad_bytes",
                                                "mem_transient_bytes"};
static double **mem_list(kt_run_segment *s, int k) {
  return k == 0 ? &s->mem_act_bytes : k == 1 ? &s->mem_wgrad_bytes : &s->mem_transient_bytes;
}

static void segment_free(kt_run_segment *s) {
  free(s->partition);
  for (int k = 0; k < MEM_LISTS; k++) free(*mem_list(s, k)), *mem_list(s, k) = NULL;
  s->partition = NULL;
}

void kt_run_config_free(kt_run_config *c) {
  if (!c) return;
  for (int i = 0; i < c->n_segments; i++) segment_free(&c->segments[i]);
  free(c->segments);
  c->segments = NULL;
  c->n_segments = 0;
}

kt_status kt_run_config_add_segment(kt_run_config *c, const kt_run_segment *seg, kt_error *err) {
  kt_run_segment *n = realloc(c->segments, sizeof *n * (size_t)(c->n_segments + 1));
  if (!n) return kt_fail(err, KT_ENOMEM, "out of memory");
  c->segments = n;
  kt_run_segment *s = &n[c->n_segments];
  *s = *seg;
  s->partition = NULL;
  for (int k = 0; k < MEM_LISTS; k++) *mem_list(s, k) = NULL;
  int fail = 0;
  if (seg->n_partition > 0 && seg->partition) {
    s->partition = malloc(sizeof *s->partition * (size_t)seg->n_partition);
    if (s->partition)
      memcpy(s->partition, seg->partition, sizeof *s->partition * (size_t)seg->n_partition);
    fail |= !s->partition;
  } else {
    s->n_partition = 0;
  }
  for (int k = 0; k < MEM_LISTS && seg->n_mem > 0; k++) {
    const double *from = *mem_list((kt_run_segment *)seg, k);
    if (!from) continue;
    double *to = malloc(sizeof *to * (size_t)seg->n_mem);
    if (to) memcpy(to, from, sizeof *to * (size_t)seg->n_mem);
    *mem_list(s, k) = to;
    fail |= !to;
  }
  if (seg->n_mem <= 0 || !seg->mem_act_bytes) s->n_mem = 0;
  if (fail) {
    segment_free(s);
    return kt_fail(err, KT_ENOMEM, "out of memory");
  }
  c->n_segments++;
  return KT_OK;
}

/* ---- writing ------------------------------------------------------------------ */

static void layout_json(kt_buf *b, const kt_run_segment *s) {
  kt_buf_puts(b, "\"schedule\": ");
  kt_buf_json_string(b, s->schedule);
  kt_buf_printf(b,
                ", \"p\": %d, \"v\": %d, \"m\": %d, \"b\": %d, \"k\": %d, \"d\": %d, "
                "\"transport\": ",
                s->p, s->v, s->m, s->b, s->k, s->d);
  kt_buf_json_string(b, s->transport);
  kt_buf_puts(b, ", \"partition\": [");
  for (int i = 0; i < s->n_partition; i++) kt_buf_printf(b, "%s%d", i ? ", " : "", s->partition[i]);
  kt_buf_puts(b, "]");
}

/* The segment's memory: the per-stage lists, 1F1B's peak and the limit,
 * each where known. */
static void memory_json(kt_buf *b, const kt_run_segment *s) {
  for (int k = 0; k < MEM_LISTS && s->n_mem > 0; k++) {
    const double *v = *mem_list((kt_run_segment *)s, k);
    if (!v) continue;
    kt_buf_printf(b, ", \"%s\": [", mem_keys[k]);
    for (int i = 0; i < s->n_mem; i++) {
      if (i) kt_buf_puts(b, ", ");
      kt_buf_json_number(b, v[i]);
    }
    kt_buf_puts(b, "]");
  }
  if (s->peak_1f1b_bytes > 0) {
    kt_buf_puts(b, ", \"peak_1f1b_bytes\": ");
    kt_buf_json_number(b, s->peak_1f1b_bytes);
  }
  if (s->mem_limit[0]) {
    kt_buf_puts(b, ", \"mem_limit\": ");
    kt_buf_json_string(b, s->mem_limit);
    kt_buf_puts(b, ", \"mem_limit_bytes\": ");
    kt_buf_json_number(b, s->mem_limit_bytes > 0 ? s->mem_limit_bytes : NAN);
  }
}

static void segment_json(kt_buf *b, const kt_run_segment *s) {
  kt_buf_printf(b, "{\"first_step\": %d, \"last_step\": ", s->first_step);
  if (s->last_step >= 0) kt_buf_printf(b, "%d", s->last_step);
  else kt_buf_puts(b, "null");
  kt_buf_puts(b, ", ");
  layout_json(b, s);
  kt_buf_puts(b, ", \"predicted_bubble\": ");
  kt_buf_json_number(b, s->predicted_bubble);
  kt_buf_puts(b, ", \"measured_bubble\": ");
  kt_buf_json_number(b, s->measured_bubble);
  if (s->predicted_period > 0) {
    kt_buf_puts(b, ", \"predicted_period\": ");
    kt_buf_json_number(b, s->predicted_period);
  }
  if (s->period_1f1b > 0) {
    kt_buf_puts(b, ", \"period_1f1b\": ");
    kt_buf_json_number(b, s->period_1f1b);
  }
  if (s->cores > 0)
    kt_buf_printf(b, ", \"cores\": %d, \"compute_threads\": %d", s->cores, s->compute_threads);
  memory_json(b, s);
  kt_buf_puts(b, "}");
}

void kt__rd_config_json(const kt_run_config *c, kt_buf *b) {
  kt_buf_puts(b, "{\n  \"model\": {\"kind\": ");
  kt_buf_json_string(b, c->model);
  kt_buf_printf(b,
                ", \"layers\": %d, \"hidden\": %d, \"heads\": %d, \"seq_len\": %d, "
                "\"vocab\": %d, \"tie_embeddings\": %s, \"recompute\": %s, \"seed\": %llu},\n",
                c->layers, c->hidden, c->heads, c->seq_len, c->vocab,
                c->tie_embeddings ? "true" : "false", c->recompute ? "true" : "false",
                (unsigned long long)c->model_seed);
  kt_buf_puts(b, "  \"layout\": {");
  if (c->n_segments > 0) layout_json(b, &c->segments[c->n_segments - 1]);
  kt_buf_puts(b, "},\n  \"optimizer\": {\"kind\": ");
  kt_buf_json_string(b, c->optimizer);
  const struct {
    const char *k;
    double v;
  } nums[] = {{"lr", c->lr}, {"weight_decay", c->weight_decay}, {"grad_clip", c->grad_clip}};
  for (size_t i = 0; i < sizeof nums / sizeof *nums; i++) {
    kt_buf_printf(b, ", \"%s\": ", nums[i].k);
    kt_buf_json_number(b, nums[i].v);
  }
  kt_buf_printf(b, ", \"warmup_steps\": %d, \"decay_steps\": %d},\n", c->warmup_steps,
                c->decay_steps);
  kt_buf_printf(b, "  \"steps\": %d, \"val_every\": %d, \"data_seed\": %llu, \"data\": ", c->steps,
                c->val_every, (unsigned long long)c->data_seed);
  if (c->data[0]) kt_buf_json_string(b, c->data);
  else kt_buf_puts(b, "null");
  if (c->doc_lengths[0]) {
    kt_buf_puts(b, ", \"doc_lengths\": ");
    kt_buf_json_string(b, c->doc_lengths);
    kt_buf_puts(b, ", \"packing\": ");
    kt_buf_json_string(b, c->packing[0] ? c->packing : "fifo");
    kt_buf_printf(b, ", \"seq_chunks\": %d", c->seq_chunks > 1 ? c->seq_chunks : 1);
    if (c->has_attn) {
      kt_buf_puts(b, ", \"attn_share\": ");
      kt_buf_json_number(b, c->attn_share);
      kt_buf_printf(b, ", \"attn_share_from\": %d", c->attn_from);
    }
  }
  kt_buf_puts(b, ",\n  \"segments\": [");
  for (int i = 0; i < c->n_segments; i++) {
    kt_buf_puts(b, i ? ",\n    " : "\n    ");
    segment_json(b, &c->segments[i]);
  }
  kt_buf_puts(b, "\n  ]\n}\n");
}

/* ---- reading ------------------------------------------------------------------ */

static void copy_str(char *dst, size_t n, const char *s) { snprintf(dst, n, "%s", s ? s : ""); }

static int opt_int(const cJSON *o, const char *key, int dflt) {
  int v;
  return kt__rd_int(o, key, -1, 1 << 30, &v) ? dflt : v;
}

static uint64_t opt_u64(const cJSON *o, const char *key) {
  double v = kt__rd_num(o, key);
  return v >= 0 && v < 1.8e19 ? (uint64_t)v : 0;
}

static int is_true(const cJSON *o, const char *key) {
  return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, key));
}

/* A list of n byte counts (each finite and >= 0) into *out; absent: NULL. */
static kt_status parse_bytes(const cJSON *o, const char *key, int n, const char *path, double **out,
                             kt_error *err) {
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key);
  *out = NULL;
  if (!a) return KT_OK;
  if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != n)
    return kt_fail(err, KT_EPARSE, "%s: %s is not a list of %d byte counts (one per stage)", path,
                   key, n);
  if (!(*out = malloc(sizeof **out * (size_t)n)))
    return kt_fail(err, KT_ENOMEM, "out of memory reading %s", path);
  int i = 0;
  for (const cJSON *e = a->child; e; e = e->next, i++) {
    if (!cJSON_IsNumber(e) || !(e->valuedouble >= 0) || !isfinite(e->valuedouble)) {
      free(*out);
      *out = NULL;
      return kt_fail(err, KT_EPARSE, "%s: %s[%d] is not a byte count", path, key, i);
    }
    (*out)[i] = e->valuedouble;
  }
  return KT_OK;
}

/* A segment's memory (memory_json's form) into s. */
static kt_status parse_memory(const cJSON *o, const char *path, kt_run_segment *s, kt_error *err) {
  const cJSON *act = cJSON_GetObjectItemCaseSensitive(o, mem_keys[0]);
  int n = cJSON_IsArray(act) ? cJSON_GetArraySize(act) : 0;
  if (n > KT_MAX_RANKS * KT_MAX_CHUNKS)
    return kt_fail(err, KT_EPARSE, "%s: memory of %d stages", path, n);
  s->n_mem = n;
  for (int k = 0; k < MEM_LISTS && n > 0; k++) {
    kt_status st = parse_bytes(o, mem_keys[k], n, path, mem_list(s, k), err);
    if (st) return st;
  }
  s->peak_1f1b_bytes = kt__rd_num(o, "peak_1f1b_bytes");
  s->mem_limit_bytes = kt__rd_num(o, "mem_limit_bytes");
  copy_str(s->mem_limit, sizeof s->mem_limit, kt__rd_str(o, "mem_limit"));
  return KT_OK;
}

/* One layout object (a segment or the top-level "layout") into s. */
static kt_status parse_layout(const cJSON *o, const char *path, kt_run_segment *s, kt_error *err) {
  *s = (kt_run_segment){.last_step = -1,
                        .predicted_bubble = NAN,
                        .measured_bubble = NAN,
                        .peak_1f1b_bytes = NAN,
                        .mem_limit_bytes = NAN,
                        .predicted_period = NAN,
                        .period_1f1b = NAN};
  copy_str(s->schedule, sizeof s->schedule, kt__rd_str(o, "schedule"));
  copy_str(s->transport, sizeof s->transport, kt__rd_str(o, "transport"));
  int *ints[] = {&s->p, &s->v, &s->m, &s->b, &s->k, &s->d};
  static const char *const keys[] = {"p", "v", "m", "b", "k", "d"};
  for (int i = 0; i < 6; i++) *ints[i] = opt_int(o, keys[i], i < 3 ? 0 : 1);
  s->first_step = opt_int(o, "first_step", 0);
  s->last_step = opt_int(o, "last_step", -1);
  s->predicted_bubble = kt__rd_num(o, "predicted_bubble");
  s->measured_bubble = kt__rd_num(o, "measured_bubble");
  s->predicted_period = kt__rd_num(o, "predicted_period");
  s->period_1f1b = kt__rd_num(o, "period_1f1b");
  s->cores = opt_int(o, "cores", 0);
  s->compute_threads = opt_int(o, "compute_threads", 0);
  kt_status st = parse_memory(o, path, s, err);
  if (st) {
    segment_free(s);
    return st;
  }
  const cJSON *part = cJSON_GetObjectItemCaseSensitive(o, "partition");
  int n = cJSON_IsArray(part) ? cJSON_GetArraySize(part) : 0;
  if (n > KT_MAX_RANKS * KT_MAX_CHUNKS) {
    segment_free(s);
    return kt_fail(err, KT_EPARSE, "%s: a partition of %d stages", path, n);
  }
  if (n == 0) return KT_OK;
  s->partition = malloc(sizeof *s->partition * (size_t)n);
  if (!s->partition) {
    segment_free(s);
    return kt_fail(err, KT_ENOMEM, "out of memory reading %s", path);
  }
  int i = 0;
  for (const cJSON *e = part->child; e; e = e->next, i++) {
    if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble > 1e9) {
      segment_free(s);
      return kt_fail(err, KT_EPARSE, "%s: partition entry %d is not a unit count", path, i);
    }
    s->partition[i] = (int)e->valuedouble;
  }
  s->n_partition = n;
  return KT_OK;
}

static kt_status parse_segments(const cJSON *root, const char *path, kt_run_config *c,
                                kt_error *err) {
  const cJSON *segs = cJSON_GetObjectItemCaseSensitive(root, "segments");
  const cJSON *layout = cJSON_GetObjectItemCaseSensitive(root, "layout");
  kt_run_segment s;
  kt_status st = KT_OK;
  if (!cJSON_IsArray(segs) || cJSON_GetArraySize(segs) == 0) { /* an older run: one segment */
    if (!cJSON_IsObject(layout)) return KT_OK;
    if ((st = parse_layout(layout, path, &s, err))) return st;
    st = kt_run_config_add_segment(c, &s, err);
    segment_free(&s);
    return st;
  }
  for (const cJSON *e = segs->child; e && !st; e = e->next) {
    if (!cJSON_IsObject(e)) return kt_fail(err, KT_EPARSE, "%s: a segment is not an object", path);
    if ((st = parse_layout(e, path, &s, err))) return st;
    st = kt_run_config_add_segment(c, &s, err);
    segment_free(&s);
  }
  return st;
}

kt_status kt__rd_config_parse(const cJSON *root, const char *path, kt_run_config *c,
                              kt_error *err) {
  memset(c, 0, sizeof *c);
  if (!cJSON_IsObject(root)) return kt_fail(err, KT_EPARSE, "%s: not a JSON object", path);
  const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
  const cJSON *optim = cJSON_GetObjectItemCaseSensitive(root, "optimizer");
  copy_str(c->model, sizeof c->model, kt__rd_str(model, "kind"));
  c->layers = opt_int(model, "layers", 0);
  c->hidden = opt_int(model, "hidden", 0);
  c->heads = opt_int(model, "heads", 0);
  c->seq_len = opt_int(model, "seq_len", 0);
  c->vocab = opt_int(model, "vocab", 0);
  c->tie_embeddings = is_true(model, "tie_embeddings");
  c->recompute = is_true(model, "recompute");
  c->model_seed = opt_u64(model, "seed");
  copy_str(c->optimizer, sizeof c->optimizer, kt__rd_str(optim, "kind"));
  c->lr = kt__rd_num(optim, "lr");
  c->weight_decay = kt__rd_num(optim, "weight_decay");
  c->grad_clip = kt__rd_num(optim, "grad_clip");
  c->warmup_steps = opt_int(optim, "warmup_steps", 0);
  c->decay_steps = opt_int(optim, "decay_steps", 0);
  c->steps = opt_int(root, "steps", 0);
  c->val_every = opt_int(root, "val_every", 0);
  c->data_seed = opt_u64(root, "data_seed");
  copy_str(c->data, sizeof c->data, kt__rd_str(root, "data"));
  copy_str(c->doc_lengths, sizeof c->doc_lengths, kt__rd_str(root, "doc_lengths"));
  copy_str(c->packing, sizeof c->packing, kt__rd_str(root, "packing"));
  c->seq_chunks = opt_int(root, "seq_chunks", 1);
  c->attn_share = kt__rd_num(root, "attn_share");
  c->has_attn = c->attn_share >= 0 && c->attn_share <= 1;
  c->attn_from = opt_int(root, "attn_share_from", 0);
  kt_status st = parse_segments(root, path, c, err);
  if (st) kt_run_config_free(c);
  return st;
}

kt_status kt_rundir_read_config(const char *dir, kt_run_config *out, kt_error *err) {
  memset(out, 0, sizeof *out);
  struct stat sb;
  if (!dir || stat(dir, &sb) != 0)
    return kt_fail(err, KT_EINVAL, "run directory '%s' does not exist", dir ? dir : "");
  if (!S_ISDIR(sb.st_mode)) return kt_fail(err, KT_EINVAL, "'%s' is not a directory", dir);
  char *path = kt__rd_join(dir, "config.json");
  if (!path) return kt_fail(err, KT_ENOMEM, "out of memory");
  kt_status st = KT_OK;
  cJSON *root = NULL;
  if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
    st = kt_fail(err, KT_EINVAL, "'%s' has no config.json: not a run directory of kaiten train",
                 dir);
  if (!st) st = kt__rd_read_json(path, &root, err);
  if (!st) st = kt__rd_config_parse(root, path, out, err);
  cJSON_Delete(root);
  free(path);
  return st;
}
