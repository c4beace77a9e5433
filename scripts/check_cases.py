#!/usr/bin/env python3
"""Quick dev loop: run node cases whose name matches REGEX through `burnc run` and compare
with the expected outputs (rtol 1e-3, atol 1e-5). The CI gate is the Rust harness in
tests/conformance.rs; this is for working on one op.

usage: scripts/check_cases.py REGEX [--codegen | --bound F] [--burnc PATH] [--data DIR] [--suite node] [-v]
"""
import argparse, glob, os, re, subprocess, sys, tempfile
import numpy as np
import onnx
from onnx import numpy_helper

def load_pb(path, kind):
    b = open(path, "rb").read()
    if kind == "seq":
        s = onnx.SequenceProto(); s.ParseFromString(b); return [numpy_helper.to_array(t) for t in s.tensor_values]
    if kind == "opt":
        o = onnx.OptionalProto(); o.ParseFromString(b)
        return numpy_helper.to_array(o.tensor_value) if o.HasField("tensor_value") else None
    t = onnx.TensorProto(); t.ParseFromString(b); return numpy_helper.to_array(t)

def close(a, b):
    if a is None or b is None: return a is None and b is None
    if isinstance(b, list):
        return isinstance(a, list) and len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    if a.shape != b.shape: return False
    if a.dtype != b.dtype: return False
    if b.dtype.kind in "fc" or str(b.dtype).startswith(("float8", "bfloat")):
        a = a.astype(np.float64); b = b.astype(np.float64)
        return bool(np.all((np.abs(a - b) <= 1e-5 + 1e-3 * np.abs(b)) | (np.isnan(a) & np.isnan(b)) | (a == b)))
    return bool(np.array_equal(a, b))

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("regex"); ap.add_argument("--burnc", default="target/debug/burnc")
    ap.add_argument("--data", default="conformance-data"); ap.add_argument("--suite", default="node")
    ap.add_argument("-v", action="store_true")
    ap.add_argument("--codegen", action="store_true", help="run through generated code (burnc run --codegen)")
    ap.add_argument("--bound", help="generated code with bounded dims (burnc run --codegen --bound F)")
    a = ap.parse_args()
    cases = sorted(d for d in glob.glob(f"{a.data}/{a.suite}/*") if re.search(a.regex, os.path.basename(d)))
    npass = 0
    for case in cases:
        name = os.path.basename(case)
        model = onnx.load(f"{case}/model.onnx", load_external_data=False)
        kinds = ["seq" if o.type.HasField("sequence_type") else "opt" if o.type.HasField("optional_type") else "t" for o in model.graph.output]
        ok, why = True, ""
        for ds in sorted(glob.glob(f"{case}/test_data_set_*")):
            ins = sorted(glob.glob(f"{ds}/input_*.pb"), key=lambda p: int(re.findall(r"\d+", os.path.basename(p))[0]))
            with tempfile.TemporaryDirectory() as out:
                cmd = [a.burnc, "run"] + (["--codegen"] if a.codegen or a.bound else []) + (["--bound", a.bound] if a.bound else []) + [f"{case}/model.onnx"] + sum([["--input", p] for p in ins], []) + ["-o", out]
                try:
                    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600 if a.codegen or a.bound else 60)
                except subprocess.TimeoutExpired:
                    ok, why = False, "timeout"; break
                if r.returncode != 0:
                    ok, why = False, (r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1]; break
                for i, k in enumerate(kinds):
                    exp = load_pb(f"{ds}/output_{i}.pb", k); got = load_pb(f"{out}/output_{i}.pb", k)
                    if not close(got, exp):
                        ok = False
                        why = f"output {i} mismatch: got {getattr(got,'dtype',None)}{getattr(got,'shape',None)} want {getattr(exp,'dtype',None)}{getattr(exp,'shape',None)}"
                        if a.v and hasattr(got, "ravel"): why += f"\n   got {got.ravel()[:8]}\n   want {exp.ravel()[:8]}"
                        break
            if not ok: break
        npass += ok
        print(("PASS " if ok else "FAIL ") + name + ("" if ok else "  -- " + why))
    print(f"{npass} passed, {len(cases) - npass} failed")

if __name__ == "__main__":
    main()
