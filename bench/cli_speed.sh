#!/usr/bin/env bash
# Speed a user sees: every built-in schedule at P=64, M=1024 with default
# costs, `kaiten sim -s NAME -p 64 -m 1024` (default output) and `--format
# json -o FILE`, wall time, median of REPS runs each, less process start
# (the median of `kaiten sim --help`, run alternately with them). Targets:
# the default output 100 ms beyond process start; json that plus 10 ms per
# MB written.
# Usage: cli_speed.sh [--quick] [--tsv FILE] [BUILD_DIR].
set -euo pipefail
# shellcheck source=bench/rows.sh
. "$(dirname "$0")/rows.sh"
K="$B/kaiten"
reps=7
[ "$QUICK" = 1 ] && reps=3
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ms() { # ms CMD...: wall milliseconds of one run
  local t0 t1
  t0=$(date +%s%N); "$@" >/dev/null 2>&1; t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000))e-3
}
printf '# kaiten sim -p 64 -m 1024, default costs: wall ms, median of %d, less process start\n' "$reps"
printf '%-15s %10s %10s %10s %10s %8s\n' schedule ascii target json MB target
: >"$tmp/start"
for s in gpipe 1f1b interleaved looped-bfs zb-h1 zb-h2 zbv dualpipev zb-auto zbv-auto \
  interleaved-zb v-half v-min; do
  : >"$tmp/a"; : >"$tmp/j"
  for _ in $(seq "$reps"); do
    ms "$K" sim --help >>"$tmp/start"
    ms "$K" sim -s "$s" -p 64 -m 1024 -o "$tmp/out.txt" >>"$tmp/a"
    ms "$K" sim -s "$s" -p 64 -m 1024 --format json -o "$tmp/out.json" >>"$tmp/j"
  done
  read -r start _ _ < <(stats <"$tmp/start")
  read -r a amin amax < <(awk -v s="$start" '{printf "%.6g\n", $1 - s}' "$tmp/a" | stats)
  read -r j jmin jmax < <(awk -v s="$start" '{printf "%.6g\n", $1 - s}' "$tmp/j" | stats)
  mb=$(awk -v b="$(stat -c %s "$tmp/out.json")" 'BEGIN {printf "%.1f", b / 1048576}')
  jt=$(awk -v m="$mb" 'BEGIN {printf "%.0f", 100 + 10 * m}')
  printf '%-15s %10.1f %10s %10.1f %10.1f %8s\n' "$s" "$a" 100 "$j" "$mb" "$jt"
  row "cli.$s" "kaiten sim -s $s -p 64 -m 1024, beyond process start" ms "$a" "$amin" "$amax" \
    "target 100 ms" 100
  row "cli.$s.json" "the same, --format json -o FILE ($mb MB)" ms "$j" "$jmin" "$jmax" \
    "target $jt ms" "$jt"
done
read -r start smin smax < <(stats <"$tmp/start")
printf 'process start (kaiten sim --help): %.1f ms median (%.1f-%.1f)\n' "$start" "$smin" "$smax"
