#!/usr/bin/env bash
# Installs what tests/aarch64.rs and the runtime's aarch64 unit tests need (idempotent):
# Debian's aarch64 cross GCC (the linker) with its libc, qemu-user (qemu-aarch64 runs the
# binaries) and Rust's aarch64-unknown-linux-gnu standard library.
set -euo pipefail
if ! command -v aarch64-linux-gnu-gcc >/dev/null || ! command -v qemu-aarch64 >/dev/null \
    || [ ! -d /usr/aarch64-linux-gnu/lib ]; then
    echo "setup_aarch64.sh: apt-installing the aarch64 cross toolchain and qemu-user" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user >/dev/null
fi
if ! rustup target list --installed | grep -x aarch64-unknown-linux-gnu >/dev/null; then
    rustup target add aarch64-unknown-linux-gnu
fi
