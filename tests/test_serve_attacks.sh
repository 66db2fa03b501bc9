#!/usr/bin/env bash
# kaiten serve as an attacker and a careless user would try it (issue 35,
# section 1): links and FIFOs in a run directory, slow and idle connections,
# listening on every address, a run still training, signals. Loopback only.
set -u
K="$1"
. "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || { echo "test_serve_attacks: SKIP: needs python3"; exit 77; }
timeout 250 python3 "$(dirname "$0")/serve_attacks.py" "$K" "$tmp"
