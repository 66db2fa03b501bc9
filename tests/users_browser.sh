#!/usr/bin/env bash
# What a user sees of a training run, in headless Chromium, one part per
# CTest entry (tests/users.cmake): usage  users_browser.sh KAITEN PART
# Skips (exit 77) without Chromium or Python, or when kaiten was built
# without the in-page simulator (no clang for wasm32-wasi).
set -u
K="$1"
PART="$2"
. "$(dirname "$0")/lib.sh"
browser=$(find_chromium)
if [ -z "$browser" ] || ! command -v python3 >/dev/null; then
  echo "test_users_$PART: SKIP: needs Chromium and python3 (scripts/deps.sh installs chromium)"
  exit 77
fi
timeout 280 python3 "$(dirname "$0")/users_browser.py" "$PART" "$K" "$browser" "$tmp"
