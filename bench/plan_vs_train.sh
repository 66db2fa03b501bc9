#!/usr/bin/env bash
# The planner's predicted step time against the measured step time of
# kaiten train for the default GPT, after kaiten calibrate measured this
# machine. P ranks on P cores (P = 1, 2; one OpenBLAS thread per rank, as
# calibrate measures one core), M = 8, b = 4, 1f1b.
set -euo pipefail
B=${1:-build}
K="$B/kaiten"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$K" calibrate -o "$tmp/cluster.json" 2>"$tmp/cal.txt"
cat "$tmp/cal.txt"
cat >"$tmp/gpt.json" <<'JSON'
{"name": "kaiten-gpt-default", "blocks": 4, "hidden": 64, "heads": 4, "vocab": 256,
 "seq_len": 64, "learned_positions": true, "tie_embeddings": false}
JSON
printf '%3s %14s %14s %8s\n' P "predicted ms" "measured ms" error
for P in 1 2; do
  pred=$("$K" plan --model "$tmp/gpt.json" --cluster "$tmp/cluster.json" --devices $P --global-batch 32 \
    --pipeline $P --data-parallel 1 --tensor-parallel 1 --microbatches 8 --micro-batch-size 4 \
    --schedule 1f1b --recompute none --format json | python3 -c 'import json,sys; print(1e3*json.load(sys.stdin)["configs"][0]["step_time"])')
  meas=$("$K" train --stages $P -m 8 -b 4 --steps 12 --val-every 0 --threads-per-rank 1 --format json 2>/dev/null | tail -1 |
    python3 -c 'import json,sys; print(1e3*json.load(sys.stdin)["step_seconds"])')
  python3 -c "p=$pred; m=$meas; print('%3d %14.1f %14.1f %7.1f%%' % ($P, p, m, 100*(p-m)/m))"
done
