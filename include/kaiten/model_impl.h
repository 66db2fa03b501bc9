/* kaiten model: the interface for implementations of a chunk (src/nn's
 * MLP and GPT, the runtime's synthetic workload and empty slots). Users of
 * a chunk include kaiten/model.h and call its functions; only a chunk's
 * implementation reads or writes these fields. */
#ifndef KAITEN_MODEL_IMPL_H
#define KAITEN_MODEL_IMPL_H

#include "kaiten/model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  /* in: the previous stage's output (NULL on the first stage, which reads
   * data); out: this chunk's output (NULL on the last stage, which writes the
   * micro-batch's mean loss to *loss). */
  kt_status (*forward)(kt_chunk *c, int mb, const kt_microbatch *data, const float *in, float *out,
                       double *loss, kt_error *err);
  /* dout: gradient of the output (NULL on the last stage: the loss gradient is
   * computed from the stash); din: gradient of the input, written (NULL on
   * the first stage: nothing upstream). */
  kt_status (*backward_input)(kt_chunk *c, int mb, const kt_microbatch *data, const float *dout,
                              float *din, kt_error *err);
  kt_status (*backward_weight)(kt_chunk *c, int mb, kt_error *err);
  void (*destroy)(kt_chunk *c);
  /* A full B, the same results as backward_input then backward_weight bit
   * for bit, in whatever order runs fastest; NULL: those two in turn. */
  kt_status (*backward)(kt_chunk *c, int mb, const kt_microbatch *data, const float *dout,
                        float *din, kt_error *err);
} kt_chunk_ops;

struct kt_chunk {
  const kt_chunk_ops *ops;
  kt_model_config cfg;
  int first_unit, n_units;    /* units [first_unit, first_unit + n_units) */
  int is_first, is_last;      /* holds the model input / the loss */
  int micro_batch;            /* b: samples per micro-batch */
  int n_microbatches;         /* M: stash slots are keyed by 0..M-1 */
  size_t in_elems, out_elems; /* boundary activation floats per micro-batch */
  float *params, *grads;      /* flat, n_params each */
  size_t n_params;
  size_t *unit_offset; /* n_units + 1 offsets into params */
  /* Tied LM head (GPT with tie_embeddings): the chunk's copy of the token
   * embedding, and its gradient; NULL when this chunk holds none. When the
   * first and last unit are in different chunks the runtime sums the two
   * gradients before the optimizer step, so the copies stay identical.
   * GPT keeps both copies inside params (unit 0's wte, unit L+1's head), so
   * checkpoints by unit stay whole; a chunk holding both units points tied at
   * wte and gives the two copies the same summed gradient itself (the
   * runtime must not add it twice). */
  float *tied, *tied_grad;
  size_t tied_elems;
  size_t stash_bytes;      /* activation memory held now */
  size_t peak_stash_bytes; /* max since creation or the last reset */
  /* kt_chunk_create_sizes_only: F, I and W take and free their stash as
   * they would, and compute nothing */
  int sizes_only;
  /* src/nn's chunks only (kt_chunk_create sets them; other implementations
   * leave them zero): the matmuls' library and the rank's compute threads */
  kt_gemm_choice gemm;
  void *pool;
  void *impl;
};

#ifdef __cplusplus
}
#endif

#endif
