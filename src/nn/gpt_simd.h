/* Internal to src/nn/: what the vectorised kernel files share (included
 * by .c files only, after their other headers): fused multiply-adds,
 * the SIMD clones, the 8-float vector type and the row helpers, all
 * always inlined so that each clone gets its own copy. */
#ifndef KAITEN_NN_GPT_SIMD_H
#define KAITEN_NN_GPT_SIMD_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "nn/gpt.h"

/* Let a * b + c become one fused multiply-add where the target has it (the
 * AVX2 and AVX-512 clones below): ISO C mode (-std=c11) otherwise keeps every
 * multiply and add apart, which nearly doubles the work of the polynomial
 * and Newton steps in exp, sigmoid and GELU. Results stay deterministic for a
 * given machine (every rank runs the same clone). */
#if defined(__clang__)
#pragma clang fp contract(fast)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=fast")
#endif

/* With GCC on x86-64 the element-wise kernels are built three times, for
 * AVX-512 (x86-64-v4: one KT__VB block is one register), AVX2 + FMA
 * (x86-64-v3) and the baseline, and the loader picks one (ifunc); the
 * baseline build otherwise stays at SSE2. Elsewhere they are plain C. Not
 * under ThreadSanitizer: an ifunc resolver runs before its runtime is up. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define SIMD_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
#endif
#ifndef SIMD_CLONES
#define SIMD_CLONES
#define KERNEL_ISA_FIXED "portable"
#endif

/* Row helpers are inlined early, before cloning, so each clone gets its own. */
#ifdef __GNUC__
#define ROW static inline __attribute__((always_inline))
#else
#define ROW static inline
#endif

/* ---- row helpers ---------------------------------------------------------- *
 * Element-wise loops run in blocks of KT__VB on restrict pointers (then a
 * scalar tail), which GCC's vectoriser takes at each clone's full width.
 * Reductions and masked loops it does not take reliably (on short rows it
 * vectorises the block loop itself, or falls back to scalar code), so those
 * work on `vf`, VL = 8 floats as a GCC/Clang vector: one AVX2 register, half
 * an AVX-512 one, two SSE ones. Not 16: GCC (12) has no AVX2 lowering for a
 * comparison of 16-lane vectors and turns every lane of one into a scalar
 * compare through the stack, which made the AVX2 clone's softmax and
 * cross-entropy several times slower than its arithmetic. Partial sums stay
 * per lane and fold in a tree of halves at the end. */

#define VL 8
_Static_assert(KT__VB % VL == 0, "a KT__VB block is whole vf");
/* vf never crosses a call (the helpers are always inlined, and none takes a
 * vf by value): no ABI to warn of */
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wpsabi"
#elif defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif
typedef float vf __attribute__((vector_size(VL * sizeof(float))));
typedef int32_t vi __attribute__((vector_size(VL * sizeof(int32_t))));

ROW vf vload(const float *p) {
  vf v;
  memcpy(&v, p, sizeof v);
  return v;
}

ROW void vstore(float *p, const vf *v) { memcpy(p, v, sizeof *v); }

ROW vf vsplat(float x) { return (vf){0} + x; }

/* lanes(base) < n: which lanes of the block at base lie before index n */
ROW vi lanes_before(int base, int n) {
  vi lane = {0, 1, 2, 3, 4, 5, 6, 7};
  return lane < (vi){0} + (n - base);
}

/* a where mask, else b (mask lanes are all ones or all zeros); a macro
 * because passing vectors by value draws GCC's ABI notes */
#define VSELECT(mask, a, b) ((vf)(((vi)(a) & (mask)) | ((vi)(b) & ~(mask))))

/* acc = max(acc, x), lane by lane */
ROW void vmax_into(vf *acc, const vf *x) { *acc = VSELECT(*x > *acc, *x, *acc); }

/* The folds halve the vector twice (8 -> 4 lanes as vectors, then 2 and 1
 * as scalars): a dependency chain of four steps, not eight. */
typedef float vf4 __attribute__((vector_size(4 * sizeof(float))));
typedef int32_t vi4 __attribute__((vector_size(4 * sizeof(int32_t))));

ROW float fold_sum(const vf *v) {
  vf4 a, b;
  memcpy(&a, v, sizeof a);
  memcpy(&b, (const char *)v + sizeof a, sizeof b);
  vf4 s4 = a + b;
  return (s4[0] + s4[2]) + (s4[1] + s4[3]);
}

/* Sums over a row kept in CHAINS partial vectors: one vector's chain of
 * adds waits an add's latency each step, so a 256-float row's single chain
 * made the LayerNorm backward's first pass wait on it (half its time). */
#define CHAINS 4

ROW float fold_chains(vf *v) {
  _Static_assert(CHAINS == 4, "fold_chains adds four chains");
  vf s = (v[0] + v[1]) + (v[2] + v[3]);
  return fold_sum(&s);
}

ROW float fold_max(const vf *v) {
  vf4 a, b;
  memcpy(&a, v, sizeof a);
  memcpy(&b, (const char *)v + sizeof a, sizeof b);
  vi4 m4 = a > b;
  vf4 x4 = (vf4)(((vi4)a & m4) | ((vi4)b & ~m4));
  float p = x4[0] > x4[2] ? x4[0] : x4[2], q = x4[1] > x4[3] ? x4[1] : x4[3];
  return p > q ? p : q;
}

ROW float row_sum(const float *restrict x, int n) {
  vf acc = {0}, acc2 = {0}; /* two chains: an add's latency is several cycles */
  float s = 0.0f;
  int i = 0;
  for (; i + 2 * VL <= n; i += 2 * VL) acc += vload(x + i), acc2 += vload(x + i + VL);
  for (; i < n; i++) s += x[i];
  acc += acc2;
  return s + fold_sum(&acc);
}

ROW float row_max(const float *restrict x, int n) {
  vf acc = vsplat(-INFINITY);
  float m = -INFINITY;
  int i = 0;
  for (; i + VL <= n; i += VL) {
    vf v = vload(x + i);
    vmax_into(&acc, &v);
  }
  for (; i < n; i++) m = x[i] > m ? x[i] : m;
  float am = fold_max(&acc);
  return am > m ? am : m;
}

/* x = 0 (short rows: whole-block stores rather than a memset call) */
ROW void row_zero(float *restrict x, int n) {
  vf z = {0};
  int i = 0;
  for (; i + VL <= n; i += VL) vstore(x + i, &z);
  for (; i < n; i++) x[i] = 0.0f;
}

/* x *= a */
ROW void row_scale(float *restrict x, float a, int n) {
  int i = 0;
  for (; i + KT__VB <= n; i += KT__VB)
    for (int j = 0; j < KT__VB; j++) x[i + j] *= a;
  for (; i < n; i++) x[i] *= a;
}

/* y += x */
ROW void row_add(float *restrict y, const float *restrict x, int n) {
  int i = 0;
  for (; i + KT__VB <= n; i += KT__VB)
    for (int j = 0; j < KT__VB; j++) y[i + j] += x[i + j];
  for (; i < n; i++) y[i] += x[i];
}

/* o = a + b */
ROW void row_sum2(float *restrict o, const float *restrict a, const float *restrict b, int n) {
  int i = 0;
  for (; i + KT__VB <= n; i += KT__VB)
    for (int j = 0; j < KT__VB; j++) o[i + j] = a[i + j] + b[i + j];
  for (; i < n; i++) o[i] = a[i] + b[i];
}

/* y = x (rows of a few hundred floats: an inline loop beats a memcpy call) */
ROW void row_copy(float *restrict y, const float *restrict x, int n) {
  int i = 0;
  for (; i + KT__VB <= n; i += KT__VB)
    for (int j = 0; j < KT__VB; j++) y[i + j] = x[i + j];
  for (; i < n; i++) y[i] = x[i];
}

/* ---- GELU (tanh approximation) ------------------------------------------- */

#define GELU_K 0.7978845608028654f /* sqrt(2 / pi) */
#define GELU_A 0.044715f

/* sigmoid(z) = 1 / (1 + exp(-z)) from e = exp(-|z|), which lies in (0, 1]:
 * sigmoid(z) = 1/(1 + e) and 1 - sigmoid(z) = e/(1 + e) for z >= 0, the
 * other way round below; returning both spares the derivative the
 * cancellation of 1 - sigmoid. The sign is read from the float's bits, a
 * select the vectoriser takes. The reciprocal is a division: these loops
 * are bound by the latency of their dependency chain, not by throughput,
 * and one vdivps is a shorter chain than the three Newton steps from a
 * linear guess it replaced (8 dependent multiply-adds; on a Zen 3 the
 * GELU forward with its derivative went from 1.67 to 1.29 ns a float). */
static inline float recip_one_plus(float e) { return 1.0f / (1.0f + e); }

static inline float sigmoid(float z, float *complement) {
  float e = kt__fast_expf(-fabsf(z)), r = recip_one_plus(e);
  int32_t zi;
  memcpy(&zi, &z, sizeof zi);
  *complement = zi < 0 ? r : e * r;
  return zi < 0 ? e * r : r;
}

/* 0.5 (1 + tanh(u)) = sigmoid(2u), so gelu(x) = x sigmoid(2u) with
 * u = GELU_K (x + GELU_A x^3), and
 * gelu'(x) = sig + x sig (1 - sig) 2 du/dx with sig = sigmoid(2u). */
static inline float gelu_with_grad(float x, float *grad) {
  float one_minus;
  float sig = sigmoid(2.0f * GELU_K * (x + GELU_A * x * x * x), &one_minus);
  *grad = sig + x * sig * one_minus * 2.0f * GELU_K * (1.0f + 3.0f * GELU_A * x * x);
  return x * sig;
}

#endif
