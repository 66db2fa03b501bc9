/* Fuzz target: schedule text and CSV forms. A schedule that parses must
 * validate without crashing, and what the writers print must parse back to
 * the same actions (text form: to the same schedule). */
#include "fuzz_common.h"
#include "kaiten/schedule.h"

static int same_actions(const kt_rank_actions *a, const kt_rank_actions *b) {
  if (a->n != b->n || a->idle_after != b->idle_after) return 0;
  for (size_t i = 0; i < a->n; i++)
    if (memcmp(&a->actions[i], &b->actions[i], sizeof *a->actions)) return 0;
  return 1;
}

static void reparse_or_die(const char *form, const kt_buf *b, kt_schedule *out) {
  kt_error err;
  if (b->failed || kt_schedule_parse(b->data ? b->data : "", out, &err) != KT_OK) {
    fprintf(stderr, "%s written by kaiten does not parse back: %s\n", form,
            b->failed ? "out of memory" : err.msg);
    abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fuzz_cstr(data, size);
  kt_schedule s;
  kt_error err;
  if (kt_schedule_parse(text, &s, &err) != KT_OK) {
    free(text);
    return 0;
  }
  free(text);
  (void)kt_schedule_validate(&s, &err);

  kt_buf csv, txt;
  kt_buf_init(&csv);
  kt_buf_init(&txt);
  kt_schedule_write_csv(&s, &csv);
  kt_schedule_write_text(&s, &txt);
  kt_schedule back;
  reparse_or_die("CSV", &csv, &back);
  if (kt_schedule_total_actions(&back) != kt_schedule_total_actions(&s)) {
    fprintf(stderr, "CSV round trip changed the number of actions\n");
    abort();
  }
  kt_schedule_free(&back);
  reparse_or_die("text", &txt, &back);
  int same = back.p == s.p && back.v == s.v && back.m == s.m && back.placement == s.placement &&
             !strcmp(back.name, s.name);
  for (int r = 0; same && r < s.p; r++) same = same_actions(&back.ranks[r], &s.ranks[r]);
  if (!same) {
    fprintf(stderr, "text round trip changed the schedule\n");
    abort();
  }
  kt_schedule_free(&back);
  kt_buf_free(&csv);
  kt_buf_free(&txt);
  kt_schedule_free(&s);
  return 0;
}
