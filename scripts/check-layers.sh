#!/usr/bin/env bash
# The CLI is option tables, signal handlers and printing over the public
# library: src/cli includes only its own headers and include/kaiten/*.h,
# and calls no kt__ (internal) function. Prints every offending line; exit
# 1 if any. (The linker enforces the layers below it: CMakeLists.txt.)
set -euo pipefail
cd "$(dirname "$0")/.."
bad=0
modules=$(cd src && ls -d */ | tr -d / | grep -vx cli | paste -sd'|')
# internal calls or names: kt__ anywhere, comments included (a comment
# naming one is a sign of the same dependency)
if grep -n 'kt__' src/cli/*.c src/cli/*.h; then
  echo "check-layers: src/cli uses kt__ names (internal to the library)"; bad=1
fi
# quoted includes other than cli/ and kaiten/, and module headers in <...>
if grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' src/cli/*.c src/cli/*.h |
   grep -vE '#[[:space:]]*include[[:space:]]*"(cli|kaiten)/[^"]+"'; then
  echo "check-layers: src/cli includes a header that is neither its own nor include/kaiten/"; bad=1
fi
if grep -nE "^[[:space:]]*#[[:space:]]*include[[:space:]]*<($modules)/" src/cli/*.c src/cli/*.h; then
  echo "check-layers: src/cli includes a module's internal header"; bad=1
fi
# every kaiten/ header it includes is a public one
for h in $(grep -ohE '#[[:space:]]*include[[:space:]]*"kaiten/[^"]+"' src/cli/*.c src/cli/*.h |
           sed -E 's/.*"kaiten\/([^"]+)"/\1/' | sort -u); do
  if [ ! -f "include/kaiten/$h" ]; then
    echo "check-layers: src/cli includes kaiten/$h, which include/kaiten/ does not hold"; bad=1
  fi
done
exit $bad
