#!/usr/bin/env python3
"""The tiny-model check of issue 5: an MLP 784-32-10 (Gemm, Relu, Gemm; batch 1) through
burnc's generated code vs hand-written Rust loops doing the same arithmetic (a plain one, and
one with 8 accumulators per dot product), built with the same
compiler settings (opt-level 3, one codegen unit, fat LTO, -C target-cpu=native), interleaved
rounds, median per-call latency of each. Prints each round and, last, `ratio=<burnc / the faster hand loop>`.

Usage: scripts/bench_tiny_mlp.py [--rounds 5] [--iters 20000] [--burnc PATH]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


sys.path.insert(0, HERE)
from pydeps import ensure  # noqa: E402

ensure("numpy", "onnx")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

HAND = r"""
// The same MLP written by hand: y = W2 · relu(W1 · x + b1) + b2, weights as the ONNX file
// stores them (W1 [32][784], W2 [10][32], Gemm transB=1), one dot product per output.
const W: &[u8] = include_bytes!("weights.bin");
fn f32s(b: &[u8]) -> Vec<f32> { b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect() }
fn mlp(x: &[f32; 784], w1: &[f32], b1: &[f32], w2: &[f32], b2: &[f32], y: &mut [f32; 10]) {
    let mut h = [0f32; 32];
    for j in 0..32 {
        let row = &w1[j * 784..(j + 1) * 784];
        let mut acc = b1[j];
        for i in 0..784 { acc += row[i] * x[i]; }
        h[j] = acc.max(0.0);
    }
    for k in 0..10 {
        let row = &w2[k * 32..(k + 1) * 32];
        let mut acc = b2[k];
        for j in 0..32 { acc += row[j] * h[j]; }
        y[k] = acc;
    }
}
/// The same with 8 interleaved accumulators per dot product, as someone tuning it would write
/// (the plain loop's single accumulator is a chain of dependent adds the compiler may not reorder).
fn mlp_fast(x: &[f32; 784], w1: &[f32], b1: &[f32], w2: &[f32], b2: &[f32], y: &mut [f32; 10]) {
    fn dot(a: &[f32], b: &[f32]) -> f32 {
        let mut acc = [0f32; 8];
        for (ac, bc) in a.chunks_exact(8).zip(b.chunks_exact(8)) {
            for l in 0..8 { acc[l] += ac[l] * bc[l]; }
        }
        let split = a.len() / 8 * 8;
        let mut s: f32 = acc.iter().sum();
        for i in split..a.len() { s += a[i] * b[i]; }
        s
    }
    let mut h = [0f32; 32];
    for j in 0..32 { h[j] = (b1[j] + dot(&w1[j * 784..(j + 1) * 784], x)).max(0.0); }
    for k in 0..10 { y[k] = b2[k] + dot(&w2[k * 32..(k + 1) * 32], &h); }
}
fn time(iters: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..iters / 10 { f(); }
    let mut t = Vec::with_capacity(iters);
    for _ in 0..iters {
        let s = std::time::Instant::now();
        f();
        t.push(s.elapsed().as_secs_f64() * 1e3);
    }
    t.sort_by(|a, b| a.total_cmp(b));
    t[t.len() / 2]
}
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let iters: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(10000);
    let all = f32s(W);
    let (w1, rest) = all.split_at(784 * 32);
    let (b1, rest) = rest.split_at(32);
    let (w2, b2) = rest.split_at(320);
    let mut x = [0f32; 784];
    for (i, v) in x.iter_mut().enumerate() { *v = ((i * 37) % 101) as f32 / 101.0 - 0.5; }
    let mut y = [0f32; 10];
    let plain = time(iters, || { mlp(std::hint::black_box(&x), w1, b1, w2, b2, &mut y); std::hint::black_box(&y); });
    let y_plain = y;
    let fast = time(iters, || { mlp_fast(std::hint::black_box(&x), w1, b1, w2, b2, &mut y); std::hint::black_box(&y); });
    for k in 0..10 { assert!((y[k] - y_plain[k]).abs() <= 1e-4 * y_plain[k].abs().max(1.0), "the two loops disagree"); }
    println!("plain_ms={plain:.6}");
    println!("median_ms={fast:.6}");
}
"""


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def last_median(text):
    m = re.findall(r"median_ms=([0-9.eE+-]+)", text)
    if not m:
        sys.exit("no median_ms in:\n" + text)
    return float(m[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20000)
    ap.add_argument("--burnc", default=os.environ.get("BURNC"))
    a = ap.parse_args()
    burnc = a.burnc
    if not burnc:
        subprocess.check_call(["cargo", "build", "--release", "--quiet"], cwd=ROOT)
        burnc = os.path.join(ROOT, "target", "release", "burnc")
    tmp = tempfile.mkdtemp(prefix="burnc-tiny-mlp-")
    try:
        rng = np.random.default_rng(0)
        w1 = (rng.standard_normal((32, 784)) * 0.05).astype(np.float32)
        b1 = (rng.standard_normal(32) * 0.1).astype(np.float32)
        w2 = (rng.standard_normal((10, 32)) * 0.2).astype(np.float32)
        b2 = (rng.standard_normal(10) * 0.1).astype(np.float32)
        inits = [numpy_helper.from_array(v, n) for v, n in [(w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2")]]
        nodes = [
            helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1),
            helper.make_node("Relu", ["h"], ["r"]),
            helper.make_node("Gemm", ["r", "w2", "b2"], ["y"], transB=1),
        ]
        g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 784])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)
        model = os.path.join(tmp, "mlp.onnx")
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), model)

        hand = os.path.join(tmp, "hand")
        os.makedirs(os.path.join(hand, "src"))
        with open(os.path.join(hand, "Cargo.toml"), "w") as f:
            f.write('[package]\nname = "hand"\nversion = "0.0.0"\nedition = "2021"\n[workspace]\n'
                    '[profile.release]\nopt-level = 3\ncodegen-units = 1\nlto = "fat"\npanic = "abort"\n')
        with open(os.path.join(hand, "src", "weights.bin"), "wb") as f:
            f.write(np.concatenate([w1.ravel(), b1, w2.ravel(), b2]).astype("<f4").tobytes())
        with open(os.path.join(hand, "src", "main.rs"), "w") as f:
            f.write(HAND)
        env = {**os.environ, "RUSTFLAGS": "-C target-cpu=native"}
        subprocess.check_call(["cargo", "build", "--release", "--quiet"], cwd=hand, env=env)
        hand_bin = os.path.join(hand, "target", "release", "hand")

        work = os.path.join(tmp, "work")
        out = subprocess.run([burnc, "bench", model, "--iters", "10", "--min-ms", "0", "--work-dir", work],
                             capture_output=True, text=True, check=True).stdout
        harness = re.search(r"harness: (\S+)", out).group(1)
        b_ms, h_ms, p_ms = [], [], []
        for r in range(a.rounds):
            bo = subprocess.run([harness, work, str(a.iters), str(a.iters // 10), "0"], capture_output=True, text=True, check=True).stdout
            ho = subprocess.run([hand_bin, str(a.iters)], capture_output=True, text=True, check=True).stdout
            b_ms.append(last_median(bo))
            h_ms.append(last_median(ho))
            p_ms.append(float(re.search(r"plain_ms=([0-9.eE+-]+)", ho).group(1)))
            print(f"round {r + 1}: burnc {b_ms[-1] * 1e3:.2f} us, hand loop {p_ms[-1] * 1e3:.2f} us, hand loop with 8 accumulators {h_ms[-1] * 1e3:.2f} us")
        b, h, p = median(b_ms), median(h_ms), median(p_ms)
        print(f"MLP 784-32-10 batch 1 (medians of {a.rounds} rounds): burnc {b * 1e3:.2f} us; hand-written loop {p * 1e3:.2f} us "
              f"(burnc/hand {b / p:.3f}); with 8 accumulators {h * 1e3:.2f} us (burnc/hand {b / h:.3f})")
        # The contract line compares with the faster hand loop.
        print(f"ratio={b / min(h, p):.3f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
