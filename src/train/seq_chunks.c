/* --seq-chunks K: 1F1B over the K chunks of every micro-batch along the
 * sequence (Seq1F1B): the forwards in order, each micro-batch's chunks
 * backward in reverse (a chunk's keys and values get their gradients from
 * the later chunks that attended to them). */
#include <stdio.h>

#include "train/session_internal.h"

kt_status kt__seq1f1b(kt_schedule *s, int P, int M, int K, kt_error *err) {
  int n = M * K;
  kt_status st = kt_schedule_init(s, P, 1, n, KT_PLACEMENT_LOOP, err);
  if (st) return st;
  snprintf(s->name, sizeof s->name, "seq1f1b");
  for (int r = 0; r < P && !st; r++) {
    /* 1F1B's warm-up plus a micro-batch's other chunks: the last stage's
     * first backward (chunk K-1 of micro-batch 0) needs all K forwards */
    int w = K - 1 + P - 1 - r;
    if (w > n) w = n;
    for (int i = 0; i < w && !st; i++) st = kt_schedule_push(s, r, r, KT_OP_F, i);
    for (int i = 0; i < n && !st; i++) {
      if (w + i < n) st = kt_schedule_push(s, r, r, KT_OP_F, w + i);
      if (!st) st = kt_schedule_push(s, r, r, KT_OP_B, i / K * K + K - 1 - i % K);
    }
  }
  if (st) {
    kt_schedule_free(s);
    return kt_fail(err, st, "out of memory");
  }
  return kt_schedule_validate(s, err);
}
