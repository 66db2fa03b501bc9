/* Links with a topology (costs/links.c) against hand-computed values: the
 * link class a hop crosses, transfers taking turns on a shared uplink or
 * downlink (and not across directions), replicas crossing together, ring and
 * hierarchical all-reduce, and the simulator costing hops on the links. */
#include "check.h"
#include "kaiten/costs.h"
#include "kaiten/generators.h"
#include "kaiten/sim.h"

static const kt_link_classes LC = {
    .intra_latency = 1e-6, .intra_bw = 1e9, .inter_latency = 1e-4, .inter_bw = 1e6};

static kt_links *make(int p, int d, const int *node_of, int per_node) {
  kt_links *l = NULL;
  kt_error err;
  if (kt_links_create(&LC, p, d, node_of, per_node, &l, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    exit(1);
  }
  return l;
}

static void hops_and_sharing(void) {
  kt_links *l = make(4, 1, NULL, 2); /* ranks 0,1 on node 0; 2,3 on node 1 */
  CHECK_EQ_INT(kt_links_nodes(l), 2);
  CHECK_NEAR(kt_cost_hop(l, 0, 1, 1000), 1e-6 + 1e-6, 1e-15);
  CHECK_NEAR(kt_cost_hop(l, 1, 2, 1000), 1e-4 + 1e-3, 1e-15);
  CHECK_NEAR(kt_cost_hop(l, 2, 2, 1000), 0, 0);
  /* two transfers leaving node 0 at once take turns on its uplink */
  CHECK_NEAR(kt_links_transfer(l, 1, 2, 1000, 0), 1e-3 + 1e-4, 1e-12);
  CHECK_NEAR(kt_links_transfer(l, 1, 2, 1000, 0), 2e-3 + 1e-4, 1e-12);
  /* the other direction is another link */
  CHECK_NEAR(kt_links_transfer(l, 2, 1, 1000, 0), 1e-3 + 1e-4, 1e-12);
  /* inside a node nothing is booked */
  CHECK_NEAR(kt_links_transfer(l, 0, 1, 1000, 0), 2e-6, 1e-15);
  /* a transfer booked late fills the gap before a later one */
  kt_links_reset(l);
  CHECK_NEAR(kt_links_transfer(l, 1, 2, 1000, 0.010), 0.011 + 1e-4, 1e-12);
  CHECK_NEAR(kt_links_transfer(l, 1, 2, 1000, 0.002), 0.003 + 1e-4, 1e-12);
  CHECK_NEAR(kt_links_transfer(l, 1, 2, 1000, 0.0095), 0.012 + 1e-4, 1e-12); /* no room: after */
  kt_links_destroy(l);

  /* P=2 x D=2 following replica 0 with the others' copies (world 0,1 =
   * stage rank 0): both replicas' activations cross node 0's uplink. The
   * step's first crossing leaves together and shares the link: replica 0's
   * arrives with the copy (no lag). Later ones take turns, replica 0's
   * first: it arrives after its own bytes, the copy after it (the lag), and
   * the link is busy for both. A new run starts a new step. */
  l = make(2, 2, NULL, 2);
  CHECK_NEAR(kt_links_replica_lag(l), 0, 0);
  CHECK_NEAR(kt_links_transfer(l, 0, 1, 1000, 0), 2e-3 + 1e-4, 1e-12);
  CHECK_NEAR(kt_links_replica_lag(l), 0, 0);
  CHECK_NEAR(kt_links_transfer(l, 0, 1, 1000, 0), 3e-3 + 1e-4, 1e-12);
  CHECK_NEAR(kt_links_replica_lag(l), 1e-3, 1e-12);
  CHECK_NEAR(kt_links_transfer(l, 1, 0, 1000, 0), 2e-3 + 1e-4, 1e-12); /* first the other way */
  kt_links_reset(l);
  CHECK_NEAR(kt_links_replica_lag(l), 0, 0);
  CHECK_NEAR(kt_links_transfer(l, 0, 1, 1000, 0), 2e-3 + 1e-4, 1e-12);
  kt_links_destroy(l);
  /* P=3 x D=2, a node per stage rank: rank 2's gradient to rank 1 and its
   * wrap to rank 0 (a loop's last stage to the first) are two hops, each
   * with a first crossing the copies share; both leave node 2's uplink */
  l = make(3, 2, NULL, 2);
  CHECK_NEAR(kt_links_transfer(l, 2, 1, 1000, 0), 2e-3 + 1e-4, 1e-12);
  CHECK_NEAR(kt_links_transfer(l, 2, 0, 1000, 0), 4e-3 + 1e-4, 1e-12);
  CHECK_NEAR(kt_links_replica_lag(l), 0, 0);
  kt_links_destroy(l);
  /* the pipeline inside a node, replicas across: the hop stays inside */
  int pp_inside[4] = {0, 1, 0, 1};
  l = make(2, 2, pp_inside, 0);
  CHECK_NEAR(kt_links_transfer(l, 0, 1, 1000, 0), 2e-6, 1e-15);
  kt_links_destroy(l);
}

static void allreduce(void) {
  const double B = 4000;
  /* one node: a ring inside, 2(D-1) steps of B/D */
  kt_links *l = make(1, 4, NULL, 4);
  CHECK_NEAR(kt_links_allreduce(l, 0, B, 1), 1 + 6 * (1e-6 + 1e-9 * B / 4), 1e-12);
  kt_links_destroy(l);
  /* D=2 on two nodes: 2 steps of B/2 */
  int across[4] = {0, 1, 0, 1}; /* P=2, D=2: each stage rank's replicas on nodes 0 and 1 */
  l = make(2, 2, across, 0);
  double one = 2 * (B / 2 / 1e6 + 1e-4);
  CHECK_NEAR(kt_links_allreduce(l, 0, B, 0), one, 1e-12);
  /* both stage ranks at once share the links: the second ring's steps wait
   * for the first's (L = B/2 / bw each): it ends at 4L + 3 latencies */
  kt_links_reset(l);
  double bytes[2] = {B, B}, start[2] = {0, 0}, end[2], L = B / 2 / 1e6;
  double last = kt_links_allreduce_all(l, bytes, start, end);
  CHECK_NEAR(end[0], one, 1e-12);
  CHECK_NEAR(last, 4 * L + 3e-4, 1e-12);
  /* far apart in time they do not meet */
  kt_links_reset(l);
  start[1] = 1;
  last = kt_links_allreduce_all(l, bytes, start, end);
  CHECK_NEAR(end[0], one, 1e-12);
  CHECK_NEAR(end[1], 1 + one, 1e-12);
  kt_links_destroy(l);
  /* D=4 on two nodes, two each: hierarchical */
  l = make(1, 4, NULL, 2);
  double inside = 1e-6 + 1e-9 * B; /* the one other member's buffer to the leader, and back */
  double between = 2 * (B / 2 / 1e6 + 1e-4);
  CHECK_NEAR(kt_links_allreduce(l, 0, B, 0), inside + between + inside, 1e-12);
  kt_links_destroy(l);
}

/* GPipe P=2 M=3, F = B = 1, a hop of 2 on the link: the activations leave at
 * 1, 2, 3 but take turns (one pair of ranks: one connection; arrive 3, 5,
 * 7), rank 1 ends its backwards at 11 sending at 9, 10, 11 (arrive 11, 13,
 * 15): makespan 16, where a hop of 2 without contention gives 12. */
static void simulator_on_links(void) {
  kt_schedule s;
  kt_error err;
  kt_gen_params sp = {.p = 2, .m = 3};
  if (kt_generate(KT_SCHED_GPIPE, &sp, &s, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    exit(1);
  }
  kt_link_classes lc = {.intra_latency = 0, .intra_bw = 1e12, .inter_latency = 0, .inter_bw = 1};
  kt_links *l = NULL;
  CHECK(kt_links_create(&lc, 2, 1, NULL, 1, &l, &err) == KT_OK);
  kt_costs c;
  kt_costs_default(&c);
  c.tw = 0;
  c.comm = 2;
  kt_metrics m;
  CHECK(kt_simulate_metrics(&s, &c, &m, &err) == KT_OK);
  CHECK_NEAR(m.makespan, 12, 1e-9);
  kt_metrics_free(&m);
  c.links = l;
  c.comm_bytes = 2; /* 2 s on the 1 B/s link */
  CHECK(kt_simulate_metrics(&s, &c, &m, &err) == KT_OK);
  CHECK_NEAR(m.makespan, 16, 1e-9);
  kt_metrics_free(&m);
  /* the same again: the simulation starts from idle links */
  CHECK(kt_simulate_metrics(&s, &c, &m, &err) == KT_OK);
  CHECK_NEAR(m.makespan, 16, 1e-9);
  kt_metrics_free(&m);
  double sync_end = 0;
  CHECK(kt_simulate_step(&s, &c, NULL, &sync_end, &err) == KT_OK);
  CHECK_NEAR(sync_end, 16, 1e-9);       /* D = 1: the step ends with the pipeline */
  CHECK_NEAR(kt_links_synced(l), 0, 0); /* the caller's links are only read */
  kt_links_destroy(l);
  kt_schedule_free(&s);
}

/* Transfers of different pairs that overlap share a link; one pair's take
 * turns (kt_links_share replays a run, the next run takes its durations). */
static void shared_in_time(void) {
  int nodes[3] = {0, 1, 1}; /* rank 0 alone; ranks 1 and 2 on node 1 */
  kt_links *l = make(3, 1, nodes, 0);
  CHECK_NEAR(kt_links_transfer(l, 0, 1, 1000, 0), 1e-3 + 1e-4, 1e-12); /* booked in turns */
  CHECK_NEAR(kt_links_transfer(l, 0, 2, 1000, 0.5e-3), 2e-3 + 1e-4, 1e-12);
  CHECK_NEAR(kt_links_transfer(l, 0, 1, 1000, 0.5e-3), 3e-3 + 1e-4, 1e-12);
  /* replayed: 0->1 alone for 0.5 ms, then with 0->2 at half rate each until
   * it ends at 1.5 ms; 0->2 then shares with the second 0->1 (its pair's
   * first is through) and ends at 2.5 ms, the second 0->1 at 3 ms */
  CHECK_NEAR(kt_links_share(l), 0.5e-3, 1e-12);
  kt_links_reset(l);
  CHECK_NEAR(kt_links_transfer(l, 0, 1, 1000, 0), 1.5e-3 + 1e-4, 1e-12);
  CHECK_NEAR(kt_links_transfer(l, 0, 2, 1000, 0.5e-3), 2.5e-3 + 1e-4, 1e-12);
  CHECK_NEAR(kt_links_transfer(l, 0, 1, 1000, 0.5e-3), 3e-3 + 1e-4, 1e-12);
  CHECK_NEAR(kt_links_share(l), 0, 1e-12); /* the same starts: settled */
  kt_links_share_forget(l);
  kt_links_reset(l);
  CHECK_NEAR(kt_links_transfer(l, 0, 1, 1000, 0), 1e-3 + 1e-4, 1e-12); /* in turns again */
  kt_links_destroy(l);
}

/* Replicas side by side: a run follows one replica's own transfers; the
 * replicas whose copies of a hop cross the same links take turns (also in
 * the replay), on other links they do not meet; the latest end is kept. */
static void replicas_side_by_side(void) {
  kt_links *l = make(2, 2, NULL, 2); /* world 0,1 (stage rank 0) on node 0; 2,3 on node 1 */
  CHECK_EQ_INT(kt_links_replicas(l), 2);
  kt_links_follow_replica(l, 0);
  CHECK_EQ_INT(kt_links_replica(l), 0);
  /* booked in turns: replica 0's first */
  CHECK_NEAR(kt_links_transfer(l, 0, 1, 1000, 0), 1e-3 + 1e-4, 1e-12);
  CHECK_NEAR(kt_links_transfer(l, 0, 1, 1000, 5e-3), 6e-3 + 1e-4, 1e-12);
  kt_links_follow_replica(l, 1);
  CHECK_NEAR(kt_links_transfer(l, 0, 1, 1000, 0), 2e-3 + 1e-4, 1e-12);
  CHECK_NEAR(kt_links_transfer(l, 0, 1, 1000, 5e-3), 7e-3 + 1e-4, 1e-12);
  CHECK_NEAR(kt_links_replica_lag(l), 0, 0); /* no copies priced: each replica is run */
  /* replayed: the step's first crossings leave together and share the
   * link (both through at 2 ms, replica 0's 1 ms later than booked); the
   * next ones keep their turns. The next run takes those durations. */
  CHECK_NEAR(kt_links_share(l), 1e-3, 1e-12);
  kt_links_reset(l);
  kt_links_follow_replica(l, 0);
  CHECK_NEAR(kt_links_transfer(l, 0, 1, 1000, 0), 2e-3 + 1e-4, 1e-12);
  CHECK_NEAR(kt_links_transfer(l, 0, 1, 1000, 5e-3), 6e-3 + 1e-4, 1e-12);
  kt_links_follow_replica(l, 1);
  CHECK_NEAR(kt_links_transfer(l, 0, 1, 1000, 0), 2e-3 + 1e-4, 1e-12);
  CHECK_NEAR(kt_links_transfer(l, 0, 1, 1000, 5e-3), 7e-3 + 1e-4, 1e-12);
  kt_links_note_end(l, 1, 5);
  kt_links_note_end(l, 1, 3);
  CHECK_NEAR(kt_links_last_end(l, 1), 5, 0);
  kt_links_follow_replica(l, 0); /* a new set of runs forgets the ends */
  CHECK_NEAR(kt_links_last_end(l, 1), 0, 0);
  kt_links_follow_replica(l, -1);
  CHECK_EQ_INT(kt_links_replica(l), -1);
  kt_links_destroy(l);
  /* every world rank on its own node: the replicas' hops use other links */
  l = make(2, 2, NULL, 1);
  kt_links_follow_replica(l, 0);
  CHECK_NEAR(kt_links_transfer(l, 0, 1, 1000, 0), 1e-3 + 1e-4, 1e-12);
  kt_links_follow_replica(l, 1);
  CHECK_NEAR(kt_links_transfer(l, 0, 1, 1000, 0), 1e-3 + 1e-4, 1e-12);
  kt_links_destroy(l);
}

/* The step's all-reduce shares links with the pipeline's last transfers in
 * the replay. P=2 x D=2, every world rank on its own node (world 2,3: stage
 * rank 1's replicas). Each replica's last gradient (1 ms of bytes) leaves
 * stage rank 1 at 0, when its all-reduce starts (a ring of 2 steps of 2 ms
 * between nodes 2 and 3). In turns the gradients arrive at 1 ms and the
 * ring's first step waits for them (ends at 3 ms, the ring at 5 ms plus two
 * latencies). Replayed, each gradient and the ring's first step share an
 * uplink at half rate: the gradients arrive at 2 ms, the first step still
 * ends at 3 ms. */
static void allreduce_in_the_replay(void) {
  kt_links *l = make(2, 2, NULL, 1);
  double bytes[2] = {0, 4000};
  kt_links_set_sync(l, bytes);
  for (int run = 0; run < 3; run++) {
    double arrive = (run ? 2e-3 : 1e-3) + 1e-4;
    kt_links_reset(l);
    for (int k = 0; k < 2; k++) {
      kt_links_follow_replica(l, k);
      CHECK_NEAR(kt_links_transfer(l, 1, 0, 1000, 0), arrive, 1e-12);
      kt_links_note_end(l, 1, 0);
      kt_links_note_end(l, 0, arrive);
    }
    kt_links_follow_replica(l, -1);
    CHECK_NEAR(kt_links_sync(l), 5e-3 + 2e-4, 1e-12);
    CHECK_NEAR(kt_links_synced(l), 5e-3 + 2e-4, 1e-12);
    CHECK_NEAR(kt_links_share(l), run ? 0 : 1e-3, 1e-12); /* the gradients' change, then settled */
  }
  /* rank 1's ring starts first, so it is booked first, but rank 0's steps
   * have the first places: the replayed durations stay with their steps
   * (two rings on separate links, 2 steps of 2 ms + latency each) */
  double both[2] = {4000, 4000};
  kt_links_set_sync(l, both);
  kt_links_share_forget(l);
  for (int run = 0; run < 2; run++) {
    kt_links_reset(l);
    kt_links_note_end(l, 0, 1e-3);
    kt_links_note_end(l, 1, 0);
    CHECK_NEAR(kt_links_sync(l), 1e-3 + 4e-3 + 2e-4, 1e-12);
    CHECK_NEAR(kt_links_share(l), 0, 1e-12);
  }
  /* without bytes to all-reduce the step ends with its last rank */
  kt_links_set_sync(l, NULL);
  kt_links_share_forget(l);
  kt_links_reset(l);
  kt_links_note_end(l, 0, 7e-3);
  CHECK_NEAR(kt_links_sync(l), 7e-3, 0);
  kt_links_destroy(l);
}

/* A saturated link: P=2 x D=2 with both replicas' hops crossing one link
 * (1F1B, M=8, 2 ms ops, 256 KiB messages at 100 Mbit/s). Six runs of full
 * replay steps stopped mid-swing here (0.424 s, and 0.403 s with 0.01% more
 * bandwidth); settled, the two agree, and the step is the link's bound
 * plus one transfer: the replicas' first activations leave together and
 * share the link (both through after 2 x 21.2 ms), then the other 14 cross
 * one way back to back, the last one's F and B, its gradient back, the
 * last B, the all-reduce inside. */
static double saturated_step(double bw) {
  kt_schedule s;
  kt_error err;
  kt_gen_params sp = {.p = 2, .m = 8};
  CHECK(kt_generate(KT_SCHED_1F1B, &sp, &s, &err) == KT_OK);
  kt_link_classes lc = {
      .intra_latency = 1e-6, .intra_bw = 5e9, .inter_latency = 8e-6, .inter_bw = bw};
  int node_of[4] = {0, 0, 1, 1};
  kt_links *l = NULL;
  CHECK(kt_links_create(&lc, 2, 2, node_of, 0, &l, &err) == KT_OK);
  kt_costs c;
  kt_costs_default(&c);
  c.tf = c.tb = c.tw = 2e-3;
  c.comm = 0;
  c.links = l;
  c.comm_bytes = 262144;
  double bytes[2] = {1048576, 1048576};
  kt_links_set_sync(l, bytes);
  double step = 0;
  CHECK(kt_simulate_step(&s, &c, NULL, &step, &err) == KT_OK);
  kt_links_destroy(l);
  kt_schedule_free(&s);
  return step;
}

static void saturated_link_settles(void) {
  double a = saturated_step(12366300), b = saturated_step(12368100);
  double hop = 262144 / 12366300.0, inside = 2 * (1e-6 + 524288 / 5e9);
  double bound = 2e-3 + 17 * hop + 6e-3 + hop + 4e-3 + inside;
  CHECK_NEAR(a, b, 1e-3 * a);
  CHECK_NEAR(a, bound, 0.01 * bound);
}

/* p ranks, each on its own node, on links with a burst of burst bytes */
static kt_links *bursty(int p, double burst) {
  kt_link_classes lc = LC;
  lc.inter_burst = burst;
  kt_links *l = NULL;
  kt_error err;
  CHECK(kt_links_create(&lc, p, 1, NULL, 1, &l, &err) == KT_OK);
  return l;
}

/* A burst allowance (a token bucket's): after the link idled long enough a
 * transfer passes its first burst bytes at once; after a shorter gap only
 * what the gap refilled at the link's rate. Booked in turns (no burst) until
 * the replay. */
static void burst_after_idle(void) {
  kt_links *l = bursty(2, 500); /* 0.5 ms at 1e6 B/s */
  CHECK_NEAR(kt_links_transfer(l, 0, 1, 1000, 0), 1e-3 + 1e-4, 1e-12);
  CHECK_NEAR(kt_links_transfer(l, 0, 1, 1000, 2e-3), 3e-3 + 1e-4, 1e-12);
  CHECK_NEAR(kt_links_transfer(l, 0, 1, 1000, 2.6e-3), 4e-3 + 1e-4, 1e-12); /* after the 2nd */
  /* replayed: the first and second (1.5 ms idle before it) each 0.5 ms;
   * the third 0.1 ms after the second: 0.1 ms of burst, 0.9 ms */
  CHECK_NEAR(kt_links_share(l), 0.5e-3, 1e-12);
  kt_links_reset(l);
  CHECK_NEAR(kt_links_transfer(l, 0, 1, 1000, 0), 0.5e-3 + 1e-4, 1e-12);
  CHECK_NEAR(kt_links_transfer(l, 0, 1, 1000, 2e-3), 2.5e-3 + 1e-4, 1e-12);
  CHECK_NEAR(kt_links_transfer(l, 0, 1, 1000, 2.6e-3), 3.5e-3 + 1e-4, 1e-12);
  kt_links_destroy(l);
  /* a burst larger than the message: it passes at once, latency only */
  l = bursty(2, 4000);
  kt_links_transfer(l, 0, 1, 1000, 0);
  kt_links_share(l);
  kt_links_reset(l);
  CHECK_NEAR(kt_links_transfer(l, 0, 1, 1000, 0), 1e-4, 1e-12);
  kt_links_destroy(l);
}

/* The two buckets a transfer crosses are in series: the uplink sends all it
 * holds at once, so it is empty after a transfer that the downlink's
 * emptier bucket held back, and the next transfer on that uplink
 * (to another node) gets only what refilled since. */
static void burst_buckets_in_series(void) {
  kt_links *l = bursty(3, 500);
  double t[3] = {0, 0.6e-3, 1.6e-3};
  kt_links_transfer(l, 0, 1, 1000, t[0]); /* both full: on the links 0 .. 0.5 ms */
  kt_links_transfer(l, 2, 1, 1000, t[1]); /* node 1's downlink refilled 0.1 ms: 0.6 .. 1.5 ms */
  kt_links_transfer(l, 2, 0, 1000, t[2]); /* node 2's uplink refilled 0.1 ms since */
  kt_links_share(l);
  kt_links_reset(l);
  CHECK_NEAR(kt_links_transfer(l, 0, 1, 1000, t[0]), t[0] + 0.5e-3 + 1e-4, 1e-12);
  CHECK_NEAR(kt_links_transfer(l, 2, 1, 1000, t[1]), t[1] + 0.9e-3 + 1e-4, 1e-12);
  CHECK_NEAR(kt_links_transfer(l, 2, 0, 1000, t[2]), t[2] + 0.9e-3 + 1e-4, 1e-12);
  kt_links_destroy(l);
}

static void bad_values(void) {
  kt_links *l = NULL;
  kt_error err;
  kt_link_classes lc = LC;
  lc.inter_bw = 0;
  CHECK(kt_links_create(&lc, 2, 1, NULL, 1, &l, &err) == KT_EINVAL && l == NULL);
  CHECK(strstr(err.msg, "inter-node bandwidth 0") != NULL);
  int bad[2] = {0, -1};
  CHECK(kt_links_create(&LC, 2, 1, bad, 1, &l, &err) == KT_EINVAL && l == NULL);
  CHECK(strstr(err.msg, "node -1") != NULL);
  lc = LC;
  lc.inter_burst = -1;
  CHECK(kt_links_create(&lc, 2, 1, NULL, 1, &l, &err) == KT_EINVAL && l == NULL);
  CHECK(strstr(err.msg, "inter-node burst -1") != NULL);
}

int main(void) {
  hops_and_sharing();
  allreduce();
  simulator_on_links();
  shared_in_time();
  allreduce_in_the_replay();
  saturated_link_settles();
  replicas_side_by_side();
  burst_after_idle();
  burst_buckets_in_series();
  bad_values();
  return kt_test_done(__FILE__);
}
