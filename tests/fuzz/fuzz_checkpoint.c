/* Fuzz target: checkpoint headers, read from a file as `kaiten train
 * --resume` and `kaiten sample` do. Each input is read twice: as given, and
 * with its header checksum made right, as a crafted file would have it, so
 * that the values behind the checksum get explored too. A header that
 * reads must describe a model and optimizer this build can create. */
#include <math.h>

#include "fuzz_common.h"
#include "kaiten/checkpoint.h"

/* Bytes the header checksum covers, and where it is stored: the file_header
 * layout in src/train/checkpoint.c. */
#define HEADER_CRC_AT 96

static void read_header(const uint8_t *data, size_t size) {
  const char *path = fuzz_temp_file(data, size);
  kt_checkpoint_meta meta;
  kt_error err;
  if (kt_checkpoint_read_meta(path, &meta, &err) != KT_OK) return;
  if ((unsigned)meta.model.kind >= KT_MODEL_COUNT || (unsigned)meta.optim >= KT_OPTIM_COUNT ||
      meta.step < 0 || meta.decay_steps < 0 || meta.warmup_steps < 0 ||
      !(isfinite(meta.lr) && meta.lr >= 0) || !(meta.min_lr_ratio >= 0 && meta.min_lr_ratio <= 1) ||
      kt_model_config_check(&meta.model, &err) != KT_OK) {
    fprintf(stderr, "checkpoint header accepted with an impossible model or optimizer\n");
    abort();
  }
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
    free(fixed);
  }
  return 0;
}
