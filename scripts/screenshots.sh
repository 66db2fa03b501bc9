#!/usr/bin/env bash
# Regenerates the README's screenshots under docs/img/ from real runs (the
# live dashboard during kaiten train --serve, kaiten serve of three runs,
# the replay in a simulation report), in headless Chromium.
# Usage: bash scripts/screenshots.sh [BUILD_DIR [PARTS]]   (needs chromium, python3;
# PARTS: a comma-separated subset of replay, live, overlay, whatif)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
B=${1:-build}
browser=$(command -v chromium || command -v chromium-browser || true)
[ -n "$browser" ] || { echo "screenshots.sh: needs chromium (apt-get install chromium)" >&2; exit 1; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mkdir -p "$here/../docs/img"
python3 "$here/screenshots.py" "$(cd "$B" && pwd)/kaiten" "$browser" "$work" "$here/../docs/img" ${2:+"$2"}
