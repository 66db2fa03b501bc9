/* torch 2.15's lowered IR: WAIT_SEND, REDUCE_GRAD/WAIT_REDUCE_GRAD,
 * UNSHARD/RESHARD read, written and checked as torch does; ranks holding
 * different numbers of stages. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kaiten/generators.h"
#include "kaiten/schedule.h"
#include "kaiten/sim.h"

/* Parses text; *lowered receives the whole file when it has non-compute actions. */
static kt_status parse(const char *text, kt_schedule *s, kt_schedule *lowered, kt_parse_opts *po,
                       kt_error *err) {
  *po = (kt_parse_opts){.lowered = lowered};
  return kt_schedule_parse_opts(text, po, s, err);
}

/* The file parses and its compute part validates; the whole file then
 * checks with status want (under ir) and a message holding needle. */
static void expect_check(const char *text, kt_torch_ir ir, kt_status want, const char *needle) {
  kt_schedule s, low;
  kt_parse_opts po;
  kt_error err = {{0}};
  REQUIRE_VOID(parse(text, &s, &low, &po, &err) == KT_OK);
  REQUIRE_VOID(low.ranks != NULL);
  kt_status st = kt_lowered_validate_ir(&low, ir, &err);
  CHECK_MSG(st == want, "status %d, want %d (%s) for\n%s", (int)st, (int)want, err.msg, text);
  if (needle) CHECK_STR_CONTAINS(err.msg, needle);
  kt_schedule_free(&low);
  kt_schedule_free(&s);
}

static void actions_read_and_print(void) {
  kt_schedule s, low;
  kt_parse_opts po;
  kt_error err = {{0}};
  const char *text =
      "1UNSHARD,0F0,0SEND_F0,0RECV_B0,0B0,0WAIT_SEND_F0,0REDUCE_GRAD,0WAIT_REDUCE_GRAD\n"
      "1RECV_F0,1UNSHARD,1F0,1B0,1SEND_B0,1REDUCE_GRAD,1WAIT_REDUCE_GRAD,1RESHARD,"
      "1WAIT_SEND_B0\n";
  /* stage 1's UNSHARD on rank 0 is on the wrong rank: parsed, then refused */
  REQUIRE_VOID(parse(text, &s, &low, &po, &err) == KT_OK);
  CHECK(po.comm_actions == 13 && po.p2p_actions == 6);
  CHECK_EQ_INT((int)s.ranks[0].n, 2);
  CHECK_EQ_INT(low.ranks[0].actions[0].op, KT_OP_UNSHARD);
  CHECK_EQ_INT(low.ranks[0].actions[0].mb, -1);
  CHECK(kt_lowered_validate(&low, &err) == KT_EINVALID_SCHEDULE);
  CHECK_STR_CONTAINS(err.msg, "rank 0 runs 1UNSHARD but stage 1 belongs to rank 1");
  kt_buf b;
  kt_buf_init(&b);
  kt_schedule_write_csv(&low, &b);
  CHECK(!strcmp(b.data, text)); /* every op prints as it was read */
  kt_buf_free(&b);
  kt_schedule_free(&low);
  kt_schedule_free(&s);
  char buf[40];
  kt_action a = {.stage = 3, .mb = 7, .op = KT_OP_WAIT_SEND_B};
  kt_action_format(&a, buf, sizeof buf);
  CHECK(!strcmp(buf, "3WAIT_SEND_B7"));
  a = (kt_action){.stage = 2, .mb = -1, .op = KT_OP_WAIT_REDUCE_GRAD};
  kt_action_format(&a, buf, sizeof buf);
  CHECK(!strcmp(buf, "2WAIT_REDUCE_GRAD"));
  CHECK(kt_op_has_mb(KT_OP_WAIT_SEND_F) && !kt_op_has_mb(KT_OP_RESHARD));
  CHECK(kt_op_is_p2p(KT_OP_WAIT_SEND_B) && !kt_op_is_p2p(KT_OP_REDUCE_GRAD) &&
        !kt_op_is_p2p(KT_OP_W));
}

/* torch 2.15's ScheduleGPipe order (P=2, M=2, as _dump_csv writes it): a
 * compute-only file with per-stage reductions. */
static void torch_gpipe_order(void) {
  const char *gpipe = "0F0,0F1,0B0,0B1,0REDUCE_GRAD,0WAIT_REDUCE_GRAD\n"
                      "1F0,1F1,1B0,1B1,1REDUCE_GRAD,1WAIT_REDUCE_GRAD\n";
  kt_schedule s, low;
  kt_parse_opts po;
  kt_error err = {{0}};
  REQUIRE_VOID(parse(gpipe, &s, &low, &po, &err) == KT_OK);
  CHECK(po.comm_actions == 4 && po.p2p_actions == 0);
  CHECK(s.p == 2 && s.m == 2 && kt_schedule_total_actions(&s) == 8);
  CHECK(kt_schedule_validate(&s, &err) == KT_OK);
  CHECK_MSG(kt_lowered_validate(&low, &err) == KT_OK, "%s", err.msg);
  kt_schedule_free(&low);
  kt_schedule_free(&s);
}

static void reduce_rules(void) {
  kt_torch_ir v = KT_TORCH_IR_2_15;
  const char *r1 = "1F0,1F1,1B0,1B1,1REDUCE_GRAD,1WAIT_REDUCE_GRAD\n";
  char text[512];
#define WITH_RANK0(row0) (snprintf(text, sizeof text, "%s\n%s", row0, r1), text)
  expect_check(WITH_RANK0("0F0,0F1,0B0,0REDUCE_GRAD,0WAIT_REDUCE_GRAD,0B1"), v,
               KT_EINVALID_SCHEDULE, "after 1 of stage 0's 2 backwards");
  expect_check(WITH_RANK0("0F0,0F1,0B0,0B1,0REDUCE_GRAD"), v, KT_EINVALID_SCHEDULE,
               "0REDUCE_GRAD without 0WAIT_REDUCE_GRAD");
  expect_check(WITH_RANK0("0F0,0F1,0B0,0B1,0WAIT_REDUCE_GRAD"), v, KT_EINVALID_SCHEDULE,
               "without a pending reduction");
  expect_check(WITH_RANK0("0F0,0F1,0B0,0B1"), v, KT_EINVALID_SCHEDULE,
               "stage 0 never runs 0REDUCE_GRAD while other stages do");
  expect_check(WITH_RANK0("0F0,0F1,0B0,0B1,0REDUCE_GRAD,0WAIT_REDUCE_GRAD,0REDUCE_GRAD,"
                          "0WAIT_REDUCE_GRAD"),
               v, KT_EINVALID_SCHEDULE, "runs 0REDUCE_GRAD twice");
#undef WITH_RANK0
  /* two stages on one rank: one reduction pending at a time, waits in order */
  const char *two =
      "0F0,1F0,1B0,0B0,1REDUCE_GRAD,0REDUCE_GRAD,0WAIT_REDUCE_GRAD,1WAIT_REDUCE_GRAD\n";
  expect_check(two, v, KT_EINVALID_SCHEDULE, "while stage 1's reduction is pending");
  expect_check("0F0,1F0,1B0,0B0,1REDUCE_GRAD,0WAIT_REDUCE_GRAD\n", v, KT_EINVALID_SCHEDULE,
               "runs 0WAIT_REDUCE_GRAD, but stage 1 has the pending reduction");
  expect_check("0F0,1F0,1B0,1REDUCE_GRAD,1WAIT_REDUCE_GRAD,0B0,0REDUCE_GRAD,0WAIT_REDUCE_GRAD\n", v,
               KT_OK, NULL);
  /* split backwards: the reduction follows the last W, not the last I */
  expect_check("0F0,0I0,0REDUCE_GRAD,0WAIT_REDUCE_GRAD,0W0\n", v, KT_EINVALID_SCHEDULE,
               "after 0 of stage 0's 1 backwards");
  expect_check("0F0,0I0,0W0,0REDUCE_GRAD,0WAIT_REDUCE_GRAD\n", v, KT_OK, NULL);
}

static void shard_rules(void) {
  kt_torch_ir v = KT_TORCH_IR_2_15;
  expect_check("0UNSHARD,0F0,0B0,0RESHARD\n", v, KT_OK, NULL);
  expect_check("0UNSHARD,0F0,0RESHARD,0B0\n", v, KT_EINVALID_SCHEDULE,
               "rank 0 runs 0B0 while stage 0 is sharded (no 0UNSHARD before it)");
  expect_check("0UNSHARD,0F0,0UNSHARD,0B0,0RESHARD\n", v, KT_EINVALID_SCHEDULE,
               "runs 0UNSHARD while stage 0 is unsharded already");
  expect_check("0UNSHARD,0F0,0B0,0RESHARD,0RESHARD\n", v, KT_EINVALID_SCHEDULE,
               "0RESHARD but stage 0 is not unsharded");
  expect_check("0UNSHARD,0F0,0B0\n", v, KT_EINVALID_SCHEDULE,
               "stage 0 is still unsharded at the end of rank 0's list");
  /* a stage without them is not sharded: stage 1 computes freely */
  expect_check("0UNSHARD,0F0,1F0,1B0,0B0,0RESHARD\n", v, KT_OK, NULL);
}

/* P=2, M=2, one stage per rank, torch 2.15 form (rows differ per case). */
static const char *const good_r0 =
    "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0WAIT_SEND_F0,0RECV_B1,0B1,0WAIT_SEND_F1";
static const char *const good_r1 =
    "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1,1WAIT_SEND_B0,1WAIT_SEND_B1";

static void wait_rules(void) {
  kt_torch_ir v = KT_TORCH_IR_2_15, old = KT_TORCH_IR_PRE_2_15;
  char text[512];
#define ROWS(a, b) (snprintf(text, sizeof text, "%s\n%s\n", a, b), text)
  expect_check(ROWS(good_r0, good_r1), v, KT_OK, NULL);
  expect_check(ROWS(good_r0, good_r1), old, KT_OK, NULL);
  /* a send never retired: torch 2.15 refuses it, earlier releases do not */
  const char *r1_open = "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1,1WAIT_SEND_B0";
  expect_check(ROWS(good_r0, r1_open), v, KT_EINVALID_SCHEDULE,
               "send never retired: rank 1 runs 1SEND_B1 but no 1WAIT_SEND_B1 after it");
  expect_check(ROWS(good_r0, r1_open), old, KT_OK, NULL);
  /* a wait with no pending send: before its send, twice, or for no hand-over */
  expect_check(
      ROWS("0F0,0WAIT_SEND_F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1,0WAIT_SEND_F1",
           good_r1),
      v, KT_EINVALID_SCHEDULE,
      "rank 0 runs 0WAIT_SEND_F0 with no pending send (0SEND_F0 has not run");
  expect_check(
      ROWS("0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0WAIT_SEND_F0,0RECV_B1,0B1,0WAIT_SEND_F1,"
           "0WAIT_SEND_F0",
           good_r1),
      v, KT_EINVALID_SCHEDULE, "0SEND_F0 was retired already");
  expect_check(ROWS(good_r0, "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1,1WAIT_SEND_B0,"
                             "1WAIT_SEND_B1,1WAIT_SEND_F0"),
               v, KT_EINVALID_SCHEDULE, "rank 1 runs 1WAIT_SEND_F0, but no hand-over");
  /* retiring a send before the peer can post its receive: each rank waits on
   * the other (torch's own per-rank check passes this file; it hangs) */
  expect_check(
      ROWS("0F0,0SEND_F0,0F1,0SEND_F1,0WAIT_SEND_F1,0RECV_B0,0B0,0WAIT_SEND_F0,0RECV_B1,0B1",
           "1RECV_F0,1F0,1B0,1SEND_B0,1WAIT_SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1,1WAIT_SEND_B1"),
      v, KT_EDEADLOCK,
      "rank 0 waits at 0WAIT_SEND_F1 for 1RECV_F1 (rank 1); rank 1 waits at 1WAIT_SEND_B0 "
      "for 0RECV_B0 (rank 0)");
#undef ROWS
}

/* Where the 2.15 lowering puts waits and reductions, for every built-in
 * schedule on a grid: one wait per send; a forward send's wait right after
 * the group holding the same stage's backward of the same micro-batch
 * (which proves the peer received it), a backward send's at the end; one
 * reduction per stage (the validator checks it follows the last backward).
 * The pre-2.15 form has none of them. */
static int check_placement(const kt_schedule *s, const kt_schedule *low) {
  int S = kt_schedule_stages(s), ok = 1;
  for (int r = 0; r < low->p; r++) {
    const kt_rank_actions *ra = &low->ranks[r];
    int sends = 0, waits = 0, reduces = 0;
    for (size_t i = 0; i < ra->n; i++) {
      const kt_action *a = &ra->actions[i];
      sends += a->op == KT_OP_SEND_F || a->op == KT_OP_SEND_B;
      waits += a->op == KT_OP_WAIT_SEND_F || a->op == KT_OP_WAIT_SEND_B;
      reduces += a->op == KT_OP_REDUCE_GRAD;
      if (a->op == KT_OP_WAIT_SEND_F && a->stage < S) {
        /* right after the group holding the backward of (stage, mb), and
         * only other waits between them */
        size_t j = i;
        while (j > 0 && (ra->actions[j - 1].op == KT_OP_WAIT_SEND_F)) j--;
        int after_b = 0;
        for (size_t k = j; k-- > 0;) { /* the group that ends at j-1 */
          const kt_action *x = &ra->actions[k];
          if (x->op >= KT_OP_COUNT || (k != j - 1 && !(x->flags & KT_ACTION_OVERLAP_NEXT))) break;
          after_b |=
              (x->op == KT_OP_B || x->op == KT_OP_I) && x->stage == a->stage && x->mb == a->mb;
        }
        ok &= after_b;
      } else if (a->op == KT_OP_WAIT_SEND_B) {
        for (size_t k = i; k < ra->n; k++) /* in the tail of waits */
          ok &= ra->actions[k].op == KT_OP_WAIT_SEND_F || ra->actions[k].op == KT_OP_WAIT_SEND_B;
      }
    }
    ok &= sends == waits && reduces == kt_rank_stage_count(s, r);
  }
  return ok;
}

static void lowering_grid(void) {
  kt_error err;
  int tested = 0;
  for (int k = 0; k < KT_SCHED_COUNT; k++)
    for (int p = 1; p <= 4; p++)
      for (int m = p; m <= 3 * p + 1; m += p + 1) {
        kt_gen_params pp = {.p = p, .m = m};
        kt_schedule s, low, old;
        if (kt_generate((kt_gen_kind)k, &pp, &s, &err) != KT_OK) continue;
        REQUIRE_VOID(kt_schedule_lower(&s, &low, &err) == KT_OK);
        kt_status st = kt_lowered_validate(&low, &err);
        CHECK_MSG(st == KT_OK, "%s P=%d M=%d: %s", s.name, p, m, err.msg);
        CHECK_MSG(check_placement(&s, &low), "%s P=%d M=%d: waits or reductions misplaced", s.name,
                  p, m);
        REQUIRE_VOID(kt_schedule_lower_ir(&s, KT_TORCH_IR_PRE_2_15, &old, &err) == KT_OK);
        size_t extra = 0;
        for (int r = 0; r < old.p; r++)
          for (size_t i = 0; i < old.ranks[r].n; i++)
            extra += old.ranks[r].actions[i].op >= KT_OP_WAIT_SEND_F;
        CHECK_MSG(extra == 0, "%s P=%d M=%d: the pre-2.15 form has 2.15 actions", s.name, p, m);
        CHECK(kt_lowered_validate_ir(&old, KT_TORCH_IR_PRE_2_15, &err) == KT_OK);
        if (kt_schedule_messages(&s) > 0)
          CHECK(kt_lowered_validate(&old, &err) == KT_EINVALID_SCHEDULE);
        tested++;
        kt_schedule_free(&old);
        kt_schedule_free(&low);
        kt_schedule_free(&s);
      }
  CHECK(tested >= 60);
}

/* Ranks with different numbers of stages: read, validated, simulated,
 * lowered, written back. */
static void uneven_stages(void) {
  const char *text = "0F0,1F0,0F1,1F1,1B0,0B0,1B1,0B1\n2F0,2B0,2F1,2B1\n";
  kt_schedule s, low;
  kt_parse_opts po;
  kt_error err = {{0}};
  REQUIRE_VOID(parse(text, &s, &low, &po, &err) == KT_OK);
  CHECK(s.placement == KT_PLACEMENT_EXPLICIT && kt_schedule_stages(&s) == 3 && s.v == 2);
  CHECK(!kt_schedule_even(&s));
  CHECK(kt_stage_rank(&s, 1) == 0 && kt_stage_rank(&s, 2) == 1);
  CHECK(kt_rank_chunk_stage(&s, 1, 0) == 2 && kt_rank_chunk_stage(&s, 1, 1) == -1);
  CHECK(kt_schedule_validate(&s, &err) == KT_OK);
  kt_metrics m;
  REQUIRE_VOID(kt_simulate_metrics(&s, NULL, &m, &err) == KT_OK);
  /* by hand, unit costs (B = 2): rank 0 runs 0F0 1F0 0F1 1F1 (0..4); rank 1
   * 2F0 at 2, 2B0 3..5, 2F1 5..6, 2B1 6..8; rank 0: 1B0 5..7, 0B0 7..9,
   * 1B1 9..11, 0B1 11..13 */
  CHECK_NEAR(m.makespan, 13, 1e-12);
  kt_metrics_free(&m);
  REQUIRE_VOID(kt_schedule_lower(&s, &low, &err) == KT_OK);
  CHECK_MSG(kt_lowered_validate(&low, &err) == KT_OK, "%s", err.msg);
  CHECK(check_placement(&s, &low));
  kt_schedule_free(&low);
  kt_buf b;
  kt_buf_init(&b);
  kt_schedule_write_text(&s, &b);
  CHECK_STR_CONTAINS(b.data, "placement=explicit stages=3");
  kt_schedule back;
  REQUIRE_VOID(kt_schedule_parse(b.data, &back, &err) == KT_OK);
  CHECK(kt_schedule_stages(&back) == 3 && kt_rank_stage_count(&back, 0) == 2);
  kt_schedule_free(&back);
  kt_buf_free(&b);
  /* kept by init_like (the tables are longer than 3*S) */
  kt_schedule copy;
  REQUIRE_VOID(kt_schedule_init_like(&copy, &s, 4, &err) == KT_OK);
  CHECK(kt_schedule_stages(&copy) == 3 && kt_rank_chunk_stage(&copy, 1, 1) == -1);
  kt_schedule_free(&copy);
  kt_schedule_free(&s);
  /* every rank holds a stage */
  kt_schedule t;
  REQUIRE_VOID(kt_schedule_init(&t, 3, 1, 1, KT_PLACEMENT_LOOP, &err) == KT_OK);
  int table[] = {0, 0, 2};
  CHECK(kt_schedule_set_stage_table(&t, 3, table, &err) == KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "rank 1 holds no stage");
  kt_schedule_free(&t);
  /* a header placement that cannot say it */
  CHECK(kt_schedule_parse(
            "# kaiten p=2 v=2 m=1 placement=loop stages=3\n0F0 1F0 1B0 0B0\n2F0 2B0\n", &t, &err) ==
        KT_EPARSE);
  CHECK_STR_CONTAINS(err.msg, "only placement=explicit can say");
}

static void torch_versions(void) {
  kt_torch_ir ir;
  kt_error err;
  const struct {
    const char *text;
    kt_torch_ir want;
  } ok[] = {{"2.15", KT_TORCH_IR_2_15},       {"2.15.0", KT_TORCH_IR_2_15},
            {"2.16", KT_TORCH_IR_2_15},       {"3.0", KT_TORCH_IR_2_15},
            {"latest", KT_TORCH_IR_2_15},     {"2.9", KT_TORCH_IR_PRE_2_15},
            {"2.14.1", KT_TORCH_IR_PRE_2_15}, {"1.13", KT_TORCH_IR_PRE_2_15}};
  for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
    CHECK_MSG(kt_torch_ir_from_version(ok[i].text, &ir, &err) == KT_OK, "%s", ok[i].text);
    CHECK_MSG(ir == ok[i].want, "%s", ok[i].text);
  }
  const char *bad[] = {"", "2", "two", "2.x", "2.15abc", "-1.2"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    CHECK_MSG(kt_torch_ir_from_version(bad[i], &ir, &err) == KT_EINVAL, "'%s'", bad[i]);
    CHECK_STR_CONTAINS(err.msg, "torch version");
  }
}

int main(void) {
  actions_read_and_print();
  torch_gpipe_order();
  reduce_rules();
  shard_rules();
  wait_rules();
  lowering_grid();
  uneven_stages();
  torch_versions();
  return kt_test_done(__FILE__);
}
