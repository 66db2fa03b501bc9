/* Golden ASCII Gantt charts for P=4, M=4 gpipe and 1f1b at unit costs. */
#include "check.h"
#include "kaiten/generators.h"
#include "kaiten/report.h"

static void golden(kt_gen_kind kind, const char *file) {
  kt_schedule s;
  kt_error err;
  kt_gen_params params = {.p = 4, .m = 4};
  if (kt_generate(kind, &params, &s, &err)) {
    CHECK(0);
    return;
  }
  kt_timeline t;
  if (kt_simulate(&s, NULL, &t, &err)) {
    CHECK(0);
    return;
  }
  kt_gantt_opts o;
  kt_gantt_default_opts(&o);
  kt_buf b;
  kt_buf_init(&b);
  kt_render_gantt_ascii(&t, &o, &b);
  char path[1024];
  const char *dir = getenv("KT_TEST_GOLDEN");
  snprintf(path, sizeof path, "%s/%s", dir ? dir : "tests/golden", file);
  char *want = NULL;
  if (getenv("KT_UPDATE_GOLDEN")) {
    CHECK(kt_write_file_atomic(path, b.data, b.len, &err) == KT_OK);
  } else if (kt_read_file(path, &want, NULL, &err) == KT_OK) {
    CHECK_MSG(!strcmp(want, b.data), "%s differs; got:\n%s", file, b.data);
  } else {
    CHECK_MSG(0, "%s", err.msg);
  }
  free(want);
  kt_buf_free(&b);
  kt_timeline_free(&t);
  kt_schedule_free(&s);
}

/* A measured step starts a little after 0 and its durations are uneven:
 * the time axis still ticks at round numbers. */
static void round_ticks(void) {
  kt_timeline t;
  kt_timeline_init(&t, 2, "s", "B");
  double at = 0.0039854;
  for (int k = 0; k < 12; k++) {
    kt_event e = {.rank = k % 2,
                  .stage = k % 2,
                  .mb = k / 2,
                  .op = KT_OP_F,
                  .start = at,
                  .end = at + 0.0071 + 0.0003 * k};
    kt_timeline_add_event(&t, &e);
    at = e.end;
  }
  kt_gantt_opts o;
  kt_gantt_default_opts(&o);
  o.width = 100;
  kt_buf b;
  kt_buf_init(&b);
  kt_render_gantt_ascii(&t, &o, &b);
  const char *axis = strstr(b.data, "\n        "); /* the line under the ranks */
  CHECK_MSG(axis && !strstr(b.data, "0.0039854") && !strstr(b.data, "0.0139854"),
            "ticks not at round numbers:\n%s", b.data);
  int ticks = 0; /* "0.02", "0.04", ...: a digit after a blank */
  for (const char *p = axis ? axis + 1 : NULL; p && *p && *p != '\n'; p++)
    ticks += p[0] == '0' && p[-1] == ' ';
  CHECK_MSG(ticks >= 3, "%d ticks:\n%s", ticks, b.data);
  kt_buf_free(&b);
  kt_timeline_free(&t);
}

int main(void) {
  round_ticks();
  golden(KT_SCHED_GPIPE, "gpipe_p4_m4.txt");
  golden(KT_SCHED_1F1B, "1f1b_p4_m4.txt");
  /* a wide chart is scaled to the width, never wider */
  kt_schedule s;
  kt_error err;
  kt_gen_params params = {.p = 16, .m = 256};
  REQUIRE(kt_generate(KT_SCHED_1F1B, &params, &s, &err) == KT_OK);
  kt_timeline t;
  REQUIRE(kt_simulate(&s, NULL, &t, &err) == KT_OK);
  kt_gantt_opts o;
  kt_gantt_default_opts(&o);
  o.width = 100;
  kt_buf b;
  kt_buf_init(&b);
  kt_render_gantt_ascii(&t, &o, &b);
  int lines = 0;
  for (char *line = b.data; line && *line; lines++) {
    char *nl = strchr(line, '\n');
    size_t len = nl ? (size_t)(nl - line) : strlen(line);
    CHECK_MSG(len <= 100, "line %d is %zu columns", lines, len);
    line = nl ? nl + 1 : NULL;
  }
  CHECK(lines >= 17);
  kt_buf_free(&b);
  kt_timeline_free(&t);
  kt_schedule_free(&s);
  return kt_test_done(__FILE__);
}
