#!/usr/bin/env python3
"""Run the generated modules of the snapshot models under Miri: undefined behaviour in
generated code or in the runtime kernels it calls (an out-of-bounds view, overlapping mutable
views, a misaligned read) stops the run.

Usage: scripts/miri_snapshots.py [MODEL ...]   (default: every tests/models/snapshots/*.onnx)

Installs the pinned nightly toolchain with Miri when it is missing (Miri exists only on
nightly; the project itself builds on stable; BURNC_MIRI_TOOLCHAIN overrides the pin), compiles each model with `target/debug/burnc` (built
here), writes a runner crate under target/miri-snapshots/ that calls every
module's `forward` on deterministic inputs, and runs it with `cargo +TOOLCHAIN miri run`. Prints
one line per model and exits non-zero when Miri reports anything.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
WORK = os.path.join(ROOT, "target", "miri-snapshots")
TOOLCHAIN = os.environ.get("BURNC_MIRI_TOOLCHAIN", "nightly-2026-10-30")
RUST_TYPES = {"f32": "f32", "f64": "f64", "i64": "i64", "i32": "i32", "i8": "i8", "u8": "u8", "bool": "u8"}


def sh(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, **kw)


def ensure_nightly_miri() -> None:
    have = subprocess.run(["cargo", f"+{TOOLCHAIN}", "miri", "--version"], capture_output=True)
    if have.returncode != 0:
        sh(["rustup", "toolchain", "install", TOOLCHAIN, "--profile", "minimal", "--component", "miri,rust-src"])
    sh(["cargo", f"+{TOOLCHAIN}", "miri", "setup"], stdout=subprocess.DEVNULL)


def header_inputs(source: str) -> list[tuple[str, int]]:
    """(Rust element type, element count) of each input, from the module's header comment."""
    out = []
    for m in re.finditer(r"^// input  `.*`: (\w+) \[([0-9, ]*)\]$", source, re.M):
        dims = [int(d) for d in m.group(2).split(",") if d.strip()]
        n = 1
        for d in dims:
            n *= d
        out.append((RUST_TYPES.get(m.group(1), "f32"), n))
    return out


def main() -> int:
    models = sys.argv[1:] or sorted(
        os.path.join(ROOT, "tests", "models", "snapshots", f)
        for f in os.listdir(os.path.join(ROOT, "tests", "models", "snapshots"))
        if f.endswith(".onnx")
    )
    # The debug build emits the same code and is already there after `cargo test`.
    sh(["cargo", "build", "--quiet", "--bin", "burnc"], cwd=ROOT)
    burnc = os.path.join(ROOT, "target", "debug", "burnc")
    ensure_nightly_miri()
    src = os.path.join(WORK, "src")
    os.makedirs(src, exist_ok=True)
    mods, calls = [], []
    for path in models:
        stem = os.path.splitext(os.path.basename(path))[0]
        pins = ["--input", "x=2x3x4x4"] if stem == "shape_fold" else []
        sh([burnc, path, "-o", os.path.join(src, f"{stem}.rs"), *pins], stdout=subprocess.DEVNULL)
        with open(os.path.join(src, f"{stem}.rs")) as f:
            ins = header_inputs(f.read())
        args = []
        for k, (ty, n) in enumerate(ins):
            value = f"((i % 7) as {ty})" if ty.startswith(("i", "u")) else f"((i % 7) as {ty} * 0.25 - 0.5)"
            calls.append(f"    let in_{stem}_{k}: Box<[{ty}; {n}]> = Box::new(core::array::from_fn(|i| {value}));")
            args.append(f"&in_{stem}_{k}")
        mods.append(f"mod {stem} {{\n    include!(\"{stem}.rs\");\n}}")
        calls.append(f"    let mut arena_{stem} = Box::new({stem}::Arena::new());")
        calls.append(f"    let _ = {stem}::Model::new().forward(&mut arena_{stem}, {', '.join(args)});")
        calls.append(f'    println!("{stem}: forward ran under Miri");')
    with open(os.path.join(src, "main.rs"), "w") as f:
        f.write("#![allow(dead_code, clippy::all)]\n" + "\n".join(mods) + "\n\nfn main() {\n" + "\n".join(calls) + "\n}\n")
    runtime = os.path.join(ROOT, "runtime")
    with open(os.path.join(WORK, "Cargo.toml"), "w") as f:
        f.write(
            '[package]\nname = "miri-snapshots"\nversion = "0.0.0"\nedition = "2021"\npublish = false\n\n'
            f'[dependencies]\nburnc-runtime = {{ path = "{runtime}" }}\n'
            # libm's x86 sqrt is inline assembly, which Miri cannot run: its portable code instead.
            'libm = { version = "0.2", features = ["force-soft-floats"] }\n\n[workspace]\n'
        )
    env = {**os.environ, "MIRIFLAGS": os.environ.get("MIRIFLAGS", "-Zmiri-disable-isolation")}
    # A target folder per toolchain: artifacts of another nightly confuse its sysroot.
    target = os.path.join(WORK, f"target-{TOOLCHAIN}")
    r = subprocess.run(["cargo", f"+{TOOLCHAIN}", "miri", "run", "--quiet", "--target-dir", target], cwd=WORK, env=env)
    print(f"miri: {len(models)} modules, exit {r.returncode}")
    return r.returncode


if __name__ == "__main__":
    sys.exit(main())
