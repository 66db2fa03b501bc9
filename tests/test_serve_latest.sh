#!/usr/bin/env bash
# The live page shows the latest step (issue 35, section 5): a real model on
# two busy ranks with --serve; the rendered step stays within 2 s of the
# latest and never mixes two steps (stream, and Chromium when installed).
set -u
K="$1"
. "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || { echo "test_serve_latest: SKIP: needs python3"; exit 77; }
browser=""
for c in chromium chromium-browser google-chrome-stable google-chrome; do
  command -v "$c" >/dev/null 2>&1 && { browser=$(command -v "$c"); break; }
done
timeout 290 python3 "$(dirname "$0")/serve_latest.py" "$K" "$tmp" $browser
