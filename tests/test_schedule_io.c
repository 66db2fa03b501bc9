/* Text and CSV forms: exact round-trips, PyTorch files, malformed input; JSON numbers. */
#include "check.h"
#include "kaiten/generators.h"
#include "kaiten/schedule.h"

static int same_schedule(const kt_schedule *a, const kt_schedule *b) {
  /* with one rank both placements map every stage to rank 0 */
  if (a->p != b->p || a->v != b->v || a->m != b->m || (a->p > 1 && a->placement != b->placement))
    return 0;
  for (int r = 0; r < a->p; r++) {
    if (a->ranks[r].n != b->ranks[r].n || a->ranks[r].idle_after != b->ranks[r].idle_after)
      return 0;
    for (size_t i = 0; i < a->ranks[r].n; i++) {
      const kt_action *x = &a->ranks[r].actions[i], *y = &b->ranks[r].actions[i];
      if (x->stage != y->stage || x->mb != y->mb || x->op != y->op || x->flags != y->flags ||
          x->idle_before != y->idle_before)
        return 0;
    }
  }
  return 1;
}

static void expect_parse_error(const char *text, const char *needle) {
  kt_schedule s;
  kt_error err = {{0}};
  kt_status st = kt_schedule_parse(text, &s, &err);
  CHECK_MSG(st == KT_EPARSE, "'%s' parsed with status %d", text, (int)st);
  if (st == KT_OK) kt_schedule_free(&s);
  else CHECK_STR_CONTAINS(err.msg, needle);
}

/* JSON numbers: whole values as their digits, others in the fewest digits
 * that read back to the same double; not-finite values as null. */
static void check_json_numbers(void) {
  static const struct {
    double x;
    const char *text;
  } cases[] = {{0, "0"},
               {3, "3"},
               {-2, "-2"},
               {1000000, "1000000"},
               {123456789012345.0, "123456789012345"},
               {1e15, "1e+15"},
               {1e300, "1e+300"},
               {0.1, "0.1"},
               {-0.5, "-0.5"},
               {1.0 / 3, "0.3333333333333333"},
               {NAN, "null"},
               {INFINITY, "null"},
               {9.2233720368547758e18, "9.223372036854776e+18"},
               {0.0625, "0.0625"},
               {-1234567.5, "-1234567.5"},
               {2147483647.9375, "2147483647.9375"},
               {2147483648.5, "2147483648.5"},
               {-0.25, "-0.25"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    kt_buf b;
    kt_buf_init(&b);
    kt_buf_json_number(&b, cases[i].x);
    CHECK_MSG(!strcmp(b.data, cases[i].text), "%.17g written as %s, not %s", cases[i].x, b.data,
              cases[i].text);
    if (isfinite(cases[i].x)) CHECK(strtod(b.data, NULL) == cases[i].x);
    kt_buf_free(&b);
  }
}

/* The general search for the shortest form that reads back, as the writer
 * did before its fast paths: they must write the same text. */
static void shortest(double x, char *out, size_t n) {
  for (int prec = 6; prec <= 17; prec++) {
    snprintf(out, n, "%.*g", prec, x);
    if (strtod(out, NULL) == x) return;
  }
}

/* Multiples of 1/16 near the fast paths' edges and across magnitudes, both
 * signs: whole ones as their digits, the others in the same text as the
 * general search. */
static void check_json_fast_paths(void) {
  static const double bases[] = {0, 1, 9, 10, 99, 12345, 999999, 1000000, 123456789, 2147483647};
  for (size_t i = 0; i < sizeof bases / sizeof bases[0]; i++)
    for (int k = -17; k <= 17; k++)
      for (int sign = -1; sign <= 1; sign += 2) {
        double x = sign * (bases[i] + k / 16.0);
        char want[40];
        if (x == (double)(long long)x) snprintf(want, sizeof want, "%lld", (long long)x);
        else shortest(x, want, sizeof want);
        kt_buf b;
        kt_buf_init(&b);
        kt_buf_json_number(&b, x);
        CHECK_MSG(!strcmp(b.data, want), "%.17g written as %s, not %s", x, b.data, want);
        CHECK(strtod(b.data, NULL) == x);
        kt_buf_free(&b);
      }
}

int main(void) {
  kt_error err;
  check_json_numbers();
  check_json_fast_paths();
  /* round-trips of every generated schedule, both forms */
  int ps[] = {1, 2, 4, 5}, ms[] = {1, 4, 8, 10};
  for (int k = 0; k < KT_SCHED_COUNT; k++)
    for (size_t pi = 0; pi < 4; pi++)
      for (size_t mi = 0; mi < 4; mi++) {
        kt_schedule s, back;
        kt_gen_params params = {.p = ps[pi], .m = ms[mi]};
        if (kt_generate((kt_gen_kind)k, &params, &s, &err)) continue;
        for (int form = 0; form < 2; form++) {
          kt_buf b;
          kt_buf_init(&b);
          if (form) kt_schedule_write_text(&s, &b);
          else kt_schedule_write_csv(&s, &b);
          kt_status st = kt_schedule_parse(b.data, &back, &err);
          CHECK_MSG(st == KT_OK, "%s P=%d M=%d form %d: %s", s.name, s.p, s.m, form, err.msg);
          if (st == KT_OK) {
            CHECK_MSG(same_schedule(&s, &back), "%s P=%d M=%d form %d differs after round-trip",
                      s.name, s.p, s.m, form);
            kt_buf b2;
            kt_buf_init(&b2);
            if (form) kt_schedule_write_text(&back, &b2);
            else kt_schedule_write_csv(&back, &b2);
            /* the text form carries the name in its header; CSV does not */
            CHECK(b2.len == b.len && !memcmp(b.data, b2.data, b.len));
            kt_buf_free(&b2);
            kt_schedule_free(&back);
          }
          kt_buf_free(&b);
        }
        kt_schedule_free(&s);
      }

  /* PyTorch's files print back byte for byte, and convert to text and back */
  const char *files[] = {"dualpipev_4rank_10mb.csv", "zb1p_2rank_2stagep_compute.csv",
                         "zb1p_2rank_2stagep_compute_legacy.csv"};
  for (int f = 0; f < 3; f++) {
    char *text;
    REQUIRE(kt_read_file(kt_test_data_path(files[f]), &text, NULL, &err) == KT_OK);
    kt_schedule s, back;
    kt_parse_opts po = {.notation = KT_NOTATION_AUTO};
    kt_status st = kt_schedule_parse_opts(text, &po, &s, &err);
    CHECK_MSG(st == KT_OK, "%s: %s", files[f], err.msg);
    if (st) {
      free(text);
      continue;
    }
    CHECK_EQ_INT(po.detected, f == 2 ? KT_NOTATION_LEGACY : KT_NOTATION_CURRENT);
    kt_buf b;
    kt_buf_init(&b);
    kt_schedule_write_csv_notation(&s, po.detected, &b);
    size_t tl = strlen(text);
    while (tl && (text[tl - 1] == '\n' || text[tl - 1] == '\r')) tl--;
    CHECK_MSG(b.len == tl + 1 && !memcmp(b.data, text, tl), "%s does not print back exactly",
              files[f]);
    kt_buf_free(&b);
    kt_buf_init(&b);
    kt_schedule_write_text(&s, &b);
    REQUIRE(kt_schedule_parse(b.data, &back, &err) == KT_OK);
    CHECK(same_schedule(&s, &back));
    kt_schedule_free(&back);
    kt_buf_free(&b);
    if (f == 0) {
      CHECK_EQ_INT(s.p, 4);
      CHECK_EQ_INT(s.v, 2);
      CHECK_EQ_INT(s.m, 10);
      CHECK_EQ_INT(s.placement, KT_PLACEMENT_V);
      CHECK(kt_schedule_validate(&s, &err) == KT_OK);
      /* the first overlapped cell of rank 0 is (0F7;7B3) */
      int found = 0;
      for (size_t i = 0; i + 1 < s.ranks[0].n; i++)
        if (s.ranks[0].actions[i].flags & KT_ACTION_OVERLAP_NEXT) {
          CHECK(s.ranks[0].actions[i].stage == 0 && s.ranks[0].actions[i].mb == 7);
          CHECK(s.ranks[0].actions[i + 1].stage == 7 && s.ranks[0].actions[i + 1].op == KT_OP_B);
          found = 1;
          break;
        }
      CHECK(found);
    } else if (f == 1) {
      CHECK_EQ_INT(s.p, 2);
      CHECK_EQ_INT(s.v, 2);
      CHECK_EQ_INT(s.m, 8);
      CHECK_EQ_INT(s.placement, KT_PLACEMENT_LOOP);
      CHECK_EQ_INT(s.ranks[0].actions[3].idle_before, 1);
      CHECK_EQ_INT(s.ranks[1].actions[0].idle_before, 1);
      CHECK(kt_schedule_validate(&s, &err) == KT_OK);
    } else {
      /* legacy notation: B is the input gradient, read as I */
      CHECK(kt_schedule_validate(&s, &err) == KT_OK);
      CHECK_EQ_INT(s.ranks[0].actions[4].op, KT_OP_I);
    }
    kt_schedule_free(&s);
    free(text);
  }

  /* idle slots survive both forms */
  {
    kt_schedule s;
    REQUIRE(kt_schedule_parse("0F0,,0B0,\n,1F0,1B0\n", &s, &err) == KT_OK);
    kt_buf b;
    kt_buf_init(&b);
    kt_schedule_write_text(&s, &b);
    CHECK_STR_CONTAINS(b.data, "0F0 - 0B0 -\n- 1F0 1B0\n");
    kt_schedule back;
    REQUIRE(kt_schedule_parse(b.data, &back, &err) == KT_OK);
    kt_buf b2;
    kt_buf_init(&b2);
    kt_schedule_write_csv(&back, &b2);
    CHECK(!strcmp(b2.data, "0F0,,0B0,\n,1F0,1B0\n"));
    kt_buf_free(&b);
    kt_buf_free(&b2);
    kt_schedule_free(&s);
    kt_schedule_free(&back);
  }

  /* malformed input: clear errors, never a crash */
  expect_parse_error("", "empty");
  expect_parse_error("\n\n# only a comment\n", "no schedule rows");
  expect_parse_error("hello world", "'hello'");
  expect_parse_error("0X0 0B0", "unknown op 'X'");
  expect_parse_error("0FW0", "unknown op 'FW'");
  expect_parse_error("0F", "'0F' has no micro-batch number");
  expect_parse_error("0F0x", "form <stage><op><mb>");
  expect_parse_error("0REDUCE_GRAD3", "REDUCE_GRAD is per stage and takes no micro-batch");
  expect_parse_error("0SEND_F", "'0SEND_F' has no micro-batch number");
  expect_parse_error("F0", "stage number");
  expect_parse_error("0F99999999999999999999", "out of range");
  expect_parse_error("99999999999F0", "out of range");
  expect_parse_error("0F0,(0F1)OVERLAP_F_B", "needs two actions");
  expect_parse_error("0F0,(0F1;0B0)OVERLAP", "bad overlapped cell");
  expect_parse_error("0F0 0B0\n# kaiten p=3\n", "p=3");
  expect_parse_error("# kaiten m=1\n0F0 0F1 0B0 0B1\n", "micro-batch 1");
  expect_parse_error("0F0,0B0\n1F0\x01,1B0\n", "1F0");
  {
    static char big[140000];
    memset(big, '-', sizeof big - 1);
    big[sizeof big - 1] = 0;
    for (size_t i = 1; i < sizeof big - 1; i += 2) big[i] = ' ';
    expect_parse_error(big, "idle slots");
  }
  /* a header pins placement and sizes */
  {
    kt_schedule s;
    REQUIRE(kt_schedule_parse("# kaiten p=2 v=2 m=1 placement=v name=x\n0F0 3F0 3B0 0B0\n"
                              "1F0 2F0 2B0 1B0\n",
                              &s, &err) == KT_OK);
    CHECK_EQ_INT(s.placement, KT_PLACEMENT_V);
    CHECK(!strcmp(s.name, "x"));
    CHECK(kt_schedule_validate(&s, &err) == KT_OK);
    kt_schedule_free(&s);
  }
  return kt_test_done(__FILE__);
}
