#!/usr/bin/env bash
# The runtime's own overhead: synthetic 1f1b (every op sleeps 2 ms, 64 KiB
# boundary tensors travel for real) at P = 4, 8, 16 with M = 4P, on the
# threads transport and on MPI (one process per rank), measured makespan over
# the simulator's makespan with the same nominal costs and no communication
# cost. Each run's per-step makespans come from its metrics.jsonl (makespan =
# total busy / (P * (1 - bubble)), the timeline's own definition), after two
# warm-up steps; the row is the median over all runs' steps, the min-max
# their spread. For the last run of each it prints where measured - simulated
# went on the critical path (build/bench/critical_path). Usage:
# synthetic_overhead.sh [--quick] [--tsv FILE] [BUILD_DIR].
set -euo pipefail
# shellcheck source=bench/rows.sh
. "$(dirname "$0")/rows.sh"
runs=3 steps=10 ps=(4 8 16)
[ "$QUICK" = 1 ] && runs=1 steps=5 ps=(4 8)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# makespans RUN_DIR P: per-step makespan in ms, after two warm-up steps.
makespans() {
  tail -n +3 "$1/metrics.jsonl" | awk -v p="$2" '{
    b = $0; sub(/.*"bubble":/, "", b); sub(/[,}].*/, "", b)
    s = 0; line = $0
    while (match(line, /"busy":[-+0-9.eE]+/)) {
      s += substr(line, RSTART + 7, RLENGTH - 7); line = substr(line, RSTART + RLENGTH) }
    printf "%.6g\n", 1e3 * s / (p * (1 - b)) }'
}

have_mpi=0
command -v mpirun >/dev/null && have_mpi=1
printf '%-8s %4s %4s %12s %12s %8s\n' transport P M "measured ms" "simulated ms" ratio
for P in "${ps[@]}"; do
  M=$((4 * P))
  ARGS=(--synthetic --stages "$P" -m "$M" --tf 2 --tb 2 --tw 2 --act-bytes 65536
        --steps "$steps" --val-every 0 --no-live)
  sim=$("$B/kaiten" sim -s 1f1b -p "$P" -m "$M" --tf 2 --tb 2 --tw 2 --format json |
        sed -n 's/^{.*"makespan":\([-+0-9.eE]*\),.*/\1/p')
  for tr in threads mpi; do
    [ "$tr" = mpi ] && [ "$have_mpi" = 0 ] && continue
    : >"$tmp/ms"
    for r in $(seq "$runs"); do
      rm -rf "$tmp/run"
      if [ "$tr" = threads ]; then
        quiet "$tmp/log" "$B/kaiten" train "${ARGS[@]}" --run-dir "$tmp/run"
      else
        quiet "$tmp/log" mpirun -np "$P" --oversubscribe "$B/kaiten" train "${ARGS[@]}" \
          --transport mpi --run-dir "$tmp/run"
      fi
      makespans "$tmp/run" "$P" >>"$tmp/ms"
    done
    # where the last run's traced step lost its time (bench/critical_path.c)
    "$B/bench/critical_path" "$tmp/run" --sim "$sim" | sed "s|$tmp/run|$tr P=$P|" || true
    read -r med lo hi < <(stats <"$tmp/ms")
    ratio=$(awk -v a="$med" -v b="$sim" 'BEGIN {printf "%.4f", a / b}')
    printf '%-8s %4d %4d %12.2f %12.2f %8s\n' "$tr" "$P" "$M" "$med" "$sim" "$ratio"
    cmd="kaiten train --synthetic --stages $P -m $M --tf 2 --tb 2 --tw 2 --act-bytes 65536"
    [ "$tr" = mpi ] && cmd="mpirun -np $P $cmd --transport mpi"
    row "runtime.overhead.$tr.P$P" "synthetic 1f1b makespan, $tr, P=$P M=$M, 2 ms ops, 64 KiB tensors (\`$cmd\`; $runs runs x $((steps - 2)) steps)" \
      ms "$med" "$lo" "$hi" "simulated makespan $sim ms (target ratio <= 1.03)" "$sim"
  done
done
