#!/usr/bin/env bash
# Checks kaiten against PyTorch itself (torch.distributed.pipelining).
#
#   scripts/torch-oracle.sh install        create the venv and install torch
#   scripts/torch-oracle.sh run [ARGS]     run tests/oracle/ (installs first if needed)
#   scripts/torch-oracle.sh python [ARGS]  the venv's python (for bench scripts)
#
# The venv lives outside the repository (the torch wheel and its CUDA
# dependencies are about 5 GB): $KAITEN_TORCH_VENV, default
# ~/.cache/kaiten-torch-oracle. The torch version is $KAITEN_TORCH_SPEC
# (default torch==2.15.*). Not part of CI: nothing in `make test` needs torch.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${KAITEN_TORCH_VENV:-$HOME/.cache/kaiten-torch-oracle}"
spec="${KAITEN_TORCH_SPEC:-torch==2.15.*}"
python="${KAITEN_PYTHON:-python3}"

install() {
    if [ ! -x "$venv/bin/python" ]; then
        echo "torch-oracle: creating venv $venv"
        mkdir -p "$(dirname "$venv")"
        "$python" -m venv "$venv"
    fi
    if "$venv/bin/python" -c 'import torch, numpy' 2>/dev/null; then
        echo "torch-oracle: $("$venv/bin/python" -c 'import torch; print("torch", torch.__version__)') already in $venv"
        return 0
    fi
    echo "torch-oracle: installing $spec numpy into $venv (about 5 GB)"
    "$venv/bin/python" -m pip install --disable-pip-version-check -q --upgrade pip
    "$venv/bin/python" -m pip install --disable-pip-version-check "$spec" numpy
}

usage() {
    sed -n '4,7p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

cmd="${1:-run}"
[ $# -gt 0 ] && shift
case "$cmd" in
    install) install ;;
    run)
        install
        exec "$venv/bin/python" "$here/tests/oracle/run.py" --repo "$here" "$@"
        ;;
    python)
        install >&2
        exec "$venv/bin/python" "$@"
        ;;
    *) usage ;;
esac
