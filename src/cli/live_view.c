/* The live view of `kaiten train` on a terminal: one status line, the busy
 * share of every rank (folded into groups when the terminal is short) and a
 * loss sparkline, redrawn in place after every step. Every line is clipped
 * to the terminal's width so nothing wraps, the block never needs more rows
 * than the terminal has, and a resize (SIGWINCH) clears and redraws it. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cli/train_cli.h"

static const char *const spark[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};

/* A line being built, clipped to a number of columns (every glyph used here
 * is one column wide; UTF-8 continuation bytes take none). */
typedef struct {
  char text[2048];
  size_t len;
  int cols, max_cols;
} line;

static void put(line *l, const char *s) {
  for (; *s; s++) {
    int starts_glyph = ((unsigned char)*s & 0xC0) != 0x80;
    if (starts_glyph && l->cols >= l->max_cols) return;
    if (l->len + 1 >= sizeof l->text) return;
    l->text[l->len++] = *s;
    l->cols += starts_glyph;
  }
}

static void putf(line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(line *l, const char *fmt, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  put(l, buf);
}

static void emit(cli_live *lv, line *l) {
  l->text[l->len] = 0;
  fprintf(lv->f, "\x1b[2K%s\n", l->text);
  lv->drawn++;
}

static void term_size(cli_live *lv) {
  struct winsize ws;
  lv->width = 80, lv->rows = 24;
  if (ioctl(fileno(lv->f), TIOCGWINSZ, &ws) == 0) {
    if (ws.ws_col > 0) lv->width = ws.ws_col;
    if (ws.ws_row > 0) lv->rows = ws.ws_row;
  }
}

void cli_live_init(cli_live *lv, FILE *f) {
  memset(lv, 0, sizeof *lv);
  lv->f = f;
  term_size(lv);
}

/* A bar of n cells, the first round(u * n) full. */
static void bar(line *l, double u, int n) {
  int fill = (int)lround(fmin(fmax(u, 0), 1) * n);
  for (int i = 0; i < n; i++) put(l, i < fill ? "█" : "·");
}

/* Busy share per rank: a line each when rows allow, else groups of ranks
 * (their mean), at most `avail` lines. */
static void draw_ranks(cli_live *lv, const kt_metrics *m, int avail) {
  if (avail <= 0 || m->p <= 0) return;
  int groups = m->p <= avail ? m->p : avail;
  int per = (m->p + groups - 1) / groups;
  groups = (m->p + per - 1) / per;
  int bar_w = lv->width - 32;
  if (bar_w > 40) bar_w = 40;
  for (int g = 0; g < groups; g++) {
    int lo = g * per, hi = lo + per > m->p ? m->p : lo + per;
    double busy = 0;
    for (int r = lo; r < hi; r++) busy += m->ranks[r].busy;
    double u = m->makespan > 0 ? busy / (hi - lo) / m->makespan : 0;
    line l = {.max_cols = lv->width - 1};
    if (per == 1) putf(&l, "  rank %4d ", lo);
    else putf(&l, "  ranks %d-%d ", lo, hi - 1);
    if (bar_w >= 4) {
      put(&l, "|");
      bar(&l, u, bar_w);
      put(&l, "| ");
    }
    putf(&l, "%5.1f%% busy", 100 * u);
    emit(lv, &l);
  }
}

static void draw_sparkline(cli_live *lv, const double *losses, int n) {
  line l = {.max_cols = lv->width - 1};
  put(&l, "  loss ");
  int room = lv->width - 1 - 7 - 22; /* leave room for the range */
  if (room < 0) room = 0;
  int from = n > room ? n - room : 0;
  double lo = INFINITY, hi = -INFINITY;
  for (int i = from; i < n; i++)
    if (isfinite(losses[i])) lo = fmin(lo, losses[i]), hi = fmax(hi, losses[i]);
  for (int i = from; i < n; i++) {
    /* halves: a range of -1e308..1e308 must not overflow to inf (inf/inf is NaN) */
    double f = hi > lo && isfinite(losses[i]) ? (losses[i] / 2 - lo / 2) / (hi / 2 - lo / 2) : 0;
    put(&l, spark[f > 0 ? (int)(fmin(f, 1) * 7.999) : 0]);
  }
  if (lo <= hi) putf(&l, "  %.4f .. %.4f", lo, hi);
  emit(lv, &l);
}

void cli_live_draw(cli_live *lv, const kt_train_progress *p, const double *losses, int n) {
  kt_metrics m;
  kt_error err;
  if (kt_timeline_metrics(p->timeline, &m, &err)) return;
  if (cli_take_resize()) { /* the old block may have reflowed: start over at the top */
    term_size(lv);
    fputs("\x1b[H\x1b[2J", lv->f);
    lv->drawn = 0;
  }
  if (lv->drawn) fprintf(lv->f, "\x1b[%dA", lv->drawn);
  lv->drawn = 0;
  line l = {.max_cols = lv->width - 1};
  putf(&l, "step %d/%d  loss %.4f", p->step + 1, p->steps, p->loss);
  if (!isnan(p->val_loss)) putf(&l, "  val %.4f", p->val_loss);
  putf(&l, "  %.0f tok/s  bubble %.1f%%", p->tokens_per_s, 100 * p->bubble);
  emit(lv, &l);
  /* the block keeps one row free so the terminal never scrolls under it */
  int rows_left = lv->rows - 1 - 1;
  if (rows_left >= 2) {
    draw_ranks(lv, &m, rows_left - 1);
    draw_sparkline(lv, losses, n);
  } else if (rows_left == 1) {
    draw_sparkline(lv, losses, n);
  }
  fputs("\x1b[J", lv->f); /* anything a taller block left below */
  fflush(lv->f);
  kt_metrics_free(&m);
}
