#!/usr/bin/env bash
# Compile-time benchmark (not a test): how long `burnc MODEL -o model.rs` takes, and how long
# `cargo build --release` takes for a crate holding the generated module (dependencies built
# beforehand, so only the model's crate is timed). Median of RUNS runs.
#
# usage: scripts/bench_compile.sh [MODEL.onnx] [RUNS]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
model="${1:-$root/conformance-data/light/light_resnet50/model.onnx}"
runs="${2:-5}"
work="$root/target/bench-compile"
mkdir -p "$work/crate/src"
cargo build --release --quiet --manifest-path "$root/Cargo.toml" --bin burnc
burnc="$root/target/release/burnc"

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
now() { date +%s.%N; }

# 1. burnc itself.
for _ in $(seq "$runs"); do
    t0=$(now); "$burnc" "$model" -o "$work/crate/src/model.rs" >/dev/null; t1=$(now)
    awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }'
done | median > "$work/burnc_s"
"$burnc" "$model" -o "$work/crate/src/model.rs"
lines=$(wc -l < "$work/crate/src/model.rs")

# 2. rustc on the generated module.
cat > "$work/crate/Cargo.toml" <<TOML
[package]
name = "bench-model"
version = "0.0.0"
edition = "2021"
publish = false
[dependencies]
burnc-runtime = { path = "$root/runtime", features = ["std"] }
[workspace]
TOML
cat > "$work/crate/src/main.rs" <<'RS'
#[allow(dead_code, unused_labels)]
mod model;
fn main() {
    let m = model::Model::new();
    println!("{} arena bytes, model at {:p}", model::ARENA_BYTES, &m);
}
RS
cargo build --release --quiet --manifest-path "$work/crate/Cargo.toml" --target-dir "$work/target"
for _ in $(seq "$runs"); do
    touch "$work/crate/src/model.rs"
    t0=$(now); cargo build --release --quiet --manifest-path "$work/crate/Cargo.toml" --target-dir "$work/target"; t1=$(now)
    awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }'
done | median > "$work/rustc_s"
echo "model: $model"
echo "generated: $lines lines, $(stat -c %s "$work/crate/src/model.bin") bytes of weights"
echo "burnc_median_s=$(cat "$work/burnc_s")"
echo "cargo_build_release_median_s=$(cat "$work/rustc_s")"
