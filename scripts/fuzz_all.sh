#!/usr/bin/env bash
# Runs every fuzz target for SECONDS (default 600) each, two at a time (the machine's cores),
# and prints each target's executions and findings. Needs cargo-fuzz
# (`cargo install cargo-fuzz --locked`); RUSTC_BOOTSTRAP=1 lets stable take the sanitizer
# flags. Findings land in fuzz/artifacts/<target>/; a reproducer runs with
# `cargo fuzz run -O -a <target> fuzz/artifacts/<target>/<file>` (-a: overflow checks on).
# Usage: scripts/fuzz_all.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
secs=${1:-600}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(onnx_load graph_compile safetensors_load pytorch_load)
export RUSTC_BOOTSTRAP=1
cargo fuzz build -O -a
mkdir -p logs corpus
seed() {
    case "$1" in
        onnx_load) mkdir -p corpus/onnx_load && cp ../tests/models/snapshots/*.onnx ../examples/mnist/*.onnx corpus/onnx_load/ 2>/dev/null || true ;;
        pytorch_load) mkdir -p corpus/pytorch_load && cp ../tests/data/pytorch/*.pt corpus/pytorch_load/ 2>/dev/null || true ;;
        *) mkdir -p "corpus/$1" ;;
    esac
}
run() {
    seed "$1"
    cargo fuzz run -O -a "$1" "corpus/$1" -- -max_total_time="$secs" -rss_limit_mb=4096 -timeout=30 -print_final_stats=1 >"logs/$1.log" 2>&1 || true
    local execs crashes
    execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "logs/$1.log" | awk '{print $2}' | tail -1)
    crashes=$(ls "artifacts/$1" 2>/dev/null | wc -l)
    echo "$1: ${execs:-?} executions in ${secs}s, ${crashes} findings (fuzz/artifacts/$1, log fuzz/logs/$1.log)"
}
for ((i = 0; i < ${#targets[@]}; i += 2)); do
    run "${targets[i]}" &
    if [ $((i + 1)) -lt ${#targets[@]} ]; then run "${targets[i + 1]}" & fi
    wait
done
