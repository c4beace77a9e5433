#!/usr/bin/env bash
# Build-time benchmark (not a test; issue 20's table): a user crate whose build.rs compiles a
# model with `burnc::Build` (release), timed for a cold build (burnc, the runtime and every
# dependency included), a rebuild after one weight of the ONNX file changes, after a graph edit
# (one Relu made a LeakyRelu), after an edit of the user's main.rs, and a no-op rebuild. Peak
# RSS of the largest process (rustc) from /usr/bin/time. Prints the CPU first.
#
# usage: scripts/bench_build_crate.sh [MODEL.onnx] [include|link]
#   MODEL defaults to the random-weight ResNet-50 of the light suite; `include` compiles the
#   module with `.link_weights(false)` (the blob through include_bytes!), `link` (default)
#   with the weights as a linked static library.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
model="${1:-$root/conformance-data/light_random/light_resnet50_random/model.onnx}"
mode="${2:-link}"
work="$root/target/bench-build-crate-$mode"
rm -rf "$work"
mkdir -p "$work/src"
cp "$model" "$work/model.onnx"
link=true
[ "$mode" = include ] && link=false

cat > "$work/Cargo.toml" <<TOML
[package]
name = "bench-build-crate"
version = "0.0.0"
edition = "2021"
publish = false
[dependencies]
burnc-runtime = { path = "$root/runtime", features = ["std"] }
[build-dependencies]
burnc = { path = "$root", default-features = false }
[workspace]
TOML
# The profile docs/BUILD_SPEED.md recommends: burnc-runtime at release's opt-level even where
# it is a build dependency (burnc packs and transforms weights with its kernels when a weights
# or graph edit reruns build.rs); everything else in the build script at cargo's default, for
# a fast cold build. BURNC_BENCH_PROFILE=default leaves it out; BURNC_BENCH_OVERRIDES replaces it.
if [ "${BURNC_BENCH_PROFILE:-recommended}" = recommended ]; then
    cat >> "$work/Cargo.toml" <<TOML
${BURNC_BENCH_OVERRIDES:-[profile.release.package.burnc-runtime]
opt-level = 3}
TOML
fi
cat > "$work/build.rs" <<RS
fn main() -> Result<(), burnc::BuildError> {
    burnc::Build::new("model.onnx").name("model").link_weights($link).compile()?;
    Ok(())
}
RS
cat > "$work/src/main.rs" <<'RS'
#[allow(dead_code, unused_labels, clippy::all)]
mod model {
    burnc_runtime::include_model!("model");
}
fn main() {
    let m = model::Model::new();
    println!("{} arena bytes, {} weights bytes, model at {:p}", model::ARENA_BYTES, model::WEIGHTS_BYTES, &m);
}
RS

echo "cpu: $(lscpu | sed -n 's/^Model name: *//p') family $(lscpu | sed -n 's/^CPU family: *//p') model $(lscpu | sed -n 's/^Model: *//p'), $(nproc) cores"
echo "model: $model ($mode)"
step() {
    local label="$1"
    /usr/bin/time -f "%e %M" -o "$work/time" cargo build --release --quiet --manifest-path "$work/Cargo.toml" --target-dir "$work/target"
    read -r secs kb < "$work/time"
    echo "$label: ${secs} s, peak ${kb} KB"
}
step cold
step noop
python3 - "$work/model.onnx" weight <<'PY'
import sys, onnx, numpy as np
from onnx import numpy_helper
path, what = sys.argv[1], sys.argv[2]
m = onnx.load(path)
if what == "weight":
    t = m.graph.initializer[0]
    a = numpy_helper.to_array(t).copy()
    a.flat[0] += 1.0
    t.CopyFrom(numpy_helper.from_array(a, t.name))
else:
    n = next(n for n in m.graph.node if n.op_type == "Relu")
    n.op_type = "LeakyRelu"
onnx.save(m, path)
PY
step weights_edit
python3 - "$work/model.onnx" graph <<'PY'
import sys, onnx
path = sys.argv[1]
m = onnx.load(path)
n = next(n for n in m.graph.node if n.op_type == "Relu")
n.op_type = "LeakyRelu"
onnx.save(m, path)
PY
step graph_edit
sed -i 's/arena bytes/arena bytes (edited)/' "$work/src/main.rs"
step user_edit
"$work/target/release/bench-build-crate"
ls -la "$work/target/release/build/"bench-build-crate-*/out/ | grep -E 'model|lib'
