#!/usr/bin/env bash
# Size limits that keep the tree easy to read: no function body over
# MAX_FN lines (tables and test/bench mains excepted) and no source file
# over MAX_FILE lines under src/. Prints every offender; exit 1 if any.
# Functions are found the way this code base writes them: the signature
# starts in column 0, the body closes with "}" in column 0.
set -euo pipefail
cd "$(dirname "$0")/.."
MAX_FN=${MAX_FN:-80}
MAX_FILE=${MAX_FILE:-600}
bad=0
fns=$(find src tests bench -name '*.c' -print0 | sort -z | xargs -0 awk -v max="$MAX_FN" '
  FNR == 1 { pending = 0; infn = 0 }
  !infn && /^[A-Za-z_][A-Za-z0-9_ *]*\(/ && !/^(typedef|struct|enum|union)/ && !/;[ ]*$/ && !/=/ {
    pending = FNR; sig = $0
  }
  pending && !infn && /\{[ ]*$/ { infn = 1; start = pending; pending = 0; next }
  pending && !infn && /;[ ]*$/ { pending = 0 }
  infn && /^\}/ {
    n = FNR - start + 1; infn = 0
    test_main = (FILENAME ~ /^(tests|bench)\// && sig ~ /^int main\(/)
    if (n > max && !test_main) printf "%s:%d: function of %d lines (max %d): %s\n", FILENAME, start, n, max, sig
  }')
if [ -n "$fns" ]; then echo "$fns"; bad=1; fi
while read -r n f; do
  [ "$f" = total ] && continue
  if [ "$n" -gt "$MAX_FILE" ]; then echo "$f: $n lines (max $MAX_FILE)"; bad=1; fi
done < <(find src -name '*.c' -print0 | xargs -0 wc -l)
exit $bad
