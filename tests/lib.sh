# Shared helpers of the shell tests (sourced): counters, a scratch directory,
# and checks that print what went wrong. Each test ends with `finish NAME`.
fails=0; checks=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ok()  { checks=$((checks+1)); }
bad() { checks=$((checks+1)); fails=$((fails+1)); echo "FAIL: $*" >&2; }
# expect CODE CMD...: the command's exit code must be CODE (stdout and stderr
# are kept in $tmp/out and $tmp/err for the checks that follow)
expect() { local want=$1; shift; "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?;
  if [ $rc = "$want" ]; then ok; else bad "exit $rc (want $want): $*"; tail -3 "$tmp/err" >&2; fi; }
has() { if grep -q -- "$1" "$2"; then ok; else bad "'$1' not in $2: $(head -c 400 "$2")"; fi; }
# the last command's stderr is exactly one non-empty line
oneline() { local n; n=$(wc -l <"$tmp/err"); if [ "$n" -le 1 ] && [ -s "$tmp/err" ]; then ok; else bad "stderr not one line: $(cat "$tmp/err")"; fi; }
finish() { echo "$1: $checks checks, $fails failed: $([ $fails = 0 ] && echo OK || echo FAIL)"; [ $fails = 0 ]; }
# The headless browser the browser tests drive (Chromium), or nothing.
find_chromium() {
  for c in chromium chromium-browser google-chrome-stable google-chrome; do
    command -v "$c" >/dev/null 2>&1 && { command -v "$c"; return 0; }
  done
  return 1
}
# Two emulated hosts at 100 Mbit/s (scripts/cluster-emu.sh) for test NAME,
# taken down at exit: sets EMU and dir, or exits 77 (skip) where they cannot
# be made (no MPI, not root, no iproute2, no network namespaces).
emu_cluster_up() {
  EMU="${KT_SOURCE:-$(dirname "$0")/..}/scripts/cluster-emu.sh"
  [ -n "${KT_MPIEXEC:-}" ] || { echo "$1: SKIP: built without MPI"; exit 77; }
  [ "$(id -u)" = 0 ] || { echo "$1: SKIP: not root"; exit 77; }
  command -v ip >/dev/null || { echo "$1: SKIP: no ip (iproute2)"; exit 77; }
  dir=$(bash "$EMU" up --hosts 2 --link 100mbit --dir "$tmp/cluster" 2>"$tmp/up.err")
  local rc=$?
  [ $rc = 77 ] && { echo "$1: SKIP: $(cat "$tmp/up.err")"; exit 77; }
  [ $rc = 0 ] || { cat "$tmp/up.err"; exit 1; }
  trap 'bash "$EMU" down --dir "$dir"; rm -rf "$tmp"' EXIT
}
