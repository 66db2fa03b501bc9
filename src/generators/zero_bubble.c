/* Zero-bubble handcrafted schedules (Qi et al., ICLR 2024 and arXiv 2405.15362):
 * the backward is split into I (input gradient, needed upstream now) and
 * W (weight gradient, can wait), and W fills the bubbles. */
#include "generators/search/search.h"

/* Counters of the ops a rank has emitted for one stage. */
typedef struct {
  int stage, f, i, w;
} chunk_progress;

#define EMIT_F(c) \
  do { \
    if ((c)->f < s->m) { \
      KT__PUSH(s, r, (c)->stage, KT_OP_F, (c)->f); \
      (c)->f++; \
    } \
  } while (0)
#define EMIT_I(c) \
  do { \
    if ((c)->i < (c)->f) { \
      KT__PUSH(s, r, (c)->stage, KT_OP_I, (c)->i); \
      (c)->i++; \
    } \
  } while (0)
#define EMIT_W(c) \
  do { \
    if ((c)->w < (c)->i) { \
      KT__PUSH(s, r, (c)->stage, KT_OP_W, (c)->w); \
      (c)->w++; \
    } \
  } while (0)

/* ZB-H1: F x (P-1-s); (F, I) x s; (F, I, W) while forwards remain; (I, W)
 * for the remaining backwards; then the remaining W. 1F1B's peak memory. */
kt_status kt__gen_zb_h1(kt_schedule *s, const kt_gen_params *params, kt_error *err) {
  (void)params;
  for (int r = 0; r < s->p; r++) {
    chunk_progress c = {r, 0, 0, 0}, *cp = &c;
    for (int k = 0; k < s->p - 1 - r; k++) EMIT_F(cp);
    for (int k = 0; k < r; k++) {
      EMIT_F(cp);
      EMIT_I(cp);
    }
    while (c.f < s->m) {
      EMIT_F(cp);
      EMIT_I(cp);
      EMIT_W(cp);
    }
    while (c.i < s->m) {
      EMIT_I(cp);
      EMIT_W(cp);
    }
    while (c.w < s->m) EMIT_W(cp);
  }
  return KT_OK;
}

/* ZB-H2: F x (2P-1-2s); (I, F) x 2s; (I, W, F) while forwards remain; (I, W);
 * then the remaining W. Peak memory (2P-1) activations on stage 0. */
kt_status kt__gen_zb_h2(kt_schedule *s, const kt_gen_params *params, kt_error *err) {
  (void)params;
  for (int r = 0; r < s->p; r++) {
    chunk_progress c = {r, 0, 0, 0}, *cp = &c;
    for (int k = 0; k < 2 * s->p - 1 - 2 * r; k++) EMIT_F(cp);
    for (int k = 0; k < 2 * r; k++) {
      EMIT_I(cp);
      EMIT_F(cp);
    }
    while (c.f < s->m) {
      EMIT_I(cp);
      EMIT_W(cp);
      EMIT_F(cp);
    }
    while (c.i < s->m) {
      EMIT_I(cp);
      EMIT_W(cp);
    }
    while (c.w < s->m) EMIT_W(cp);
  }
  return KT_OK;
}

/* ZB-V: two chunks per rank in v placement (chunk0 = stage r, chunk1 = stage
 * 2P-1-r). Warm-up 2(P-r)-1 F(chunk0); r x (F1, F0); (P-r) x (F1, I1, W1);
 * steady (F0 while any remain, I0, W0, F1, I1, W1) until only P backwards of
 * chunk0 are left; cool-down r x (I0, I1), (P-r) x (I0, W0), remaining W1,
 * remaining W0. Needs M >= 2P so the warm-up is complete. With costs the
 * order is then tuned to them (kt__search_tune) when that is strictly faster. */
kt_status kt__gen_zbv(kt_schedule *s, const kt_gen_params *params, kt_error *err) {
  int p = s->p;
  if (s->m < 2 * p)
    return kt_fail(err, KT_EINVAL,
                   "zbv needs M >= 2P micro-batches (got M=%d, P=%d) to fill its V-shaped warm-up",
                   s->m, p);
  for (int r = 0; r < p; r++) {
    chunk_progress c0 = {kt_rank_chunk_stage(s, r, 0), 0, 0, 0};
    chunk_progress c1 = {kt_rank_chunk_stage(s, r, 1), 0, 0, 0};
    chunk_progress *a = &c0, *b = &c1;
    for (int k = 0; k < 2 * (p - r) - 1; k++) EMIT_F(a);
    for (int k = 0; k < r; k++) {
      EMIT_F(b);
      EMIT_F(a);
    }
    for (int k = 0; k < p - r; k++) {
      EMIT_F(b);
      EMIT_I(b);
      EMIT_W(b);
    }
    for (int k = 0; k < s->m - p; k++) {
      EMIT_F(a);
      EMIT_I(a);
      EMIT_W(a);
      EMIT_F(b);
      EMIT_I(b);
      EMIT_W(b);
    }
    for (int k = 0; k < r; k++) {
      EMIT_I(a);
      EMIT_I(b);
    }
    for (int k = 0; k < p - r; k++) {
      EMIT_I(a);
      EMIT_W(a);
    }
    while (c1.w < s->m) EMIT_W(b);
    while (c0.w < s->m) EMIT_W(a);
  }
  /* with costs: tuned to them within the order's own memory, kept unless
   * strictly faster (its fixed order ignores unequal F, B, W costs) */
  return params->costs ? kt__search_tune(s, params, 1, err) : KT_OK;
}
