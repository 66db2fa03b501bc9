#!/usr/bin/env bash
# `pip install ./python` as a user runs it: a fresh venv, no package index
# (the in-tree build backend downloads nothing), the C library built by
# CMake; then the README's Python example runs from another folder, with
# nothing of the repository on its path, and prints what it promises.
#   test_install.sh PYTHON BUILD_DIR   (BUILD_DIR keeps the CMake build: reruns are incremental)
set -u
PY=$1 WB=$2
. "$(dirname "$0")/../lib.sh"
[ -n "${KT_SANITIZE:-}" ] && { echo "test_python_install: SKIP: sanitizer build"; exit 77; }
"$PY" -m venv "$tmp/venv" >"$tmp/venv.log" 2>&1 ||
  { echo "test_python_install: SKIP: no venv with pip ($(tail -1 "$tmp/venv.log")); scripts/deps.sh installs python3-venv"; exit 77; }
cd "$KT_SOURCE" || exit 1
"$tmp/venv/bin/pip" install --no-index --disable-pip-version-check -q --config-settings "build-dir=$WB" ./python \
  >"$tmp/pip.log" 2>&1 && ok || bad "pip install ./python: $(tail -5 "$tmp/pip.log")"
site=$("$tmp/venv/bin/python" -c 'import kaiten, os; print(os.path.dirname(kaiten.__file__))' 2>&1)
case "$site" in "$tmp/venv"/*) ok ;; *) bad "kaiten imported from $site, not the venv" ;; esac
[ -f "$site/_native/libkaiten_ffi.so" ] && ok || bad "no libkaiten_ffi.so in the installed package"
# the README's example: the python block after the python-example marker
awk '/<!-- python-example -->/{on=1; next} on && /^```python/{code=1; next} code && /^```/{exit} code' \
  "$KT_SOURCE/README.md" >"$tmp/example.py"
[ -s "$tmp/example.py" ] && ok || bad "no Python example in README.md"
mkdir -p "$tmp/elsewhere"
(cd "$tmp/elsewhere" && env -u PYTHONPATH -u KAITEN_LIB_DIR "$tmp/venv/bin/python" "$tmp/example.py") \
  >"$tmp/out" 2>"$tmp/err" && ok || bad "the README example failed: $(tail -5 "$tmp/err")"
has "zb-auto: makespan" "$tmp/out"
has "lower bound " "$tmp/out"
has "rank 3 |" "$tmp/out"
has "fastest: " "$tmp/out"
[ -s "$tmp/elsewhere/zb_auto.csv" ] && ok || bad "the example wrote no zb_auto.csv"
grep -q "SEND_F" "$tmp/elsewhere/zb_auto.csv" && ok || bad "zb_auto.csv is not the lowered form"
finish test_python_install
