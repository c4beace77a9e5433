#!/usr/bin/env python3
"""Build the MNIST-sized example CNN (onnx.helper only) and its reference data.

Usage: examples/mnist/make_model.py [OUT_DIR]   (default: this script's folder)

Writes (deterministic, seeded):
  mnist_cnn.onnx        x: float[1,1,28,28] -> logits: float[1,10], opset 17, IR 8
                        Conv(8,3x3,pad 1)+Relu -> MaxPool 2 -> Conv(16,3x3,pad 1)+Relu
                        -> MaxPool 2 -> Flatten -> Gemm(784 -> 10, transB)
                        weights He-normal, biases N(0, 0.01), all initializers
  input_0.pb            TensorProto "x", seeded N(0, 1)
  expected_output_0.pb  TensorProto "logits", onnxruntime (CPU, ORT_DISABLE_ALL)
"""

from __future__ import annotations

import os
import subprocess
import sys

ONNX_VERSION = "1.23.2"
ORT_VERSION = "1.32.0"
HERE = os.path.dirname(os.path.abspath(__file__))


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
    setup = os.path.join(HERE, "..", "..", "scripts", "setup_python.sh")
    subprocess.check_call(["bash", setup], env={**os.environ, "PYTHON": sys.executable})
    env = {**os.environ, "BURNC_PY_SETUP_DONE": "1"}
    os.execve(sys.executable, [sys.executable, *sys.argv], env)


_ensure_python_deps()

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

SEED = 20240817


def he_normal(rng: np.random.Generator, shape: tuple[int, ...], fan_in: int) -> np.ndarray:
    return rng.standard_normal(shape, dtype=np.float32) * np.float32(np.sqrt(2.0 / fan_in))


def build(rng: np.random.Generator) -> onnx.ModelProto:
    inits = [
        numpy_helper.from_array(he_normal(rng, (8, 1, 3, 3), 1 * 9), "conv1.weight"),
        numpy_helper.from_array(rng.standard_normal(8, dtype=np.float32) * np.float32(0.01), "conv1.bias"),
        numpy_helper.from_array(he_normal(rng, (16, 8, 3, 3), 8 * 9), "conv2.weight"),
        numpy_helper.from_array(rng.standard_normal(16, dtype=np.float32) * np.float32(0.01), "conv2.bias"),
        numpy_helper.from_array(he_normal(rng, (10, 16 * 7 * 7), 16 * 7 * 7), "fc.weight"),
        numpy_helper.from_array(rng.standard_normal(10, dtype=np.float32) * np.float32(0.01), "fc.bias"),
    ]
    conv = dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1])
    pool = dict(kernel_shape=[2, 2], strides=[2, 2])
    nodes = [
        helper.make_node("Conv", ["x", "conv1.weight", "conv1.bias"], ["conv1"], name="conv1", **conv),
        helper.make_node("Relu", ["conv1"], ["relu1"], name="relu1"),
        helper.make_node("MaxPool", ["relu1"], ["pool1"], name="pool1", **pool),
        helper.make_node("Conv", ["pool1", "conv2.weight", "conv2.bias"], ["conv2"], name="conv2", **conv),
        helper.make_node("Relu", ["conv2"], ["relu2"], name="relu2"),
        helper.make_node("MaxPool", ["relu2"], ["pool2"], name="pool2", **pool),
        helper.make_node("Flatten", ["pool2"], ["flat"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], name="fc", transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "mnist_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 28, 28])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])],
        initializer=inits,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17)],
        ir_version=8,
        producer_name="burnc-examples",
    )
    onnx.checker.check_model(model, full_check=True)
    return model


def main() -> None:
    out_dir = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else HERE
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(SEED)
    model = build(rng)
    x = rng.standard_normal((1, 1, 28, 28), dtype=np.float32)

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    (logits,) = sess.run(["logits"], {"x": x})

    files = {
        "mnist_cnn.onnx": model.SerializeToString(),
        "input_0.pb": numpy_helper.from_array(x, "x").SerializeToString(),
        "expected_output_0.pb": numpy_helper.from_array(logits, "logits").SerializeToString(),
    }
    for name, blob in files.items():
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(blob)
        print(f"{os.path.join(out_dir, name)}: {len(blob)} bytes")
    print(f"logits = {np.array2string(logits.ravel(), precision=4)}")


if __name__ == "__main__":
    main()
