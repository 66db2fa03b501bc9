/* One request, one result, through every door: `kaiten sim --format json`
 * (argv), the what-if page's call (kt_web_run: key=value), and the ffi
 * (kt_ffi_request_set, as Python calls it) give the same bytes for the
 * same request, on a grid of schedules x cost sets x memory limits, and
 * the same error line when the request is refused. (Python's own door is
 * tests/python/test_api.py: its text is the ffi's.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "check.h"
#include "kaiten/ffi.h"
#include "kaiten/web.h"

/* The CLI's stdout, or its stderr when errors (and its exit status), for
 * settings given as flags. */
static char *cli(const char *settings, int errors, int *status) {
  const char *bin = getenv("KT_CLI");
  if (!bin) return NULL;
  kt_buf cmd;
  kt_buf_init(&cmd);
  kt_buf_printf(&cmd, "%s sim --format json", bin);
  /* key=value -> --key value (p, m, v as -p, -m, -v) */
  char *copy = strdup(settings), *save = NULL;
  for (char *tok = strtok_r(copy, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
    char *eq = strchr(tok, '=');
    *eq = 0;
    kt_buf_printf(&cmd, " %s%s '%s'", tok[1] ? "--" : "-", tok, eq + 1);
  }
  free(copy);
  kt_buf_puts(&cmd, errors ? " 2>&1 >/dev/null" : " 2>/dev/null");
  FILE *f = popen(cmd.data, "r");
  kt_buf out;
  kt_buf_init(&out);
  char chunk[65536];
  size_t n;
  while (f && (n = fread(chunk, 1, sizeof chunk, f)) > 0) kt_buf_append(&out, chunk, n);
  int rc = f ? pclose(f) : -1;
  *status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  kt_buf_free(&cmd);
  if (!out.data) kt_buf_append(&out, "", 0);
  return out.data;
}

/* The page's answer's "sim" object, or its error line. */
static char *page(const char *settings, int *ok) {
  kt_buf out;
  kt_buf_init(&out);
  kt_web_run(settings, NULL, &out);
  *ok = out.data && !strncmp(out.data, "{\"ok\":true,\"sim\":", 17);
  char *text = NULL;
  if (*ok) {
    const char *from = out.data + 17, *to = strstr(from, ",\"slack\":[");
    if (to) text = strndup(from, (size_t)(to - from));
  } else if (out.data) {
    const char *e = strstr(out.data, "\"error\":\"");
    if (e) text = strndup(e + 9, strcspn(e + 9, "\""));
  }
  kt_buf_free(&out);
  return text;
}

/* The ffi's JSON, or its error line. */
static char *ffi(const char *settings, int *ok) {
  kt_error err = {{0}};
  kt_request *rq = kt_ffi_request_new();
  kt_result *res = NULL;
  char *json = NULL;
  *ok = 0;
  /* one setting at a time, as Python sets them */
  char *copy = strdup(settings), *save = NULL;
  kt_status st = KT_OK;
  for (char *tok = strtok_r(copy, " ", &save); tok && !st; tok = strtok_r(NULL, " ", &save)) {
    char *eq = strchr(tok, '=');
    *eq = 0;
    st = kt_ffi_request_set(rq, tok, eq + 1, &err);
  }
  free(copy);
  if (!st) st = kt_ffi_run(rq, KT_RESULT_TIMELINE, &res, &err);
  if (!st) st = kt_ffi_result_json(res, 1, &json, &err);
  *ok = !st;
  kt_ffi_result_free(res);
  kt_ffi_request_free(rq);
  return st ? strdup(err.msg) : json;
}

/* The exact search's seconds differ run by run: blanked ("seconds":0). */
static void no_seconds(char *json) {
  for (char *at = json ? strstr(json, "\"seconds\":") : NULL; at; at = strstr(at, "\"seconds\":")) {
    at += 10;
    char *end = at + strspn(at, "0123456789.e-+");
    if (end > at) *at = '0', memmove(at + 1, end, strlen(end) + 1);
  }
}

static int same_request(const char *settings) {
  int status, page_ok, ffi_ok;
  char *a = cli(settings, 0, &status), *b = page(settings, &page_ok), *c = ffi(settings, &ffi_ok);
  for (char **t = (char *[]){a, b, c, NULL}; *t; t++) no_seconds(*t);
  int same = 0;
  if (status == 0) {
    same = page_ok && ffi_ok && a && b && c && !strcmp(a, b) && !strcmp(a, c);
    CHECK_MSG(same, "%s: the doors differ:\ncli  %.300s\npage %.300s\nffi  %.300s", settings, a, b,
              c);
  } else {
    /* refused: the same reason through every door */
    char *why = cli(settings, 1, &status);
    /* the CLI names its flags with their dashes ("--tf"): the rest is the same */
    for (char *d = why ? strstr(why, "--") : NULL; d; d = strstr(d, "--"))
      memmove(d, d + 2, strlen(d + 2) + 1);
    same = !page_ok && !ffi_ok && b && c && why && !strcmp(b, c) && strstr(why, c);
    CHECK_MSG(same, "%s: refused differently:\ncli  %s\npage %s\nffi  %s", settings, why, b, c);
    free(why);
  }
  free(a), free(b), free(c);
  return same;
}

int main(void) {
  if (!getenv("KT_CLI")) {
    fprintf(stderr, "test_doors: SKIP: KT_CLI not set\n");
    return 77;
  }
  static const char *const schedules[] = {"gpipe", "1f1b",    "interleaved", "zb-h1",  "zb-h2",
                                          "zbv",   "zb-auto", "zbv-auto",    "v-half", "optimal"};
  static const char *const costs[] = {"", "tf=1 tb=1.2 tw=0.7 mem-wgrad=0.5",
                                      "tf=2 tb=2 tw=1 comm=0.25 step-sync=barrier",
                                      "tf=1,2,1,2,1,2,1,2 tw=0.5 tu=0.5 t-norm=0.2",
                                      "comm=0.5,1,0.5 slow-rank=2:1.5 slow-link=0-1:+2@3"};
  static const char *const limits[] = {"", "mem-limit=0.75x", "mem-limit=3", "mem-limit=0.1x"};
  int ran = 0;
  for (size_t s = 0; s < sizeof schedules / sizeof *schedules; s++)
    for (size_t c = 0; c < sizeof costs / sizeof *costs; c++)
      for (size_t l = 0; l < sizeof limits / sizeof *limits; l++) {
        char settings[512];
        int small = !strcmp(schedules[s], "optimal");
        snprintf(settings, sizeof settings, "schedule=%s p=4 m=%d %s %s", schedules[s],
                 small ? 4 : 8, costs[c], limits[l]);
        /* blanks of the empty parts: one between settings */
        char clean[512];
        size_t k = 0;
        for (const char *p = settings; *p; p++)
          if (!(*p == ' ' && (k == 0 || clean[k - 1] == ' '))) clean[k++] = *p;
        while (k && clean[k - 1] == ' ') k--;
        clean[k] = 0;
        if (small && strstr(clean, "tf=1,2")) continue; /* 8 stage costs for 4 stages */
        ran += same_request(clean);
      }
  CHECK_MSG(ran >= 175, "only %d requests agreed", ran);
  /* refused requests: the same line everywhere */
  same_request("schedule=zbv p=4 m=4");
  same_request("schedule=zb-auto p=4 m=8 mem-limit=0.1x");
  same_request("schedule=1f1b p=4 m=8 tf=0 tb=0 tw=0");
  same_request("schedule=1f1b p=4 m=8 slow-link=0-2:+1");
  same_request("schedule=1f1b p=4 m=8 slow-rank=4:2");
  return kt_test_done(__FILE__);
}
