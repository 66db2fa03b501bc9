/* The what-if page's fault replay (kaiten/web.h: slow-link=, replan=1): the
 * order the page holds under a slow link or rank (its static plan), the
 * order zb-auto makes for the faulted costs, and the order's clean period,
 * as kaiten sim gives them for PipeMorph's case (P=4, M=12, memory 6). */
#include "check.h"
#include "kaiten/generators.h"
#include "kaiten/web.h"

#define COSTS "p=4 m=12 per-stage=1 tf=28,36,36,33 tb=34,45,46,39 tw=16,23,23,20 mem-limit=6 "

/* The number after "key": in the answer's "fault" object. */
static double field(const char *json, const char *key) {
  const char *f = strstr(json, "\"fault\":{");
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *at = f ? strstr(f, pat) : NULL;
  return at ? strtod(at + strlen(pat), NULL) : NAN;
}

int main(void) {
  kt_buf out;
  kt_buf_init(&out);
  /* the clean order zb-auto makes, held by the page */
  CHECK(kt_web_run("schedule=zb-auto exports=1 " COSTS, NULL, &out) == KT_OK);
  const char *t = strstr(out.data, "\"text\":\"");
  REQUIRE(t != NULL);
  kt_buf order;
  kt_buf_init(&order);
  for (t += 8; *t && *t != '"'; t++) {
    if (*t == '\\' && t[1] == 'n') kt_buf_puts(&order, "\n"), t++;
    else kt_buf_append(&order, t, 1);
  }
  kt_buf_free(&out);
  kt_buf_init(&out);
  CHECK(kt_web_run(COSTS "slow-link=0-1:+120 replan=1", order.data, &out) == KT_OK);
  CHECK_NEAR(field(out.data, "clean"), 1260, 1e-6);
  CHECK_NEAR(field(out.data, "static"), 2065, 1e-6); /* kaiten sim of the same order */
  CHECK_MSG(field(out.data, "replanned") <= 1500 + 1e-6, "%.400s", strstr(out.data, "\"fault\""));
  CHECK(field(out.data, "lower_bound") <= field(out.data, "replanned"));
  CHECK_STR_CONTAINS(out.data, "\"schedule\":\"zb-auto\"");
  kt_buf_free(&out);
  kt_buf_init(&out);
  /* no fault: no replay; a bad link: one line naming it */
  CHECK(kt_web_run(COSTS "replan=1", order.data, &out) == KT_OK);
  CHECK(strstr(out.data, "\"fault\"") == NULL);
  kt_buf_free(&out);
  kt_buf_init(&out);
  CHECK(kt_web_run(COSTS "slow-link=0-2:+1", order.data, &out) == KT_EINVAL);
  CHECK_STR_CONTAINS(out.data, "slow-link 0-2");
  kt_buf_free(&out);
  kt_buf_free(&order);
  return kt_test_done(__FILE__);
}
