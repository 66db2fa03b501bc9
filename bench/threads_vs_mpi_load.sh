#!/usr/bin/env bash
# The threads transport against MPI processes on the same training run,
# paired run by run (the order swapped each pair), at light load and with
# one outside busy loop pinned to the first core:
#   demo  the demo's configuration: GPT, P=4, 1F1B, M=8, b=4 (4 ranks on
#         the machine's cores);
#   zbv   GPT, P=2, zbv, M=8, b=4.
# Each run's steady tokens/s (train's steady_tokens_per_s: the median step
# from the second on); per configuration the median of the pairs'
# threads / MPI ratios. Threads runs as train does by default (ranks pinned
# while they have their cores to themselves) and with --no-pin.
# Usage: threads_vs_mpi_load.sh [--quick] [--tsv FILE] [BUILD_DIR]
# (PAIRS, STEPS override the defaults: 5 pairs of 30 steps; --quick 2 of 12).
set -euo pipefail
# shellcheck source=bench/rows.sh
. "$(dirname "$0")/rows.sh"
pairs=${PAIRS:-5} steps=${STEPS:-30}
[ "$QUICK" = 1 ] && pairs=${PAIRS:-2} steps=${STEPS:-12}
tmp=$(mktemp -d)
busy=''
cleanup() { [ -n "$busy" ] && kill "$busy" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
export OPENBLAS_NUM_THREADS=1

# tokens MODE ARGS...: one run's steady tokens/s (MODE threads, nopin, mpi)
tokens() {
  local mode=$1; shift
  local run=(train --steps "$steps" --val-every 0 --format json "$@")
  case $mode in
    threads) "$B/kaiten" "${run[@]}" --run-dir "$tmp/r" --force ;;
    nopin) "$B/kaiten" "${run[@]}" --no-pin --run-dir "$tmp/r" --force ;;
    mpi) mpirun -np "$ranks" --oversubscribe "$B/kaiten" "${run[@]}" --transport mpi \
           --run-dir "$tmp/r" --force ;;
  esac 2>"$tmp/err" | tail -n 1 |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["steady_tokens_per_s"])' ||
    { cat "$tmp/err" >&2; return 1; }
}

# compare NAME LOAD ARGS...: PAIRS pairs of (threads, nopin, mpi), rotated
compare() {
  local name=$1 load=$2; shift 2
  local t=() n=() m=() rt=() rn=()
  for i in $(seq "$pairs"); do
    local order=(threads nopin mpi)
    [ $((i % 2)) = 0 ] && order=(mpi nopin threads)
    local -A got=()
    for mode in "${order[@]}"; do got[$mode]=$(tokens "$mode" "$@"); done
    t+=("${got[threads]}") n+=("${got[nopin]}") m+=("${got[mpi]}")
    rt+=("$(python3 -c "print(${got[threads]} / ${got[mpi]})")")
    rn+=("$(python3 -c "print(${got[nopin]} / ${got[mpi]})")")
  done
  read -r tm _ _ < <(printf '%s\n' "${t[@]}" | stats)
  read -r nm _ _ < <(printf '%s\n' "${n[@]}" | stats)
  read -r mm _ _ < <(printf '%s\n' "${m[@]}" | stats)
  read -r r1 r1min r1max < <(printf '%s\n' "${rt[@]}" | stats)
  read -r r2 r2min r2max < <(printf '%s\n' "${rn[@]}" | stats)
  printf '%-5s %-10s tokens/s threads %.0f, --no-pin %.0f, mpi %.0f; threads/mpi %.3f (%.3f-%.3f), no-pin/mpi %.3f (%.3f-%.3f); %d pairs, load %s\n' \
    "$name" "$load" "$tm" "$nm" "$mm" "$r1" "$r1min" "$r1max" "$r2" "$r2min" "$r2max" "$pairs" \
    "$(cut -d' ' -f1 /proc/loadavg)"
  row "threads_vs_mpi.$name.$load" "steady tokens/s, $name, $load, threads" tok/s "$tm" - - \
    "MPI ($mm tok/s)" "$mm"
}

demo=(--model gpt --stages 4 --schedule 1f1b -m 8 -b 4)
zbv=(--model gpt --stages 2 --schedule zbv -m 8 -b 4)
ranks=4; compare demo light "${demo[@]}"
ranks=2; compare zbv light "${zbv[@]}"
taskset -c "$(taskset -pc $$ | sed 's/.*: *//; s/[,-].*//')" sh -c 'while :; do :; done' &
busy=$!
ranks=4; compare demo busy-loop "${demo[@]}"
ranks=2; compare zbv busy-loop "${zbv[@]}"
