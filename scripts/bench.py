#!/usr/bin/env python3
"""CPU latency benchmark: burnc's generated code vs onnxruntime (1 and 2 threads) vs tract.

For each model: one set of deterministic inputs (numpy, seeded: floats uniform in [-1, 1),
integers 0, bools false) is fed to every engine. burnc's harness is built once with
`burnc bench --work-dir` (release, LTO, target-cpu=native) and then run directly. Each round
runs every engine for --iters timed runs (after --warmup untimed ones) and keeps the median;
engines are interleaved inside a round (their order rotates between rounds) so machine noise
hits them alike, with a pause before each so the previous engine's idle threads are asleep.
The table shows the median of the round medians, ratios burnc/other, and geometric means; `max|d|` is burnc's largest absolute difference from onnxruntime's outputs
(in parentheses divided by the largest |output|: random-weight models have large outputs).

    scripts/setup_bench.sh            # onnx, onnxruntime, numpy, tract (pip)
    scripts/bench.py                  # the default models, 3 rounds
    scripts/bench.py --set real --threads 2  # the real-model set (scripts/make_real_models.py)
    scripts/bench.py --set int8 --threads 2  # QDQ int8 models (scripts/make_int8_models.py)
    scripts/bench.py --rounds 5 --iters 10 path/to/model.onnx --sgemm

Not a test: numbers depend on the machine and its load. burnc runs on one thread for now.
"""
import argparse
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# numpy's BLAS on one thread: the SGEMM comparison is against burnc's single-threaded kernel.
# (onnxruntime and tract keep their own thread settings.)
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(var, "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# Seconds between two engines' measurements (see the round loop).
SETTLE_S = 0.2
DEFAULT_LIGHT = [
    "light_resnet50",
    "light_squeezenet",
    "light_densenet121",
    "light_inception_v1",
    "light_shufflenet",
    "light_vgg19",
]


def data_dir():
    d = os.environ.get("BURNC_CONFORMANCE_DATA")
    return Path(d) if d else ROOT / "conformance-data"


def default_models():
    models = []
    light = data_dir() / "light_random"
    for name in DEFAULT_LIGHT:
        p = light / f"{name}_random" / "model.onnx"
        if p.exists():
            models.append(p)
        else:
            print(f"note: {p} not found (make it with scripts/gen_light_random.py, or set "
                  f"BURNC_CONFORMANCE_DATA); skipping {name}", file=sys.stderr)
    models.append(ROOT / "examples/mnist/mnist_cnn.onnx")
    return models


def real_models():
    """The real-model set (scripts/make_real_models.py), made once into the cache."""
    cache = Path(os.environ.get("BURNC_CACHE_DIR") or Path.home() / ".cache" / "burnc") / "real-models"
    script = ROOT / "scripts" / "make_real_models.py"
    import make_real_models
    missing = [n for n in make_real_models.MODELS if not (cache / n / "model.onnx").exists()]
    if missing:
        subprocess.run([sys.executable, str(script), str(cache), "--only", *missing], check=True)
    return [cache / n / "model.onnx" for n in make_real_models.MODELS]


def int8_models():
    """The int8 set (scripts/make_int8_models.py: QDQ models of the light and real sets), made
    once into the cache."""
    cache = Path(os.environ.get("BURNC_CACHE_DIR") or Path.home() / ".cache" / "burnc") / "int8-models"
    names = ["resnet50_qdq", "mobilenetv3_qdq", "minilm_qdq"]
    if any(not (cache / n / "model.onnx").exists() for n in names):
        real_models()  # the float sources of two of them
        subprocess.run([sys.executable, str(ROOT / "scripts" / "make_int8_models.py"), str(cache),
                        "--light", str(data_dir() / "light_random")], check=True)
    return [cache / n / "model.onnx" for n in names if (cache / n / "model.onnx").exists()]


def cpu_line():
    """The CPU (model name, vendor, family and model numbers), recorded with every run."""
    info = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            info.setdefault(key.strip(), value.strip())
    except OSError:
        return f"CPU: unknown ({os.uname().machine})"
    fam = info.get("cpu family", "?")
    return (f"CPU: {info.get('model name', '?')} ({info.get('vendor_id', '?')}, family {fam}"
            f" (0x{int(fam):x}), model {info.get('model', '?')}), {os.cpu_count()} logical CPUs" if fam.isdigit()
            else f"CPU: {info.get('model name', info.get('CPU part', '?'))}, {os.cpu_count()} logical CPUs")


def find_burnc(arg):
    if arg:
        return Path(arg)
    if os.environ.get("BURNC"):
        return Path(os.environ["BURNC"])
    print("building burnc (cargo build --release --bin burnc) ...", file=sys.stderr)
    subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "burnc"], cwd=ROOT, check=True)
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    return target / "release" / "burnc"


ORT_TYPES = {
    "tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
    "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int16)": np.int16,
    "tensor(int8)": np.int8, "tensor(uint8)": np.uint8, "tensor(uint16)": np.uint16,
    "tensor(uint32)": np.uint32, "tensor(uint64)": np.uint64, "tensor(bool)": np.bool_,
}
TRACT_TYPES = {np.float32: "f32", np.float64: "f64", np.float16: "f16", np.int64: "i64", np.int32: "i32",
               np.int16: "i16", np.int8: "i8", np.uint8: "u8", np.uint16: "u16", np.uint32: "u32",
               np.uint64: "u64", np.bool_: "bool"}


def make_inputs(sess, pins):
    """Deterministic inputs from the session's input declarations (symbolic dims: --input or 1)."""
    rng = np.random.default_rng(0)
    feeds = {}
    for i in sess.get_inputs():
        dtype = ORT_TYPES.get(i.type)
        if dtype is None:
            raise SystemExit(f"input `{i.name}` has type {i.type}, which this script does not generate")
        shape = pins.get(i.name) or [d if isinstance(d, int) else 1 for d in i.shape]
        if np.issubdtype(dtype, np.floating):
            feeds[i.name] = rng.uniform(-1.0, 1.0, size=shape).astype(dtype)
        else:
            feeds[i.name] = np.zeros(shape, dtype=dtype)
    return feeds


def timed(fn, iters, warmup):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iters):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


class Ort:
    def __init__(self, model, threads):
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.sess = ort.InferenceSession(str(model), so, providers=["CPUExecutionProvider"])

    def run(self, feeds):
        return self.sess.run(None, feeds)

    def median(self, feeds, iters, warmup):
        return timed(lambda: self.sess.run(None, feeds), iters, warmup)


class Tract:
    def __init__(self, model, feeds):
        import tract
        m = tract.onnx().load(str(model))
        for k, (name, v) in enumerate(feeds.items()):
            dims = ",".join(str(d) for d in v.shape)
            m.set_input_fact(k, f"{dims},{TRACT_TYPES[v.dtype.type]}" if dims else TRACT_TYPES[v.dtype.type])
        self.model = m.into_model().into_runnable()
        self.inputs = list(feeds.values())

    def run(self):
        return [t.to_numpy() for t in self.model.run(self.inputs)]

    def median(self, iters, warmup):
        return timed(lambda: self.model.run(self.inputs), iters, warmup)


class Burnc:
    def __init__(self, burnc, model, feeds, work, threads=1):
        self.threads = threads
        args = [str(burnc), "bench", str(model), "--iters", "2", "--warmup", "0", "--min-ms", "0",
                "--threads", str(threads), "--work-dir", str(work)]
        for name, v in feeds.items():
            f = work.parent / f"{work.name}_{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}.npy"
            np.save(f, v)
            args += ["--input", f"{name}={f}"]
        t = time.perf_counter()
        out = subprocess.run(args, capture_output=True, text=True)
        if out.returncode != 0:
            raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "burnc bench failed")
        self.build_s = time.perf_counter() - t
        m = re.search(r"^harness: (.+)$", out.stdout, re.M)
        if not m:
            raise RuntimeError(f"burnc bench printed no harness path:\n{out.stdout}")
        self.bin = m.group(1)
        self.work = work

    def median(self, iters, warmup):
        env = {**os.environ, "BURNC_THREADS": str(self.threads)}
        out = subprocess.run([self.bin, str(self.work), str(iters), str(warmup), "0"],
                             capture_output=True, text=True, check=True, env=env)
        last = out.stdout.strip().splitlines()[-1]
        if not last.startswith("median_ms="):
            raise RuntimeError(f"harness printed `{last}`")
        return float(last.split("=", 1)[1])

    def outputs(self, like):
        """The harness's out_<i>.bin, typed and shaped like onnxruntime's outputs."""
        res = []
        for i, ref in enumerate(like):
            ref = np.asarray(ref)
            res.append(np.fromfile(self.work / f"out_{i}.bin", dtype=ref.dtype).reshape(ref.shape))
        return res


def max_abs_diff(got, want):
    """(largest |got - want|, that divided by the largest |want|) over all outputs."""
    worst, scale = 0.0, 0.0
    for g, w in zip(got, want):
        g, w = np.asarray(g, dtype=np.float64), np.asarray(w, dtype=np.float64)
        if g.shape != w.shape:
            return math.inf, math.inf
        if g.size:
            worst = max(worst, float(np.nanmax(np.abs(g - w))))
            scale = max(scale, float(np.nanmax(np.abs(w))))
    return worst, worst / scale if scale > 0 else worst


def diff_str(d):
    return f"{d[0]:.1e} ({d[1]:.0e})"


def geomean(xs):
    xs = [x for x in xs if x is not None and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def fmt(x, digits=2):
    if x is None:
        return "-"
    if x >= 100:
        return f"{x:.1f}"
    return f"{x:.{digits}f}" if x >= 1 else f"{x:.{digits + 2}f}"


def bench_model(model, args, burnc, tract_ok, tmp):
    import onnxruntime  # noqa: F401  (fail early with a clear error)
    print(f"== {model}", file=sys.stderr)
    engines = {"ort-1t": Ort(model, 1), "ort-2t": Ort(model, 2)}
    feeds = make_inputs(engines["ort-1t"].sess, args.pins)
    ref = engines["ort-1t"].run(feeds)
    row = {"model": model.parent.name if model.name == "model.onnx" else model.stem}
    runners = {}
    try:
        b = Burnc(burnc, model, feeds, tmp / f"w{abs(hash(str(model)))}")
        print(f"   burnc build {b.build_s:.1f} s", file=sys.stderr)
        runners["burnc"] = lambda: b.median(args.iters, args.warmup)
        row["diff"] = max_abs_diff(b.outputs(ref), ref)
    except (RuntimeError, subprocess.CalledProcessError) as e:
        print(f"   burnc failed: {e}", file=sys.stderr)
        row["note"] = "burnc failed"
    if args.threads > 1 and "burnc" in runners:
        try:
            b2 = Burnc(burnc, model, feeds, tmp / f"w{abs(hash(str(model)))}-mt", args.threads)
            runners["burnc-mt"] = lambda: b2.median(args.iters, args.warmup)
            row["mt_diff"] = max_abs_diff(b2.outputs(ref), ref)
        except (RuntimeError, subprocess.CalledProcessError) as e:
            print(f"   burnc --threads {args.threads} failed: {e}", file=sys.stderr)
    for name in ("ort-1t", "ort-2t"):
        runners[name] = (lambda e: lambda: e.median(feeds, args.iters, args.warmup))(engines[name])
    if tract_ok:
        try:
            t = Tract(model, feeds)
            row["tract_diff"] = max_abs_diff(t.run(), ref)
            runners["tract"] = lambda: t.median(args.iters, args.warmup)
        except Exception as e:  # tract's errors are its own TractError / ctypes errors
            print(f"   tract failed: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
    samples = {k: [] for k in runners}
    order = list(runners)
    for r in range(args.rounds):
        for k in order[r % len(order):] + order[:r % len(order)]:
            # Let the engine that ran before go idle first: onnxruntime's workers keep
            # spinning ~30 ms after a run (measured with /proc/self/task/*/stat), which took a
            # core from a 2-thread burnc harness started in that window (MobileNetV3 1.08 ms
            # instead of 0.69).
            time.sleep(SETTLE_S)
            samples[k].append(runners[k]())
        print("   round %d: %s" % (r + 1, "  ".join(f"{k} {samples[k][-1]:.2f}" for k in runners)), file=sys.stderr)
    for k, v in samples.items():
        row[k] = statistics.median(v)
    return row


def bench_sgemm(args, burnc, n=1024):
    """burnc runtime's sgemm (via `burnc bench --sgemm N`) vs numpy's matmul, both one thread."""
    a = np.random.default_rng(0).uniform(-1, 1, (n, n)).astype(np.float32)
    b = np.random.default_rng(1).uniform(-1, 1, (n, n)).astype(np.float32)
    c = np.empty((n, n), np.float32)
    burnc_ms, numpy_ms = [], []
    for _ in range(args.rounds):
        out = subprocess.run([str(burnc), "bench", "--sgemm", str(n), "--iters", str(args.iters),
                              "--warmup", str(args.warmup), "--min-ms", "0"], capture_output=True, text=True, check=True)
        burnc_ms.append(float(out.stdout.strip().splitlines()[-1].split("=", 1)[1]))
        numpy_ms.append(timed(lambda: np.matmul(a, b, out=c), args.iters, args.warmup))
    gf = lambda ms: 2 * n**3 / (ms * 1e-3) / 1e9  # noqa: E731
    bm, nm = statistics.median(burnc_ms), statistics.median(numpy_ms)
    print(f"\nSGEMM {n}x{n}x{n} f32, one thread, median of {args.rounds} rounds of {args.iters}:")
    print("| engine | median ms | GFLOP/s |")
    print("|---|---:|---:|")
    print(f"| burnc runtime sgemm | {bm:.2f} | {gf(bm):.1f} |")
    print(f"| numpy matmul (OpenBLAS, 1 thread) | {nm:.2f} | {gf(nm):.1f} |")
    print(f"burnc/numpy = {bm / nm:.2f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", type=Path, help="ONNX models (default: the set --set names)")
    ap.add_argument("--set", choices=["light", "real", "int8"], default="light",
                    help="default models: light (the light_*_random CNNs and MNIST), real "
                         "(scripts/make_real_models.py: encoder, CRNN, SVTR, DBNet, YOLO, MobileNetV3, LSTM, 1-D conv) "
                         "or int8 (scripts/make_int8_models.py: QDQ ResNet-50, MobileNetV3, MiniLM)")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    ap.add_argument("--iters", type=int, default=5, help="timed runs per engine per round (default 5)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed runs before each timed batch (default 2)")
    ap.add_argument("--input", action="append", default=[], metavar="NAME=DIMS",
                    help="dims for an input with symbolic dims (default: 1 for each)")
    ap.add_argument("--burnc", help="burnc binary (default: $BURNC, else cargo build --release)")
    ap.add_argument("--no-tract", action="store_true", help="skip tract")
    ap.add_argument("--threads", type=int, default=1,
                    help="also run burnc with N threads (column burnc-mt, compared with ort-2t)")
    ap.add_argument("--sgemm", action="store_true", help="also compare burnc's SGEMM 1024^3 with numpy's")
    ap.add_argument("--sgemm-only", action="store_true", help="only the SGEMM comparison")
    args = ap.parse_args()
    args.pins = {}
    for p in args.input:
        name, _, dims = p.partition("=")
        args.pins[name] = [int(d) for d in re.split(r"[x,]", dims) if d]
    if args.rounds < 1 or args.iters < 1:
        ap.error("--rounds and --iters must be at least 1")
    burnc = find_burnc(args.burnc)
    print(cpu_line(), flush=True)
    if args.sgemm_only:
        bench_sgemm(args, burnc)
        return
    tract_ok = False
    if not args.no_tract:
        try:
            import tract
            tract_ok = True
            tract_version = tract.version()
        except Exception as e:
            print(f"note: tract is not available ({e}); skipping it (scripts/setup_bench.sh installs it)",
                  file=sys.stderr)
    import onnxruntime
    sets = {"real": real_models, "int8": int8_models, "light": default_models}
    models = args.models or sets[args.set]()
    rows = []
    with tempfile.TemporaryDirectory(prefix="burnc-bench-") as tmp:
        for m in models:
            rows.append(bench_model(m, args, burnc, tract_ok, Path(tmp)))

    cols = ["burnc"] + (["burnc-mt"] if args.threads > 1 else []) + ["ort-1t", "ort-2t"] + (["tract"] if tract_ok else [])
    versions = f"onnxruntime {onnxruntime.__version__}" + (f", tract {tract_version}" if tract_ok else "")
    print(f"\nMedian latency in ms (median of {args.rounds} interleaved rounds of {args.iters} runs, "
          f"{args.warmup} warm-up); burnc single-threaded; {versions}.")
    ratio_cols = [c for c in cols if not c.startswith("burnc")]
    head = ["model"] + cols + [f"burnc/{c}" for c in ratio_cols] + ["max\\|d\\| vs ort (rel.)"]
    print("| " + " | ".join(head) + " |")
    print("|---" + "|---:" * (len(head) - 1) + "|")
    ratios = {c: [] for c in ratio_cols}
    for r in rows:
        cells = [r["model"]] + [fmt(r.get(c)) for c in cols]
        for c in ratio_cols:
            q = r["burnc"] / r[c] if r.get("burnc") and r.get(c) else None
            ratios[c].append(q)
            cells.append(f"{q:.2f}" if q is not None else "-")
        cells.append(diff_str(r["diff"]) if "diff" in r else r.get("note", "-"))
        print("| " + " | ".join(cells) + " |")
    gm = ["geomean"] + [fmt(geomean([r.get(c) for r in rows])) for c in cols] + [f"{geomean(ratios[c]):.2f}" if geomean(ratios[c]) else "-" for c in ratio_cols] + [""]
    print("| " + " | ".join(gm) + " |")
    if args.threads > 1:
        mt = [r["burnc-mt"] / r["ort-2t"] for r in rows if r.get("burnc-mt") and r.get("ort-2t")]
        print(f"burnc with {args.threads} threads / ort-2t: " + ", ".join(f"{r['model']} {r['burnc-mt'] / r['ort-2t']:.2f}" for r in rows if r.get("burnc-mt") and r.get("ort-2t"))
              + (f"; geomean {geomean(mt):.2f}" if mt else ""))
    if any("mt_diff" in r for r in rows):
        diffs = ", ".join(f"{r['model']} {diff_str(r['mt_diff'])}" for r in rows if "mt_diff" in r)
        print(f"burnc-mt max|d| vs ort (rel.): {diffs}")
    if tract_ok:
        diffs = ", ".join(f"{r['model']} {diff_str(r['tract_diff'])}" for r in rows if "tract_diff" in r)
        print(f"\ntract max|d| vs ort (rel.): {diffs}")
    if args.sgemm:
        bench_sgemm(args, burnc)


if __name__ == "__main__":
    main()
