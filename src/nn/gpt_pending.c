/* GPT chunk: implemented in src/nn/gpt*.c by the transformer work. */
#include "nn/nn.h"

kt_status kt__gpt_chunk_create(const kt_model_config *cfg, int first_unit, int n_units,
                               int micro_batch, int n_microbatches, kt_chunk **out, kt_error *err) {
  (void)cfg; (void)first_unit; (void)n_units; (void)micro_batch; (void)n_microbatches;
  *out = NULL;
  return kt_fail(err, KT_EINVAL, "the gpt model is not in this build yet");
}
