#!/usr/bin/env bash
# The README's sample outputs of sim, compare and plan are what those
# commands print (tests/readme_check.py), so they cannot drift again.
set -u
K="$1"
. "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || { echo "test_readme: SKIP: needs python3"; exit 77; }
python3 "$(dirname "$0")/readme_check.py" "$(dirname "$0")/../README.md" "$K" && ok || bad "README samples"
finish test_readme
