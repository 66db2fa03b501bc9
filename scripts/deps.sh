#!/usr/bin/env bash
# Installs the Debian packages kaiten needs, only those that are missing.
# Idempotent and quiet when everything is present. Set KAITEN_SKIP_DEPS=1 to skip.
set -euo pipefail
[ "${KAITEN_SKIP_DEPS:-0}" = 1 ] && exit 0

# clang, lld, wasi-libc and libclang-rt-dev-wasm32 build the in-page
# simulator (kaiten's core for wasm32-wasi, src/web/wasm.cmake) that every
# HTML report carries.
pkgs=(build-essential cmake pkg-config libopenblas-dev libcjson-dev
      openmpi-bin libopenmpi-dev libmicrohttpd-dev iproute2
      clang lld wasi-libc libclang-rt-dev-wasm32
      python3 python3-venv # the Python package's tests and `pip install ./python` in a venv
      clang-format)        # scripts/check-format.sh: the tree as .clang-format writes it
# Optional, for tests that skip without them: headless Chromium renders the
# HTML reports and the live page, tmux gives the live view a terminal.
# BLIS and oneDNN: GEMM libraries `kaiten train --gemm auto` times beside
# OpenBLAS on the model's own matmuls (loaded at run time when present;
# without them every matmul runs on OpenBLAS).
optional=(chromium tmux libblis4-pthread libdnnl2)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
missing_opt=()
for p in "${optional[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing_opt+=("$p")
done
[ ${#missing[@]} -eq 0 ] && [ ${#missing_opt[@]} -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null; then sudo="sudo"; else
    echo "deps.sh: missing packages (${missing[*]} ${missing_opt[*]}) and not root; install them with apt-get" >&2
    [ ${#missing[@]} -eq 0 ] && exit 0 || exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
echo "deps.sh: installing ${missing[*]} ${missing_opt[*]}" >&2
$sudo apt-get update -qq >/dev/null || true
if [ ${#missing[@]} -gt 0 ]; then
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
for p in "${missing_opt[@]}"; do # one at a time: one missing from the archive stops no other
  $sudo apt-get install -y -qq --no-install-recommends "$p" >/dev/null \
    || echo "deps.sh: optional $p could not be installed; what needs it is skipped (chromium, tmux: their tests; libblis4-pthread, libdnnl2: --gemm blis, onednn)" >&2
done
