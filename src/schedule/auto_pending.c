/* dualpipev and zb-auto generators: built in the zero-bubble work. */
#include "schedule/generators.h"

kt_status kt__gen_dualpipev(kt_schedule *s, const kt_schedule_params *params, kt_error *err) {
  (void)s; (void)params;
  return kt_fail(err, KT_EINVAL, "dualpipev is not available in this build yet");
}

kt_status kt__gen_zb_auto(kt_schedule *s, const kt_schedule_params *params, kt_error *err) {
  (void)s; (void)params;
  return kt_fail(err, KT_EINVAL, "zb-auto is not available in this build yet");
}
