#!/usr/bin/env bash
# Across emulated hosts (scripts/cluster-emu.sh: network namespaces, a
# 100 Mbit/s link each, OpenMPI over TCP): the same losses as the threads
# run, the step time the links model predicts from a calibrated spec, and a
# lost host ends the job on the others quickly, naming the lost rank, with a
# checkpoint that resumes. Needs root, iproute2 and MPI; skips otherwise.
set -u
K="$1"
. "$(dirname "$0")/lib.sh"
emu_cluster_up test_multihost
emu() { timeout 60 bash "$EMU" run --dir "$dir" -- "$@"; }
# same_losses A B: two runs' 3 losses (JSON lists in files A and B) agree to 1e-5
same_losses() { [ -s "$2" ] && python3 - "$1" "$2" <<'PY'
import ast, sys
a, b = (ast.literal_eval(open(p).read()) for p in sys.argv[1:])
assert len(a) == len(b) == 3, (a, b)
assert all(abs(x - y) <= 1e-5 * abs(x) for x, y in zip(a, b)), (a, b)
PY
}
field() { python3 -c 'import json,sys; d=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); print(d[sys.argv[2]])' "$@"; }

# 1. P=2 across the two hosts: the losses of the threads run
args=(train --stages 2 --steps 3 --seed 3 --format json --no-live)
expect 0 "$K" "${args[@]}"
field "$tmp/out" losses >"$tmp/threads"
expect 0 emu -np 2 "$K" "${args[@]}" --transport mpi
field "$tmp/out" losses >"$tmp/mpi"
if same_losses "$tmp/threads" "$tmp/mpi"; then ok
else bad "losses across hosts differ from threads: $(cat "$tmp/threads") vs $(cat "$tmp/mpi")"; fi

# the gradients' all-reduce over 4 replicas, two on each host: hierarchical
# (each host's leader sums, a ring between the leaders): the unpipelined losses
mlp=(train --model mlp --layers 8 --hidden 32 -m 4 -b 2 --steps 3 --lr 3e-3 --val-every 0 --format json)
expect 0 "$K" "${mlp[@]}" --stages 1 -m 1 -b 32
field "$tmp/out" losses >"$tmp/ref4"
expect 0 emu -np 4 --oversubscribe --map-by node "$K" "${mlp[@]}" --transport mpi --stages 1 -d 4
field "$tmp/out" losses >"$tmp/d4"
if same_losses "$tmp/ref4" "$tmp/d4"; then ok; else bad "D=4 on two hosts differs from the unpipelined model: $(cat "$tmp/ref4") vs $(cat "$tmp/d4")"; fi

# 2. calibrate measures the link between the hosts; train predicts the step
# on it. The link is the bottleneck here (a 256 KiB activation takes ~22 ms
# at 100 Mbit/s against 4 ms of compute), so a model without it is far off.
expect 0 emu -np 2 "$K" calibrate --transport mpi --layers 2 -o "$tmp/spec.json"
has "2 ranks on 2 machines" "$tmp/err"
bw=$(field "$tmp/spec.json" inter_bw_gbs 2>/dev/null || echo 0)
if python3 -c "import sys; sys.exit(not 0.0105 < $bw < 0.0125)"; then ok; else bad "inter-node bandwidth $bw GB/s, want 100 Mbit/s less TCP framing"; fi
# predicted_run: one run on the links; sets ratio (median step) and span (the
# last step's pipeline), each measured over predicted
predicted_run() {
  expect 0 emu -np 2 "$K" train --synthetic --stages 2 -m 4 --tf 2 --tb 2 --tw 0 --act-bytes 262144 \
    --steps 4 --val-every 0 --transport mpi --cluster "$tmp/spec.json" --format json --no-live
  read -r ratio span < <(python3 -c 'import json,sys; d=json.loads(open(sys.argv[1]).read().strip().splitlines()[-1]); print(d["median_step_seconds"] / d["predicted_step_seconds"], d["makespan"] / d["predicted_makespan"])' "$tmp/out" 2>/dev/null || echo 0 0)
}
within() { python3 -c "import sys; sys.exit(not $2 < $1 < $3)"; }
predicted_run
# the pipeline on the links tightly; the whole step (its end adds the sums'
# round trips, which this shared machine delays most) more loosely. Not
# under a sanitizer (KT_SANITIZED): instrumented code is no timing reference.
# A timing check on a shared machine: up to two more runs when one misses
# (in one CI run the last step read 1.096; ten runs in a row read 0.96-0.99).
if [ "${KT_SANITIZED:-0}" = 1 ]; then
  echo "test_multihost: timing checks skipped under a sanitizer (measured/predicted $span, step $ratio)"
else
  for _ in 1 2; do
    within "$span" 0.92 1.08 && within "$ratio" 0.8 1.25 && break
    echo "test_multihost: measured/predicted makespan $span, step $ratio: once more"
    predicted_run
  done
  if within "$span" 0.92 1.08; then ok; else bad "measured/predicted makespan $span, want 1 +- 8%"; fi
  if within "$ratio" 0.8 1.25; then ok; else bad "measured/predicted step $ratio, want 0.8..1.25"; fi
fi

# 3. a lost host mid-run (every process of host 2 killed, then its link
# cut): the job ends within 15 s, non-zero, naming the rank and stage it
# lost; the checkpoint resumes
ns2=$(sed -n 2p "$dir/hosts" | cut -d' ' -f2)
lose_host() { # NAME ACTION: a run on both hosts, then ACTION on host 2
  local run="$tmp/run-$1"
  ( emu -np 2 "$K" train --transport mpi --stages 2 --steps 500 --val-every 0 --run-dir "$run" \
      --checkpoint-every 2 --timeout 30 --no-live >"$tmp/$1.out" 2>"$tmp/$1.err"; echo $? >"$tmp/$1.rc" ) &
  for _ in $(seq 100); do [ -e "$run/checkpoints/latest" ] && break; sleep 0.1; done
  sleep 0.5
  local t0 t1
  t0=$(date +%s.%N)
  eval "$2"
  wait
  t1=$(date +%s.%N)
  [ "$(cat "$tmp/$1.rc")" != 0 ] && ok || bad "$1: the job exited 0"
  python3 -c "import sys; sys.exit(not $t1 - $t0 < 15)" && ok || bad "$1: the job took $(python3 -c "print($t1 - $t0)") s to end"
  if grep -q "kaiten: rank 0 (stage 0): .*lost rank 1 (stage 1)" "$tmp/$1.err"; then ok
  elif [ "$1" = link ] && grep -q "lost communication with a remote daemon" "$tmp/$1.err"; then
    # a cut link also cuts mpirun's own connection to that host's daemon:
    # OpenMPI may end the job before a rank is waiting in a receive to name
    echo "test_multihost: link: ended by mpirun (lost daemon) before a rank named the peer"; ok
  else
    bad "$1: no line naming the lost rank: $(grep -v '^step' "$tmp/$1.err" | head -5)"
  fi
}
lose_host kill 'ip netns pids "$ns2" | xargs -r kill -9'
last=$(sed 's/[^0-9]//g; s/^0*//' "$tmp/run-kill/checkpoints/latest" 2>/dev/null)
expect 0 "$K" train --resume "$tmp/run-kill" --steps "$((${last:-0} + 1))" --no-live --format json
has '"losses"' "$tmp/out"
lose_host link 'ip netns exec "$ns2" ip link set eth0 down'
finish test_multihost
