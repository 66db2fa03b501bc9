#!/usr/bin/env bash
# kaiten calibrate writes a cluster spec the planner accepts.
set -u
K="$1"
. "$(dirname "$0")/lib.sh"
"$K" calibrate --help >/dev/null && ok || bad "help"
if "$K" calibrate --model mlp --layers 2 --hidden 32 -o "$tmp/c.json" 2>"$tmp/err"; then
  python3 - "$tmp/c.json" <<'PY' && ok || bad "cluster json"
import json, sys
d = json.load(open(sys.argv[1]))
for k in ("devices", "mem_gb", "achieved_tflops", "intra_bw_gbs", "intra_latency_us"):
    assert k in d and d[k] > 0, k
assert 1e-5 < d["achieved_tflops"] < 10, d   # a CPU core: well under 10 TFLOP/s
PY
  grep -q "GFLOP/s effective" "$tmp/err" && ok || bad "summary line: $(cat "$tmp/err")"
  "$K" plan --model gpt2-124m --cluster "$tmp/c.json" --devices 2 --global-batch 8 --format json >/dev/null 2>"$tmp/perr"
  rc=$?; [ $rc = 0 ] || [ $rc = 1 ] && ok || bad "plan rejected the calibrated cluster: $(cat "$tmp/perr")"
else bad "calibrate failed: $(cat "$tmp/err")"; fi
"$K" calibrate --model bert >/dev/null 2>"$tmp/err" && bad "bad model accepted" || { grep -q "'bert'" "$tmp/err" && ok || bad "message"; }
echo "test_calibrate.sh: $checks checks, $fails failed: $([ $fails = 0 ] && echo OK || echo FAIL)"
[ $fails = 0 ]
