#!/usr/bin/env bash
# The what-if panel's time per change in headless Chromium (targets: under
# 100 ms at P=8 M=64, under 1 s at P=32 M=256): bench/whatif_browser.py
# opens a sim report's panel per schedule and size and makes REPS changes
# (a T_F slider, M, the link latency); per change the time from the input
# event until the page is laid out again, the re-simulation and redraw
# alone, and the simulator's call (its JSON parsed); for the searching
# schedules (zb-auto, zbv, v-half: the quick search while a slider moves)
# also the full search when the slider is let go. Median, min and max.
# Usage: whatif.sh [--quick] [--tsv FILE] [BUILD_DIR]  (needs chromium, python3)
set -euo pipefail
# shellcheck source=bench/rows.sh
. "$(dirname "$0")/rows.sh"
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ] || ! command -v python3 >/dev/null; then
  echo "whatif.sh: needs chromium and python3: skipped"
  exit 0
fi
reps=21 sizes=8x64,32x256
[ "$QUICK" = 1 ] && reps=5 sizes=8x64
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
python3 "$(dirname "$0")/whatif_browser.py" "$B/kaiten" "$browser" "$tmp" "$reps" "$sizes" >"$tmp/out"
printf '%-4s %-5s %-12s %8s  %-20s %-20s %-20s %-20s\n' P M schedule actions "change ms (med min max)" \
  "work ms" "simulator ms" "let go ms (full search)"
while read -r p m name acts a b c d e f g h i j k l; do
  printf '%-4s %-5s %-12s %8s  %-20s %-20s %-20s %-20s\n' "$p" "$m" "$name" "$acts" "$a $b $c" "$d $e $f" "$g $h $i" "$j $k $l"
  target=100
  [ "$p" -ge 32 ] && target=1000
  row "whatif_${name}_p${p}_m${m}" "what-if change, $name P=$p M=$m ($acts actions)" ms "$a" "$b" "$c" \
    "target $target ms" "$target"
done <"$tmp/out"
