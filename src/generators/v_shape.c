#include "generators/search.h"
kt_status kt__gen_v_half(kt_schedule *s, const kt_schedule_params *params, kt_error *err) {
  (void)s, (void)params;
  return kt_fail(err, KT_EINVAL, "v-half: not yet");
}
kt_status kt__gen_v_min(kt_schedule *s, const kt_schedule_params *params, kt_error *err) {
  (void)s, (void)params;
  return kt_fail(err, KT_EINVAL, "v-min: not yet");
}
