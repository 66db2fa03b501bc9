#!/usr/bin/env bash
# Layering checks, run by .ci/run after the build. Usage: check-layers.sh [BUILD_DIR]
# (default build). Prints every offending line; exit 1 if an ENFORCING check
# finds one.
#
# Every check fails the run (exit 1) when it finds a line:
#   1. src/cli is option tables, signal handlers and printing over the public
#      library: it includes only its own headers and include/kaiten/*.h, and
#      calls no kt__ (internal) function.
#   2. (with a build) no kaiten object defines malloc, free, calloc, realloc,
#      memcpy, memmove or memset: the C library's are the only ones (nm).
#   3. (with a shared build) libkaiten_serve.so loads no training runtime
#      (libkaiten_runtime, libkaiten_nn, MPI, OpenBLAS); libkaiten_runtime.so
#      loads no renderer (libkaiten_report) and no server; the kaiten binary
#      loads neither OpenBLAS nor libmicrohttpd at start (opened on first
#      use: src/nn/blas.c, src/serve/mhd.c) (ldd).
#   4. no _Thread_local state in src/generators;
#   5. no file outside the request module (src/request/) parses "0.5x"-style
#      memory limits;
#   6. the runtime worker (src/runtime/worker.c) does not ask schedule/ for
#      chunk, peer and tag on every action (src/runtime/resolve.c resolves
#      them once per rank).
# (The linker enforces the layers below the CLI: CMakeLists.txt.)
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}
bad=0

# ---- 1. the CLI (enforcing) ----------------------------------------------------
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

# ---- 2, 3. the built libraries (enforcing, when a build exists) ----------------
if [ -f "$B/libkaiten_core.a" ] && [ -x "$B/kaiten" ]; then
  # every kaiten object: the archives (libkaiten_commands.a: the CLI), the
  # shared layers, and kaiten's main
  shopt -s nullglob
  shared=("$B"/libkaiten*.so)
  objects=("$B"/libkaiten*.a "${shared[@]}" "$B"/CMakeFiles/kaiten_cli.dir/src/cli/*.o)
  shopt -u nullglob
  if nm -A --defined-only "${objects[@]}" 2>/dev/null |
     grep -E ' [TtWwVvIi] (malloc|free|calloc|realloc|memcpy|memmove|memset)$'; then
    echo "check-layers: a kaiten object defines the C library's allocator or memcpy"; bad=1
  fi
  # needs: a library's ldd lines that match a pattern it must not load
  needs() {
    ldd "$1" 2>/dev/null | awk '{print $1}' | grep -E "$2" || return 1
  }
  if [ -f "$B/libkaiten_serve.so" ] && [ -f "$B/libkaiten_runtime.so" ]; then
    if needs "$B/libkaiten_serve.so" 'libkaiten_(runtime|nn)\.so|libmpi|openblas'; then
      echo "check-layers: libkaiten_serve.so loads the training runtime"; bad=1
    fi
    if needs "$B/libkaiten_runtime.so" 'libkaiten_(report|serve)\.so'; then
      echo "check-layers: libkaiten_runtime.so loads a renderer or the server"; bad=1
    fi
  else
    echo "check-layers: no shared layers in $B (KT_SHARED=OFF): their ldd checks skipped"
  fi
  if needs "$B/kaiten" 'openblas|microhttpd'; then
    echo "check-layers: kaiten loads OpenBLAS or libmicrohttpd at start (they are opened on first use)"
    bad=1
  fi
else
  echo "check-layers: no build in $B: the nm and ldd checks skipped"
fi

# ---- 4-6. the request module and the runtime (enforcing) ---------------------------
found() { # found TITLE: prints stdin's lines under TITLE and fails, if any
  local lines
  lines=$(cat)
  [ -z "$lines" ] || { printf 'check-layers: %s\n%s\n' "$1" "$lines"; bad=1; }
}
found "_Thread_local state in src/generators (a result must not depend on what ran before)" \
  < <(grep -rn "_Thread_local" src/generators || true)
found "a \"0.5x\" memory limit parsed outside the request module (src/request/mem_limit.c)" \
  < <(grep -rnE "(==|!=) *'[xX]'|'[xX]' *(==|!=)|endswith\([\"'][xX][\"']\)|in \([\"'][xX][\"'], *[\"'][xX][\"']\)" \
        src python/kaiten --include='*.c' --include='*.h' --include='*.py' | grep -v '^src/request/' || true)
found "src/runtime/worker.c asks schedule/ for chunk, peer and tag on every action (resolve.c does, once)" \
  < <(grep -n "kt_stage_chunk\|kt__stage_world_rank\|kt_output_consumer\|kt_result_consumer\|kt_tag(" \
        src/runtime/worker.c || true)
exit $bad
