#!/usr/bin/env python3
"""Build the CUDA checker that scripts/gpu_check.sh runs on a GPU machine.

    python3 scripts/gpu_cases.py OUT_DIR [--burnc target/release/burnc] [--filter REGEX]

Compiles every case (the bundled MNIST model, the light models and each node case of the
conformance data) with
`burnc MODEL -o … --target cuda`, writes each case's inputs and expected outputs (the ONNX test
data, computed by the reference) as raw little-endian bytes, and builds one Rust binary,
OUT_DIR/run/gpu-check, that holds every generated module: run on a GPU it loads each, runs it and
compares. Cases burnc refuses for the CUDA target are listed in OUT_DIR/refused.tsv.
"""
import argparse
import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import onnx
from onnx import numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Element type names the checker compares (the module's `Outputs` field types).
RUST_TY = {
    np.float32: "f32", np.float64: "f64", np.int8: "i8", np.int16: "i16", np.int32: "i32", np.int64: "i64",
    np.uint8: "u8", np.uint16: "u16", np.uint32: "u32", np.uint64: "u64", np.bool_: "bool",
}


def cases(data):
    yield "mnist_cnn", os.path.join(ROOT, "examples/mnist/mnist_cnn.onnx"), [os.path.join(ROOT, "examples/mnist/input_0.pb")], [os.path.join(ROOT, "examples/mnist/expected_output_0.pb")]
    # The light models (their weights are constant fills, computed on the device), the
    # random-weight ones small enough to carry (the device call carries 64 MiB), node cases.
    dirs = []
    for sub, max_bytes in [("light", None), ("light_random", 8 << 20), ("node", None)]:
        top = os.path.join(data, sub)
        for name in sorted(os.listdir(top)) if os.path.isdir(top) else []:
            model = os.path.join(top, name, "model.onnx")
            if max_bytes is None or (os.path.exists(model) and os.path.getsize(model) <= max_bytes):
                dirs.append((top, name))
    # Node cases the interpreter passes: the rest (random masks, …) have no reference to meet.
    passing = set(open(os.path.join(ROOT, "tests/conformance/passlist.txt")).read().split())
    dirs = [(top, name) for top, name in dirs if not top.endswith("node") or f"node/{name}" in passing]
    for top, name in dirs:
        node = top
        d = os.path.join(node, name, "test_data_set_0")
        if not os.path.isdir(d):
            continue
        ins = sorted((f for f in os.listdir(d) if f.startswith("input_")), key=lambda f: int(f[6:-3]))
        outs = sorted((f for f in os.listdir(d) if f.startswith("output_")), key=lambda f: int(f[7:-3]))
        yield name, os.path.join(node, name, "model.onnx"), [os.path.join(d, f) for f in ins], [os.path.join(d, f) for f in outs]


def extra_cases(out):
    """scripts/gpu_bench_models.py's test models with onnxruntime's outputs as the reference:
    the small encoder (in bf16 its attention runs as the fused kernel, with partial query and
    key tiles) and the small CNN (in bf16 its convolutions run on wgmma, its image input
    packed NHWC)."""
    import onnxruntime as ort

    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import gpu_bench_models as bm

    for name, (model, x) in [("bert_encoder_small", bm.small_encoder()), ("small_cnn", bm.small_cnn())]:
        d = os.path.join(out, "extra", name)
        data = os.path.join(d, "test_data_set_0")
        os.makedirs(data, exist_ok=True)
        onnx.save(model, os.path.join(d, "model.onnx"))
        feed = model.graph.input[0].name
        want = ort.InferenceSession(os.path.join(d, "model.onnx"), providers=["CPUExecutionProvider"]).run(None, {feed: x})[0]
        for file, a in [("input_0.pb", x), ("output_0.pb", want)]:
            with open(os.path.join(data, file), "wb") as f:
                f.write(numpy_helper.from_array(a).SerializeToString())
        yield name, os.path.join(d, "model.onnx"), [os.path.join(data, "input_0.pb")], [os.path.join(data, "output_0.pb")]


def exported_cases(out):
    """The models PyTorch, TensorFlow (tf2onnx) and PaddlePaddle exported (tests/models/exported*)
    at every input size scripts/exported_refs.py runs them, onnxruntime's outputs as reference:
    `exported…_<model>_size_<k>`, f32 only."""
    for s in ["exported", "exported_tf", "exported_paddle"]:
        refs = os.path.join(out, "extra", s)
        models = os.path.join(ROOT, "tests", "models", s)
        r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "exported_refs.py"), refs, models], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"gpu_cases: exported_refs.py {s}: {r.stderr.strip()[-500:]}")
        for line in open(os.path.join(refs, "cases.txt")).read().splitlines():
            if not line.strip():
                continue
            model, case = line.split()[:2]
            d = os.path.join(refs, case)
            for npy, pb in [("x.npy", "input_0.pb"), ("y.npy", "output_0.pb")]:
                with open(os.path.join(d, pb), "wb") as f:
                    f.write(numpy_helper.from_array(np.load(os.path.join(d, npy))).SerializeToString())
            yield f"{s}_{case.replace('/', '_')}", os.path.join(models, model), [os.path.join(d, "input_0.pb")], [os.path.join(d, "output_0.pb")]


def with_reduced(all_cases):
    """Every case; the whole models (MNIST, the light models, the test models; not the
    exported ones, checked in f32) once more
    compiled with `--dtype bf16` as `<name>_bf16`; and those and the MatMul, Gemm and Conv node
    cases with `--tf32` as `<name>_tf32`: both compared with the same f32 reference at 1e-2."""
    for name, model, ins, outs in all_cases:
        yield name, model, ins, outs, "f32"
        if name.startswith("exported"):
            continue
        if not name.startswith("test_"):
            yield f"{name}_bf16", model, ins, outs, "bf16"
        if not name.startswith("test_") or re.match(r"test_(matmul_|gemm_|conv_)", name):
            yield f"{name}_tf32", model, ins, outs, "tf32"


def load_pb(path):
    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def prepare(args, name, model, ins, outs, dtype):
    """Compile one case; returns (ok, info)."""
    if not outs or os.path.exists(model) is False:
        return False, "no test data"
    m = onnx.load(model, load_external_data=False)
    graph_inputs = [i.name for i in m.graph.input if i.name not in {t.name for t in m.graph.initializer}]
    if len(graph_inputs) != len(ins):
        return False, "inputs and test data differ"
    try:
        xs = [load_pb(p) for p in ins]
        ys = [load_pb(p) for p in outs]
    except Exception as e:  # sequences, optionals: not tensors
        return False, f"test data: {e}"
    if any(a.dtype.type not in RUST_TY for a in xs + ys) or any(a.size == 0 for a in xs + ys):
        return False, "element type or empty tensor"
    case = os.path.join(args.out, "cases", name)
    os.makedirs(case, exist_ok=True)
    pins = []
    for n, a in zip(graph_inputs, xs):
        pins += ["--input", f"{n}={'x'.join(str(d) for d in a.shape) or '1'}"] if a.ndim else []
    floats = ["--dtype", "f32", "--tf32"] if dtype == "tf32" else ["--dtype", dtype]
    r = subprocess.run([args.burnc, model, "-o", os.path.join(case, "model.rs"), "--target", "cuda"] + floats + pins, capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        return False, (r.stderr.strip().splitlines() or ["failed"])[-1]
    for i, a in enumerate(xs):
        a.astype(a.dtype.newbyteorder("<")).tofile(os.path.join(case, f"in_{i}.bin"))
    for i, a in enumerate(ys):
        a.astype(a.dtype.newbyteorder("<")).tofile(os.path.join(case, f"exp_{i}.bin"))
    return True, {"dtype": dtype, "inputs": [(RUST_TY[a.dtype.type], int(a.size)) for a in xs], "outputs": [(RUST_TY[a.dtype.type], int(a.size)) for a in ys]}


MAIN_HEAD = r'''//! Generated by scripts/gpu_cases.py: every CUDA module of the check, run and compared with
//! the reference outputs (`‖out − ref‖ / ‖ref‖`).
#![allow(clippy::all, dead_code)]
use std::path::Path;

fn read<T: burnc_runtime::cuda::Plain>(p: &Path, n: usize) -> Vec<T> {
    let bytes = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let mut v = vec![T::default(); n];
    burnc_runtime::cuda::bytes_of_mut(&mut v).copy_from_slice(&bytes[..n * std::mem::size_of::<T>()]);
    v
}
/// Host-clock median of 200 graph replays (each waited for), after 20 warm-up ones: a first
/// look at speed; `burnc bench --target cuda` is where speed is measured.
fn median_us(mut t: Vec<f64>) -> f64 { t.sort_by(|a, b| a.total_cmp(b)); t[t.len() / 2] }
fn read_bool(p: &Path, n: usize) -> Vec<bool> {
    read::<u8>(p, n).into_iter().map(|b| b != 0).collect()
}
trait Replay { fn session(&mut self) -> &mut burnc_runtime::cuda::Session; }
fn time_replays<M: Replay>(m: &mut M) {
    let s = m.session();
    let mut t = Vec::new();
    for k in 0..220 {
        let start = std::time::Instant::now();
        s.run().expect("replay");
        s.synchronize().expect("sync");
        if k >= 20 { t.push(start.elapsed().as_secs_f64() * 1e6); }
    }
    println!("time median_us={:.1}", median_us(t));
}
trait AsF64 { fn f(&self) -> f64; }
macro_rules! as_f64 { ($($t:ty),*) => { $(impl AsF64 for $t { fn f(&self) -> f64 { *self as f64 } })* } }
as_f64!(f32, f64, i8, i16, i32, i64, u8, u16, u32, u64);
impl AsF64 for bool { fn f(&self) -> f64 { *self as u8 as f64 } }
/// (‖out − ref‖ / ‖ref‖ (the absolute norm when ref is 0), whether the output passes): it
/// passes when NaNs and infinities agree and either that error is at most `bound` (1e-4 for
/// f32 modules, 1e-2 for bf16 and TF32 ones) or every element is within the ONNX tests' tolerance
/// (rtol 1e-3, atol 1e-5; some reference outputs are stored rounded to 4 digits).
fn rel_err<T: AsF64>(out: &[T], want: &[T], bound: f64) -> (f64, bool) {
    let (mut d, mut r, mut special_ok, mut close) = (0.0f64, 0.0f64, true, true);
    for (o, w) in out.iter().zip(want) {
        let (o, w) = (o.f(), w.f());
        if w.is_nan() || o.is_nan() { special_ok &= w.is_nan() == o.is_nan(); continue; }
        if w.is_infinite() || o.is_infinite() { special_ok &= o == w; continue; }
        d += (o - w) * (o - w);
        r += w * w;
        close &= (o - w).abs() <= 1e-5 + 1e-3 * w.abs();
    }
    let e = if r > 0.0 { (d / r).sqrt() } else { d.sqrt() };
    (e, special_ok && out.len() == want.len() && (e <= bound || close))
}
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--burnc", default=os.path.join(ROOT, "target/release/burnc"))
    ap.add_argument("--data", default=os.environ.get("BURNC_CONFORMANCE_DATA", os.path.join(ROOT, "conformance-data")))
    ap.add_argument("--filter", default="")
    ap.add_argument("--max-case-bytes", type=int, default=32 << 20, help="cases with more data are built but not carried (the call carries the packed total)")
    args = ap.parse_args()
    args.out = os.path.abspath(args.out)
    os.makedirs(os.path.join(args.out, "cases"), exist_ok=True)
    all_cases = list(cases(args.data)) + list(extra_cases(args.out)) + list(exported_cases(args.out))
    todo = [c for c in with_reduced(all_cases) if re.search(args.filter, c[0])]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as ex:
        results = list(ex.map(lambda c: (c[0], prepare(args, *c)), todo))
    ok = [(n, info) for n, (good, info) in results if good]
    with open(os.path.join(args.out, "refused.tsv"), "w") as f:
        for n, (good, info) in results:
            if not good:
                f.write(f"{n}\t{info}\n")
    print(f"gpu_cases: compiled {len(ok)} of {len(todo)} cases for CUDA ({args.out}/refused.tsv lists the rest)")

    crate = os.path.join(args.out, "crate")
    os.makedirs(os.path.join(crate, "src"), exist_ok=True)
    main = [MAIN_HEAD]
    run_arms = []
    for k, (name, info) in enumerate(ok):
        case = os.path.join(args.out, "cases", name)
        main.append(f'#[path = {json.dumps(os.path.join(case, "model.rs"))}]\nmod m{k};\nimpl Replay for m{k}::Model {{ fn session(&mut self) -> &mut burnc_runtime::cuda::Session {{ m{k}::Model::session(self) }} }}\n')
        reads = []
        for i, (ty, n) in enumerate(info["inputs"]):
            rd = f'read_bool(&d.join("in_{i}.bin"), {n})' if ty == "bool" else f'read::<{ty}>(&d.join("in_{i}.bin"), {n})'
            reads.append(f"let in_{i}: Box<[{ty}; {n}]> = {rd}.into_boxed_slice().try_into().unwrap();")
        args_ = ", ".join(f"&in_{i}" for i in range(len(info["inputs"])))
        # The output fields as the module names them, in order.
        src = open(os.path.join(case, "model.rs")).read()
        fields = re.findall(r"pub (\w+):", src.split("pub struct Outputs {", 1)[1].split("}", 1)[0])
        cmps = []
        for i, (ty, n) in enumerate(info["outputs"]):
            rd = f'read_bool(&d.join("exp_{i}.bin"), {n})' if ty == "bool" else f'read::<{ty}>(&d.join("exp_{i}.bin"), {n})'
            cmps.append(f"{{ let w = {rd}; let o = &out.{fields[i]}; let (e, pass) = rel_err(o, &w, BOUND_{k}); worst = worst.max(e); ok &= pass; }}")
        bound = "1e-4" if info["dtype"] == "f32" else "1e-2"
        main.append(
            f"const BOUND_{k}: f64 = {bound};\n"
            f"fn run_{k}(d: &Path) -> Result<(f64, bool), String> {{\n"
            f"    let w = std::fs::read(d.join(\"model.bin\")).map_err(|e| e.to_string())?;\n"
            f"    let mut m = m{k}::Model::with_weights(0, &w).map_err(|e| e.to_string())?;\n"
            + "".join(f"    {r}\n" for r in reads)
            + f"    let out = m.forward({args_}).map_err(|e| e.to_string())?;\n"
            f"    let (mut worst, mut ok) = (0.0f64, true);\n"
            + "".join(f"    {c}\n" for c in cmps)
            + ("    time_replays(&mut m);\n" if not name.startswith("test_") else "")
            + "    Ok((worst, ok))\n}\n"
        )
        run_arms.append(f'    ({json.dumps(name)}, {json.dumps(info["dtype"])}, run_{k} as fn(&Path) -> Result<(f64, bool), String>),')
    text = "".join(main)
    text += "\nconst CASES: &[(&str, &str, fn(&Path) -> Result<(f64, bool), String>)] = &[\n" + "\n".join(run_arms) + "\n];\n"
    text += r'''
fn main() {
    let root = std::path::PathBuf::from(std::env::args().nth(1).expect("usage: gpu-check CASES_DIR"));
    let (mut passed, mut worst_f32, mut worst_bf16, mut worst_tf32) = (0usize, 0.0f64, None::<f64>, None::<f64>);
    let mut skipped = 0;
    for (name, dtype, run) in CASES {
        let d = root.join(name);
        if !d.is_dir() {
            println!("skip {name} (its data was not carried)");
            skipped += 1;
            continue;
        }
        match std::panic::catch_unwind(|| run(&d)) {
            Ok(Ok((e, ok))) => {
                passed += ok as usize;
                match *dtype {
                    "bf16" => worst_bf16 = Some(worst_bf16.unwrap_or(0.0).max(e)),
                    "tf32" => worst_tf32 = Some(worst_tf32.unwrap_or(0.0).max(e)),
                    _ => worst_f32 = worst_f32.max(e),
                }
                println!("{} {name} rel_err={e:.3e}", if ok { "ok  " } else { "FAIL" });
            }
            Ok(Err(e)) => println!("FAIL {name} error: {e}"),
            Err(_) => println!("FAIL {name} panicked"),
        }
    }
    println!("skipped {skipped} cases whose data was not carried");
    let bf16 = worst_bf16.map_or("NA".to_string(), |e| format!("{e:.3e}"));
    println!("worst_rel_err_tf32={}", worst_tf32.map_or("NA".to_string(), |e| format!("{e:.3e}")));
    println!("gpu_check: passed={passed} total={} worst_rel_err_bf16={bf16} worst_rel_err_f32={worst_f32:.3e}", CASES.len() - skipped);
}
'''
    open(os.path.join(crate, "src", "main.rs"), "w").write(text)
    open(os.path.join(crate, "Cargo.toml"), "w").write(
        '[package]\nname = "gpu-check"\nversion = "0.0.0"\nedition = "2021"\npublish = false\n\n'
        f'[dependencies]\nburnc-runtime = {{ path = {json.dumps(os.path.join(ROOT, "runtime"))}, features = ["cuda"] }}\n\n'
        '[profile.release]\ndebug = false\ncodegen-units = 16\nopt-level = 1\n\n[workspace]\n'
    )
    r = subprocess.run(["cargo", "build", "--release", "--quiet", "--manifest-path", os.path.join(crate, "Cargo.toml"), "--target-dir", os.path.join(ROOT, "target", "gpu-check")])
    if r.returncode != 0:
        sys.exit("gpu_cases: building the checker failed")
    # What the GPU machine needs, apart from what the sources need: OUT_DIR/run (the device
    # call carries it): the checker (PTX embedded) and each case's weights, inputs and outputs,
    # packed as OUT_DIR/run/check.tar.xz (about a fifth of their 100+ MB: a call carries 64 MiB).
    import shutil
    files = os.path.join(args.out, "run-files")
    shutil.rmtree(files, ignore_errors=True)
    os.makedirs(os.path.join(files, "cases"))
    run = files
    shutil.copy(os.path.join(ROOT, "target", "gpu-check", "release", "gpu-check"), os.path.join(run, "gpu-check"))
    for name, _ in ok:
        src, dst = os.path.join(args.out, "cases", name), os.path.join(run, "cases", name)
        bins = [f for f in os.listdir(src) if f.endswith(".bin")]
        if sum(os.path.getsize(os.path.join(src, f)) for f in bins) > args.max_case_bytes:
            print(f"gpu_cases: {name} is not carried (over {args.max_case_bytes} bytes of data)")
            continue
        os.makedirs(dst)
        for f in bins:
            shutil.copy(os.path.join(src, f), os.path.join(dst, f))
    packed = os.path.join(args.out, "run")
    shutil.rmtree(packed, ignore_errors=True)
    os.makedirs(packed)
    r = subprocess.run(f"tar -C {json.dumps(files)} -cf - gpu-check cases | xz -T0 -1 > {json.dumps(os.path.join(packed, 'check.tar.xz'))}", shell=True)
    if r.returncode != 0:
        sys.exit("gpu_cases: packing the checker failed")
    print(f"gpu_cases: built {packed}/check.tar.xz (the checker and its cases)")


if __name__ == "__main__":
    main()
