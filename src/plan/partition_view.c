/* The partition-only view of `kaiten plan --partition-only`: the exact
 * min-max cut of the model's layers into stages by time per micro-batch
 * (optionally under the device memory with 1F1B's in-flight counts), with
 * per-stage load, parameters and memory. */
#include <math.h>
#include <stdlib.h>

#include "kaiten/plan.h"

void kt_plan_partition_view_free(kt_plan_partition_view *pv) {
  free(pv->counts);
  free(pv->load);
  free(pv->params);
  free(pv->mem);
  pv->counts = NULL, pv->load = pv->params = pv->mem = NULL;
}

kt_status kt_plan_partition_only(const kt_plan_model *m, const kt_plan_cluster *c,
                                 const kt_plan_options *o, kt_plan_partition_view *pv,
                                 kt_error *err) {
  int n = m->n_layers, S = pv->stages;
  kt_layer_cost *lc = kt_calloc((size_t)n, sizeof *lc);
  double *buf = kt_calloc((size_t)(3 * n + S), sizeof *buf);
  pv->counts = kt_calloc((size_t)S, sizeof *pv->counts);
  pv->load = kt_calloc((size_t)S, sizeof *pv->load);
  pv->params = kt_calloc((size_t)S, sizeof *pv->params);
  pv->mem = kt_calloc((size_t)S, sizeof *pv->mem);
  kt_status st = KT_OK;
  if (!lc || !buf || !pv->counts || !pv->load || !pv->params || !pv->mem) {
    st = kt_fail(err, KT_ENOMEM, "out of memory");
    goto done;
  }
  kt_plan_shape sh = {.t = pv->t, .b = pv->b, .recompute = pv->recompute};
  if ((st = kt_plan_layer_costs(m, c, o, &sh, lc, err))) goto done;
  double *load = buf, *fixed = buf + n, *act = buf + 2 * n, *mult = buf + 3 * n;
  for (int i = 0; i < n; i++) {
    load[i] = lc[i].f + lc[i].i + lc[i].w;
    fixed[i] = kt_plan_state_bytes(lc[i].params, o, 1, pv->d);
    act[i] = fmax(lc[i].act, lc[i].wgrad);
  }
  for (int j = 0; j < S; j++) mult[j] = S - j < pv->m ? S - j : pv->m; /* 1F1B in-flight */
  kt_partition_problem pb = {.n = n, .load = load};
  if (pv->capped)
    pb.fixed = fixed, pb.act = act, pb.mult = mult, pb.mem_cap = kt_plan_cluster_budget(c);
  if ((st = kt_partition_minmax(&pb, S, pv->counts, &pv->bottleneck, err))) goto done;
  double total = 0;
  for (int j = 0, i = 0; j < S; j++) {
    double a = 0;
    for (int k = 0; k < pv->counts[j]; k++, i++) {
      pv->load[j] += load[i];
      pv->params[j] += lc[i].params;
      pv->mem[j] += fixed[i];
      a += act[i];
    }
    pv->mem[j] += mult[j] * a;
    total += pv->load[j];
  }
  pv->mean = total / S;
done:
  free(lc);
  free(buf);
  if (st) kt_plan_partition_view_free(pv);
  return st;
}
