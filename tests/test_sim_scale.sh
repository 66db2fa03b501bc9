#!/usr/bin/env bash
# Simulations above 1,000,000 actions take the metrics-only path: the JSON
# leaves its event list out (with a note on stderr) and keeps exact
# metrics; the terminal chart and the HTML report draw a coarse timeline.
set -u
K="$1"
. "$(dirname "$0")/lib.sh"

# 1f1b, P=64, M=20000: 2.56 M actions; the bubble is (P-1)/(M+P-1) exactly
expect 0 "$K" sim -s 1f1b -p 64 -m 20000 --format json -o "$tmp/big.json"
has "leaves out the event list (--events keeps it)" "$tmp/err"
python3 - "$tmp/big.json" <<'PY' && ok || bad "metrics of the metrics-only JSON"
import json, sys
d = json.load(open(sys.argv[1]))
assert "events" not in d, "events present"
P, M = 64, 20000
assert abs(d["bubble_ratio"] - (P - 1) / (M + P - 1)) < 1e-12, d["bubble_ratio"]
assert d["makespan"] == 3 * (M + P - 1), d["makespan"]  # tf = 1, B = tb + tw = 2
assert d["peak_memory"] == P
assert [r["actions"] for r in d["ranks"]] == [2 * M] * P
assert [r["peak_inflight"] for r in d["ranks"]] == list(range(P, 0, -1))
PY
# small runs keep every event
expect 0 "$K" sim -s 1f1b -p 4 -m 8 --format json -o "$tmp/small.json"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert len(d['events']) == 64" \
  "$tmp/small.json" && ok || bad "small JSON lost its events"

# the terminal chart: one column per time bin, every rank row within the width
expect 0 "$K" sim -s 1f1b -p 64 -m 20000 --width 100 --color never
has "2560000 actions, drawn aggregated" "$tmp/out"
has "aggregated: a cell shows the op that used most of its time" "$tmp/out"
has "ranks not shown: all of them are in --format json" "$tmp/out"
if awk '/^rank/ && length($0) > 100 { bad = 1 } END { exit bad }' "$tmp/out"; then ok; else
  bad "a chart row is wider than 100 columns"; fi
# rank 0: op letters only (B: a backward takes 2 of every 3 units), busy
# nearly all the time
row0=$(grep '^rank  0 |' "$tmp/out")
case "$row0" in "rank  0 |"*B*) ok ;; *) bad "rank 0 row: $row0" ;; esac
[ -z "$(printf '%s' "${row0#*|}" | tr -d 'FBIW.|')" ] && ok || bad "rank 0 row has labels: $row0"
idle=$(printf '%s' "${row0#*|}" | tr -cd '.' | wc -c)
[ "$idle" -le 2 ] && ok || bad "rank 0 shows $idle idle columns: $row0"

# the HTML report: a coarse Gantt, small
expect 0 "$K" sim -s 1f1b -p 64 -m 20000 --format json -o "$tmp/r.json" --report "$tmp/big.html"
size=$(stat -c %s "$tmp/big.html")
[ "$size" -lt 2000000 ] && ok || bad "report of $size bytes"
has "aggregated" "$tmp/big.html"
finish test_sim_scale
