/* Internal to src/train/: document lengths and their packing into
 * micro-batches (the seam the schedule's packing library replaces: the
 * spec parser, the length generator, fifo and balanced assignment and
 * the order of the micro-batches all live in doc_packing.c).
 * Legend: L = a document's tokens, n = documents, M = micro-batches. */
#ifndef KAITEN_TRAIN_DOC_PACKING_H
#define KAITEN_TRAIN_DOC_PACKING_H

#include <stdint.h>

#include "kaiten/core.h"

/* lognormal:SIGMA:MIN:MAX: L = clamp(round(exp(mu + SIGMA z)), MIN, MAX)
 * with z standard normal and mu = (ln MIN + ln MAX) / 2 (the median halfway
 * between the bounds on a log scale). */
typedef struct {
  double sigma;
  int min, max;
} kt__doc_spec;

typedef enum { KT__PACK_FIFO, KT__PACK_BALANCED, KT__PACK_COUNT } kt__packing;

/* EINVAL naming the bad value ("--doc-lengths ..."). */
kt_status kt__doc_spec_parse(const char *text, kt__doc_spec *out, kt_error *err);
/* "fifo" | "balanced" -> the packing; -1 when unknown. */
int kt__packing_from_name(const char *name);
const char *kt__packing_name(kt__packing p);

/* The next 64 random bits of a generator state (splitmix64). */
uint64_t kt__doc_rand(uint64_t *state);
/* The next length from a generator state. */
int kt__doc_length_draw(const kt__doc_spec *s, uint64_t *state);

/* Assigns documents len[0..n) to M micro-batches of `budget` tokens each:
 * mb_of[i] receives the micro-batch of document i, or -1 when it is left
 * out. fifo fills the micro-batches in data order (a document that does not
 * fit in the current one starts the next); balanced takes the documents
 * fifo would have used and assigns them longest first to the micro-batch
 * with the least work (cost L + L^2 / attn_tokens) that has room.
 * order[0..M) receives the order the micro-batches run in (fifo: as
 * filled; balanced: the heaviest first). Returns the documents assigned. */
int kt__pack(kt__packing how, const int *len, int n, int M, int budget, double attn_tokens,
             int *mb_of, int *order);

#endif
