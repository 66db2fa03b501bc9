/* Fuzz target: checkpoint files, read as `kaiten train --resume` and
 * `kaiten sample` do: the header (kt_checkpoint_read_meta) and the whole
 * file (kt_checkpoint_verify, which kt_checkpoint_find runs on every
 * candidate). Each input is read as given, with its header checksum made
 * right, and with every checksum made right (the header's, each unit's
 * as the file's counts lay them out, the file's, and the end marker), as
 * a crafted file would have them, so that the values and the layout
 * behind the checksums get explored too. A header that reads must
 * describe a model and optimizer this build can create; a file that
 * verifies must have read its header the same way. */
#include <math.h>

#include "fuzz_common.h"
#include "kaiten/checkpoint.h"

/* Bytes the header checksum covers, and where it is stored: the file_header
 * layout in src/train/checkpoint.c. */
#define HEADER_CRC_AT 96
#define HEADER_SIZE 104 /* sizeof(file_header) */
#define TRAILER 10      /* the file's CRC, "KTEND\n" */

static void read_header(const uint8_t *data, size_t size) {
  const char *path = fuzz_temp_file(data, size);
  kt_checkpoint_meta meta, whole;
  kt_error err;
  kt_status verified = kt_checkpoint_verify(path, &whole, &err);
  if (kt_checkpoint_read_meta(path, &meta, &err) != KT_OK) {
    if (verified == KT_OK) {
      fprintf(stderr, "a file verified whose header does not read\n");
      abort();
    }
    return;
  }
  if (verified == KT_OK && (whole.step != meta.step || whole.model.hidden != meta.model.hidden ||
                            whole.model.layers != meta.model.layers)) {
    fprintf(stderr, "verify and read_meta disagree on the header\n");
    abort();
  }
  if ((unsigned)meta.model.kind >= KT_MODEL_COUNT || (unsigned)meta.optim >= KT_OPTIM_COUNT ||
      meta.step < 0 || meta.decay_steps < 0 || meta.warmup_steps < 0 ||
      !(isfinite(meta.lr) && meta.lr >= 0) || !(meta.min_lr_ratio >= 0 && meta.min_lr_ratio <= 1) ||
      kt_model_config_check(&meta.model, &err) != KT_OK) {
    fprintf(stderr, "checkpoint header accepted with an impossible model or optimizer\n");
    abort();
  }
}

/* Every unit's checksum as the file's counts lay the units out, then the
 * file's checksum and the end marker (the header's is already right). */
static void fix_units(uint8_t *d, size_t size) {
  uint32_t per;
  memcpy(&per, d + HEADER_CRC_AT - 4, sizeof per);
  size_t pos = HEADER_SIZE, end = size - TRAILER;
  while (pos + 12 <= end) {
    uint64_t count;
    memcpy(&count, d + pos, sizeof count);
    if (per > 2 || count > (end - pos - 12) / 4 / (1 + per)) break;
    size_t bytes = (size_t)count * 4 * (1 + per);
    uint32_t crc = kt_crc32(0, d + pos + 12, bytes);
    memcpy(d + pos + 8, &crc, sizeof crc);
    pos += 12 + bytes;
  }
  uint32_t total = kt_crc32(0, d, end);
  memcpy(d + end, &total, sizeof total);
  memcpy(d + end + 4, "KTEND\n", 6);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  read_header(data, size);
  if (size >= HEADER_CRC_AT + 4) {
    uint8_t *fixed = malloc(size);
    if (!fixed) abort();
    memcpy(fixed, data, size);
    uint32_t crc = kt_crc32(0, fixed, HEADER_CRC_AT);
    memcpy(fixed + HEADER_CRC_AT, &crc, sizeof crc);
    read_header(fixed, size);
    if (size >= HEADER_SIZE + TRAILER) {
      fix_units(fixed, size);
      read_header(fixed, size);
    }
    free(fixed);
  }
  return 0;
}
