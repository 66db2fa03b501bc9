/* kaiten packing: documents of varying length into micro-batches, and the
 * order the pipeline runs them in.
 *
 * A step takes documents in data order; each micro-batch holds at most a
 * token budget (what the memory limit allows one micro-batch). `fifo`
 * fills micro-batches in data order, closing one when the next document
 * does not fit. `balanced` takes the same documents, assigns them
 * longest-first to the micro-batch with the least cost so far that has
 * room (LPT), and orders the micro-batches so that the simulated step is
 * shortest within the memory limit. A micro-batch's cost comes from its
 * tokens and the squares of its documents' lengths (attention is
 * block-diagonal: no document attends to another), so a micro-batch of
 * one long document costs more than one of many short ones with as many
 * tokens. Synthetic document sets come from "lognormal:SIGMA:MIN:MAX" and
 * a seed (the one reader and generator of that spec in kaiten).
 */
#ifndef KAITEN_PACKING_H
#define KAITEN_PACKING_H

#include <stdint.h>

#include "kaiten/costs.h"
#include "kaiten/generators.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- synthetic documents ------------------------------------------------------ */

/* "lognormal:SIGMA:MIN:MAX": token lengths exp(mu + SIGMA * z), z standard
 * normal, mu the log of the geometric mean of MIN and MAX (the median
 * length), clamped to MIN..MAX. */
typedef struct {
  double sigma;
  int min, max;
} kt_doc_lengths;

/* Parses the spec (1 <= MIN <= MAX <= 1,048,576, 0 <= SIGMA <= 16). EINVAL
 * naming the bad part. */
kt_status kt_doc_lengths_parse(const char *text, kt_doc_lengths *out, kt_error *err);
/* n lengths into len, the same for the same spec and seed on every
 * platform (splitmix64 and Box-Muller). */
void kt_doc_lengths_sample(const kt_doc_lengths *spec, uint64_t seed, int n, int *len);

/* ---- packing ------------------------------------------------------------------ */

typedef enum { KT_PACK_FIFO, KT_PACK_BALANCED, KT_PACK_COUNT } kt_packing;
/* "fifo", "balanced"; "?" out of range. */
const char *kt_packing_name(kt_packing p);
/* The value named, or -1. */
int kt_packing_from_name(const char *name);

/* What a micro-batch costs on every stage, from its tokens L1 and the sum of
 * its documents' squared lengths L2: base * ((1 - attn) * L1 / budget +
 * attn * L2 / budget^2) for T_F, T_B and T_W (base: the costs' stage
 * values, those of a micro-batch holding one document of budget tokens);
 * M_B and M_W: base * L1 / budget. */
typedef struct {
  int budget;  /* tokens per micro-batch at most */
  double attn; /* the share of a one-document full micro-batch's time that grows with the
                  square of its length (0..1) */
} kt_token_model;

/* A step's packing. Micro-batch k (in run order) holds tokens[k] tokens,
 * sq[k] = the sum of its documents' squared lengths, and its documents
 * are doc_of[first[k] .. first[k+1]-1] (indices into the documents). */
typedef struct {
  kt_packing how; /* kt_pack_given: fifo (the lengths' own order) */
  int m;          /* micro-batches */
  int n_docs;     /* documents of the step (a prefix of those given) */
  int *tokens;    /* [m] */
  double *sq;     /* [m] */
  int *first;     /* [m + 1] */
  int *doc_of;    /* [n_docs] */
  int *order;     /* [m]: the packed micro-batch run k-th (balanced's order; fifo: k) */
  int left_out;   /* documents of the step no micro-batch had room for (balanced) */
  double period;  /* the simulated step of the order (0: not simulated) */
} kt_pack;

/* Packs documents len[0..n-1] (data order) into m micro-batches of at most
 * model->budget tokens: fifo fills them in order and the step ends when m
 * are full or the documents run out; balanced packs that same prefix
 * (longest first onto the cheapest micro-batch with room; a document no
 * micro-batch has room for is left out, counted in left_out). The order is
 * the packing's own (no search). A document longer than the budget is
 * EINVAL naming it; ENOMEM. */
kt_status kt_pack_documents(const int *len, int n, int m, const kt_token_model *model,
                            kt_packing how, kt_pack *out, kt_error *err);
/* Packs micro-batches given by their lengths alone (one document each, or
 * pre-packed sequences): tokens[k] = len[k], sq[k] = len[k]^2 (or sq[k]
 * given). */
kt_status kt_pack_given(const int *len, const double *sq, int m, kt_pack *out, kt_error *err);
void kt_pack_free(kt_pack *pk);
/* The cost of the micro-batch run k-th as a multiple of the stage costs
 * (kt_token_model: a micro-batch of one budget-long document is 1). */
double kt_pack_load(const kt_pack *pk, const kt_token_model *model, int k);

/* The per-(stage, micro-batch) costs of pk in its run order: base's stage
 * values scaled per micro-batch (kt_token_model) for S stages; out is a
 * deep copy of base with per-micro-batch lists (free it). EINVAL, ENOMEM. */
kt_status kt_pack_costs(const kt_pack *pk, const kt_token_model *model, const kt_costs *base, int S,
                        kt_costs *out, kt_error *err);

/* Simulations an order search gets: enough for a few rounds of swaps. */
#define KT_PACK_ORDER_EVALS 400

/* Balanced's order: searches the run order of pk's micro-batches (the
 * heaviest first, last, in the middle, alternating, then swaps of pairs)
 * for the shortest period of kind's schedule under params (p, v, m from
 * pk, mem_limit: orders whose simulated peak passes it are refused; costs
 * from kt_pack_costs over base), within evals simulations. Sets pk->order
 * and pk->period. EINVAL, ENOMEM, or the generator's error. */
kt_status kt_pack_order(kt_pack *pk, const kt_token_model *model, const kt_costs *base,
                        kt_gen_kind kind, const kt_gen_params *params, int evals, kt_error *err);
/* The same search for a schedule already made (a run's: its micro-batches
 * pk->m, else EINVAL): every order simulated on s itself, orders whose
 * peak passes mem_limit (base's memory units; 0: none) refused. */
kt_status kt_pack_order_for(kt_pack *pk, const kt_token_model *model, const kt_costs *base,
                            const kt_schedule *s, double mem_limit, int evals, kt_error *err);

#ifdef __cplusplus
}
#endif

#endif
