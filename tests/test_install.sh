#!/usr/bin/env bash
# kaiten is usable as a library: `cmake --install` gives headers, libkaiten.a,
# the CLI and kaiten.pc; a small C program (and a C++ one, through the
# extern "C" guards) built against them alone simulates 1F1B with the
# expected makespan and reports the library's version.
set -u
K=$(realpath "$1")
. "$(dirname "$0")/lib.sh"
B=$(dirname "$K")
command -v pkg-config >/dev/null || { echo "test_install: SKIP: needs pkg-config"; exit 77; }
cmake --install "$B" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1 || bad "cmake --install: $(tail -3 "$tmp/install.log")"
for f in include/kaiten/schedule.h include/kaiten/version.h bin/kaiten; do
  [ -e "$tmp/prefix/$f" ] && ok || bad "not installed: $f"
done
# the installed binary runs every command by itself
"$tmp/prefix/bin/kaiten" sim -p 2 -m 2 --format json >/dev/null && ok || bad "installed kaiten sim failed"
"$tmp/prefix/bin/kaiten" --version | grep -q kernels && ok || bad "installed kaiten --version printed no kernels line"
pc=$(find "$tmp/prefix" -name kaiten.pc | head -1)
[ -n "$pc" ] && ok || bad "no kaiten.pc"
export PKG_CONFIG_PATH=$(dirname "$pc")
san=$(sed -n 's/^KT_SANITIZE:[A-Z]*=//p' "$B/CMakeCache.txt")
extra=()
[ "$san" = address ] && extra=(-fsanitize=address,undefined)
[ "$san" = thread ] && extra=(-fsanitize=thread)
cat >"$tmp/use.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <kaiten/generators.h>
#include <kaiten/sim.h>
#include <kaiten/version.h>
int main(void) {
  kt_schedule s;
  kt_error err;
  kt_gen_params params = {.p = 4, .m = 8};
  if (kt_generate(KT_SCHED_1F1B, &params, &s, &err)) return 1;
  kt_metrics m;
  if (kt_simulate_metrics(&s, NULL, &m, &err)) return 1;
  printf("makespan %g version %s\n", m.makespan, kt_version());
  int ok = m.makespan == 33 && !strcmp(kt_version(), KT_VERSION_STRING);
  kt_metrics_free(&m);
  kt_schedule_free(&s);
  return ok ? 0 : 1;
}
C
# shellcheck disable=SC2046
cc -std=c11 "${extra[@]}" "$tmp/use.c" -o "$tmp/use" $(pkg-config --cflags --libs kaiten) 2>"$tmp/cc.log" ||
  bad "building against the installed library: $(tail -3 "$tmp/cc.log")"
"$tmp/use" >"$tmp/use.out" && ok || bad "the program failed: $(cat "$tmp/use.out")"
has "makespan 33" "$tmp/use.out"
if command -v c++ >/dev/null; then
  cp "$tmp/use.c" "$tmp/use.cc"
  sed -i 's/kt_gen_params params = {.p = 4, .m = 8};/kt_gen_params params = {}; params.p = 4; params.m = 8;/' "$tmp/use.cc"
  # shellcheck disable=SC2046
  c++ "${extra[@]}" "$tmp/use.cc" -o "$tmp/usecc" $(pkg-config --cflags --libs kaiten) 2>"$tmp/cxx.log" &&
    "$tmp/usecc" >/dev/null && ok || bad "C++ against the headers: $(tail -3 "$tmp/cxx.log")"
fi
# The core layer alone (schedules, simulator, generators, planner) links
# with libc and libm: no OpenBLAS, MPI, cJSON or libmicrohttpd.
core_pc=$(find "$tmp/prefix" -name kaiten-core.pc | head -1)
[ -n "$core_pc" ] && ok || bad "no kaiten-core.pc"
core_libs=$(pkg-config --libs kaiten-core)
case "$core_libs" in
  *openblas* | *mpi* | *microhttpd* | *cjson*) bad "kaiten-core.pc links more than libm: $core_libs" ;;
  *) ok ;;
esac
# shellcheck disable=SC2046
cc -std=c11 "${extra[@]}" "$KT_SOURCE/examples/plan_and_simulate.c" -o "$tmp/core_only" \
  $(pkg-config --cflags kaiten-core) $core_libs 2>"$tmp/core.log" ||
  bad "a core-only program against kaiten-core: $(tail -3 "$tmp/core.log")"
"$tmp/core_only" >"$tmp/core.out" 2>&1 && ok || bad "the core-only program failed: $(tail -3 "$tmp/core.out")"
has "simulated: makespan" "$tmp/core.out"
if command -v ldd >/dev/null && [ -z "$san" ]; then
  ldd "$tmp/core_only" | grep -qE 'openblas|libmpi|microhttpd|cjson' &&
    bad "the core-only program loads: $(ldd "$tmp/core_only" | grep -E 'openblas|mpi|microhttpd|cjson' | tr '\n' ' ')" || ok
fi
finish test_install
