#!/usr/bin/env bash
# Runs fuzz targets one after the other: run.sh BUILD_DIR SECONDS TARGET...
# Each starts from a copy of its committed corpus (new inputs stay in
# BUILD_DIR/fuzz/TARGET/corpus), logs to BUILD_DIR/fuzz/TARGET/log and keeps
# any crash, hang or leak input in BUILD_DIR/fuzz/TARGET/.
set -euo pipefail
build=$1 seconds=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
status=0
for t in "$@"; do
  dir=$build/fuzz/$t
  mkdir -p "$dir/corpus"
  cp -n "$here/corpus/$t"/* "$dir/corpus/" 2>/dev/null || true
  dict=()
  [ -f "$here/$t.dict" ] && dict=(-dict="$here/$t.dict")
  echo "fuzz_$t: ${seconds}s (log: $dir/log)"
  if "$build/tests/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$dir/" "${dict[@]}" "$dir/corpus" >"$dir/log" 2>&1; then
    grep -E '^#[0-9]+.*(DONE|pulse|NEW|REDUCE)' "$dir/log" | tail -1
  else
    echo "fuzz_$t FAILED: see $dir/log"
    grep -E 'ERROR|SUMMARY|Test unit written' "$dir/log" | head -5 || true
    status=1
  fi
done
exit $status
