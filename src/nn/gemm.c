/* The GEMM libraries a matmul may run on: OpenBLAS (blas.c), BLIS and
 * oneDNN, each opened when first asked for (core/dl.c), from their Debian
 * shared libraries (libblis4, libdnnl2); nothing links them; and kaiten's
 * own kernel (gemm_tiles.c), on CPUs with AVX-512. Each is called
 * single-threaded: a rank's threads are kaiten's own (pool.c), which split
 * a large product between them, so two libraries' thread pools never
 * compete for the same cores.
 *
 * BLIS and oneDNN are opened RTLD_LOCAL and called through their own
 * prefixes (bli_sgemm, dnnl_sgemm): BLIS also exports cblas_sgemm and
 * sgemm_, which must not take the place of OpenBLAS's. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "nn/nn.h"

static const char *const gemm_names[] = {"auto", "openblas", "blis", "onednn", "kaiten"};
_Static_assert(sizeof gemm_names / sizeof *gemm_names == KT_GEMM_COUNT, "gemm names out of sync");

const char *kt_gemm_name(kt_gemm_kind k) {
  return (unsigned)k < KT_GEMM_COUNT ? gemm_names[k] : "?";
}

int kt_gemm_from_name(const char *name) { return kt_name_index(name, gemm_names, KT_GEMM_COUNT); }

/* ---- the libraries' entry points (their ABIs, declared here) ----------------- */

typedef int64_t blis_dim;                   /* BLIS's dim_t and inc_t: 64-bit in Debian's build */
enum { BLIS_NO_TRANS = 0, BLIS_TRANS = 8 }; /* trans_t: BLIS_TRANS_BIT = 1 << 3 */
typedef void (*blis_sgemm_fn)(int transa, int transb, blis_dim m, blis_dim n, blis_dim k,
                              const float *alpha, const float *a, blis_dim rsa, blis_dim csa,
                              const float *b, blis_dim rsb, blis_dim csb, const float *beta,
                              float *c, blis_dim rsc, blis_dim csc);
typedef int (*dnnl_sgemm_fn)(char transa, char transb, int64_t m, int64_t n, int64_t k, float alpha,
                             const float *a, int64_t lda, const float *b, int64_t ldb, float beta,
                             float *c, int64_t ldc);
typedef struct {
  int major, minor, patch;
  const char *hash;
} dnnl_version_head; /* the leading fields of dnnl_version_t */

typedef struct {
  pthread_once_t once;
  void *sgemm;              /* blis_sgemm_fn or dnnl_sgemm_fn; NULL: not loaded */
  void (*set_threads)(int); /* oneDNN: OpenMP's omp_set_num_threads */
  char version[48];
} loaded_lib;

static loaded_lib blis = {PTHREAD_ONCE_INIT}, dnnl = {PTHREAD_ONCE_INIT};

/* The first of sonames that loads with names[0] (the rest optional). */
static int open_first(const char *const *sonames, const char *const *names, size_t n, void **fn) {
  for (; *sonames; sonames++) {
    kt_error err;
    if (!kt__dl_open(*sonames, names, n, 1, fn, &err)) return 1;
  }
  return 0;
}

static void load_blis(void) {
  static const char *const sonames[] = {"libblis.so.4", "libblis.so.3", "libblis.so", NULL};
  static const char *const names[] = {"bli_sgemm", "bli_info_get_version_str"};
  void *fn[2];
  if (!open_first(sonames, names, 2, fn)) return;
  char *(*ver)(void) = (char *(*)(void))fn[1];
  snprintf(blis.version, sizeof blis.version, "%s", ver ? ver() : "?");
  blis.sgemm = fn[0];
}

static void load_dnnl(void) {
  static const char *const sonames[] = {"libdnnl.so.3", "libdnnl.so.2", "libdnnl.so", NULL};
  /* OpenMP comes with it (Debian builds it on libgomp); without the call
   * to set its threads, each caller would start a team of all cores */
  static const char *const names[] = {"dnnl_sgemm", "omp_set_num_threads", "dnnl_version"};
  void *fn[3];
  if (!open_first(sonames, names, 3, fn)) return;
  const dnnl_version_head *(*ver)(void) = (const dnnl_version_head *(*)(void))fn[2];
  const dnnl_version_head *v = ver ? ver() : NULL;
  if (v) snprintf(dnnl.version, sizeof dnnl.version, "%d.%d.%d", v->major, v->minor, v->patch);
  else snprintf(dnnl.version, sizeof dnnl.version, "?");
  dnnl.set_threads = (void (*)(int))fn[1];
  dnnl.sgemm = fn[0];
}

int kt_gemm_available(kt_gemm_kind k, const char **version) {
  const char *v = NULL;
  int ok = 0;
  switch (k) {
    case KT_GEMM_OPENBLAS:
      v = kt__blas_config();
      ok = v != NULL;
      break;
    case KT_GEMM_BLIS:
      pthread_once(&blis.once, load_blis);
      ok = blis.sgemm != NULL, v = ok ? blis.version : NULL;
      break;
    case KT_GEMM_ONEDNN:
      pthread_once(&dnnl.once, load_dnnl);
      ok = dnnl.sgemm != NULL, v = ok ? dnnl.version : NULL;
      break;
    case KT_GEMM_KAITEN: ok = kt__tiles_ok(), v = ok ? kt__tiles_version() : NULL; break;
    default: break;
  }
  if (version) *version = v;
  return ok;
}

/* OpenMP's thread count is a per-thread setting: each thread that calls
 * oneDNN sets its own to 1 the first time. */
static _Thread_local int dnnl_threads_set;

/* A product with nothing to sum (kk = 0): c = beta c, which the libraries
 * may refuse (a leading dimension of 0 is an illegal argument to them,
 * which leaves c as it was). 1 where the product was empty. */
static int empty_product(int m, int n, int kk, float beta, float *c, int ldc) {
  if (m > 0 && n > 0 && kk > 0) return 0;
  for (int i = 0; kk <= 0 && i < m; i++)
    for (int j = 0; j < n; j++)
      c[(size_t)i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[(size_t)i * ldc + j];
  return 1;
}

/* c = beta c + op(a) op(b) on library k, a product with something to sum
 * (kaiten's kernel is taken by the caller, with its epilogue fused). */
static void library_call(kt_gemm_kind k, int trans_a, int trans_b, int m, int n, int kk,
                         const float *a, int lda, const float *b, int ldb, float beta, float *c,
                         int ldc) {
  if (k == KT_GEMM_BLIS && blis.sgemm) {
    float one = 1.0f;
    ((blis_sgemm_fn)blis.sgemm)(trans_a ? BLIS_TRANS : BLIS_NO_TRANS,
                                trans_b ? BLIS_TRANS : BLIS_NO_TRANS, m, n, kk, &one, a, lda, 1, b,
                                ldb, 1, &beta, c, ldc, 1);
    return;
  }
  if (k == KT_GEMM_ONEDNN && dnnl.sgemm) {
    if (!dnnl_threads_set && dnnl.set_threads) dnnl.set_threads(1);
    dnnl_threads_set = 1;
    ((dnnl_sgemm_fn)dnnl.sgemm)(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, kk, 1.0f, a, lda, b,
                                ldb, beta, c, ldc);
    return;
  }
  kt__sgemm(trans_a, trans_b, m, n, kk, a, lda, b, ldb, beta, c, ldc);
}

void kt__gemm_call(kt_gemm_kind k, int trans_a, int trans_b, int m, int n, int kk, const float *a,
                   int lda, const float *b, int ldb, float beta, float *c, int ldc) {
  kt__gemm_call_ep(k, trans_a, trans_b, m, n, kk, a, lda, b, ldb, beta, c, ldc, NULL);
}

void kt__gemm_call_ep(kt_gemm_kind k, int trans_a, int trans_b, int m, int n, int kk,
                      const float *a, int lda, const float *b, int ldb, float beta, float *c,
                      int ldc, const kt__epilogue *ep) {
  if (empty_product(m, n, kk, beta, c, ldc)) {
    kt__epilogue_apply(c, ldc, m, n, ep);
    return;
  }
  if (k == KT_GEMM_KAITEN && kt__tiles_ok()) {
    kt__tiles_sgemm(trans_a, trans_b, m, n, kk, a, lda, b, ldb, beta, c, ldc, ep);
    return;
  }
  if (beta == 0.0f && ep && !ep->gelu && (ep->bias || ep->res)) {
    /* a library zeroes c in a pass of its own before it sums into it, and
     * the epilogue would be another pass: c starts as bias + res instead */
    kt__epilogue_fill(c, ldc, m, n, ep);
    library_call(k, trans_a, trans_b, m, n, kk, a, lda, b, ldb, 1.0f, c, ldc);
    return;
  }
  library_call(k, trans_a, trans_b, m, n, kk, a, lda, b, ldb, beta, c, ldc);
  kt__epilogue_apply(c, ldc, m, n, ep);
}
