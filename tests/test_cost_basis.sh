#!/usr/bin/env bash
# compare holds the model fixed: on the default (rank) basis a schedule with
# V chunks per rank runs 1/V of the costs and memory per stage, so every row
# runs the same model; --per-stage keeps stage costs. Makespan and peak
# memory of the schedules are pinned at P=4, M=8 and P=8, M=16 on both
# bases, the rank basis is exactly the stage basis scaled by 1/V, sim agrees
# with compare, and every output says its basis.
set -u
K="$1"
. "$(dirname "$0")/lib.sh"

for size in "4 8" "8 16"; do
  set -- $size
  "$K" compare -p "$1" -m "$2" --format json >"$tmp/rank_$1.json" 2>"$tmp/err" || bad "compare -p $1 -m $2 failed"
  "$K" compare -p "$1" -m "$2" --format json --per-stage >"$tmp/stage_$1.json" 2>"$tmp/err" || bad "compare --per-stage failed"
done
python3 - "$tmp" <<'PY' && ok || bad "pinned makespans and memories"
import json, sys
d = sys.argv[1]
# (period, peak memory) at unit costs, M_B = 1, M_W = 0, step sync overlap
pinned = {
  ("rank", 4): {"gpipe": (33, 8), "1f1b": (33, 4), "interleaved": (28.5, 5.5), "looped-bfs": (28.5, 8),
                "zb-h1": (27, 4), "zb-h2": (24, 7), "zbv": (24, 4), "dualpipev": (27, 4.5),
                "interleaved-zb": (25.5, 4)},
  ("stage", 4): {"gpipe": (33, 8), "1f1b": (33, 4), "interleaved": (57, 11), "looped-bfs": (57, 16),
                 "zb-h1": (27, 4), "zb-h2": (24, 7), "zbv": (48, 8), "dualpipev": (54, 9),
                 "interleaved-zb": (51, 8)},
  ("rank", 8): {"gpipe": (69, 16), "1f1b": (69, 8), "interleaved": (58.5, 11.5), "looped-bfs": (58.5, 16),
                "zb-h1": (55, 8), "zb-h2": (48, 15), "zbv": (48, 8), "dualpipev": (55, 8.5),
                "interleaved-zb": (51.5, 8)},
  ("stage", 8): {"gpipe": (69, 16), "1f1b": (69, 8), "interleaved": (117, 23), "looped-bfs": (117, 32),
                 "zb-h1": (55, 8), "zb-h2": (48, 15), "zbv": (96, 16), "dualpipev": (110, 17),
                 "interleaved-zb": (103, 16)},
}
for (basis, p), want in pinned.items():
    j = json.load(open(f"{d}/{basis}_{p}.json"))
    assert j["cost_basis"] == basis, j["cost_basis"]
    rows = {r["schedule"]: r for r in j["rows"] if r["applies"]}
    for name, (ms, mem) in want.items():
        got = (rows[name]["period"], rows[name]["peak_memory"])
        assert got == (ms, mem), (basis, p, name, got, (ms, mem))
    # the rank basis is the stage basis divided by V, for every schedule
    if basis == "rank":
        stage = {r["schedule"]: r for r in json.load(open(f"{d}/stage_{p}.json"))["rows"] if r["applies"]}
        for name, r in rows.items():
            v = r["v"]
            assert abs(r["period"] * v - stage[name]["period"]) < 1e-9, (name, p)
            assert abs(r["makespan"] * v - stage[name]["makespan"]) < 1e-9, (name, p)
            assert abs(r["peak_memory"] * v - stage[name]["peak_memory"]) < 1e-9, (name, p)
            assert abs(r["bubble_ratio"] - stage[name]["bubble_ratio"]) < 1e-12, (name, p)
    # the same model: interleaved beats 1f1b, with memory between 1x and 2x 1F1B's
    if basis == "rank":
        assert rows["interleaved"]["period"] < rows["1f1b"]["period"]
        assert rows["1f1b"]["peak_memory"] <= rows["interleaved"]["peak_memory"] <= 2 * rows["1f1b"]["peak_memory"]
        assert abs(rows["1f1b"]["peak_memory_vs_1f1b"] - 1) < 1e-12
PY

# sim agrees with compare on the same basis, and says which
expect 0 "$K" sim -s interleaved -p 8 -m 16 --format json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["period"] == 58.5 and d["cost_basis"] == "rank", d["period"]' "$tmp/out" && ok || bad "sim -s interleaved disagrees with compare"
expect 0 "$K" sim -s interleaved -p 8 -m 16 --format json --per-stage
has '"period":117,' "$tmp/out"; has '"cost_basis":"stage"' "$tmp/out"
expect 0 "$K" sim -s interleaved -p 8 -m 16
has "cost basis: rank" "$tmp/out"
expect 0 "$K" compare -p 4 -m 8 --per-stage
has "cost basis: stage" "$tmp/out"
expect 0 "$K" compare -p 4 -m 8 --report "$tmp/cmp.html"
has "one rank&#39;s share of the model\|one rank's share of the model" "$tmp/cmp.html"
expect 0 "$K" sim --help
has "one rank's share" "$tmp/out"

# per-stage values are shown as given, in text and JSON
expect 0 "$K" sim -s 1f1b -p 4 -m 8 --tf 2,1,1,3
has "tf=2,1,1,3 tb=1 tw=1" "$tmp/out"
expect 0 "$K" sim -s 1f1b -p 4 -m 8 --tf 2,1,1,3 --format json
has '"tf":\[2,1,1,3\]' "$tmp/out"
finish test_cost_basis
