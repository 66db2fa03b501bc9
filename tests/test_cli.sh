#!/usr/bin/env bash
# CLI contract: exit codes, one-line errors, JSON fields, formats.
set -u
K="$1"
. "$(dirname "$0")/lib.sh"
# expect CODE CMD... : exit code must match

expect 0 "$K" --help
# the version names the kernels a speed report ran on (the element-wise
# build the CPU takes: AVX-512, AVX2 + FMA, or neither)
expect 0 "$K" --version;        has "^kernels: OpenBLAS [A-Za-z0-9_]" "$tmp/out"
isa=baseline
grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && isa=x86-64-v3
grep -qw avx512f /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo && grep -qw avx512vl /proc/cpuinfo && isa=x86-64-v4
if grep -q "element-wise portable" "$tmp/out"; then ok; else has "element-wise $isa;" "$tmp/out"; fi
expect 0 "$K" sim --help;      has "--schedule" "$tmp/out"
expect 0 "$K" compare --help
expect 0 "$K" validate --help
expect 2 "$K"
expect 2 "$K" frobnicate;      oneline; has "unknown command 'frobnicate'" "$tmp/err"

# sim: the chart and the metrics
expect 0 "$K" sim --schedule 1f1b -p 4 -m 8
has "rank 3 |" "$tmp/out"; has "bubble_ratio 0.2727" "$tmp/out"; has "period 33 unit (a step, overlap)" "$tmp/out"
expect 0 "$K" sim --schedule 1f1b -p 4 -m 8 --color always; has $'\x1b\[' "$tmp/out"
expect 0 "$K" sim --schedule 1f1b -p 4 -m 8 --color never
if grep -q $'\x1b' "$tmp/out"; then bad "colour with --color never"; else ok; fi

# a send overhead holds the sender after each message (worked by hand in test_sim.c)
expect 0 "$K" sim -s 1f1b -p 2 -m 2 --tf 1 --tb 2 --tw 0 --comm 0.5 --send-overhead 0.25 --per-stage
has "period 10.25" "$tmp/out"; has "send=0.25" "$tmp/out"
echo '{"tf": 1, "tb": 2, "tw": 0, "comm": 0.5, "send_overhead": 0.25}' >"$tmp/so.json"
expect 0 "$K" sim -s 1f1b -p 2 -m 2 --costs "$tmp/so.json" --per-stage --format json
python3 -c "import json; d=json.load(open('$tmp/out')); assert d['makespan']==10.25 and d['costs']['send_overhead']==0.25, d['makespan']" && ok || bad "send_overhead in a cost file"
expect 2 "$K" sim --send-overhead -1;       oneline; has "send-overhead" "$tmp/err"

# bad input: one line, exit 2, naming the value
expect 2 "$K" sim --schedule nope;          oneline; has "unknown schedule 'nope'" "$tmp/err"
expect 2 "$K" sim -p 0;                     oneline; has "'0'" "$tmp/err"
expect 2 "$K" sim -p abc;                   oneline; has "'abc'" "$tmp/err"
expect 2 "$K" sim -m 99999999999999999999;  oneline
expect 2 "$K" sim --tf -1;                  oneline; has "tf" "$tmp/err"
expect 2 "$K" sim --tf 1,2,3 -p 4;          oneline; has "S=4" "$tmp/err"
expect 2 "$K" sim --format yaml;            oneline; has "'yaml'" "$tmp/err"
expect 2 "$K" sim --bogus;                  oneline; has "unknown option '--bogus'" "$tmp/err"
expect 2 "$K" sim -p;                       oneline; has "needs a value" "$tmp/err"
expect 2 "$K" sim --schedule interleaved -p 4 -m 2; oneline; has "M >= P" "$tmp/err"
expect 2 "$K" sim --schedule 1f1b -v 3;     oneline
expect 2 "$K" sim --costs /nonexistent.json; oneline; has "/nonexistent.json" "$tmp/err"
: >"$tmp/empty.csv"
expect 2 "$K" sim --from "$tmp/empty.csv";  oneline; has "is empty" "$tmp/err"
expect 2 "$K" sim --from /nonexistent.csv;  oneline; has "/nonexistent.csv" "$tmp/err"

# json contract
expect 0 "$K" sim --schedule gpipe -p 4 -m 4 --format json
python3 - "$tmp/out" <<'PY' && ok || bad "sim json contract"
import json, sys
d = json.load(open(sys.argv[1]))
for k in ("schedule", "p", "m", "v", "makespan", "period", "step_sync", "bubble_ratio", "ranks"):
    assert k in d, k
assert d["schedule"] == "gpipe" and d["p"] == 4 and d["m"] == 4 and d["v"] == 1
assert abs(d["bubble_ratio"] - 3/7) < 1e-12
for r in d["ranks"]:
    for k in ("rank", "busy", "idle", "peak_memory", "peak_inflight"):
        assert k in r, k
    assert r["peak_inflight"] == 4
PY

# chrome trace: valid JSON with one slice per action and a track per rank
expect 0 "$K" sim --schedule zb-h1 -p 4 -m 8 --format chrome -o "$tmp/trace.json"
python3 - "$tmp/trace.json" <<'PY' && ok || bad "chrome trace"
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"]
slices = [e for e in ev if e["ph"] == "X"]
assert len(slices) == 4 * 8 * 3, len(slices)
assert {e["tid"] for e in slices} == {0, 1, 2, 3}
assert all("stage" in e["args"] and "mb" in e["args"] for e in slices)
assert any(e["ph"] == "C" for e in ev)
PY

# csv out, validate in
expect 0 "$K" sim --schedule interleaved -p 4 -m 8 --format csv -o "$tmp/s.csv"
expect 0 "$K" validate "$tmp/s.csv"; has "valid" "$tmp/out"
expect 0 "$K" sim --from "$tmp/s.csv" --format json
python3 -c "import json,sys; d=json.load(open('$tmp/out')); assert d['v']==2 and abs(d['bubble_ratio']-3/19)<1e-12" && ok || bad "sim --from"
printf '0F0,0F1,0B0,0B1\n1F0,1F1,1B0\n' >"$tmp/broken.csv"
expect 2 "$K" validate "$tmp/broken.csv"; oneline; has "missing backward: 1B1" "$tmp/err"
printf '0F0 0B0 0F1 0B1\n1F0 1F1 1B0 1B1\n' >"$tmp/dead.txt"
expect 2 "$K" validate "$tmp/dead.txt"; oneline; has "deadlock" "$tmp/err"
: >"$tmp/empty.csv"
expect 2 "$K" validate "$tmp/empty.csv"; oneline; has "empty" "$tmp/err"
head -c 3000 /dev/urandom >"$tmp/garbage.csv"
expect 2 "$K" validate "$tmp/garbage.csv"; oneline
expect 2 "$K" validate /nonexistent.csv; oneline; has "/nonexistent.csv" "$tmp/err"
expect 2 "$K" validate; oneline
expect 0 "$K" validate "$KT_TEST_DATA/dualpipev_4rank_10mb.csv"

# compare
expect 0 "$K" compare -p 8 -m 16
has "gpipe" "$tmp/out"; has "1f1b" "$tmp/out"; has "interleaved" "$tmp/out"; has "30.43%" "$tmp/out"
expect 0 "$K" compare -p 4 -m 8 --format json
python3 - "$tmp/out" <<'PY' && ok || bad "compare json"
import json, sys
d = json.load(open(sys.argv[1]))
rows = {r["schedule"]: r for r in d["rows"]}
assert rows["1f1b"]["makespan"] == 33 and rows["1f1b"]["period"] == 33
assert rows["zb-h2"]["makespan"] == 27 and rows["zb-h2"]["period"] == 24 and d["step_sync"] == "overlap"
assert rows["gpipe"]["peak_inflight_first"] == 8
PY
expect 2 "$K" compare --schedules 1f1b,bogus; oneline; has "'bogus'" "$tmp/err"

# OpenBLAS and libmicrohttpd are opened on first use (src/nn/blas.c,
# src/serve/mhd.c): commands that multiply no matrix and serve no page
# never load them (nor start OpenBLAS's threads); --version loads OpenBLAS
# to name its kernels, which shows the loader's log would say so
expect 0 "$K" sim -p 2 -m 2 --format csv -o "$tmp/chart.csv"
for args in "sim -s zb-auto -p 4 -m 8" "compare -p 4 -m 8" "validate $tmp/chart.csv" \
            "plan --model llama-7b --devices 8 --mem-gb 80 --global-batch 1024 --top 2"; do
  # shellcheck disable=SC2086
  LD_DEBUG=files "$K" $args >/dev/null 2>"$tmp/ld"
  if grep -qE 'openblas|microhttpd' "$tmp/ld"; then bad "kaiten $args loads $(grep -oE '[^ ]*(openblas|microhttpd)[^ ]*' "$tmp/ld" | head -1)"; else ok; fi
done
LD_DEBUG=files "$K" --version >/dev/null 2>"$tmp/ld"
has "file=libopenblas" "$tmp/ld"

# output files are written atomically and completely
expect 0 "$K" sim -o "$tmp/chart.txt"; has "F forward" "$tmp/chart.txt"
expect 1 "$K" sim -o /nonexistent-dir/x.txt; oneline

echo "test_cli.sh: $checks checks, $fails failed: $([ $fails = 0 ] && echo OK || echo FAIL)"
[ $fails = 0 ]
