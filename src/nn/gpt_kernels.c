/* GPT kernels: embedding, LayerNorm, linear layers, GELU, attention and
 * softmax cross-entropy. Every matmul goes through kt__matmul.
 * Legend: B = batch, T = time, C = channels, OC = output channels,
 * N = B * T rows, V = vocabulary, NH = heads, hs = C / NH head size.
 * Backward kernels accumulate (+=). */
#include <math.h>
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

#define LN_EPS 1e-5f

/* With GCC on x86-64 the element-wise kernels are built three times, for
 * AVX-512 (x86-64-v4: one KT__VB block is one register), AVX2 + FMA
 * (x86-64-v3) and the baseline, and the loader picks one (ifunc); the
 * baseline build otherwise stays at SSE2. Elsewhere they are plain C. Not
 * under ThreadSanitizer: an ifunc resolver runs before its runtime is up. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define SIMD_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
#endif
#ifndef SIMD_CLONES
#define SIMD_CLONES
#define KERNEL_ISA_FIXED "portable"
#endif

/* The resolver GCC emits for target_clones takes the highest level the CPU
 * supports, in the order listed: the same checks, asked here. */
const char *kt_kernel_isa(void) {
#ifdef KERNEL_ISA_FIXED
  return KERNEL_ISA_FIXED;
#else
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v4")) return "x86-64-v4";
  if (__builtin_cpu_supports("x86-64-v3")) return "x86-64-v3";
  return "baseline";
#endif
}
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

/* ---- embedding ---------------------------------------------------------- */

/* o = a + b */
ROW void row_sum2(float *restrict o, const float *restrict a, const float *restrict b, int n) {
  int i = 0;
  for (; i + KT__VB <= n; i += KT__VB)
    for (int j = 0; j < KT__VB; j++) o[i + j] = a[i + j] + b[i + j];
  for (; i < n; i++) o[i] = a[i] + b[i];
}

SIMD_CLONES void kt__encoder_forward(float *out, const int *tokens, const float *wte,
                                     const float *wpe, int B, int T, int C) {
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++)
      row_sum2(out + ((size_t)b * T + t) * C, wte + (size_t)tokens[b * T + t] * C,
               wpe + (size_t)t * C, C);
}

SIMD_CLONES void kt__encoder_backward(float *dwte, float *dwpe, const float *dout,
                                      const int *tokens, int B, int T, int C) {
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++) {
      const float *d = dout + ((size_t)b * T + t) * C; /* (C) */
      row_add(dwte + (size_t)tokens[b * T + t] * C, d, C);
      row_add(dwpe + (size_t)t * C, d, C);
    }
}

/* ---- LayerNorm ---------------------------------------------------------- */

ROW void ln_row_forward(float *restrict o, const float *restrict x, const float *restrict w,
                        const float *restrict b, float *m_out, float *s_out, int C) {
  float m = row_sum(x, C) / (float)C;
  vf dev = {0};
  float v = 0.0f;
  int i = 0;
  for (; i + VL <= C; i += VL) {
    vf c = vload(x + i) - m;
    dev += c * c;
  }
  for (; i < C; i++) v += (x[i] - m) * (x[i] - m);
  v += fold_sum(&dev);
  float s = 1.0f / sqrtf(v / (float)C + LN_EPS);
  for (i = 0; i + KT__VB <= C; i += KT__VB)
    for (int j = 0; j < KT__VB; j++) o[i + j] = (x[i + j] - m) * s * w[i + j] + b[i + j];
  for (; i < C; i++) o[i] = (x[i] - m) * s * w[i] + b[i];
  *m_out = m;
  *s_out = s;
}

SIMD_CLONES void kt__layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                                       const float *weight, const float *bias, int N, int C) {
  for (int n = 0; n < N; n++)
    ln_row_forward(out + (size_t)n * C, inp + (size_t)n * C, weight, bias, &mean[n], &rstd[n], C);
}

/* dnorm = weight * dout, norm = (x - mean) * rstd;
 * dx = dres + (dnorm - mean(dnorm) - norm * mean(dnorm * norm)) * rstd,
 * dw += norm * dout, db += dout: one pass for the two means, one for the rest */
ROW void ln_row_backward(float *restrict dx, float *restrict dw, float *restrict db,
                         const float *restrict dres, const float *restrict d,
                         const float *restrict x, const float *restrict w, float m, float s, int C) {
  vf pa = {0}, pb = {0};
  float a = 0.0f, b = 0.0f;
  int i = 0;
  for (; i + VL <= C; i += VL) {
    vf dnorm = vload(w + i) * vload(d + i);
    pa += dnorm;
    pb += dnorm * (vload(x + i) - m);
  }
  for (; i < C; i++) {
    a += w[i] * d[i];
    b += w[i] * d[i] * (x[i] - m);
  }
  a += fold_sum(&pa);
  b += fold_sum(&pb);
  float ca = a / (float)C, cb = b * s / (float)C; /* mean(dnorm), mean(dnorm * norm) */
  for (i = 0; i + KT__VB <= C; i += KT__VB)
    for (int j = 0; j < KT__VB; j++) {
      float norm = (x[i + j] - m) * s;
      float g = (w[i + j] * d[i + j] - ca - norm * cb) * s;
      dx[i + j] = dres ? dres[i + j] + g : g;
      dw[i + j] += norm * d[i + j];
      db[i + j] += d[i + j];
    }
  for (; i < C; i++) {
    float norm = (x[i] - m) * s;
    float g = (w[i] * d[i] - ca - norm * cb) * s;
    dx[i] = dres ? dres[i] + g : g;
    dw[i] += norm * d[i];
    db[i] += d[i];
  }
}

SIMD_CLONES void kt__layernorm_backward(float *dinp, float *dweight, float *dbias,
                                        const float *dres, const float *dout, const float *inp,
                                        const float *weight, const float *mean, const float *rstd,
                                        int N, int C) {
  for (int n = 0; n < N; n++) {
    size_t r = (size_t)n * C;
    ln_row_backward(dinp + r, dweight, dbias, dres ? dres + r : NULL, dout + r, inp + r, weight,
                    mean[n], rstd[n], C);
  }
}

/* ---- linear layers -------------------------------------------------------- */

/* y = x (rows of a few hundred floats: an inline loop beats a memcpy call) */
ROW void row_copy(float *restrict y, const float *restrict x, int n) {
  int i = 0;
  for (; i + KT__VB <= n; i += KT__VB)
    for (int j = 0; j < KT__VB; j++) y[i + j] = x[i + j];
  for (; i < n; i++) y[i] = x[i];
}

SIMD_CLONES void kt__matmul_forward(float *out, const float *inp, const float *weight,
                                    const float *bias, int N, int C, int OC) {
  if (bias)
    for (int n = 0; n < N; n++) row_copy(out + (size_t)n * OC, bias, OC);
  kt__matmul(out, inp, weight, N, OC, C, 0, 1, bias ? 1.0f : 0.0f);
}

SIMD_CLONES void kt__matmul_residual_forward(float *out, const float *inp, const float *weight,
                                             const float *bias, const float *residual, int N, int C,
                                             int OC) {
  for (int n = 0; n < N; n++) row_sum2(out + (size_t)n * OC, residual + (size_t)n * OC, bias, OC);
  kt__matmul(out, inp, weight, N, OC, C, 0, 1, 1.0f);
}

void kt__matmul_backward_input(float *dinp, const float *dout, const float *weight, int N, int C,
                               int OC, int accumulate) {
  kt__matmul(dinp, dout, weight, N, C, OC, 0, 0, accumulate ? 1.0f : 0.0f);
}

void kt__matmul_backward_weight(float *dweight, const float *dout, const float *inp, int N, int C,
                                int OC) {
  kt__matmul(dweight, dout, inp, OC, C, N, 1, 0, 1.0f);
}

SIMD_CLONES void kt__bias_backward(float *dbias, const float *dout, int N, int OC) {
  for (int n = 0; n < N; n++) row_add(dbias, dout + (size_t)n * OC, OC);
}

/* ---- GELU (tanh approximation) --------------------------------------------- */

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

/* sigmoid(z) alone. Not sigmoid() with the complement dropped: with only
 * `zi < 0 ? e * r : r` left, GCC branches on the sign (the product may
 * not be speculated under -ftrapping-math) and leaves the loop scalar, 6x
 * slower; here the product is always taken and a bit mask selects. */
static inline float sigmoid_only(float z) {
  float e = kt__fast_expf(-fabsf(z)), r = recip_one_plus(e), er = e * r, sig;
  int32_t zi, ri, eri;
  memcpy(&zi, &z, sizeof zi);
  memcpy(&ri, &r, sizeof ri);
  memcpy(&eri, &er, sizeof eri);
  int32_t neg = zi >> 31, bits = (eri & neg) | (ri & ~neg);
  memcpy(&sig, &bits, sizeof sig);
  return sig;
}

/* The GELU loops take two vector blocks an iteration: each element is one
 * long dependency chain (exp, reciprocal, derivative), and two independent
 * chains keep more of the core busy (1.49 against 1.67 ns a float, AVX2). */
#define GELU_BLOCK (2 * KT__VB)

/* 0.5 (1 + tanh(u)) = sigmoid(2u), so gelu(x) = x sigmoid(2u) with
 * u = GELU_K (x + GELU_A x^3), and
 * gelu'(x) = sig + x sig (1 - sig) 2 du/dx with sig = sigmoid(2u). */
static inline float gelu_with_grad(float x, float *grad) {
  float one_minus;
  float sig = sigmoid(2.0f * GELU_K * (x + GELU_A * x * x * x), &one_minus);
  *grad = sig + x * sig * one_minus * 2.0f * GELU_K * (1.0f + 3.0f * GELU_A * x * x);
  return x * sig;
}

static inline float gelu(float x) {
  return x * sigmoid_only(2.0f * GELU_K * (x + GELU_A * x * x * x));
}

static inline float gelu_grad(float x) {
  float grad;
  gelu_with_grad(x, &grad);
  return grad;
}

SIMD_CLONES void kt__gelu_forward(float *restrict out, const float *restrict inp, size_t N) {
  size_t i = 0;
  for (; i + GELU_BLOCK <= N; i += GELU_BLOCK)
    for (size_t j = 0; j < GELU_BLOCK; j++) out[i + j] = gelu(inp[i + j]);
  for (; i < N; i++) out[i] = gelu(inp[i]);
}

SIMD_CLONES void kt__gelu_backward(float *restrict dinp, const float *restrict inp,
                                       const float *restrict dout, size_t N) {
  size_t i = 0;
  for (; i + GELU_BLOCK <= N; i += GELU_BLOCK)
    for (size_t j = 0; j < GELU_BLOCK; j++) dinp[i + j] += gelu_grad(inp[i + j]) * dout[i + j];
  for (; i < N; i++) dinp[i] += gelu_grad(inp[i]) * dout[i];
}

SIMD_CLONES void kt__gelu_forward_grad(float *restrict out, float *restrict grad,
                                       const float *restrict inp, size_t N) {
  size_t i = 0;
  for (; i + GELU_BLOCK <= N; i += GELU_BLOCK)
    for (size_t j = 0; j < GELU_BLOCK; j++) out[i + j] = gelu_with_grad(inp[i + j], &grad[i + j]);
  for (; i < N; i++) out[i] = gelu_with_grad(inp[i], &grad[i]);
}

/* d *= grad; db += d */
ROW void gelu_row_backward(float *restrict d, float *restrict db, const float *restrict grad,
                           int n) {
  int i = 0;
  for (; i + KT__VB <= n; i += KT__VB)
    for (int j = 0; j < KT__VB; j++) {
      d[i + j] *= grad[i + j];
      db[i + j] += d[i + j];
    }
  for (; i < n; i++) {
    d[i] *= grad[i];
    db[i] += d[i];
  }
}

SIMD_CLONES void kt__gelu_backward_saved(float *d, float *dbias, const float *grad, int N,
                                         int OC) {
  for (int n = 0; n < N; n++)
    gelu_row_backward(d + (size_t)n * OC, dbias, grad + (size_t)n * OC, OC);
}

/* ---- softmax cross-entropy -------------------------------------------------- */

/* x[i] = exp(x[i] * scale - shift) in place */
ROW void row_exp(float *restrict x, int n, float scale, float shift) {
  int i = 0;
  for (; i + KT__VB <= n; i += KT__VB)
    for (int j = 0; j < KT__VB; j++) x[i + j] = kt__fast_expf(x[i + j] * scale - shift);
  for (; i < n; i++) x[i] = kt__fast_expf(x[i] * scale - shift);
}

SIMD_CLONES double kt__crossentropy_forward(float *dlogits, const float *logits, const int *targets,
                                            int N, int V, float dscale) {
  double loss = 0.0;
  for (int n = 0; n < N; n++) {
    const float *l = logits + (size_t)n * V; /* (V) */
    float *d = dlogits + (size_t)n * V;      /* (V), may alias l */
    int y = targets[n];
    float max = row_max(l, V);
    float ly = l[y];
    if (d != l) memcpy(d, l, sizeof(float) * (size_t)V);
    row_exp(d, V, 1.0f, max);
    float sum = row_sum(d, V);
    loss += (double)max + log((double)sum) - (double)ly;
    row_scale(d, dscale / sum, V);
    d[y] -= dscale;
  }
  return loss;
}

/* ---- causal self-attention -------------------------------------------------- *
 * Each head's q, k and v are column slices of the (B,T,3C) qkv rows; the
 * matmuls read them (and write the output and the input gradient) in place
 * through row strides, so no head is ever copied out; each head's slice of
 * the input gradient is written by exactly one matmul, so the backward
 * overwrites it (beta = 0) and nothing needs zeroing first. The softmax rows run
 * in whole vf (VL floats) up to the diagonal's, masking by index there (no
 * scalar tail unless T itself is not a multiple of VL). */

/* Blocks of row u < n cover [0, vend): n rounded up to VL, not past the
 * last whole block of the row; [vend, n) is the scalar tail. */
static inline int causal_vend(int n, int T) {
  int up = (n + VL - 1) / VL * VL, whole = T / VL * VL;
  return up < whole ? up : whole;
}

/* y[i] = exp(x[i] * scale - shift) */
ROW void row_exp_to(float *restrict y, const float *restrict x, int n, float scale, float shift) {
  int i = 0;
  for (; i + VL <= n; i += VL)
    for (int j = 0; j < VL; j++) y[i + j] = kt__fast_expf(x[i + j] * scale - shift);
  for (; i < n; i++) y[i] = kt__fast_expf(x[i] * scale - shift);
}

/* s (T): raw scores q.k in [0, n), n = t + 1; row (T) receives their
 * softmax (of scale * scores) there and 0 above the diagonal */
ROW void softmax_causal_row(float *restrict row, const float *restrict s, int n, int T,
                            float scale) {
  int vend = causal_vend(n, T), end = vend > n ? vend : n, i;
  vf vm = vsplat(-INFINITY), vs = {0};
  float m = -INFINITY, sum = 0.0f;
  for (i = 0; i < vend; i += VL) {
    vf v = VSELECT(lanes_before(i, n), vload(s + i), vsplat(-INFINITY));
    vmax_into(&vm, &v);
  }
  for (; i < n; i++) m = s[i] > m ? s[i] : m;
  float vmx = fold_max(&vm);
  m = vmx > m ? vmx : m;
  row_exp_to(row, s, end, scale, m * scale); /* lanes past n: finite scores, masked next */
  for (i = 0; i < vend; i += VL) {
    vf e = VSELECT(lanes_before(i, n), vload(row + i), vsplat(0.0f));
    vstore(row + i, &e);
    vs += e;
  }
  for (; i < n; i++) sum += row[i];
  row_scale(row, 1.0f / (sum + fold_sum(&vs)), end);
  row_zero(row + end, T - end);
}

/* d (T): gradient of the probabilities a (T) of row t (n = t + 1); on return
 * the gradient of the raw scores: scale * a * (d - sum(a * d)), 0 above the
 * diagonal (d there is never read as a number) */
ROW void softmax_causal_row_backward(float *restrict d, const float *restrict a, int n, int T,
                                     float scale) {
  int vend = causal_vend(n, T), end = vend > n ? vend : n, i;
  vf vd = {0};
  float dot = 0.0f;
  for (i = 0; i < vend; i += VL)
    vd += VSELECT(lanes_before(i, n), vload(a + i) * vload(d + i), vsplat(0.0f));
  for (; i < n; i++) dot += a[i] * d[i];
  dot += fold_sum(&vd);
  for (i = 0; i < vend; i += VL) {
    vf g = scale * vload(a + i) * (vload(d + i) - dot);
    g = VSELECT(lanes_before(i, n), g, vsplat(0.0f));
    vstore(d + i, &g);
  }
  for (; i < n; i++) d[i] = scale * a[i] * (d[i] - dot);
  row_zero(d + end, T - end);
}

size_t kt__attention_scratch_floats(int T) { return (size_t)T * T; }

/* The scores of a head go to scratch, which stays in cache, and only the
 * probabilities to att, row by row (sgemm writing att's cold lines itself
 * was the slowest matmul of the step). The backward reads each head's att
 * in the softmax first, so the matmul that reads it again finds it cached. */
SIMD_CLONES void kt__attention_forward(float *out, float *att, float *scratch, const float *inp,
                                       int B, int T, int C, int NH) {
  int hs = C / NH;
  float scale = 1.0f / sqrtf((float)hs);
  float *sc = scratch; /* (T,T) */
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++) {
      const float *q = inp + (size_t)b * T * 3 * C + (size_t)h * hs; /* (T,hs), stride 3C */
      const float *k = q + C, *v = q + 2 * (size_t)C;                /* (T,hs), stride 3C */
      float *a = att + ((size_t)b * NH + h) * (size_t)T * T;         /* (T,T) */
      float *y = out + (size_t)b * T * C + (size_t)h * hs;           /* (T,hs), stride C */
      kt__matmul_ld(sc, T, q, 3 * C, k, 3 * C, T, T, hs, 0, 1, 0.0f); /* q k^T */
      for (int t = 0; t < T; t++)
        softmax_causal_row(a + (size_t)t * T, sc + (size_t)t * T, t + 1, T, scale);
      kt__matmul_ld(y, C, a, T, v, 3 * C, T, hs, T, 0, 0, 0.0f); /* att v */
    }
}

SIMD_CLONES void kt__attention_backward(float *dinp, float *scratch, const float *dout,
                                        const float *inp, const float *att, int B, int T, int C,
                                        int NH) {
  int hs = C / NH;
  float scale = 1.0f / sqrtf((float)hs);
  float *datt = scratch; /* (T,T) */
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++) {
      size_t off = (size_t)b * T * 3 * C + (size_t)h * hs;
      const float *q = inp + off, *k = q + C, *v = q + 2 * (size_t)C; /* stride 3C */
      float *dq = dinp + off, *dk = dq + C, *dv = dq + 2 * (size_t)C;  /* stride 3C */
      const float *a = att + ((size_t)b * NH + h) * (size_t)T * T;     /* (T,T) */
      const float *dy = dout + (size_t)b * T * C + (size_t)h * hs;     /* (T,hs), stride C */
      kt__matmul_ld(datt, T, dy, C, v, 3 * C, T, T, hs, 0, 1, 0.0f); /* dy v^T */
      for (int t = 0; t < T; t++)
        softmax_causal_row_backward(datt + (size_t)t * T, a + (size_t)t * T, t + 1, T, scale);
      kt__matmul_ld(dv, 3 * C, a, T, dy, C, T, hs, T, 1, 0, 0.0f); /* att^T dy */
      kt__matmul_ld(dq, 3 * C, datt, T, k, 3 * C, T, hs, T, 0, 0, 0.0f); /* dS k */
      kt__matmul_ld(dk, 3 * C, datt, T, q, 3 * C, T, hs, T, 1, 0, 0.0f); /* dS^T q */
    }
}
