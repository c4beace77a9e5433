#!/usr/bin/env python3
"""Build the small models whose generated code tests/codegen_snapshots.rs snapshots.

Usage: scripts/make_snapshot_models.py [OUT_DIR]   (default: tests/models/snapshots)

onnx.helper only, opset 17, IR 8; every model from its own seeded RNG, weights N(0, 0.1^2), so
the files are byte-for-byte reproducible. Each model uses only ops the Rust codegen supports
(compiler/src/codegen/emit/mod.rs); a model that needs input pins lists them in PINS, which the
test repeats.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


sys.path.insert(0, HERE)
from pydeps import ensure  # noqa: E402

ensure("numpy", "onnx")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

F = TensorProto.FLOAT

# Input pins the snapshot test passes (`--input NAME=DIMS`), per model.
PINS = {"shape_fold": {"x": [2, 3, 4, 4]}}


class B:
    """A graph under construction: seeded weights, nodes named after their outputs."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.inits: list[onnx.TensorProto] = []
        self.nodes: list[onnx.NodeProto] = []

    def w(self, name: str, *shape: int) -> str:
        a = (self.rng.standard_normal(shape) * 0.1).astype(np.float32)
        self.inits.append(numpy_helper.from_array(a, name))
        return name

    def const(self, name: str, a: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(a, name))
        return name

    def bn(self, name: str, c: int) -> list[str]:
        scale = (1.0 + self.rng.standard_normal(c) * 0.1).astype(np.float32)
        var = (1.0 + np.abs(self.rng.standard_normal(c)) * 0.1).astype(np.float32)
        self.const(f"{name}.scale", scale)
        self.w(f"{name}.bias", c)
        self.w(f"{name}.mean", c)
        self.const(f"{name}.var", var)
        return [f"{name}.scale", f"{name}.bias", f"{name}.mean", f"{name}.var"]

    def n(self, op: str, inputs: list[str], out: str, **attrs) -> str:
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def model(self, name: str, inputs: list, outputs: list) -> onnx.ModelProto:
        g = helper.make_graph(
            self.nodes,
            name,
            [helper.make_tensor_value_info(n, F, s) for n, s in inputs],
            [helper.make_tensor_value_info(n, F, s) for n, s in outputs],
            initializer=self.inits,
        )
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8, producer_name="burnc-snapshots")
        onnx.checker.check_model(m, full_check=True)
        return m


def mlp() -> onnx.ModelProto:
    b = B(1)
    h = b.n("MatMul", ["x", b.w("fc1.w", 16, 32)], "fc1.mm")
    h = b.n("Add", [h, b.w("fc1.b", 32)], "fc1")
    h = b.n("Relu", [h], "relu1")
    h = b.n("MatMul", [h, b.w("fc2.w", 32, 8)], "fc2.mm")
    b.n("Add", [h, b.w("fc2.b", 8)], "y")
    return b.model("mlp", [("x", [1, 16])], [("y", [1, 8])])


def small_cnn() -> onnx.ModelProto:
    b = B(2)
    h = b.n("Conv", ["x", b.w("conv.w", 4, 1, 3, 3), b.w("conv.b", 4)], "conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    h = b.n("Relu", [h], "relu")
    h = b.n("MaxPool", [h], "pool", kernel_shape=[2, 2], strides=[2, 2])
    h = b.n("Flatten", [h], "flat", axis=1)
    b.n("Gemm", [h, b.w("fc.w", 64, 5), b.w("fc.b", 5)], "y")
    return b.model("small_cnn", [("x", [1, 1, 8, 8])], [("y", [1, 5])])


def residual_block() -> onnx.ModelProto:
    b = B(3)
    conv = dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    h = b.n("Conv", ["x", b.w("conv1.w", 4, 4, 3, 3)], "conv1", **conv)
    h = b.n("BatchNormalization", [h, *b.bn("bn1", 4)], "bn1", epsilon=1e-5)
    h = b.n("Relu", [h], "relu1")
    h = b.n("Conv", [h, b.w("conv2.w", 4, 4, 3, 3)], "conv2", **conv)
    h = b.n("BatchNormalization", [h, *b.bn("bn2", 4)], "bn2", epsilon=1e-5)
    h = b.n("Add", [h, "x"], "add")
    b.n("Relu", [h], "y")
    return b.model("residual_block", [("x", [1, 4, 6, 6])], [("y", [1, 4, 6, 6])])


def attention() -> onnx.ModelProto:
    b = B(4)
    q = b.n("MatMul", ["x", b.w("wq", 8, 8)], "q")
    k = b.n("MatMul", ["x", b.w("wk", 8, 8)], "k")
    v = b.n("MatMul", ["x", b.w("wv", 8, 8)], "v")
    kt = b.n("Transpose", [k], "kt", perm=[0, 2, 1])
    s = b.n("MatMul", [q, kt], "scores")
    s = b.n("Mul", [s, b.const("scale", np.array(8**-0.5, dtype=np.float32))], "scaled")
    p = b.n("Softmax", [s], "probs", axis=-1)
    o = b.n("MatMul", [p, v], "attn")
    o = b.n("Add", [o, "x"], "residual")
    b.n("Reshape", [o, b.const("flat_shape", np.array([1, 32], dtype=np.int64))], "y")
    return b.model("attention", [("x", [1, 4, 8])], [("y", [1, 32])])


def shape_fold() -> onnx.ModelProto:
    """Reshape to [batch, -1] where batch comes from Shape(x): folds away once x is pinned."""
    b = B(5)
    s = b.n("Shape", ["x"], "shape")
    n = b.n("Gather", [s, b.const("zero", np.array([0], dtype=np.int64))], "batch", axis=0)
    t = b.n("Concat", [n, b.const("minus_one", np.array([-1], dtype=np.int64))], "target", axis=0)
    h = b.n("Reshape", ["x", t], "flat")
    h = b.n("Gemm", [h, b.w("fc.w", 4, 48), b.w("fc.b", 4)], "fc", transB=1)
    b.n("Relu", [h], "y")
    return b.model("shape_fold", [("x", ["N", 3, 4, 4])], [("y", ["N", 4])])


def depthwise_conv() -> onnx.ModelProto:
    b = B(6)
    h = b.n("Conv", ["x", b.w("dw.w", 4, 1, 3, 3), b.w("dw.b", 4)], "dw", kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=4)
    h = b.n("Relu", [h], "relu1")
    h = b.n("Conv", [h, b.w("pw.w", 8, 4, 1, 1), b.w("pw.b", 8)], "pw", kernel_shape=[1, 1])
    b.n("Relu", [h], "y")
    return b.model("depthwise_conv", [("x", [1, 4, 6, 6])], [("y", [1, 8, 6, 6])])


def pools() -> onnx.ModelProto:
    b = B(7)
    h = b.n("AveragePool", ["x"], "avg", kernel_shape=[2, 2], strides=[2, 2])
    g = b.n("GlobalAveragePool", [h], "gap")
    m = b.n("GlobalMaxPool", [h], "gmp")
    h = b.n("Add", [g, m], "sum")
    b.n("Flatten", [h], "y", axis=1)
    return b.model("pools", [("x", [1, 3, 8, 8])], [("y", [1, 3])])


def concat_branches() -> onnx.ModelProto:
    b = B(8)
    a = b.n("Conv", ["x", b.w("b1.w", 2, 3, 1, 1), b.w("b1.b", 2)], "branch1", kernel_shape=[1, 1])
    c = b.n("Conv", ["x", b.w("b3.w", 3, 3, 3, 3), b.w("b3.b", 3)], "branch3", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    p = b.n("MaxPool", ["x"], "branch_pool", kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    h = b.n("Concat", [a, c, p], "cat", axis=1)
    b.n("Relu", [h], "y")
    return b.model("concat_branches", [("x", [1, 3, 6, 6])], [("y", [1, 8, 6, 6])])


def gemm_transb() -> onnx.ModelProto:
    b = B(9)
    h = b.n("Gemm", ["x", b.w("w", 4, 6), b.w("c", 4)], "gemm", transB=1, alpha=0.5, beta=2.0)
    b.n("Sigmoid", [h], "y")
    return b.model("gemm_transb", [("x", [2, 6])], [("y", [2, 4])])


def lrn_maxpool() -> onnx.ModelProto:
    b = B(10)
    h = b.n("Conv", ["x", b.w("conv.w", 6, 3, 3, 3), b.w("conv.b", 6)], "conv", kernel_shape=[3, 3], strides=[1, 1])
    h = b.n("Relu", [h], "relu")
    h = b.n("LRN", [h], "lrn", size=3, alpha=1e-4, beta=0.75, bias=1.0)
    b.n("MaxPool", [h], "y", kernel_shape=[3, 3], strides=[2, 2])
    return b.model("lrn_maxpool", [("x", [1, 3, 9, 9])], [("y", [1, 6, 3, 3])])


def broadcast_elementwise() -> onnx.ModelProto:
    """Layer-norm-like arithmetic with broadcasting, two inputs and two outputs."""
    b = B(11)
    d = b.n("Sub", ["x", "mu"], "centered")
    sq = b.n("Mul", [d, d], "sq")
    r = b.n("Sqrt", [b.n("Add", [sq, b.const("eps", np.array(1e-5, dtype=np.float32))], "sq_eps")], "root")
    h = b.n("Div", [d, r], "norm")
    h = b.n("Mul", [h, b.w("gamma", 1, 6)], "scaled")
    b.n("Add", [h, b.w("beta", 6)], "y")
    b.n("Exp", ["mu"], "mu_exp")
    return b.model("broadcast_elementwise", [("x", [3, 6]), ("mu", [3, 1])], [("y", [3, 6]), ("mu_exp", [3, 1])])


MODELS = [
    mlp,
    small_cnn,
    residual_block,
    attention,
    shape_fold,
    depthwise_conv,
    pools,
    concat_branches,
    gemm_transb,
    lrn_maxpool,
    broadcast_elementwise,
]


def main() -> None:
    out_dir = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "models", "snapshots")
    os.makedirs(out_dir, exist_ok=True)
    for make in MODELS:
        path = os.path.join(out_dir, f"{make.__name__}.onnx")
        blob = make().SerializeToString()
        with open(path, "wb") as f:
            f.write(blob)
        print(f"{path}: {len(blob)} bytes")


if __name__ == "__main__":
    main()
