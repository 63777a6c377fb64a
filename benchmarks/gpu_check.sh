#!/usr/bin/env bash
# GPU check: runs the GPU tests and the matmul sweep, then prints a table (shape, dtype,
# achieved TFLOP/s, fraction of the measured peak). Works from a fresh copy of the repository.
#
#   bash benchmarks/gpu_check.sh
#
# Environment: PYTHON (default python3), VENV (default .venv).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"

has_cuda_torch() {  # $1: interpreter
  "$1" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1
}
has_test_deps() {  # $1: interpreter
  "$1" -c 'import numpy, pytest' >/dev/null 2>&1
}

# requirements.lock pins the CPU build of torch, so a venv made from it alone cannot use the GPU:
# use an interpreter whose torch already sees the GPU, adding the other requirements if needed.
PY=""
for candidate in "$VENV/bin/python" "$PYTHON"; do
  if [ -x "$(command -v "$candidate" 2>/dev/null || echo "$candidate")" ] && has_cuda_torch "$candidate"; then
    PY=$candidate
    break
  fi
done
if [ -z "$PY" ]; then
  command -v nvidia-smi >/dev/null 2>&1 || echo "no NVIDIA GPU found (nvidia-smi is missing); this check needs one" >&2
  echo "No torch with CUDA support is installed. requirements.lock pins the CPU build of torch;" >&2
  echo "install a CUDA build of torch 2.13 for $PYTHON (pytorch.org lists the index URL for your driver)," >&2
  echo "then run this script again." >&2
  exit 2
fi
if ! has_test_deps "$PY"; then
  CHECK_VENV=.venv-gpu-check
  echo "$PY has CUDA torch but lacks numpy/pytest: creating $CHECK_VENV on top of it"
  "$PY" -m venv --system-site-packages "$CHECK_VENV"
  grep -v -E '^(torch|nvidia-|triton)' requirements.lock > "$CHECK_VENV/requirements-no-torch.txt"
  if ! "$CHECK_VENV/bin/pip" install --quiet -r "$CHECK_VENV/requirements-no-torch.txt"; then
    echo "could not install the requirements (offline?); install numpy and pytest for $PY and retry" >&2
    exit 2
  fi
  PY="$CHECK_VENV/bin/python"
fi

"$PY" -c 'import torch; print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}")'

# GPU tests (conftest skipped: these tests need only torch, numpy and pytest), then the sweep; table last.
timeout 180 "$PY" -m pytest tests/test_gpu.py -q -p no:xdist -p no:cacheprovider --noconftest
timeout 120 "$PY" benchmarks/matmul_sweep.py
