/* The request module's pieces (src/request). */
#ifndef KAITEN_REQUEST_INTERNAL_H
#define KAITEN_REQUEST_INTERNAL_H

#include "kaiten/request.h"

/* Refuses a layout too large to simulate here before building it: EINVAL
 * with the memory it would need. */
kt_status kt__request_size_check(int p, int v, int m, kt_error *err);
/* Fills res->info from what res holds (nothing here simulates or searches). */
void kt__result_describe(kt_result *res);

#endif
