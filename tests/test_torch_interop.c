/* PyTorch interoperability: its files in both notations, export and import of
 * every built-in schedule, placement inference, the lowered SEND/RECV form
 * and the overlap cost model. */
#include "check.h"
#include "kaiten/generators.h"
#include "kaiten/schedule.h"
#include "kaiten/sim.h"

static int same_actions(const kt_schedule *a, const kt_schedule *b) {
  if (a->p != b->p || a->v != b->v || a->m != b->m) return 0;
  for (int s = 0; s < a->p * a->v; s++)
    if (kt_stage_rank(a, s) != kt_stage_rank(b, s)) return 0;
  for (int r = 0; r < a->p; r++) {
    if (a->ranks[r].n != b->ranks[r].n) return 0;
    for (size_t i = 0; i < a->ranks[r].n; i++) {
      const kt_action *x = &a->ranks[r].actions[i], *y = &b->ranks[r].actions[i];
      if (x->stage != y->stage || x->mb != y->mb || x->op != y->op || x->flags != y->flags)
        return 0;
    }
  }
  return 1;
}

/* Same simulated timeline: every event's times and every rank's metrics. */
static int same_simulation(const kt_schedule *a, const kt_schedule *b, const kt_costs *c) {
  kt_error err;
  kt_timeline ta, tb;
  if (kt_simulate(a, c, &ta, &err)) return 0;
  if (kt_simulate(b, c, &tb, &err)) {
    kt_timeline_free(&ta);
    return 0;
  }
  int same = ta.n_events == tb.n_events;
  for (size_t i = 0; same && i < ta.n_events; i++)
    same = ta.events[i].start == tb.events[i].start && ta.events[i].end == tb.events[i].end &&
           ta.events[i].rank == tb.events[i].rank && ta.events[i].stage == tb.events[i].stage;
  kt_metrics ma, mb;
  if (same && !kt_timeline_metrics(&ta, &ma, &err)) {
    if (!kt_timeline_metrics(&tb, &mb, &err)) {
      same = ma.makespan == mb.makespan && ma.bubble_ratio == mb.bubble_ratio;
      for (int r = 0; same && r < ma.p; r++)
        same = ma.ranks[r].peak_memory == mb.ranks[r].peak_memory &&
               ma.ranks[r].peak_inflight == mb.ranks[r].peak_inflight;
      kt_metrics_free(&mb);
    } else {
      same = 0;
    }
    kt_metrics_free(&ma);
  }
  kt_timeline_free(&ta);
  kt_timeline_free(&tb);
  return same;
}

/* Uneven per-stage costs, so that a wrong stage or placement shows in the times. */
static void uneven_costs(kt_costs *c, int S) {
  kt_costs_default(c);
  char tf[512] = "", tb[512] = "";
  for (int s = 0; s < S; s++) {
    size_t n = strlen(tf), k = strlen(tb);
    snprintf(tf + n, sizeof tf - n, "%s%g", s ? "," : "", 1.0 + 0.25 * (s % 3));
    snprintf(tb + k, sizeof tb - k, "%s%g", s ? "," : "", 1.5 + 0.5 * (s % 2));
  }
  kt_error err;
  kt_costs_set(c, "tf", tf, &err);
  kt_costs_set(c, "tb", tb, &err);
  c->tw = 0.7;
  c->comm = 0.3;
  c->mem_wgrad = 0.4;
}

static kt_schedule parse_ok(const char *text, kt_parse_opts *po) {
  kt_schedule s;
  kt_error err = {{0}};
  kt_status st = kt_schedule_parse_opts(text, po, &s, &err);
  CHECK_MSG(st == KT_OK, "parse: %s", err.msg);
  if (st) memset(&s, 0, sizeof s);
  return s;
}

static void expect_lowered_error(const char *text, kt_status want, const char *needle) {
  kt_schedule lowered = {0}, s;
  kt_parse_opts po = {.lowered = &lowered};
  kt_error err = {{0}};
  REQUIRE_VOID(kt_schedule_parse_opts(text, &po, &s, &err) == KT_OK);
  REQUIRE_VOID(lowered.ranks != NULL);
  /* these files are in the form before torch 2.15 (no WAIT_SEND); the
   * 2.15 rules have their own test (test_torch_ir) */
  kt_status st = kt_lowered_validate_ir(&lowered, KT_TORCH_IR_PRE_2_15, &err);
  CHECK_MSG(st == want, "status %d, want %d (%s)", (int)st, (int)want, err.msg);
  CHECK_STR_CONTAINS(err.msg, needle);
  kt_schedule_free(&lowered);
  kt_schedule_free(&s);
}

static void expect_notation_error(const char *text, kt_notation n, const char *needle) {
  kt_schedule s;
  kt_parse_opts po = {.notation = n};
  kt_error err = {{0}};
  kt_status st = kt_schedule_parse_opts(text, &po, &s, &err);
  CHECK_MSG(st == KT_EPARSE, "'%s' parsed (status %d)", text, (int)st);
  if (st == KT_OK) kt_schedule_free(&s);
  else CHECK_STR_CONTAINS(err.msg, needle);
}

static void pytorch_files(void) {
  const char *files[] = {"dualpipev_4rank_10mb.csv", "zb1p_2rank_2stagep_compute.csv",
                         "zb1p_2rank_2stagep_compute_legacy.csv"};
  kt_schedule s[3];
  kt_parse_opts po[3];
  char *text[3];
  kt_error err;
  for (int f = 0; f < 3; f++) {
    REQUIRE_VOID(kt_read_file(kt_test_data_path(files[f]), &text[f], NULL, &err) == KT_OK);
    po[f] = (kt_parse_opts){.notation = KT_NOTATION_AUTO};
    s[f] = parse_ok(text[f], &po[f]);
    REQUIRE_VOID(s[f].ranks != NULL);
    CHECK_MSG(kt_schedule_validate(&s[f], &err) == KT_OK, "%s: %s", files[f], err.msg);
    CHECK(kt_simulate(&s[f], NULL, NULL, &err) == KT_OK);
    /* it re-exports in its own notation byte for byte */
    kt_buf b;
    kt_buf_init(&b);
    kt_schedule_write_csv_notation(&s[f], po[f].detected, &b);
    CHECK_MSG(!strcmp(b.data, text[f]), "%s does not re-export identically", files[f]);
    kt_buf_free(&b);
    /* its lowered form is sound */
    kt_schedule low;
    REQUIRE_VOID(kt_schedule_lower(&s[f], &low, &err) == KT_OK);
    CHECK_MSG(kt_lowered_validate(&low, &err) == KT_OK, "%s lowered: %s", files[f], err.msg);
    kt_schedule_free(&low);
  }
  CHECK_EQ_INT(s[0].placement, KT_PLACEMENT_V);
  CHECK_EQ_INT(kt_schedule_stages(&s[0]), 8);
  CHECK_EQ_INT(s[0].m, 10);
  CHECK_EQ_INT(s[1].placement, KT_PLACEMENT_LOOP);
  CHECK_EQ_INT(kt_schedule_stages(&s[1]), 4);
  CHECK_EQ_INT(s[1].m, 8);
  CHECK_EQ_INT(po[1].detected, KT_NOTATION_CURRENT);
  CHECK_EQ_INT(po[2].detected, KT_NOTATION_LEGACY);
  /* the legacy file is the current one: same actions, same simulation, and
   * written in current notation it is the current file */
  CHECK(same_actions(&s[1], &s[2]));
  kt_costs c;
  uneven_costs(&c, 4);
  CHECK(same_simulation(&s[1], &s[2], &c));
  kt_costs_free(&c);
  kt_buf b;
  kt_buf_init(&b);
  kt_schedule_write_csv(&s[2], &b);
  CHECK(!strcmp(b.data, text[1]));
  kt_buf_free(&b);
  /* forcing the notation: legacy read as current has BW-free B+W pairs: two backwards */
  kt_parse_opts forced = {.notation = KT_NOTATION_CURRENT};
  kt_schedule wrong = parse_ok(text[2], &forced);
  CHECK(kt_schedule_validate(&wrong, &err) == KT_EINVALID_SCHEDULE);
  CHECK_STR_CONTAINS(err.msg, "two backwards");
  kt_schedule_free(&wrong);
  for (int f = 0; f < 3; f++) {
    kt_schedule_free(&s[f]);
    free(text[f]);
  }
}

/* Every built-in schedule: exported as torch-csv and read back it is the
 * same schedule with the same simulation; its lowered form validates and
 * survives its own round-trip. */
static void builtin_round_trips(void) {
  int ps[] = {1, 2, 3, 4}, vs[] = {0, 3}, ms[] = {1, 2, 4, 6, 8, 12};
  int tested = 0, lowered_ok = 0;
  kt_error err;
  for (int k = 0; k < KT_SCHED_COUNT; k++)
    for (size_t pi = 0; pi < 4; pi++)
      for (size_t vi = 0; vi < 2; vi++)
        for (size_t mi = 0; mi < 6; mi++) {
          kt_schedule s, back;
          kt_gen_params params = {.p = ps[pi], .v = vs[vi], .m = ms[mi]};
          if (kt_generate((kt_gen_kind)k, &params, &s, &err)) continue;
          kt_buf b;
          kt_buf_init(&b);
          kt_schedule_write_csv(&s, &b);
          kt_parse_opts po = {.notation = KT_NOTATION_AUTO};
          kt_status st = kt_schedule_parse_opts(b.data, &po, &back, &err);
          CHECK_MSG(st == KT_OK, "%s P=%d V=%d M=%d: %s", s.name, s.p, s.v, s.m, err.msg);
          if (st == KT_OK) {
            tested++;
            CHECK_MSG(same_actions(&s, &back), "%s P=%d V=%d M=%d differs after torch-csv", s.name,
                      s.p, s.v, s.m);
            kt_costs c;
            uneven_costs(&c, s.p * s.v);
            CHECK_MSG(same_simulation(&s, &back, &c), "%s P=%d V=%d M=%d simulates differently",
                      s.name, s.p, s.v, s.m);
            kt_costs_free(&c);
            kt_schedule_free(&back);
          }
          kt_buf_free(&b);
          /* lowered: validates, prints, reads back with the same compute actions */
          kt_schedule low, low_back = {0}, compute;
          REQUIRE_VOID(kt_schedule_lower(&s, &low, &err) == KT_OK);
          st = kt_lowered_validate(&low, &err);
          CHECK_MSG(st == KT_OK, "%s P=%d V=%d M=%d lowered: %s", s.name, s.p, s.v, s.m, err.msg);
          lowered_ok += st == KT_OK;
          kt_buf_init(&b);
          kt_schedule_write_csv(&low, &b);
          kt_parse_opts lpo = {.lowered = &low_back};
          if (kt_schedule_parse_opts(b.data, &lpo, &compute, &err) == KT_OK) {
            CHECK(same_actions(&s, &compute));
            /* a SEND, a RECV and a WAIT_SEND per message; a reduction and its wait per stage */
            CHECK(lpo.p2p_actions == 3 * kt_schedule_messages(&s));
            CHECK(lpo.comm_actions == lpo.p2p_actions + 2 * (size_t)kt_schedule_stages(&s));
            /* every lowered file has actions besides compute (a reduction per stage) */
            CHECK(low_back.ranks != NULL && same_actions(&low, &low_back));
            kt_schedule_free(&low_back);
            kt_schedule_free(&compute);
          } else {
            CHECK_MSG(0, "lowered %s does not parse: %s", s.name, err.msg);
          }
          kt_buf_free(&b);
          kt_schedule_free(&low);
          kt_schedule_free(&s);
        }
  CHECK_MSG(tested >= 150, "only %d schedules round-tripped", tested);
  CHECK(lowered_ok == tested);
}

static void placement_inference(void) {
  kt_error err;
  /* two adjacent stages per rank: neither loop nor v */
  const char *blocks = "0F0,1F0,0F1,1F1,1B0,0B0,1B1,0B1\n"
                       "2F0,3F0,3B0,2B0,2F1,3F1,3B1,2B1\n";
  kt_parse_opts po = {0};
  kt_schedule s = parse_ok(blocks, &po);
  REQUIRE_VOID(s.ranks != NULL);
  CHECK_EQ_INT(s.placement, KT_PLACEMENT_EXPLICIT);
  CHECK_EQ_INT(s.v, 2);
  CHECK_EQ_INT(kt_stage_rank(&s, 1), 0);
  CHECK_EQ_INT(kt_stage_rank(&s, 2), 1);
  CHECK_EQ_INT(kt_stage_chunk(&s, 3), 1);
  CHECK_EQ_INT(kt_rank_chunk_stage(&s, 1, 0), 2);
  CHECK(kt_schedule_validate(&s, &err) == KT_OK);
  /* stages 0/1 and 2/3 hand over in memory: only 1 -> 2 and back crosses */
  CHECK_EQ_INT((int)kt_schedule_messages(&s), 4);
  kt_metrics m;
  REQUIRE_VOID(kt_simulate_metrics(&s, NULL, &m, &err) == KT_OK);
  /* by hand: rank 1 runs 2F0 at 2 .. 2B1 ending at 14; rank 0's 1B1 waits for it: 14 + 2 + 2 */
  CHECK_NEAR(m.makespan, 18, 1e-12);
  kt_metrics_free(&m);
  kt_schedule low;
  REQUIRE_VOID(kt_schedule_lower(&s, &low, &err) == KT_OK);
  CHECK(kt_lowered_validate(&low, &err) == KT_OK);
  kt_buf b;
  kt_buf_init(&b);
  kt_schedule_write_csv(&low, &b);
  CHECK(!strcmp(b.data, "0F0,1F0,1SEND_F0,0F1,1F1,1SEND_F1,1RECV_B0,1B0,1WAIT_SEND_F0,0B0,"
                        "1RECV_B1,1B1,1WAIT_SEND_F1,1REDUCE_GRAD,1WAIT_REDUCE_GRAD,0B1,"
                        "0REDUCE_GRAD,0WAIT_REDUCE_GRAD\n"
                        "2RECV_F0,2F0,3F0,3B0,2B0,2SEND_B0,2RECV_F1,2F1,3F1,3B1,3REDUCE_GRAD,"
                        "3WAIT_REDUCE_GRAD,2B1,2SEND_B1,2REDUCE_GRAD,2WAIT_REDUCE_GRAD,"
                        "2WAIT_SEND_B0,2WAIT_SEND_B1\n"));
  kt_buf_free(&b);
  kt_schedule_free(&low);
  kt_schedule_free(&s);
  /* a stage on two ranks is not a placement: the validator names the stray action */
  po = (kt_parse_opts){0};
  s = parse_ok("0F0 0F1 0B0 0B1 1F1\n1F0 1B0 1B1\n", &po);
  CHECK(kt_schedule_validate(&s, &err) == KT_EINVALID_SCHEDULE);
  CHECK_STR_CONTAINS(err.msg, "rank 0 runs 1F1 but stage 1 belongs to rank 1");
  kt_schedule_free(&s);
  /* uneven stage counts are an explicit placement (test_torch_ir checks more);
   * a stage on two ranks then has no placement at all */
  kt_schedule t;
  REQUIRE_VOID(kt_schedule_parse("0F0,2F0,2B0,0B0\n1F0,1B0\n", &t, &err) == KT_OK);
  CHECK(t.placement == KT_PLACEMENT_EXPLICIT && kt_schedule_stages(&t) == 3 && t.v == 2);
  CHECK(kt_rank_stage_count(&t, 0) == 2 && kt_rank_stage_count(&t, 1) == 1);
  kt_schedule_free(&t);
  CHECK(kt_schedule_parse("0F0,2F0,2B0,0B0\n1F0,1B0,2F1,2B1\n", &t, &err) == KT_EPARSE);
  CHECK_STR_CONTAINS(err.msg, "stage 2 runs on rank 0 and on rank 1");
  /* explicit placements survive init_like */
  kt_schedule copy;
  s = parse_ok(blocks, &po);
  REQUIRE_VOID(kt_schedule_init_like(&copy, &s, 5, &err) == KT_OK);
  CHECK(copy.placement == KT_PLACEMENT_EXPLICIT && kt_stage_rank(&copy, 1) == 0 && copy.m == 5);
  kt_schedule_free(&copy);
  kt_schedule_free(&s);
  int bad_map[] = {0, 0, 0, 1};
  kt_gen_params pp = {.p = 2, .v = 2, .m = 2};
  REQUIRE_VOID(kt_generate(KT_SCHED_INTERLEAVED, &pp, &s, &err) == KT_OK);
  CHECK(kt_schedule_set_stage_ranks(&s, bad_map, &err) == KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "rank 0 holds more than 2 stages");
  kt_schedule_free(&s);
}

static void notation_rules(void) {
  kt_parse_opts po = {0};
  kt_schedule s = parse_ok("0F0,0B0\n", &po);
  CHECK_EQ_INT(po.detected, KT_NOTATION_CURRENT);
  CHECK_EQ_INT(s.ranks[0].actions[1].op, KT_OP_B);
  kt_schedule_free(&s);
  po = (kt_parse_opts){0};
  s = parse_ok("0F0,0BW0\n", &po);
  CHECK_EQ_INT(po.detected, KT_NOTATION_LEGACY);
  CHECK_EQ_INT(s.ranks[0].actions[1].op, KT_OP_B);
  kt_schedule_free(&s);
  po = (kt_parse_opts){.notation = KT_NOTATION_LEGACY};
  s = parse_ok("0F0,0B0,0W0\n", &po);
  CHECK_EQ_INT(s.ranks[0].actions[1].op, KT_OP_I);
  kt_schedule_free(&s);
  expect_notation_error("0F0,0I0,0W0,0F1,0BW1\n", KT_NOTATION_AUTO, "mixes I");
  expect_notation_error("0F0,0BW0\n", KT_NOTATION_CURRENT, "BW is the legacy");
  expect_notation_error("0F0,0I0,0W0\n", KT_NOTATION_LEGACY, "I belongs to the current");
}

static void lowered_errors(void) {
  const char *good = "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
                     "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\n";
  kt_schedule lowered = {0}, s;
  kt_parse_opts po = {.lowered = &lowered};
  kt_error err;
  REQUIRE_VOID(kt_schedule_parse_opts(good, &po, &s, &err) == KT_OK);
  CHECK(po.comm_actions == 8 && po.p2p_actions == 8);
  CHECK_EQ_INT((int)s.ranks[0].n, 4);
  CHECK(kt_lowered_validate_ir(&lowered, KT_TORCH_IR_PRE_2_15, &err) == KT_OK);
  /* torch 2.15 refuses a send nothing retires */
  CHECK(kt_lowered_validate(&lowered, &err) == KT_EINVALID_SCHEDULE);
  CHECK_STR_CONTAINS(err.msg, "send never retired: rank 0 runs 0SEND_F0 but no 0WAIT_SEND_F0");
  kt_schedule_free(&lowered);
  kt_schedule_free(&s);
  expect_lowered_error("0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
                       "1RECV_F1,1RECV_F0,1F0,1B0,1SEND_B0,1F1,1B1,1SEND_B1\n",
                       KT_EINVALID_SCHEDULE, "receives them in the opposite order");
  expect_lowered_error("0F0,0F1,0RECV_B0,0B0,0SEND_F0,0SEND_F1,0RECV_B1,0B1\n"
                       "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\n",
                       KT_EDEADLOCK, "rank 0 waits at 0B0 for 1SEND_B0");
  expect_lowered_error("0F0,0SEND_F0,0F1,0SEND_F1,0B0,0RECV_B1,0B1\n"
                       "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\n",
                       KT_EINVALID_SCHEDULE, "missing 0RECV_B0");
  expect_lowered_error("0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
                       "1RECV_F0,1F0,1B0,1RECV_F1,1F1,1B1,1SEND_B1\n",
                       KT_EINVALID_SCHEDULE, "missing 1SEND_B0");
  expect_lowered_error("0SEND_F0,0F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
                       "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\n",
                       KT_EINVALID_SCHEDULE, "bad order: rank 0 runs 0SEND_F0 before 0F0");
  expect_lowered_error("0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1,0SEND_B1\n"
                       "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\n",
                       KT_EINVALID_SCHEDULE, "rank 0 runs 0SEND_B1, but no hand-over");
  expect_lowered_error("0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1\n"
                       "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1\n",
                       KT_EINVALID_SCHEDULE, "compute actions: missing backward");
}

/* Overlapped cells cost the sum by default; --overlap X hides X of the rest. */
static void overlap_costs(void) {
  const char *text = "0F0,1F0,(0F1;1B0)OVERLAP_F_B,0B0,1F1,1B1,0B1\n";
  kt_schedule s;
  kt_error err;
  REQUIRE_VOID(kt_schedule_parse(text, &s, &err) == KT_OK);
  REQUIRE_VOID(kt_schedule_validate(&s, &err) == KT_OK);
  double want[] = {12, 11.5, 11};
  double overlap[] = {0, 0.5, 1};
  for (int i = 0; i < 3; i++) {
    kt_costs c;
    kt_costs_default(&c);
    c.overlap = overlap[i];
    kt_metrics m;
    REQUIRE_VOID(kt_simulate_metrics(&s, &c, &m, &err) == KT_OK);
    CHECK_NEAR(m.makespan, want[i], 1e-12);
    CHECK_NEAR(m.ranks[0].busy, want[i], 1e-12); /* one rank, never idle */
    kt_metrics_free(&m);
  }
  kt_costs c;
  kt_costs_default(&c);
  c.overlap = 1.5;
  CHECK(kt_simulate(&s, &c, NULL, &err) == KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "overlap 1.5");
  kt_schedule_free(&s);
}

int main(void) {
  pytorch_files();
  builtin_round_trips();
  placement_inference();
  notation_rules();
  lowered_errors();
  overlap_costs();
  return kt_test_done(__FILE__);
}
