#!/usr/bin/env bash
# Predicted versus measured step time across emulated hosts
# (scripts/cluster-emu.sh: network namespaces, every host's link limited
# with tbf; OpenMPI over TCP). For 2 and 4 hosts at 1 Gbit/s and 100 Mbit/s:
# calibrate --transport mpi writes the cluster spec, then train --cluster
# predicts each layout's step (hops and all-reduce on the spec's links, op
# costs measured on the step as always) beside the measured median step.
# Layouts: (P=2,D=1) across hosts; (P=2,D=2) with P across (D inside) and D
# across (P inside) on 2 hosts x 2 slots, both across on 4 hosts; (P=4,D=1).
# The synthetic workload (ops sleep 2 ms, 256 KiB activations, 1 MiB of
# gradients per stage) keeps 4 ranks on 2 cores honest; the real GPT
# (P=2,D=1, b=8) is one more row per cluster. Median of 3 runs. On 2 hosts
# the planner (plan --cluster SPEC --nodes dp-inside,pp-inside, a model of
# the same synthetic ops) ranks the two (P=2,D=2) layouts; the row says
# whether its order is the measured one.
# Needs root. Usage: multihost.sh [--quick] [--tsv FILE] [BUILD_DIR].
set -euo pipefail
. "$(dirname "$0")/rows.sh"
K="$(cd "$B" && pwd)/kaiten"
EMU="$(dirname "$0")/../scripts/cluster-emu.sh"
[ "$(id -u)" = 0 ] || { echo "multihost.sh: needs root (network namespaces)" >&2; exit 77; }
runs=3
[ "$QUICK" = 1 ] && runs=1
tmp=$(mktemp -d)
dir=""
cleanup() { [ -n "$dir" ] && bash "$EMU" down --dir "$dir"; rm -rf "$tmp"; }
trap cleanup EXIT
syn=(--synthetic --tf 2 --tb 2 --tw 2 -m 8 --act-bytes 262144 --grad-bytes 1048576)
ratio() { python3 -c 'import json,sys; d=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); print(d["median_step_seconds"] / d["predicted_step_seconds"], 1e3*d["median_step_seconds"], 1e3*d["predicted_step_seconds"], d["makespan"] / d["predicted_makespan"])' "$1"; }
# case NAME NP MAP ARGS...: runs * train, prints and records the median ratio
case_() {
  local name=$1 np=$2 map=$3; shift 3
  : >"$tmp/r"; : >"$tmp/m"; : >"$tmp/p"; : >"$tmp/s"
  for _ in $(seq "$runs"); do
    timeout 300 bash "$EMU" run --dir "$dir" -- -np "$np" --map-by "$map" "$K" train --transport mpi \
      --steps 6 --val-every 0 --no-live --cluster "$tmp/spec.json" --format json "$@" >"$tmp/out" 2>"$tmp/err" </dev/null ||
      { cat "$tmp/err" >&2; return 1; }
    read -r r m p sp < <(ratio "$tmp/out")
    echo "$r" >>"$tmp/r"; echo "$m" >>"$tmp/m"; echo "$p" >>"$tmp/p"; echo "$sp" >>"$tmp/s"
  done
  read -r med lo hi < <(stats <"$tmp/r")
  read -r mm _ _ < <(stats <"$tmp/m")
  read -r pm _ _ < <(stats <"$tmp/p")
  read -r smed slo shi < <(stats <"$tmp/s")
  last_step=$mm
  printf '%-8s %-8s %-34s step: measured %8.2f ms  predicted %8.2f ms  ratio %.3f (%.3f-%.3f)  pipeline ratio %.3f (%.3f-%.3f)\n' \
    "$hosts" "$link" "$name" "$mm" "$pm" "$med" "$lo" "$hi" "$smed" "$slo" "$shi"
  row "multihost.$hosts.$link.$(echo "$name" | tr -c 'a-zA-Z0-9=\n' _)" \
    "$hosts hosts, $link: $name, measured step / predicted (calibrated spec)" ratio "$med" "$lo" "$hi" \
    "target within 5%" 1
  row "multihost.$hosts.$link.$(echo "$name" | tr -c 'a-zA-Z0-9=\n' _).pipeline" \
    "$hosts hosts, $link: $name, measured makespan / predicted (the pipeline alone)" ratio "$smed" "$slo" "$shi" \
    "target within 5%" 1
}
# The planner's order of the two (P=2,D=2) layouts on this cluster's spec
# against the measured one: the model is the synthetic workload (2 layers,
# F = 2 ms per sample at the calibrated FLOP/s, I = W = F, 256 KiB out, 1 MiB
# of gradients at the planner's 2 bytes per parameter).
plan_rank() {
  python3 - "$tmp/spec.json" "$tmp/model.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
f = 2e-3 * s["achieved_tflops"] * 1e12
json.dump({"name": "synthetic", "layers": [{"name": "op", "repeat": 2, "params": 524288, "flops": f,
           "act_bytes": 1024, "out_bytes": 262144}]}, open(sys.argv[2], "w"))
PY
  "$K" plan --model "$tmp/model.json" --cluster "$tmp/spec.json" -B 16 -p 2 -d 2 -m 8 -b 1 \
    --schedule 1f1b --recompute none --nodes dp-inside,pp-inside --format json >"$tmp/plan.json"
  read -r first dp pp < <(python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))["configs"]
t = {x["nodes"]: x["step_time"] for x in c}
print(c[0]["nodes"], 1e3 * t["dp-inside"], 1e3 * t["pp-inside"])' "$tmp/plan.json")
  measured=$(awk -v a="$dp_inside" -v b="$pp_inside" 'BEGIN {print (a <= b) ? "dp-inside" : "pp-inside"}')
  printf '%-8s %-8s plan --nodes: dp-inside %.1f ms, pp-inside %.1f ms: %s first; measured %.1f / %.1f ms: %s first: %s\n' \
    "$hosts" "$link" "$dp" "$pp" "$first" "$dp_inside" "$pp_inside" "$measured" \
    "$([ "$first" = "$measured" ] && echo match || echo MISMATCH)"
  row "multihost.$hosts.$link.plan_nodes" "$hosts hosts, $link: planner's first (P=2,D=2) layout is the measured faster one (1 = yes)" \
    match "$([ "$first" = "$measured" ] && echo 1 || echo 0)" - - "measured order" 1
}
for hosts in 2 4; do
  for link in 1gbit 100mbit; do
    slots=$((hosts == 2 ? 2 : 1))
    dir=$(bash "$EMU" up --hosts "$hosts" --link "$link" --slots "$slots")
    bash "$EMU" run --dir "$dir" -- -np $((hosts * slots)) "$K" calibrate --transport mpi \
      -o "$tmp/spec.json" 2>"$tmp/cal" >/dev/null </dev/null || { cat "$tmp/cal" >&2; exit 1; }
    grep machines "$tmp/cal"
    case_ "(P=2,D=1) P across" 2 node "${syn[@]}" --stages 2
    if [ "$hosts" = 2 ]; then
      case_ "(P=2,D=2) P across, D inside" 4 slot "${syn[@]}" --stages 2 -d 2
      dp_inside=$last_step
      case_ "(P=2,D=2) D across, P inside" 4 node "${syn[@]}" --stages 2 -d 2
      pp_inside=$last_step
      plan_rank
    else
      case_ "(P=2,D=2) P and D across" 4 slot "${syn[@]}" --stages 2 -d 2
    fi
    case_ "(P=4,D=1)" 4 slot "${syn[@]}" --stages 4
    case_ "(P=2,D=1) P across, real GPT b=8" 2 node --stages 2 -b 8
    bash "$EMU" down --dir "$dir"
    dir=""
  done
done
