#!/usr/bin/env bash
# What the live dashboard costs the training loop: the same kaiten train run
# (default GPT, 1f1b, P=2 M=8 b=4) without and with --serve, a client
# reading the event stream all along, alternated (plain then serve, serve
# then plain, ...) so that the machine's drifting load hits both alike. Wall
# time: median, min and max step time over every step after two warm-up
# steps of each run. CPU time: the process's user + system seconds per step
# (median over the runs) - on a loaded machine the steadier measure of what
# the server threads add, since every CPU second they take is one the
# ranks could have had.
# Usage: serve_overhead.sh [--quick] [--tsv FILE] [BUILD_DIR].
set -euo pipefail
# shellcheck source=bench/rows.sh
. "$(dirname "$0")/rows.sh"
K="$B/kaiten"
steps=40 rounds=4
[ "$QUICK" = 1 ] && steps=10 rounds=1
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ARGS=(--stages 2 -m 8 -b 4 --steps "$steps" --val-every 0 --no-live)
: >"$tmp/plain.ms"
: >"$tmp/serve.ms"
: >"$tmp/plain.cpu"
: >"$tmp/serve.cpu"
TIMEFORMAT='%U %S'
# cpu FILE: the CPU ms per step of the run whose `time` output is in FILE.cpu.time
cpu() { awk -v n="$steps" '{printf "%.6g\n", 1e3 * ($1 + $2) / n}' "$1"; }
plain() {
  { time "$K" train "${ARGS[@]}" --run-dir "$tmp/plain$1" >"$tmp/log" 2>&1; } 2>"$tmp/t"
  step_ms "$tmp/plain$1" >>"$tmp/plain.ms"
  cpu "$tmp/t" >>"$tmp/plain.cpu"
}
serve() {
  { time "$K" train "${ARGS[@]}" --run-dir "$tmp/serve$1" --serve 0 >"$tmp/serve.out" \
      2>"$tmp/serve.err"; } 2>"$tmp/t" &
  local pid=$! url
  for _ in $(seq 200); do grep -q http "$tmp/serve.err" && break; sleep 0.02; done
  url=$(grep -o 'http://[0-9.:]*/' "$tmp/serve.err")
  # a client that reads everything, as a browser tab would
  python3 -c "
import sys, urllib.request
for line in urllib.request.urlopen(sys.argv[1] + 'events', timeout=600):
    if line.startswith(b'event: end'): break" "$url" || true
  wait $pid || { cat "$tmp/serve.err" >&2; exit 1; }
  step_ms "$tmp/serve$1" >>"$tmp/serve.ms"
  cpu "$tmp/t" >>"$tmp/serve.cpu"
}
# the order alternates too: whichever runs second in a pair is not favoured
for r in $(seq "$rounds"); do
  if [ $((r % 2)) = 1 ]; then plain "$r"; serve "$r"; else serve "$r"; plain "$r"; fi
done
read -r p pmin pmax < <(stats <"$tmp/plain.ms")
read -r s smin smax < <(stats <"$tmp/serve.ms")
read -r pc pcmin pcmax < <(stats <"$tmp/plain.cpu")
read -r sc scmin scmax < <(stats <"$tmp/serve.cpu")
printf 'default GPT P=2 M=8 b=4, %d runs of %d steps each: plain %.2f ms (%.2f-%.2f), --serve %.2f ms (%.2f-%.2f), ratio %.4f\n' \
  "$rounds" "$steps" "$p" "$pmin" "$pmax" "$s" "$smin" "$smax" "$(awk -v a="$s" -v b="$p" 'BEGIN {print a / b}')"
printf 'CPU per step: plain %.2f ms (%.2f-%.2f), --serve %.2f ms (%.2f-%.2f), ratio %.4f\n' \
  "$pc" "$pcmin" "$pcmax" "$sc" "$scmin" "$scmax" "$(awk -v a="$sc" -v b="$pc" 'BEGIN {print a / b}')"
what="kaiten train step, default GPT, 1f1b P=2 M=8 b=4"
row train.plain "$what, no dashboard" ms "$p" "$pmin" "$pmax" - -
row train.serve "$what, --serve with a client reading the stream" ms "$s" "$smin" "$smax" \
  "$(printf 'the same without --serve (%.2f ms; target ratio < 1.01)' "$p")" "$p"
row train.plain.cpu "$what, no dashboard: process CPU time per step" ms "$pc" "$pcmin" "$pcmax" - -
row train.serve.cpu "$what, --serve with a client: process CPU time per step" ms "$sc" "$scmin" \
  "$scmax" "$(printf 'the same without --serve (%.2f ms; target ratio < 1.01)' "$pc")" "$pc"
