/* The search: the fastest order of a layout found under a per-rank memory
 * budget (zb-auto in loop placement, zbv-auto in v placement; the tuning
 * of v-half, v-min, zbv, zb-h1 and zb-h2 to the costs runs its later parts).
 *
 * Candidates, each evaluated under the caller's costs:
 *   - the list scheduler (search/list.c) under every combination of its rules;
 *   - with one chunk per rank, the round-based builder (search/rounds.c) under
 *     its 8 flag combinations;
 *   - the handcrafted schedules of the same layout when they fit the budget
 *     (zb-h1, zb-h2; zbv; interleaved-zb) and orders the caller adds;
 * the fastest (ties: lower peak memory) is then refined along its critical
 * path (search/refine.c), and the best of them walked past its plateaus and
 * refined again (search/walk.c), on small problems (none above SMALL_ACTIONS, so that
 * P=32, M=256 takes a few milliseconds and P=64, M=1024 well under 100 ms). Every
 * candidate's memory prefix sums are checked against the budget before it
 * may win, and the winner runs through the simulator once more. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/sim.h"
#include "generators/search/search.h"

/* The KEEP fastest distinct candidates (makespan, then peak memory): the
 * refinement starts from each, as local optima differ. */
#define KEEP 3

typedef struct {
  kt_schedule best[KEEP];
  double makespan[KEEP], peak[KEEP];
  int have;
  double lower; /* the search's lower bound (0: none) */
} best_so_far;

#define TIE 1e-12

/* The best order so far meets the lower bound: nothing can be faster. */
static int optimal(const best_so_far *bs) {
  return bs->have && bs->lower > 0 && bs->makespan[0] <= bs->lower * (1 + TIE);
}

static int before(double ms, double peak, double ms2, double peak2) {
  double tol = TIE * (1 + fabs(ms));
  return ms < ms2 - tol || (ms < ms2 + tol && peak < peak2 - TIE * (1 + fabs(peak)));
}

/* Keeps cand when it fits every budget and is among the KEEP best (an
 * exact tie with a kept one counts as the same order); the storage of the
 * one it displaces becomes cand's, for the next candidate. */
static void consider(const kt__search_problem *pb, kt__search_eval *ev, best_so_far *bs,
                     kt_schedule *cand, double ms) {
  double peak;
  if (!kt__search_fits(pb, cand, &peak)) return;
  if (ms < 0 && (ms = kt__search_evaluate(pb, ev, cand)) < 0) return; /* deadlocks: skipped */
  if (!(ms >= 0)) return;
  int at = 0;
  while (at < bs->have && !before(ms, peak, bs->makespan[at], bs->peak[at])) {
    if (!before(bs->makespan[at], bs->peak[at], ms, peak)) return; /* the same */
    at++;
  }
  if (at >= KEEP) return;
  kt_schedule out = bs->best[KEEP - 1];
  for (int k = KEEP - 1; k > at; k--) {
    bs->best[k] = bs->best[k - 1];
    bs->makespan[k] = bs->makespan[k - 1], bs->peak[k] = bs->peak[k - 1];
  }
  bs->best[at] = *cand;
  bs->makespan[at] = ms, bs->peak[at] = peak;
  *cand = out;
  if (bs->have < KEEP) bs->have++;
}

static kt_status empty_like(const kt_schedule *s, kt_schedule *out, kt_error *err) {
  return kt_schedule_init_like(out, s, s->m, err);
}

static void clear(kt_schedule *s) {
  for (int r = 0; r < s->p; r++) s->ranks[r].n = 0;
}

/* Problems up to this many actions get the whole search (every rule
 * combination of the list scheduler, a generous refinement); larger ones
 * the combinations that won most often on random grids and no refinement:
 * P=32, M=256 then builds in about 5 ms. */
#define SMALL_ACTIONS 12000

static size_t actions(const kt__search_problem *pb) { return 3 * (size_t)pb->S * (size_t)pb->m; }

static kt_status try_lists(const kt__search_problem *pb, kt__search_eval *ev, best_so_far *bs,
                           kt_schedule *cand, int quick, kt_error *err) {
  /* by how much the best of the others falls behind without each (random
   * grids of sizes, costs and budgets), most useful first */
  static const kt__search_rules core[] = {
      {KT__PRIO_F_FIRST, KT__WFILL_FIT, KT__CAP_ZBH2, 0, NULL, 0},
      {KT__PRIO_F_FIRST, KT__WFILL_EAGER, KT__CAP_1F1B, 1, NULL, 0},
  };
  kt__search_rules all[KT__PRIO_COUNT * KT__WFILL_COUNT * KT__CAP_COUNT * 2];
  int n = 0, caps = pb->v == 1 ? KT__CAP_COUNT : 1, depths = pb->v == 1 ? 1 : 2;
  for (int pr = 0; pr < KT__PRIO_COUNT; pr++)
    for (int wf = 0; wf < KT__WFILL_COUNT; wf++)
      for (int cp = 0; cp < caps; cp++)
        for (int dp = 0; dp < depths; dp++)
          if (!(cp == KT__CAP_ZBH2 && pb->p == 1))
            all[n++] = (kt__search_rules){pr, wf, cp, dp, NULL, 0};
  const kt__search_rules *rules = all;
  if (actions(pb) > SMALL_ACTIONS ||
      quick) { /* the second only below 1F1B's memory, where it helps */
    double most = 0;
    for (int st = 0; st < pb->S; st++) most = fmax(most, pb->res[st]);
    rules = core, n = pb->limit[0] < pb->S * most * (1 - 1e-9) ? 2 : 1;
  }
  kt__search_list *ls;
  kt_status st = kt__search_list_new(pb, &ls, err);
  for (int k = 0; k < n && !st && !optimal(bs); k++) {
    kt__search_rules ru = rules[k];
    if (pb->v == 1) ru.depth = 0;
    else ru.cap = KT__CAP_NONE;
    kt_error e2;
    double ms = kt__search_list_build(ls, &ru, cand, &e2);
    if (ms >= 0) consider(pb, ev, bs, cand, ms);
  }
  kt__search_list_free(ls);
  return st;
}

static void try_rounds(const kt__search_problem *pb, kt__search_eval *ev, best_so_far *bs,
                       kt_schedule *cand, const kt_schedule *layout) {
  if (pb->v == 2 && layout->placement == KT_PLACEMENT_V) {
    for (int flags = 0; flags < KT__VROUND_FLAGS && !optimal(bs); flags++) {
      kt_error e2;
      if (!kt__search_v_rounds_build(pb, flags, cand, &e2)) consider(pb, ev, bs, cand, -1);
    }
    return;
  }
  if (pb->v != 1) return;
  /* above SMALL_ACTIONS without the greedy-W variants: on 60 random
   * problems of 12,000-74,000 actions (P = 16..48, budgets P..2P*M_B) they
   * never beat the best of the other four, and each costs as much */
  int n = actions(pb) > SMALL_ACTIONS ? KT__ROUND_GREEDY_W : KT__ROUND_FLAGS;
  for (int flags = 0; flags < n && !optimal(bs); flags++) {
    kt_error e2;
    double ms = kt__search_rounds_build(pb, flags, NULL, cand, &e2);
    if (ms >= 0) consider(pb, ev, bs, cand, ms);
  }
}

/* The handcrafted schedules of this layout. */
static void try_handcrafted(const kt__search_problem *pb, kt__search_eval *ev, best_so_far *bs,
                            kt_schedule *cand, const kt_schedule *layout) {
  kt__generator_fn fns[3];
  int n = 0;
  if (pb->v == 1) fns[n++] = kt__gen_zb_h1, fns[n++] = kt__gen_zb_h2;
  else if (layout->placement == KT_PLACEMENT_V) fns[n++] = kt__gen_zbv;
  else fns[n++] = kt__gen_interleaved_zb;
  for (int k = 0; k < n && !optimal(bs); k++) {
    clear(cand);
    kt_gen_params none = {.p = pb->p, .m = pb->m, .v = pb->v};
    kt_error e2;
    if (fns[k](cand, &none, &e2) == KT_OK) consider(pb, ev, bs, cand, -1);
  }
}

/* The F/I order of `order` kept, its W's placed again by each W rule of
 * the list scheduler under the budgets (cost-aware W timing): kept strictly
 * (k < KT__WFILL_COUNT) or loosely under a priority. Above SMALL_ACTIONS
 * only the loose I-first and F-first orders without the lazy W rule: they
 * are the six of the sixteen that ever won there (on 279 tunings of v-half,
 * v-min and zbv with 12,288-393,216 actions, P = 16..64, M = 2P..16P, the
 * oracles' three cost sets and two of uneven per-stage costs, the fastest
 * candidate was the construction, the V round builder, a list-scheduler
 * order or one of these six every time). */
static kt_status try_follow(const kt__search_problem *pb, kt__search_eval *ev, best_so_far *bs,
                            kt_schedule *cand, const kt_schedule *order, kt_error *err) {
  int small = actions(pb) <= SMALL_ACTIONS;
  kt__search_list *ls;
  kt_status st = kt__search_list_new(pb, &ls, err);
  for (int k = 0; k < KT__WFILL_COUNT * (1 + KT__PRIO_COUNT) && !st && !optimal(bs); k++) {
    int wf = k % KT__WFILL_COUNT, loose = k / KT__WFILL_COUNT; /* loose: 1 + the priority */
    if (!small && (loose == 0 || loose - 1 == KT__PRIO_I_GUARD || wf == KT__WFILL_LAZY)) continue;
    kt__search_rules ru = {
        loose ? loose - 1 : KT__PRIO_I_FIRST, wf, KT__CAP_NONE, 0, order, loose > 0};
    kt_error e2;
    double ms = kt__search_list_build(ls, &ru, cand, &e2);
    if (ms >= 0) consider(pb, ev, bs, cand, ms);
  }
  kt__search_list_free(ls);
  return st;
}

/* Refinement budget in evaluations: the one asked for (< 0: 400) on small
 * problems, none above (what 100,000 actions' worth would allow there, a
 * few evaluations per candidate, never found a move at P=32, M=256 and cost
 * a third of the search's time). */
static long refine_budget(const kt__search_problem *pb, long asked) {
  if (actions(pb) > SMALL_ACTIONS) return 0;
  return asked >= 0 ? asked : 400;
}

/* dst's lists become src's actions (flags dropped: the search orders
 * plain F, I, W). ENOMEM. */
static kt_status copy_actions(kt_schedule *dst, const kt_schedule *src, kt_error *err) {
  clear(dst);
  for (int r = 0; r < src->p; r++)
    for (size_t i = 0; i < src->ranks[r].n; i++) {
      const kt_action *a = &src->ranks[r].actions[i];
      if (kt_schedule_push(dst, r, a->stage, (kt_op)a->op, a->mb))
        return kt_fail(err, KT_ENOMEM, "out of memory");
    }
  return KT_OK;
}

/* Every candidate the options ask for, into bs (cand is scratch). */
static kt_status collect(const kt__search_problem *pb, const kt__search_opts *o,
                         kt__search_eval *ev, best_so_far *bs, kt_schedule *cand,
                         const kt_schedule *const *extra, int n_extra, const kt_schedule *s,
                         kt_error *err) {
  kt_status st = KT_OK;
  /* the handcrafted orders first: at balanced costs they meet the bound
   * (then nothing else runs); the order only decides exact ties */
  if (o->handcrafted) try_handcrafted(pb, ev, bs, cand, s);
  if (o->lists) st = try_lists(pb, ev, bs, cand, o->quick, err);
  if (!st && o->rounds) try_rounds(pb, ev, bs, cand, s);
  for (int k = 0; k < n_extra && !st && !optimal(bs); k++) {
    if (!(st = copy_actions(cand, extra[k], err))) consider(pb, ev, bs, cand, -1);
    if (!st) st = try_follow(pb, ev, bs, cand, extra[k], err);
  }
  /* the winner's W's, placed again by timing (small problems) */
  if (!st && bs->have && o->lists && !o->quick && actions(pb) <= SMALL_ACTIONS && !optimal(bs)) {
    kt_schedule keep;
    if (!(st = empty_like(s, &keep, err))) {
      if (!(st = copy_actions(&keep, &bs->best[0], err)))
        st = try_follow(pb, ev, bs, cand, &keep, err);
      kt_schedule_free(&keep);
    }
  }
  return st;
}

/* The kept candidates refined along their critical paths, the best walked
 * past its plateaus and refined again: the winner's index. */
static int polish(const kt__search_problem *pb, const kt__search_opts *o, kt__search_eval *ev,
                  best_so_far *bs) {
  int win = 0;
  if (o->refine_evals == 0 || optimal(bs)) return win;
  long budget = refine_budget(pb, o->refine_evals);
  for (int k = 0; k < (o->refine_one ? 1 : bs->have); k++) {
    bs->makespan[k] = kt__search_refine(pb, ev, &bs->best[k], bs->makespan[k], budget);
    if (bs->makespan[k] < bs->makespan[win] - TIE * (1 + bs->makespan[win])) win = k;
  }
  if (budget > 0 && o->walk) { /* small problems */
    long walk = kt__search_walk_budget(pb, o->walk_work > 0 ? o->walk_work : 2e6);
    bs->makespan[win] = kt__search_walk(pb, ev, &bs->best[win], bs->makespan[win], walk, 0);
    bs->makespan[win] = kt__search_refine(pb, ev, &bs->best[win], bs->makespan[win], budget);
  }
  return win;
}

kt_status kt__search_run(const kt__search_problem *pb, const kt__search_opts *o,
                         const kt_schedule *const *extra, int n_extra, kt_schedule *s,
                         kt_error *err) {
  kt__search_eval ev;
  kt_status st = kt__search_eval_init(&ev, pb, err);
  if (st) return st;
  best_so_far bs = {.have = 0, .lower = o->lower};
  kt_schedule cand = {0};
  for (int k = 0; k < KEEP && !st; k++) st = empty_like(s, &bs.best[k], err);
  if (!st && !(st = empty_like(s, &cand, err)))
    st = collect(pb, o, &ev, &bs, &cand, extra, n_extra, s, err);
  /* bs.best holds no candidate until one was kept */
  if (!st && !bs.have)
    st = kt_fail(err, KT_EINVAL, "no order fits the memory budget (P=%d, V=%d, M=%d)", pb->p, pb->v,
                 pb->m);
  if (!st) {
    int win = polish(pb, o, &ev, &bs);
    kt_schedule_swap_lists(s, &bs.best[win]); /* hand the winner's lists to s */
  }
  if (cand.ranks) kt_schedule_free(&cand);
  for (int k = 0; k < KEEP; k++)
    if (bs.best[k].ranks) kt_schedule_free(&bs.best[k]);
  kt__search_eval_free(&ev);
  return st;
}
