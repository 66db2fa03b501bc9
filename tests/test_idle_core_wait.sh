#!/usr/bin/env bash
# Why a measured step idled, case (a) of issue 34: `make demo`'s
# configuration (the default GPT on 4 pipeline ranks as threads, 1F1B,
# M=8, b=4) on two cores measures far more bubble than the schedule has;
# at least 80% of its idle beyond the same pipeline's --synthetic run
# (sleeps: no core needed) is core_wait, and the run says it is
# oversubscribed at its start, in its summary and in its report.
set -u
K="$1"
. "$(dirname "$0")/lib.sh"
PY="$(dirname "$0")/idle_check.py"
# two cores, as the demo's machine has (more would make it a different case)
run2() { if command -v taskset >/dev/null && [ "$(nproc)" -gt 2 ]; then taskset -c 0,1 "$@"; else "$@"; fi; }
[ "$(nproc)" -ge 2 ] || { echo "test_idle_core_wait: SKIP: one core"; exit 77; }
D="--stages 4 --schedule 1f1b --microbatches 8 --micro-batch-size 4 --steps 6 --val-every 0"
expect 0 run2 "$K" train --model gpt $D --format json --run-dir "$tmp/demo"
cp "$tmp/out" "$tmp/real.json"
has "oversubscribed: 4 compute threads" "$tmp/err"
python3 "$PY" sums "$tmp/real.json" && ok || bad "the demo's idle causes do not sum to its step"
python3 -c "import json; d=json.load(open('$tmp/real.json')); assert d['oversubscribed'] and d['compute_threads']==4 and d['cores']==2, d" \
  && ok || bad "oversubscribed not in the JSON: $(head -c 300 "$tmp/real.json")"
expect 0 run2 "$K" train --synthetic $D --format json
cp "$tmp/out" "$tmp/syn.json"
grep -q "oversubscribed" "$tmp/err" && bad "a synthetic run (sleeps) called oversubscribed" || ok
# a busy machine can make one pair miss; three tries
for try in 1 2 3; do
  if python3 "$PY" core_wait "$tmp/real.json" "$tmp/syn.json"; then ok; break; fi
  [ $try = 3 ] && bad "core_wait under 80% of the demo's idle beyond --synthetic's"
  run2 "$K" train --model gpt $D --format json >"$tmp/real.json" 2>/dev/null
  run2 "$K" train --synthetic $D --format json >"$tmp/syn.json" 2>/dev/null
done
# the text summary: the table of causes and the line
expect 0 run2 "$K" train --model gpt $D --no-live
has "^why idle, last step" "$tmp/out"
has "^oversubscribed: 4 compute threads" "$tmp/out"
# the run directory: every step's ranks[].idle_causes, the report draws them
python3 -c "
import json
for line in open('$tmp/demo/metrics.jsonl'):
    d = json.loads(line)
    assert all(set(r['idle_causes']) >= {'schedule','core_wait','comm','overhead','optimizer'} for r in d['ranks']), d
" && ok || bad "metrics.jsonl without idle_causes: $(head -c 300 "$tmp/demo/metrics.jsonl")"
expect 0 "$K" report "$tmp/demo" -o "$tmp/r.html"
has "Why idle, step 6" "$tmp/r.html"
has "Oversubscribed (steps from 1): 4 compute threads" "$tmp/r.html"
finish test_idle_core_wait
