/* The links between pipeline ranks one by one (kt_costs.n_links): a hop's
 * time per link, its latency and bandwidth, and a delay added to it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "costs/costs_internal.h"

int kt_link_index(int a, int b, int n) {
  if (a > b) {
    int t = a;
    a = b, b = t;
  }
  if (a < 0 || a == b) return -1;
  if (b == a + 1) return a;
  return a == 0 && n > 2 && b == n - 1 ? n - 1 : -1;
}

/* The entry of link l in list a (NULL, or l past the list: none). */
static int has(const kt_costs *c, const double *a, int l) { return a && l >= 0 && l < c->n_links; }

double kt_cost_link_at(const kt_costs *c, int l) {
  double hop, delay = has(c, c->link_delay, l) ? c->link_delay[l] : 0;
  double bw = has(c, c->link_bandwidth, l) ? c->link_bandwidth[l] : c->comm_bandwidth;
  if (bw > 0)
    hop = (has(c, c->link_latency, l) ? c->link_latency[l] : c->comm_latency) + c->comm_bytes / bw;
  else hop = has(c, c->link_comm, l) ? c->link_comm[l] : c->comm;
  return hop + delay;
}

double kt_cost_link(const kt_costs *c, int from, int to) {
  if (from == to) return 0;
  if (!c->n_links) return kt_cost_comm(c);
  /* a list of P - 1 links has no wrap: n_links + 1 ranks; a list of P has */
  int l = kt_link_index(from, to, c->n_links + 1);
  if (l < 0) l = kt_link_index(from, to, c->n_links);
  return kt_cost_link_at(c, l);
}

static double **link_list(kt_costs *c, const char *field) {
  if (!strcmp(field, "comm")) return &c->link_comm;
  if (!strcmp(field, "comm-latency") || !strcmp(field, "comm_latency")) return &c->link_latency;
  if (!strcmp(field, "comm-bandwidth") || !strcmp(field, "comm_bandwidth"))
    return &c->link_bandwidth;
  if (!strcmp(field, "link-delay") || !strcmp(field, "link_delay")) return &c->link_delay;
  return NULL;
}

/* The uniform value a link list stands in for. */
static double *link_uniform(kt_costs *c, double **list) {
  return list == &c->link_comm        ? &c->comm
         : list == &c->link_latency   ? &c->comm_latency
         : list == &c->link_bandwidth ? &c->comm_bandwidth
                                      : NULL;
}

int kt__costs_is_link_field(const char *field) {
  kt_costs dummy;
  return link_list(&dummy, field) != NULL;
}

kt_status kt__costs_set_links(kt_costs *c, const char *field, const double *vals, int n,
                              kt_error *err) {
  double **list = link_list(c, field);
  if (!list) return kt_fail(err, KT_EINVAL, "unknown cost field '%s'", field);
  for (int i = 0; i < n; i++)
    if (!kt__costs_value_ok(vals[i], KT_COST_STAGE_MIN))
      return kt_fail(err, KT_EINVAL, "%s: link %d has %g; " KT__COST_RANGE_TEXT, field, i, vals[i]);
  double *uniform = link_uniform(c, list);
  if (n == 1 && uniform) {
    *uniform = vals[0];
    free(*list);
    *list = NULL;
    return KT_OK;
  }
  if (c->n_links > 0 && c->n_links != n)
    return kt_fail(err, KT_EINVAL, "%s lists %d links but another list has %d", field, n,
                   c->n_links);
  double *a = malloc(sizeof(double) * (size_t)n);
  if (!a) return kt_fail(err, KT_ENOMEM, "out of memory");
  memcpy(a, vals, sizeof(double) * (size_t)n);
  free(*list);
  *list = a;
  c->n_links = n;
  return KT_OK;
}

void kt__costs_links_free(kt_costs *c) {
  free(c->link_comm);
  free(c->link_latency);
  free(c->link_bandwidth);
  free(c->link_delay);
  c->link_comm = c->link_latency = c->link_bandwidth = c->link_delay = NULL;
  c->n_links = 0;
}

int kt__costs_links_copy(kt_costs *dst, const kt_costs *src) {
  double **d[] = {&dst->link_comm, &dst->link_latency, &dst->link_bandwidth, &dst->link_delay};
  const double *s[] = {src->link_comm, src->link_latency, src->link_bandwidth, src->link_delay};
  int fail = 0;
  for (int i = 0; i < 4; i++) {
    *d[i] = NULL;
    if (!s[i] || src->n_links <= 0) continue;
    if (!(*d[i] = malloc(sizeof(double) * (size_t)src->n_links))) fail = 1;
    else memcpy(*d[i], s[i], sizeof(double) * (size_t)src->n_links);
  }
  return fail;
}

kt_status kt__costs_links_check(const kt_costs *c, kt_error *err) {
  const struct {
    const char *name;
    const double *a;
  } lists[] = {{"comm", c->link_comm},
               {"comm-latency", c->link_latency},
               {"comm-bandwidth", c->link_bandwidth},
               {"link-delay", c->link_delay}};
  if (c->n_links < 0 || c->n_links > KT_MAX_RANKS)
    return kt_fail(err, KT_EINVAL, "%d links: expected 0..%d", c->n_links, KT_MAX_RANKS);
  for (size_t i = 0; i < sizeof lists / sizeof *lists; i++)
    for (int l = 0; lists[i].a && l < c->n_links; l++)
      if (!kt__costs_value_ok(lists[i].a[l], KT_COST_STAGE_MIN))
        return kt_fail(err, KT_EINVAL, "%s: link %d has %g; " KT__COST_RANGE_TEXT, lists[i].name, l,
                       lists[i].a[l]);
  return KT_OK;
}

/* list (n_old entries, or NULL) as p entries: the uniform value where it
 * has none. */
static double *resized(const double *list, int n_old, int p, double uniform) {
  double *a = malloc(sizeof(double) * (size_t)p);
  for (int l = 0; a && l < p; l++) a[l] = list && l < n_old ? list[l] : uniform;
  return a;
}

kt_status kt_costs_links_for(kt_costs *c, int p, kt_error *err) {
  if (p < 1) return kt_fail(err, KT_EINVAL, "%d ranks: expected at least 1", p);
  int n = p == 2 ? 1 : p; /* two ranks have one link; more, one each and the wrap */
  if (p < 2) return KT_OK;
  if (c->n_links > 0 && c->n_links != n && c->n_links != p - 1)
    return kt_fail(err, KT_EINVAL,
                   "the costs list %d links; %d ranks have %d (each rank to the next) or %d (and "
                   "the last back to the first)",
                   c->n_links, p, p - 1, p);
  double **lists[] = {&c->link_comm, &c->link_latency, &c->link_bandwidth, &c->link_delay};
  double uniform[] = {c->comm, c->comm_latency, c->comm_bandwidth, 0};
  double *made[4] = {NULL, NULL, NULL, NULL};
  int fail = 0;
  for (int i = 0; i < 4; i++)
    if (!*lists[i] || c->n_links != n)
      fail |= !(made[i] = resized(*lists[i], c->n_links, n, uniform[i]));
  for (int i = 0; i < 4; i++) {
    if (fail || !made[i]) {
      free(made[i]);
      continue;
    }
    free(*lists[i]);
    *lists[i] = made[i];
  }
  if (fail) return kt_fail(err, KT_ENOMEM, "out of memory");
  c->n_links = n; /* a wrap the list did not name keeps the uniform hop */
  return KT_OK;
}
