/* Partitioner: exact min-max against brute force on random small instances
 * (with and without per-stage memory caps), no empty stage, and heavy
 * embedding / head layers pushing blocks off the end stages. */
#include "plan_check.h"
#include "kaiten/plan.h"

static unsigned long long rng_state = 0x9e3779b97f4a7c15ull;
static double urand(void) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(rng_state >> 11) / 9007199254740992.0;
}

/* Best bottleneck over every composition of n into S parts that meets the
 * memory cap (INFINITY when none does); enumerates the cut positions. */
static double brute(const kt_partition_problem *pb, int S, int first, int stage, double worst) {
  int n = pb->n;
  if (stage == S - 1) {
    double load = 0, fixed = 0, act = 0;
    for (int i = first; i < n; i++) {
      load += pb->load[i];
      fixed += pb->fixed ? pb->fixed[i] : 0;
      act += pb->act ? pb->act[i] : 0;
    }
    if (first >= n) return INFINITY;
    if (pb->mem_cap > 0 && fixed + (pb->mult ? pb->mult[stage] : 1) * act > pb->mem_cap)
      return INFINITY;
    return fmax(worst, load);
  }
  double best = INFINITY, load = 0, fixed = 0, act = 0;
  for (int end = first + 1; end <= n - (S - 1 - stage); end++) {
    load += pb->load[end - 1];
    fixed += pb->fixed ? pb->fixed[end - 1] : 0;
    act += pb->act ? pb->act[end - 1] : 0;
    if (pb->mem_cap > 0 && fixed + (pb->mult ? pb->mult[stage] : 1) * act > pb->mem_cap) break;
    double b = brute(pb, S, end, stage + 1, fmax(worst, load));
    if (b < best) best = b;
  }
  return best;
}

/* Checks a returned cut: S non-empty stages covering n layers, its largest
 * load equal to *bottleneck, within the memory cap. */
static void check_cut(const kt_partition_problem *pb, int S, const int *counts, double bottleneck) {
  int sum = 0;
  double worst = 0;
  for (int j = 0, i = 0; j < S; j++) {
    CHECK_MSG(counts[j] >= 1, "stage %d of %d is empty", j, S);
    double load = 0, fixed = 0, act = 0;
    for (int k = 0; k < counts[j] && i < pb->n; k++, i++) {
      load += pb->load[i];
      fixed += pb->fixed ? pb->fixed[i] : 0;
      act += pb->act ? pb->act[i] : 0;
    }
    if (pb->mem_cap > 0)
      CHECK(fixed + (pb->mult ? pb->mult[j] : 1) * act <= pb->mem_cap * (1 + 1e-12));
    worst = fmax(worst, load);
    sum += counts[j];
  }
  CHECK_EQ_INT(sum, pb->n);
  CHECK_NEAR(worst, bottleneck, 1e-9 * fmax(1, bottleneck));
}

static void test_random_vs_brute(int capped) {
  int solved = 0, infeasible = 0;
  for (int trial = 0; trial < 10000; trial++) {
    int n = 1 + (int)(urand() * 11), S = 1 + (int)(urand() * n);
    double load[12], fixed[12], act[12], mult[12];
    int integer = trial % 3 == 0; /* ties are where tie-breaking bugs hide */
    for (int i = 0; i < n; i++) {
      load[i] = integer ? (double)(int)(urand() * 5) : urand() * 10;
      if (urand() < 0.1) load[i] = 0;
      fixed[i] = urand() * 3;
      act[i] = urand() * 2;
    }
    for (int j = 0; j < S; j++) mult[j] = trial % 2 ? 1 + (int)(urand() * 4) : S - j;
    kt_partition_problem pb = {.n = n, .load = load};
    if (capped) {
      pb.fixed = fixed, pb.act = act, pb.mult = mult;
      pb.mem_cap = 2 + urand() * 14;
    }
    int counts[12];
    double bott = -1;
    kt_error err;
    kt_status st = kt_partition_minmax(&pb, S, counts, &bott, &err);
    double want = brute(&pb, S, 0, 0, 0);
    if (isinf(want)) {
      infeasible++;
      CHECK_MSG(st == KT_EINVAL, "trial %d: n=%d S=%d: no cut exists but got status %d", trial, n,
                S, st);
      continue;
    }
    solved++;
    CHECK_MSG(st == KT_OK, "trial %d: %s", trial, err.msg);
    if (st) continue;
    CHECK_MSG(fabs(bott - want) <= 1e-9 * fmax(1, want), "trial %d n=%d S=%d: %.12g vs brute %.12g",
              trial, n, S, bott, want);
    check_cut(&pb, S, counts, bott);
  }
  CHECK(solved > 500);
  if (capped) CHECK(infeasible > 50); /* the cap really binds in some trials */
}

static void test_edges(void) {
  double load[5] = {1, 2, 3, 4, 5};
  int counts[6];
  double bott;
  kt_error err;
  kt_partition_problem pb = {.n = 5, .load = load};
  /* as many stages as layers: one each */
  CHECK(kt_partition_minmax(&pb, 5, counts, &bott, &err) == KT_OK);
  for (int j = 0; j < 5; j++) CHECK_EQ_INT(counts[j], 1);
  CHECK_NEAR(bott, 5, 0);
  /* one stage takes all */
  CHECK(kt_partition_minmax(&pb, 1, counts, &bott, &err) == KT_OK);
  CHECK_EQ_INT(counts[0], 5);
  CHECK_NEAR(bott, 15, 0);
  /* more stages than layers: refused, naming both */
  CHECK(kt_partition_minmax(&pb, 6, counts, &bott, &err) == KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "6 stages for 5 layers");
  load[2] = -1;
  CHECK(kt_partition_minmax(&pb, 2, counts, &bott, &err) == KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "load[2]");
  load[2] = NAN;
  CHECK(kt_partition_minmax(&pb, 2, counts, &bott, &err) == KT_EINVAL);
  /* all-zero loads still give non-empty stages */
  double zero[7] = {0};
  kt_partition_problem pz = {.n = 7, .load = zero};
  CHECK(kt_partition_minmax(&pz, 3, counts, &bott, &err) == KT_OK);
  CHECK(counts[0] >= 1 && counts[1] >= 1 && counts[2] >= 1);
  CHECK_EQ_INT(counts[0] + counts[1] + counts[2], 7);
  /* 1 2 3 4 5 into 2: {1,2,3,4} {5}? no: {1,2,3} {4,5} = 9, optimum 9 */
  double l2[5] = {1, 2, 3, 4, 5};
  kt_partition_problem p2 = {.n = 5, .load = l2};
  CHECK(kt_partition_minmax(&p2, 2, counts, &bott, &err) == KT_OK);
  CHECK_NEAR(bott, 9, 0);
  CHECK_EQ_INT(counts[0], 3);
}

/* Embedding and head heavier than a block: the end stages hold fewer blocks. */
static void test_heavy_ends(void) {
  double load[10] = {3, 1, 1, 1, 1, 1, 1, 1, 1, 3};
  int counts[4];
  double bott;
  kt_error err;
  kt_partition_problem pb = {.n = 10, .load = load};
  CHECK(kt_partition_minmax(&pb, 4, counts, &bott, &err) == KT_OK);
  CHECK_NEAR(bott, 4, 0);
  CHECK(counts[0] <= 2 && counts[3] <= 2); /* at most one block beside embed / head */
  CHECK(counts[1] >= 3 && counts[2] >= 3); /* the middle stages take the rest */

  /* gpt2-124m: the LM head (2shV FLOPs, ~4.5 blocks) gets a stage to itself */
  kt_plan_model m;
  NEED(kt_plan_model_preset("gpt2-124m", &m, &err) == KT_OK);
  kt_plan_cluster c;
  kt_plan_cluster_default(&c);
  kt_plan_options o;
  kt_plan_options_default(&o);
  kt_layer_cost lc[14];
  kt_plan_shape sh = {.t = 1, .b = 1, .recompute = KT_RECOMPUTE_NONE};
  NEED(kt_plan_layer_costs(&m, &c, &o, &sh, lc, &err) == KT_OK);
  double w[14];
  for (int i = 0; i < 14; i++) w[i] = lc[i].f + lc[i].i + lc[i].w;
  CHECK(w[13] > 4 * w[1]);
  kt_partition_problem pg = {.n = 14, .load = w};
  NEED(kt_partition_minmax(&pg, 4, counts, &bott, &err) == KT_OK);
  CHECK_EQ_INT(counts[3], 1);     /* the head alone */
  CHECK_NEAR(bott, w[13], 1e-15); /* and it is the bottleneck */
  CHECK_EQ_INT(counts[0], 5);     /* embedding (no FLOPs) + 4 blocks */
  /* with 3 stages the head shares a stage: fewer blocks than the others */
  NEED(kt_partition_minmax(&pg, 3, counts, &bott, &err) == KT_OK);
  CHECK(counts[2] - 1 < counts[1]);
  kt_plan_model_free(&m);
}

/* The memory cap moves layers towards stages with fewer in-flight
 * micro-batches (1F1B: stage j holds S - j). */
static void test_cap_shifts_layers(void) {
  double load[8] = {1, 1, 1, 1, 1, 1, 1, 1}, fixed[8], act[8], mult[4] = {4, 3, 2, 1};
  for (int i = 0; i < 8; i++) fixed[i] = 1, act[i] = 1;
  int counts[4];
  double bott;
  kt_error err;
  kt_partition_problem pb = {
      .n = 8, .load = load, .fixed = fixed, .act = act, .mult = mult, .mem_cap = 8};
  /* stage j with c layers needs c * (1 + mult[j]) <= 8: at most 1, 2, 2, 4 layers;
   * the min-max cut of 8 unit layers is then 1, 2, 2, 3 (bottleneck 3, not 2) */
  CHECK(kt_partition_minmax(&pb, 4, counts, &bott, &err) == KT_OK);
  CHECK_EQ_INT(counts[0], 1);
  CHECK_EQ_INT(counts[1], 2);
  CHECK_EQ_INT(counts[2], 2);
  CHECK_EQ_INT(counts[3], 3);
  CHECK_NEAR(bott, 3, 0);
  pb.mem_cap = 4.5; /* stage 0 cannot hold even one layer */
  CHECK(kt_partition_minmax(&pb, 4, counts, &bott, &err) == KT_EINVAL);
  CHECK_STR_CONTAINS(err.msg, "memory cap");
}

int main(void) {
  test_random_vs_brute(0);
  test_random_vs_brute(1);
  test_edges();
  test_heavy_ends();
  test_cap_shifts_layers();
  return kt_test_done(__FILE__);
}
