/* Checkpoint files: by unit, CRC-checked, written atomically; read from
 * regular files only. The run directory's checkpoints are
 * checkpoint_dir.c. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* Unit u's record from this process's chunk, in a new buffer (*rec, *count
 * parameters); the caller frees it. */
static kt_status local_record(kt_runtime *rt, int u, int per, float **rec, uint64_t *count,
                              kt_error *err) {
  size_t n = 0;
  unit_record(rt, u, per, NULL, &n, err);
  *count = n;
  *rec = malloc((size_t)(1 + per) * n * sizeof(float) + 1);
  if (!*rec) return kt_fail(err, KT_ENOMEM, "out of memory");
  return unit_record(rt, u, per, *rec, &n, err);
}

#define SAVE_TAG (KT_TAG_COLLECTIVE | 0x400)

/* A rank other than world rank 0: sends the units it holds of replica 0,
 * in unit order, as world rank 0 receives them. */
static kt_status send_units(kt_runtime *rt, int units, int per, kt_error *err) {
  kt_transport *t = kt_runtime_transport(rt);
  kt_status st = KT_OK;
  for (int u = 0; u < units && !st; u++) {
    int stage;
    if (!unit_chunk(rt, u, 0, &stage)) continue; /* not mine (or not replica 0) */
    uint64_t count = 0;
    float *rec = NULL;
    st = local_record(rt, u, per, &rec, &count, err);
    if (!st) st = kt_transport_send(t, 0, SAVE_TAG, &count, sizeof count, err);
    if (!st)
      st = kt_transport_send(t, 0, SAVE_TAG + 1, rec, (size_t)(1 + per) * count * sizeof(float),
                             err);
    free(rec);
  }
  return st;
}

/* Unit u's record on world rank 0: its own, or received from the rank that
 * holds it (in another process). */
static kt_status gather_record(kt_runtime *rt, int u, int per, int distributed, float **rec,
                               uint64_t *count, kt_error *err) {
  const kt_runtime_config *rc = kt_runtime_config_of(rt);
  int stage;
  *rec = NULL;
  if (unit_chunk(rt, u, 0, &stage)) return local_record(rt, u, per, rec, count, err);
  if (!distributed) return kt_fail(err, KT_EINVAL, "checkpoint: unit %d is not on this process", u);
  kt_transport *t = kt_runtime_transport(rt);
  int owner = kt_world_rank(kt_stage_rank(rc->schedule, stage), 0, rc->data_parallel);
  kt_status st = kt_transport_recv(t, owner, SAVE_TAG, count, sizeof *count, err);
  if (!st && *count > (1ull << 34))
    st = kt_fail(err, KT_ERUNTIME, "bad checkpoint unit from rank %d", owner);
  if (!st && !(*rec = malloc((size_t)(1 + per) * *count * sizeof(float) + 1)))
    st = kt_fail(err, KT_ENOMEM, "out of memory");
  if (!st)
    st = kt_transport_recv(t, owner, SAVE_TAG + 1, *rec, (size_t)(1 + per) * *count * sizeof(float),
                           err);
  return st;
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
  int distributed = !kt_runtime_all_local(rt);
  if (distributed && kt_transport_rank(kt_runtime_transport(rt)) != 0)
    return send_units(rt, units, per, err);
  kt_status st = KT_OK;
  file_header h;
  fill_header(&h, meta, units, per);
  kt_buf b;
  kt_buf_init(&b);
  kt_buf_append(&b, (const char *)&h, sizeof h);
  for (int u = 0; u < units && !st; u++) {
    uint64_t count = 0;
    float *rec = NULL;
    st = gather_record(rt, u, per, distributed, &rec, &count, err);
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
  if (len < sizeof *h)
    return kt_fail(err, KT_EPARSE, "%s: truncated checkpoint (%zu bytes)", path, len);
  memcpy(h, data, sizeof *h);
  if (h->version != VERSION)
    return kt_fail(err, KT_EPARSE, "%s: checkpoint version %u, this build reads %d", path,
                   h->version, VERSION);
  if (h->header_crc != kt_crc32(0, h, offsetof(file_header, header_crc)))
    return kt_fail(err, KT_EPARSE, "%s: corrupt checkpoint header", path);
  return check_header(h, path, err);
}

/* What a path names when it is not a regular file. */
static const char *file_kind(mode_t m) {
  return S_ISFIFO(m)   ? "a FIFO"
         : S_ISDIR(m)  ? "a directory"
         : S_ISCHR(m)  ? "a character device"
         : S_ISBLK(m)  ? "a block device"
         : S_ISSOCK(m) ? "a socket"
                       : "not a regular file";
}

/* Opens a checkpoint for reading: a regular file only (a FIFO would block
 * the open or the read forever, a device never ends). The open itself
 * does not wait (O_NONBLOCK, cleared once the file is known to be one). */
static kt_status open_checkpoint(const char *path, int *fd_out, uint64_t *size, kt_error *err) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0)
    return kt_fail(err, errno == ENOENT || errno == ENOTDIR || errno == EACCES ? KT_EINVAL : KT_EIO,
                   "cannot open checkpoint '%s': %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    int saved = errno;
    close(fd);
    return kt_fail(err, KT_EIO, "cannot read checkpoint '%s': %s", path, strerror(saved));
  }
  if (!S_ISREG(sb.st_mode)) {
    close(fd);
    return kt_fail(err, KT_EINVAL, "%s: %s, not a checkpoint file", path, file_kind(sb.st_mode));
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  *fd_out = fd;
  *size = (uint64_t)sb.st_size;
  return KT_OK;
}

/* Up to n bytes at off; the count read (short only at the end of the file),
 * or -1 on a read error. */
static ssize_t read_at(int fd, void *buf, size_t n, uint64_t off) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    got += (size_t)r;
  }
  return (ssize_t)got;
}

static kt_status read_error(const char *path, kt_error *err) {
  return kt_fail(err, KT_EIO, "error reading checkpoint '%s': %s", path, strerror(errno));
}

kt_status kt_checkpoint_read_meta(const char *path, kt_checkpoint_meta *out, kt_error *err) {
  int fd = -1;
  uint64_t size = 0;
  kt_status st = open_checkpoint(path, &fd, &size, err);
  if (st) return st;
  char raw[sizeof(file_header)];
  file_header h;
  ssize_t n = read_at(fd, raw, sizeof raw, 0);
  close(fd);
  if (n < 0) return read_error(path, err);
  st = parse_header(raw, (size_t)n, path, &h, err);
  if (st) return st;
  header_meta(&h, out);
  return KT_OK;
}

/* The whole file into memory (what load restores from). */
static kt_status read_checkpoint(const char *path, char **data, size_t *len, kt_error *err) {
  int fd = -1;
  uint64_t size = 0;
  kt_status st = open_checkpoint(path, &fd, &size, err);
  if (st) return st;
  char *buf = size < SIZE_MAX ? malloc((size_t)size + 1) : NULL;
  ssize_t n = buf ? read_at(fd, buf, (size_t)size, 0) : 0;
  int saved = errno;
  close(fd);
  if (!buf) return kt_fail(err, KT_ENOMEM, "out of memory reading checkpoint '%s'", path);
  if (n < 0) {
    free(buf);
    errno = saved;
    return read_error(path, err);
  }
  *data = buf, *len = (size_t)n;
  return KT_OK;
}

#define TRAILER (sizeof(uint32_t) + 6) /* the CRC of all before it, "KTEND\n" */

/* One unit's record of a file being verified, from pos: its count and
 * checksum, then its floats streamed through buf; *total carries the
 * whole file's checksum on. */
static kt_status verify_unit(int fd, int u, int per, uint64_t *pos, uint64_t end, char *buf,
                             size_t cap, uint32_t *total, const char *path, kt_error *err) {
  char head[12];
  uint64_t count;
  uint32_t crc, got = 0;
  if (*pos + sizeof head > end) return kt_fail(err, KT_EPARSE, "%s: truncated at unit %d", path, u);
  if (read_at(fd, head, sizeof head, *pos) != (ssize_t)sizeof head) return read_error(path, err);
  memcpy(&count, head, 8);
  memcpy(&crc, head + 8, 4);
  *total = kt_crc32(*total, head, sizeof head);
  *pos += sizeof head;
  uint64_t left = count * sizeof(float) * (uint64_t)(1 + per);
  if (count > (1ull << 40) || left > end - *pos)
    return kt_fail(err, KT_EPARSE, "%s: truncated at unit %d", path, u);
  while (left > 0) {
    size_t n = left < cap ? (size_t)left : cap;
    if (read_at(fd, buf, n, *pos) != (ssize_t)n) return read_error(path, err);
    got = kt_crc32(got, buf, n);
    *total = kt_crc32(*total, buf, n);
    *pos += n, left -= n;
  }
  if (got != crc)
    return kt_fail(err, KT_EPARSE, "%s: unit %d is corrupt (checksum mismatch)", path, u);
  return KT_OK;
}

/* Every check of kt_checkpoint_verify on an open file of size bytes. */
static kt_status verify_fd(int fd, uint64_t size, const char *path, kt_checkpoint_meta *meta,
                           kt_error *err) {
  char raw[sizeof(file_header)];
  file_header h;
  ssize_t n = read_at(fd, raw, sizeof raw, 0);
  if (n < 0) return read_error(path, err);
  kt_status st = parse_header(raw, (size_t)n, path, &h, err);
  if (st) return st;
  header_meta(&h, meta);
  int units = kt_model_units(&meta->model);
  if (h.units != (uint32_t)units || h.state_per_param > 2)
    return kt_fail(err, KT_EPARSE,
                   "%s: header names %u units and %u optimizer states; its model "
                   "has %d units",
                   path, h.units, h.state_per_param, units);
  char end[TRAILER];
  if (size < sizeof h + TRAILER) return kt_fail(err, KT_EPARSE, "%s: truncated checkpoint", path);
  if (read_at(fd, end, TRAILER, size - TRAILER) != (ssize_t)TRAILER) return read_error(path, err);
  if (memcmp(end + 4, "KTEND\n", 6))
    return kt_fail(err, KT_EPARSE, "%s: truncated checkpoint (no end marker)", path);
  size_t cap = 1 << 20;
  char *buf = malloc(cap);
  if (!buf) return kt_fail(err, KT_ENOMEM, "out of memory verifying checkpoint '%s'", path);
  uint32_t total = kt_crc32(0, raw, sizeof raw), want;
  uint64_t pos = sizeof h;
  for (int u = 0; u < units && !st; u++)
    st = verify_unit(fd, u, (int)h.state_per_param, &pos, size - TRAILER, buf, cap, &total, path,
                     err);
  free(buf);
  if (st) return st;
  if (pos != size - TRAILER)
    return kt_fail(err, KT_EPARSE, "%s: %llu bytes after its last unit", path,
                   (unsigned long long)(size - TRAILER - pos));
  memcpy(&want, end, sizeof want);
  if (want != total)
    return kt_fail(err, KT_EPARSE, "%s: corrupt checkpoint (checksum mismatch)", path);
  return KT_OK;
}

kt_status kt_checkpoint_verify(const char *path, kt_checkpoint_meta *meta, kt_error *err) {
  int fd = -1;
  uint64_t size = 0;
  kt_status st = open_checkpoint(path, &fd, &size, err);
  if (st) return st;
  st = verify_fd(fd, size, path, meta, err);
  close(fd);
  return st;
}

static int same_model(const kt_model_config *a, const kt_model_config *b) {
  return a->kind == b->kind && a->layers == b->layers && a->hidden == b->hidden &&
         (a->kind != KT_MODEL_GPT ||
          (a->heads == b->heads && a->seq_len == b->seq_len && a->vocab == b->vocab &&
           a->tie_embeddings == b->tie_embeddings));
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
    memcpy(state + s * n_params + off, rec + (size_t)(s + 1) * n * sizeof(float),
           n * sizeof(float));
  return KT_OK;
}

/* Whether a checkpoint (its header h, read as meta) can restore into this
 * runtime: a model of units, the same model, the same optimizer state. */
static kt_status check_fits(const kt_runtime *rt, const file_header *h,
                            const kt_checkpoint_meta *meta, const char *path, kt_error *err) {
  const kt_runtime_config *rc = kt_runtime_config_of(rt);
  if (rc->synthetic || rc->make_chunk)
    return kt_fail(err, KT_EINVAL, "%s: a %s model has no units to load", path,
                   rc->synthetic ? "synthetic" : "caller's own");
  if (!same_model(&meta->model, &rc->model))
    return kt_fail(err, KT_EINVAL,
                   "%s: checkpoint is for a %s with %d layers and width %d; this run builds a %s "
                   "with %d layers and width %d",
                   path, kt_model_kind_name(meta->model.kind), meta->model.layers,
                   meta->model.hidden, kt_model_kind_name(rc->model.kind), rc->model.layers,
                   rc->model.hidden);
  if ((int)h->state_per_param != state_per_param(rc) || meta->optim != rc->optim.kind)
    return kt_fail(err, KT_EINVAL, "%s: checkpoint has %s optimizer state; this run uses %s", path,
                   kt_optim_name(meta->optim), kt_optim_name(rc->optim.kind));
  return KT_OK;
}

/* The file's end marker and its checksum over all before the trailer. */
static kt_status check_trailer(const char *data, size_t len, const char *path, kt_error *err) {
  if (len < sizeof(file_header) + TRAILER || memcmp(data + len - 6, "KTEND\n", 6))
    return kt_fail(err, KT_EPARSE, "%s: truncated checkpoint (no end marker)", path);
  uint32_t total;
  memcpy(&total, data + len - TRAILER, sizeof total);
  if (total != kt_crc32(0, data, len - TRAILER))
    return kt_fail(err, KT_EPARSE, "%s: corrupt checkpoint (checksum mismatch)", path);
  return KT_OK;
}

/* Every unit's record, checked, into every replica this process holds. */
static kt_status restore_units(kt_runtime *rt, const char *data, size_t len, int per,
                               const char *path, kt_error *err) {
  const kt_runtime_config *rc = kt_runtime_config_of(rt);
  size_t pos = sizeof(file_header), end = len - TRAILER;
  int units = kt_model_units(&rc->model);
  kt_status st = KT_OK;
  for (int u = 0; u < units && !st; u++) {
    uint64_t count;
    uint32_t crc;
    if (pos + 12 > end) return kt_fail(err, KT_EPARSE, "%s: truncated at unit %d", path, u);
    memcpy(&count, data + pos, 8);
    memcpy(&crc, data + pos + 8, 4);
    pos += 12;
    size_t bytes = (size_t)count * sizeof(float) * (size_t)(1 + per);
    if (count > (1ull << 40) || pos + bytes > end)
      return kt_fail(err, KT_EPARSE, "%s: truncated at unit %d", path, u);
    if (crc != kt_crc32(0, data + pos, bytes))
      return kt_fail(err, KT_EPARSE, "%s: unit %d is corrupt (checksum mismatch)", path, u);
    for (int d = 0; d < rc->data_parallel && !st; d++)
      st = restore_unit(rt, u, d, per, data + pos, count, path, err);
    pos += bytes;
  }
  /* a tied head shares the embedding: both copies came from the file */
  return st;
}

kt_status kt_checkpoint_load(kt_runtime *rt, const char *path, kt_checkpoint_meta *meta,
                             kt_error *err) {
  char *data = NULL;
  size_t len = 0;
  kt_status st = read_checkpoint(path, &data, &len, err);
  if (st) return st;
  file_header h;
  st = parse_header(data, len, path, &h, err);
  if (!st) {
    header_meta(&h, meta);
    st = check_fits(rt, &h, meta, path, err);
  }
  if (!st) st = check_trailer(data, len, path, err);
  if (!st) st = restore_units(rt, data, len, state_per_param(kt_runtime_config_of(rt)), path, err);
  free(data);
  return st;
}
