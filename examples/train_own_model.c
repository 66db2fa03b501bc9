/* Train a model of your own with kaiten's pipeline runtime.
 *
 * The model is this file's: a residual tanh network cut into pipeline
 * stages, each stage one layer h' = h + tanh(W h + c) (the last a linear
 * head h' = W h + c), learning a fixed smooth teacher y = 0.5 tanh(T x)
 * under mean squared error. kaiten knows nothing of it beyond the chunk
 * interface (kaiten/model_impl.h): forward, input gradient, weight
 * gradient, and the activations a micro-batch keeps in between.
 *
 * A kt_session trains it on zb-h1 (the zero-bubble schedule that splits
 * each backward into its input gradient I and its weight gradient W) with
 * two pipeline ranks as threads, and writes a run directory that
 * `kaiten report DIR` and `kaiten serve DIR` read.
 *
 *   cc train_own_model.c $(pkg-config --cflags --libs kaiten)
 *   ./a.out runs/own && kaiten report runs/own
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <kaiten/model_impl.h>
#include <kaiten/train.h>

#define H 16        /* width of every layer */
#define STAGES 2    /* pipeline ranks (zb-h1: one stage each) */
#define STEPS 40

/* ---- the model: one layer per stage -------------------------------------------
 * Legend: B = samples in a micro-batch. Stash per micro-batch: x (B, H), the
 * stage's input, and (B, H) that holds h = tanh(z) after F (z on the head)
 * and the pre-activation's gradient dz after I. */

typedef struct {
  float *stash; /* n_microbatches slots of 2 * B * H floats */
  float *tmp;   /* (B, H) */
  unsigned char *held;
} layer;

static float *slot(kt_chunk *c, int mb) {
  layer *l = c->impl;
  return l->stash + (size_t)mb * 2 * c->micro_batch * H;
}

/* A micro-batch's stash taken or given back, in the chunk's byte counts. */
static void hold(kt_chunk *c, int mb, int on) {
  layer *l = c->impl;
  size_t bytes = 2 * (size_t)c->micro_batch * H * sizeof(float);
  if (l->held[mb] == on) return;
  l->held[mb] = (unsigned char)on;
  c->stash_bytes = on ? c->stash_bytes + bytes : c->stash_bytes - bytes;
  if (c->stash_bytes > c->peak_stash_bytes) c->peak_stash_bytes = c->stash_bytes;
}

static kt_status layer_forward(kt_chunk *c, int mb, const kt_microbatch *data, const float *in,
                               float *out, double *loss, kt_error *err) {
  int B = c->micro_batch;
  const float *x = c->is_first ? data->x : in, *W = c->params, *bias = c->params + H * H;
  float *keep = slot(c, mb), *h = keep + (size_t)B * H;
  if (!x) return kt_fail(err, KT_EINVAL, "stage %d: no input", c->first_unit);
  memcpy(keep, x, sizeof(float) * (size_t)B * H);
  hold(c, mb, 1);
  double sum = 0;
  for (int i = 0; i < B; i++)
    for (int j = 0; j < H; j++) {
      float z = bias[j];
      for (int k = 0; k < H; k++) z += W[j * H + k] * x[i * H + k];
      size_t at = (size_t)i * H + j;
      if (c->is_last) { /* the head: linear, and the loss against the target */
        h[at] = z;
        double d = (double)z - data->y[at];
        sum += d * d;
      } else {
        h[at] = tanhf(z);
        out[at] = x[at] + h[at];
      }
    }
  if (c->is_last) *loss = sum / ((double)B * H);
  return KT_OK;
}

static kt_status layer_backward_input(kt_chunk *c, int mb, const kt_microbatch *data,
                                      const float *dout, float *din, kt_error *err) {
  layer *l = c->impl;
  int B = c->micro_batch;
  if (!l->held[mb]) return kt_fail(err, KT_ERUNTIME, "micro-batch %d: I before its F", mb);
  float *dz = slot(c, mb) + (size_t)B * H; /* h in, dz out */
  for (size_t at = 0; at < (size_t)B * H; at++) {
    if (c->is_last) { /* d loss / d z of the mean squared error */
      dz[at] = 2.0f * (dz[at] - data->y[at]) / (float)(B * H);
      l->tmp[at] = 0;
    } else { /* out = x + tanh(z): the residual passes dout through */
      dz[at] = dout[at] * (1.0f - dz[at] * dz[at]);
      l->tmp[at] = dout[at];
    }
  }
  if (!din) return KT_OK; /* the first stage: nothing upstream */
  const float *W = c->params;
  for (int i = 0; i < B; i++)
    for (int k = 0; k < H; k++) {
      float g = l->tmp[i * H + k];
      for (int j = 0; j < H; j++) g += dz[i * H + j] * W[j * H + k];
      din[i * H + k] = g;
    }
  return KT_OK;
}

static kt_status layer_backward_weight(kt_chunk *c, int mb, kt_error *err) {
  layer *l = c->impl;
  int B = c->micro_batch;
  if (!l->held[mb]) return kt_fail(err, KT_ERUNTIME, "micro-batch %d: W before its I", mb);
  const float *x = slot(c, mb), *dz = x + (size_t)B * H;
  float *dW = c->grads, *dbias = c->grads + H * H; /* gradients accumulate */
  for (int i = 0; i < B; i++)
    for (int j = 0; j < H; j++) {
      dbias[j] += dz[i * H + j];
      for (int k = 0; k < H; k++) dW[j * H + k] += dz[i * H + j] * x[i * H + k];
    }
  hold(c, mb, 0);
  return KT_OK;
}

static void layer_destroy(kt_chunk *c) {
  layer *l = c->impl;
  if (l) free(l->stash), free(l->tmp), free(l->held), free(l);
  free(c->params), free(c->grads), free(c->unit_offset), free(c);
}

static const kt_chunk_ops layer_ops = {layer_forward, layer_backward_input,
                                       layer_backward_weight, layer_destroy, NULL};

/* A small deterministic generator (the same weights on every run). */
static float uniform(unsigned long long *s) {
  *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
  return (float)((*s >> 40) & 0xFFFFFF) / 16777216.0f * 2 - 1; /* [-1, 1) */
}

/* kt_chunk_factory: stage `stage` of the pipeline. */
static kt_status make_layer(void *ctx, int stage, int n_stages, int micro_batch,
                            int n_microbatches, kt_chunk **out, kt_error *err) {
  (void)ctx;
  size_t BH = (size_t)micro_batch * H;
  kt_chunk *c = calloc(1, sizeof *c);
  layer *l = calloc(1, sizeof *l);
  if (c) {
    *c = (kt_chunk){.ops = &layer_ops, .impl = l, .first_unit = stage, .n_units = 1,
                    .is_first = stage == 0, .is_last = stage == n_stages - 1,
                    .micro_batch = micro_batch, .n_microbatches = n_microbatches,
                    .in_elems = stage == 0 ? 0 : BH, .out_elems = stage == n_stages - 1 ? 0 : BH,
                    .n_params = H * H + H};
    c->params = calloc(c->n_params, sizeof(float));
    c->grads = calloc(c->n_params, sizeof(float));
    c->unit_offset = calloc(2, sizeof *c->unit_offset);
  }
  if (l) {
    l->stash = calloc((size_t)n_microbatches * 2 * BH, sizeof(float));
    l->tmp = calloc(BH, sizeof(float));
    l->held = calloc((size_t)n_microbatches, 1);
  }
  if (!c || !l || !c->params || !c->grads || !c->unit_offset || !l->stash || !l->tmp || !l->held) {
    if (c) layer_destroy(c);
    else free(l);
    return kt_fail(err, KT_ENOMEM, "out of memory for stage %d", stage);
  }
  c->unit_offset[1] = c->n_params;
  unsigned long long seed = 1000 + (unsigned long long)stage;
  for (int i = 0; i < H * H; i++) c->params[i] = uniform(&seed) / sqrtf(H);
  *out = c;
  return KT_OK;
}

/* ---- the data: y = 0.5 tanh(T x), x uniform in [-1, 1)^H ---------------------- */

typedef struct {
  float T[H * H];
  float *x, *y; /* the micro-batches of one step */
  size_t cap;
} teacher;

/* Micro-batch i of a step: a function of (split, step, i) only, so a run
 * sees the same batches however it is laid out. */
static kt_status fill(kt_data_source *src, int split, int step, int D, int K, int M, int b,
                      kt_microbatch *out, kt_error *err) {
  teacher *t = src->impl;
  size_t n = (size_t)D * K * M, per = (size_t)b * H;
  if (n * per > t->cap) {
    free(t->x), free(t->y);
    t->x = malloc(n * per * sizeof(float)), t->y = malloc(n * per * sizeof(float));
    t->cap = t->x && t->y ? n * per : 0;
    if (!t->cap) return kt_fail(err, KT_ENOMEM, "out of memory for the data");
  }
  for (size_t i = 0; i < n; i++) {
    unsigned long long s = ((unsigned long long)split << 60) ^ ((unsigned long long)step << 20) ^ i;
    float *x = t->x + i * per, *y = t->y + i * per;
    for (size_t k = 0; k < per; k++) x[k] = uniform(&s);
    for (int r = 0; r < b; r++)
      for (int j = 0; j < H; j++) {
        float z = 0;
        for (int k = 0; k < H; k++) z += t->T[j * H + k] * x[r * H + k];
        y[r * H + j] = 0.5f * tanhf(z);
      }
    out[i] = (kt_microbatch){.b = b, .x = x, .y = y};
  }
  return KT_OK;
}

static void destroy(kt_data_source *src) {
  teacher *t = src->impl;
  free(t->x), free(t->y);
}

/* ---- training ---------------------------------------------------------------------- */

static int show(void *ctx, const kt_train_progress *p) {
  (void)ctx;
  if (p->step % 5 != 4 && p->step + 1 != p->steps) return 0;
  printf("step %2d/%d  loss %.5f", p->step + 1, p->steps, p->loss);
  if (!isnan(p->val_loss)) printf("  val %.5f", p->val_loss);
  printf("  %.2f ms  bubble %4.1f%%\n", 1e3 * p->seconds, 100 * p->bubble);
  return 0;
}

static void note(void *ctx, const kt_note *n) {
  (void)ctx;
  fprintf(stderr, "note: %s\n", n->text);
}

int main(int argc, char **argv) {
  const char *run_dir = argc > 1 ? argv[1] : "own_model_run";
  teacher t = {0};
  unsigned long long seed = 7;
  for (int i = 0; i < H * H; i++) t.T[i] = 1.5f * uniform(&seed) / sqrtf(H);
  kt_data_source data = {.fill = fill, .destroy = destroy, .impl = &t, .has_validation = 1,
                         .tokens_per_sample = 1};

  kt_session_params p = kt_session_default_params();
  p.make_chunk = make_layer;
  p.model_name = "tanh-resnet";
  p.data = &data;
  p.kind = KT_SCHED_ZB_H1;
  p.p = STAGES, p.m = 4, p.micro_batch = 16;
  p.steps = STEPS, p.val_every = 10;
  p.optim.lr = 1e-2;
  p.blas_threads = -1; /* this model multiplies by itself, not through BLAS */
  p.run_dir = run_dir, p.force = 1;
  p.on_step = show, p.on_note = note;
  p.render_timelines = kt_render_run_timelines; /* timeline.json and trace.json */

  kt_error err = {{0}};
  kt_session *s;
  kt_status st = kt_session_open(&p, &s, &err);
  if (!st) st = kt_session_run(s, &err);
  int rc = 0;
  if (st) {
    fprintf(stderr, "train_own_model: %s\n", err.msg);
    rc = 1;
  } else {
    const kt_train_result *r = &kt_session_get_result(s)->train;
    double first = r->losses[0], last = r->losses[r->n_losses - 1];
    printf("loss %.5f -> %.5f; last step measured %.2f ms, predicted %.2f ms (bubble %.1f%% vs "
           "%.1f%%)\nrun directory: %s (kaiten report %s)\n",
           first, last, 1e3 * r->measured.makespan, 1e3 * r->predicted.makespan,
           100 * r->measured.bubble_ratio, 100 * r->predicted.bubble_ratio, run_dir, run_dir);
    if (!(last < 0.5 * first)) {
      fprintf(stderr, "train_own_model: the loss did not halve\n");
      rc = 1;
    }
  }
  kt_session_close(s);
  data.destroy(&data);
  return rc;
}
