/* The flat interface for foreign-function callers: handles around the
 * library's structs, each call handed to the library (kaiten/ffi.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/ffi.h"
#include "kaiten/generators.h"
#include "kaiten/report.h"
#include "kaiten/sim.h"

void kt_ffi_free(char *text) { free(text); }

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
  shape[0] = s->p, shape[1] = s->v, shape[2] = s->m;
  shape[3] = s->ranks ? kt_schedule_stages(s) : 0;
  shape[4] = (int)s->placement;
}

const char *kt_ffi_schedule_name(const kt_schedule *s) { return s->name; }

void kt_ffi_schedule_set_name(kt_schedule *s, const char *name) {
  snprintf(s->name, sizeof s->name, "%s", name ? name : "");
}

kt_status kt_ffi_generate(int kind, int p, int v, int m, const kt_costs *c, double mem_limit,
                          kt_schedule *out, kt_error *err) {
  if (kind < 0 || kind >= KT_SCHED_COUNT)
    return kt_fail(err, KT_EINVAL, "schedule kind %d: expected 0..%d", kind, KT_SCHED_COUNT - 1);
  kt_schedule_params params = {.p = p, .v = v, .m = m, .costs = c, .mem_limit = mem_limit};
  return kt_schedule_generate((kt_schedule_kind)kind, &params, out, err);
}

double kt_ffi_1f1b_peak(int kind, int p, int v, int m, const kt_costs *c) {
  if (kind < 0 || kind >= KT_SCHED_COUNT) return -1;
  kt_schedule_params params = {.p = p, .v = v, .m = m, .costs = c};
  return kt_schedule_1f1b_peak((kt_schedule_kind)kind, &params);
}

double kt_ffi_mem_limit(int p, int v, int m, const kt_costs *c, double mem_limit) {
  kt_schedule_params params = {.p = p, .v = v, .m = m, .costs = c, .mem_limit = mem_limit};
  return kt_schedule_mem_limit(&params);
}

kt_status kt_ffi_parse(const char *text, int notation, kt_schedule *out, kt_schedule *lowered,
                       long info[3], kt_error *err) {
  if (notation < KT_NOTATION_AUTO || notation > KT_NOTATION_LEGACY)
    return kt_fail(err, KT_EINVAL, "notation %d: expected 0 (auto), 1 (current) or 2 (legacy)",
                   notation);
  kt_parse_opts po = {.notation = (kt_notation)notation, .lowered = lowered};
  kt_status st = kt_schedule_parse_opts(text, &po, out, err);
  if (!st && info) {
    info[0] = (long)po.detected;
    info[1] = (long)po.comm_actions;
    info[2] = (long)po.p2p_actions;
  }
  return st;
}

kt_status kt_ffi_schedule_write(const kt_schedule *s, int notation, char **out, kt_error *err) {
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
  *out = kt_calloc(1, sizeof **out);
  if (!*out) return kt_fail(err, KT_ENOMEM, "out of memory");
  kt_status st = kt_simulate_both(s, c, &(*out)->tl, &(*out)->met, err);
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

struct kt_ffi_info {
  kt_sim_info info;
  char *strings[5]; /* name, cost basis, placement, expression, why */
};

kt_ffi_info *kt_ffi_info_new(const kt_schedule *s, const kt_costs *c, const char *cost_basis,
                             const char *placement, double closed_form, const char *expr,
                             const char *why) {
  kt_ffi_info *f = kt_calloc(1, sizeof *f);
  if (!f) return NULL;
  const char *texts[5] = {s->name, cost_basis, placement ? placement
                                                         : kt_placement_name(s->placement),
                          expr, why};
  for (int i = 0; i < 5; i++)
    if (texts[i] && !(f->strings[i] = strdup(texts[i]))) {
      kt_ffi_info_free(f);
      return NULL;
    }
  f->info = (kt_sim_info){.schedule = f->strings[0], .p = s->p, .v = s->v, .m = s->m,
                          .placement = f->strings[2],
                          /* the renderers read P*V entries: an uneven table has fewer */
                          .stage_ranks = kt_schedule_even(s) ? s->stage_rank : NULL,
                          .costs = c, .cost_basis = f->strings[1], .closed_form = closed_form,
                          .closed_form_expr = closed_form >= 0 ? f->strings[3] : NULL,
                          .closed_form_why = f->strings[4],
                          .messages = kt_schedule_messages(s)};
  return f;
}

void kt_ffi_info_free(kt_ffi_info *info) {
  if (!info) return;
  for (int i = 0; i < 5; i++) free(info->strings[i]);
  free(info);
}

kt_status kt_ffi_sim_json(const kt_ffi_info *info, const kt_ffi_sim *sim, int events, char **out,
                          kt_error *err) {
  kt_buf b;
  kt_buf_init(&b);
  kt_render_sim_json(&info->info, &sim->met, events ? &sim->tl : NULL, &b);
  return take_text(&b, out, err);
}

kt_status kt_ffi_sim_gantt(const kt_ffi_info *info, const kt_ffi_sim *sim, int width, char **out,
                           kt_error *err) {
  kt_gantt_opts go;
  kt_gantt_default_opts(&go);
  if (width > 0) go.width = width;
  go.chunks = info->info.v;
  kt_buf b;
  kt_buf_init(&b);
  kt_render_gantt_ascii(&sim->tl, &go, &b);
  kt_buf_puts(&b, "\n");
  kt_render_metrics_text(&info->info, &sim->met, sim->tl.time_unit, &b);
  return take_text(&b, out, err);
}

kt_status kt_ffi_report(const char *path, const char *title, int n, const kt_ffi_info *const *infos,
                        const kt_ffi_sim *const *sims, const char *const *names,
                        const char *const *reasons, int p, int m, const char *cost_basis,
                        const kt_costs *given, kt_error *err) {
  if (n < 1) return kt_fail(err, KT_EINVAL, "a report needs at least one entry");
  kt_report_entry *e = kt_calloc((size_t)n, sizeof *e);
  if (!e) return kt_fail(err, KT_ENOMEM, "out of memory");
  for (int i = 0; i < n; i++) {
    int ran = sims[i] && infos[i];
    if (ran) e[i] = (kt_report_entry){.info = infos[i]->info, .timeline = &sims[i]->tl,
                                      .metrics = &sims[i]->met};
    else e[i].reason = reasons[i] ? reasons[i] : ""; /* does not apply: the layout asked for */
    e[i].info.schedule = names[i];
    e[i].info.cost_basis = cost_basis;
    e[i].info.p = p, e[i].info.m = m;
  }
  kt_status st = kt_write_html_report(path, title, e, (size_t)n, given, err);
  free(e);
  return st;
}
