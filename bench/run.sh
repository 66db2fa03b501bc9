#!/usr/bin/env bash
# Runs every benchmark; results go to stdout (copy them into bench/README.md).
set -euo pipefail
B=${1:-build}
"$B/bench/bench_schedule"
"$B/bench/bench_runtime"
