/* GPT kernels: embedding, LayerNorm, linear layers, GELU and softmax
 * cross-entropy (attention: gpt_attention.c). Every matmul goes through
 * kt__matmul.
 * Legend: B = batch, T = time, C = channels, OC = output channels,
 * N = B * T rows, V = vocabulary, NH = heads, hs = C / NH head size.
 * Backward kernels accumulate (+=). */
#include <math.h>
#include <string.h>

#include "nn/gpt_simd.h"

#define LN_EPS 1e-5f

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
/* ---- embedding ---------------------------------------------------------- */
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

SIMD_CLONES void kt__encoder_forward_pos(float *out, const int *tokens, const int *pos,
                                         const float *wte, const float *wpe, int N, int C) {
  for (int i = 0; i < N; i++)
    row_sum2(out + (size_t)i * C, wte + (size_t)tokens[i] * C, wpe + (size_t)pos[i] * C, C);
}

SIMD_CLONES void kt__encoder_backward_pos(float *dwte, float *dwpe, const float *dout,
                                          const int *tokens, const int *pos, int N, int C) {
  for (int i = 0; i < N; i++) {
    const float *d = dout + (size_t)i * C; /* (C) */
    row_add(dwte + (size_t)tokens[i] * C, d, C);
    row_add(dwpe + (size_t)pos[i] * C, d, C);
  }
}

/* ---- LayerNorm ---------------------------------------------------------- */

ROW void ln_row_forward(float *restrict o, const float *restrict x, const float *restrict w,
                        const float *restrict b, float *m_out, float *s_out, int C) {
  float m = row_sum(x, C) / (float)C;
  vf dev[CHAINS] = {{0}};
  float v = 0.0f;
  int i = 0;
  for (; i + CHAINS * VL <= C; i += CHAINS * VL)
#pragma GCC unroll 4
    for (int u = 0; u < CHAINS; u++) {
      vf c = vload(x + i + u * VL) - m;
      dev[u] += c * c;
    }
  for (; i + VL <= C; i += VL) {
    vf c = vload(x + i) - m;
    dev[0] += c * c;
  }
  for (; i < C; i++) v += (x[i] - m) * (x[i] - m);
  v += fold_chains(dev);
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
                         const float *restrict x, const float *restrict w, float m, float s,
                         int C) {
  vf pa[CHAINS] = {{0}}, pb[CHAINS] = {{0}}; /* each a chain of its own: see CHAINS */
  float a = 0.0f, b = 0.0f;
  int i = 0;
  for (; i + CHAINS * VL <= C; i += CHAINS * VL)
#pragma GCC unroll 4
    for (int u = 0; u < CHAINS; u++) {
      vf dnorm = vload(w + i + u * VL) * vload(d + i + u * VL);
      pa[u] += dnorm;
      pb[u] += dnorm * (vload(x + i + u * VL) - m);
    }
  for (; i + VL <= C; i += VL) {
    vf dnorm = vload(w + i) * vload(d + i);
    pa[0] += dnorm;
    pb[0] += dnorm * (vload(x + i) - m);
  }
  for (; i < C; i++) {
    a += w[i] * d[i];
    b += w[i] * d[i] * (x[i] - m);
  }
  a += fold_chains(pa);
  b += fold_chains(pb);
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

SIMD_CLONES void kt__gelu_backward_saved(float *d, float *dbias, const float *grad, int N, int OC) {
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
