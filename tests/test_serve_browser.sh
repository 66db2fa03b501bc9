#!/usr/bin/env bash
# The live dashboard and the conveyor-belt replay in headless Chromium
# (driven over the DevTools protocol by tests/serve_browser.py): the page
# during and after a train --serve run, kaiten serve of finished runs, and
# the replay in the HTML reports. Skips (exit 77) without Chromium or Python.
set -u
K="$1"
. "$(dirname "$0")/lib.sh"
browser=""
for c in chromium chromium-browser google-chrome-stable google-chrome; do
  command -v "$c" >/dev/null 2>&1 && { browser=$(command -v "$c"); break; }
done
if [ -z "$browser" ] || ! command -v python3 >/dev/null; then
  echo "test_serve_browser: SKIP: needs Chromium and python3 (scripts/deps.sh installs chromium)"
  exit 77
fi
timeout 280 python3 "$(dirname "$0")/serve_browser.py" "$K" "$browser" "$tmp"
