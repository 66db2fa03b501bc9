#!/usr/bin/env bash
# One part of a headless-Chromium test, one part per CTest entry
# (tests/users.cmake, tests/whatif.cmake): usage
#   browser_part.sh SUITE KAITEN PART    (SUITE: users or whatif, run by SUITE_browser.py)
# Skips (exit 77) without Chromium or Python, or when kaiten was built
# without the in-page simulator (no clang for wasm32-wasi).
set -u
SUITE="$1"
K="$2"
PART="$3"
. "$(dirname "$0")/lib.sh"
browser=$(find_chromium)
if [ -z "$browser" ] || ! command -v python3 >/dev/null; then
  echo "test_${SUITE}_$PART: SKIP: needs Chromium and python3 (scripts/deps.sh installs chromium)"
  exit 77
fi
timeout 280 python3 "$(dirname "$0")/${SUITE}_browser.py" "$PART" "$K" "$browser" "$tmp"
