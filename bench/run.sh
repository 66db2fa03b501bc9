#!/usr/bin/env bash
# Runs every benchmark; results go to stdout (copy them into bench/README.md).
set -euo pipefail
B=${1:-build}
"$B/bench/bench_schedule"
"$B/bench/bench_plan"
"$B/bench/bench_runtime"
"$B/bench/bench_gpt"
"$B/bench/bench_transport"
if command -v mpirun >/dev/null; then
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np 2 --oversubscribe "$B/bench/bench_transport" | tail -n +2
  bash bench/mpi_vs_threads.sh "$B"
fi
bash bench/plan_vs_train.sh "$B"
