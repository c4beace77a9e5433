#!/usr/bin/env bash
# Build, on this machine, everything scripts/gpu_check.sh and scripts/gpu_bench.sh run on a GPU
# machine (which has no Rust toolchain), under gpu/ (ignored by git):
#   gpu/run        the checker: every case compiled for --target cuda, inputs, reference outputs
#                  (the device call for gpu_check.sh carries it)
#   gpu/bench/run  the benchmark harnesses (burnc bench --target cuda --build-only) and burnc
#                  (the device call for gpu_bench.sh carries it)
# Each stays under the 64 MiB a device call carries.
#   scripts/gpu_prepare.sh [--filter REGEX]    (the filter picks check cases)
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
python3 scripts/gpu_bench_prepare.py gpu/bench
du -sh gpu/run | cut -f1 | sed 's/^/gpu_prepare: gpu\/run (to carry for gpu_check.sh) holds /'
du -sh gpu/bench/run | cut -f1 | sed 's/^/gpu_prepare: gpu\/bench\/run (to carry for gpu_bench.sh) holds /'
