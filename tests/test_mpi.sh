#!/usr/bin/env bash
# MPI transport from the outside: equal losses to threads and to the
# unpipelined model, faults end the job, checkpoints cross transports.
set -u
K="$1"
. "$(dirname "$0")/lib.sh"
MPIEXEC=${KT_MPIEXEC:-}
if [ -z "$MPIEXEC" ]; then echo "test_mpi: SKIP: built without MPI"; exit 77; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
mpi() { local n=$1; shift; timeout 120 "$MPIEXEC" -np "$n" --oversubscribe "$K" "$@"; }
# Why a run failed: kaiten's own lines from its stderr (mpirun's banners say
# only that a process exited), else the last lines.
why() { grep -m 4 -E '^kaiten|rank [0-9]|signal|Killed|Segmentation|Abort' "$1" | tr '\n' ' ' | grep . || tail -2 "$1"; }
# A run whose result is compared: a launch that fails is reported and run
# once more (mpirun under a loaded CI machine failed once in many runs, with
# no line from kaiten; the comparison that follows stays strict).
mpi_run() {
  local n=$1 out=$2 err=$3; shift 3
  mpi "$n" "$@" >"$out" 2>"$err" && return 0
  echo "test_mpi: mpirun -np $n failed once ($(why "$err")); running it again"
  mpi "$n" "$@" >"$out" 2>"$err"
}
losses() { tail -n 1 "$1" | python3 -c 'import json,sys; print(" ".join(repr(x) for x in json.load(sys.stdin)["losses"]))'; }
same() { python3 - "$1" "$2" "$3" <<'PY'
import sys
a = [float(x) for x in open(sys.argv[1]).read().split()]
b = [float(x) for x in open(sys.argv[2]).read().split()]
assert len(a) == len(b) and len(a) > 0, (a, b)
for x, y in zip(a, b):
    assert abs(x - y) <= 1e-5 * abs(y), (sys.argv[3], x, y)
PY
}
COMMON="--model mlp --layers 8 --hidden 32 -m 4 -b 2 --steps 4 --lr 3e-3 --val-every 0 --format json"

# unpipelined reference for one replica (M*b = 8 samples) and for two (16)
"$K" train $COMMON --stages 1 -m 1 -b 8 >"$tmp/ref1.json" 2>/dev/null && losses "$tmp/ref1.json" >"$tmp/ref1" || bad "reference D=1"
"$K" train $COMMON --stages 1 -m 1 -b 16 >"$tmp/ref2.json" 2>/dev/null && losses "$tmp/ref2.json" >"$tmp/ref2" || bad "reference D=2"
for layout in "2 1" "2 2" "4 1"; do
  set -- $layout; P=$1; D=$2
  for s in 1f1b interleaved zb-h1; do
    name="P=$P D=$D $s"
    if mpi_run $((P * D)) "$tmp/mpi.json" "$tmp/mpi.err" train $COMMON --transport mpi --stages $P --data-parallel $D --schedule $s; then
      losses "$tmp/mpi.json" >"$tmp/mpi"; ok
    else bad "$name: mpirun failed: $(why "$tmp/mpi.err")"; continue; fi
    "$K" train $COMMON --stages $P --data-parallel $D --schedule $s >"$tmp/thr.json" 2>/dev/null && losses "$tmp/thr.json" >"$tmp/thr"
    same "$tmp/mpi" "$tmp/thr" "$name mpi vs threads" && ok || bad "$name: mpi vs threads"
    same "$tmp/mpi" "$tmp/ref$D" "$name mpi vs unpipelined" && ok || bad "$name: mpi vs unpipelined"
  done
done

# the GPT too: MPI equals threads and the unpipelined model
GPT="--model gpt --layers 2 --hidden 32 --heads 2 --seq-len 16 -m 4 -b 2 --steps 3 --val-every 0 --format json"
"$K" train $GPT --stages 1 -m 1 -b 8 >"$tmp/g1.json" 2>/dev/null && losses "$tmp/g1.json" >"$tmp/g1" || bad "gpt reference D=1"
"$K" train $GPT --stages 1 -m 1 -b 16 >"$tmp/g2.json" 2>/dev/null && losses "$tmp/g2.json" >"$tmp/g2" || bad "gpt reference D=2"
for layout in "2 2 1f1b" "4 1 zb-h1" "2 1 interleaved"; do
  set -- $layout; P=$1; D=$2; s=$3
  if mpi_run $((P * D)) "$tmp/gm.json" "$tmp/gm.err" train $GPT --transport mpi --stages $P --data-parallel $D --schedule $s; then
    losses "$tmp/gm.json" >"$tmp/gm"
    "$K" train $GPT --stages $P --data-parallel $D --schedule $s >"$tmp/gt.json" 2>/dev/null && losses "$tmp/gt.json" >"$tmp/gt"
    same "$tmp/gm" "$tmp/gt" "gpt $layout" && ok || bad "gpt $layout: mpi vs threads"
    same "$tmp/gm" "$tmp/g$D" "gpt $layout" && ok || bad "gpt $layout: mpi vs unpipelined"
  else bad "gpt $layout: mpirun failed: $(why "$tmp/gm.err")"; fi
done

# documents of varying length packed into micro-batches (block-diagonal
# attention; with --seq-chunks each in chunks along the sequence): MPI
# equals threads bit for bit, and the unpipelined model on the same packed
# micro-batches
for case in "fifo 2 1 1f1b" "fifo 2 2 zb-h1" "balanced 2 1 1f1b" "balanced 2 2 zb-h1" \
            "balanced 2 2 1f1b --seq-chunks 2"; do
  set -- $case; packing=$1; P=$2; D=$3; s=$4; shift 4
  DOCS="$GPT --doc-lengths lognormal:1:4:40 --packing $packing $*"
  if mpi_run $((P * D)) "$tmp/dm.json" "$tmp/dm.err" train $DOCS --transport mpi --stages $P --data-parallel $D --schedule $s; then
    losses "$tmp/dm.json" >"$tmp/dm"
    "$K" train $DOCS --stages $P --data-parallel $D --schedule $s >"$tmp/dt.json" 2>/dev/null && losses "$tmp/dt.json" >"$tmp/dt"
    "$K" train $DOCS --stages 1 --data-parallel $D >"$tmp/d1.json" 2>/dev/null && losses "$tmp/d1.json" >"$tmp/d1"
    cmp -s "$tmp/dm" "$tmp/dt" && [ -s "$tmp/dm" ] && ok || bad "docs $case: mpi vs threads: $(cat "$tmp/dm") / $(cat "$tmp/dt")"
    same "$tmp/dm" "$tmp/d1" "docs $case" && ok || bad "docs $case: mpi vs unpipelined"
  else bad "docs $case: mpirun failed: $(why "$tmp/dm.err")"; fi
done

# the gradients' ring all-reduce over 3 and 4 replicas (chunks of unequal
# length, several steps around the ring) equals the unpipelined model
for D in 3 4; do
  "$K" train $COMMON --stages 1 -m 1 -b $((8 * D)) >"$tmp/rr.json" 2>/dev/null && losses "$tmp/rr.json" >"$tmp/rr" || bad "reference D=$D"
  if mpi_run "$D" "$tmp/rm.json" "$tmp/rm.err" train $COMMON --transport mpi --stages 1 --data-parallel "$D"; then
    losses "$tmp/rm.json" >"$tmp/rm"
    same "$tmp/rm" "$tmp/rr" "ring D=$D" && ok || bad "D=$D on MPI differs from the unpipelined model"
  else bad "D=$D on MPI failed: $(why "$tmp/rm.err")"; fi
done

# PyTorch's schedule files run on MPI too: the legacy ZB1P file (2 ranks, 4
# stages, M=8) and DualPipeV (4 ranks, V placement, M=10) equal the unpipelined model
D_="${KT_TEST_DATA:-tests/data}"
for fm in "zb1p_2rank_2stagep_compute_legacy.csv:2:8" "dualpipev_4rank_10mb.csv:4:10"; do
  IFS=: read -r f n m <<<"$fm"
  FILEARGS="--model mlp --layers 8 --hidden 32 --steps 4 --lr 3e-3 --val-every 0 --format json"
  if mpi_run "$n" "$tmp/pf.json" "$tmp/pf.err" train $FILEARGS -b 2 --transport mpi --schedule-file "$D_/$f"; then
    losses "$tmp/pf.json" >"$tmp/pf"
    "$K" train $FILEARGS --stages 1 -m 1 -b $((2 * m)) >"$tmp/pr.json" 2>/dev/null && losses "$tmp/pr.json" >"$tmp/pr"
    same "$tmp/pf" "$tmp/pr" "$f on mpi" && ok || bad "$f on MPI differs from the unpipelined model"
  else bad "$f on MPI failed: $(why "$tmp/pf.err")"; fi
done

# a hostfile works the same (here every slot is on this machine)
printf 'localhost slots=4\n' >"$tmp/hosts"
if timeout 120 "$MPIEXEC" -np 4 --hostfile "$tmp/hosts" --map-by slot "$K" train $COMMON --transport mpi --stages 4 >"$tmp/host.json" 2>"$tmp/host.err"; then
  losses "$tmp/host.json" >"$tmp/host"
  "$K" train $COMMON --stages 4 >"$tmp/thr.json" 2>/dev/null && losses "$tmp/thr.json" >"$tmp/thr"
  same "$tmp/host" "$tmp/thr" "hostfile" && ok || bad "hostfile run differs from threads"
else bad "hostfile run failed: $(why "$tmp/host.err")"; fi

# a rank that dies mid-step ends the job non-zero within 15 s
start=$(date +%s)
mpi 4 train --model mlp --layers 8 --hidden 256 --stages 4 -m 8 -b 8 --steps 100000 --transport mpi --val-every 0 >"$tmp/kill.out" 2>&1 &
job=$!
sleep 3
victim=$(pgrep -f "kaiten train --model mlp --layers 8 --hidden 256" | sort -n | sed -n 3p)
[ -n "$victim" ] && kill -9 "$victim"
wait $job; rc=$?
took=$(( $(date +%s) - start - 3 ))
if [ $rc != 0 ] && [ $took -le 15 ]; then ok; else bad "killed rank: exit $rc after ${took}s"; fi

# the watchdog works across processes and names the waiting rank and stage
KAITEN_TEST_HANG=1,2 mpi 4 train --model mlp --stages 4 -m 8 --steps 2 --transport mpi --timeout 2 --val-every 0 >"$tmp/hang.out" 2>&1
rc=$?
if [ $rc != 0 ] && grep -q "watchdog: rank [02] (stage [02]) waited 2 s" "$tmp/hang.out" && grep -q "from rank 1 (stage 1)" "$tmp/hang.out"; then ok
else bad "watchdog across processes: exit $rc: $(grep -m2 kaiten "$tmp/hang.out")"; fi

# a checkpoint written under MPI (P=2, D=2) resumes under threads (P=4)
RUN="$tmp/run"
mpi 4 train --model mlp --layers 8 --hidden 32 -m 4 -b 2 --lr 3e-3 --val-every 0 --transport mpi --stages 2 --data-parallel 2 --steps 3 --run-dir "$RUN" --format json >/dev/null 2>"$tmp/ck.err" && ok || bad "mpi checkpoint run: $(why "$tmp/ck.err")"
"$K" train --resume "$RUN" --steps 6 --stages 4 --data-parallel 2 -m 4 -b 2 --lr 3e-3 --val-every 0 --format json >"$tmp/res.json" 2>"$tmp/res.err" && losses "$tmp/res.json" >"$tmp/res" || bad "resume under threads: $(why "$tmp/res.err")"
"$K" train --model mlp --layers 8 --hidden 32 -m 4 -b 2 --lr 3e-3 --val-every 0 --stages 2 --data-parallel 2 --steps 6 --decay-steps 3 --format json >"$tmp/full.json" 2>/dev/null
losses "$tmp/full.json" | cut -d' ' -f4- >"$tmp/full"
same "$tmp/res" "$tmp/full" "resume" && ok || bad "resumed losses differ from an uninterrupted run"

echo "test_mpi.sh: $checks checks, $fails failed: $([ $fails = 0 ] && echo OK || echo FAIL)"
[ $fails = 0 ]
