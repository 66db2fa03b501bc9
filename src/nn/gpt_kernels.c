/* GPT kernels: embedding, LayerNorm, linear layers, GELU, attention and
 * softmax cross-entropy. Every matmul goes through kt__matmul.
 * Legend: B = batch, T = time, C = channels, OC = output channels,
 * N = B * T rows, V = vocabulary, NH = heads, hs = C / NH head size.
 * Backward kernels accumulate (+=). */
#include <math.h>
#include <string.h>

#include "nn/gpt.h"

#define LN_EPS 1e-5f

/* With GCC on x86-64 the element-wise kernels are built twice, for AVX2 + FMA
 * (x86-64-v3) and for the baseline, and the loader picks one (ifunc); the
 * baseline build otherwise stays at SSE2. Elsewhere they are plain C. Not
 * under ThreadSanitizer: an ifunc resolver runs before its runtime is up. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_THREAD__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define SIMD_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#endif
#endif
#ifndef SIMD_CLONES
#define SIMD_CLONES
#endif
/* Row helpers are inlined early, before cloning, so each clone gets its own. */
#ifdef __GNUC__
#define ROW static inline __attribute__((always_inline))
#else
#define ROW static inline
#endif

/* ---- row helpers ---------------------------------------------------------- *
 * -O2's "very cheap" vectoriser takes loops of a fixed trip count and no
 * alias checks, so hot loops run in blocks of KT__VB (then a scalar tail) on
 * restrict pointers; reductions keep KT__VB partial sums (float addition is
 * not reassociated otherwise). */

ROW float row_sum(const float *restrict x, int n) {
  float part[KT__VB] = {0}, s = 0.0f;
  int i = 0;
  for (; i + KT__VB <= n; i += KT__VB)
    for (int j = 0; j < KT__VB; j++) part[j] += x[i + j];
  for (; i < n; i++) s += x[i];
  for (int j = 0; j < KT__VB; j++) s += part[j];
  return s;
}

ROW float row_dot(const float *restrict x, const float *restrict y, int n) {
  float part[KT__VB] = {0}, s = 0.0f;
  int i = 0;
  for (; i + KT__VB <= n; i += KT__VB)
    for (int j = 0; j < KT__VB; j++) part[j] += x[i + j] * y[i + j];
  for (; i < n; i++) s += x[i] * y[i];
  for (int j = 0; j < KT__VB; j++) s += part[j];
  return s;
}

ROW float row_max(const float *restrict x, int n) {
  float part[KT__VB], m = x[0];
  for (int j = 0; j < KT__VB; j++) part[j] = x[0];
  int i = 0;
  for (; i + KT__VB <= n; i += KT__VB)
    for (int j = 0; j < KT__VB; j++) part[j] = x[i + j] > part[j] ? x[i + j] : part[j];
  for (; i < n; i++) m = x[i] > m ? x[i] : m;
  for (int j = 0; j < KT__VB; j++) m = part[j] > m ? part[j] : m;
  return m;
}

/* x *= a */
ROW void row_scale(float *restrict x, float a, int n) {
  int i = 0;
  for (; i + KT__VB <= n; i += KT__VB)
    for (int j = 0; j < KT__VB; j++) x[i + j] *= a;
  for (; i < n; i++) x[i] *= a;
}

/* y = x (short rows: an inline loop beats a memcpy call) */
ROW void row_copy(float *restrict y, const float *restrict x, int n) {
  int i = 0;
  for (; i + KT__VB <= n; i += KT__VB)
    for (int j = 0; j < KT__VB; j++) y[i + j] = x[i + j];
  for (; i < n; i++) y[i] = x[i];
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
  float dev[KT__VB] = {0}, v = 0.0f;
  int i = 0;
  for (; i + KT__VB <= C; i += KT__VB)
    for (int j = 0; j < KT__VB; j++) dev[j] += (x[i + j] - m) * (x[i + j] - m);
  for (; i < C; i++) v += (x[i] - m) * (x[i] - m);
  for (int j = 0; j < KT__VB; j++) v += dev[j];
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

/* dnorm = weight * dout; dx += (dnorm - mean(dnorm) - norm * mean(dnorm * norm)) * rstd */
ROW void ln_row_backward(float *restrict dx, float *restrict dw, float *restrict db,
                         const float *restrict d, const float *restrict x, const float *restrict w,
                         float m, float s, int C) {
  float p1[KT__VB] = {0}, p2[KT__VB] = {0}, a = 0.0f, b = 0.0f;
  int i = 0;
  for (; i + KT__VB <= C; i += KT__VB)
    for (int j = 0; j < KT__VB; j++) {
      float dnorm = w[i + j] * d[i + j];
      p1[j] += dnorm;
      p2[j] += dnorm * (x[i + j] - m) * s;
    }
  for (; i < C; i++) {
    a += w[i] * d[i];
    b += w[i] * d[i] * (x[i] - m) * s;
  }
  for (int j = 0; j < KT__VB; j++) a += p1[j], b += p2[j];
  float dnorm_mean = a / (float)C, dnorm_norm_mean = b / (float)C;
  for (i = 0; i + KT__VB <= C; i += KT__VB)
    for (int j = 0; j < KT__VB; j++)
      dx[i + j] += (w[i + j] * d[i + j] - dnorm_mean - (x[i + j] - m) * s * dnorm_norm_mean) * s;
  for (; i < C; i++) dx[i] += (w[i] * d[i] - dnorm_mean - (x[i] - m) * s * dnorm_norm_mean) * s;
  if (dw) {
    for (i = 0; i + KT__VB <= C; i += KT__VB)
      for (int j = 0; j < KT__VB; j++) dw[i + j] += (x[i + j] - m) * s * d[i + j];
    for (; i < C; i++) dw[i] += (x[i] - m) * s * d[i];
  }
  if (db) row_add(db, d, C);
}

SIMD_CLONES void kt__layernorm_backward(float *dinp, float *dweight, float *dbias,
                                        const float *dout, const float *inp, const float *weight,
                                        const float *mean, const float *rstd, int N, int C) {
  for (int n = 0; n < N; n++)
    ln_row_backward(dinp + (size_t)n * C, dweight, dbias, dout + (size_t)n * C, inp + (size_t)n * C,
                    weight, mean[n], rstd[n], C);
}

/* ---- linear layers -------------------------------------------------------- */

void kt__matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int N,
                        int C, int OC) {
  if (bias)
    for (int n = 0; n < N; n++) memcpy(out + (size_t)n * OC, bias, sizeof(float) * (size_t)OC);
  kt__matmul(out, inp, weight, N, OC, C, 0, 1, bias ? 1.0f : 0.0f);
}

SIMD_CLONES void kt__matmul_residual_forward(float *out, const float *inp, const float *weight,
                                             const float *bias, const float *residual, int N, int C,
                                             int OC) {
  for (int n = 0; n < N; n++) row_sum2(out + (size_t)n * OC, residual + (size_t)n * OC, bias, OC);
  kt__matmul(out, inp, weight, N, OC, C, 0, 1, 1.0f);
}

void kt__matmul_backward_input(float *dinp, const float *dout, const float *weight, int N, int C,
                               int OC) {
  kt__matmul(dinp, dout, weight, N, C, OC, 0, 0, 1.0f);
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

/* 0.5 (1 + tanh(u)) = sigmoid(2u), so gelu(x) = x / (1 + exp(-2u)) with
 * u = GELU_K (x + GELU_A x^3): one exp and one division, no sign handling
 * (exp saturates, so very negative x gives x / huge = -0). */
static inline float gelu(float x) {
  float u = GELU_K * (x + GELU_A * x * x * x);
  return x / (1.0f + kt__fast_expf(-2.0f * u));
}

/* gelu'(x) = sig + x sig (1 - sig) 2 du/dx, sig = sigmoid(2u) */
static inline float gelu_grad(float x) {
  float u = GELU_K * (x + GELU_A * x * x * x);
  float sig = 1.0f / (1.0f + kt__fast_expf(-2.0f * u));
  return sig + x * sig * (1.0f - sig) * 2.0f * GELU_K * (1.0f + 3.0f * GELU_A * x * x);
}

SIMD_CLONES void kt__gelu_forward(float *restrict out, const float *restrict inp, size_t N) {
  size_t i = 0;
  for (; i + KT__VB <= N; i += KT__VB)
    for (size_t j = 0; j < KT__VB; j++) out[i + j] = gelu(inp[i + j]);
  for (; i < N; i++) out[i] = gelu(inp[i]);
}

SIMD_CLONES void kt__gelu_backward(float *restrict dinp, const float *restrict inp,
                                       const float *restrict dout, size_t N) {
  size_t i = 0;
  for (; i + KT__VB <= N; i += KT__VB)
    for (size_t j = 0; j < KT__VB; j++) dinp[i + j] += gelu_grad(inp[i + j]) * dout[i + j];
  for (; i < N; i++) dinp[i] += gelu_grad(inp[i]) * dout[i];
}

/* ---- softmax cross-entropy -------------------------------------------------- */

/* x[i] = exp(x[i] - shift) in place; returns the sum */
ROW float exp_shifted(float *x, int n, float shift) {
  float part[KT__VB] = {0};
  int i = 0;
  for (; i + KT__VB <= n; i += KT__VB)
    for (int j = 0; j < KT__VB; j++) {
      x[i + j] = kt__fast_expf(x[i + j] - shift);
      part[j] += x[i + j];
    }
  float sum = 0.0f;
  for (; i < n; i++) {
    x[i] = kt__fast_expf(x[i] - shift);
    sum += x[i];
  }
  for (int j = 0; j < KT__VB; j++) sum += part[j];
  return sum;
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
    float sum = exp_shifted(d, V, max);
    loss += (double)max + log((double)sum) - (double)ly;
    row_scale(d, dscale / sum, V);
    d[y] -= dscale;
  }
  return loss;
}

/* ---- causal self-attention -------------------------------------------------- */

/* scratch per (b, h): y/dy (T,hs), datt (T,T), dq, dk, dv (T,hs) */
size_t kt__attention_scratch_floats(int T, int C, int NH) {
  size_t hs = (size_t)(C / NH);
  return (size_t)T * T + 4 * (size_t)T * hs;
}

SIMD_CLONES void kt__attention_forward(float *out, float *qkvp, float *att, float *scratch,
                                       const float *inp, int B, int T, int C, int NH) {
  int hs = C / NH;
  size_t head = (size_t)T * hs; /* floats of one (T,hs) matrix */
  float scale = 1.0f / sqrtf((float)hs);
  /* (B,T,3C) -> (3,B,NH,T,hs) */
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++)
      for (int w = 0; w < 3; w++)
        for (int h = 0; h < NH; h++) {
          const float *src = inp + ((size_t)b * T + t) * 3 * C + (size_t)w * C + (size_t)h * hs;
          float *dst = qkvp + (((size_t)w * B + b) * NH + h) * head + (size_t)t * hs;
          row_copy(dst, src, hs);
        }
  float *y = scratch; /* (T,hs) */
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++) {
      const float *q = qkvp + ((size_t)b * NH + h) * head;           /* (T,hs) */
      const float *k = qkvp + (((size_t)B + b) * NH + h) * head;     /* (T,hs) */
      const float *v = qkvp + ((2 * (size_t)B + b) * NH + h) * head; /* (T,hs) */
      float *a = att + ((size_t)b * NH + h) * (size_t)T * T;         /* (T,T) */
      kt__matmul(a, q, k, T, T, hs, 0, 1, 0.0f);                     /* q k^T */
      for (int t = 0; t < T; t++) {
        float *row = a + (size_t)t * T;
        row_scale(row, scale, t + 1);
        float inv = 1.0f / exp_shifted(row, t + 1, row_max(row, t + 1));
        row_scale(row, inv, t + 1);
        for (int u = t + 1; u < T; u++) row[u] = 0.0f;
      }
      kt__matmul(y, a, v, T, hs, T, 0, 0, 0.0f); /* att v */
      for (int t = 0; t < T; t++)
        row_copy(out + ((size_t)b * T + t) * C + (size_t)h * hs, y + (size_t)t * hs, hs);
    }
}

/* d = scale * a * (d - dot), dot = sum(a * d) */
ROW void softmax_row_backward(float *restrict d, const float *restrict a, float dot, float scale,
                              int n) {
  int i = 0;
  for (; i + KT__VB <= n; i += KT__VB)
    for (int j = 0; j < KT__VB; j++) d[i + j] = scale * a[i + j] * (d[i + j] - dot);
  for (; i < n; i++) d[i] = scale * a[i] * (d[i] - dot);
}

SIMD_CLONES void kt__attention_backward(float *dinp, float *scratch, const float *dout,
                                        const float *qkvp, const float *att, int B, int T, int C,
                                        int NH) {
  int hs = C / NH;
  size_t head = (size_t)T * hs;
  float scale = 1.0f / sqrtf((float)hs);
  float *dy = scratch;              /* (T,hs) */
  float *datt = dy + head;          /* (T,T) */
  float *dq = datt + (size_t)T * T; /* (T,hs) */
  float *dk = dq + head, *dv = dk + head;
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++) {
      const float *q = qkvp + ((size_t)b * NH + h) * head;
      const float *k = qkvp + (((size_t)B + b) * NH + h) * head;
      const float *v = qkvp + ((2 * (size_t)B + b) * NH + h) * head;
      const float *a = att + ((size_t)b * NH + h) * (size_t)T * T;
      for (int t = 0; t < T; t++)
        row_copy(dy + (size_t)t * hs, dout + ((size_t)b * T + t) * C + (size_t)h * hs, hs);
      kt__matmul(datt, dy, v, T, T, hs, 0, 1, 0.0f); /* dy v^T */
      kt__matmul(dv, a, dy, T, hs, T, 1, 0, 0.0f);   /* att^T dy */
      /* softmax backward, scaled: dS = scale * att * (datt - sum(att * datt)) */
      for (int t = 0; t < T; t++) {
        const float *ar = a + (size_t)t * T;
        float *dr = datt + (size_t)t * T;
        softmax_row_backward(dr, ar, row_dot(ar, dr, t + 1), scale, t + 1);
        for (int u = t + 1; u < T; u++) dr[u] = 0.0f;
      }
      kt__matmul(dq, datt, k, T, hs, T, 0, 0, 0.0f); /* dS k */
      kt__matmul(dk, datt, q, T, hs, T, 1, 0, 0.0f); /* dS^T q */
      for (int t = 0; t < T; t++) {
        float *d = dinp + ((size_t)b * T + t) * 3 * C + (size_t)h * hs;
        row_add(d, dq + (size_t)t * hs, hs);
        row_add(d + C, dk + (size_t)t * hs, hs);
        row_add(d + 2 * (size_t)C, dv + (size_t)t * hs, hs);
      }
    }
}
