#!/usr/bin/env bash
# What a user reads of a training run in the terminal and in JSON:
# `sim` and `compare --costs runs/NAME` take the run's own costs and memory
# (1F1B's period is the run's predicted period, its peak the run's 1F1B
# peak, every action where the run's prediction has it); the idle causes
# name the ops' own time `compute`, apart from the wall time `busy`; each
# rank's own waits for a core are given beside the pipeline's core_wait.
set -u
K="$1"
. "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || { echo "test_users_cli: SKIP: needs python3"; exit 77; }
run="$tmp/run"
expect 0 "$K" train --model gpt --layers 4 --stages 2 -m 4 -b 2 --steps 2 --no-live \
  --schedule 1f1b --run-dir "$run" --format json
cp "$tmp/out" "$tmp/train.json"

# the idle causes: compute (own time) and the causes sum to the step; busy is
# the rank's wall time only; core_wait_own per rank, within the step
python3 - "$tmp/train.json" <<'EOF' && ok || bad "train --format json's ranks: $(head -c 600 "$tmp/train.json")"
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["ranks"]:
    c = r["idle_causes"]
    assert "compute" in c and "busy" not in c, c
    parts = c["compute"] + sum(c[k] for k in ("schedule", "core_wait", "comm", "overhead", "optimizer"))
    assert abs(parts - c["seconds"]) <= 1e-6 * c["seconds"] + 1e-12, (parts, c)
    assert 0 < c["compute"] <= r["busy"] * (1 + 1e-9) + 1e-9, (c["compute"], r["busy"])
    w = r["core_wait_own"]
    assert w is not None and 0 <= w <= c["seconds"] * (1 + 1e-9), (w, c["seconds"])
EOF
expect 0 "$K" train --model gpt --layers 4 --stages 2 -m 4 -b 2 --steps 1 --no-live \
  --schedule 1f1b --run-dir "$tmp/run2"
has "rank    compute  schedule core_wait" "$tmp/out"
has "core_wait is the pipeline's" "$tmp/out"
has "each rank's own" "$tmp/out"
long=$(awk 'length > 100' "$tmp/out" | head -1)
[ -z "$long" ] && ok || bad "a summary line over 100 columns: $long"

# sim --costs RUN: the run's schedule, P, M and costs; its prediction, action by action
expect 0 "$K" sim --costs "$run" --format json
python3 - "$tmp/out" "$run" <<'EOF' && ok || bad "sim --costs RUN is not the run's prediction"
import json, sys
d = json.load(open(sys.argv[1]))
t = json.load(open(sys.argv[2] + "/timeline.json"))["predicted"]
rel = lambda a, b: abs(a - b) <= 1e-9 * abs(b) + 1e-15
assert d["schedule"] == "1f1b" and d["p"] == 2 and d["m"] == 4, (d["schedule"], d["p"], d["m"])
assert d["cost_basis"] == "stage", d["cost_basis"]
assert rel(d["period"], t["period"]) and rel(d["makespan"], t["makespan"]), (d["period"], t["period"])
key = lambda e: (e["rank"], e["stage"], e["mb"], e["op"])
want = {key(e): e for e in t["events"]}
assert len(d["events"]) == len(want), (len(d["events"]), len(want))
t0 = min(e["start"] for e in t["events"])
bad = [e for e in d["events"] if not rel(e["start"], want[key(e)]["start"] - t0)]
assert not bad, bad[:3]
EOF
expect 0 "$K" sim --costs "$run" -m 8 --format json
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d['m'] == 8, d['m']" "$tmp/out" \
  && ok || bad "sim --costs RUN -m 8 did not take -m"

# compare --costs RUN: 1F1B's row is the run's prediction; its peak the run's 1F1B peak
expect 0 "$K" compare --costs "$run" --schedules 1f1b,zb-h1 --format json
python3 - "$tmp/out" "$run" <<'EOF' && ok || bad "compare --costs RUN: $(head -c 400 "$tmp/out")"
import json, sys
d = json.load(open(sys.argv[1]))
seg = json.load(open(sys.argv[2] + "/config.json"))["segments"][-1]
t = json.load(open(sys.argv[2] + "/timeline.json"))["predicted"]
one = [r for r in d["rows"] if r["schedule"] == "1f1b"][0]
assert d["p"] == 2 and d["m"] == 4, (d["p"], d["m"])
assert abs(one["period"] - t["period"]) <= 1e-9 * t["period"], (one["period"], t["period"])
assert abs(one["peak_memory"] - seg["peak_1f1b_bytes"]) <= 1e-9 * seg["peak_1f1b_bytes"], \
    (one["peak_memory"], seg["peak_1f1b_bytes"])
EOF
expect 0 "$K" compare --costs "$run" --schedules 1f1b
has "mem-act=[0-9.e+]*,[0-9.e+]* mem-wgrad=" "$tmp/out"

# not a run, or a run before its end: one line naming the directory, exit 2
mkdir -p "$tmp/empty"
expect 2 "$K" compare --costs "$tmp/empty"
oneline; has "$tmp/empty" "$tmp/err"
cp -r "$run" "$tmp/young" && rm "$tmp/young/timeline.json"
expect 2 "$K" sim --costs "$tmp/young"
oneline; has "timeline.json" "$tmp/err"
# plan: memory reserved by default (2 GB, at most a tenth, + 5%), overridable;
# equal step times rank by peak memory
for case in "80 - 6e9" "24 - 3.2e9" "80 0 0" "80 3.5 3.5e9"; do
  set -- $case
  extra=(); [ "$2" = - ] || extra=(--mem-reserved-gb "$2")
  expect 0 "$K" plan --model llama-7b --devices 8 --mem-gb "$1" --global-batch 64 --top 0 \
    --format json "${extra[@]}"
  python3 - "$tmp/out" "$1" "$3" <<'EOF2' && ok || bad "plan --mem-gb $1 ${extra[*]}: reserved $(head -c 300 "$tmp/out")"
import json, sys
d = json.load(open(sys.argv[1]))
mem, want = float(sys.argv[2]) * 1e9, float(sys.argv[3])
assert abs(d["cluster"]["mem_reserved"] - want) <= 1e-6 * max(want, 1), d["cluster"]
assert all(c["peak_memory"] <= mem - want for c in d["configs"]), "a config over the budget"
cs = d["configs"]
for a, b in zip(cs, cs[1:]):
    if abs(a["step_time"] - b["step_time"]) <= 1e-9 * b["step_time"]:
        assert a["peak_memory"] <= b["peak_memory"] * (1 + 1e-9), (a, b)
EOF2
done
expect 0 "$K" plan --model llama-7b --devices 8 --global-batch 64
has "memory per device: 74 GB for the model, 6 GB reserved" "$tmp/out"
printf '{"mem_gb": 40, "mem_reserved_gb": 1}' >"$tmp/cluster.json"
expect 0 "$K" plan --model llama-7b --devices 8 --global-batch 64 --cluster "$tmp/cluster.json"
has "memory per device: 39 GB for the model, 1 GB reserved" "$tmp/out"
expect 2 "$K" plan --model llama-7b --devices 8 --global-batch 64 --mem-gb 4 --mem-reserved-gb 4
oneline

# plan: launch settings with the planned partition (Megatron-LM's layout,
# torchtitan's modules per stage, kaiten.torch's call); the CSV command runs
for pins in "-p 2 --schedule zb-auto" "-p 4 -v 2 --schedule interleaved"; do
  # shellcheck disable=SC2086
  expect 0 "$K" plan --model llama-7b --devices 8 --global-batch 64 $pins --format json
  python3 - "$tmp/out" "$tmp/csv.sh" <<'EOF2' && ok || bad "plan $pins: launch $(head -c 300 "$tmp/out")"
import json, re, sys
c = json.load(open(sys.argv[1]))["configs"][0]
L, part = c["launch"], c["partition"]
lay = re.search(r'--pipeline-model-parallel-layout "([^"]*)"', L["megatron"]).group(1).split("|")
def count(st):
    return sum(int(x[2:]) if x.startswith("t*") else 1 for x in re.findall(r"t\*\d+|t|E|L", st))
assert [count(x) for x in lay] == part, (lay, part)
assert lay[0].startswith("E") and lay[-1].endswith("L"), lay
assert ("--pipeline-model-parallel-size %d" % c["p"]) in L["megatron"]
assert ("--micro-batch-size %d" % c["b"]) in L["megatron"]
fq = json.loads(re.search(r"module_fqns_per_model_part = (.*)", L["torchtitan"]).group(1))
assert [len(x) - (x[-1] == "output") for x in fq] == part, (fq, part)
assert ("local_batch_size = %d" % (c["m"] * c["b"])) in L["torchtitan"]
assert ("stages cut " + c["partition_arg"]) in L["kaiten_torch"], L["kaiten_torch"]
assert ('n_microbatches=%d' % c["m"]) in L["kaiten_torch"]
cls = {"interleaved": "Interleaved1F1B"}.get(c["schedule"])
if cls:
    assert 'pipeline_parallel_schedule = "%s"' % cls in L["torchtitan"]
else:
    cmd = re.search(r"# \S+\.csv: kaiten (.*)", L["torchtitan"]).group(1)
    open(sys.argv[2], "w").write(cmd)
EOF2
done
read -r -a csv_cmd <"$tmp/csv.sh"
(cd "$tmp" && "$K" "${csv_cmd[@]}") && [ "$(wc -l <"$tmp/zb-auto.csv")" -ge 2 ] && ok \
  || bad "the launch settings' CSV command: ${csv_cmd[*]}"

# train and serve take the same address flags: --serve, --addr, --port
timeout -k 5 3 "$K" serve "$run" --addr 127.0.0.1 --port 0 >"$tmp/out" 2>"$tmp/err"
has "kaiten serve: http://127.0.0.1:[0-9]*/" "$tmp/out"
timeout -k 5 3 "$K" serve "$run" --serve 0 >"$tmp/out" 2>"$tmp/err"
has "kaiten serve: http://127.0.0.1:[0-9]*/" "$tmp/out"
expect 0 "$K" train --synthetic --stages 2 --steps 1 --no-live --port 0
has "live dashboard at http://127.0.0.1:[0-9]*/" "$tmp/err"
expect 0 "$K" train --synthetic --stages 2 --steps 1 --no-live --addr 127.0.0.1:0
has "live dashboard at http://127.0.0.1:[0-9]*/" "$tmp/err"
for bad_addr in "serve $run --serve 1 --addr 2" "serve $run --addr 127.0.0.1:5 --port 3" \
                "train --synthetic --port abc" "train --synthetic --serve 1 --addr 2"; do
  # shellcheck disable=SC2086
  expect 2 "$K" $bad_addr
  oneline
done
finish test_users_cli
