/* Internal to the GPT model (src/nn/gpt*.c): kernels, parameter and
 * activation layouts of the three unit kinds, and the chunk's private state.
 *
 * Legend: B = samples in a micro-batch, T = time (sequence), C = channels,
 * NH = attention heads, hs = C / NH head size, V = vocabulary, N = B * T rows.
 * Weights are stored (out, in) like PyTorch's nn.Linear.
 *
 * Kernels follow llm.c: paired names, arguments ordered outputs, saved
 * buffers, inputs, weights, dimensions; backward kernels accumulate (+=). */
#ifndef KAITEN_NN_GPT_H
#define KAITEN_NN_GPT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "kaiten/model.h"
#include "nn/nn.h"

/* The rows of one micro-batch: B sequences of T (pos NULL, N = B T), or N
 * tokens of packed documents with pos[i] the position of row i in its
 * document (0 starts one; attention is block-diagonal by document). dscale
 * weighs each token's loss (0: 1 / N). */
typedef struct {
  int N, B, T;
  const int *pos;
  double dscale;
  /* seq-chunks: each row's place in the whole micro-batch (NULL: none) */
  const int *row;
  size_t att; /* floats of the attention probabilities */
} kt__gpt_rows;

/* Floats of the attention probabilities of rows r for NH heads: each
 * document piece's rows times the keys up to its last one. */
size_t kt__gpt_att_floats(const kt__gpt_rows *r, int NH);

/* ---- kernels (gpt_kernels.c) ----------------------------------------------- */

/* out (B,T,C) = wte[tokens] + wpe[t] */
void kt__encoder_forward(float *out, const int *tokens, const float *wte, const float *wpe, int B,
                         int T, int C);
/* dwte (V,C) and dwpe (T,C) += scatter of dout (B,T,C) */
void kt__encoder_backward(float *dwte, float *dwpe, const float *dout, const int *tokens, int B,
                          int T, int C);

/* Packed rows: out (N,C) = wte[tokens] + wpe[pos]; the backward scatters
 * dout (N,C) into dwte (V,C) and dwpe (T,C) */
void kt__encoder_forward_pos(float *out, const int *tokens, const int *pos, const float *wte,
                             const float *wpe, int N, int C);
void kt__encoder_backward_pos(float *dwte, float *dwpe, const float *dout, const int *tokens,
                              const int *pos, int N, int C);

/* out (N,C) = (inp - mean) * rstd * weight + bias; saves mean, rstd (N) */
void kt__layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                           const float *weight, const float *bias, int N, int C);
/* dinp (N,C) = dres (N,C) + the gradient through the LayerNorm of dout
 * (N,C); dweight (C), dbias (C) += theirs. dres is the gradient that flows
 * around the LayerNorm on the residual path (NULL: none), so the residual
 * add costs no pass of its own; dinp is written, not accumulated. */
void kt__layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dres,
                            const float *dout, const float *inp, const float *weight,
                            const float *mean, const float *rstd, int N, int C);

/* out (N,OC) = inp (N,C) @ weight (OC,C)^T + bias (OC, may be NULL) */
void kt__matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int N,
                        int C, int OC);
/* out (N,OC) = residual (N,OC) + inp (N,C) @ weight (OC,C)^T + bias (OC);
 * the residual add rides on sgemm's beta (the backward of the residual is the
 * identity and lives with the caller) */
void kt__matmul_residual_forward(float *out, const float *inp, const float *weight,
                                 const float *bias, const float *residual, int N, int C, int OC);
/* dinp (N,C) += dout (N,OC) @ weight (OC,C); with accumulate = 0 dinp is
 * overwritten instead (sgemm's beta = 0: no zeroing pass first) */
void kt__matmul_backward_input(float *dinp, const float *dout, const float *weight, int N, int C,
                               int OC, int accumulate);
/* dweight (OC,C) += dout (N,OC)^T @ inp (N,C) */
void kt__matmul_backward_weight(float *dweight, const float *dout, const float *inp, int N, int C,
                                int OC);
/* dbias (OC) += column sums of dout (N,OC) */
void kt__bias_backward(float *dbias, const float *dout, int N, int OC);

/* GELU kernels: kt__gelu_forward / kt__gelu_backward in nn/nn.h (shared with
 * the MLP). The GPT's MLP saves GELU's derivative in the forward instead of
 * its input, which turns the backward into one multiply:
 *   out (N) = GELU(inp), grad (N) = GELU'(inp) (one exp and no division
 *   for both) */
void kt__gelu_forward_grad(float *out, float *grad, const float *inp, size_t N);
/* In place: d (N,OC), the gradient of the GELU output, *= grad (N,OC) (saved
 * by kt__gelu_forward_grad), becoming that of its input; dbias (OC) += the
 * column sums of the result (the bias gradient of the layer feeding GELU). */
void kt__gelu_backward_saved(float *d, float *dbias, const float *grad, int N, int OC);

/* Softmax cross-entropy over V classes for N rows; returns the summed loss.
 * dlogits (N,V) = dscale * (softmax(logits) - onehot(targets)); dlogits may
 * alias logits (the gradient is known at forward time, so there is no
 * separate backward kernel). */
double kt__crossentropy_forward(float *dlogits, const float *logits, const int *targets, int N,
                                int V, float dscale);

/* Causal multi-head self-attention.
 *   inp  (B,T,3C) q | k | v, as produced by the qkv matmul (the backward
 *        reads it again: keep it)
 *   att  (B,NH,T,T) saved: softmax probabilities (zero above the diagonal)
 *   out  (B,T,C) heads concatenated
 *   scratch: kt__attention_scratch_floats(T, C / NH) floats (forward and
 *            backward) */
size_t kt__attention_scratch_floats(int T, int hs);
void kt__attention_forward(float *out, float *att, float *scratch, const float *inp, int B, int T,
                           int C, int NH);
/* dinp (B,T,3C) = gradient through attention, from dout (B,T,C): written,
 * not accumulated (every element has exactly one writer) */
void kt__attention_backward(float *dinp, float *scratch, const float *dout, const float *inp,
                            const float *att, int B, int T, int C, int NH);

/* The same, blocked and threaded: query rows in blocks of qb (<= 0: T;
 * KT__ATT_QB in training), whose scores and products skip the keys after
 * the block's last row; heads run in parallel on the current pool, thread
 * i in scratch + i * kt__attention_scratch_floats(T, hs) (so scratch holds
 * that many floats per thread of the pool). Heads whose size is a multiple
 * of 16 run on the register tiles below where the CPU has AVX-512 or AVX2, others
 * on the GEMM library. Results equal the kernels above to float rounding. */
#define KT__ATT_QB 64
void kt__attention_forward_blocked(float *out, float *att, float *scratch, const float *inp, int B,
                                   int T, int C, int NH, int qb);
void kt__attention_backward_blocked(float *dinp, float *scratch, const float *dout,
                                    const float *inp, const float *att, int B, int T, int C, int NH,
                                    int qb);

/* The register tiles of a head's products (head_tiles.c; x86-64 with GCC
 * or Clang, used where kt__head_tiles_ok). Rows are the head's strided
 * slices (ld* floats apart); Tp = kt__head_tiles_width(T) >= T.
 *   transpose: xt (hs, Tp) = x (T, hs) transposed, zero in columns [T, Tp)
 *   pack:      xp (T, hs) = x (T, hs), rows hs apart
 *   scores:    s (m, Tp) row i = a row i . xt, for the columns a causal row
 *              r0 + i needs (its tile's last row + 1, up to whole 16s); the
 *              columns after that are not written
 *   rows:      out (m, hs) row i = sum over j < min(r0 + i + 1.., n) of
 *              p[i][j] b row j (p zero above the diagonal; the tile's bound)
 *   keys:      out (T, hs) row j = sum over t >= j of p[t][j] b row t
 * Every output element is written (overwritten), never accumulated. */
#if defined(__x86_64__) && defined(__GNUC__)
#define KT__HEAD_TILES 1
int kt__head_tiles_ok(int hs);
void kt__head_transpose(float *xt, int Tp, const float *x, int ld, int T, int hs);
void kt__head_pack(float *xp, const float *x, int ld, int T, int hs);
void kt__head_scores(float *s, int lds, const float *a, int lda, const float *xt, int Tp, int m,
                     int r0, int hs);
void kt__head_rows(float *out, int ldo, const float *p, int ldp, const float *b, int ldb, int m,
                   int r0, int n, int hs);
void kt__head_keys(float *out, int ldo, const float *p, int ldp, const float *b, int ldb, int T,
                   int hs);
/* The causal softmax of rows r0 .. r0 + m - 1 on 16-float vectors: row t
 * of p (T floats) = softmax(scale * s row t) over keys [0, r0 + t], 0
 * after (s's rows, lds a multiple of 16, are left holding the unnormalised
 * exponentials, up to the 16-float vector past the diagonal); the
 * backward turns d's rows (the probabilities' gradient) into
 * the scores' gradient in place, 0 after the diagonal up to T. */
void kt__head_softmax(float *p, int ldp, float *s, int lds, int m, int r0, int T, float scale);
void kt__head_softmax_backward(float *d, int ldd, const float *a, int lda, int m, int r0, int T,
                               float scale);
/* The same on AVX2 + FMA (head_tiles_avx2.c), which the functions above
 * run where the CPU has no AVX-512. */
void kt__head_transpose_avx2(float *xt, int Tp, const float *x, int ld, int T, int hs);
void kt__head_pack_avx2(float *xp, const float *x, int ld, int T, int hs);
void kt__head_scores_avx2(float *s, int lds, const float *a, int lda, const float *xt, int Tp,
                          int m, int r0, int hs);
void kt__head_rows_avx2(float *out, int ldo, const float *p, int ldp, const float *b, int ldb,
                        int m, int r0, int n, int hs);
void kt__head_keys_avx2(float *out, int ldo, const float *p, int ldp, const float *b, int ldb,
                        int T, int hs);
void kt__head_softmax_avx2(float *p, int ldp, float *s, int lds, int m, int r0, int T, float scale);
void kt__head_softmax_backward_avx2(float *d, int ldd, const float *a, int lda, int m, int r0,
                                    int T, float scale);
/* Whether this CPU runs AVX-512F: the register tiles above and the row
 * kernels below (rows_avx512.c) are used only where it does. The row
 * kernel: o, g (n) = gelu(x + b) and its derivative, as
 * kt__gelu_forward_grad of x + b to float rounding. */
int kt__avx512_ok(void);
/* Tests: 1 makes kt__avx512_ok false, so that a CPU with AVX-512 runs (and
 * tests) the AVX2 kernels; 0 undoes it. Set while no kernel runs. */
void kt__avx512_mask(int masked);
void kt__bias_gelu_row_avx512(float *o, float *g, const float *x, const float *b, int n);
/* Whether this CPU runs AVX2 and FMA: the kernels on them (head_tiles_avx2.c,
 * gemm_tiles_avx2.c, rows_avx2.c) run where it does and kt__avx512_ok does
 * not. The row kernel above on them: */
int kt__avx2_ok(void);
void kt__bias_gelu_row_avx2(float *o, float *g, const float *x, const float *b, int n);
#endif
static inline int kt__head_tiles_width(int T) { return (T + 15) / 16 * 16; }

/* Block-diagonal attention over packed documents (pos as in kt__gpt_rows):
 * each document runs the kernels above as one sequence of its length L, its
 * (NH,L,L) probabilities after the previous documents' in att (at most
 * NH N T floats). reference: the serial kernels, else the blocked ones. */
void kt__attention_forward_packed(float *out, float *att, float *scratch, const float *inp,
                                  const int *pos, int N, int C, int NH, int reference);
void kt__attention_backward_packed(float *dinp, float *scratch, const float *dout, const float *inp,
                                   const float *att, const int *pos, int N, int C, int NH,
                                   int reference);
/* Length of the document (piece) starting at row i of pos (N rows): up to
 * the first position (or, with row non-NULL, whole row) that does not
 * continue it. */
int kt__doc_length(const int *pos, const int *row, int i, int N);
/* A chunk of a micro-batch split along the sequence: its rows' q | k | v
 * (N,3C) are first written into gqkv (the whole micro-batch's, at row[i]);
 * each document piece's queries attend to its document's keys up to
 * themselves there. att: as kt__gpt_rows.att. The backward writes dinp's q
 * part and adds the key and value gradients of all those keys into gdkv
 * (the whole micro-batch's (rows,3C)), then copies this chunk's rows of them
 * into dinp's k | v part (complete once later chunks ran theirs). Heads
 * run on the current pool, each thread in its T x T of scratch. */
void kt__attention_forward_chunked(float *out, float *att, float *scratch, float *gqkv,
                                   const float *inp, const int *pos, const int *row, int N, int T,
                                   int C, int NH);
void kt__attention_backward_chunked(float *dinp, float *gdkv, float *scratch, const float *dout,
                                    const float *gqkv, const float *att, const int *pos,
                                    const int *row, int N, int T, int C, int NH);

/* exp(x) with relative error < 3e-7 that GCC vectorises at -O2 (no libm
 * call, no float branches): saturates to exp(-87) below and exp(88) above,
 * and keeps a NaN a NaN (so a diverging run is caught as non-finite instead
 * of training on a softmax that turned NaN scores into numbers).
 * The clamps compare the float's bits as integers so that -ftrapping-math
 * does not stop if-conversion. Loops that call it are written as blocks of
 * KT__VB iterations, a trip count the -O2 "very cheap" cost model accepts. */
#define KT__VB 16
static inline float kt__fast_expf(float x) {
  int32_t xi;
  memcpy(&xi, &x, sizeof xi);
  int32_t nan = (xi & 0x7FFFFFFF) > 0x7F800000 ? -1 : 0; /* NaN in, NaN out */
  xi = xi > 0x42B00000 ? 0x42B00000 : xi;                /* x > 88 (positive) -> 88 */
  uint32_t ux = (uint32_t)xi;
  ux = ux > 0xC2AE0000u ? 0xC2AE0000u : ux; /* x < -87 (negative) -> -87 */
  memcpy(&x, &ux, sizeof x);
  float n = (x * 1.44269504f + 12582912.0f) - 12582912.0f; /* round(x / ln 2) */
  float r = x - n * 0.693145751953125f - n * 1.428606765330187e-6f;
  float p =
      1.0f +
      r * (1.0f + r * (0.5f + r * (0.16666667f +
                                   r * (0.041666668f + r * (0.008333334f + r * 0.0013888889f)))));
  int32_t e = ((int32_t)n + 127) << 23; /* 2^n */
  e |= nan & 0x7FC00000;                /* a NaN scale makes the result NaN */
  float s;
  memcpy(&s, &e, sizeof s);
  return p * s;
}

/* ---- threaded and fused kernels (gpt_fast.c) ---------------------------------- *
 * The kernels above on the current pool's threads, rows in blocks of
 * KT__ROWS. Those that sum over rows take `partials`: at least
 * kt__partials_floats(N, OC) floats (the LayerNorm backward twice that),
 * one row of partial sums per block, added in block order (so the result
 * is the same for any number of threads). */
#define KT__ROWS 64
size_t kt__partials_floats(int N, int OC);
void kt__encoder_forward_par(float *out, const int *tokens, const float *wte, const float *wpe,
                             int B, int T, int C);
/* The same over packed rows (pos, N rows) */
void kt__encoder_forward_pos_par(float *out, const int *tokens, const int *pos, const float *wte,
                                 const float *wpe, int N, int C);
void kt__layernorm_forward_par(float *out, float *mean, float *rstd, const float *inp,
                               const float *weight, const float *bias, int N, int C);
void kt__layernorm_backward_par(float *dinp, float *dweight, float *dbias, float *partials,
                                const float *dres, const float *dout, const float *inp,
                                const float *weight, const float *mean, const float *rstd, int N,
                                int C);
void kt__matmul_forward_par(float *out, const float *inp, const float *weight, const float *bias,
                            int N, int C, int OC);
void kt__matmul_residual_forward_par(float *out, const float *inp, const float *weight,
                                     const float *bias, const float *residual, int N, int C,
                                     int OC);
/* out (N,OC) = GELU(inp @ weight^T + bias), grad (N,OC) = GELU' there: the
 * fc product with its bias and GELU as its epilogue (kt__matmul_ep) */
void kt__matmul_bias_gelu_forward_par(float *out, float *grad, const float *inp,
                                      const float *weight, const float *bias, int N, int C, int OC);
void kt__bias_backward_par(float *dbias, float *partials, const float *dout, int N, int OC);
void kt__gelu_backward_saved_par(float *d, float *dbias, float *partials, const float *grad, int N,
                                 int OC);
double kt__crossentropy_forward_par(float *dlogits, const float *logits, const int *targets, int N,
                                    int V, float dscale);

/* Which kernels the units run: the threaded, fused and blocked ones (the
 * default), or with reference on the serial kernels above as they were
 * first written (tests compare the two). Process-wide. */
void kt__gpt_set_reference(int on);
int kt__gpt_reference(void);

/* ---- units (gpt_units.c) ---------------------------------------------------- */

typedef enum { KT__GPT_EMBED, KT__GPT_BLOCK, KT__GPT_HEAD } kt__gpt_kind;

/* Where the stash of a micro-batch lives: `act` is freed when backward_input
 * ends, `keep` (what backward_weight needs) when backward_weight ends, and
 * `wgrad` (written by backward_input for backward_weight) sits after `keep`
 * in the same buffer, so F holds act + keep and I grows keep by wgrad. */
enum { KT__GPT_ACT, KT__GPT_KEEP, KT__GPT_WGRAD, KT__GPT_SEGMENTS };

/* Parameters of one unit, pointing into a flat params (or grads) buffer. */
typedef struct {
  /* embed */
  float *wte; /* (V,C) */
  float *wpe; /* (T,C) */
  /* block */
  float *ln1w, *ln1b;         /* (C) */
  float *qkvw, *qkvb;         /* (3C,C), (3C) */
  float *attprojw, *attprojb; /* (C,C), (C) */
  float *ln2w, *ln2b;         /* (C) */
  float *fcw, *fcb;           /* (4C,C), (4C) */
  float *fcprojw, *fcprojb;   /* (C,4C), (C) */
  /* head */
  float *lnfw, *lnfb; /* (C) */
  float *headw;       /* (V,C): a copy of wte when tied */
} kt__gpt_params;

/* Activations of one unit for one micro-batch; which fields exist depends on
 * the unit kind (kt__gpt_acts_point lists them with their segment). */
typedef struct {
  /* act */
  float *x;                   /* (B,T,C) unit input (block, head) */
  float *ln1_mean, *ln1_rstd; /* (B,T) */
  float *qkv;                 /* (B,T,3C) q | k | v */
  float *att;                 /* (B,NH,T,T) */
  float *res2;                /* (B,T,C) x + attention branch */
  float *ln2_mean, *ln2_rstd; /* (B,T) */
  float *gelu_grad;           /* (B,T,4C) GELU' at the fc output */
  float *lnf_mean, *lnf_rstd; /* (B,T) */
  /* keep */
  float *tokens;           /* (B,T) token ids stored as int: the embed's input */
  float *ln1, *atty, *ln2; /* (B,T,C) */
  float *fch_gelu;         /* (B,T,4C) */
  float *lnf;              /* (B,T,C) */
  float *dlogits;          /* (B,T,V) logits, then their gradient */
  /* wgrad */
  float *dout;  /* (B,T,C) gradient of the unit output (embed, block) */
  float *dres2; /* (B,T,C) */
  float *dfch;  /* (B,T,4C) */
  float *dqkv;  /* (B,T,3C) */
  /* wgrad: bias and LayerNorm gradients of this micro-batch, reduced in I */
  float *dln1w, *dln1b, *dqkvb, *dattprojb, *dln2w, *dln2b, *dfcb, *dfcprojb, *dlnfw, *dlnfb;
  /* seq-chunks (block): the whole micro-batch's q | k | v and their
   * gradients (rows,3C), shared by its chunks; NULL otherwise */
  float *gqkv, *gdkv;
} kt__gpt_acts;

/* Scratch shared by the units of a chunk (preallocated for micro_batch). */
typedef struct {
  float *fc;       /* (B,T,4C) fc output before GELU */
  float *dsmall;   /* (B,T,C) */
  float *attn;     /* kt__attention_scratch_floats, per thread of the chunk's pool */
  float *partials; /* 2 * kt__partials_floats(B*T, 4C) */
} kt__gpt_scratch;

kt__gpt_kind kt__gpt_unit_kind(const kt_model_config *cfg, int unit);
/* Points p into base (a unit's slice of params or grads). */
void kt__gpt_params_point(kt__gpt_params *p, float *base, const kt_model_config *cfg, int unit);
/* Floats of segment seg of a unit for rows r; with base non-NULL also
 * points a's fields of that segment into base. */
size_t kt__gpt_acts_point(kt__gpt_acts *a, float *base, int seg, const kt_model_config *cfg,
                          int unit, const kt__gpt_rows *r);
/* Deterministic initialisation of a unit's parameters from its seed. */
void kt__gpt_params_init(float *base, const kt_model_config *cfg, int unit);

/* Forward of one unit: reads the unit input (a->x, or a->tokens for the
 * embed), fills its act and keep fields and writes the output (B,T,C) to out.
 * The head instead copies its logits (B,T,V) to out when out is non-NULL and,
 * with targets, leaves dlogits = (softmax - onehot) / (B*T) in a->dlogits and
 * the mean loss in *loss. EINVAL for a token or target outside the vocabulary. */
kt_status kt__gpt_unit_forward(const kt_chunk *c, int unit, const kt__gpt_rows *r, kt__gpt_acts *a,
                               kt__gpt_scratch *s, float *out, const int *targets, double *loss,
                               kt_error *err);
/* Input gradient of one unit: reads a->dout (unused by the head), writes
 * din (B,T,C) (may be NULL for the embed), fills the wgrad fields. */
void kt__gpt_unit_backward_input(const kt_chunk *c, int unit, const kt__gpt_rows *r,
                                 kt__gpt_acts *a, kt__gpt_scratch *s, float *din);
/* Weight gradient of one unit: accumulates into c->grads; for the head,
 * dheadw (when non-NULL) receives the LM head's gradient instead. */
void kt__gpt_unit_backward_weight(const kt_chunk *c, int unit, const kt__gpt_rows *r,
                                  const kt__gpt_acts *a, float *dheadw);

#endif
