#!/usr/bin/env python3
"""Random-weight variants of onnx's 9 "light" backend-test models.

Usage: scripts/gen_light_random.py DATA_DIR [--force] [--only NAME ...]

DATA_DIR is the gen_conformance.py output folder; the stock models are read from
DATA_DIR/light/light_<m>/model.onnx (or from the onnx wheel when that is missing).

The stock light models compute every weight with ConstantOfShape(value=0.02), so
their outputs are uniform (all 0.001 after Softmax) and prove little. Here every
ConstantOfShape becomes a seeded random float32 initializer (raw_data) whose
distribution depends on the slot it feeds (followed through Unsqueeze/Reshape):
  Conv W / Gemm B / MatMul B     He-normal, std = sqrt(2 / fan_in)
  Conv / Gemm bias               N(0, 0.01)
  BatchNormalization scale, var  U(0.5, 1.5)   bias, mean  N(0, 0.1)
  Mul operand (channel scale)    U(0.5, 1.5)   (N(0,0.1) here would vanish the signal)
  Add operand, anything else     N(0, 0.1)
Other changes: unused initializers dropped; initializers removed from graph.input
and ir_version raised 3 -> 4 (so graph.input is just the data input and input_0.pb
maps to graph.input[0]); the input of the Softmax that produces the graph output is
renamed "logits" and added as an extra graph output (densenet121 has no Softmax:
its output already is the logits). The input is seeded N(0, 1).
References come from onnxruntime (CPUExecutionProvider, ORT_DISABLE_ALL).

Writes DATA_DIR/light_random/light_<m>_random/{model.onnx, meta.json,
test_data_set_0/input_0.pb, test_data_set_0/output_<j>.pb, .stamp}.
Models whose .stamp matches are skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys

ONNX_VERSION = "1.23.2"
ORT_VERSION = "1.32.0"
# Bump when the generated models or data change.
GENERATOR_VERSION = 1

# Fixed seed per model.
SEEDS = {
    "light_bvlc_alexnet": 101,
    "light_densenet121": 102,
    "light_inception_v1": 103,
    "light_inception_v2": 104,
    "light_resnet50": 105,
    "light_shufflenet": 106,
    "light_squeezenet": 107,
    "light_vgg19": 108,
    "light_zfnet512": 109,
}


def _ensure_python_deps() -> None:
    """Install scripts/requirements.txt (via setup_python.sh) unless already there."""
    try:
        import numpy  # noqa: F401
        import onnx
        import onnxruntime

        if (onnx.__version__, onnxruntime.__version__) == (ONNX_VERSION, ORT_VERSION):
            return
    except ImportError:
        pass
    if os.environ.get("BURNC_PY_SETUP_DONE"):
        sys.exit("python packages still missing after scripts/setup_python.sh")
    setup = os.path.join(os.path.dirname(os.path.abspath(__file__)), "setup_python.sh")
    subprocess.check_call(["bash", setup], env={**os.environ, "PYTHON": sys.executable})
    env = {**os.environ, "BURNC_PY_SETUP_DONE": "1"}
    os.execve(sys.executable, [sys.executable, *sys.argv], env)


_ensure_python_deps()

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import shutil  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

WHEEL_LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
LOGITS = "logits"


def stamp_text() -> str:
    return f"generator={GENERATOR_VERSION} onnx={onnx.__version__} ort={ort.__version__}\n"


def const_value(graph: onnx.GraphProto, name: str) -> np.ndarray | None:
    """Value of an initializer or Constant-node output, else None."""
    for init in graph.initializer:
        if init.name == name:
            return numpy_helper.to_array(init)
    for node in graph.node:
        if node.op_type == "Constant" and node.output[0] == name:
            for attr in node.attribute:
                if attr.name == "value":
                    return numpy_helper.to_array(attr.t)
    return None


def reshape_target(in_shape: list[int], target: np.ndarray) -> list[int]:
    out = [in_shape[i] if int(d) == 0 else int(d) for i, d in enumerate(target)]
    if -1 in out:
        known = math.prod(d for d in out if d != -1)
        out[out.index(-1)] = math.prod(in_shape) // known
    return out


def attr(node: onnx.NodeProto, name: str, default):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return default


def weight_role(graph, consumers, name: str, shape: list[int]):
    """(role, fan_in) for the tensor `name`, following Unsqueeze/Reshape/Identity."""
    cur, eff = name, list(shape)
    while True:
        uses = consumers.get(cur, [])
        if not uses:
            return "other", None
        node, slot = uses[0]
        op = node.op_type
        if slot == 0 and op in ("Unsqueeze", "Identity"):
            cur = node.output[0]
            continue
        if slot == 0 and op == "Reshape":
            tgt = const_value(graph, node.input[1])
            if tgt is not None:
                eff = reshape_target(eff, tgt)
            cur = node.output[0]
            continue
        if op in ("Conv", "ConvTranspose") and slot == 1:
            return "he", math.prod(eff[1:]) if op == "Conv" else eff[0] * math.prod(eff[2:])
        if op == "Gemm" and slot == 1:
            return "he", eff[1] if attr(node, "transB", 0) else eff[0]
        if op == "MatMul" and slot == 1:
            return "he", eff[-2] if len(eff) >= 2 else eff[0]
        if op in ("Conv", "ConvTranspose", "Gemm") and slot == 2:
            return "bias", None
        if op == "BatchNormalization":
            return {1: "bn_scale", 2: "bn_bias", 3: "bn_mean", 4: "bn_var"}.get(slot, "other"), None
        if op == "Mul":
            return "scale", None
        if op == "Add":
            return "add_bias", None
        return "other", None


def sample(rng: np.random.Generator, role: str, fan_in, shape: list[int]) -> np.ndarray:
    if role == "he":
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(math.sqrt(2.0 / fan_in))
    if role == "bias":
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(0.01)
    if role in ("bn_scale", "bn_var", "scale"):
        return rng.uniform(0.5, 1.5, shape).astype(np.float32)
    # bn_bias, bn_mean, add_bias, other
    return rng.standard_normal(shape, dtype=np.float32) * np.float32(0.1)


def randomize(model: onnx.ModelProto, rng: np.random.Generator) -> dict:
    g = model.graph
    consumers = defaultdict(list)
    for node in g.node:
        for k, x in enumerate(node.input):
            consumers[x].append((node, k))

    roles = defaultdict(int)
    new_inits, keep_nodes = [], []
    for node in g.node:
        if node.op_type != "ConstantOfShape":
            keep_nodes.append(node)
            continue
        shape = const_value(g, node.input[0])
        if shape is None:
            raise ValueError(f"ConstantOfShape {node.output[0]}: shape is not constant")
        shape = [int(d) for d in shape]
        value = [a.t for a in node.attribute if a.name == "value"]
        dtype = numpy_helper.to_array(value[0]).dtype if value else np.dtype(np.float32)
        if dtype != np.float32:
            raise ValueError(f"ConstantOfShape {node.output[0]}: dtype {dtype}")
        role, fan_in = weight_role(g, consumers, node.output[0], shape)
        roles[role] += 1
        arr = sample(rng, role, fan_in, shape)
        new_inits.append(numpy_helper.from_array(arr, node.output[0]))
    del g.node[:]
    g.node.extend(keep_nodes)
    g.initializer.extend(new_inits)

    # Drop unused initializers (the __SHAPE tensors and a few dead ones).
    had_init = {i.name for i in g.initializer}
    used = {x for n in g.node for x in n.input} | {o.name for o in g.output}
    kept = [i for i in g.initializer if i.name in used]
    del g.initializer[:]
    g.initializer.extend(kept)
    # Initializers are no longer graph inputs (IR >= 4).
    data_inputs = [vi for vi in g.input if vi.name not in had_init]
    del g.input[:]
    g.input.extend(data_inputs)
    model.ir_version = max(model.ir_version, 4)
    return dict(roles)


def expose_logits(model: onnx.ModelProto) -> str | None:
    """Rename the input of the output-producing Softmax to "logits" and output it."""
    g = model.graph
    outs = {o.name for o in g.output}
    softmax = [n for n in g.node if n.op_type == "Softmax" and n.output[0] in outs]
    if not softmax:
        return None
    old = softmax[0].input[0]
    for node in g.node:
        for k, x in enumerate(node.input):
            if x == old:
                node.input[k] = LOGITS
        for k, x in enumerate(node.output):
            if x == old:
                node.output[k] = LOGITS
    g.output.append(helper.make_tensor_value_info(LOGITS, onnx.TensorProto.FLOAT, None))
    return old


def find_sources(data_dir: str) -> dict[str, str]:
    light = os.path.join(data_dir, "light")
    if os.path.isdir(light):
        found = {
            d: os.path.join(light, d, "model.onnx")
            for d in sorted(os.listdir(light))
            if os.path.isfile(os.path.join(light, d, "model.onnx"))
        }
        if found:
            return found
    print(f"note: no {light}/*/model.onnx, reading the onnx wheel's light models")
    return {
        f[: -len(".onnx")]: os.path.join(WHEEL_LIGHT, f)
        for f in sorted(os.listdir(WHEEL_LIGHT))
        if f.startswith("light_") and f.endswith(".onnx")
    }


def generate(name: str, src: str, case_dir: str) -> str:
    t0 = time.time()
    seed = SEEDS[name]
    rng = np.random.default_rng(seed)
    model = onnx.load(src)
    roles = randomize(model, rng)
    renamed = expose_logits(model)

    (data_in,) = model.graph.input
    shape = [d.dim_value if d.HasField("dim_value") else 1 for d in data_in.type.tensor_type.shape.dim]
    x = rng.standard_normal(shape, dtype=np.float32)

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.log_severity_level = 3
    blob = model.SerializeToString()
    sess = ort.InferenceSession(blob, so, providers=["CPUExecutionProvider"])
    out_names = [o.name for o in model.graph.output]
    outs = sess.run(out_names, {data_in.name: x})
    del sess
    for o, arr in zip(model.graph.output, outs):
        if not np.all(np.isfinite(arr)):
            raise RuntimeError(f"{name}: non-finite values in output {o.name}")
        if o.name == LOGITS:  # fill in the now-known shape
            o.CopyFrom(helper.make_tensor_value_info(LOGITS, onnx.TensorProto.FLOAT, list(arr.shape)))
    blob = model.SerializeToString()

    tmp = case_dir + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(os.path.join(tmp, "test_data_set_0"))
    with open(os.path.join(tmp, "model.onnx"), "wb") as f:
        f.write(blob)
    with open(os.path.join(tmp, "test_data_set_0", "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(x, data_in.name).SerializeToString())
    for j, (oname, arr) in enumerate(zip(out_names, outs)):
        with open(os.path.join(tmp, "test_data_set_0", f"output_{j}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(arr, oname).SerializeToString())
    absmax = [float(np.abs(a).max()) for a in outs]
    meta = {
        "source": f"light/{name}",
        "seed": seed,
        "outputs": out_names,
        "logits_renamed_from": renamed,
        "output_absmax": absmax,
        "output_std": [float(a.std()) for a in outs],
        "rtol": 1e-3,
        # float32 rounding in deep nets scales with the magnitude of the values
        "atol": [max(1e-6, 1e-4 * m) for m in absmax],
        "randomized": roles,
    }
    with open(os.path.join(tmp, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
        f.write("\n")
    with open(os.path.join(tmp, ".stamp"), "w") as f:
        f.write(stamp_text())
    shutil.rmtree(case_dir, ignore_errors=True)
    os.rename(tmp, case_dir)

    top = ", ".join(f"{o}: absmax {m:.3g} std {s:.3g}" for o, m, s in zip(out_names, absmax, meta["output_std"]))
    return (
        f"{name}_random: {len(blob) / 2**20:.1f} MiB, {sum(roles.values())} ConstantOfShape "
        f"randomized {roles}; {top}; {time.time() - t0:.1f}s"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data_dir")
    ap.add_argument("--force", action="store_true", help="regenerate even if stamped")
    ap.add_argument("--only", nargs="*", help="model folder names, e.g. light_vgg19")
    args = ap.parse_args()
    data_dir = os.path.abspath(args.data_dir)
    out_root = os.path.join(data_dir, "light_random")
    os.makedirs(out_root, exist_ok=True)

    t0 = time.time()
    for name, src in find_sources(data_dir).items():
        if args.only and name not in args.only:
            continue
        if name not in SEEDS:
            print(f"{name}: no seed assigned, skipped")
            continue
        case_dir = os.path.join(out_root, f"{name}_random")
        stamp = os.path.join(case_dir, ".stamp")
        if not args.force and os.path.isfile(stamp) and open(stamp).read() == stamp_text():
            print(f"{name}_random: up to date")
            continue
        print(generate(name, src, case_dir), flush=True)
    print(f"light_random done in {time.time() - t0:.1f}s")


if __name__ == "__main__":
    main()
