/* Minimal test assertions: print both expressions and values, count
 * failures, and end with one summary line; the exit code is non-zero when
 * anything failed. */
#ifndef KAITEN_TEST_CHECK_H
#define KAITEN_TEST_CHECK_H

#undef NDEBUG
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int kt_test_checks, kt_test_failures;

#define CHECK(cond) \
  do { \
    kt_test_checks++; \
    if (!(cond)) { \
      kt_test_failures++; \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
    } \
  } while (0)

#define CHECK_MSG(cond, ...) \
  do { \
    kt_test_checks++; \
    if (!(cond)) { \
      kt_test_failures++; \
      fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__); \
      fputc('\n', stderr); \
    } \
  } while (0)

#define CHECK_EQ_INT(a, b) \
  do { \
    long long _a = (long long)(a), _b = (long long)(b); \
    kt_test_checks++; \
    if (_a != _b) { \
      kt_test_failures++; \
      fprintf(stderr, "%s:%d: CHECK_EQ_INT failed: %s == %s (%lld vs %lld)\n", __FILE__, __LINE__, \
              #a, #b, _a, _b); \
    } \
  } while (0)

#define CHECK_NEAR(a, b, tol) \
  do { \
    double _a = (double)(a), _b = (double)(b); \
    kt_test_checks++; \
    if (!(fabs(_a - _b) <= (tol))) { \
      kt_test_failures++; \
      fprintf(stderr, "%s:%d: CHECK_NEAR failed: %s ~ %s (%.12g vs %.12g, tol %g)\n", __FILE__, \
              __LINE__, #a, #b, _a, _b, (double)(tol)); \
    } \
  } while (0)

#define CHECK_STR_CONTAINS(hay, needle) \
  do { \
    const char *_h = (hay), *_n = (needle); \
    kt_test_checks++; \
    if (!_h || !strstr(_h, _n)) { \
      kt_test_failures++; \
      fprintf(stderr, "%s:%d: expected \"%s\" in \"%s\"\n", __FILE__, __LINE__, _n, \
              _h ? _h : "(null)"); \
    } \
  } while (0)

#define CHECK_STR_EQ(got, want) \
  do { \
    const char *_g = (got), *_w = (want); \
    kt_test_checks++; \
    if (!_g || strcmp(_g, _w)) { \
      kt_test_failures++; \
      fprintf(stderr, "%s:%d: expected \"%s\", got \"%s\"\n", __FILE__, __LINE__, _w, \
              _g ? _g : "(null)"); \
    } \
  } while (0)

/* Stop early when a precondition failed (avoid cascades of noise). */
#define REQUIRE(cond) \
  do { \
    int _ok = (cond) ? 1 : 0; /* evaluated once */ \
    kt_test_checks++; \
    if (!_ok) { \
      kt_test_failures++; \
      fprintf(stderr, "%s:%d: REQUIRE failed: %s\n", __FILE__, __LINE__, #cond); \
      return kt_test_done(__FILE__); \
    } \
  } while (0)

/* The same for functions returning void. */
#define REQUIRE_VOID(cond) \
  do { \
    int _ok = (cond) ? 1 : 0; \
    kt_test_checks++; \
    if (!_ok) { \
      kt_test_failures++; \
      fprintf(stderr, "%s:%d: REQUIRE failed: %s\n", __FILE__, __LINE__, #cond); \
      return; \
    } \
  } while (0)

/* ||a - b|| / ||b|| over n floats (b all zero: the absolute norm). */
static inline double kt_test_rel_err(const float *a, const float *b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    den += (double)b[i] * b[i];
  }
  return sqrt(num / (den > 0 ? den : 1));
}

/* tests/data/NAME, or under $KT_TEST_DATA when CTest sets it (one static buffer). */
static inline const char *kt_test_data_path(const char *name) {
  static char buf[1024];
  const char *dir = getenv("KT_TEST_DATA");
  snprintf(buf, sizeof buf, "%s/%s", dir ? dir : "tests/data", name);
  return buf;
}

static inline int kt_test_done(const char *name) {
  const char *base = strrchr(name, '/');
  printf("%s: %d checks, %d failed: %s\n", base ? base + 1 : name, kt_test_checks, kt_test_failures,
         kt_test_failures ? "FAIL" : "OK");
  return kt_test_failures ? 1 : 0;
}

#endif
