#!/usr/bin/env bash
# Fault injection: a kill -9 during a checkpoint write, a full disk during a
# checkpoint write, and a non-finite loss. Nothing written is ever lost or
# left half-written.
set -u
K="$1"
. "$(dirname "$0")/lib.sh"
small=(--layers 2 --hidden 32 --heads 2 --seq-len 32 -m 4 -b 2 --stages 2 --no-live --val-every 0)

# --- kill -9 half-way through writing the second checkpoint -------------------
run="$tmp/killed"
KAITEN_TEST_WRITE_PAUSE=1 "$K" train "${small[@]}" --steps 4 --checkpoint-every 1 --run-dir "$run" \
  >"$tmp/kill.out" 2>&1 &
pid=$!
for _ in $(seq 200); do
  ls "$run"/checkpoints/.step_00000002.ckpt.tmp.* >/dev/null 2>&1 && break
  sleep 0.05
done
if ls "$run"/checkpoints/.step_00000002.ckpt.tmp.* >/dev/null 2>&1; then ok; else bad "no partial step 2 file appeared"; fi
kill -9 $pid 2>/dev/null; wait $pid 2>/dev/null
[ ! -e "$run/checkpoints/step_00000002.ckpt" ] && ok || bad "step 2 checkpoint exists after the kill"
has "step_00000001.ckpt" "$run/checkpoints/latest"
# the previous checkpoint still loads: resume from it and finish the run
expect 0 "$K" train "${small[@]}" --steps 4 --resume "$run"
has "step_00000001.ckpt at step 1" "$tmp/out"
expect 0 "$K" sample --run-dir "$run" --tokens 20

# --- a hung rank: the watchdog names the waiting rank, its action and the peer ---
# Ops of 10 ms: rank 0 starts waiting (at 0B0) about 50 ms before rank 3 (at
# 3F2, behind rank 2), so its watchdog fires first even on a busy machine
# (with 1 ms ops the lead was 5 ms, and under CI's load rank 3 once came first).
t0=$(date +%s%N)
KAITEN_TEST_HANG=1,2 "$K" train --synthetic --stages 4 -m 8 --tf 10 --tb 10 --tw 10 --act-bytes 1024 \
  --timeout 0.5 --steps 1 --no-live >"$tmp/hang.out" 2>"$tmp/hang.err"; rc=$?
took=$(( ($(date +%s%N) - t0) / 1000000 ))
[ $rc = 1 ] && ok || bad "a hung rank: exit $rc"
has "watchdog" "$tmp/hang.err"
has "from rank 1 (stage 1)" "$tmp/hang.err"
# rank 1 sent F0 and F1, then hung: rank 2 waits at 2F2 (or rank 0 at 0B0)
grep -q "rank 2 (stage 2) waited 0.5 s at action 2F2\|rank 0 (stage 0) waited 0.5 s at action 0B0" "$tmp/hang.err" &&
  ok || bad "watchdog message: $(cat "$tmp/hang.err")"
[ "$took" -lt 4000 ] && ok || bad "the run took $took ms to stop"

# --- a full disk during a checkpoint write --------------------------------------
mnt="$tmp/full"
mkdir -p "$mnt"
trap 'umount "$mnt" 2>/dev/null; rm -rf "$tmp"' EXIT
if mount -t tmpfs -o size=4m tmpfs "$mnt" 2>/dev/null; then
  # each checkpoint of this model is 1.6 MB: the third does not fit
  expect 1 "$K" train "${small[@]}" --hidden 64 --steps 6 --checkpoint-every 1 --run-dir "$mnt/run"
  has "No space left on device" "$tmp/err"
  if grep -q "^kaiten: " "$tmp/err" && [ "$(grep -c "^kaiten: " "$tmp/err")" = 1 ]; then ok; else bad "not one error line: $(cat "$tmp/err")"; fi
  if ls "$mnt/run/checkpoints/".*.tmp.* >/dev/null 2>&1; then bad "a temp file was left behind"; else ok; fi
  n=$(ls "$mnt/run/checkpoints/"step_*.ckpt 2>/dev/null | wc -l)
  [ "$n" -ge 1 ] && ok || bad "no complete checkpoint before the disk filled"
  # every checkpoint on the full disk is whole: copy the run out and load each
  cp -r "$mnt/run" "$tmp/fullrun"
  umount "$mnt"
  for c in "$tmp/fullrun"/checkpoints/step_*.ckpt; do
    printf '%s\n' "$(basename "$c")" >"$tmp/fullrun/checkpoints/latest"
    expect 0 "$K" sample --run-dir "$tmp/fullrun" --tokens 5
  done
else
  echo "test_faults: skipping the full-disk check (cannot mount a tmpfs here)"
fi

# --- a non-finite loss ------------------------------------------------------------
nan=(--optimizer sgd --lr 10 --grad-clip 0 --steps 12 --no-live --val-every 0)
expect 1 "$K" train "${nan[@]}" --run-dir "$tmp/nan"
oneline; has "skip-nonfinite" "$tmp/err"
re='step ([0-9]+): the loss is .* first in the (forward output|loss|gradients) of stage [0-3] \(of 4\)'
if grep -Eq "$re" "$tmp/err"; then ok; else bad "no step and stage in: $(cat "$tmp/err")"; fi
n=$(sed -nE "s/.*step ([0-9]+): the loss.*/\1/p" "$tmp/err")
# the run stopped before the bad step: its metrics end one step earlier, no checkpoint after it
[ "$(wc -l <"$tmp/nan/metrics.jsonl")" = "$((n - 1))" ] && ok || bad "metrics.jsonl has $(wc -l <"$tmp/nan/metrics.jsonl") lines, bad step $n"
if ls "$tmp/nan/checkpoints/"*.ckpt >/dev/null 2>&1; then bad "checkpoint written by a stopped run"; else ok; fi
expect 0 "$K" train "${nan[@]}" --skip-nonfinite --format json
has "step $n skipped" "$tmp/err"
has '"losses":\[.*null' "$tmp/out"
finish test_faults
