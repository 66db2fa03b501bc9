#!/usr/bin/env bash
# The same training run on the threads transport and on MPI (one process per
# rank): median, min and max step time after two warm-up steps, side by side.
# Usage: mpi_vs_threads.sh [--quick] [--tsv FILE] [BUILD_DIR].
set -euo pipefail
# shellcheck source=bench/rows.sh
. "$(dirname "$0")/rows.sh"
steps=12
[ "$QUICK" = 1 ] && steps=6
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ARGS=(--model mlp --layers 8 --hidden 512 --stages 2 -m 8 -b 8 --steps "$steps" --val-every 0)
quiet "$tmp/log" "$B/kaiten" train "${ARGS[@]}" --run-dir "$tmp/threads"
quiet "$tmp/log" mpirun -np 2 --oversubscribe "$B/kaiten" train "${ARGS[@]}" --transport mpi --run-dir "$tmp/mpi"
read -r t tmin tmax < <(step_ms "$tmp/threads" | stats)
read -r m mmin mmax < <(step_ms "$tmp/mpi" | stats)
printf 'MLP L=8 H=512, P=2, M=8, b=8, median step of %d: threads %.1f ms (%.1f-%.1f), mpi %.1f ms (%.1f-%.1f)\n' \
  $((steps - 2)) "$t" "$tmin" "$tmax" "$m" "$mmin" "$mmax"
what="kaiten train step, MLP L=8 H=512, P=2 M=8 b=8"
row train.threads "$what, threads" ms "$t" "$tmin" "$tmax" - -
row train.mpi "$what, MPI" ms "$m" "$mmin" "$mmax" "$(printf 'threads transport (%.1f ms)' "$t")" "$t"
