/* Checkpoints: bitwise continuation under the same layout, matching losses
 * under another P and schedule, refusal of truncated/corrupt/mismatched files. */
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "kaiten/generators.h"
#include "kaiten/checkpoint.h"
#include "kaiten/train.h"

static kt_schedule sched(kt_gen_kind k, int p, int m) {
  kt_schedule s;
  kt_error err;
  kt_gen_params sp = {.p = p, .m = m};
  if (kt_generate(k, &sp, &s, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    exit(1);
  }
  return s;
}

static kt_runtime_config config(const kt_schedule *s) {
  kt_runtime_config c;
  kt_runtime_config_default(&c);
  c.schedule = s;
  c.micro_batch = 8 / s->m;
  c.model.layers = 6;
  c.model.hidden = 12;
  c.model.seed = 5;
  c.optim.kind = KT_OPTIM_ADAMW;
  c.optim.lr = 3e-3;
  c.optim.warmup_steps = 2;
  c.optim.decay_steps = 6;
  c.optim.grad_clip = 1.0;
  return c;
}

/* Runs steps [first, last) and returns the losses; optionally resumes from
 * and/or saves to a checkpoint. */
static int train(const kt_schedule *s, int first, int last, const char *load, const char *save,
                 double *losses, kt_error *err) {
  kt_runtime_config rc = config(s);
  kt_runtime *rt;
  if (kt_runtime_create_threads(&rc, &rt, err)) return -1;
  kt_checkpoint_meta meta = {.step = last,
                             .decay_steps = 6,
                             .lr = rc.optim.lr,
                             .data_seed = 9,
                             .model = rc.model,
                             .optim = rc.optim.kind};
  int rcode = 0;
  if (load) {
    kt_checkpoint_meta got;
    if (kt_checkpoint_load(rt, load, &got, err)) rcode = -1;
    else if (got.step != first) rcode = -2;
  }
  kt_data_source *data = NULL;
  if (!rcode && kt_data_mlp_create(12, 9, &data, err)) rcode = -1;
  if (!rcode) {
    kt_train_config tc = {.runtime = rc, .first_step = first, .steps = last, .data = data};
    kt_train_result res;
    if (kt_train_run(rt, &tc, &res, err)) rcode = -1;
    else {
      memcpy(losses, res.losses, sizeof(double) * (size_t)res.n_losses);
      kt_train_result_free(&res);
    }
  }
  if (!rcode && save && kt_checkpoint_save(rt, save, &meta, err)) rcode = -1;
  if (data) data->destroy(data);
  kt_runtime_destroy(rt);
  return rcode;
}

/* Saves a checkpoint of `step` into run directory dir. */
static void save_step(kt_runtime *rt, const char *dir, int step) {
  kt_error err;
  const kt_runtime_config *rc = kt_runtime_config_of(rt);
  kt_checkpoint_meta meta = {.step = step, .model = rc->model, .optim = rc->optim.kind};
  CHECK_MSG(kt_checkpoint_save_in_run(rt, dir, &meta, &err) == KT_OK, "%s", err.msg);
}

/* A file of dir/checkpoints, rewritten as data[0..n) with byte `flip` (when
 * < n) changed. */
static void rewrite(const char *dir, const char *name, const char *data, size_t n, size_t flip) {
  char path[512], *copy = malloc(n + 1);
  kt_error err;
  snprintf(path, sizeof path, "%s/checkpoints/%s", dir, name);
  REQUIRE_VOID(copy != NULL);
  memcpy(copy, data, n);
  if (flip < n) copy[flip] ^= 0x10;
  unlink(path);
  CHECK(kt_write_file_atomic(path, copy, n, &err) == KT_OK);
  free(copy);
}

/* A run directory's checkpoints: verified whole, the newest intact one
 * found (what was passed over said), "latest" never followed out of the
 * directory, a FIFO never opened for reading, older ones pruned. */
static void run_dir_checkpoints(const kt_schedule *s, const char *root) {
  kt_error err;
  char dir[256], path[512];
  snprintf(dir, sizeof dir, "%s/run", root);
  REQUIRE_VOID(mkdir(dir, 0755) == 0);
  kt_runtime_config rc = config(s);
  kt_runtime *rt;
  REQUIRE_VOID(kt_runtime_create_threads(&rc, &rt, &err) == KT_OK);
  kt_checkpoint_found f;
  CHECK(kt_checkpoint_find(dir, &f, &err) == KT_EINVAL); /* no checkpoints/ yet */
  for (int step = 1; step <= 6; step++) save_step(rt, dir, step);
  snprintf(path, sizeof path, "%s/checkpoints/step_00000006.ckpt", dir);
  char *data;
  size_t len;
  REQUIRE_VOID(kt_read_file(path, &data, &len, &err) == KT_OK);
  kt_checkpoint_meta meta;
  CHECK(kt_checkpoint_verify(path, &meta, &err) == KT_OK && meta.step == 6);
  /* every cut and a flipped byte anywhere (header, a unit, the trailer) */
  const size_t cuts[] = {0, 7, 60, 104, 120, len / 2, len - 10, len - 1};
  for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
    rewrite(dir, "step_00000006.ckpt", data, cuts[i], len);
    CHECK_MSG(kt_checkpoint_verify(path, &meta, &err) == KT_EPARSE, "cut at %zu passed", cuts[i]);
  }
  for (size_t at = 3; at < len; at += len / 97) {
    rewrite(dir, "step_00000006.ckpt", data, len, at);
    CHECK_MSG(kt_checkpoint_verify(path, &meta, &err) == KT_EPARSE, "flip at %zu of %zu passed", at,
              len);
  }
  /* the newest damaged: the next one, and why */
  REQUIRE_VOID(kt_checkpoint_find(dir, &f, &err) == KT_OK);
  CHECK_STR_CONTAINS(f.path, "step_00000005.ckpt");
  CHECK(f.meta.step == 5 && f.n_skipped == 1);
  CHECK_STR_CONTAINS(f.skipped, "checkpoints/step_00000006.ckpt: unit");
  kt_checkpoint_found_free(&f);
  /* a FIFO as the newest, "latest" out of the directory: passed over, at once */
  unlink(path);
  REQUIRE_VOID(mkfifo(path, 0644) == 0);
  CHECK(kt_checkpoint_verify(path, &meta, &err) == KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "a FIFO");
  snprintf(path, sizeof path, "%s/checkpoints/latest", dir);
  CHECK(kt_write_file_atomic(path, "../../elsewhere/step_00000009.ckpt\n", 35, &err) == KT_OK);
  REQUIRE_VOID(kt_checkpoint_find(dir, &f, &err) == KT_OK);
  CHECK(f.meta.step == 5 && f.n_skipped == 2);
  CHECK_STR_CONTAINS(f.skipped, "checkpoints/latest names '../../elsewhere/step_00000009.ckpt'");
  CHECK_STR_CONTAINS(f.skipped, "(and 1 more passed over)");
  kt_checkpoint_found_free(&f);
  /* saving step 6 replaces the FIFO; pruning keeps the newest 2 and what lies above */
  save_step(rt, dir, 6);
  rewrite(dir, "step_00000009.ckpt", data, len, len); /* a later run's, left alone */
  int removed = -1;
  CHECK(kt_checkpoint_prune(dir, 2, 6, &removed, &err) == KT_OK && removed == 4);
  for (int step = 1; step <= 9; step++) {
    snprintf(path, sizeof path, "%s/checkpoints/step_%08d.ckpt", dir, step);
    struct stat sb;
    int want = step == 5 || step == 6 || step == 9;
    CHECK_MSG((lstat(path, &sb) == 0 && S_ISREG(sb.st_mode)) == want, "step %d %s", step,
              want ? "removed" : "kept");
  }
  CHECK(kt_checkpoint_prune(dir, 0, 6, &removed, &err) == KT_OK && removed == 0);
  /* every one damaged: EPARSE saying so */
  for (int step = 5; step <= 9; step++) {
    char name[64];
    snprintf(name, sizeof name, "step_%08d.ckpt", step);
    if (step == 5 || step == 6 || step == 9) rewrite(dir, name, data, 200, len);
  }
  CHECK(kt_checkpoint_find(dir, &f, &err) == KT_EPARSE);
  CHECK_STR_CONTAINS(err.msg, "no intact checkpoint");
  free(data);
  kt_runtime_destroy(rt);
}

int main(void) {
  kt_blas_choose_core(); /* as kaiten's main does */
  kt_error err;
  char dir[] = "/tmp/kt_ckpt_XXXXXX";
  REQUIRE(mkdtemp(dir) != NULL);
  char path[256], bad[256];
  snprintf(path, sizeof path, "%s/a.ckpt", dir);
  snprintf(bad, sizeof bad, "%s/bad.ckpt", dir);
  kt_schedule s2 = sched(KT_SCHED_1F1B, 2, 4);
  double full[6], head[3], tail[3];
  REQUIRE(train(&s2, 0, 6, NULL, NULL, full, &err) == 0);
  REQUIRE(train(&s2, 0, 3, NULL, path, head, &err) == 0);
  REQUIRE(train(&s2, 3, 6, path, NULL, tail, &err) == 0);
  CHECK(memcmp(head, full, sizeof head) == 0);
  CHECK_MSG(memcmp(tail, full + 3, sizeof tail) == 0, "same layout: %.9g %.9g vs %.9g %.9g",
            tail[0], tail[2], full[3], full[5]);

  /* another layout: P=4 zb-h1, and P=1 */
  kt_schedule s4 = sched(KT_SCHED_ZB_H1, 4, 8), s1 = sched(KT_SCHED_GPIPE, 1, 2);
  REQUIRE(train(&s4, 3, 6, path, NULL, tail, &err) == 0);
  for (int i = 0; i < 3; i++)
    CHECK_MSG(fabs(tail[i] - full[3 + i]) <= 1e-5 * fabs(full[3 + i]), "P=4 step %d: %.9g vs %.9g",
              3 + i, tail[i], full[3 + i]);
  REQUIRE(train(&s1, 3, 6, path, NULL, tail, &err) == 0);
  for (int i = 0; i < 3; i++)
    CHECK_MSG(fabs(tail[i] - full[3 + i]) <= 1e-5 * fabs(full[3 + i]), "P=1 step %d: %.9g vs %.9g",
              3 + i, tail[i], full[3 + i]);

  /* truncated, corrupt and mismatched files are refused */
  char *data;
  size_t len;
  REQUIRE(kt_read_file(path, &data, &len, &err) == KT_OK);
  REQUIRE(kt_write_file_atomic(bad, data, len / 2, &err) == KT_OK);
  CHECK(train(&s2, 3, 6, bad, NULL, tail, &err) == -1);
  CHECK_STR_CONTAINS(err.msg, "truncated");
  data[len / 2] ^= 0x5A;
  REQUIRE(kt_write_file_atomic(bad, data, len, &err) == KT_OK);
  CHECK(train(&s2, 3, 6, bad, NULL, tail, &err) == -1);
  CHECK_STR_CONTAINS(err.msg, "corrupt");
  REQUIRE(kt_write_file_atomic(bad, "KAITENCK", 8, &err) == KT_OK);
  CHECK(train(&s2, 3, 6, bad, NULL, tail, &err) == -1);
  CHECK_STR_CONTAINS(err.msg, "truncated");
  REQUIRE(kt_write_file_atomic(
              bad,
              "hello, this is not a checkpoint at all, but it is long enough to hold a header...",
              80, &err) == KT_OK);
  CHECK(train(&s2, 3, 6, bad, NULL, tail, &err) == -1);
  CHECK_STR_CONTAINS(err.msg, "not a kaiten checkpoint");
  free(data);
  {
    kt_runtime_config rc = config(&s2);
    rc.model.hidden = 10;
    kt_runtime *rt;
    REQUIRE(kt_runtime_create_threads(&rc, &rt, &err) == KT_OK);
    kt_checkpoint_meta meta;
    CHECK(kt_checkpoint_load(rt, path, &meta, &err) == KT_EINVAL);
    CHECK_STR_CONTAINS(err.msg, "width 12");
    kt_runtime_destroy(rt);
  }
  /* run directories: latest pointer, and a fallback scan when it is damaged */
  {
    kt_runtime_config rc = config(&s2);
    kt_runtime *rt;
    REQUIRE(kt_runtime_create_threads(&rc, &rt, &err) == KT_OK);
    kt_checkpoint_meta meta = {.step = 4, .model = rc.model, .optim = rc.optim.kind};
    REQUIRE(kt_checkpoint_save_in_run(rt, dir, &meta, &err) == KT_OK);
    meta.step = 7;
    REQUIRE(kt_checkpoint_save_in_run(rt, dir, &meta, &err) == KT_OK);
    char *latest;
    REQUIRE(kt_checkpoint_latest(dir, &latest, &err) == KT_OK);
    CHECK_STR_CONTAINS(latest, "step_00000007.ckpt");
    free(latest);
    /* a crash mid-write of step 9 leaves a temp file and a torn "latest" */
    char p9[300];
    snprintf(p9, sizeof p9, "%s/checkpoints/latest", dir);
    REQUIRE(kt_write_file_atomic(p9, "step_00000009.ckpt\n", 19, &err) == KT_OK);
    snprintf(p9, sizeof p9, "%s/checkpoints/step_00000009.ckpt.tmp.123", dir);
    REQUIRE(kt_write_file_atomic(p9, "KAITENCK", 8, &err) == KT_OK);
    REQUIRE(kt_checkpoint_latest(dir, &latest, &err) == KT_OK);
    CHECK_STR_CONTAINS(latest, "step_00000007.ckpt");
    free(latest);
    kt_runtime_destroy(rt);
  }
  run_dir_checkpoints(&s2, dir);
  kt_schedule_free(&s2);
  kt_schedule_free(&s4);
  kt_schedule_free(&s1);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CHECK(system(cmd) == 0);
  return kt_test_done(__FILE__);
}
