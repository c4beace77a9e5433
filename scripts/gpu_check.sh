#!/usr/bin/env bash
# On a machine with an NVIDIA GPU, from the repository root, after scripts/gpu_prepare.sh ran
# where Rust is: run every case compiled for --target cuda and compare it with the reference
# outputs. The last line is
#   gpu_check: passed=<n> total=<n> worst_rel_err_bf16=<x> worst_rel_err_f32=<x>
set -euo pipefail
cd "$(dirname "$0")/.."
[ -f gpu/run/check.tar.xz ] || { echo "gpu_check: gpu/run/check.tar.xz is missing: run scripts/gpu_prepare.sh first" >&2; exit 2; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /' || true
# The checker and its cases travel packed (scripts/gpu_cases.py): unpack them outside the tree.
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
xz -dc gpu/run/check.tar.xz | tar -C "$dir" -xf -
"$dir/gpu-check" "$dir/cases"
