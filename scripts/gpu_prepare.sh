#!/usr/bin/env bash
# Build, on this machine, everything scripts/gpu_check.sh runs on a GPU machine (which has no
# Rust toolchain): every case compiled for --target cuda with its inputs and reference outputs,
# and the checker binary, under gpu/ (ignored by git); the device call carries gpu/run.
#   scripts/gpu_prepare.sh [--filter REGEX]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_python.sh >/dev/null
export BURNC_CONFORMANCE_DATA="${BURNC_CONFORMANCE_DATA:-$PWD/conformance-data}"
if [ ! -d "$BURNC_CONFORMANCE_DATA/node" ]; then
  python3 scripts/gen_conformance.py "$BURNC_CONFORMANCE_DATA"
fi
cargo build --release --quiet
rm -rf gpu/cases
python3 scripts/gpu_cases.py gpu "$@"
du -sh gpu/run | cut -f1 | sed 's/^/gpu_prepare: gpu\/run (to carry) holds /'
