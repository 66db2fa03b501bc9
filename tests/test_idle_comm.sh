#!/usr/bin/env bash
# Why a measured step idled, case (c) of issue 34: P=2 across two emulated
# hosts (scripts/cluster-emu.sh: network namespaces, 100 Mbit/s links, MPI
# over TCP) with 256 KiB activations (about 22 ms a hop against 2 ms ops):
# the ranks' idle is comm, and busy and the causes sum to the step. Needs
# root, iproute2 and MPI; skips otherwise.
set -u
K="$1"
. "$(dirname "$0")/lib.sh"
PY="$(dirname "$0")/idle_check.py"
emu_cluster_up test_idle_comm
expect 0 timeout 120 bash "$EMU" run --dir "$dir" -- -np 2 "$K" train --synthetic --stages 2 -m 4 \
  --tf 2 --tb 2 --tw 0 --act-bytes 262144 --steps 4 --val-every 0 --transport mpi --format json --no-live
python3 "$PY" sums "$tmp/out" && ok || bad "the causes do not sum to the step"
python3 "$PY" comm "$tmp/out" && ok || bad "the links' waits are not comm"
finish test_idle_comm
