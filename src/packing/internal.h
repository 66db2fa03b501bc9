/* Internal to src/packing/. */
#ifndef KAITEN_PACKING_INTERNAL_H
#define KAITEN_PACKING_INTERNAL_H

#include "kaiten/packing.h"
#include "kaiten/sim.h"

#endif
