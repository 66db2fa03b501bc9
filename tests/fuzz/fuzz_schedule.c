/* Fuzz target: schedule text and CSV forms, both PyTorch notations and the
 * lowered SEND/RECV form. A schedule that parses must validate without
 * crashing; what the writers print must parse back to the same actions (text
 * form: to the same schedule); a valid schedule's lowered form must validate
 * and parse back. */
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
  /* kaiten writes the current notation */
  kt_parse_opts po = {.notation = KT_NOTATION_CURRENT};
  if (b->failed || kt_schedule_parse_opts(b->data ? b->data : "", &po, out, &err) != KT_OK) {
    fprintf(stderr, "%s written by kaiten does not parse back: %s\n", form,
            b->failed ? "out of memory" : err.msg);
    abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = fuzz_cstr(data, size);
  kt_schedule s, lowered = {0};
  kt_error err;
  kt_parse_opts po = {.notation = (kt_notation)(size % 3), .lowered = &lowered};
  if (kt_schedule_parse_opts(text, &po, &s, &err) != KT_OK) {
    free(text);
    return 0;
  }
  free(text);
  if (lowered.ranks) {
    (void)kt_lowered_validate(&lowered, &err);
    kt_schedule_free(&lowered);
  }
  int valid = kt_schedule_validate(&s, &err) == KT_OK;
  if (valid) {
    kt_schedule low, low_back = {0}, compute;
    if (kt_schedule_lower(&s, &low, &err) != KT_OK) abort(); /* only ENOMEM */
    if (kt_lowered_validate(&low, &err) != KT_OK) {
      fprintf(stderr, "the lowered form of a valid schedule is invalid: %s\n", err.msg);
      abort();
    }
    kt_buf lb;
    kt_buf_init(&lb);
    kt_schedule_write_csv(&low, &lb);
    kt_parse_opts lpo = {.notation = KT_NOTATION_CURRENT, .lowered = &low_back};
    if (lb.failed || kt_schedule_parse_opts(lb.data, &lpo, &compute, &err) != KT_OK) {
      fprintf(stderr, "a lowered CSV written by kaiten does not parse back: %s\n", err.msg);
      abort();
    }
    if (kt_schedule_total_actions(&compute) != kt_schedule_total_actions(&s)) {
      fprintf(stderr, "the lowered round trip changed the compute actions\n");
      abort();
    }
    if (low_back.ranks) kt_schedule_free(&low_back);
    kt_schedule_free(&compute);
    kt_buf_free(&lb);
    kt_schedule_free(&low);
  }

  kt_buf csv, txt;
  kt_buf_init(&csv);
  kt_buf_init(&txt);
  kt_schedule_write_csv(&s, &csv);
  kt_schedule_write_text(&s, &txt);
  kt_schedule back;
  /* CSV carries no sizes: a schedule with a stage that never runs (invalid)
   * may not read back; a valid one must, action for action */
  if (valid) {
    reparse_or_die("CSV", &csv, &back);
    if (kt_schedule_total_actions(&back) != kt_schedule_total_actions(&s)) {
      fprintf(stderr, "CSV round trip changed the number of actions\n");
      abort();
    }
    kt_schedule_free(&back);
  }
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
