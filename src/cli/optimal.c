/* The schedule `optimal` (the exact search), shared by sim and compare. */
#include "cli/cli.h"

int cli_generate_optimal(int p, int m, int v, const kt_costs *c, double mem_limit,
                         double time_limit, kt_schedule *out, kt_optimal_result *res,
                         kt_error *err) {
  kt_gen_params params = {.p = p, .m = m, .v = v, .costs = c, .mem_limit = mem_limit};
  kt_optimal_opts o = {.time_limit = time_limit};
  kt_placement pl = v == 2 ? KT_PLACEMENT_V : KT_PLACEMENT_LOOP;
  kt_status st = kt_gen_optimal(&params, pl, &o, out, res, err);
  return st ? kt_status_exit_code(st) : 0;
}
