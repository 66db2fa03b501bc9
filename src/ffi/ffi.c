/* The flat interface for foreign-function callers: handles around the
 * library's structs, each call handed to the library (kaiten/ffi.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/ffi.h"
#include "kaiten/generators.h"
#include "kaiten/report.h"
#include "kaiten/sim.h"

void kt_ffi_free(char *text) { free(text); }

/* ---- the arguments, checked once, here: every value the CLI checks, with its ranges ---- */

#define NEED(x, what) \
  do { if (!(x)) return kt_fail(err, KT_EINVAL, "%s: NULL", what); } while (0)

/* P, V and M in the CLI's ranges (-p, -v, -m); v_lo: the least V (0: the default). */
static kt_status check_layout(int p, int v, int m, int v_lo, kt_error *err) {
  if (p < 1 || p > KT_MAX_RANKS)
    return kt_fail(err, KT_EINVAL, "P=%d: expected 1..%d ranks", p, KT_MAX_RANKS);
  if (v < v_lo || v > KT_MAX_CHUNKS)
    return kt_fail(err, KT_EINVAL, "V=%d: expected %d..%d chunks per rank", v, v_lo, KT_MAX_CHUNKS);
  if (m < 1 || m > KT_MAX_MICROBATCHES)
    return kt_fail(err, KT_EINVAL, "M=%d: expected 1..%d micro-batches", m, KT_MAX_MICROBATCHES);
  return KT_OK;
}

/* The layout and its simulation fit this machine (the CLI's guard: a
 * schedule, its timeline and the JSON of its events). */
static kt_status check_size(int p, int v, int m, kt_error *err) {
  double actions = 3.0 * p * (v > 0 ? v : 2) * (double)m;
  kt_error sub;
  if (!kt_sim_memory_check(actions, KT_SIM_BYTES_TIMELINE, &sub)) return KT_OK;
  return kt_fail(err, KT_EINVAL, "P=%d M=%d: %s", p, m, sub.msg);
}

/* A schedule handle that holds a schedule. */
static kt_status check_schedule(const kt_schedule *s, kt_error *err) {
  NEED(s, "schedule");
  if (!s->ranks || s->p < 1) return kt_fail(err, KT_EINVAL, "an empty schedule handle");
  return KT_OK;
}

/* Hands a rendered buffer over as a malloc'd string (it owns b's data). */
static kt_status take_text(kt_buf *b, char **out, kt_error *err) {
  *out = NULL;
  if (b->failed) {
    kt_buf_free(b);
    return kt_fail(err, KT_ENOMEM, "out of memory rendering the result");
  }
  if (!b->data) kt_buf_append(b, "", 0);
  *out = b->data ? b->data : strdup("");
  if (!*out) return kt_fail(err, KT_ENOMEM, "out of memory rendering the result");
  return KT_OK;
}

/* ---- costs ---------------------------------------------------------------- */

kt_costs *kt_ffi_costs_new(void) {
  kt_costs *c = kt_calloc(1, sizeof *c);
  if (c) kt_costs_default(c);
  return c;
}

void kt_ffi_costs_free(kt_costs *c) {
  if (!c) return;
  kt_costs_free(c);
  free(c);
}

kt_status kt_ffi_costs_json(const kt_costs *c, char **out, kt_error *err) {
  *out = NULL;
  NEED(c, "costs");
  kt_buf b;
  kt_buf_init(&b);
  kt_render_costs_json(c, &b);
  return take_text(&b, out, err);
}

/* ---- schedules -------------------------------------------------------------- */

kt_schedule *kt_ffi_schedule_new(void) { return kt_calloc(1, sizeof(kt_schedule)); }

void kt_ffi_schedule_free(kt_schedule *s) {
  if (!s) return;
  if (s->ranks) kt_schedule_free(s);
  free(s);
}

void kt_ffi_schedule_shape(const kt_schedule *s, int shape[5]) {
  if (!shape) return;
  if (!s) {
    memset(shape, 0, 5 * sizeof *shape);
    return;
  }
  shape[0] = s->p, shape[1] = s->v, shape[2] = s->m;
  shape[3] = s->ranks ? kt_schedule_stages(s) : 0;
  shape[4] = (int)s->placement;
}

const char *kt_ffi_schedule_name(const kt_schedule *s) { return s ? s->name : ""; }

void kt_ffi_schedule_set_name(kt_schedule *s, const char *name) {
  if (s) snprintf(s->name, sizeof s->name, "%s", name ? name : "");
}

kt_status kt_ffi_generate(int kind, int p, int v, int m, const kt_costs *c, double mem_limit,
                          int thorough, kt_schedule *out, kt_error *err) {
  NEED(out, "schedule");
  if (kind < 0 || kind >= KT_SCHED_COUNT)
    return kt_fail(err, KT_EINVAL, "schedule kind %d: expected 0..%d", kind, KT_SCHED_COUNT - 1);
  kt_status st = check_layout(p, v, m, 0, err);
  if (!st) st = kt_gen_check_mem_limit((kt_gen_kind)kind, mem_limit, err);
  if (!st) st = check_size(p, v, m, err);
  if (st) return st;
  kt_gen_params params = {.p = p, .v = v, .m = m, .costs = c, .mem_limit = mem_limit,
                          .thorough = thorough != 0};
  kt_schedule_free(out); /* a handle used before holds its last schedule */
  return kt_generate((kt_gen_kind)kind, &params, out, err);
}

double kt_ffi_1f1b_peak(int kind, int p, int v, int m, const kt_costs *c) {
  if (kind < 0 || kind >= KT_SCHED_COUNT || check_layout(p, v, m, 0, NULL) ||
      (c && kt_costs_check(c, c->n_stages, NULL)))
    return -1;
  kt_gen_params params = {.p = p, .v = v, .m = m, .costs = c};
  return kt_gen_1f1b_peak((kt_gen_kind)kind, &params);
}

double kt_ffi_mem_limit(int p, int v, int m, const kt_costs *c, double mem_limit) {
  if (check_layout(p, v, m, 0, NULL) || !isfinite(mem_limit) ||
      (c && kt_costs_check(c, c->n_stages, NULL)))
    return -1;
  kt_gen_params params = {.p = p, .v = v, .m = m, .costs = c, .mem_limit = mem_limit};
  return kt_gen_mem_limit(&params);
}

kt_status kt_ffi_parse(const char *text, int notation, kt_schedule *out, kt_schedule *lowered,
                       long info[3], kt_error *err) {
  NEED(text, "text");
  NEED(out, "schedule");
  size_t len = strnlen(text, (size_t)KT_SCHEDULE_FILE_MAX + 1);
  if (len > (size_t)KT_SCHEDULE_FILE_MAX)
    return kt_fail(err, KT_EINVAL, "a schedule text of more than %lld MiB: more than a schedule "
                   "file may hold", KT_SCHEDULE_FILE_MAX >> 20);
  if (notation < KT_NOTATION_AUTO || notation > KT_NOTATION_LEGACY)
    return kt_fail(err, KT_EINVAL, "notation %d: expected 0 (auto), 1 (current) or 2 (legacy)",
                   notation);
  kt_parse_opts po = {.notation = (kt_notation)notation, .lowered = lowered};
  kt_schedule_free(out); /* a handle used before holds its last schedule */
  if (lowered) kt_schedule_free(lowered);
  kt_status st = kt_schedule_parse_opts(text, &po, out, err);
  if (!st && info) {
    info[0] = (long)po.detected;
    info[1] = (long)po.comm_actions;
    info[2] = (long)po.p2p_actions;
  }
  return st;
}

kt_status kt_ffi_parse_file(const char *path, int notation, kt_schedule *out,
                            kt_schedule *lowered, long info[3], kt_error *err) {
  NEED(path, "path");
  NEED(out, "schedule");
  if (notation < KT_NOTATION_AUTO || notation > KT_NOTATION_LEGACY)
    return kt_fail(err, KT_EINVAL, "notation %d: expected 0 (auto), 1 (current) or 2 (legacy)",
                   notation);
  kt_parse_opts po = {.notation = (kt_notation)notation, .lowered = lowered};
  kt_schedule_free(out);
  if (lowered) kt_schedule_free(lowered);
  kt_status st = kt_schedule_parse_file_opts(path, &po, out, err);
  if (!st && info) {
    info[0] = (long)po.detected;
    info[1] = (long)po.comm_actions;
    info[2] = (long)po.p2p_actions;
  }
  return st;
}

kt_status kt_ffi_schedule_write(const kt_schedule *s, int notation, char **out, kt_error *err) {
  *out = NULL;
  kt_status st = check_schedule(s, err);
  if (st) return st;
  if (notation > KT_NOTATION_LEGACY)
    return kt_fail(err, KT_EINVAL, "notation %d: expected -1 (text), 0 or 1 (current) or 2 "
                   "(legacy)", notation);
  kt_buf b;
  kt_buf_init(&b);
  if (notation < 0) kt_schedule_write_text(s, &b);
  else kt_schedule_write_csv_notation(s, (kt_notation)notation, &b);
  return take_text(&b, out, err);
}

/* ---- simulations -------------------------------------------------------------- */

struct kt_ffi_sim {
  kt_timeline tl;
  kt_metrics met;
};

kt_status kt_ffi_simulate(const kt_schedule *s, const kt_costs *c, kt_ffi_sim **out,
                          kt_error *err) {
  *out = NULL;
  kt_status st = check_schedule(s, err);
  if (st) return st;
  NEED(c, "costs");
  kt_error sub;
  if (kt_sim_memory_check((double)kt_schedule_total_actions(s), KT_SIM_BYTES_TIMELINE, &sub))
    return kt_fail(err, KT_EINVAL, "%s", sub.msg);
  *out = kt_calloc(1, sizeof **out);
  if (!*out) return kt_fail(err, KT_ENOMEM, "out of memory");
  st = kt_simulate_both(s, c, &(*out)->tl, &(*out)->met, err);
  if (st) {
    free(*out);
    *out = NULL;
  }
  return st;
}

void kt_ffi_sim_free(kt_ffi_sim *sim) {
  if (!sim) return;
  kt_timeline_free(&sim->tl);
  kt_metrics_free(&sim->met);
  free(sim);
}

struct kt_ffi_search {
  kt_optimal_result res;
  double time_limit;
};

kt_status kt_ffi_optimal(int p, int v, int m, const kt_costs *c, double mem_limit,
                         double time_limit, kt_schedule *out, kt_ffi_search **search,
                         kt_error *err) {
  *search = NULL;
  NEED(out, "schedule");
  kt_status st = check_layout(p, v, m, 1, err);
  if (!st && v > 2) st = kt_fail(err, KT_EINVAL, "V=%d: optimal runs 1 (loop) or 2 (v placement)", v);
  if (!st && !(time_limit <= 0 || (time_limit >= 1e-3 && time_limit <= 1e6)))
    st = kt_fail(err, KT_EINVAL, "time limit %g: expected seconds in 0.001..1e+06 (or <= 0: 10)",
                 time_limit);
  if (!st && !isfinite(mem_limit))
    st = kt_fail(err, KT_EINVAL, "memory limit %g: expected a finite number", mem_limit);
  if (st) return st;
  *search = kt_calloc(1, sizeof **search);
  if (!*search) return kt_fail(err, KT_ENOMEM, "out of memory");
  kt_gen_params params = {.p = p, .v = v, .m = m, .costs = c, .mem_limit = mem_limit};
  kt_optimal_opts o = {.time_limit = time_limit};
  (*search)->time_limit = time_limit;
  kt_schedule_free(out); /* a handle used before holds its last schedule */
  kt_placement pl = v == 2 ? KT_PLACEMENT_V : KT_PLACEMENT_LOOP;
  st = kt_gen_optimal(&params, pl, &o, out, &(*search)->res, err);
  if (st) {
    free(*search);
    *search = NULL;
  }
  return st;
}

void kt_ffi_search_free(kt_ffi_search *search) { free(search); }

/* A report or comparison holds at most this many rows (every schedule,
 * optimal and files). */
#define FFI_MAX_ROWS 256
#define GANTT_MIN_WIDTH 40 /* kaiten sim --width */
#define GANTT_MAX_WIDTH 100000

/* n rows' arrays: each present, and a name for every row. */
static kt_status check_rows(int n, const void *infos, const void *sims, const char *const *names,
                            kt_error *err) {
  if (n == 0) return KT_OK;
  NEED(infos, "infos");
  NEED(sims, "sims");
  NEED(names, "names");
  for (int i = 0; i < n; i++)
    if (!names[i]) return kt_fail(err, KT_EINVAL, "names[%d]: NULL", i);
  return KT_OK;
}

struct kt_ffi_info {
  kt_sim_info info;
  kt_sim_origin origin;
  kt_gen_bound bound;
  kt_ffi_search search; /* a copy: the info outlives the caller's search handle */
  char *strings[2];     /* name, cost basis */
  char placement[512];
};

kt_ffi_info *kt_ffi_info_new(const kt_schedule *s, const kt_costs *c, const char *cost_basis,
                             int kind, double mem_limit, const kt_ffi_search *search,
                             const kt_ffi_sim *sim) {
  if (check_schedule(s, NULL) || !c || !isfinite(mem_limit)) return NULL;
  kt_ffi_info *f = kt_calloc(1, sizeof *f);
  if (!f) return NULL;
  const char *texts[2] = {s->name, cost_basis};
  for (int i = 0; i < 2; i++)
    if (texts[i] && !(f->strings[i] = strdup(texts[i]))) {
      kt_ffi_info_free(f);
      return NULL;
    }
  if (search) f->search = *search;
  f->origin = (kt_sim_origin){.kind = kind, .mem_limit = mem_limit,
                              .optimal = search ? &f->search.res : NULL,
                              .time_limit = f->search.time_limit};
  f->info = (kt_sim_info){.schedule = f->strings[0], .p = s->p, .v = s->v, .m = s->m,
                          .placement = kt_schedule_placement_text(s, f->placement,
                                                                  sizeof f->placement),
                          /* the renderers read P*V entries: an uneven table has fewer */
                          .stage_ranks = kt_schedule_even(s) ? s->stage_rank : NULL,
                          .costs = c, .cost_basis = f->strings[1],
                          .messages = kt_schedule_messages(s)};
  if (sim) {
    kt_gen_bound_of(s, c, mem_limit, sim->met.period, NULL, &f->bound);
    f->origin.bound = &f->bound;
  }
  kt_sim_info_describe(&f->info, &f->origin, s, c, sim ? &sim->met : NULL);
  return f;
}

void kt_ffi_info_free(kt_ffi_info *info) {
  if (!info) return;
  for (int i = 0; i < 2; i++) free(info->strings[i]);
  free(info);
}

kt_status kt_ffi_sim_json(const kt_ffi_info *info, const kt_ffi_sim *sim, int events, char **out,
                          kt_error *err) {
  *out = NULL;
  NEED(info, "info");
  NEED(sim, "simulation");
  kt_buf b;
  kt_buf_init(&b);
  kt_render_sim_json(&info->info, &sim->met, events ? &sim->tl : NULL, &b);
  return take_text(&b, out, err);
}

kt_status kt_ffi_sim_gantt(const kt_ffi_info *info, const kt_ffi_sim *sim, int width, char **out,
                           kt_error *err) {
  *out = NULL;
  NEED(info, "info");
  NEED(sim, "simulation");
  if (width != 0 && (width < GANTT_MIN_WIDTH || width > GANTT_MAX_WIDTH))
    return kt_fail(err, KT_EINVAL, "width %d: expected %d..%d columns (or 0: 120)", width,
                   GANTT_MIN_WIDTH, GANTT_MAX_WIDTH);
  kt_gantt_opts go;
  kt_gantt_default_opts(&go);
  if (width > 0) go.width = width;
  go.chunks = info->info.v;
  kt_buf b;
  kt_buf_init(&b);
  kt_render_gantt_ascii(&sim->tl, &go, &b);
  kt_buf_puts(&b, "\n");
  kt_render_metrics_text(&info->info, &sim->met, sim->tl.time_unit, &b);
  kt_render_cost_basis_line(info->info.cost_basis, info->info.v, &b);
  kt_render_memory_model_line(info->info.costs, &b);
  return take_text(&b, out, err);
}

kt_status kt_ffi_report(const char *path, const char *title, int n, const kt_ffi_info *const *infos,
                        const kt_ffi_sim *const *sims, const char *const *names,
                        const char *const *reasons, int p, int m, const char *cost_basis,
                        const kt_costs *given, kt_error *err) {
  NEED(path, "path");
  NEED(title, "title");
  if (n < 1 || n > FFI_MAX_ROWS)
    return kt_fail(err, KT_EINVAL, "a report of %d entries: expected 1..%d", n, FFI_MAX_ROWS);
  kt_status st = check_rows(n, infos, sims, names, err);
  if (!st) st = check_layout(p, 1, m, 1, err);
  if (st) return st;
  kt_report_entry *e = kt_calloc((size_t)n, sizeof *e);
  if (!e) return kt_fail(err, KT_ENOMEM, "out of memory");
  for (int i = 0; i < n; i++) {
    int ran = sims[i] && infos[i];
    if (ran) e[i] = (kt_report_entry){.info = infos[i]->info, .timeline = &sims[i]->tl,
                                      .metrics = &sims[i]->met};
    else e[i].reason = reasons && reasons[i] ? reasons[i] : ""; /* does not apply: the layout asked for */
    e[i].info.schedule = names[i];
    e[i].info.cost_basis = cost_basis;
    e[i].info.p = p, e[i].info.m = m;
  }
  st = kt_write_html_report(path, title, e, (size_t)n, given, err);
  free(e);
  return st;
}

kt_status kt_ffi_compare(int n, const kt_ffi_info *const *infos, const kt_ffi_sim *const *sims,
                         const char *const *names, const char *const *reasons, double peak_1f1b,
                         int p, int m, int v, const char *cost_basis, const kt_costs *given,
                         int table, char **out, kt_error *err) {
  *out = NULL;
  if (n < 0 || n > FFI_MAX_ROWS)
    return kt_fail(err, KT_EINVAL, "a comparison of %d rows: expected 0..%d", n, FFI_MAX_ROWS);
  kt_status st = check_rows(n, infos, sims, names, err);
  if (!st) st = check_layout(p, v, m, 0, err);
  if (!st && !isfinite(peak_1f1b)) st = kt_fail(err, KT_EINVAL, "1F1B's peak %g", peak_1f1b);
  if (st) return st;
  kt_compare_row *rows = kt_calloc(n > 0 ? (size_t)n : 1, sizeof *rows);
  if (!rows) return kt_fail(err, KT_ENOMEM, "out of memory");
  for (int i = 0; i < n; i++) {
    if (sims[i] && infos[i])
      kt_compare_row_fill(&rows[i], &infos[i]->info, &infos[i]->origin, &sims[i]->met, peak_1f1b);
    else rows[i].reason = reasons && reasons[i] ? reasons[i] : "";
    rows[i].schedule = names[i];
  }
  kt_compare_info info = {.p = p, .m = m, .v = v, .costs = given, .cost_basis = cost_basis};
  kt_buf b;
  kt_buf_init(&b);
  if (table) {
    kt_render_compare_table(&info, rows, (size_t)n, &b);
    kt_render_memory_model_line(given, &b);
  } else kt_render_compare_json(&info, rows, (size_t)n, &b);
  free(rows);
  return take_text(&b, out, err);
}
