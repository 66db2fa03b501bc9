/* Checkpoint files: by unit, CRC-checked, written atomically. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kaiten/checkpoint.h"

#define MAGIC "KAITENCK"
#define VERSION 1

uint32_t kt_crc32(uint32_t crc, const void *data, size_t n) {
  static uint32_t table[256];
  static int ready;
  if (!ready) { /* benign race: every thread computes the same table */
    for (uint32_t i = 0; i < 256; i++) {
      uint32_t c = i;
      for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
    ready = 1;
  }
  const unsigned char *p = data;
  crc = ~crc;
  for (size_t i = 0; i < n; i++) crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

/* Fixed-size header, written field by field in little-endian host order. */
typedef struct {
  char magic[8];
  uint32_t version;
  uint32_t kind, layers, hidden, heads, seq_len, vocab, tie;
  uint64_t model_seed;
  uint32_t optim, step, decay_steps, warmup_steps;
  double lr, min_lr_ratio;
  uint64_t data_seed;
  uint32_t units, state_per_param; /* optimizer floats per parameter */
  uint32_t header_crc;
} file_header;

static void fill_header(file_header *h, const kt_checkpoint_meta *m, int units, int per) {
  memset(h, 0, sizeof *h);
  memcpy(h->magic, MAGIC, 8);
  h->version = VERSION;
  h->kind = (uint32_t)m->model.kind;
  h->layers = (uint32_t)m->model.layers;
  h->hidden = (uint32_t)m->model.hidden;
  h->heads = (uint32_t)m->model.heads;
  h->seq_len = (uint32_t)m->model.seq_len;
  h->vocab = (uint32_t)m->model.vocab;
  h->tie = (uint32_t)m->model.tie_embeddings;
  h->model_seed = m->model.seed;
  h->optim = (uint32_t)m->optim;
  h->step = (uint32_t)m->step;
  h->decay_steps = (uint32_t)m->decay_steps;
  h->warmup_steps = (uint32_t)m->warmup_steps;
  h->lr = m->lr;
  h->min_lr_ratio = m->min_lr_ratio;
  h->data_seed = m->data_seed;
  h->units = (uint32_t)units;
  h->state_per_param = (uint32_t)per;
  h->header_crc = kt_crc32(0, h, offsetof(file_header, header_crc));
}

static int state_per_param(const kt_runtime_config *c) {
  return c->optim.kind == KT_OPTIM_ADAMW ? 2 : (c->optim.momentum != 0 ? 1 : 0);
}

/* The chunk holding unit u on replica d, and u's index inside it. */
static kt_chunk *unit_chunk(kt_runtime *rt, int u, int d, int *stage_out) {
  const int *off = kt_runtime_unit_offsets(rt);
  const kt_schedule *s = kt_runtime_config_of(rt)->schedule;
  int n_stages = kt_schedule_stages(s), stage = 0;
  while (stage + 1 < n_stages && off[stage + 1] <= u) stage++;
  *stage_out = stage;
  return kt_runtime_chunk(rt, stage, d);
}

/* Where unit u lies in chunk c: its parameters (*params, n_params in the
 * chunk), offset and length. */
static void unit_slice(kt_chunk *c, int u, float **params, size_t *n_params, size_t *off,
                       size_t *n) {
  int first;
  const size_t *offset = kt_chunk_unit_offsets(c, &first, NULL);
  *params = kt_chunk_params(c, n_params);
  *off = offset[u - first], *n = offset[u - first + 1] - *off;
}

/* One unit's record: parameters then each optimizer state slice. */
static kt_status unit_record(kt_runtime *rt, int u, int per, float *out, size_t *count,
                             kt_error *err) {
  int stage;
  kt_chunk *c = unit_chunk(rt, u, 0, &stage);
  if (!c) return kt_fail(err, KT_EINVAL, "checkpoint: unit %d is not on this process", u);
  float *params;
  size_t n_params, off, n;
  unit_slice(c, u, &params, &n_params, &off, &n);
  *count = n;
  if (!out) return KT_OK;
  float *state = kt_runtime_optim_state(rt, stage, 0, NULL);
  memcpy(out, params + off, n * sizeof(float));
  for (int s = 0; s < per; s++)
    memcpy(out + (size_t)(s + 1) * n, state + s * n_params + off, n * sizeof(float));
  return KT_OK;
}

/* With ranks in other processes, each rank of replica 0 sends its units to
 * world rank 0, which writes the file; every rank must call save. */
kt_status kt_checkpoint_save(kt_runtime *rt, const char *path, const kt_checkpoint_meta *meta,
                             kt_error *err) {
  int units = kt_model_units(&meta->model);
  const kt_runtime_config *rc = kt_runtime_config_of(rt);
  if (rc->synthetic || rc->make_chunk)
    return kt_fail(err, KT_EINVAL, "%s: a %s model has no units to checkpoint", path,
                   rc->synthetic ? "synthetic" : "caller's own");
  int per = state_per_param(rc);
  kt_transport *t = kt_runtime_transport(rt);
  int distributed = !kt_runtime_all_local(rt);
  const uint64_t tag = KT_TAG_COLLECTIVE | 0x400;
  kt_status st = KT_OK;
  if (distributed && kt_transport_rank(t) != 0) {
    for (int u = 0; u < units && !st; u++) {
      int stage;
      if (!unit_chunk(rt, u, 0, &stage)) continue; /* not mine (or not replica 0) */
      size_t n = 0;
      unit_record(rt, u, per, NULL, &n, err);
      float *rec = malloc((size_t)(1 + per) * n * sizeof(float) + 1);
      if (!rec) return kt_fail(err, KT_ENOMEM, "out of memory");
      st = unit_record(rt, u, per, rec, &n, err);
      uint64_t count = n;
      if (!st) st = kt_transport_send(t, 0, tag, &count, sizeof count, err);
      if (!st) st = kt_transport_send(t, 0, tag + 1, rec, (size_t)(1 + per) * n * sizeof(float), err);
      free(rec);
    }
    return st;
  }
  file_header h;
  fill_header(&h, meta, units, per);
  kt_buf b;
  kt_buf_init(&b);
  kt_buf_append(&b, (const char *)&h, sizeof h);
  for (int u = 0; u < units && !st; u++) {
    int stage;
    uint64_t count;
    float *rec = NULL;
    if (unit_chunk(rt, u, 0, &stage)) {
      size_t n = 0;
      unit_record(rt, u, per, NULL, &n, err);
      count = n;
      rec = malloc((size_t)(1 + per) * n * sizeof(float) + 1);
      if (!rec) st = kt_fail(err, KT_ENOMEM, "out of memory");
      else st = unit_record(rt, u, per, rec, &n, err);
    } else if (distributed) {
      int owner = kt_world_rank(kt_stage_rank(rc->schedule, stage), 0, rc->data_parallel);
      st = kt_transport_recv(t, owner, tag, &count, sizeof count, err);
      if (!st && count > (1ull << 34)) st = kt_fail(err, KT_ERUNTIME, "bad checkpoint unit from rank %d", owner);
      if (!st && !(rec = malloc((size_t)(1 + per) * count * sizeof(float) + 1)))
        st = kt_fail(err, KT_ENOMEM, "out of memory");
      if (!st) st = kt_transport_recv(t, owner, tag + 1, rec, (size_t)(1 + per) * count * sizeof(float), err);
    } else {
      st = kt_fail(err, KT_EINVAL, "checkpoint: unit %d is not on this process", u);
    }
    if (!st) {
      size_t bytes = (size_t)(1 + per) * count * sizeof(float);
      uint32_t crc = kt_crc32(0, rec, bytes);
      kt_buf_append(&b, (const char *)&count, sizeof count);
      kt_buf_append(&b, (const char *)&crc, sizeof crc);
      kt_buf_append(&b, (const char *)rec, bytes);
    }
    free(rec);
  }
  if (st) {
    kt_buf_free(&b);
    return st;
  }
  uint32_t total = kt_crc32(0, b.data, b.len);
  kt_buf_append(&b, (const char *)&total, sizeof total);
  kt_buf_append(&b, "KTEND\n", 6);
  if (b.failed) {
    kt_buf_free(&b);
    return kt_fail(err, KT_ENOMEM, "out of memory writing checkpoint");
  }
  st = kt_write_file_atomic(path, b.data, b.len, err);
  kt_buf_free(&b);
  return st;
}

static void header_meta(const file_header *h, kt_checkpoint_meta *m) {
  memset(m, 0, sizeof *m);
  m->model.kind = (kt_model_kind)h->kind;
  m->model.layers = (int)h->layers;
  m->model.hidden = (int)h->hidden;
  m->model.heads = (int)h->heads;
  m->model.seq_len = (int)h->seq_len;
  m->model.vocab = (int)h->vocab;
  m->model.tie_embeddings = (int)h->tie;
  m->model.seed = h->model_seed;
  m->optim = (kt_optim_kind)h->optim;
  m->step = (int)h->step;
  m->decay_steps = (int)h->decay_steps;
  m->warmup_steps = (int)h->warmup_steps;
  m->lr = h->lr;
  m->min_lr_ratio = h->min_lr_ratio;
  m->data_seed = h->data_seed;
}

/* A header whose checksum matches can still be crafted: its values must
 * describe a model and optimizer this build can create. */
static kt_status check_header(const file_header *h, const char *path, kt_error *err) {
  if (h->optim >= KT_OPTIM_COUNT)
    return kt_fail(err, KT_EPARSE, "%s: checkpoint names optimizer %u, which this build lacks",
                   path, h->optim);
  if (h->step > INT_MAX || h->decay_steps > INT_MAX || h->warmup_steps > INT_MAX)
    return kt_fail(err, KT_EPARSE, "%s: checkpoint step counts out of range (%u, %u, %u)", path,
                   h->step, h->decay_steps, h->warmup_steps);
  if (!(isfinite(h->lr) && h->lr >= 0) || !(h->min_lr_ratio >= 0 && h->min_lr_ratio <= 1))
    return kt_fail(err, KT_EPARSE, "%s: checkpoint learning rate %g (min ratio %g) out of range",
                   path, h->lr, h->min_lr_ratio);
  kt_checkpoint_meta m;
  header_meta(h, &m);
  kt_error sub;
  if (kt_model_config_check(&m.model, &sub))
    return kt_fail(err, KT_EPARSE, "%s: checkpoint model: %s", path, sub.msg);
  return KT_OK;
}

static kt_status parse_header(const char *data, size_t len, const char *path, file_header *h,
                              kt_error *err) {
  if (len < 8 || memcmp(data, MAGIC, 8))
    return kt_fail(err, KT_EPARSE, "%s: not a kaiten checkpoint", path);
  if (len < sizeof *h) return kt_fail(err, KT_EPARSE, "%s: truncated checkpoint (%zu bytes)", path, len);
  memcpy(h, data, sizeof *h);
  if (h->version != VERSION)
    return kt_fail(err, KT_EPARSE, "%s: checkpoint version %u, this build reads %d", path, h->version, VERSION);
  if (h->header_crc != kt_crc32(0, h, offsetof(file_header, header_crc)))
    return kt_fail(err, KT_EPARSE, "%s: corrupt checkpoint header", path);
  return check_header(h, path, err);
}

kt_status kt_checkpoint_read_meta(const char *path, kt_checkpoint_meta *out, kt_error *err) {
  FILE *f = fopen(path, "rb");
  if (!f) return kt_fail(err, KT_EIO, "cannot open checkpoint '%s': %s", path, strerror(errno));
  file_header h;
  size_t n = fread(&h, 1, sizeof h, f);
  fclose(f);
  kt_status st = parse_header((const char *)&h, n, path, &h, err);
  if (st) return st;
  header_meta(&h, out);
  return KT_OK;
}

static int same_model(const kt_model_config *a, const kt_model_config *b) {
  return a->kind == b->kind && a->layers == b->layers && a->hidden == b->hidden &&
         (a->kind != KT_MODEL_GPT || (a->heads == b->heads && a->seq_len == b->seq_len &&
                                      a->vocab == b->vocab && a->tie_embeddings == b->tie_embeddings));
}

/* Unit u's record (count parameters, then per optimizer state slices of
 * the same size) into replica d's chunk, when this process holds it. */
static kt_status restore_unit(kt_runtime *rt, int u, int d, int per, const char *rec,
                              uint64_t count, const char *path, kt_error *err) {
  int stage;
  kt_chunk *c = unit_chunk(rt, u, d, &stage);
  if (!c) return KT_OK; /* another process holds it */
  float *params;
  size_t n_params, off, n;
  unit_slice(c, u, &params, &n_params, &off, &n);
  if (n != count)
    return kt_fail(err, KT_EINVAL, "%s: unit %d has %llu parameters, the model %zu", path, u,
                   (unsigned long long)count, n);
  memcpy(params + off, rec, n * sizeof(float));
  float *state = kt_runtime_optim_state(rt, stage, d, NULL);
  for (int s = 0; s < per; s++)
    memcpy(state + s * n_params + off, rec + (size_t)(s + 1) * n * sizeof(float), n * sizeof(float));
  return KT_OK;
}

kt_status kt_checkpoint_load(kt_runtime *rt, const char *path, kt_checkpoint_meta *meta,
                             kt_error *err) {
  char *data;
  size_t len;
  kt_status st = kt_read_file(path, &data, &len, err);
  if (st) return st;
  file_header h;
  if ((st = parse_header(data, len, path, &h, err))) goto done;
  header_meta(&h, meta);
  const kt_runtime_config *rc = kt_runtime_config_of(rt);
  if (rc->synthetic || rc->make_chunk) {
    st = kt_fail(err, KT_EINVAL, "%s: a %s model has no units to load", path,
                 rc->synthetic ? "synthetic" : "caller's own");
    goto done;
  }
  if (!same_model(&meta->model, &rc->model)) {
    st = kt_fail(err, KT_EINVAL,
                 "%s: checkpoint is for a %s with %d layers and width %d; this run builds a %s with "
                 "%d layers and width %d",
                 path, kt_model_kind_name(meta->model.kind), meta->model.layers, meta->model.hidden,
                 kt_model_kind_name(rc->model.kind), rc->model.layers, rc->model.hidden);
    goto done;
  }
  int per = state_per_param(rc);
  if ((int)h.state_per_param != per || meta->optim != rc->optim.kind) {
    st = kt_fail(err, KT_EINVAL, "%s: checkpoint has %s optimizer state; this run uses %s", path,
                 kt_optim_name(meta->optim), kt_optim_name(rc->optim.kind));
    goto done;
  }
  size_t trailer = sizeof(uint32_t) + 6;
  if (len < sizeof h + trailer || memcmp(data + len - 6, "KTEND\n", 6)) {
    st = kt_fail(err, KT_EPARSE, "%s: truncated checkpoint (no end marker)", path);
    goto done;
  }
  uint32_t total;
  memcpy(&total, data + len - trailer, sizeof total);
  if (total != kt_crc32(0, data, len - trailer)) {
    st = kt_fail(err, KT_EPARSE, "%s: corrupt checkpoint (checksum mismatch)", path);
    goto done;
  }
  size_t pos = sizeof h;
  int units = kt_model_units(&rc->model);
  for (int u = 0; u < units && !st; u++) {
    uint64_t count;
    uint32_t crc;
    if (pos + 12 > len - trailer) {
      st = kt_fail(err, KT_EPARSE, "%s: truncated at unit %d", path, u);
      break;
    }
    memcpy(&count, data + pos, 8);
    memcpy(&crc, data + pos + 8, 4);
    pos += 12;
    size_t bytes = (size_t)count * sizeof(float) * (size_t)(1 + per);
    if (count > (1ull << 40) || pos + bytes > len - trailer) {
      st = kt_fail(err, KT_EPARSE, "%s: truncated at unit %d", path, u);
      break;
    }
    if (crc != kt_crc32(0, data + pos, bytes)) {
      st = kt_fail(err, KT_EPARSE, "%s: unit %d is corrupt (checksum mismatch)", path, u);
      break;
    }
    for (int d = 0; d < rc->data_parallel && !st; d++)
      st = restore_unit(rt, u, d, per, data + pos, count, path, err);
    pos += bytes;
  }
  /* a tied head shares the embedding: both copies came from the file */
done:
  free(data);
  return st;
}

kt_status kt_checkpoint_save_in_run(kt_runtime *rt, const char *run_dir,
                                    const kt_checkpoint_meta *meta, kt_error *err) {
  char dir[4096], path[4200], latest[4200];
  kt_transport *t = kt_runtime_transport(rt);
  if (!kt_runtime_all_local(rt) && kt_transport_rank(t) != 0) /* rank 0 writes; the others send */
    return kt_checkpoint_save(rt, "", meta, err);
  snprintf(dir, sizeof dir, "%s/checkpoints", run_dir);
  if (mkdir(dir, 0755) != 0 && errno != EEXIST)
    return kt_fail(err, KT_EIO, "cannot create '%s': %s", dir, strerror(errno));
  char name[64];
  snprintf(name, sizeof name, "step_%08d.ckpt", meta->step);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  kt_status st = kt_checkpoint_save(rt, path, meta, err);
  if (st) return st;
  snprintf(latest, sizeof latest, "%s/latest", dir);
  char line[80];
  int n = snprintf(line, sizeof line, "%s\n", name);
  return kt_write_file_atomic(latest, line, (size_t)n, err);
}

kt_status kt_checkpoint_latest(const char *run_dir, char **path, kt_error *err) {
  char dir[4096], buf[4096 + 2 + 256]; /* dir, "/", a d_name */
  snprintf(dir, sizeof dir, "%s/checkpoints", run_dir);
  snprintf(buf, sizeof buf, "%s/latest", dir);
  char *text;
  kt_checkpoint_meta meta;
  kt_error sub;
  if (kt_read_file(buf, &text, NULL, &sub) == KT_OK) {
    text[strcspn(text, "\r\n")] = 0;
    snprintf(buf, sizeof buf, "%s/%s", dir, text);
    free(text);
    if (kt_checkpoint_read_meta(buf, &meta, &sub) == KT_OK) {
      *path = strdup(buf);
      return *path ? KT_OK : kt_fail(err, KT_ENOMEM, "out of memory");
    }
  }
  /* no usable pointer: the newest step_*.ckpt whose header reads */
  DIR *dh = opendir(dir);
  if (!dh) return kt_fail(err, KT_EINVAL, "no checkpoints in '%s' (not a run directory?)", run_dir);
  int best = -1;
  struct dirent *de;
  while ((de = readdir(dh))) {
    int step;
    char tail[8];
    if (sscanf(de->d_name, "step_%d.ckp%1s", &step, tail) != 2 || strlen(de->d_name) != 18) continue;
    snprintf(buf, sizeof buf, "%s/%s", dir, de->d_name);
    if (step > best && kt_checkpoint_read_meta(buf, &meta, &sub) == KT_OK) best = step;
  }
  closedir(dh);
  if (best < 0) return kt_fail(err, KT_EINVAL, "no complete checkpoint in '%s'", dir);
  snprintf(buf, sizeof buf, "%s/step_%08d.ckpt", dir, best);
  *path = strdup(buf);
  return *path ? KT_OK : kt_fail(err, KT_ENOMEM, "out of memory");
}
