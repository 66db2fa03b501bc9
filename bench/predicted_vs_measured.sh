#!/usr/bin/env bash
# The runtime keeps the simulator's promise: for every built-in schedule, a
# synthetic run (every op sleeps its cost, real tensors travel) at P=4 M=8
# and P=8 M=32 with tf = tb = tw = 2 ms (one rank's share): the measured
# makespan of the last step over (1) train's own prediction (the simulator
# with costs calibrated on that step: the B semantics and the comm model
# must agree) and (2) the simulation at the nominal costs (adds the
# runtime's own overhead: sleep accuracy, wake-ups). Median of 3 runs.
# Usage: predicted_vs_measured.sh [--quick] [--tsv FILE] [BUILD_DIR].
set -euo pipefail
# shellcheck source=bench/rows.sh
. "$(dirname "$0")/rows.sh"
K="$B/kaiten"
runs=3 sizes=("4 8" "8 32")
[ "$QUICK" = 1 ] && runs=1 sizes=("4 8")
schedules=$("$K" compare -p 4 -m 8 --format json | python3 -c '
import json, sys
print(" ".join(r["schedule"] for r in json.load(sys.stdin)["rows"]))')
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
for size in "${sizes[@]}"; do
  read -r p m <<<"$size"
  for s in $schedules; do
    # the prediction at the nominal costs, in ms
    pred=$("$K" sim -s "$s" -p "$p" -m "$m" --tf 2 --tb 2 --tw 2 --format json 2>/dev/null |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["makespan"])') || continue
    : >"$tmp/ratio"
    : >"$tmp/own"
    for _ in $(seq "$runs"); do
      "$K" train --synthetic --schedule "$s" --stages "$p" -m "$m" --tf 2 --tb 2 --tw 2 --steps 3 \
        --no-live --format json >"$tmp/out.json" 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
      python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(1e3 * d["makespan"] / float(sys.argv[2]))' \
        "$tmp/out.json" "$pred" >>"$tmp/ratio"
      python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["makespan"] / d["predicted_makespan"])' \
        "$tmp/out.json" >>"$tmp/own"
    done
    read -r own olo ohi < <(stats <"$tmp/own")
    read -r med lo hi < <(stats <"$tmp/ratio")
    printf '%-15s P=%d M=%-3d measured/own prediction %.4f (%.4f-%.4f)  measured/nominal %7.2f ms %.4f (%.4f-%.4f)\n' \
      "$s" "$p" "$m" "$own" "$olo" "$ohi" "$pred" "$med" "$lo" "$hi"
    row "runtime.vs_prediction.$s.p$p" "$s P=$p M=$m synthetic 2 ms ops: measured makespan / train's prediction" \
      ratio "$own" "$olo" "$ohi" "target within 3%" 1
    row "runtime.vs_nominal.$s.p$p" "$s P=$p M=$m: measured makespan / simulation at the nominal costs" \
      ratio "$med" "$lo" "$hi" "- (the runtime's own overhead)" 1
  done
done
