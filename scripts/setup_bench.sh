#!/usr/bin/env bash
# Installs what scripts/bench.py needs: scripts/requirements.txt (via setup_python.sh) and
# scripts/requirements-bench.txt (tract). Quiet and idempotent, like setup_python.sh; same
# interpreter ($PYTHON, else python3) and the same plain `pip install`.
# A tract that does not install is reported, not fatal: bench.py then skips tract.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
PY="${PYTHON:-python3}"
"$here/setup_python.sh"
check='import tract, sys; sys.exit(0 if tract.version() == "0.23.9" else 1)'
if "$PY" -c "$check" >/dev/null 2>&1; then
    exit 0
fi
echo "setup_bench.sh: pip-installing $here/requirements-bench.txt for $PY" >&2
if ! "$PY" -m pip install --quiet --disable-pip-version-check -r "$here/requirements-bench.txt"; then
    echo "setup_bench.sh: tract did not install; scripts/bench.py will skip it" >&2
    exit 0
fi
"$PY" -c "$check" || echo "setup_bench.sh: tract installed but is not importable; scripts/bench.py will skip it" >&2
