#!/usr/bin/env bash
# Steps without a barrier (--step-sync overlap, post-validation) compute
# exactly what steps with one do: on the default GPT at P=2, over 50 steps,
# on threads and under MPI, the losses, the validation losses and the final
# checkpoint are bitwise those of --step-sync barrier
#   - with the default clipping (the norm clipped on the first steps, then not),
#   - with --grad-clip 0.7 (clipped on some later steps and not on others:
#     an update that ran ahead is rolled back, rollbacks >= 1),
#   - with a NaN injected once into rank 1's gradients (--inject-nan), the
#     step skipped (--skip-nonfinite; rank 0 ran ahead and rolls back) or
#     the run stopped at it, with the weights from before it.
set -u
K="$1"
. "$(dirname "$0")/lib.sh"
cd "$tmp" || exit 1
gpt=(--stages 2 --steps 50 --val-every 25 --no-live)

# run NAME SYNC ARGS...: the run's JSON in NAME.json, its run directory NAME
run() {
  local name=$1 sync=$2; shift 2
  "$K" train "${gpt[@]}" --step-sync "$sync" --run-dir "$name" --format json -o "$name.json" "$@" \
    >"$name.out" 2>&1
}

# same A B: losses, validation loss and the final checkpoint alike
same() {
  python3 - "$1.json" "$2.json" <<'PY' && ok || bad "$1 and $2 differ"
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
assert a["losses"] == b["losses"], [i for i, (x, y) in enumerate(zip(a["losses"], b["losses"])) if x != y][:3]
assert a["val_loss"] == b["val_loss"], (a["val_loss"], b["val_loss"])
assert a["step_sync"] == "overlap" and b["step_sync"] == "barrier"
PY
  cmp -s "$1/checkpoints/$(cat "$1/checkpoints/latest")" "$2/checkpoints/$(cat "$2/checkpoints/latest")" &&
    ok || bad "$1 and $2: the final checkpoints differ"
}

rollbacks() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["rollbacks"])' "$1.json"; }

# --- threads ------------------------------------------------------------------------------
run t_over overlap || bad "t_over: $(tail -2 t_over.out)"
run t_bar barrier || bad "t_bar: $(tail -2 t_bar.out)"
same t_over t_bar
run t_clip_over overlap --grad-clip 0.7 || bad "t_clip_over: $(tail -2 t_clip_over.out)"
run t_clip_bar barrier --grad-clip 0.7 || bad "t_clip_bar: $(tail -2 t_clip_bar.out)"
same t_clip_over t_clip_bar
[ "$(rollbacks t_clip_over)" -ge 1 ] && ok || bad "--grad-clip 0.7: no rollback"
[ "$(rollbacks t_clip_bar)" = 0 ] && ok || bad "a barrier rolled back"
run t_nan_over overlap --grad-clip 0 --inject-nan 30:1 --skip-nonfinite || bad "t_nan_over: $(tail -2 t_nan_over.out)"
run t_nan_bar barrier --grad-clip 0 --inject-nan 30:1 --skip-nonfinite || bad "t_nan_bar: $(tail -2 t_nan_bar.out)"
same t_nan_over t_nan_bar
[ "$(rollbacks t_nan_over)" -ge 1 ] && ok || bad "a NaN: no rollback"
has "step 30 skipped" t_nan_over.out
# without --skip-nonfinite the run stops at the step, not applied, in both
"$K" train "${gpt[@]}" --grad-clip 0 --inject-nan 30:1 --run-dir t_stop_over >t_stop_over.out 2>&1
rc_over=$?
"$K" train "${gpt[@]}" --grad-clip 0 --inject-nan 30:1 --step-sync barrier --run-dir t_stop_bar \
  >t_stop_bar.out 2>&1
rc_bar=$?
[ $rc_over = 1 ] && [ $rc_bar = 1 ] && ok || bad "a NaN without --skip-nonfinite: exits $rc_over, $rc_bar"
has "step 30: the loss" t_stop_over.out
n_over=$(wc -l <t_stop_over/metrics.jsonl) n_bar=$(wc -l <t_stop_bar/metrics.jsonl)
[ "$n_over" = 29 ] && [ "$n_bar" = 29 ] && ok || bad "a NaN without --skip-nonfinite: $n_over and $n_bar steps recorded"

# --- MPI ----------------------------------------------------------------------------------
if [ -n "${KT_MPIEXEC:-}" ]; then
  mpi() {
    local name=$1 sync=$2; shift 2
    timeout 300 "$KT_MPIEXEC" -np 2 --oversubscribe "$K" train "${gpt[@]}" --transport mpi \
      --step-sync "$sync" --run-dir "$name" --format json -o "$name.json" "$@" >"$name.out" 2>&1
  }
  mpi m_over overlap || bad "m_over: $(tail -2 m_over.out)"
  mpi m_bar barrier || bad "m_bar: $(tail -2 m_bar.out)"
  same m_over m_bar
  python3 -c 'import json,sys; a,b=(json.load(open(f)) for f in sys.argv[1:]); assert a["losses"]==b["losses"]' \
    m_over.json t_over.json && ok || bad "MPI and threads differ"
  mpi m_clip_over overlap --grad-clip 0.7 || bad "m_clip_over: $(tail -2 m_clip_over.out)"
  mpi m_clip_bar barrier --grad-clip 0.7 || bad "m_clip_bar: $(tail -2 m_clip_bar.out)"
  same m_clip_over m_clip_bar
  [ "$(rollbacks m_clip_over)" -ge 1 ] && ok || bad "MPI --grad-clip 0.7: no rollback"
  mpi m_nan_over overlap --grad-clip 0 --inject-nan 30:1 --skip-nonfinite || bad "m_nan_over"
  mpi m_nan_bar barrier --grad-clip 0 --inject-nan 30:1 --skip-nonfinite || bad "m_nan_bar"
  same m_nan_over m_nan_bar
  [ "$(rollbacks m_nan_over)" -ge 1 ] && ok || bad "MPI, a NaN: no rollback"
fi

finish test_step_sync
