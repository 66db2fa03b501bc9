#!/usr/bin/env bash
# A training run never loses what it has: Ctrl-C / SIGTERM stop after the
# step, checkpoint and print the resume command, and the resumed run's
# losses continue bit-identically (threads and MPI); the same signal twice
# in a row is one request; one writer per run directory; an old run is not
# silently wiped; resume keeps the run's layout unless flags change it (and
# says so); a synthetic run writes its run directory.
set -u
K=$(realpath "$1")
. "$(dirname "$0")/lib.sh"
cd "$tmp" || exit 1
small=(--layers 2 --hidden 32 --heads 2 --seq-len 32 -m 4 -b 2 --val-every 0 --no-live)

# losses of metrics.jsonl, one per line, exactly as written
losses() { grep -o '"loss":[^,]*' "$1/metrics.jsonl"; }
# waits until DIR/metrics.jsonl has at least N lines (or 30 s)
wait_steps() { for _ in $(seq 600); do
    [ -f "$1/metrics.jsonl" ] && [ "$(wc -l <"$1/metrics.jsonl")" -ge "$2" ] && return 0; sleep 0.05; done; return 1; }

# --- the uninterrupted reference ------------------------------------------------------
# Long enough that a signal sent once 3 steps are logged lands well before the
# end: a step of this model takes about 1.5 ms, and at 60 steps a signal that
# came 80 ms late found the run already finished.
N=1000
expect 0 "$K" train "${small[@]}" --stages 2 --schedule zb-h1 --steps $N --run-dir ref
losses ref >ref.losses
[ "$(wc -l <ref.losses)" = $N ] && ok || bad "reference has $(wc -l <ref.losses) losses"

# --- SIGINT after step k, then resume: the same losses, bit for bit ------------------------
interrupt() { # SIGNAL DIR EXPECTED_RC
  "$K" train "${small[@]}" --stages 2 --schedule zb-h1 --steps $N --run-dir "$2" >"$2.out" 2>"$2.err" &
  local pid=$!
  wait_steps "$2" 3 || bad "$2: no steps appeared"
  kill -"$1" $pid; wait $pid; local rc=$?
  [ $rc = "$3" ] && ok || bad "$1: exit $rc (want $3): $(cat "$2.err")"
  has "stopped by SIG$1 after step" "$2.err"
  has "resume with: .*train --resume $2 --steps $N" "$2.err"
  local done; done=$(wc -l <"$2/metrics.jsonl")
  has "$(printf 'step_%08d.ckpt' "$done")" "$2/checkpoints/latest"
  [ "$done" -lt $N ] && ok || bad "$1 came too late to test (step $done)"
  expect 0 "$K" train "${small[@]}" --resume "$2" --steps $N
  has "with its layout" "$tmp/out"
  losses "$2" >"$2.losses"
  cmp -s ref.losses "$2.losses" && ok || bad "$1: resumed losses differ: $(diff ref.losses "$2.losses" | head -4)"
}
interrupt INT int 130
interrupt TERM term 143

# --- the same signal twice in a row is one request: a checkpoint, one message ----------------
# (when a repeat stops at once instead: test_stop_signals.sh)
"$K" train "${small[@]}" --stages 2 --steps 100000 --run-dir twice --checkpoint-every 5 >twice.out 2>twice.err &
pid=$!
wait_steps twice 6 || bad "twice: no steps"
kill -INT $pid; kill -INT $pid; wait $pid; rc=$?
[ $rc = 130 ] && ok || bad "SIGINT twice: exit $rc: $(cat twice.err)"
[ "$(grep -c 'stopped by SIGINT' twice.err)" = 1 ] && ok || bad "stop message not once: $(cat twice.err)"
python3 -c 'import json,sys; json.load(open("twice/config.json"))' && ok || bad "config.json damaged"
has "$(printf 'step_%08d.ckpt' "$(wc -l <twice/metrics.jsonl)")" twice/checkpoints/latest
expect 0 "$K" train "${small[@]}" --resume twice --steps "$(( $(sed 's/step_0*\([0-9]*\).ckpt/\1/' twice/checkpoints/latest) + 1 ))"

# --- without --run-dir: said plainly -------------------------------------------------------------
"$K" train "${small[@]}" --stages 2 --steps 100000 >nodir.out 2>nodir.err &
pid=$!
sleep 1.5; kill -INT $pid; wait $pid; rc=$?
[ $rc = 130 ] && ok || bad "no run dir: exit $rc"
has "no --run-dir, so nothing was saved" nodir.err

# --- one writer per run directory -----------------------------------------------------------------
"$K" train "${small[@]}" --stages 2 --steps 100000 --run-dir busy >busy.out 2>&1 &
pid=$!
wait_steps busy 1 || bad "busy: no steps"
expect 2 "$K" train "${small[@]}" --steps 3 --resume busy
oneline; has "in use by another kaiten train (PID $pid)" "$tmp/err"
expect 2 "$K" train "${small[@]}" --steps 3 --run-dir busy --force
has "PID $pid" "$tmp/err"
kill -TERM $pid; wait $pid

# --- an old run is not wiped: refused, --force clears kaiten's files only ---------------------------
expect 2 "$K" train "${small[@]}" --steps 2 --run-dir ref
oneline; has "is not empty: --resume ref continues that run, --force clears it" "$tmp/err"
[ "$(wc -l <ref/metrics.jsonl)" = $N ] && ok || bad "the refused run touched metrics.jsonl"
echo keep >ref/notes.txt
expect 0 "$K" train "${small[@]}" --steps 2 --run-dir ref --force
has "kept 1 other entry" "$tmp/err"
[ "$(wc -l <ref/metrics.jsonl)" = 2 ] && ok || bad "--force did not start metrics over"
[ -f ref/notes.txt ] && ok || bad "--force removed a file that is not kaiten's"
[ "$(ls ref/checkpoints)" = "$(printf 'latest\nstep_00000002.ckpt')" ] && ok || bad "old checkpoints left: $(ls ref/checkpoints)"

# --- resume keeps the layout; new flags change it and say so ------------------------------------------
expect 0 "$K" train "${small[@]}" --stages 2 --schedule zb-h1 -m 4 --steps 3 --run-dir lay
expect 0 "$K" train "${small[@]}" --resume lay --steps 5
has "zb-h1 P=2 V=1 M=4" "$tmp/out"
has "with its layout" "$tmp/out"
expect 0 "$K" train "${small[@]}" --resume lay --steps 7 --stages 1 --schedule 1f1b
has "with a new layout: schedule zb-h1 -> 1f1b, P 2 -> 1" "$tmp/out"
python3 - lay/config.json <<'EOF' && ok || bad "segments: $(grep -A4 segments lay/config.json)"
import json, sys
c = json.load(open(sys.argv[1]))
s = c["segments"]
assert [(x["first_step"], x["last_step"], x["schedule"], x["p"]) for x in s] == \
    [(0, 5, "zb-h1", 2), (5, 7, "1f1b", 1)], s
assert all(0 <= x["predicted_bubble"] < 1 for x in s), s
assert c["layout"]["schedule"] == "1f1b" and c["layout"]["p"] == 1
EOF
expect 0 "$K" report lay -o lay.html
has "zb-h1" lay.html
has "steps 6–7" lay.html

# --- past the decay: one line says the lr stays at its floor ---------------------------------------------
expect 0 "$K" train "${small[@]}" --resume lay --steps 9
has "runs past the learning-rate decay (3 steps): steps 4-9 stay at the floor lr" "$tmp/out"

# --- bad resumes ----------------------------------------------------------------------------------------
expect 2 "$K" train "${small[@]}" --resume missing --steps 5
oneline; has "missing: the run directory does not exist" "$tmp/err"
mkdir cfgonly && cp lay/config.json cfgonly/
expect 2 "$K" train "${small[@]}" --resume cfgonly --steps 5
oneline; has "has a config.json but no checkpoint" "$tmp/err"

# --- a synthetic run writes its run directory --------------------------------------------------------
expect 0 "$K" train --synthetic --stages 2 -m 4 --tf 0.2 --tb 0.2 --tw 0.2 --steps 3 --run-dir syn --no-live
for f in config.json metrics.jsonl timeline.json trace.json; do [ -s syn/$f ] && ok || bad "synthetic run wrote no $f"; done
has "no parameters to checkpoint" "$tmp/out"
expect 2 "$K" train --synthetic --resume syn --steps 5
oneline; has "a synthetic run has no parameters" "$tmp/err"

# --- under mpirun without --transport mpi: refused ----------------------------------------------------
expect 2 env OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 "$K" train "${small[@]}" --steps 2
oneline; has "without --transport mpi" "$tmp/err"

# --- under MPI: a signal to one rank, or to mpirun, stops every rank alike ---------------
MPIEXEC=${KT_MPIEXEC:-}
if [ -n "$MPIEXEC" ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  mpi=(timeout 120 "$MPIEXEC" -np 2 --oversubscribe "$K" train "${small[@]}" --stages 2 --transport mpi)
  N=400 # about 5 ms a step: the signal below has about 2 s to land (at 40 it had 0.2 s)
  "${mpi[@]}" --steps $N --run-dir mref >mref.out 2>&1 || bad "MPI reference run failed: $(tail -2 mref.out)"
  losses mref >mref.losses
  # SIGINT to rank 1 only
  "${mpi[@]}" --steps $N --run-dir mint >mint.out 2>mint.err &
  job=$!
  wait_steps mint 3 || bad "mint: no steps"
  rank1=$(pgrep -f "^$K train .*--run-dir mint" | sort -n | sed -n 2p)
  kill -INT "$rank1"; wait $job
  has "stopped by SIGINT after step" mint.err
  has "resume with: mpirun -np 2 .*--transport mpi --resume mint --steps $N" mint.err
  done_steps=$(wc -l <mint/metrics.jsonl)
  has "$(printf 'step_%08d.ckpt' "$done_steps")" mint/checkpoints/latest
  [ "$done_steps" -lt $N ] && ok || bad "SIGINT to rank 1 came too late to test (step $done_steps)"
  "${mpi[@]}" --steps $N --resume mint >mres.out 2>&1 || bad "MPI resume failed: $(tail -2 mres.out)"
  losses mint >mint.losses
  cmp -s mref.losses mint.losses && ok || bad "MPI: resumed losses differ: $(diff mref.losses mint.losses | head -4)"
  # SIGUSR1 to mpirun: forwarded to every rank, each stops after the step
  timeout 120 "$MPIEXEC" -np 2 --oversubscribe "$K" train "${small[@]}" --stages 2 --transport mpi \
    --steps 100000 --run-dir musr >musr.out 2>musr.err &
  job=$!
  wait_steps musr 3 || bad "musr: no steps"
  kill -USR1 "$(pgrep -f "^$MPIEXEC .*--run-dir musr")"; wait $job
  has "stopped by SIGUSR1 after step" musr.err
  [ -s musr/checkpoints/latest ] && ok || bad "no checkpoint after SIGUSR1 to mpirun"
  # SIGTERM to mpirun: the ranks get SIGTERM before mpirun's kill timeout and save
  # (30 s: under a parallel test run a step and the save can take seconds; mpirun reads
  # none of the ranks' output meanwhile, see test_stop_signals.sh)
  timeout 120 "$MPIEXEC" --mca odls_base_sigkill_timeout 30 -np 2 --oversubscribe "$K" train \
    "${small[@]}" --stages 2 --transport mpi --steps 100000 --run-dir mterm >mterm.out 2>&1 &
  job=$!
  wait_steps mterm 3 || bad "mterm: no steps"
  kill -TERM "$(pgrep -f "^$MPIEXEC .*--run-dir mterm")"; wait $job
  [ -s mterm/checkpoints/latest ] && ok || bad "no checkpoint after SIGTERM to mpirun"
else
  echo "test_train_safety: the MPI part is skipped (built without MPI)"
fi

cd / && finish test_train_safety
