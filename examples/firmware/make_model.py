#!/usr/bin/env python3
"""Build the firmware example's small CNN and its fixed input (onnx + numpy only).

Usage: examples/firmware/make_model.py [OUT_DIR]   (default: this script's folder)

Writes (deterministic, seeded; both files are committed, so building the firmware needs no
Python):
  model.onnx   x: float[1,1,28,28] -> logits: float[1,10], opset 17, IR 8
               Conv(4,3x3,pad 1)+Relu -> MaxPool 2 -> Conv(8,3x3)+Relu -> MaxPool 2
               -> Flatten -> Gemm(288 -> 10, transB); He-normal weights, N(0, 0.01) biases
  input.npy    float32 [1,1,28,28], seeded N(0, 1): embedded in the firmware (build.rs
               turns it into raw little-endian f32) and fed to `burnc run` by the test
"""

from __future__ import annotations

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SEED = 20250101
HERE = os.path.dirname(os.path.abspath(__file__))


def he_normal(rng: np.random.Generator, shape: tuple[int, ...], fan_in: int) -> np.ndarray:
    return rng.standard_normal(shape, dtype=np.float32) * np.float32(np.sqrt(2.0 / fan_in))


def bias(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.standard_normal(n, dtype=np.float32) * np.float32(0.01)


def build(rng: np.random.Generator) -> onnx.ModelProto:
    inits = [
        numpy_helper.from_array(he_normal(rng, (4, 1, 3, 3), 1 * 9), "conv1.weight"),
        numpy_helper.from_array(bias(rng, 4), "conv1.bias"),
        numpy_helper.from_array(he_normal(rng, (8, 4, 3, 3), 4 * 9), "conv2.weight"),
        numpy_helper.from_array(bias(rng, 8), "conv2.bias"),
        numpy_helper.from_array(he_normal(rng, (10, 8 * 6 * 6), 8 * 6 * 6), "fc.weight"),
        numpy_helper.from_array(bias(rng, 10), "fc.bias"),
    ]
    pool = dict(kernel_shape=[2, 2], strides=[2, 2])
    nodes = [
        # 28x28 -> 28x28 -> 14x14
        helper.make_node("Conv", ["x", "conv1.weight", "conv1.bias"], ["conv1"], name="conv1",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv1"], ["relu1"], name="relu1"),
        helper.make_node("MaxPool", ["relu1"], ["pool1"], name="pool1", **pool),
        # 14x14 -> 12x12 -> 6x6
        helper.make_node("Conv", ["pool1", "conv2.weight", "conv2.bias"], ["conv2"], name="conv2",
                         kernel_shape=[3, 3]),
        helper.make_node("Relu", ["conv2"], ["relu2"], name="relu2"),
        helper.make_node("MaxPool", ["relu2"], ["pool2"], name="pool2", **pool),
        helper.make_node("Flatten", ["pool2"], ["flat"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], name="fc", transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "firmware_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 28, 28])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])],
        initializer=inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8, producer_name="burnc-examples"
    )
    onnx.checker.check_model(model, full_check=True)
    return model


def main() -> None:
    out_dir = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else HERE
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(SEED)
    model = build(rng)
    x = rng.standard_normal((1, 1, 28, 28), dtype=np.float32)
    path = os.path.join(out_dir, "model.onnx")
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    print(f"{path}: {os.path.getsize(path)} bytes")
    path = os.path.join(out_dir, "input.npy")
    np.save(path, x)
    print(f"{path}: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
