/* Internal to src/packing/. */
#ifndef KAITEN_PACKING_INTERNAL_H
#define KAITEN_PACKING_INTERNAL_H

#include "kaiten/packing.h"
#include "kaiten/sim.h"

/* (1 - attn) * tokens / budget + attn * sq / budget^2: a micro-batch's
 * multiple of the stage costs. */
double kt__pack_load(const kt_token_model *tm, double tokens, double sq);

#endif
