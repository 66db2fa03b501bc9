#!/usr/bin/env bash
# Runs test_torch_varlen.py with the torch venv's python
# (scripts/torch-oracle.sh install); skips (77) without it or in
# sanitizer builds (an instrumented library does not load into python).
set -u
py="${KAITEN_TORCH_VENV:-$HOME/.cache/kaiten-torch-oracle}/bin/python"
if [ -n "${KT_SANITIZE:-}" ]; then echo "test_torch_varlen: SKIP: sanitizer build"; exit 77; fi
if [ ! -x "$py" ]; then echo "test_torch_varlen: SKIP: no torch venv at $py"; exit 77; fi
exec timeout 300 "$py" "$(dirname "$0")/test_torch_varlen.py"
