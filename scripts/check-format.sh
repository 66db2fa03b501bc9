#!/usr/bin/env bash
# The tree passes its .clang-format: every C source and header under src,
# include, tests and bench, as clang-format formats it (run by .ci/run).
# Usage: check-format.sh [--fix]  (--fix rewrites the files in place).
# Exit 1 and the files that differ when any does; 0 when clang-format is
# missing (scripts/deps.sh installs it; the check says it was skipped).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null; then
  echo "check-format: clang-format is not installed; skipped (scripts/deps.sh installs it)" >&2
  exit 0
fi
mapfile -t files < <(git ls-files 'src/*.[ch]' 'include/*.h' 'tests/*.[ch]' 'bench/*.[ch]' 2>/dev/null ||
                     find src include tests bench -name '*.[ch]')
if [ "${1:-}" = --fix ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=0
for f in "${files[@]}"; do
  if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then
    echo "check-format: $f is not as .clang-format writes it (scripts/check-format.sh --fix)"
    bad=1
  fi
done
exit $bad
