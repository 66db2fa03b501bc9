/* Schedule registry: names, aliases, default chunk counts, closed forms, dispatch. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "schedule/generators.h"

typedef struct {
  const char *name;
  const char *alias;
  int default_v;
  kt_placement placement;
  kt__generator_fn fn;
} kind_info;

static const kind_info kinds[] = {
    [KT_SCHED_GPIPE] = {"gpipe", NULL, 1, KT_PLACEMENT_LOOP, kt__gen_gpipe},
    [KT_SCHED_1F1B] = {"1f1b", NULL, 1, KT_PLACEMENT_LOOP, kt__gen_1f1b},
    [KT_SCHED_INTERLEAVED] = {"interleaved", "interleaved-1f1b", 2, KT_PLACEMENT_LOOP,
                              kt__gen_interleaved},
    [KT_SCHED_LOOPED_BFS] = {"looped-bfs", NULL, 2, KT_PLACEMENT_LOOP, kt__gen_looped_bfs},
    [KT_SCHED_ZB_H1] = {"zb-h1", NULL, 1, KT_PLACEMENT_LOOP, kt__gen_zb_h1},
    [KT_SCHED_ZB_H2] = {"zb-h2", NULL, 1, KT_PLACEMENT_LOOP, kt__gen_zb_h2},
    [KT_SCHED_ZBV] = {"zbv", NULL, 2, KT_PLACEMENT_V, kt__gen_zbv},
    [KT_SCHED_DUALPIPEV] = {"dualpipev", NULL, 2, KT_PLACEMENT_V, kt__gen_dualpipev},
    [KT_SCHED_ZB_AUTO] = {"zb-auto", NULL, 1, KT_PLACEMENT_LOOP, kt__gen_zb_auto},
};
_Static_assert(sizeof kinds / sizeof *kinds == KT_SCHED_COUNT, "schedule table out of sync");

const char *kt_schedule_kind_name(kt_schedule_kind k) {
  return (unsigned)k < KT_SCHED_COUNT ? kinds[k].name : "?";
}

int kt_schedule_kind_from_name(const char *name) {
  if (!name) return -1;
  for (int k = 0; k < KT_SCHED_COUNT; k++)
    if (!strcmp(name, kinds[k].name) || (kinds[k].alias && !strcmp(name, kinds[k].alias)))
      return k;
  return -1;
}

const char *kt_schedule_kind_list(void) {
  static char list[256];
  if (!list[0]) {
    size_t n = 0;
    for (int k = 0; k < KT_SCHED_COUNT; k++)
      n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", k ? ", " : "", kinds[k].name);
  }
  return list;
}

int kt_schedule_default_chunks(kt_schedule_kind k) {
  return (unsigned)k < KT_SCHED_COUNT ? kinds[k].default_v : 1;
}

double kt_schedule_closed_form_bubble(kt_schedule_kind k, int p, int v, int m, double tf,
                                      double tb, double tw, const char **expr) {
  const char *e = NULL;
  double r = -1, P = p, M = m, V = v;
  switch (k) {
    case KT_SCHED_GPIPE:
    case KT_SCHED_1F1B:
      e = "(P-1)/(M+P-1)";
      r = (P - 1) / (M + P - 1);
      break;
    case KT_SCHED_INTERLEAVED:
    case KT_SCHED_LOOPED_BFS:
      e = "(P-1)/(V*M+P-1)";
      r = (P - 1) / (V * M + P - 1);
      break;
    case KT_SCHED_ZB_H1: {
      e = "(P-1)(TF+TB-TW)/[M(TF+TB+TW)+(P-1)(TF+TB-TW)]";
      double idle = (P - 1) * fmax(0, tf + tb - tw);
      r = idle / (M * (tf + tb + tw) + idle);
      break;
    }
    case KT_SCHED_ZB_H2: {
      e = "(P-1)(TF+TB-2TW)/[M(TF+TB+TW)+(P-1)(TF+TB-2TW)]";
      double idle = (P - 1) * fmax(0, tf + tb - 2 * tw);
      r = idle / (M * (tf + tb + tw) + idle);
      break;
    }
    default: break;
  }
  if (expr) *expr = e;
  return r;
}

kt_status kt_schedule_generate(kt_schedule_kind kind, const kt_schedule_params *params,
                               kt_schedule *out, kt_error *err) {
  memset(out, 0, sizeof *out);
  if ((unsigned)kind >= KT_SCHED_COUNT)
    return kt_fail(err, KT_EINVAL, "unknown schedule kind %d", (int)kind);
  const kind_info *ki = &kinds[kind];
  int v = params->v > 0 ? params->v : ki->default_v;
  if (params->p < 1) return kt_fail(err, KT_EINVAL, "P=%d: need at least 1 rank", params->p);
  if (params->m < 1)
    return kt_fail(err, KT_EINVAL, "M=%d: need at least 1 micro-batch", params->m);
  if (ki->placement == KT_PLACEMENT_V && v != 2)
    return kt_fail(err, KT_EINVAL, "%s needs exactly 2 chunks per rank in v placement (got V=%d)",
                   ki->name, v);
  if (ki->default_v == 1 && v != 1 && kind != KT_SCHED_ZB_AUTO)
    return kt_fail(err, KT_EINVAL,
                   "%s runs one chunk per rank (got V=%d); for several chunks use interleaved "
                   "or looped-bfs",
                   ki->name, v);
  kt_status st = kt_schedule_init(out, params->p, v, params->m, ki->placement, err);
  if (st) return st;
  snprintf(out->name, sizeof out->name, "%s", ki->name);
  st = ki->fn(out, params, err);
  if (st) kt_schedule_free(out);
  return st;
}
