#!/usr/bin/env bash
# The simulator at scale, as a user runs it: `kaiten sim -s 1f1b -p P -m M
# --format json` (metrics-only above 1,000,000 actions) at three sizes that
# grow 4x in actions each, wall time and peak resident memory (GNU time),
# median of the runs. Targets for P=1024, M=16384 (33.5 M actions): under
# 5 s and 2 GiB. The bytes per action of the largest size say how memory
# grows (the schedule is 12 bytes per action).
# Usage: sim_scale.sh [--quick] [--tsv FILE] [BUILD_DIR].
set -euo pipefail
# shellcheck source=bench/rows.sh
. "$(dirname "$0")/rows.sh"
K="$B/kaiten"
if [ ! -x /usr/bin/time ]; then # GNU time reports the peak resident memory
  echo "sim_scale.sh: /usr/bin/time not found (apt-get install time): skipped" >&2
  exit 0
fi
reps=3
sizes="256:4096 512:8192 1024:16384"
[ "$QUICK" = 1 ] && reps=1 sizes="256:4096"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
printf '# kaiten sim --format json, metrics-only path, median of %d\n' "$reps"
printf '%6s %6s %12s %10s %10s %12s\n' P M actions "wall s" "RSS MiB" "bytes/action"
for pm in $sizes; do
  p=${pm%:*} m=${pm#*:}
  : >"$tmp/wall" ; : >"$tmp/rss"
  for _ in $(seq "$reps"); do
    /usr/bin/time -f '%e %M' -o "$tmp/t" "$K" sim -s 1f1b -p "$p" -m "$m" --format json \
      -o "$tmp/out.json" 2>/dev/null
    read -r wall rss <"$tmp/t"
    echo "$wall" >>"$tmp/wall"; echo "$rss" >>"$tmp/rss"
  done
  actions=$((2 * p * m))
  read -r wmed wmin wmax < <(stats <"$tmp/wall")
  read -r rmed rmin rmax < <(awk '{printf "%.6g\n", $1 / 1024}' "$tmp/rss" | stats)
  bpa=$(awk -v r="$rmed" -v n="$actions" 'BEGIN {printf "%.1f", r * 1048576 / n}')
  printf '%6d %6d %12d %10.2f %10.0f %12s\n' "$p" "$m" "$actions" "$wmed" "$rmed" "$bpa"
  if [ "$p" = 1024 ]; then
    row sim.scale.wall "kaiten sim 1f1b P=1024 M=16384 --format json (33.5 M actions)" s \
      "$wmed" "$wmin" "$wmax" "target 5 s" 5
    row sim.scale.rss "the same, peak resident memory ($bpa bytes/action)" MiB \
      "$rmed" "$rmin" "$rmax" "target 2 GiB" 2048
  else
    row "sim.scale.p${p}" "kaiten sim 1f1b P=$p M=$m --format json ($actions actions, $bpa bytes/action)" s \
      "$wmed" "$wmin" "$wmax" - -
  fi
done
