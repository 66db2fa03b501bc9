#!/usr/bin/env bash
# kaiten's AVX2 GEMM (src/nn/gemm_tiles_avx2.c) in this tree against the
# same file at another revision, in one process (bench/tiles_ab.c), on the
# larger GPT's products: the way to tell a change to the kernel from the
# host's noise, which moves separate runs by more than such a change does.
# Both copies are compiled with the project's flags for the file (-O3,
# loops on 64-byte lines), the old one against this tree's headers.
# Usage: tiles_ab.sh REV [ROUNDS] [BUILD_DIR]   (e.g. tiles_ab.sh HEAD~1 40)
set -euo pipefail
usage="usage: tiles_ab.sh REV [ROUNDS] [BUILD_DIR]"
rev=${1:?$usage}
rounds=${2:-40}
root=$(cd "$(dirname "$0")/.." && pwd)
B=${3:-$root/build}
if [ ! -f "$B/libkaiten.a" ]; then
  echo "tiles_ab.sh: no $B/libkaiten.a: build first (make build)" >&2
  exit 2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! git -C "$root" show "$rev:src/nn/gemm_tiles_avx2.c" >"$tmp/old.c" 2>/dev/null; then
  echo "tiles_ab.sh: no src/nn/gemm_tiles_avx2.c at revision '$rev'" >&2
  exit 2
fi
flags=(-O3 -fno-math-errno -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE
  -falign-loops=64 -I"$root/src" -I"$root/include")
cc "${flags[@]}" -Dkt__tiles_avx2_sgemm=kt_ab_sgemm -c "$tmp/old.c" -o "$tmp/old.o"
cc "${flags[@]}" -Wall -Wextra "$root/bench/tiles_ab.c" "$tmp/old.o" "$B/libkaiten.a" \
  -lm -lpthread -ldl -o "$tmp/tiles_ab"
echo "# old: src/nn/gemm_tiles_avx2.c at $rev ($(git -C "$root" rev-parse --short "$rev")); new: this tree"
"$tmp/tiles_ab" "$rounds"
