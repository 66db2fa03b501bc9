/* The one OpenBLAS wrapper every matmul goes through, plus small kernels. */
#include <cblas.h>
#include <math.h>

#include "kaiten/core.h"
#include "nn/nn.h"

static _Thread_local double flops_issued, seconds_in;

void kt__matmul(float *out, const float *a, const float *b, int m, int n, int k, int trans_a,
                int trans_b, float beta) {
  double t0 = kt_now();
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, trans_a ? m : k, b,
              trans_b ? k : n, beta, out, n);
  seconds_in += kt_now() - t0;
  flops_issued += 2.0 * m * n * k;
}

double kt__matmul_flops(void) { return flops_issued; }
double kt__matmul_seconds(void) { return seconds_in; }
void kt__matmul_reset_counters(void) { flops_issued = seconds_in = 0; }

#define GELU_SCALE 0.7978845608028654f /* sqrt(2 / pi) */

void kt__gelu_forward(float *out, const float *inp, size_t n) {
  for (size_t i = 0; i < n; i++) {
    float x = inp[i];
    float cube = 0.044715f * x * x * x;
    out[i] = 0.5f * x * (1.0f + tanhf(GELU_SCALE * (x + cube)));
  }
}

void kt__gelu_backward(float *dinp, const float *inp, const float *dout, size_t n) {
  for (size_t i = 0; i < n; i++) {
    float x = inp[i];
    float cube = 0.044715f * x * x * x;
    float arg = GELU_SCALE * (x + cube);
    float th = tanhf(arg);
    float sech2 = 1.0f - th * th;
    float local = 0.5f * (1.0f + th) + x * 0.5f * sech2 * GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
    dinp[i] = local * dout[i];
  }
}

void kt__rng_seed(kt__rng *r, uint64_t seed) { r->s = seed ^ 0x9E3779B97F4A7C15ull; }

uint64_t kt__rng_next(kt__rng *r) {
  uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

float kt__rng_uniform(kt__rng *r) { return (float)(kt__rng_next(r) >> 40) * (1.0f / 16777216.0f); }

float kt__rng_normal(kt__rng *r) {
  float u1 = kt__rng_uniform(r), u2 = kt__rng_uniform(r);
  if (u1 < 1e-7f) u1 = 1e-7f;
  return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}

uint64_t kt__unit_seed(uint64_t model_seed, int unit) {
  kt__rng r;
  kt__rng_seed(&r, model_seed * 0x100000001B3ull + (uint64_t)unit * 0x5851F42D4C957F2Dull + 1);
  return kt__rng_next(&r);
}
