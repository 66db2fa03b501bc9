/* The request module's pieces (src/request). */
#ifndef KAITEN_REQUEST_INTERNAL_H
#define KAITEN_REQUEST_INTERNAL_H

#include "kaiten/request.h"

/* Refuses a layout too large to simulate here before building it, at
 * bytes_per_action on the path that will run (KT_SIM_BYTES_*): EINVAL with
 * the memory it would need. */
kt_status kt__request_size_check(int p, int v, int m, double bytes_per_action, kt_error *err);
/* Fills res->info from what res holds (nothing here simulates or searches,
 * nor walks the order's actions). */
void kt__result_describe(kt_result *res);

/* The stage costs (cost basis, slow rank) of a P, V layout in placement pl. */
kt_status kt__request_layout_costs(const kt_request *rq, int p, int v, kt_placement pl,
                                   kt_costs *out, kt_error *err);

/* ---- documents packed into the micro-batches (packing.c) ---- */
enum { KT__REQ_DOC_LENGTHS, KT__REQ_SEED, KT__REQ_PACKING, KT__REQ_MB_TOKENS, KT__REQ_ATTN_SHARE };
/* The defaults: seed 1, fifo, 1024 tokens, attn-share 0.25, no documents. */
void kt__request_packing_init(kt_request *rq);
/* One of the settings above (field). EINVAL naming key and value. */
kt_status kt__request_set_packing(kt_request *rq, int field, const char *key, const char *val,
                                  kt_error *err);
/* " doc-lengths=... seed=..." for those not at their defaults. */
void kt__request_print_packing(const kt_request *rq, kt_buf *b);
/* With doc-lengths: packs the step's documents into rq->m micro-batches
 * (balanced: and orders them for kind under pp), and turns res->costs (the
 * S stage costs of a full micro-batch) into the packing's per-micro-batch
 * costs (res->pack, res->step_tokens). Nothing without. */
kt_status kt__request_pack(const kt_request *rq, kt_gen_kind kind, int S, const kt_gen_params *pp,
                           kt_result *res, kt_error *err);

#endif
