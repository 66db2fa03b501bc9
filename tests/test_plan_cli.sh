#!/usr/bin/env bash
# kaiten plan as a user drives it: help, JSON contract, Example 9.4.2, the
# partition that feeds kaiten train, and one-line errors with exit 2.
set -u
K="$1"
. "$(dirname "$0")/lib.sh"
expect() { local want=$1; shift; "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?;
  if [ "$rc" = "$want" ]; then ok; else bad "exit $rc (want $want): $*"; head -c 600 "$tmp/err" >&2; fi; }
py() { python3 - "$@" && ok || bad "python check: $*"; }

# --help documents every flag the command accepts (and the issue's names)
expect 0 "$K" plan --help
for f in model devices mem-gb global-batch seq-len cluster pipeline data-parallel tensor-parallel \
         chunks microbatches micro-batch-size grad-accum schedule recompute zero bytes-per-param \
         sequence-parallel tflops efficiency devices-per-node max-bubble max-microbatches \
         max-chunks top explain partition-only stages list-presets format output; do
  has "--$f" "$tmp/out"
done
expect 0 "$K" --help; has "plan" "$tmp/out"
expect 0 "$K" plan --list-presets
for p in gpt2-124m gpt2-350m gpt2-1.5b llama-7b llama-70b zb-1.5b zb-6.2b zb-14.6b zb-28.3b; do has "$p" "$tmp/out"; done

# JSON contract: configs sorted best first with the documented fields
expect 0 "$K" plan --model llama-7b --devices 8 --mem-gb 80 --global-batch 1024 --format json --top 5
cp "$tmp/out" "$tmp/free.json"
py "$tmp/free.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
cs = d["configs"]
assert 1 <= len(cs) <= 5, len(cs)
for c in cs:
    for k in ("p", "d", "t", "v", "m", "b", "k", "schedule", "recompute", "bubble_ratio",
              "step_time", "memory_per_stage", "partition", "partition_arg", "reason"):
        assert k in c, k
    assert c["p"] * c["d"] * c["t"] == 8
    assert c["k"] * c["m"] * c["b"] * c["d"] == 1024
    assert len(c["memory_per_stage"]) == c["p"]
    assert max(c["memory_per_stage"]) <= 80e9
    assert len(c["partition"]) == c["p"] * c["v"] and min(c["partition"]) >= 1
    assert sum(c["partition"]) == 34
    assert 0 <= c["bubble_ratio"] < 1
times = [c["step_time"] for c in cs]
assert all(a <= b * (1 + 1e-9) for a, b in zip(times, times[1:])), times
assert d["search"]["enumerated"] > 1000
PY

# Example 9.4.2: P=4, D=2, b=2, 1f1b, 512 samples per replica, T=1024
ex="--model llama-7b --devices 8 --mem-gb 80 --global-batch 1024 --seq-len 1024 -p 4 -d 2 -b 2 --schedule 1f1b --recompute none"
expect 0 "$K" plan $ex --microbatches 16 --format json
py "$tmp/out" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["configs"]
assert len(c) == 1 and c[0]["m"] == 16 and c[0]["k"] == 16, c
# the embedding and head unbalance the end stages: above the closed form 3/19
assert 3 / 19 < c[0]["bubble_ratio"] < 0.25, c[0]["bubble_ratio"]
PY
expect 0 "$K" plan $ex --microbatches 16 --explain
has "K 16 x round" "$tmp/out"; has "(P-1)/(M+P-1) = 15.79%" "$tmp/out"; has "kaiten train --partition 9,8,8,9" "$tmp/out"
expect 0 "$K" plan $ex --format json --top 0
py "$tmp/out" <<'PY'
import json, sys
cs = json.load(open(sys.argv[1]))["configs"]
assert [c["m"] for c in cs] == [256, 128, 64, 32, 16, 8, 4, 2, 1], [c["m"] for c in cs]
assert cs[0]["k"] == 1
assert cs[4]["step_time"] / cs[0]["step_time"] > 1.1
PY
expect 0 "$K" plan $ex --max-bubble 0.15 --format json --top 0
py "$tmp/out" <<'PY'
import json, sys
cs = json.load(open(sys.argv[1]))["configs"]
assert all(c["bubble_ratio"] <= 0.15 for c in cs) and 16 not in [c["m"] for c in cs]
PY
# a uniform model reproduces the documents' 3/19 exactly
cat >"$tmp/uniform.json" <<'EOF'
{"name": "uniform8", "layers": [{"name": "L", "repeat": 8, "params": 1e6, "flops": 1e12, "act_bytes": 1e6}]}
EOF
cat >"$tmp/nolat.json" <<'EOF'
{"devices": 8, "mem_gb": 80, "intra_latency_us": 0, "inter_latency_us": 0}
EOF
expect 0 "$K" plan --model "$tmp/uniform.json" --cluster "$tmp/nolat.json" --global-batch 1024 -p 4 -d 2 -b 2 --schedule 1f1b --microbatches 16 --format json
py "$tmp/out" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["configs"][0]
assert abs(c["bubble_ratio"] - 3 / 19) < 1e-12, c["bubble_ratio"]
PY

# partition-only: per-stage load and imbalance, and the argument kaiten train takes
expect 0 "$K" plan --partition-only --model gpt2-124m --stages 4
has "kaiten train --partition 5,4,4,1" "$tmp/out"; has "imbalance" "$tmp/out"
cat >"$tmp/mlp.json" <<'EOF'
{"name": "mlp8", "layers": [{"name": "linear", "repeat": 8, "params": 4160, "flops": 8192, "act_bytes": 512, "out_bytes": 256}]}
EOF
expect 0 "$K" plan --partition-only --model "$tmp/mlp.json" --stages 3 --format json
part=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["partition_arg"])' "$tmp/out")
if [ "$part" = "3,3,2" ] || [ "$part" = "2,3,3" ] || [ "$part" = "3,2,3" ]; then ok; else bad "mlp partition '$part'"; fi
expect 0 "$K" train --model mlp --layers 8 --stages 3 --partition "$part" --steps 1 --microbatches 3 --no-live
# kaiten train's GPT (--layers 4 --hidden 64 --heads 4 --seq-len 64, byte vocabulary): L + 2 units
cat >"$tmp/traingpt.json" <<'EOF'
{"name": "train-gpt", "blocks": 4, "hidden": 64, "heads": 4, "vocab": 256, "seq_len": 64, "learned_positions": true}
EOF
expect 0 "$K" plan --partition-only --model "$tmp/traingpt.json" --stages 3 --format json
part=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["partition_arg"])' "$tmp/out")
expect 0 "$K" train --model gpt --layers 4 --hidden 64 --heads 4 --seq-len 64 --stages 3 --partition "$part" --steps 1 --microbatches 3 --no-live

# bad input: one line naming the value, exit 2
expect 2 "$K" plan --model gpt2-124m;                                oneline; has "global-batch" "$tmp/err"
expect 2 "$K" plan --model nope --global-batch 8;                     oneline; has "'nope'" "$tmp/err"
expect 2 "$K" plan --model "$tmp/missing.json" --global-batch 8;     oneline; has "missing.json" "$tmp/err"
expect 2 "$K" plan --model gpt2-124m --global-batch 0;                oneline; has "'0'" "$tmp/err"
expect 2 "$K" plan --model gpt2-124m --global-batch 8 -p 3;           oneline; has "3" "$tmp/err"
expect 2 "$K" plan --model gpt2-124m --global-batch 8 -p 4 -d 4 -t 1; oneline; has "16" "$tmp/err"
expect 2 "$K" plan --model gpt2-124m --global-batch 12 -d 8;          oneline; has "12" "$tmp/err"
expect 2 "$K" plan --model gpt2-124m --global-batch 8 --schedule foo; oneline; has "'foo'" "$tmp/err"
expect 2 "$K" plan --model gpt2-124m --global-batch 8 --recompute x;  oneline; has "'x'" "$tmp/err"
expect 2 "$K" plan --model gpt2-124m --global-batch 8 --zero 4;       oneline; has "'4'" "$tmp/err"
expect 2 "$K" plan --model gpt2-124m --global-batch 8 --bytes-per-param 2,2; oneline; has "'2,2'" "$tmp/err"
expect 2 "$K" plan --model gpt2-124m --global-batch 8 --format yaml;  oneline; has "'yaml'" "$tmp/err"
expect 2 "$K" plan --model gpt2-124m --global-batch 8 --mem-gb -3;    oneline; has "'-3'" "$tmp/err"
expect 2 "$K" plan --model gpt2-124m --global-batch 8 --cluster /nonexistent.json; oneline; has "/nonexistent.json" "$tmp/err"
echo '{"devices": 8, "mem_gb": "lots"}' >"$tmp/badcluster.json"
expect 2 "$K" plan --model gpt2-124m --global-batch 8 --cluster "$tmp/badcluster.json"; oneline; has "mem_gb" "$tmp/err"
echo '{"blocks": 2, "hidden": 60, "heads": 7, "vocab": 10, "seq_len": 8}' >"$tmp/badmodel.json"
expect 2 "$K" plan --model "$tmp/badmodel.json" --global-batch 8;     oneline; has "heads=7" "$tmp/err"
expect 2 "$K" plan --partition-only --model gpt2-124m;                oneline; has "--stages" "$tmp/err"
expect 2 "$K" plan --partition-only --model gpt2-124m --stages 15;    oneline; has "14 layers" "$tmp/err"
expect 2 "$K" plan --model gpt2-124m --global-batch 8 stray;          oneline; has "'stray'" "$tmp/err"
# equivalent layouts (only M/K differ, same step time) are one row with the
# M range; no two of the top 10 are the same layout at the same step time
# (more rounds of fewer micro-batches pay a round's fill more often)
expect 0 "$K" plan --model llama-7b --devices 8 --mem-gb 80 --global-batch 1024
has " 1-256 " "$tmp/out"
has "M a-b: one row for the layouts" "$tmp/out"
rows=$(awk '$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && NF > 10 {print $2, $3, $4, $5, $7, $9, $10, $12}' "$tmp/out")
[ "$(printf '%s\n' "$rows" | wc -l)" = 10 ] && [ "$(printf '%s\n' "$rows" | sort -u | wc -l)" = 10 ] \
  && ok || bad "top 10 rows are not 10 distinct layouts and step times: $rows"
expect 0 "$K" plan --model llama-7b --devices 8 --mem-gb 80 --global-batch 1024 --format json
python3 -c "
import json, sys
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
c = d['configs'][0]
assert c['m_range'] == [1, 256] and c['equivalent'] >= 8, c.get('m_range')
" "$tmp/out" && ok || bad "plan JSON lacks the collapsed M range"

# nothing fits: exit 1 with the reason
expect 1 "$K" plan --model llama-70b --devices 2 --global-batch 8;    oneline; has "no configuration fits" "$tmp/err"

echo "test_plan_cli.sh: $checks checks, $fails failed: $([ $fails = 0 ] && echo OK || echo FAIL)"
[ $fails = 0 ]
