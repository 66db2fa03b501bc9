#!/usr/bin/env bash
# `make demo`: a tour of kaiten on built-in defaults.
set -euo pipefail
B=${1:-build}
K="$B/kaiten"
say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "1F1B on 4 ranks, 8 micro-batches (the source documents' picture)"
"$K" sim --schedule 1f1b -p 4 -m 8
say "GPipe on the same pipeline: same bubble, every micro-batch in flight at once"
"$K" sim --schedule gpipe -p 4 -m 8
say "Every schedule side by side: P=8, M=16"
"$K" compare -p 8 -m 16
