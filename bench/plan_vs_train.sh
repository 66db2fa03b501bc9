#!/usr/bin/env bash
# The planner's predicted step time against the measured step time of
# kaiten train for the default GPT, after kaiten calibrate measured this
# machine. P ranks on P cores (P = 1, 2; one OpenBLAS thread per rank, as
# calibrate measures one core), M = 8, b = 4, 1f1b. Measured: median, min and
# max step time after two warm-up steps.
# Usage: plan_vs_train.sh [--quick] [--tsv FILE] [BUILD_DIR].
set -euo pipefail
# shellcheck source=bench/rows.sh
. "$(dirname "$0")/rows.sh"
K="$B/kaiten"
steps=12
[ "$QUICK" = 1 ] && steps=6
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$K" calibrate -o "$tmp/cluster.json" 2>"$tmp/cal.txt"
cat "$tmp/cal.txt"
# "... 28.88 GFLOP/s effective (sgemm alone on the same shapes 49.41 GFLOP/s, 58%) ..."
eff=$(sed -n 's/.* \([0-9.]*\) GFLOP\/s effective.*/\1/p' "$tmp/cal.txt")
bare=$(sed -n 's/.*same shapes \([0-9.]*\) GFLOP\/s.*/\1/p' "$tmp/cal.txt")
if [ -n "$eff" ] && [ -n "$bare" ]; then
  row calibrate.gflops "kaiten calibrate: default GPT step GFLOP/s, one core (one measurement)" \
    GFLOP/s "$eff" - - "bare sgemm, same shapes ($bare GFLOP/s; target 0.6)" "$bare"
fi
cat >"$tmp/gpt.json" <<'JSON'
{"name": "kaiten-gpt-default", "blocks": 4, "hidden": 64, "heads": 4, "vocab": 256,
 "seq_len": 64, "learned_positions": true, "tie_embeddings": false}
JSON
printf '%3s %14s %14s %8s %16s\n' P "predicted ms" "measured ms" error "measured min-max"
for P in 1 2; do
  pred=$("$K" plan --model "$tmp/gpt.json" --cluster "$tmp/cluster.json" --devices $P --global-batch 32 \
    --pipeline $P --data-parallel 1 --tensor-parallel 1 --microbatches 8 --micro-batch-size 4 \
    --schedule 1f1b --recompute none --format json |
    sed -n 's/.*"configs":\[{[^]]*"step_time":\([-+0-9.eE]*\).*/\1/p' | awk '{printf "%.6g", 1e3 * $1}')
  quiet "$tmp/log" "$K" train --stages $P -m 8 -b 4 --steps $steps --val-every 0 --threads-per-rank 1 \
    --run-dir "$tmp/run$P"
  read -r meas mmin mmax < <(step_ms "$tmp/run$P" | stats)
  awk -v P=$P -v p="$pred" -v m="$meas" -v lo="$mmin" -v hi="$mmax" \
    'BEGIN {printf "%3d %14.1f %14.1f %7.1f%% %16s\n", P, p, m, 100 * (p - m) / m, sprintf("%.1f-%.1f", lo, hi)}'
  row plan.vs_train.P$P "kaiten train step, default GPT, 1f1b P=$P M=8 b=4, one core per rank" ms \
    "$meas" "$mmin" "$mmax" "$(printf 'kaiten plan prediction (%.1f ms)' "$pred")" "$pred"
done
