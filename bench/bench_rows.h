/* Shared by the benchmarks: command-line options and result rows.
 *
 * Every benchmark takes [REPS] [--quick] [--tsv FILE]. Besides its tables on
 * stdout it appends one tab-separated row per headline result to FILE ("-"
 * for stdout), the input of bench/run.sh:
 *
 *   id  measured  unit  median  min  max  reference  ratio
 *
 * min and max are "-" for a single measurement; reference is "-" when the
 * result is compared with nothing; ratio is median / reference, "-", or
 * "@ID": the median divided by the median of row ID of the same run.sh run
 * (a comparison across two processes, e.g. MPI against threads). */
#ifndef KT_BENCH_ROWS_H
#define KT_BENCH_ROWS_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kaiten/core.h"

typedef struct {
  int reps;  /* repetitions: REPS, else the benchmark's default */
  int quick; /* --quick: fewer repetitions, smaller sizes */
  FILE *tsv; /* --tsv FILE, else NULL */
} bench_opts;

typedef struct {
  double med, min, max;
} bench_stat;

/* Parses the options; exits with a usage line on anything else. REPS outside
 * [lo, hi] falls back to def (quick_def under --quick). */
static inline bench_opts bench_args(int argc, char **argv, int def, int quick_def, int lo, int hi) {
  bench_opts o = {0, 0, NULL};
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick")) {
      o.quick = 1;
    } else if (!strcmp(argv[i], "--tsv") && i + 1 < argc) {
      const char *path = argv[++i];
      o.tsv = strcmp(path, "-") ? fopen(path, "a") : stdout;
      if (!o.tsv) {
        perror(path);
        exit(2);
      }
    } else if (argv[i][0] != '-' && atoi(argv[i]) > 0) {
      o.reps = atoi(argv[i]);
    } else {
      fprintf(stderr, "usage: %s [REPS] [--quick] [--tsv FILE]\n", argv[0]);
      exit(2);
    }
  }
  if (o.reps < lo || o.reps > hi) o.reps = o.quick ? quick_def : def;
  return o;
}

/* Process CPU seconds: the machine is shared, wall clock is noisier. */
static inline double bench_cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Median, min and max of v[0..n), each times scale (sorts v). */
static inline bench_stat bench_stats(double *v, size_t n, double scale) {
  double med = kt_median(v, n);
  return (bench_stat){scale * med, scale * v[0], scale * v[n ? n - 1 : 0]};
}

/* The same statistics of k / v[i]: a rate from times. */
static inline bench_stat bench_rate(double *v, size_t n, double k) {
  bench_stat s = bench_stats(v, n, 1);
  return (bench_stat){k / s.med, k / s.max, k / s.min};
}

/* One row; ratio is the median over ref_value (ref_value <= 0: none). */
static inline void bench_row(const bench_opts *o, const char *id, const char *measured,
                             const char *unit, bench_stat s, const char *reference,
                             double ref_value) {
  if (!o->tsv) return;
  fprintf(o->tsv, "%s\t%s\t%s\t%.6g\t%.6g\t%.6g\t%s\t", id, measured, unit, s.med, s.min, s.max,
          reference ? reference : "-");
  if (reference && ref_value > 0 && isfinite(s.med / ref_value))
    fprintf(o->tsv, "%.6g\n", s.med / ref_value);
  else fprintf(o->tsv, "-\n");
  fflush(o->tsv);
}

/* A row whose ratio run.sh takes against the median of row ref_id. */
static inline void bench_row_vs(const bench_opts *o, const char *id, const char *measured,
                                const char *unit, bench_stat s, const char *reference,
                                const char *ref_id) {
  if (!o->tsv) return;
  fprintf(o->tsv, "%s\t%s\t%s\t%.6g\t%.6g\t%.6g\t%s\t@%s\n", id, measured, unit, s.med, s.min,
          s.max, reference, ref_id);
  fflush(o->tsv);
}

static inline void bench_close(bench_opts *o) {
  if (o->tsv && o->tsv != stdout) fclose(o->tsv);
  o->tsv = NULL;
}

#endif
