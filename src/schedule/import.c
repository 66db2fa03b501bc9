/* Interpreting a schedule file: which notation its backward ops are in, how
 * many stages and micro-batches it has, where each stage lives, and which of
 * its actions are communication (the lowered form).
 *
 * Notation. PyTorch's current files write B for a full backward and I for
 * the input gradient; its earlier files wrote B for the input gradient and
 * BW for a full backward. A file is read the only way that can be valid:
 * I means current, BW means legacy, and a B next to a W for the same
 * (stage, micro-batch) can only be an input gradient, so legacy. A file with
 * none of these (F and B only, say) reads the same in both except that in
 * legacy its B would lack its W, so it is read as current. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kaiten/schedule.h"
#include "schedule/rows.h"

static const char *const notation_names[] = {"auto", "current", "legacy"};

const char *kt_notation_name(kt_notation n) {
  return (unsigned)n <= KT_NOTATION_LEGACY ? notation_names[n] : "?";
}

int kt_notation_from_name(const char *name) {
  return kt_name_index(name, notation_names, KT_NOTATION_LEGACY + 1);
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

/* Whether some (stage, mb) has both a B and a W. */
static int has_b_w_pair(const kt__row_list *rl, int *oom) {
  size_t nb = 0, nw = 0;
  for (size_t r = 0; r < rl->n; r++)
    for (size_t i = 0; i < rl->rows[r].n; i++) {
      nb += rl->rows[r].actions[i].op == KT_OP_B;
      nw += rl->rows[r].actions[i].op == KT_OP_W;
    }
  if (!nb || !nw) return 0;
  uint64_t *b = malloc(nb * sizeof *b), *w = malloc(nw * sizeof *w);
  if (!b || !w) {
    free(b);
    free(w);
    *oom = 1;
    return 0;
  }
  size_t ib = 0, iw = 0;
  for (size_t r = 0; r < rl->n; r++)
    for (size_t i = 0; i < rl->rows[r].n; i++) {
      const kt_action *a = &rl->rows[r].actions[i];
      uint64_t key = (uint64_t)(uint32_t)a->stage << 32 | (uint32_t)a->mb;
      if (a->op == KT_OP_B) b[ib++] = key;
      if (a->op == KT_OP_W) w[iw++] = key;
    }
  qsort(b, nb, sizeof *b, cmp_u64);
  qsort(w, nw, sizeof *w, cmp_u64);
  int found = 0;
  for (size_t i = 0, j = 0; i < nb && j < nw && !found;) {
    if (b[i] == w[j]) found = 1;
    else if (b[i] < w[j]) i++;
    else j++;
  }
  free(b);
  free(w);
  return found;
}

/* Decides the notation and rewrites the raw ops into IR ops. kaiten's own
 * text form (with its header) is always in the current notation. */
static kt_status apply_notation(kt__row_list *rl, kt_parse_opts *o, int kaiten_text,
                                kt_error *err) {
  size_t n_i = 0, n_bw = 0;
  for (size_t r = 0; r < rl->n; r++)
    for (size_t i = 0; i < rl->rows[r].n; i++) {
      n_i += rl->rows[r].actions[i].op == KT_OP_I;
      n_bw += rl->rows[r].actions[i].op == KT__RAW_BW;
    }
  kt_notation n = o->notation;
  o->detected_why = "as asked";
  if (n == KT_NOTATION_AUTO && kaiten_text) {
    n = KT_NOTATION_CURRENT;
    o->detected_why = "kaiten text form";
  }
  if (n == KT_NOTATION_AUTO) {
    int oom = 0;
    if (n_i && n_bw)
      return kt_fail(err, KT_EPARSE,
                     "the file mixes I (current notation) with BW (legacy notation); one file "
                     "uses one notation");
    if (n_bw) n = KT_NOTATION_LEGACY, o->detected_why = "BW (legacy full backward) is used";
    else if (n_i) n = KT_NOTATION_CURRENT, o->detected_why = "I (backward for inputs) is used";
    else if (has_b_w_pair(rl, &oom))
      n = KT_NOTATION_LEGACY, o->detected_why = "a B and a W share a (stage, micro-batch)";
    else n = KT_NOTATION_CURRENT, o->detected_why = "no I, BW or B+W pair: B is a full backward";
    if (oom) return kt_fail(err, KT_ENOMEM, "out of memory");
  } else if (n == KT_NOTATION_CURRENT && n_bw) {
    return kt_fail(err, KT_EPARSE,
                   "BW is the legacy notation's full backward, but the file is read as current "
                   "notation (read it as legacy notation, or let the notation be detected)");
  } else if (n == KT_NOTATION_LEGACY && n_i) {
    return kt_fail(err, KT_EPARSE,
                   "I belongs to the current notation, but the file is read as legacy notation "
                   "(read it as current notation, or let the notation be detected)");
  }
  o->detected = n;
  if (n == KT_NOTATION_LEGACY)
    for (size_t r = 0; r < rl->n; r++)
      for (size_t i = 0; i < rl->rows[r].n; i++) {
        kt_action *a = &rl->rows[r].actions[i];
        if (a->op == KT_OP_B) a->op = KT_OP_I;
        else if (a->op == KT__RAW_BW) a->op = KT_OP_B;
      }
  return KT_OK;
}

static int misplaced(const kt__row_list *rl, const kt_schedule *probe) {
  int bad = 0;
  for (size_t r = 0; r < rl->n; r++)
    for (size_t i = 0; i < rl->rows[r].n; i++)
      if (rl->rows[r].actions[i].op < KT_OP_COUNT &&
          kt_stage_rank(probe, rl->rows[r].actions[i].stage) != (int)r)
        bad++;
  return bad;
}

/* The stage -> rank table the file itself shows, when every stage sits on
 * exactly one rank; NULL otherwise, with *why saying which stage does not
 * (why: 96 bytes), or *oom = 1. */
static int *observed_table(const kt__row_list *rl, int S, int *oom, char *why) {
  int *map = malloc((size_t)S * sizeof *map);
  if (!map) {
    *oom = 1;
    return NULL;
  }
  for (int s = 0; s < S; s++) map[s] = -1;
  for (size_t r = 0; r < rl->n; r++)
    for (size_t i = 0; i < rl->rows[r].n; i++) {
      int s = rl->rows[r].actions[i].stage;
      if (rl->rows[r].actions[i].op >= KT_OP_COUNT || s >= S) continue;
      if (map[s] >= 0 && map[s] != (int)r) {
        snprintf(why, 96, "stage %d runs on rank %d and on rank %zu", s, map[s], r);
        free(map);
        return NULL;
      }
      map[s] = (int)r;
    }
  for (int s = 0; s < S; s++)
    if (map[s] < 0) {
      snprintf(why, 96, "stage %d has no compute action", s);
      free(map);
      return NULL;
    }
  return map;
}

/* The file's own table as the explicit placement (ranks may hold different
 * numbers of stages). EPARSE when the file shows no single table. */
static kt_status explicit_from_rows(const kt__row_list *rl, int S, kt_schedule *out,
                                    kt_error *err) {
  int oom = 0;
  char why[96] = "";
  int *map = observed_table(rl, S, &oom, why);
  if (oom) return kt_fail(err, KT_ENOMEM, "out of memory");
  if (!map)
    return kt_fail(err, KT_EPARSE,
                   "the file uses %d stages on %d ranks, so some rank holds more stages than "
                   "another; that needs each stage on one rank, but %s",
                   S, out->p, why);
  kt_error sub;
  kt_status st = kt_schedule_set_stage_table(out, S, map, &sub);
  free(map);
  if (st == KT_ENOMEM) return kt_fail(err, st, "out of memory");
  if (st) return kt_fail(err, KT_EPARSE, "stage placement: %s", sub.msg);
  return KT_OK;
}

/* Picks loop, v or an explicit table from the compute actions (a lowered
 * file's SEND/RECV are checked against it later). When the file fits none
 * (some stage on two ranks), the placement with the fewest misplaced actions
 * is kept and the validator names the misplaced ones. */
static kt_status infer_placement(const kt__row_list *rl, kt_schedule *out, kt_error *err) {
  if (misplaced(rl, out) == 0) return KT_OK; /* loop */
  int loop_bad = misplaced(rl, out);
  int v_bad = loop_bad + 1;
  if (out->v == 2) {
    kt_schedule probe = *out;
    probe.placement = KT_PLACEMENT_V;
    v_bad = misplaced(rl, &probe);
    if (v_bad == 0) {
      out->placement = KT_PLACEMENT_V;
      return KT_OK;
    }
  }
  int oom = 0;
  char why[96];
  int *map = observed_table(rl, kt_schedule_stages(out), &oom, why);
  if (oom) return kt_fail(err, KT_ENOMEM, "out of memory");
  if (map) {
    free(map);
    return explicit_from_rows(rl, kt_schedule_stages(out), out, err);
  }
  if (v_bad < loop_bad) out->placement = KT_PLACEMENT_V;
  return KT_OK;
}

/* Moves the rows into out (compute actions) and, when wanted, a copy of
 * everything into lowered. */
static kt_status split_comms(kt__row_list *rl, kt_parse_opts *o, kt_schedule *out, kt_error *err) {
  o->comm_actions = o->p2p_actions = 0;
  for (size_t r = 0; r < rl->n; r++)
    for (size_t i = 0; i < rl->rows[r].n; i++) {
      o->comm_actions += rl->rows[r].actions[i].op >= KT_OP_COUNT;
      o->p2p_actions += kt_op_is_p2p(rl->rows[r].actions[i].op);
    }
  if (o->comm_actions && o->lowered) {
    kt_status st = kt_schedule_init_like(o->lowered, out, out->m, err);
    if (st) return st;
    for (int r = 0; r < out->p; r++) {
      kt_rank_actions *dst = &o->lowered->ranks[r];
      size_t n = rl->rows[r].n;
      dst->actions = kt_calloc(n ? n : 1, sizeof *dst->actions);
      if (!dst->actions) {
        kt_schedule_free(o->lowered);
        return kt_fail(err, KT_ENOMEM, "out of memory");
      }
      if (n) memcpy(dst->actions, rl->rows[r].actions, n * sizeof *dst->actions);
      dst->n = dst->cap = n;
    }
  }
  for (int r = 0; r < out->p; r++) {
    out->ranks[r] = rl->rows[r];
    if (!o->comm_actions) continue;
    kt_rank_actions *ra = &out->ranks[r];
    size_t k = 0;
    for (size_t i = 0; i < ra->n; i++)
      if (ra->actions[i].op < KT_OP_COUNT) ra->actions[k++] = ra->actions[i];
    ra->n = k;
    /* a row of communication only is an idle row, as a "-" row reads */
    if (k == 0 && ra->idle_after == 0) ra->idle_after = 1;
  }
  free(rl->rows);
  rl->rows = NULL;
  rl->n = 0;
  return KT_OK;
}

kt_status kt_schedule_parse_opts(const char *text, kt_parse_opts *opts, kt_schedule *out,
                                 kt_error *err) {
  kt_parse_opts local = {.notation = KT_NOTATION_AUTO};
  kt_parse_opts *o = opts ? opts : &local;
  memset(out, 0, sizeof *out);
  if (o->lowered) memset(o->lowered, 0, sizeof *o->lowered); /* empty unless comms are read */
  kt__row_list rl;
  kt__header h;
  kt_status st = kt__read_rows(text, &rl, &h, err);
  if (st) return st;
  if ((st = apply_notation(&rl, o, h.seen, err))) goto fail;
  int p = (int)rl.n;
  if (h.p > 0 && h.p != p) {
    st = kt_fail(err, KT_EPARSE, "header says p=%d but the file has %d rows", h.p, p);
    goto fail;
  }
  long max_stage = -1, max_mb = -1;
  size_t compute = 0;
  for (size_t r = 0; r < rl.n; r++)
    for (size_t i = 0; i < rl.rows[r].n; i++) {
      compute += rl.rows[r].actions[i].op < KT_OP_COUNT;
      if (rl.rows[r].actions[i].stage > max_stage) max_stage = rl.rows[r].actions[i].stage;
      if (rl.rows[r].actions[i].mb > max_mb) max_mb = rl.rows[r].actions[i].mb;
    }
  if (compute == 0) {
    st = kt_fail(err, KT_EPARSE, "the schedule has no actions (F, B, I or W)");
    goto fail;
  }
  /* S: the header's stages=, else P*V from its v=, else the largest stage
   * + 1. When S is not P*V for any V the ranks hold different numbers of
   * stages, which only an explicit table read from the rows can say. */
  long S = h.s > 0 ? h.s : h.v > 0 ? (long)p * h.v : max_stage + 1;
  int v = h.v > 0 ? h.v : (int)((S + p - 1) / p);
  int uneven = S != (long)p * v;
  int m = h.m > 0 ? h.m : (int)max_mb + 1;
  if (max_stage >= S) {
    st = kt_fail(err, KT_EPARSE, "stage %ld does not exist with p=%d v=%d (%ld stages)", max_stage,
                 p, v, S);
    goto fail;
  }
  if (uneven && h.placement >= 0) {
    st = kt_fail(err, KT_EPARSE,
                 "%ld stages on %d ranks: some rank holds more stages than another, "
                 "which only placement=explicit can say",
                 S, p);
    goto fail;
  }
  if (max_mb >= m) {
    st = kt_fail(err, KT_EPARSE, "micro-batch %ld does not exist with m=%d", max_mb, m);
    goto fail;
  }
  kt_placement pl = h.placement >= 0 ? (kt_placement)h.placement : KT_PLACEMENT_LOOP;
  if ((st = kt_schedule_init(out, p, v, m, pl, err))) goto fail;
  o->placement_inferred = h.placement < 0;
  if (uneven) st = explicit_from_rows(&rl, (int)S, out, err);
  else if (h.placement < 0) st = infer_placement(&rl, out, err);
  if (st) goto fail_out;
  snprintf(out->name, sizeof out->name, "%s", h.name);
  if ((st = split_comms(&rl, o, out, err))) goto fail_out;
  return KT_OK;
fail_out:
  kt_schedule_free(out);
fail:
  kt__rows_free(&rl);
  return st;
}

kt_status kt_schedule_parse(const char *text, kt_schedule *out, kt_error *err) {
  return kt_schedule_parse_opts(text, NULL, out, err);
}
