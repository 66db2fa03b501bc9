/* kaiten data: byte-level text for the GPT model.
 *
 * A dataset is a text (any file, or the built-in corpus) split into a
 * training part and a held-out validation tail. Tokens are bytes (vocabulary
 * 256). Training samples are length-T windows (tokens, and targets = the
 * next byte) drawn in a shuffled order that is a pure function of
 * (seed, step, replica, micro-batch): resuming at step s gives exactly the
 * batches an uninterrupted run would have seen, and data-parallel replicas
 * each read their own shard of the step's global batch.
 *
 * Sampling: the training windows start at offset o_e + w T (w = 0..W-1, W =
 * train_bytes / T - 1); epoch e draws o_e in [0, T) and a permutation of the
 * W windows from the seed, so every epoch sees every window once with shifted
 * boundaries. Sample i of micro-batch j of replica d at step s is number
 *   n = ((s * replicas + d) * micro_batches + j) * micro_batch + i
 * in that endless sequence of epochs. */
#ifndef KAITEN_DATA_H
#define KAITEN_DATA_H

#include <stdint.h>

#include "kaiten/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KT_DATA_VOCAB 256             /* byte-level tokens */
#define KT_DATA_VAL_FRACTION 0.1      /* default held-out share (the text's tail) */
#define KT_DATA_BUILTIN_BYTES 1048576 /* size of the generated built-in corpus */

typedef struct kt_dataset kt_dataset;

typedef enum { KT_SPLIT_TRAIN, KT_SPLIT_VAL } kt_split;

/* Opens a text file as a dataset; path NULL (or "builtin") opens the built-in
 * corpus. val_fraction in [0, 0.5] of the bytes (the tail) is held out.
 * EINVAL for a bad fraction or an empty file, EIO when unreadable, ENOMEM. */
kt_status kt_dataset_create(const char *path, double val_fraction, kt_dataset **out, kt_error *err);
/* The same from bytes in memory (copied); name is for messages. */
kt_status kt_dataset_from_bytes(const void *bytes, size_t len, const char *name,
                                double val_fraction, kt_dataset **out, kt_error *err);
void kt_dataset_destroy(kt_dataset *d);

const char *kt_dataset_name(const kt_dataset *d); /* "builtin" or the path */
size_t kt_dataset_bytes(const kt_dataset *d, kt_split split);
/* The split's text (not NUL-terminated). */
const unsigned char *kt_dataset_text(const kt_dataset *d, kt_split split);
/* 64-bit fingerprint of the whole text and split point (FNV-1a), so a
 * checkpoint can refuse to resume on different data. */
uint64_t kt_dataset_fingerprint(const kt_dataset *d);

/* How a training loop cuts its batches. */
typedef struct {
  int seq_len;       /* T */
  int micro_batch;   /* b: sequences per micro-batch */
  int micro_batches; /* per replica per optimizer step (M, or M * K with accumulation) */
  int replicas;      /* data-parallel replicas (1 without data parallelism) */
  uint64_t seed;     /* shuffle seed */
} kt_batch_spec;

/* Training windows per epoch (0 when the training text is shorter than 2T). */
uint64_t kt_data_train_windows(const kt_dataset *d, int seq_len);

/* Fills tokens and targets (micro_batch * seq_len ints each, row-major
 * (b, T)) with micro-batch mb of replica `replica` at optimizer step `step`.
 * A pure function of its arguments. EINVAL for out-of-range arguments or a
 * training text shorter than 2T (naming the sizes). */
kt_status kt_data_train_batch(const kt_dataset *d, const kt_batch_spec *spec, int64_t step,
                              int replica, int mb, int *tokens, int *targets, kt_error *err);

/* Validation micro-batches of b sequences: consecutive windows of the held-
 * out tail (wrapping when it holds fewer than b). 0 when the tail is shorter
 * than T + 1 bytes. */
int kt_data_val_batches(const kt_dataset *d, int seq_len, int micro_batch);
/* Fills validation micro-batch index (0 .. kt_data_val_batches - 1). EINVAL
 * when out of range. */
kt_status kt_data_val_batch(const kt_dataset *d, int seq_len, int micro_batch, int index,
                            int *tokens, int *targets, kt_error *err);

/* The built-in corpus: short scenes at a kaiten-zushi bar generated from a
 * small grammar and lexicon (no external text, no download), the same bytes
 * on every machine. *out is malloc'd and NUL-terminated. ENOMEM. */
kt_status kt_data_builtin_text(char **out, size_t *len, kt_error *err);

/* Bytes <-> tokens for prompts and generated text. */
void kt_data_encode(const char *text, size_t len, int *tokens);
/* Writes len bytes (tokens outside 0..255 become '?'); out needs len + 1. */
void kt_data_decode(const int *tokens, size_t len, char *out);

#ifdef __cplusplus
}
#endif

#endif
