/* The autopilot's detector: each step's ops and hand-overs against the
 * ones calibrated on the last clean steps.
 *
 * After KT__WARM_STEPS, the last KT__CALIB_STEPS steps in which nothing
 * was over calibrate each stage's op durations and own times (the median
 * of the steps' means; an op's own time is its duration less the part of
 * it its thread waited for a core, kt_event.ready_wait while it ran) and
 * each link's hand-over (the median of the steps' medians: the producer's
 * end to the start of a consumer that sat waiting for it, less the time
 * the consumer then waited for a core): the calibration follows a run's
 * slow drift (a machine warming up), never a fault once it is named. From
 * the first full calibration each step gives every rank the median over
 * its ops of (duration / calibrated), and of (own time / calibrated): its
 * own ops' slowdown, whatever it waited for, so a rank that waits on a
 * slow one is not named, over the other ranks' median (the step's pace: a
 * machine that slows every rank alike names none); and every link the
 * median excess of its hand-overs. A rank whose own time is more than
 * KT__OVER over (with more compute threads than cores, and its ops' wall
 * time over too: own time up while the wall time is not is the scheduler
 * moving an oversubscribed rank's time out of its waits; and on that rank
 * alone: two ranks up at once there are threads placed anew) is named once it
 * is so for KT__CONFIRM steps in a row (its `since` the first of them):
 * a lasting fault is named one step after its onset (a real model's,
 * whose own time is CPU time that other programs' use of caches and
 * memory makes wander: KT__CONFIRM_CPU). A rank whose ops take more than
 * KT__OVER longer only as its thread waited for a core (a core shared
 * with other programs), and waited more than the other ranks did, is
 * named once that lasts KT__CONFIRM_WAIT steps: a loaded machine's
 * scheduler holds one rank's thread for a step or two, a program that
 * took its core stays. A link
 * whose hand-overs take more than KT__OVER over the calibrated, and by at
 * least KT__OVER of a mean op (a hand-over's microseconds alone would make
 * noise a fault), is named after KT__CONFIRM steps. Each only when it
 * stands out of the calibration's own noise by KT__NOISE median absolute
 * deviations. Medians keep a stall of one op from naming anything. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/autopilot.h"

#define OPS KT_OP_COUNT

kt_status kt__detector_init(kt__detector *d, const kt_schedule *s, kt_error *err) {
  memset(d, 0, sizeof *d);
  d->p = s->p, d->S = kt_schedule_stages(s);
  size_t cells = (size_t)d->S * OPS;
  d->stage_rank = kt_calloc((size_t)d->S, sizeof *d->stage_rank);
  d->samples = kt_calloc(KT__CALIB_STEPS * cells, sizeof *d->samples);
  d->own_samples = kt_calloc(KT__CALIB_STEPS * cells, sizeof *d->own_samples);
  d->own_expected = kt_calloc(cells, sizeof *d->own_expected);
  d->own_spread = kt_calloc((size_t)d->p, sizeof *d->own_spread);
  d->own_factor = kt_calloc((size_t)d->p, sizeof *d->own_factor);
  d->link_samples = kt_calloc(KT__CALIB_STEPS * (size_t)d->p, sizeof *d->link_samples);
  d->expected = kt_calloc(cells, sizeof *d->expected);
  d->base = kt_calloc((size_t)d->p, sizeof *d->base);
  d->factor = kt_calloc((size_t)d->p, sizeof *d->factor);
  d->excess = kt_calloc((size_t)d->p, sizeof *d->excess);
  d->rank_since = kt_calloc((size_t)d->p, sizeof *d->rank_since);
  d->rank_spread = kt_calloc((size_t)d->p, sizeof *d->rank_spread);
  d->link_spread = kt_calloc((size_t)d->p, sizeof *d->link_spread);
  d->hold = kt_calloc((size_t)d->p, sizeof *d->hold);
  d->link_since = kt_calloc((size_t)d->p, sizeof *d->link_since);
  d->own_since = kt_calloc((size_t)d->p, sizeof *d->own_since);
  d->grew = kt_calloc((size_t)d->p, sizeof *d->grew);
  d->waited = kt_calloc((size_t)d->p, sizeof *d->waited);
  d->recent = kt_calloc((size_t)d->p * KT__DELAY_STEPS, sizeof *d->recent);
  d->n_recent = kt_calloc((size_t)d->p, sizeof *d->n_recent);
  if (!d->stage_rank || !d->samples || !d->link_samples || !d->expected || !d->base || !d->factor ||
      !d->excess || !d->rank_since || !d->link_since || !d->rank_spread || !d->link_spread ||
      !d->hold || !d->own_since || !d->grew || !d->waited || !d->recent || !d->n_recent ||
      !d->own_samples || !d->own_expected || !d->own_spread || !d->own_factor) {
    kt__detector_free(d);
    return kt_fail(err, KT_ENOMEM, "out of memory");
  }
  for (int st = 0; st < d->S; st++) d->stage_rank[st] = kt_stage_rank(s, st);
  d->confirm_own = KT__CONFIRM, d->name_waits = 1;
  for (int r = 0; r < d->p; r++)
    d->factor[r] = d->own_factor[r] = d->excess[r] = NAN, d->hold[r] = 1;
  return KT_OK;
}

void kt__detector_free(kt__detector *d) {
  free(d->stage_rank);
  free(d->samples);
  free(d->own_samples);
  free(d->own_expected);
  free(d->own_spread);
  free(d->own_factor);
  free(d->link_samples);
  free(d->expected);
  free(d->base);
  free(d->factor);
  free(d->excess);
  free(d->rank_since);
  free(d->link_since);
  free(d->rank_spread);
  free(d->link_spread);
  free(d->hold);
  free(d->own_since);
  free(d->grew);
  free(d->waited);
  free(d->recent);
  free(d->n_recent);
  memset(d, 0, sizeof *d);
}

/* The median of the finite values among v[0..n) (reordered); NAN: none. */
static double finite_median(double *v, size_t n) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (isfinite(v[i])) v[k++] = v[i];
  return k ? kt_median(v, k) : NAN;
}

/* The part of e's ready_wait (its thread ready, without a core) while e
 * ran: its wall time beyond its device time (cpu_time), where measured. */
static double waited_during(const kt_event *e) {
  if (!(e->cpu_time > 0)) return 0;
  return fmin(e->ready_wait, fmax(0, e->end - e->start - e->cpu_time));
}

/* The step's mean op per (stage, op) into row, and its mean own time (less
 * its waits for a core while it ran) into own (NAN where none ran). */
static void op_means(const kt__detector *d, const kt_timeline *t, double *row, double *own) {
  size_t cells = (size_t)d->S * OPS;
  double *count = kt_calloc(cells, sizeof *count);
  for (size_t i = 0; i < cells; i++) row[i] = own[i] = 0;
  for (size_t i = 0; count && i < t->n_events; i++) {
    const kt_event *e = &t->events[i];
    if (e->stage < 0 || e->stage >= d->S || e->op >= OPS) continue;
    size_t c = (size_t)e->stage * OPS + e->op;
    row[c] += e->end - e->start, own[c] += e->end - e->start - waited_during(e), count[c]++;
  }
  for (size_t i = 0; i < cells; i++) {
    row[i] = count && count[i] > 0 ? row[i] / count[i] : NAN;
    own[i] = count && count[i] > 0 ? own[i] / count[i] : NAN;
  }
  free(count);
}

/* The time e's thread waited for a core before e started (its input had
 * arrived, the thread had no core). */
static double waited_before(const kt_event *e) { return fmax(0, e->ready_wait - waited_during(e)); }

/* The step's median hand-over per link into row (p entries; NAN: none):
 * each gap less the time its consumer then waited for a core (on a loaded
 * machine a thread woken by its input can wait for one: its rank's
 * contention, not the link's), at least 0. */
static void link_medians(const kt__detector *d, const kt_timeline *t, const kt_schedule *s,
                         double *row) {
  size_t n = t->n_events + 1, *at = kt_calloc(n, sizeof *at);
  double *gaps = kt_calloc(n, sizeof *gaps), *mine = kt_calloc(n, sizeof *mine);
  int *from = kt_calloc(n, sizeof *from), *to = kt_calloc(n, sizeof *to);
  size_t ng = gaps && mine && from && to && at ? kt__hop_gaps(t, s, gaps, from, to, at) : 0;
  for (int l = 0; l < d->p; l++) {
    size_t k = 0;
    for (size_t i = 0; i < ng; i++)
      if (kt_link_index(from[i], to[i], d->p) == l)
        mine[k++] = fmax(0, gaps[i] - waited_before(&t->events[at[i]]));
    row[l] = k ? kt_median(mine, k) : NAN;
  }
  free(gaps), free(mine), free(from), free(to), free(at);
}

/* The median absolute deviation of x[0..n) (reordered). */
static double mad(double *x, int n) {
  double m = kt_median(x, (size_t)n), dev[KT__CALIB_STEPS];
  for (int k = 0; k < n; k++) dev[k] = fabs(x[k] - m);
  return kt_median(dev, (size_t)n);
}

/* Rank r's ratio in one step: the median over its ops' (cells') means of
 * mean / calibrated (expected; 1 when it has none). */
static double row_ratio(const kt__detector *d, const double *expected, const double *row, int r,
                        double *scratch) {
  size_t n = 0, cells = (size_t)d->S * OPS;
  for (size_t c = 0; c < cells; c++)
    if (d->stage_rank[c / OPS] == r && expected[c] > 0 && isfinite(row[c]))
      scratch[n++] = row[c] / expected[c];
  return n ? kt_median(scratch, n) : 1;
}

/* Each rank's ratio relative to the others' (ratio[p], rewritten): the
 * median of the other ranks' is the step's pace (a machine that slows
 * every rank alike names none of them). */
static void relative(const kt__detector *d, double *ratio, double *out) {
  double others[KT_MAX_RANKS];
  for (int r = 0; r < d->p; r++) {
    int n = 0;
    for (int q = 0; q < d->p; q++)
      if (q != r && isfinite(ratio[q])) others[n++] = ratio[q];
    double pace = n ? kt_median(others, (size_t)n) : 1;
    out[r] = pace > 0 ? ratio[r] / pace : ratio[r];
  }
}

/* Per rank, the median absolute deviation of its relative ratio over the
 * calibration's steps (samples against expected) into spread. */
static void rank_spreads(kt__detector *d, const double *samples, const double *expected,
                         double *spread) {
  size_t cells = (size_t)d->S * OPS;
  double *cell = kt_calloc(cells + 1, sizeof *cell), rel[KT__CALIB_STEPS][KT_MAX_RANKS];
  double ratio[KT_MAX_RANKS], x[KT__CALIB_STEPS];
  for (int k = 0; cell && k < KT__CALIB_STEPS; k++) {
    for (int r = 0; r < d->p; r++)
      ratio[r] = row_ratio(d, expected, samples + (size_t)k * cells, r, cell);
    relative(d, ratio, rel[k]);
  }
  for (int r = 0; cell && r < d->p; r++) {
    for (int k = 0; k < KT__CALIB_STEPS; k++) x[k] = rel[k][r];
    spread[r] = mad(x, KT__CALIB_STEPS);
  }
  free(cell);
}

/* How much the calibration's own steps wander (the noise a fault must
 * stand out of): per rank, of its ops' and own times' relative ratios;
 * per link, the median absolute deviation of its medians. */
static void spreads(kt__detector *d) {
  double x[KT__CALIB_STEPS];
  rank_spreads(d, d->samples, d->expected, d->rank_spread);
  rank_spreads(d, d->own_samples, d->own_expected, d->own_spread);
  for (int l = 0; l < d->p; l++) {
    int n = 0;
    for (int k = 0; k < KT__CALIB_STEPS; k++)
      if (isfinite(d->link_samples[k * d->p + l])) x[n++] = d->link_samples[k * d->p + l];
    d->link_spread[l] = n ? mad(x, n) : 0;
  }
}

/* The calibration, once its steps are in. */
static void calibrate(kt__detector *d) {
  size_t cells = (size_t)d->S * OPS;
  double v[KT__CALIB_STEPS], sum = 0;
  int n = 0;
  for (size_t c = 0; c < cells; c++) {
    for (int k = 0; k < KT__CALIB_STEPS; k++) v[k] = d->samples[k * cells + c];
    d->expected[c] = finite_median(v, KT__CALIB_STEPS);
    if (isfinite(d->expected[c])) sum += d->expected[c], n++;
    for (int k = 0; k < KT__CALIB_STEPS; k++) v[k] = d->own_samples[k * cells + c];
    d->own_expected[c] = finite_median(v, KT__CALIB_STEPS);
  }
  for (int l = 0; l < d->p; l++) {
    for (int k = 0; k < KT__CALIB_STEPS; k++) v[k] = d->link_samples[k * d->p + l];
    d->base[l] = finite_median(v, KT__CALIB_STEPS);
  }
  d->op_mean = n ? sum / n : 0;
  spreads(d);
}

/* Whether each rank waited for a core more than the others did (waits
 * per second of its ops' time, share[p], over the other ranks' median by
 * KT__OVER): d->waited. */
static void uneven_waits(kt__detector *d, const double *share) {
  double others[KT_MAX_RANKS];
  for (int r = 0; r < d->p; r++) {
    int n = 0;
    for (int q = 0; q < d->p; q++)
      if (q != r) others[n++] = share[q];
    d->waited[r] = share[r] - (n ? kt_median(others, (size_t)n) : 0) > KT__OVER;
  }
}

/* Rank r's median op ratio in t: its ops' wall times (own 0) or own
 * times (own 1) over the calibrated; NAN when it ran none. */
static double rank_ratio(const kt__detector *d, const kt_timeline *t, int r, int own,
                         double *ratio) {
  size_t k = 0;
  const double *expected = own ? d->own_expected : d->expected;
  for (size_t i = 0; i < t->n_events; i++) {
    const kt_event *e = &t->events[i];
    if (e->rank != r || e->stage < 0 || e->stage >= d->S || e->op >= OPS) continue;
    double x = expected[(size_t)e->stage * OPS + e->op];
    if (x > 0) ratio[k++] = (e->end - e->start - (own ? waited_during(e) : 0)) / x;
  }
  return k ? kt_median(ratio, k) : NAN;
}

/* Each rank's median op ratio over the calibrated, relative to the other
 * ranks' (factor), the same of its ops' own times (own_factor: a loaded
 * machine's scheduler holds threads of sleeping or computing ranks
 * alike), and whether its thread waited for a core, while its ops ran or
 * between them, more than the other ranks' did (waited). */
static void rank_factors(kt__detector *d, const kt_timeline *t) {
  double *ratio = kt_calloc(t->n_events + 1, sizeof *ratio), wall[KT_MAX_RANKS];
  double own[KT_MAX_RANKS], share[KT_MAX_RANKS];
  for (int r = 0; ratio && r < d->p; r++) {
    double took = 0, wait = 0;
    for (size_t i = 0; i < t->n_events; i++)
      if (t->events[i].rank == r)
        took += t->events[i].end - t->events[i].start, wait += t->events[i].ready_wait;
    wall[r] = rank_ratio(d, t, r, 0, ratio), own[r] = rank_ratio(d, t, r, 1, ratio);
    share[r] = took > 0 ? wait / took : 0;
  }
  if (ratio) relative(d, wall, d->factor), relative(d, own, d->own_factor), uneven_waits(d, share);
  free(ratio);
}

/* Whether rank r's ops / link l's hand-overs were over at the last step. */
static int rank_over(const kt__detector *d, int r) {
  return d->factor[r] > 1 + fmax(KT__OVER, KT__NOISE * d->rank_spread[r]);
}

static int own_over(const kt__detector *d, int r) {
  return d->own_factor[r] > 1 + fmax(KT__OVER, KT__NOISE * d->own_spread[r]);
}

static int link_over(const kt__detector *d, int l) {
  double base = d->base[l] > 0 ? d->base[l] : 0;
  return d->excess[l] > fmax(KT__OVER * fmax(base, d->op_mean), KT__NOISE * d->link_spread[l]);
}

/* Named: over for the last confirm_own steps in a row by its own ops'
 * time, or for KT__CONFIRM_WAIT by waits for a core. */
int kt__detector_rank_named(const kt__detector *d, int r) {
  if (r >= d->p) return 0;
  return (d->own_since[r] > 0 && d->step - d->own_since[r] + 1 >= d->confirm_own) ||
         (d->rank_since[r] > 0 && d->step - d->rank_since[r] + 1 >= KT__CONFIRM_WAIT);
}

int kt__detector_link_named(const kt__detector *d, int l) {
  return l < d->p && d->link_since[l] > 0 && d->step - d->link_since[l] + 1 >= KT__CONFIRM;
}

double kt__detector_link_delay(const kt__detector *d, int l) {
  if (!kt__detector_link_named(d, l)) return 0;
  int n = d->n_recent[l] < KT__DELAY_STEPS ? d->n_recent[l] : KT__DELAY_STEPS;
  double sum = 0;
  for (int k = 0; k < n; k++) sum += d->recent[l * KT__DELAY_STEPS + k];
  return n ? sum / n : d->excess[l];
}

/* A run of steps over: its first step (0: not over now). */
static int run_since(int since, int over, int step) { return over ? (since ? since : step) : 0; }

/* Each rank's and link's run of steps over (since: its first; 0: not
 * over now): a rank's by its ops' own time (own_since), or also by waits
 * for a core longer than the other ranks' (rank_since); a rank over only
 * as every rank waited is neither. 1 when any is over (not a step to
 * calibrate on). */
static int track(kt__detector *d, int step) {
  int any = 0, grown = 0, slow[KT_MAX_RANKS]; /* slow: its ops' wall time over */
  d->step = step;
  /* with more compute threads than cores (name_waits 0), own time over
   * while the ops' wall time is not is time the scheduler moved between
   * a rank's run and its waits: its ops took no longer, the step did not
   * slow */
  for (int r = 0; r < d->p; r++) {
    slow[r] = rank_over(d, r);
    grown += d->grew[r] = own_over(d, r) && (d->name_waits || slow[r]);
  }
  /* and own and wall time up on several ranks at once is the scheduler
   * placing the threads anew: ranks that now share a core thrash each
   * other's caches for as long as it keeps them there (a slow rank is
   * one); the steps then calibrate the new placement */
  int placed = !d->name_waits && grown > 1;
  for (int r = 0; r < d->p; r++) {
    if (placed) d->grew[r] = 0;
    d->own_since[r] = run_since(d->own_since[r], d->grew[r], step);
    int waits = d->name_waits && slow[r] && d->waited[r];
    d->rank_since[r] = run_since(d->rank_since[r], d->grew[r] || waits, step);
    any |= (slow[r] && !placed) || d->grew[r];
  }
  for (int l = 0; l < d->p; l++) {
    int over = link_over(d, l);
    d->link_since[l] = run_since(d->link_since[l], over, step);
    if (over) d->recent[l * KT__DELAY_STEPS + d->n_recent[l]++ % KT__DELAY_STEPS] = d->excess[l];
    else d->n_recent[l] = 0;
    any |= over;
  }
  return any;
}

/* What a named rank or link adds to its step, to choose the worst: a
 * rank's ops' extra time, a link's extra per hand-over times the
 * hand-overs (2 per micro-batch and round). */
static double weight_rank(const kt__detector *d, const kt_timeline *t, int r) {
  double busy = 0;
  for (size_t i = 0; i < t->n_events; i++)
    busy += t->events[i].rank == r ? t->events[i].end - t->events[i].start : 0;
  return busy * (1 - 1 / d->factor[r]);
}

/* The worst named one into d->fault (with the step it was first over). */
static void name_worst(kt__detector *d, const kt_timeline *t) {
  double worst = 0;
  memset(&d->fault, 0, sizeof d->fault);
  int rounds_mb = 0; /* hand-overs a link carries each way: the step's micro-batches */
  for (size_t i = 0; i < t->n_events; i++)
    rounds_mb = t->events[i].mb + 1 > rounds_mb ? t->events[i].mb + 1 : rounds_mb;
  for (int r = 0; r < d->p; r++) {
    int named = kt__detector_rank_named(d, r);
    double w = named ? weight_rank(d, t, r) : 0;
    if (named && w > worst)
      worst = w,
      d->fault = (kt_run_fault){KT_FAULT_RANK, r, 0, 0, d->factor[r], NAN, d->rank_since[r]};
  }
  for (int l = 0; l < d->p; l++) {
    int named = kt__detector_link_named(d, l);
    double w = named ? d->excess[l] * 2 * rounds_mb : 0;
    int a = l, b = l + 1 < d->p ? l + 1 : 0;
    double base = d->base[l] > 0 ? d->base[l] : 0;
    if (named && w > worst)
      worst = w, d->fault = (kt_run_fault){KT_FAULT_LINK,
                                           0,
                                           a < b ? a : b,
                                           a < b ? b : a,
                                           base > 0 ? (base + d->excess[l]) / base : INFINITY,
                                           d->excess[l],
                                           d->link_since[l]};
  }
}

void kt__detector_step(kt__detector *d, const kt_timeline *t, const kt_schedule *s, int step) {
  memset(&d->fault, 0, sizeof d->fault);
  if (!t || t->n_events == 0 || d->seen++ < KT__WARM_STEPS) return;
  size_t cells = (size_t)d->S * OPS;
  if (!d->calibrated) d->fault = d->held; /* calibrating again after a partition: as it was */
  if (d->calibrated) {
    rank_factors(d, t);
    link_medians(d, t, s, d->excess);
    for (int l = 0; l < d->p; l++) d->excess[l] -= d->base[l] > 0 ? d->base[l] : 0;
    int over = track(d, step);
    name_worst(d, t);
    if (over) return; /* not a step to calibrate on */
  }
  int slot = d->clean++ % KT__CALIB_STEPS;
  double *row = d->samples + (size_t)slot * cells, *own = d->own_samples + (size_t)slot * cells;
  op_means(d, t, row, own);
  for (size_t c = 0; c < cells; c++) { /* its clean cost */
    row[c] /= d->hold[d->stage_rank[c / OPS]];
    own[c] /= d->hold[d->stage_rank[c / OPS]];
  }
  link_medians(d, t, s, d->link_samples + (size_t)slot * d->p);
  if (d->clean >= KT__CALIB_STEPS) calibrate(d), d->calibrated = 1;
}

void kt__detector_repartition(kt__detector *d) {
  for (int r = 0; r < d->p; r++) d->hold[r] = kt__detector_rank_named(d, r) ? d->factor[r] : 1;
  d->held = d->fault;
  d->calibrated = 0, d->clean = 0;
}
