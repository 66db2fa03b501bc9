/* Internal to src/nn/: the one sgemm wrapper, element-wise kernels, the
 * activation stash pool and deterministic initialisation.
 * Legend: B = samples in a micro-batch, T = time (sequence), C = channels. */
#ifndef KAITEN_NN_INTERNAL_H
#define KAITEN_NN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "kaiten/model_impl.h"

/* Implementations (src/nn/): each kind's create function. */
kt_status kt__mlp_chunk_create(const kt_model_config *cfg, int first_unit, int n_units,
                               int micro_batch, int n_microbatches, kt_chunk **out, kt_error *err);
kt_status kt__gpt_chunk_create(const kt_model_config *cfg, int first_unit, int n_units,
                               int micro_batch, int n_microbatches, kt_chunk **out, kt_error *err);


/* OpenBLAS, opened on first use (blas.c): KT_EIO with the loader's reason
 * when it cannot be. Thread-safe; kt_chunk_create calls it first. */
kt_status kt__blas_load(kt_error *err);
/* cblas_sgemm, row-major, alpha 1: c (m, n) = beta * c + op(a) @ op(b). */
void kt__sgemm(int trans_a, int trans_b, int m, int n, int k, const float *a, int lda,
               const float *b, int ldb, float beta, float *c, int ldc);

/* Every matrix multiply in kaiten goes through this wrapper (row-major):
 *   out (m, n) = beta * out + op(a) (m, k) @ op(b) (k, n)
 * with op(x) = x or its transpose. Counts FLOPs for the benchmarks. */
void kt__matmul(float *out, const float *a, const float *b, int m, int n, int k, int trans_a,
                int trans_b, float beta);
/* The same with explicit row strides (leading dimensions) of out, a and b,
 * for operands that are column slices of wider row-major matrices (one
 * attention head inside (B,T,3C) q | k | v rows). */
void kt__matmul_ld(float *out, int ldo, const float *a, int lda, const float *b, int ldb, int m,
                   int n, int k, int trans_a, int trans_b, float beta);
/* FLOPs issued through kt__matmul by every thread of the process, and the
 * seconds spent in it (summed over threads). */
double kt__matmul_flops(void);
double kt__matmul_seconds(void);
void kt__matmul_reset_counters(void);

/* Benchmarks: record the shapes (and strides) of every call while on (on = 1
 * clears the log), then replay them on bare sgemm. */
typedef struct {
  int m, n, k, trans_a, trans_b, accumulate;
  int lda, ldb, ldo;
} kt__matmul_shape;
void kt__matmul_record(int on);
const kt__matmul_shape *kt__matmul_recorded(size_t *n);

/* out (N) = GELU(inp), tanh approximation (vectorisable, no libm calls;
 * gpt_kernels.c) */
void kt__gelu_forward(float *out, const float *inp, size_t N);
/* dinp (N) += GELU'(inp) * dout */
void kt__gelu_backward(float *dinp, const float *inp, const float *dout, size_t N);

/* Deterministic generator for initialisation and data (splitmix64). */
typedef struct {
  uint64_t s;
} kt__rng;
void kt__rng_seed(kt__rng *r, uint64_t seed);
uint64_t kt__rng_next(kt__rng *r);
float kt__rng_uniform(kt__rng *r); /* [0, 1) */
float kt__rng_normal(kt__rng *r);
/* Seed of unit u under a model seed: the same for any partition. */
uint64_t kt__unit_seed(uint64_t model_seed, int unit);

/* Activation stash: one buffer per micro-batch in flight, recycled through a
 * pool so the steady state allocates nothing. Sizes are tracked in the
 * chunk's stash_bytes / peak_stash_bytes. */
typedef struct {
  float **slot;   /* [n_microbatches] buffer held by each micro-batch, or NULL */
  size_t *size;   /* [n_microbatches] floats in use by each slot */
  size_t *cap;    /* [n_microbatches] capacity of each slot's buffer */
  float **pool;   /* released buffers */
  size_t *pool_cap;
  int n_pool, n_slots;
} kt__stash;

/* n floats (and 64 bytes of slack) for a tensor; free() releases them.
 * Large ones are huge-page aligned (stash.c). NULL when out of memory. */
float *kt__alloc_floats(size_t n);

kt_status kt__stash_init(kt__stash *s, int n_microbatches, kt_error *err);
void kt__stash_free(kt__stash *s);
/* Gives micro-batch mb a buffer of at least floats (keeping its contents when
 * it already had one). NULL on allocation failure. Updates c's byte counters. */
float *kt__stash_acquire(kt__stash *s, kt_chunk *c, int mb, size_t floats);
/* Returns mb's buffer to the pool. */
void kt__stash_release(kt__stash *s, kt_chunk *c, int mb);

/* Allocates the chunk struct plus params/grads/unit_offset for the given
 * per-unit parameter counts. */
kt_status kt__chunk_alloc(const kt_model_config *cfg, int first_unit, int n_units, int micro_batch,
                          int n_microbatches, kt_chunk **out, kt_error *err);
void kt__chunk_free_common(kt_chunk *c);

#endif
