#!/usr/bin/env bash
# On a machine with an NVIDIA GPU, from the repository root, after scripts/gpu_prepare.sh ran
# where Rust is (the device call carries gpu/bench/run): burnc, PyTorch eager and torch.compile
# (reduce-overhead) on ResNet-50 and MiniLM-L6, batch 1 and 64, f32 and bf16, in one run. The
# last line is
#   gpu_bench: bf16_geomean_vs_torch_compile=<burnc/torch.compile time, geomean over bf16 configs>
#   scripts/gpu_bench.sh [--iters N] [--only REGEX]
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f gpu/bench/run/configs.json ] || { echo "gpu_bench: gpu/bench/run is missing: run scripts/gpu_prepare.sh first" >&2; exit 2; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /' || true
export PYTHONUNBUFFERED=1
python3 scripts/gpu_bench.py gpu/bench/run "$@"
