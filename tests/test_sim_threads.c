/* The simulator only reads its inputs: two threads simulating with one cost
 * table, links included (the booking that makes them rerun up to 20 times
 * happens on a copy of each simulation's own), get the results one thread
 * gets alone, bit for bit, whatever the interleaving. Run under
 * ThreadSanitizer by `make tsan` (label threads), which would report the
 * race if a simulation wrote to the shared links. */
#include <pthread.h>

#include "check.h"
#include "kaiten/generators.h"
#include "kaiten/sim.h"

#define RUNS 12

typedef struct {
  const kt_schedule *s;
  const kt_costs *c;
  double makespan[RUNS], sync_end[RUNS];
  int failed;
} job;

static void *simulate_many(void *arg) {
  job *j = arg;
  kt_error err;
  for (int i = 0; i < RUNS; i++) {
    kt_timeline tl;
    if (kt_simulate_step(j->s, j->c, &tl, &j->sync_end[i], &err)) {
      j->failed = 1;
      return NULL;
    }
    kt_metrics m;
    if (kt_timeline_metrics(&tl, &m, &err)) j->failed = 1;
    else j->makespan[i] = m.makespan, kt_metrics_free(&m);
    kt_timeline_free(&tl);
  }
  return NULL;
}

/* Two hosts of two devices, P=2 across them and D=2 inside: transfers share
 * the links (the replay runs) and the step ends with an all-reduce. */
static void two_threads_one_table(void) {
  kt_error err;
  kt_schedule s;
  kt_gen_params sp = {.p = 2, .m = 8};
  REQUIRE_VOID(kt_generate(KT_SCHED_1F1B, &sp, &s, &err) == KT_OK);
  kt_link_classes lc = {.intra_latency = 1e-6,
                        .intra_bw = 5e9,
                        .inter_latency = 8e-6,
                        .inter_bw = 12.5e6,
                        .inter_burst = 16384};
  int node_of[4] = {0, 0, 1, 1};
  kt_links *l = NULL;
  REQUIRE_VOID(kt_links_create(&lc, 2, 2, node_of, 0, &l, &err) == KT_OK);
  double bytes[2] = {1048576, 524288};
  kt_links_set_sync(l, bytes);
  kt_costs c;
  kt_costs_default(&c);
  c.tf = 2e-3, c.tb = 2e-3, c.tw = 1e-3;
  c.links = l;
  c.comm_bytes = 262144;

  job alone = {.s = &s, .c = &c};
  simulate_many(&alone);
  CHECK(!alone.failed);
  CHECK(alone.makespan[0] > 16 * 5e-3);         /* the links cost something */
  CHECK(alone.sync_end[0] > alone.makespan[0]); /* and the all-reduce after the pipeline */
  for (int i = 1; i < RUNS; i++) {
    CHECK_MSG(alone.makespan[i] == alone.makespan[0], "run %d: %.17g vs %.17g", i,
              alone.makespan[i], alone.makespan[0]);
    CHECK(alone.sync_end[i] == alone.sync_end[0]);
  }
  job both[2] = {{.s = &s, .c = &c}, {.s = &s, .c = &c}};
  pthread_t th[2];
  for (int t = 0; t < 2; t++)
    REQUIRE_VOID(pthread_create(&th[t], NULL, simulate_many, &both[t]) == 0);
  for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
  for (int t = 0; t < 2; t++) {
    CHECK(!both[t].failed);
    for (int i = 0; i < RUNS; i++) {
      CHECK_MSG(both[t].makespan[i] == alone.makespan[0], "thread %d run %d: %.17g vs %.17g", t, i,
                both[t].makespan[i], alone.makespan[0]);
      CHECK_MSG(both[t].sync_end[i] == alone.sync_end[0], "thread %d run %d: sync %.17g vs %.17g",
                t, i, both[t].sync_end[i], alone.sync_end[0]);
    }
  }
  CHECK(kt_links_synced(l) == 0); /* the table's links were only read */
  kt_links_destroy(l);
  kt_schedule_free(&s);
}

int main(void) {
  two_threads_one_table();
  return kt_test_done(__FILE__);
}
