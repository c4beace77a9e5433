#!/usr/bin/env bash
# Builds the page into www/pkg/: the wasm module three times, each through wasm-bindgen: with
# SIMD128 (`www/pkg/simd`), without (`www/pkg/scalar`), and with SIMD128 and the WebGPU path
# (`www/pkg/webgpu`, feature `webgpu`: the model compiled with `--target wgpu` too); and the
# native reference `native-digits`. Installs what it needs: the wasm32 Rust target, and wasm-bindgen-cli at the
# exact version Cargo.toml pins (into the target dir, not the system). Prints the sizes.
# Idempotent; CARGO_TARGET_DIR is honoured (default: the repository's target/).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
target="${CARGO_TARGET_DIR:-$root/target}/web-digits"
cd "$here"

if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
    rustup target add wasm32-unknown-unknown
fi
version="$(sed -n 's/^wasm-bindgen = "=\([0-9.]*\)"$/\1/p' Cargo.toml)"
[ -n "$version" ] || { echo "build.sh: no pinned wasm-bindgen version in Cargo.toml" >&2; exit 1; }
bindgen="$target/tools/bin/wasm-bindgen"
if [ "$("$bindgen" --version 2>/dev/null)" != "wasm-bindgen $version" ]; then
    echo "build.sh: installing wasm-bindgen-cli $version" >&2
    cargo install --quiet wasm-bindgen-cli --version "=$version" --root "$target/tools"
fi

# One target dir for both builds: the host side (burnc itself, the build script) is built once;
# only the wasm crates are rebuilt for the other flags.
for variant in scalar simd webgpu; do
    features=()
    case $variant in
        simd) flags="-C target-feature=+simd128" ;;
        scalar) flags="-C target-feature=-simd128" ;;
        # Every browser with WebGPU has SIMD128.
        webgpu) flags="-C target-feature=+simd128" features=(--features webgpu) ;;
    esac
    CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS="$flags" \
        cargo build --quiet --release --lib "${features[@]}" --target wasm32-unknown-unknown --target-dir "$target/wasm"
    rm -rf "www/pkg/$variant"
    "$bindgen" --target web --no-typescript --out-dir "www/pkg/$variant" \
        "$target/wasm/wasm32-unknown-unknown/release/web_digits.wasm"
    wasm="www/pkg/$variant/web_digits_bg.wasm"
    echo "build.sh: $variant: $wasm $(wc -c <"$wasm") bytes, $(gzip -9c "$wasm" | wc -c) gzipped" >&2
done
cargo build --quiet --release --bin native-digits --target-dir "$target/native"
echo "build.sh: native reference $target/native/release/native-digits" >&2
