/* Internal to src/nn/: the one sgemm wrapper, element-wise kernels, the
 * activation stash pool and deterministic initialisation.
 * Legend: B = samples in a micro-batch, T = time (sequence), C = channels. */
#ifndef KAITEN_NN_INTERNAL_H
#define KAITEN_NN_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "kaiten/model_impl.h"

/* Implementations (src/nn/): each kind's create function (sizes_only:
 * kt_chunk_create_sizes_only's, parameters neither zeroed nor drawn). */
kt_status kt__mlp_chunk_create(const kt_model_config *cfg, int first_unit, int n_units,
                               int micro_batch, int n_microbatches, int sizes_only, kt_chunk **out,
                               kt_error *err);
kt_status kt__gpt_chunk_create(const kt_model_config *cfg, int first_unit, int n_units,
                               int micro_batch, int n_microbatches, int sizes_only, kt_chunk **out,
                               kt_error *err);

/* ---- compute threads and the GEMM library (pool.c, gemm.c) ------------------
 * A chunk runs on its rank's thread plus the workers of its pool; its ops
 * set the calling thread's execution context (which pool, which GEMM
 * library) for their duration, and every kernel and matmul reads it. */
typedef struct kt__pool kt__pool;
typedef struct {
  kt__pool *pool;             /* NULL: this thread alone */
  kt_gemm_kind gemm;          /* never KT_GEMM_AUTO */
  int in_task;                /* inside a pool task: everything runs serially */
  const kt_gemm_choice *plan; /* products of its shapes run on their own library (NULL: none) */
} kt__exec;

const kt__exec *kt__exec_current(void);
/* Sets the calling thread's context (plan: NULL for none); returns the
 * one to restore. */
kt__exec kt__exec_enter(kt__pool *pool, kt_gemm_kind gemm, const kt_gemm_choice *plan);
void kt__exec_leave(kt__exec saved);

/* NULL (run serially) for threads < 2 or when no worker starts. */
kt__pool *kt__pool_create(int threads);
void kt__pool_destroy(kt__pool *p);
int kt__pool_threads(const kt__pool *p); /* 1 for NULL */
/* fn(ctx, task, thread) for every task in [0, n_tasks), on the pool's
 * threads and the caller (thread 0); returns when all have ended. */
typedef void (*kt__task_fn)(void *ctx, int task, int thread);
void kt__pool_run(kt__pool *p, int n_tasks, kt__task_fn fn, void *ctx);

/* Rows [0, n) in blocks of `block` rows: fn(ctx, lo, hi, block index,
 * thread) for each, on the current pool (serially inside a task or without
 * one). The blocks, not the threads, define any partial sums a kernel keeps
 * (one per block, added in block order), so a result does not depend on
 * how many threads computed it. */
typedef void (*kt__range_fn)(void *ctx, int lo, int hi, int block, int thread);
void kt__parallel_range(int n, int block, kt__range_fn fn, void *ctx);
int kt__blocks(int n, int block); /* blocks of `block` covering n rows */

/* One product on library k, single-threaded (row-major, alpha 1):
 * c (m,n) = beta c + op(a) (m,kk) op(b) (kk,n). */
void kt__gemm_call(kt_gemm_kind k, int trans_a, int trans_b, int m, int n, int kk, const float *a,
                   int lda, const float *b, int ldb, float beta, float *c, int ldc);

/* What a product does to its result before it is stored, in this order:
 *   v = beta c + op(a) op(b) (+ bias[j]) (+ res[i * ldr + j]);
 *   c = v, or with gelu: c = gelu(v) and grad[i * ldc + j] = gelu'(v).
 * kaiten's own kernel applies it to each register tile as it stores it;
 * on a library it is a pass over the product's rows right after it, or,
 * with beta 0 and no gelu, c filled with bias + res before the product,
 * which the library then adds to (the sum's order differs: float rounding). */
typedef struct {
  const float *bias; /* (n) or NULL */
  const float *res;  /* (m, ldr) or NULL */
  int ldr;
  float *grad; /* (m, ldc) with gelu */
  int gelu;
} kt__epilogue;
enum { KT__EPI_BIAS = 1, KT__EPI_RES = 2, KT__EPI_GELU = 4 }; /* kt__epilogue_kind */
int kt__epilogue_kind(const kt__epilogue *ep);                /* 0 for NULL */
/* Its inverse: an epilogue of that kind on the given operands (those the
 * kind leaves out unused), as a replay of a recorded product runs it. */
kt__epilogue kt__epilogue_of_kind(int kind, const float *bias, const float *res, int ldr,
                                  float *grad);
/* kt__gemm_call with ep (NULL: none): fused into kaiten's tiles, a pass after
 * a library's product, applied to beta c where there is nothing to sum. */
void kt__gemm_call_ep(kt_gemm_kind k, int trans_a, int trans_b, int m, int n, int kk,
                      const float *a, int lda, const float *b, int ldb, float beta, float *c,
                      int ldc, const kt__epilogue *ep);
/* ep on c (m, n) as a pass (the libraries' side of kt__gemm_call_ep). */
void kt__epilogue_apply(float *c, int ldc, int m, int n, const kt__epilogue *ep);
/* c (m, n) = ep's bias + res, the start of a product that adds to it (ep
 * without gelu, with a bias or a residual). */
void kt__epilogue_fill(float *c, int ldc, int m, int n, const kt__epilogue *ep);

/* kaiten's own GEMM (gemm_tiles.c): AVX-512 register tiles of 12 rows by
 * 32 columns over packed 256-deep slices of op(b), with ep fused into the
 * tiles' stores (AVX2 + FMA where the CPU has no AVX-512: 6 x 16 tiles).
 * kt__tiles_ok: the CPU runs one of them (else kt__tiles_sgemm is OpenBLAS
 * and a pass). */
int kt__tiles_ok(void);
/* Its version as kaiten --version and auto's cache key name it: the ISA,
 * the tile and a revision that a change to the kernel bumps, so a cached
 * choice measured on an older kernel is measured again. */
const char *kt__tiles_version(void);
void kt__tiles_sgemm(int trans_a, int trans_b, int m, int n, int k, const float *a, int lda,
                     const float *b, int ldb, float beta, float *c, int ldc,
                     const kt__epilogue *ep);
/* The epilogue of one register tile: ep's pointers moved to the tile's
 * corner (row i0, column j of c), and to row i of the tile (NULL ep: none). */
typedef struct {
  const float *bias, *res;
  float *grad;
  size_t ldr;
  int gelu;
} kt__tile_epi;
static inline kt__tile_epi kt__tile_epi_at(const kt__epilogue *ep, int i0, int ldc, int j) {
  kt__tile_epi t = {0};
  if (ep)
    t = (kt__tile_epi){.bias = ep->bias ? ep->bias + j : NULL,
                       .res = ep->res ? ep->res + (size_t)i0 * ep->ldr + j : NULL,
                       .grad = ep->gelu ? ep->grad + (size_t)i0 * ldc + j : NULL,
                       .ldr = (size_t)ep->ldr,
                       .gelu = ep->gelu};
  return t;
}
static inline kt__tile_epi kt__tile_epi_row(const kt__tile_epi *ep, int i, size_t ldc) {
  kt__tile_epi t = {0};
  if (ep)
    t = (kt__tile_epi){.bias = ep->bias,
                       .res = ep->res ? ep->res + i * ep->ldr : NULL,
                       .grad = ep->gelu ? ep->grad + i * ldc : NULL,
                       .gelu = ep->gelu};
  return t;
}
/* The kernel on AVX2 + FMA, 6 x 16 tiles (gemm_tiles_avx2.c): what
 * kt__tiles_sgemm runs where the CPU has no AVX-512 (kt__avx2_ok). */
void kt__tiles_avx2_sgemm(int trans_a, int trans_b, int m, int n, int k, const float *a, int lda,
                          const float *b, int ldb, float beta, float *c, int ldc,
                          const kt__epilogue *ep);
/* What the two kernels share: the calling thread's buffer of packed panels
 * (at least `floats`, kept from call to call; NULL when none is to be had). */
float *kt__tiles_panels(size_t floats);
/* The library a product runs on in context e: its class's in e->plan, else
 * e->gemm. */
kt_gemm_kind kt__gemm_for(const kt__exec *e, int m, int n, int k, int trans_a, int trans_b);
/* Resolves cfg->gemm for a chunk (kt_gemm_choose) and starts its pool of
 * kt_blas_threads() threads; called by kt_chunk_create. */
kt_status kt__chunk_exec_init(kt_chunk *c, kt_error *err);
/* Enters a chunk's context (its pool and library); kt__exec_leave after. */
kt__exec kt__chunk_enter(const kt_chunk *c);

/* OpenBLAS, opened on first use (blas.c): KT_EIO with the loader's reason
 * when it cannot be. Thread-safe; kt_chunk_create calls it first. */
kt_status kt__blas_load(kt_error *err);
/* cblas_sgemm, row-major, alpha 1: c (m, n) = beta * c + op(a) @ op(b). */
void kt__sgemm(int trans_a, int trans_b, int m, int n, int k, const float *a, int lda,
               const float *b, int ldb, float beta, float *c, int ldc);
/* openblas_get_config() (its version and build); NULL when it cannot be loaded. */
const char *kt__blas_config(void);

/* Every matrix multiply in kaiten goes through this wrapper (row-major):
 *   out (m, n) = beta * out + op(a) (m, k) @ op(b) (k, n)
 * with op(x) = x or its transpose. Counts FLOPs for the benchmarks. The
 * one exception, attention's register tiles, accounts its products
 * through kt__matmul_shape_of and kt__matmul_add. */
void kt__matmul(float *out, const float *a, const float *b, int m, int n, int k, int trans_a,
                int trans_b, float beta);
/* The same with explicit row strides (leading dimensions) of out, a and b,
 * for operands that are column slices of wider row-major matrices (one
 * attention head inside (B,T,3C) q | k | v rows). */
void kt__matmul_ld(float *out, int ldo, const float *a, int lda, const float *b, int ldb, int m,
                   int n, int k, int trans_a, int trans_b, float beta);
/* kt__matmul with an epilogue (NULL: none), fused where the product runs
 * on kaiten's own kernel. */
void kt__matmul_ep(float *out, const float *a, const float *b, int m, int n, int k, int trans_a,
                   int trans_b, float beta, const kt__epilogue *ep);
/* A product computed outside kt__matmul_ld: its FLOPs, and its shape
 * recorded (while recording) as the kt__matmul_ld call it replaces; then
 * kt__matmul_add counts such products' FLOPs and seconds. */
double kt__matmul_shape_of(int m, int n, int k, int trans_a, int trans_b, float beta, int lda,
                           int ldb, int ldo);
void kt__matmul_add(double flops, double seconds);
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
  int epi; /* kt__epilogue_kind of the call's epilogue */
  /* the call's own time through kt__matmul_ld, and its operands (valid
   * while the model that made the call lives); 0 and NULL for a product
   * computed elsewhere (kt__matmul_shape_of) */
  double seconds;
  const float *a, *b;
  float *out;
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
  float **slot; /* [n_microbatches] buffer held by each micro-batch, or NULL */
  size_t *size; /* [n_microbatches] floats in use by each slot */
  size_t *cap;  /* [n_microbatches] capacity of each slot's buffer */
  float **pool; /* released buffers */
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
 * per-unit parameter counts, zeroed (sizes_only: left untouched, and the
 * chunk marked sizes-only). */
kt_status kt__chunk_alloc(const kt_model_config *cfg, int first_unit, int n_units, int micro_batch,
                          int n_microbatches, int sizes_only, kt_chunk **out, kt_error *err);
void kt__chunk_free_common(kt_chunk *c);

#endif
