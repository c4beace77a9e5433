#!/usr/bin/env bash
# Build-time benchmark of the macro frontend (not a test; issue 20's MiniLM row):
# examples/minilm, whose src/model.rs writes all-MiniLM-L6-v2 with #[derive(Model)]/#[model],
# rebuilt in release after an edit of its forward (one constant changed, then changed back),
# after `touch src/model.rs` (same tokens: the expansion cache answers) and after an edit of
# main.rs. Peak RSS of the largest process from /usr/bin/time. Prints the CPU first. The
# workspace's profile builds this package incrementally in release (Cargo.toml);
# `--no-incremental` times cargo's plain release profile instead.
#
# usage: scripts/bench_build_macro.sh [--no-incremental]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
[ -f examples/minilm/model/model.safetensors ] || bash examples/minilm/setup.sh
cfg=()
if [ "${1:-}" = --no-incremental ]; then
  cfg=(--config 'profile.release.package.minilm.incremental=false')
fi
model=examples/minilm/src/model.rs
main=examples/minilm/src/main.rs
cp "$model" "$model.bench-orig"
restore() { mv -f "$model.bench-orig" "$model"; }
trap restore EXIT
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p') (family $(lscpu | sed -n 's/^CPU family: *//p'), model $(lscpu | sed -n 's/^Model: *//p')), $(nproc) cores"
timed() {
  local what="$1"
  /usr/bin/time -f "%e %M" -o /tmp/bench_build_macro.time cargo build "${cfg[@]}" --release -p minilm --quiet
  read -r secs kb < /tmp/bench_build_macro.time
  printf '%-34s %6.2f s  peak %5d MB\n' "$what" "$secs" "$((kb / 1024))"
}
cargo build "${cfg[@]}" --release -p minilm --quiet
timed "no-op"
sed -i 's/clamp_min(1e-12)$/clamp_min(1e-11)/' "$model"
grep -q 'clamp_min(1e-11)$' "$model" || { echo "bench_build_macro: the edit did not apply" >&2; exit 1; }
timed "forward edit"
cp "$model.bench-orig" "$model"
timed "forward edit back"
touch "$model"
timed "touch model.rs (cached expansion)"
touch "$main"
timed "touch main.rs"
