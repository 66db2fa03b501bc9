/* Calibration of this machine's compute (kaiten calibrate): a whole
 * training step of a model on one core (F, B and the optimizer, so the
 * non-matmul work is priced in), its matmul FLOPs and the same matmuls on
 * bare sgemm, and the threads transport's latency and bandwidth. */
#include <stdlib.h>

#include "kaiten/train.h"

#define STEPS 10 /* the first warms up; the median of the other nine */
#define MICROBATCHES 4

typedef struct {
  kt_runtime *rt;
  kt_data_source *data;
  kt_microbatch mbs[MICROBATCHES];
  int step;
  double seconds;
} step_ctx;

static kt_status one_step(void *ctx, kt_error *err) {
  step_ctx *c = ctx;
  const kt_runtime_config *rc = kt_runtime_config_of(c->rt);
  kt_status st =
      c->data->fill(c->data, 0, c->step, 1, 1, MICROBATCHES, rc->micro_batch, c->mbs, err);
  kt_step_result res;
  if (!st) st = kt_runtime_step(c->rt, c->step, c->mbs, 1, &res, err);
  if (!st) c->seconds = res.seconds;
  return st;
}

/* The steps; the second one's matmuls are logged and replayed on sgemm. */
static kt_status time_steps(step_ctx *c, kt_calibration *out, kt_error *err) {
  double t[STEPS - 1];
  kt_status st = KT_OK;
  for (c->step = 0; c->step < STEPS && !st; c->step++) {
    if (c->step == 1) st = kt_matmul_measure(one_step, c, 3, &out->flops, &out->sgemm_seconds, err);
    else st = one_step(c, err);
    if (!st && c->step > 0) t[c->step - 1] = c->seconds;
  }
  if (!st) out->step_seconds = kt_median(t, STEPS - 1);
  return st;
}

kt_status kt_calibrate_compute(const kt_model_config *m, int micro_batch, kt_calibration *out,
                               kt_error *err) {
  *out = (kt_calibration){0};
  kt_status st = kt_model_config_check(m, err);
  if (st) return st;
  out->boundary_bytes = kt_model_boundary_elems(m) * (size_t)micro_batch * sizeof(float);
  kt_schedule s;
  kt_gen_params sp = {.p = 1, .m = MICROBATCHES};
  if ((st = kt_generate(KT_SCHED_GPIPE, &sp, &s, err))) return st;
  kt_runtime_config rc;
  kt_runtime_config_default(&rc);
  rc.schedule = &s;
  rc.micro_batch = micro_batch;
  rc.model = *m;
  kt_blas_set_threads(1);
  step_ctx c = {0};
  st = kt_runtime_create_threads(&rc, &c.rt, err);
  if (!st) st = kt_blas_check_room(rc.schedule->p, err);
  if (!st && m->kind == KT_MODEL_GPT)
    st = kt_data_text_source_create(NULL, m->seq_len, micro_batch, 1, &c.data, err);
  else if (!st) st = kt_data_mlp_create(m->hidden, 1, &c.data, err);
  if (!st) st = time_steps(&c, out, err);
  if (c.data) c.data->destroy(c.data);
  kt_runtime_destroy(c.rt);
  kt_schedule_free(&s);
  if (st) return st;
  /* the transport: latency from 64-byte messages, bandwidth from a boundary tensor */
  double lat = kt_transport_threads_pingpong(64, 31);
  double big = kt_transport_threads_pingpong(out->boundary_bytes, 31);
  out->latency = lat;
  out->bandwidth = (double)out->boundary_bytes / (big > lat ? big - lat : big);
  return KT_OK;
}
