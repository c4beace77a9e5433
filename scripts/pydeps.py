"""Shared by the project's scripts: make sure the pinned Python packages are importable.

`ensure("numpy", "onnx")` returns when the modules import; otherwise it runs
scripts/setup_python.sh (pip-installs scripts/requirements.txt for this interpreter) once and
re-executes the calling script, so a fresh machine needs no manual setup.
"""
import importlib
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def ensure(*modules: str) -> None:
    try:
        for m in modules:
            importlib.import_module(m)
        return
    except ImportError:
        pass
    if os.environ.get("BURNC_PY_SETUP_DONE"):
        sys.exit(f"python packages {', '.join(modules)} still missing after scripts/setup_python.sh")
    subprocess.check_call(["bash", os.path.join(HERE, "setup_python.sh")], env={**os.environ, "PYTHON": sys.executable})
    os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "BURNC_PY_SETUP_DONE": "1"})
