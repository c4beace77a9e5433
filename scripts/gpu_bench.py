#!/usr/bin/env python3
"""On the GPU machine: burnc against PyTorch eager and torch.compile, one run, same machine.

    python3 scripts/gpu_bench.py RUN_DIR [--iters 200] [--only REGEX] [--ncu DIR]

RUN_DIR is what scripts/gpu_bench_prepare.py built (gpu/bench/run). For each configuration the
models are rebuilt from their seed (scripts/gpu_bench_models.py), the weights blob by the
carried burnc (checked against the hash recorded where the harness was built); the same weights
go into torchvision's ResNet-50 and transformers' BertModel. Every timing is the median of ITERS
CUDA-event-timed forward passes after warm-up: burnc's graph replays, PyTorch eager, and
torch.compile(mode="reduce-overhead") (CUDA graphs). With --ncu DIR, Nsight Compute also times
each of burnc's kernels once (boost clocks left alone) and DIR/<config>.tsv lists them, slowest
first, with their share of the forward pass. Correctness: ‖out − ref‖/‖ref‖ against
PyTorch in f32 with TF32 off. The last line is
    gpu_bench: bf16_geomean_vs_torch_compile=<geomean of burnc/torch.compile time, bf16 configs>
"""
import argparse
import copy
import hashlib
import json
import math
import os
import re
import subprocess
import sys
import time

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import gpu_bench_models as bm  # noqa: E402
from gpu_bench_prepare import floats_args  # noqa: E402

DT = {"f32": torch.float32, "bf16": torch.bfloat16, "tf32": torch.float32, "wgpu": torch.float32}


def torch_model(name):
    params = {k: torch.from_numpy(v) for k, v in (bm.resnet50_params() if name == "resnet50" else bm.minilm_params()).items()}
    if name == "resnet50":
        import torchvision

        m = torchvision.models.resnet50(weights=None)
    else:
        from transformers import BertConfig, BertModel

        c = bm.BERT
        cfg = BertConfig(vocab_size=c["vocab"], hidden_size=c["hidden"], num_hidden_layers=c["layers"], num_attention_heads=c["heads"], intermediate_size=c["ffn"],
                         max_position_embeddings=c["max_pos"], type_vocab_size=2, hidden_act="gelu", layer_norm_eps=c["eps"], hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        m = BertModel(cfg, add_pooling_layer=False)
    missing, unexpected = m.load_state_dict(params, strict=False)
    stray = [k for k in missing if not k.endswith(("num_batches_tracked", "position_ids", "token_type_ids"))]
    if stray or unexpected:
        sys.exit(f"gpu_bench: {name}: weights do not match the PyTorch model: missing {stray[:5]}, unexpected {unexpected[:5]}")
    return m.eval().cuda()


def call(name, m, x):
    return m(x) if name == "resnet50" else m(input_ids=x).last_hidden_state


def event_median_ms(fn, iters, warmup=10):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e))
    return float(np.median(ts))


def set_tf32(on):
    torch.backends.cudnn.allow_tf32 = on
    torch.backends.cuda.matmul.allow_tf32 = on


def rel_err(out, ref):
    out, ref = out.astype(np.float64).ravel(), ref.astype(np.float64).ravel()
    return float(np.linalg.norm(out - ref) / max(np.linalg.norm(ref), 1e-30))


def kernel_times(harness, work, tsv):
    """Each kernel of one forward pass timed by Nsight Compute, slowest first, into `tsv`."""
    os.makedirs(os.path.dirname(tsv), exist_ok=True)
    r = subprocess.run(["ncu", "--clock-control", "none", "--metrics", "gpu__time_duration.sum", "--csv", harness, work, "1", "0"], capture_output=True, text=True)
    import csv
    import io

    lines = [l for l in r.stdout.splitlines() if l.startswith('"')]
    times = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines))):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        v = float(row["Metric Value"].replace(",", ""))
        ns = v * {"nsecond": 1, "usecond": 1e3, "msecond": 1e6}.get(row.get("Metric Unit", "nsecond"), 1)
        k = row["Kernel Name"]
        n, t = times.get(k, (0, 0.0))
        times[k] = (n + 1, t + ns)
    if not times:
        print(f"ncu: no kernel times for {harness}: {r.stderr.strip()[-300:]}")
        return
    total = sum(t for _, t in times.values())
    # The harness launches the pass twice (a first forward, then one replay): per-pass times.
    with open(tsv, "w") as f:
        f.write("kernel\tcalls\tus\tshare\n")
        for k, (n, t) in sorted(times.items(), key=lambda kv: -kv[1][1]):
            f.write(f"{k}\t{n}\t{t / 1e3:.2f}\t{t / total:.3f}\n")
    top = sorted(times.items(), key=lambda kv: -kv[1][1])[:12]
    print(f"ncu {os.path.basename(tsv)}: {len(times)} kernels, {total / 1e6:.3f} ms summed; slowest: " + ", ".join(f"{k} {t / 1e3:.0f}us" for k, (n, t) in top))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--only", default="")
    ap.add_argument("--tmp", default="/tmp/burnc-gpu-bench")
    ap.add_argument("--ncu", default="", help="folder for per-kernel times (Nsight Compute)")
    a = ap.parse_args()
    set_tf32(False)
    torch.backends.cudnn.benchmark = True
    configs = [c for c in json.load(open(os.path.join(a.run, "configs.json"))) if re.search(a.only, c["name"])]
    print(f"gpu: {torch.cuda.get_device_name()} torch {torch.__version__}")
    os.makedirs(a.tmp, exist_ok=True)
    import onnx

    blobs, rows = {}, []
    for mname in dict.fromkeys(c["model"] for c in configs):
        params, build, make_input, _ = bm.MODELS[mname]
        onnx_path = os.path.join(a.tmp, f"{mname}.onnx")
        onnx.save(build(params()), onnx_path)
        ref_model = torch_model(mname)
        torch_runs = {}
        for c in [c for c in configs if c["model"] == mname]:
            key = (mname, c["dtype"])
            if key not in blobs:
                # The blob the module expects, made by the carried burnc from the rebuilt model.
                d = os.path.join(a.tmp, f"{mname}-{c['dtype']}")
                os.makedirs(d, exist_ok=True)
                r = subprocess.run([os.path.join(a.run, "burnc"), onnx_path, "-o", os.path.join(d, "model.rs")] + floats_args(c["dtype"]) + ["--input", f"{c['input']}={c['dims']}"], capture_output=True, text=True)
                if r.returncode != 0:
                    sys.exit(f"gpu_bench: burnc on {mname}: {r.stderr.strip()}")
                blobs[key] = os.path.join(d, "model.bin")
            blob = open(blobs[key], "rb").read()
            if hashlib.sha256(blob).hexdigest() != c["weights_sha256"]:
                sys.exit(f"gpu_bench: {c['name']}: the rebuilt weights differ from those the harness was built with")
            work = os.path.join(a.tmp, c["name"])
            os.makedirs(work, exist_ok=True)
            if os.path.lexists(os.path.join(work, "model.bin")):
                os.remove(os.path.join(work, "model.bin"))
            os.symlink(blobs[key], os.path.join(work, "model.bin"))
            x = make_input(c["batch"])
            x.astype(x.dtype.newbyteorder("<")).tofile(os.path.join(work, "in_0.bin"))
            r = subprocess.run([os.path.join(a.run, c["name"], "harness"), work, str(a.iters), "20"], capture_output=True, text=True)
            med = re.search(r"^median_ms=([0-9.]+)", r.stdout, re.M)
            if r.returncode != 0 or not med:
                print(f"FAIL {c['name']}: {r.stderr.strip() or r.stdout.strip()}")
                rows.append((c, None, None, None, None, None))
                continue
            burnc_ms = float(med.group(1))
            if a.ncu:
                kernel_times(os.path.join(a.run, c["name"], "harness"), work, os.path.join(a.ncu, c["name"] + ".tsv"))
            out = np.fromfile(os.path.join(work, "out_0.bin"), dtype=np.float32)
            xt = torch.from_numpy(x).cuda()
            tkey = (c["batch"], DT[c["dtype"]], c["dtype"] == "tf32")
            if tkey in torch_runs:
                # The same PyTorch configuration was timed for another burnc target.
                ref, eager_ms, compile_ms, torch_err = torch_runs[tkey]
                err = rel_err(out, ref)
                rows.append((c, burnc_ms, eager_ms, compile_ms, err, torch_err))
                print(f"{c['name']}: burnc {burnc_ms:.4f} ms, eager {eager_ms:.4f} ms, torch.compile {compile_ms:.4f} ms (timed above), rel_err burnc {err:.2e}", flush=True)
                continue
            with torch.no_grad():
                set_tf32(False)
                ref = call(mname, ref_model, xt).float().cpu().numpy()
                # PyTorch's side of a tf32 configuration multiplies in TF32 too.
                set_tf32(c["dtype"] == "tf32")
                model = copy.deepcopy(ref_model).to(DT[c["dtype"]])
                xin = xt.to(DT[c["dtype"]]) if xt.is_floating_point() else xt
                forward = lambda v: call(mname, model, v)  # noqa: E731
                torch_err = rel_err(forward(xin).float().cpu().numpy(), ref)
                eager_ms = event_median_ms(lambda: forward(xin), a.iters)
                torch._dynamo.reset()
                t0 = time.time()
                compiled = torch.compile(forward, mode="reduce-overhead")
                for _ in range(3):
                    compiled(xin)
                compile_s = time.time() - t0
                compile_ms = event_median_ms(lambda: compiled(xin), a.iters)
                del compiled, model
                torch._dynamo.reset()
                set_tf32(False)
            err = rel_err(out, ref)
            torch_runs[tkey] = (ref, eager_ms, compile_ms, torch_err)
            rows.append((c, burnc_ms, eager_ms, compile_ms, err, torch_err))
            print(f"{c['name']}: burnc {burnc_ms:.4f} ms, eager {eager_ms:.4f} ms, torch.compile {compile_ms:.4f} ms (compiled in {compile_s:.0f} s), "
                  f"rel_err burnc {err:.2e} torch-{c['dtype']} {torch_err:.2e}", flush=True)
        del ref_model
        torch.cuda.empty_cache()

    print("\n| config | burnc ms | eager ms | torch.compile ms | burnc / compile | burnc / eager | rel err burnc | rel err torch |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    ratios = []
    for c, b, e, t, err, terr in rows:
        if b is None:
            print(f"| {c['name']} | failed | | | | | | |")
            continue
        print(f"| {c['name']} | {b:.4f} | {e:.4f} | {t:.4f} | {b / t:.3f} | {b / e:.3f} | {err:.2e} | {terr:.2e} |")
        if c["dtype"] == "bf16":
            ratios.append(b / t)
    # The wgpu target against the CUDA target, same model, batch and f32.
    cuda_f32 = {(c["model"], c["batch"]): b for c, b, *_ in rows if c["dtype"] == "f32" and b is not None}
    for c, b, *_ in rows:
        if c["dtype"] == "wgpu" and b is not None and (c["model"], c["batch"]) in cuda_f32:
            print(f"wgpu vs cuda f32: {c['model']} bs{c['batch']}: {b:.4f} / {cuda_f32[(c['model'], c['batch'])]:.4f} ms = {b / cuda_f32[(c['model'], c['batch'])]:.2f}x")
    worst = {}
    for c, b, e, t, err, terr in rows:
        if err is not None:
            worst[c["dtype"]] = max(worst.get(c["dtype"], 0.0), err)
    print(f"worst rel_err: " + ", ".join(f"{k} {v:.2e}" for k, v in worst.items()))
    n_bf16 = sum(1 for c, *_ in rows if c["dtype"] == "bf16")
    geo = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios and len(ratios) == n_bf16 else float("nan")
    print(f"gpu_bench: bf16_geomean_vs_torch_compile={geo:.3f}")


if __name__ == "__main__":
    main()
