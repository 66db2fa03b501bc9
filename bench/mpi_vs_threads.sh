#!/usr/bin/env bash
# The same training run on the threads transport and on MPI (one process per
# rank): median step time of the last steps, side by side.
set -euo pipefail
B=${1:-build}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ARGS="--model mlp --layers 8 --hidden 512 --stages 2 -m 8 -b 8 --steps 12 --val-every 0 --format json"
med() { python3 -c 'import json,sys; print("%.2f" % (1e3 * json.loads(sys.stdin.read().splitlines()[-1])["step_seconds"]))'; }
t=$("$B/kaiten" train $ARGS 2>/dev/null | med)
m=$(mpirun -np 2 --oversubscribe "$B/kaiten" train $ARGS --transport mpi 2>/dev/null | med)
echo "MLP L=8 H=512, P=2, M=8, b=8: mean step threads ${t} ms, mpi ${m} ms"
