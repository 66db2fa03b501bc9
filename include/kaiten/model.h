/* kaiten models: partitionable chains of units, cut into pipeline chunks.
 *
 * A model is a chain of "units" (the partitioner's layers). MLP: L units,
 * each Linear(H->H) + GELU, loss = mean squared error on the last unit's
 * output. GPT: unit 0 = token + position embedding, units 1..L = transformer
 * blocks, unit L+1 = final LayerNorm + LM head + softmax cross-entropy.
 *
 * A chunk is a contiguous range of units run by one stage. It owns flat
 * parameter and gradient buffers (with per-unit offsets, so checkpoints are
 * by unit and survive any re-partition) and a stash of activations keyed by
 * micro-batch. The runtime calls, per action of the schedule:
 *   F -> forward           (stash what backward needs; last stage: loss)
 *   I -> backward_input    (gradient for the chunk's input; keep what W needs)
 *   W -> backward_weight   (accumulate weight gradients; free the stash)
 *   B -> backward_input then backward_weight
 * Gradients accumulate (+=) over micro-batches; the runtime scales them once.
 */
#ifndef KAITEN_MODEL_H
#define KAITEN_MODEL_H

#include "kaiten/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { KT_MODEL_MLP, KT_MODEL_GPT, KT_MODEL_COUNT } kt_model_kind;

const char *kt_model_kind_name(kt_model_kind k); /* "mlp" | "gpt" */
int kt_model_kind_from_name(const char *name);   /* -1 when unknown */

/* The library every matrix product of a model runs on. AUTO (the
 * default) takes the fastest available here on the model's own matmuls
 * (kt_gemm_choose). BLIS and oneDNN are used when their shared libraries
 * are installed (Debian: libblis4, libdnnl2); KAITEN where the CPU has
 * AVX-512F. */
typedef enum {
  KT_GEMM_AUTO,
  KT_GEMM_OPENBLAS,
  KT_GEMM_BLIS,
  KT_GEMM_ONEDNN,
  KT_GEMM_KAITEN, /* kaiten's own kernel, epilogues fused (x86-64 with AVX-512F or AVX2 + FMA) */
  KT_GEMM_COUNT
} kt_gemm_kind;

/* "auto" | "openblas" | "blis" | "onednn" | "kaiten" */
const char *kt_gemm_name(kt_gemm_kind k);
int kt_gemm_from_name(const char *name); /* -1 when unknown */

typedef struct {
  kt_model_kind kind;
  int layers;         /* MLP: Linear+GELU layers; GPT: transformer blocks */
  int hidden;         /* MLP width H; GPT channels C */
  int heads;          /* GPT attention heads (hidden % heads == 0) */
  int seq_len;        /* GPT sequence length T */
  int vocab;          /* GPT vocabulary (256: bytes) */
  int tie_embeddings; /* GPT: LM head shares the token embedding */
  int recompute;      /* keep only each chunk's input; recompute forward in backward */
  uint64_t seed;      /* parameter initialisation (per unit, so any partition agrees) */
  kt_gemm_kind gemm;  /* the matmuls' library (default KT_GEMM_AUTO) */
  /* GPT: each micro-batch of packed documents runs as this many chunks
   * along the sequence (0 or 1: whole). Micro-batch index mb is chunk
   * mb % seq_chunks of micro-batch mb / seq_chunks; chunks run their F in
   * order and their backward in reverse, each attending to the keys and
   * values of its documents' earlier chunks (kept by the chunk). Not with
   * recompute. */
  int seq_chunks;
} kt_model_config;

/* Sensible defaults for the kind (MLP: L=8, H=64; GPT: L=4, C=64, H=4, T=64, V=256). */
void kt_model_config_default(kt_model_config *cfg, kt_model_kind kind);
/* EINVAL naming the bad value. */
kt_status kt_model_config_check(const kt_model_config *cfg, kt_error *err);

/* The unit chain. */
int kt_model_units(const kt_model_config *cfg);
/* Parameters of a unit (floats). */
size_t kt_model_unit_params(const kt_model_config *cfg, int unit);
/* Relative forward cost of a unit per sample (FLOPs), for balancing partitions. */
double kt_model_unit_flops(const kt_model_config *cfg, int unit);
/* Floats of the activation that crosses a stage boundary, per sample
 * (MLP: H; GPT: T*C). */
size_t kt_model_boundary_elems(const kt_model_config *cfg);

/* One micro-batch of data. Unused fields are NULL. */
typedef struct {
  int b;              /* samples */
  const float *x, *y; /* MLP: inputs (b, H), targets (b, H) */
  const int *tokens;  /* GPT: (b, T) */
  const int *targets; /* GPT: (b, T) */
  /* GPT packed documents (pos non-NULL): the first n_tokens (1 .. b T) of
   * tokens and targets hold whole documents back to back, and pos
   * (n_tokens) is each token's position in its document (0 starts one, each
   * next one adds 1, below T). Attention stays inside a document
   * (block-diagonal causal) and positions restart with each; the rows
   * after n_tokens are neither computed nor read. */
  int n_tokens;
  const int *pos;
  /* GPT with seq_chunks: each token's row in its whole micro-batch (before
   * the split into chunks; n_tokens may then be 0). Positions continue a
   * document across chunks. */
  const int *row;
  /* GPT: weight of each token's loss and gradient; 0: 1 / the micro-batch's
   * tokens (its mean). A step's mean over its real tokens gives every
   * micro-batch (micro-batches of the step) / (tokens of the step). */
  double loss_scale;
} kt_microbatch;

/* A chunk: the units [first_unit, first_unit + n_units) of one model on
 * one pipeline stage, with its parameters, gradients and the activations it
 * stashes between a micro-batch's forward and backward. Opaque: its
 * invariants (params and grads of n_params floats laid out by unit, the
 * stash accounting, the tied-embedding copies) hold only through these
 * functions. Implementations of a chunk (src/nn, the synthetic workload)
 * see its fields in kaiten/model_impl.h. */
typedef struct kt_chunk kt_chunk;

/* Forward of micro-batch mb: in is the previous stage's output (NULL on the
 * first stage, which reads data); out receives this chunk's output (NULL on
 * the last stage, which writes the micro-batch's mean loss to *loss). The
 * activations the backward needs are stashed under mb. */
kt_status kt_chunk_forward(kt_chunk *c, int mb, const kt_microbatch *data, const float *in,
                           float *out, double *loss, kt_error *err);
/* Input gradient of micro-batch mb: dout is the gradient of the output
 * (NULL on the last stage: the loss's), din receives the gradient of the
 * input (NULL on the first stage). */
kt_status kt_chunk_backward_input(kt_chunk *c, int mb, const kt_microbatch *data, const float *dout,
                                  float *din, kt_error *err);
/* Weight gradient of micro-batch mb, accumulated into the gradients; frees
 * the micro-batch's stash. */
kt_status kt_chunk_backward_weight(kt_chunk *c, int mb, kt_error *err);
/* Both at once (a full B): the same gradients, bit for bit, as the input
 * gradient then the weight gradient; the chunk may interleave them (GPT:
 * each block's weight gradient right after its input gradient). */
kt_status kt_chunk_backward(kt_chunk *c, int mb, const kt_microbatch *data, const float *dout,
                            float *din, kt_error *err);

/* Floats of the boundary activation per micro-batch: input, output. */
size_t kt_chunk_in_elems(const kt_chunk *c);
size_t kt_chunk_out_elems(const kt_chunk *c);
/* Whether the chunk holds the model input (first) or the loss (last). */
int kt_chunk_is_first(const kt_chunk *c);
int kt_chunk_is_last(const kt_chunk *c);
const kt_model_config *kt_chunk_config(const kt_chunk *c);
/* Parameters and gradients: *n floats each, unit after unit; the offsets
 * of the units in them (n_units + 1 entries), and the first unit. */
float *kt_chunk_params(kt_chunk *c, size_t *n);
float *kt_chunk_grads(kt_chunk *c, size_t *n);
const size_t *kt_chunk_unit_offsets(const kt_chunk *c, int *first_unit, int *n_units);
/* The tied token-embedding copy and its gradient (GPT with
 * tie_embeddings); returns their floats, 0 when the chunk holds none. */
size_t kt_chunk_tied(kt_chunk *c, float **copy, float **grad);
/* Activation bytes stashed now, and the most since kt_chunk_reset_peak. */
size_t kt_chunk_stash_bytes(const kt_chunk *c);
size_t kt_chunk_peak_stash_bytes(const kt_chunk *c);
void kt_chunk_reset_peak(kt_chunk *c);
/* fn(ctx, lo, hi) for every block [lo, hi) of `block` indices covering
 * [0, n), on the chunk's compute threads (the caller's among them; the
 * caller's alone when the chunk has one); returns when all have run. Each
 * block runs whole on one thread, so work that splits by block gives the
 * same bits on any number of threads. For the optimizer's passes over a
 * chunk's parameters. */
typedef void (*kt_chunk_range_fn)(void *ctx, size_t lo, size_t hi);
void kt_chunk_parallel(kt_chunk *c, size_t n, size_t block, kt_chunk_range_fn fn, void *ctx);

/* What kt_chunk_stash_bytes counts for micro-batch data (NULL: a full one
 * of micro_batch rows) on the GPT chunk of units [first_unit, first_unit +
 * n_units), without running it: bytes[0] kept after its F, bytes[1] kept
 * after its I until its W, bytes[2] the most an op holds above what it
 * keeps (an I holds both), bytes[3] with seq_chunks the whole micro-batch's
 * keys, values and their gradients, which its first chunk's F adds and its
 * last chunk's I frees (else 0). EINVAL for other models and recompute. */
kt_status kt_model_mb_stash_bytes(const kt_model_config *cfg, int first_unit, int n_units,
                                  int micro_batch, const kt_microbatch *data, double bytes[4],
                                  kt_error *err);

/* Creates the chunk for units [first_unit, first_unit + n_units) with
 * parameters initialised from cfg->seed (identical for any partition).
 * EINVAL for bad ranges, ENOMEM. */
kt_status kt_chunk_create(const kt_model_config *cfg, int first_unit, int n_units, int micro_batch,
                          int n_microbatches, kt_chunk **out, kt_error *err);
/* The same chunk, sizes only: its F, I and W take and free their stash
 * exactly as a created chunk's would and check their order, but compute
 * nothing and touch no page of the stash, outputs, parameters or
 * gradients (its parameters are neither zeroed nor drawn; it has no
 * threads and loads no GEMM library): what kt_chunk_stash_bytes and
 * kt_chunk_peak_stash_bytes count, in a fraction of a step's time. */
kt_status kt_chunk_create_sizes_only(const kt_model_config *cfg, int first_unit, int n_units,
                                     int micro_batch, int n_microbatches, kt_chunk **out,
                                     kt_error *err);
void kt_chunk_destroy(kt_chunk *c);
void kt_chunk_zero_grad(kt_chunk *c);

/* ---- the GEMM libraries and the threads of a rank ------------------------------
 * Process-wide settings: the program chooses them (kt_session does through its
 * blas_threads, kt_calibrate_compute sets one thread); nothing else in the
 * library does. OpenBLAS is opened when first needed (kt_chunk_create or a
 * call below), never by a program that multiplies no matrix: loading it
 * starts its threads. */

/* Whether library k runs here (each when its shared library loads, on the
 * first call: OpenBLAS, BLIS, oneDNN); *version (may be NULL) receives its
 * version. */
int kt_gemm_available(kt_gemm_kind k, const char **version);

/* A class of products another library ran clearly faster than the chosen
 * one: those with these transpositions and these two dimensions, the two
 * that do not grow with the micro-batch's rows (n and k of op(a) @ op(b)
 * when a is not transposed, m and n when it is: the rows are then k). */
typedef struct {
  int trans_a, trans_b, dims[2];
  kt_gemm_kind kind; /* the library these products run on */
  double speedup;    /* its time on them over the chosen library's */
} kt_gemm_shape;
#define KT_GEMM_MAX_SHAPES 8

/* How a chunk's library was chosen. */
typedef struct {
  kt_gemm_kind kind;             /* the library used (never AUTO) */
  const char *how;               /* "given", "measured", "cached" (measured before on this
                                   * machine) or "small" (too little work to tell: OpenBLAS) */
  double seconds[KT_GEMM_COUNT]; /* measured or cached: each library's time on the
                                   * model's matmuls (0: not available) */
  /* AUTO, measured or cached: the classes of products (at most
   * KT_GEMM_MAX_SHAPES, each 1% or more of the chosen library's time) that
   * run on another library, 5% or more faster on them */
  int n_shapes;
  kt_gemm_shape shapes[KT_GEMM_MAX_SHAPES];
} kt_gemm_choice;

/* The library for chunks of cfg's model run on micro-batches of b
 * samples. An explicit cfg->gemm must be available (EINVAL naming it
 * otherwise). AUTO times every available library, one thread each, on
 * the matmuls of the model's last block and head for one micro-batch
 * (recorded from a run of those units) and takes the fastest (OpenBLAS,
 * unmeasured, when they come to under 20 MFLOP), then from the same
 * replays the classes of products another library runs clearly faster
 * (shapes); the result is kept per
 * model shape in this process and, with a cache file set, in that file
 * (written under a lock, so concurrent runs on one machine agree): a
 * machine then measures a shape once and every later run chooses alike.
 * ENOMEM. */
kt_status kt_gemm_choose(const kt_model_config *cfg, int micro_batch, kt_gemm_choice *out,
                         kt_error *err);
/* The file where kt_gemm_choose keeps what AUTO measured, shared by the
 * machine's runs (its lock: path + ".lock"); NULL, the default: none, each
 * process measures. The CLI sets $XDG_CACHE_HOME/kaiten/gemm.tsv
 * (~/.cache/kaiten/gemm.tsv). The directory must exist. */
void kt_gemm_set_cache(const char *path);
/* The library a chunk runs on, and how it was chosen. */
kt_gemm_kind kt_chunk_gemm(const kt_chunk *c, kt_gemm_choice *how);

/* Loads OpenBLAS and, where it fell back to pre-AVX2 kernels on a CPU it
 * does not know (and OPENBLAS_CORETYPE is unset), has it use the fastest
 * kernels this CPU runs (SkylakeX with AVX-512, Haswell with AVX2+FMA).
 * A program that multiplies matrices calls it first, before any thread
 * exists. Returns the kernels in use. */
const char *kt_blas_choose_core(void);
/* Threads of each rank (its own and n - 1 workers) for the chunks created
 * from now on: their kernels and large matmuls are split between them, and
 * the GEMM library runs one thread per call. Process-wide; default 1. */
void kt_blas_set_threads(int n);
/* The threads per rank chunks created now get. */
int kt_blas_threads(void);
/* KT_OK when the address space left (ulimit -v) holds the buffers OpenBLAS
 * takes for `threads` threads that run matrix products (this process's
 * ranks times their threads); else ENOMEM with the reason (OpenBLAS would
 * retry its failed allocation forever). Call it once what the run keeps
 * is allocated. */
kt_status kt_blas_check_room(int threads, kt_error *err);
/* The name of the OpenBLAS kernels in use ("SkylakeX", "Haswell", ...,
 * "unavailable" when OpenBLAS cannot be loaded: kt_chunk_create says why);
 * *chosen_by_kaiten (when non-NULL) receives the core kt_blas_choose_core
 * chose in place of OpenBLAS's own fallback, or NULL. */
const char *kt_blas_core(const char **chosen_by_kaiten);
/* Which build of the element-wise kernels the loader picked: "x86-64-v4"
 * (AVX-512), "x86-64-v3" (AVX2 + FMA), "baseline", or "portable" where
 * they are built once (not GCC on x86-64, or under ThreadSanitizer). */
const char *kt_kernel_isa(void);
/* Measures the matmuls of a piece of work (kaiten calibrate): runs
 * work(ctx) with the shape of every matmul kaiten issues logged, then
 * replays the logged calls on bare sgemm. *flops receives the FLOPs work
 * issued (every thread's), *sgemm_seconds the fastest of reps replays (0
 * when work issued none). Not for two callers at once (the log is
 * process-wide). work's status, or ENOMEM. */
kt_status kt_matmul_measure(kt_status (*work)(void *ctx, kt_error *err), void *ctx, int reps,
                            double *flops, double *sgemm_seconds, kt_error *err);

/* ---- partitions ------------------------------------------------------------ */

/* Parses "2,3,3" into counts[n]; they must be >= 1 and sum to units.
 * EINVAL naming the problem. */
kt_status kt_partition_parse(const char *text, int n_stages, int units, int *counts, kt_error *err);
/* Balanced contiguous partition of the units into n_stages by unit FLOPs:
 * minimises the largest stage (exact), never an empty stage. */
kt_status kt_partition_balanced(const kt_model_config *cfg, int n_stages, int *counts,
                                kt_error *err);

/* ---- GPT extras: evaluation and sampling -------------------------------------- */

/* Forward of a GPT chunk without touching its stash (validation loss,
 * sampling): in/out as for forward (data->tokens on the first stage). The
 * last stage writes the micro-batch's mean loss to *loss when data->targets
 * is set, and the (b, T, V) logits to `logits` when non-NULL.
 * EINVAL for a missing input or a token outside the vocabulary. */
kt_status kt_gpt_chunk_eval(kt_chunk *c, const kt_microbatch *data, const float *in, float *out,
                            double *loss, float *logits, kt_error *err);

/* The named parameter tensors of a GPT unit, in storage order inside the
 * unit's slice of params (offsets in floats from the unit's start). matrix
 * marks weight matrices and embeddings (the usual weight-decay set); biases
 * and LayerNorm gains are not. Returns the count (writes at most max). */
typedef struct {
  const char *name; /* "wte", "qkvw", "ln1b", ... */
  size_t offset, size;
  int matrix;
} kt_param_tensor;
int kt_gpt_unit_tensors(const kt_model_config *cfg, int unit, kt_param_tensor *out, int max);
/* The same for any model kind (MLP: "w" matrix, then "b"). */
int kt_model_unit_tensors(const kt_model_config *cfg, int unit, kt_param_tensor *out, int max);

typedef struct {
  float temperature; /* <= 0: greedy (arg max) */
  int top_k;         /* sample among the k most likely tokens; <= 0: all */
  uint64_t seed;     /* the same seed and prompt give the same text */
} kt_sample_params;

/* Generates n_new tokens after the prompt with chunks[0..n_chunks) covering
 * all units of one GPT model in order (any partition). Each token runs the
 * forward over the last T tokens of the context (sample 0 of the chunks'
 * micro-batch; build them with micro_batch 1 for speed). An empty prompt
 * starts from a newline (byte 10). out receives the n_new new tokens.
 * EINVAL for chunks that do not form a model, or a prompt token outside the
 * vocabulary; ENOMEM. */
kt_status kt_gpt_sample(kt_chunk *const *chunks, int n_chunks, const int *prompt, int n_prompt,
                        int n_new, const kt_sample_params *params, int *out, kt_error *err);

#ifdef __cplusplus
}
#endif

#endif
