#!/usr/bin/env bash
# Installs the Python packages of scripts/requirements.txt (quietly, idempotent).
# Fast path: does nothing when the pinned onnx / onnxruntime are importable.
# Interpreter: $PYTHON, else python3.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY="${PYTHON:-python3}"
check='import onnx, onnxruntime, numpy, sys, importlib.metadata as m; sys.exit(0 if (onnx.__version__, onnxruntime.__version__, m.version("nvidia-cuda-nvrtc"), m.version("onnx-ir")) == ("1.23.2", "1.32.0", "13.0.88", "1.1.0") else 1)'
if "$PY" -c "$check" >/dev/null 2>&1; then
    exit 0
fi
echo "setup_python.sh: pip-installing $here/requirements.txt for $PY" >&2
"$PY" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt"
"$PY" -c "$check" || { echo "setup_python.sh: pinned packages still not importable" >&2; exit 1; }
