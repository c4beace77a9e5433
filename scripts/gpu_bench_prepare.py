#!/usr/bin/env python3
"""Build, on this machine, what scripts/gpu_bench.sh runs on a GPU machine (which has no Rust).

    python3 scripts/gpu_bench_prepare.py OUT_DIR [--burnc target/release/burnc] [--only REGEX]

For each configuration (ResNet-50 and MiniLM-L6; batch 1 and 64; CUDA in f32, bf16 and TF32,
and the wgpu target in f32) it builds the `burnc bench` harness (`--build-only`) and records,
in OUT_DIR/run/configs.json,
the SHA-256 of the weights blob the module was compiled against. OUT_DIR/run (the device call
carries it) holds the harnesses and the burnc binary: the models' weights (hundreds of MB) are
not carried but rebuilt there from the seed of scripts/gpu_bench_models.py, their blob by that
burnc, and checked against the hashes.
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import gpu_bench_models as bm  # noqa: E402

# (model, input name, input dims after the batch)
MODELS = [("resnet50", "input", [3, 224, 224]), ("minilm", "input_ids", [bm.SEQ])]
BATCHES = [1, 64]
# tf32: f32 with `--tf32` (PyTorch with allow_tf32 on the other side); wgpu: the wgpu target
# (WGSL through Vulkan) in f32.
DTYPES = ["f32", "bf16", "tf32", "wgpu"]


def floats_args(dtype):
    """burnc's target and dtype flags for a configuration's dtype."""
    if dtype == "wgpu":
        return ["--target", "wgpu"]
    return ["--target", "cuda"] + (["--dtype", "f32", "--tf32"] if dtype == "tf32" else ["--dtype", dtype])


def configs():
    for model, inp, dims in MODELS:
        for batch in BATCHES:
            for dtype in DTYPES:
                yield {"name": f"{model}-bs{batch}-{dtype}", "model": model, "batch": batch, "dtype": dtype, "input": inp, "dims": "x".join(str(d) for d in [batch] + dims)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--burnc", default=os.path.join(ROOT, "target/release/burnc"))
    ap.add_argument("--only", default="", help="configurations whose name matches REGEX")
    args = ap.parse_args()
    out = os.path.abspath(args.out)
    models, work, run = (os.path.join(out, d) for d in ("models", "work", "run"))
    import onnx

    os.makedirs(models, exist_ok=True)
    for name, (params, build, _, _) in bm.MODELS.items():
        path = os.path.join(models, f"{name}.onnx")
        onnx.save(build(params()), path)
    shutil.rmtree(run, ignore_errors=True)
    os.makedirs(run)
    done = []
    import re

    for c in [c for c in configs() if re.search(args.only, c["name"])]:
        wd = os.path.join(work, c["name"])
        cmd = [args.burnc, "bench", os.path.join(models, f"{c['model']}.onnx")] + floats_args(c["dtype"]) + ["--input", f"{c['input']}={c['dims']}", "--work-dir", wd, "--build-only"]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"gpu_bench_prepare: {c['name']}: {r.stderr.strip() or r.stdout.strip()}")
        harness = [l.split(": ", 1)[1] for l in r.stdout.splitlines() if l.startswith("harness: ")][0]
        os.makedirs(os.path.join(run, c["name"]))
        shutil.copy(harness, os.path.join(run, c["name"], "harness"))
        blob = open(os.path.join(wd, "model.bin"), "rb").read()
        c["weights_sha256"] = hashlib.sha256(blob).hexdigest()
        c["weights_bytes"] = len(blob)
        c["launches"] = next((l for l in r.stdout.splitlines() if l.startswith(("cuda: ", "wgpu: "))), "")
        done.append(c)
        print(f"gpu_bench_prepare: {c['name']}: {c['launches']}")
    shutil.copy(args.burnc, os.path.join(run, "burnc"))
    json.dump(done, open(os.path.join(run, "configs.json"), "w"), indent=1)
    print(f"gpu_bench_prepare: {len(done)} harnesses in {run}")


if __name__ == "__main__":
    main()
