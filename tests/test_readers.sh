#!/usr/bin/env bash
# Readers on values and files no run should hold (issue 35, section 2):
# extreme losses and spans, a NUL byte, a malformed line, a 2.2 GB line; the
# live page on extreme losses in Chromium when it is installed.
set -u
K="$1"
. "$(dirname "$0")/lib.sh"
command -v python3 >/dev/null || { echo "test_readers: SKIP: needs python3"; exit 77; }
browser=""
for c in chromium chromium-browser google-chrome-stable google-chrome; do
  command -v "$c" >/dev/null 2>&1 && { browser=$(command -v "$c"); break; }
done
timeout 250 python3 "$(dirname "$0")/readers_check.py" "$K" "$tmp" $browser
