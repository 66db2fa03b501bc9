/* Documents packed into a request's micro-batches: the settings
 * (doc-lengths, seed, packing, mb-tokens, attn-share), their text, and the
 * packing a build runs before it generates (kaiten/packing.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "request/internal.h"

#define ECHO_LEN 40

void kt__request_packing_init(kt_request *rq) {
  rq->seed = 1;
  rq->packing = KT_PACK_FIFO;
  rq->tokens = (kt_token_model){.budget = 1024, .attn = 0.25};
}

kt_status kt__request_set_packing(kt_request *rq, int field, const char *key, const char *val,
                                  kt_error *err) {
  long x;
  double d;
  int k;
  switch (field) {
    case KT__REQ_DOC_LENGTHS: {
      kt_error e = {{0}};
      if (!kt_doc_lengths_parse(val, &rq->doc_lengths, &e)) return KT_OK;
      /* its message names the spec as "doc-lengths '...'": say the key as given */
      const char *rest = strncmp(e.msg, "doc-lengths", 11) ? e.msg : e.msg + 11;
      return kt_fail(err, KT_EINVAL, "%s%s%s", key, rest == e.msg ? ": " : "", rest);
    }
    case KT__REQ_SEED:
      if (kt_parse_int(val, 0, 2147483647L, &x))
        return kt_fail(err, KT_EINVAL, "%s '%.*s': expected an integer in 0..2147483647", key,
                       ECHO_LEN, val);
      rq->seed = (uint64_t)x;
      return KT_OK;
    case KT__REQ_PACKING:
      if ((k = kt_packing_from_name(val)) < 0)
        return kt_fail(err, KT_EINVAL, "%s '%.*s': expected fifo or balanced", key, ECHO_LEN, val);
      rq->packing = (kt_packing)k;
      return KT_OK;
    case KT__REQ_MB_TOKENS:
      if (kt_parse_int(val, 1, 1L << 26, &x))
        return kt_fail(err, KT_EINVAL, "%s '%.*s': expected a token count in 1..%ld", key, ECHO_LEN,
                       val, 1L << 26);
      rq->tokens.budget = (int)x;
      return KT_OK;
    default:
      if (kt_parse_double(val, &d) || !(d >= 0 && d <= 1))
        return kt_fail(err, KT_EINVAL, "%s '%.*s': expected a fraction in 0..1", key, ECHO_LEN,
                       val);
      rq->tokens.attn = d;
      return KT_OK;
  }
}

void kt__request_print_packing(const kt_request *rq, kt_buf *b) {
  kt_request d;
  kt_request_init(&d);
  if (rq->doc_lengths.max > 0)
    kt_buf_printf(b, " doc-lengths=lognormal:%.17g:%d:%d", rq->doc_lengths.sigma,
                  rq->doc_lengths.min, rq->doc_lengths.max);
  if (rq->seed != d.seed) kt_buf_printf(b, " seed=%llu", (unsigned long long)rq->seed);
  if (rq->packing != d.packing) kt_buf_printf(b, " packing=%s", kt_packing_name(rq->packing));
  if (rq->tokens.budget != d.tokens.budget) kt_buf_printf(b, " mb-tokens=%d", rq->tokens.budget);
  if (rq->tokens.attn != d.tokens.attn) kt_buf_printf(b, " attn-share=%.17g", rq->tokens.attn);
  kt_request_free(&d);
}

/* Enough documents for m full micro-batches whatever their lengths. */
static int documents_needed(const kt_request *rq) {
  double n = (double)rq->m * ((double)rq->tokens.budget / rq->doc_lengths.min + 1);
  return n > 1e7 ? 10000000 : (int)n;
}

/* Balanced's order of pk for kind (stage costs base, generation pp), then
 * base turned into pk's per-micro-batch costs (S stages). */
static kt_status order_and_cost(const kt_request *rq, kt_gen_kind kind, int S,
                                const kt_gen_params *pp, kt_pack *pk, kt_costs *base,
                                kt_error *err) {
  kt_status st = KT_OK;
  if (rq->packing == KT_PACK_BALANCED)
    st = kt_pack_order(pk, &rq->tokens, base, kind, pp, KT_PACK_ORDER_EVALS, err);
  kt_costs packed;
  if (!st) st = kt_pack_costs(pk, &rq->tokens, base, S, &packed, err);
  if (st) return st;
  kt_costs_free(base);
  *base = packed;
  return KT_OK;
}

kt_status kt__request_pack(const kt_request *rq, kt_gen_kind kind, int S, const kt_gen_params *pp,
                           kt_result *res, kt_error *err) {
  if (rq->doc_lengths.max <= 0) return KT_OK;
  if (rq->doc_lengths.max > rq->tokens.budget)
    return kt_fail(err, KT_EINVAL,
                   "doc-lengths: documents of up to %d tokens do not fit a "
                   "micro-batch of mb-tokens=%d",
                   rq->doc_lengths.max, rq->tokens.budget);
  int n = documents_needed(rq);
  int *len = malloc(sizeof(int) * (size_t)n);
  if (!len) return kt_fail(err, KT_ENOMEM, "out of memory for %d documents", n);
  kt_doc_lengths_sample(&rq->doc_lengths, rq->seed, n, len);
  kt_status st = kt_pack_documents(len, n, rq->m, &rq->tokens, rq->packing, &res->pack, err);
  free(len);
  if (!st && kt_costs_copy(&res->stage_costs, &res->costs)) {
    kt_pack_free(&res->pack);
    st = kt_fail(err, KT_ENOMEM, "out of memory");
  }
  if (st) return st;
  res->packed = 1;
  if ((st = order_and_cost(rq, kind, S, pp, &res->pack, &res->costs, err))) return st;
  res->step_tokens = 0;
  for (int k = 0; k < res->pack.m; k++) res->step_tokens += res->pack.tokens[k];
  return KT_OK;
}

kt_status kt_request_pack(const kt_request *rq, const int *len, const double *sq, int n, int given,
                          kt_pack *out, kt_error *err) {
  memset(out, 0, sizeof *out);
  int k = kt_gen_kind_from_name(rq->schedule);
  if (k < 0)
    return kt_fail(err, KT_EINVAL,
                   "schedule '%s': packing orders micro-batches for a generator "
                   "(%s)",
                   rq->schedule, kt_gen_kind_list());
  int v = rq->v > 0 ? rq->v : kt_gen_default_chunks((kt_gen_kind)k);
  kt_status st = given ? kt_pack_given(len, sq, n, out, err)
                       : kt_pack_documents(len, n, rq->m, &rq->tokens, rq->packing, out, err);
  if (st) return st;
  out->how = rq->packing;
  kt_costs base;
  st = kt__request_layout_costs(rq, rq->p, v, kt_gen_kind_placement((kt_gen_kind)k), &base, err);
  if (st) {
    kt_pack_free(out);
    return st;
  }
  double limit = kt_mem_limit_units(&rq->mem_limit, (kt_gen_kind)k, rq->p, out->m, rq->v, &base);
  kt_gen_params pp = {.p = rq->p,
                      .m = out->m,
                      .v = rq->v,
                      .mem_limit = limit > 0 ? limit : 0,
                      .quick = rq->effort == KT_EFFORT_QUICK,
                      .thorough = rq->effort == KT_EFFORT_THOROUGH};
  st = order_and_cost(rq, (kt_gen_kind)k, rq->p * v, &pp, out, &base, err);
  kt_costs_free(&base);
  if (st) kt_pack_free(out);
  return st;
}
