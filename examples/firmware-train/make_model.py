#!/usr/bin/env python3
"""Build the firmware training example's tiny CNN and its one batch (onnx + numpy only).

Usage: examples/firmware-train/make_model.py [OUT_DIR]   (default: this script's folder)

Writes (deterministic, seeded; all three files are committed, so building the firmware needs
no Python):
  model.onnx   x: float[8,1,8,8] -> logits: float[8,4], opset 17, IR 8
               Conv(4, 3x3, pad 1) + Relu -> MaxPool 2 -> Flatten -> Gemm(64 -> 4, transB);
               He-normal weights, N(0, 0.01) biases; 300 parameters
  x.npy        float32 [8,1,8,8]: two samples per class, class k a bright 3x3 blob at its own
               place plus N(0, 0.5) noise
  target.npy   int64 [8]: the classes (0 1 2 3 0 1 2 3)
The firmware trains on this batch (build.rs turns the .npy files into raw little-endian
bytes); tests/firmware_train.rs runs `burnc train` on the same files.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SEED = 20250107
HERE = os.path.dirname(os.path.abspath(__file__))
BATCH, CLASSES = 8, 4
# Top-left corner of each class's blob.
BLOBS = [(1, 1), (1, 4), (4, 1), (4, 4)]


def he_normal(rng: np.random.Generator, shape: tuple[int, ...], fan_in: int) -> np.ndarray:
    return rng.standard_normal(shape, dtype=np.float32) * np.float32(np.sqrt(2.0 / fan_in))


def bias(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.standard_normal(n, dtype=np.float32) * np.float32(0.01)


def build(rng: np.random.Generator) -> onnx.ModelProto:
    inits = [
        numpy_helper.from_array(he_normal(rng, (4, 1, 3, 3), 9), "conv.weight"),
        numpy_helper.from_array(bias(rng, 4), "conv.bias"),
        numpy_helper.from_array(he_normal(rng, (CLASSES, 4 * 4 * 4), 64), "fc.weight"),
        numpy_helper.from_array(bias(rng, CLASSES), "fc.bias"),
    ]
    nodes = [
        # 8x8 -> 8x8 -> 4x4
        helper.make_node("Conv", ["x", "conv.weight", "conv.bias"], ["conv"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv"], ["relu"], name="relu"),
        helper.make_node("MaxPool", ["relu"], ["pool"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["pool"], ["flat"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], name="fc", transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "firmware_train_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [BATCH, 1, 8, 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [BATCH, CLASSES])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8, producer_name="burnc-examples")
    onnx.checker.check_model(model, full_check=True)
    return model


def batch(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    target = np.arange(BATCH, dtype=np.int64) % CLASSES
    x = rng.standard_normal((BATCH, 1, 8, 8), dtype=np.float32) * np.float32(0.5)
    for i, k in enumerate(target):
        r, c = BLOBS[k]
        x[i, 0, r : r + 3, c : c + 3] += np.float32(2.0)
    return x, target


def main() -> None:
    out_dir = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else HERE
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(SEED)
    model = build(rng)
    x, target = batch(rng)
    path = os.path.join(out_dir, "model.onnx")
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    print(f"{path}: {os.path.getsize(path)} bytes")
    for name, a in (("x.npy", x), ("target.npy", target)):
        path = os.path.join(out_dir, name)
        np.save(path, a)
        print(f"{path}: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
