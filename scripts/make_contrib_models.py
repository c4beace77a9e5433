#!/usr/bin/env python3
"""onnxruntime's contrib ops that burnc lowers to standard ops (frontends/src/onnx/contrib.rs),
in one model, with onnxruntime's outputs as the reference (tests/contrib_ops.rs).

    python3 scripts/make_contrib_models.py OUT_DIR

Writes OUT_DIR/model.onnx, OUT_DIR/input_<i>.pb and OUT_DIR/output_<i>.pb. BiasAdd has no
onnxruntime CPU kernel; its reference is numpy's X + bias + skip.
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

SHAPES = {"X": [2, 3, 8], "S": [2, 3, 8], "B": [8], "G": [8], "Be": [8]}


def model():
    ms = "com.microsoft"
    nodes = [
        helper.make_node("Gelu", ["X"], ["gelu"], domain=ms),
        helper.make_node("BiasGelu", ["X", "B"], ["bias_gelu"], domain=ms),
        helper.make_node("FastGelu", ["X", "B"], ["fast_gelu_bias"], domain=ms),
        helper.make_node("FastGelu", ["X"], ["fast_gelu"], domain=ms),
        helper.make_node("QuickGelu", ["X"], ["quick_gelu"], domain=ms, alpha=1.5),
        helper.make_node("SkipLayerNormalization", ["X", "S", "G", "Be", "B"], ["skip_ln", "", "", "skip_ln_sum"], domain=ms, epsilon=1e-5),
        helper.make_node("SkipSimplifiedLayerNormalization", ["X", "S", "G", "B"], ["skip_rms"], domain=ms, epsilon=1e-5),
    ]
    outs = ["gelu", "bias_gelu", "fast_gelu_bias", "fast_gelu", "quick_gelu", "skip_ln", "skip_ln_sum", "skip_rms"]
    g = helper.make_graph(
        nodes, "contrib", [helper.make_tensor_value_info(k, TensorProto.FLOAT, v) for k, v in SHAPES.items()],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, [2, 3, 8]) for o in outs],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ms, 1)]), outs


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    m, _ = model()
    path = os.path.join(out, "model.onnx")
    onnx.save(m, path)
    rng = np.random.default_rng(7)
    feeds = {k: (rng.standard_normal(v) * (2.0 if k in "XS" else 0.5)).astype(np.float32) for k, v in SHAPES.items()}
    got = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)

    for i, (k, v) in enumerate(feeds.items()):
        with open(os.path.join(out, f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(v, k).SerializeToString())
    for i, v in enumerate(got):
        with open(os.path.join(out, f"output_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(v).SerializeToString())
    g = helper.make_graph(
        [helper.make_node("BiasAdd", ["X", "B", "S"], ["y"], domain="com.microsoft")], "bias_add",
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, SHAPES[k]) for k in ["X", "B", "S"]],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 8])],
    )
    bias_add = os.path.join(out, "bias_add")
    os.makedirs(bias_add, exist_ok=True)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]), os.path.join(bias_add, "model.onnx"))
    for i, k in enumerate(["X", "B", "S"]):
        with open(os.path.join(bias_add, f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(feeds[k], k).SerializeToString())
    with open(os.path.join(bias_add, "output_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(feeds["X"] + feeds["B"] + feeds["S"]).SerializeToString())
    fused(os.path.join(out, "fused"), rng)
    print(f"make_contrib_models: wrote {out}")


def fused(out, rng):
    """FusedConv (with Z, Relu; LeakyRelu), FusedGemm (Tanh), FusedMatMul (alpha, transA),
    TransposeMatMul (transB): what onnxruntime's graph optimiser writes, and its outputs."""
    ms = "com.microsoft"
    shapes = {"x": [1, 3, 6, 6], "w": [4, 3, 3, 3], "b": [4], "z": [1, 4, 6, 6], "ga": [5, 7], "gb": [7, 3], "gc": [3], "ma": [2, 4, 3], "mb": [2, 4, 5], "mc": [2, 6, 4]}
    nodes = [
        helper.make_node("FusedConv", ["x", "w", "b", "z"], ["conv_relu"], domain=ms, pads=[1, 1, 1, 1], activation="Relu"),
        helper.make_node("FusedConv", ["x", "w", "b"], ["conv_leaky"], domain=ms, strides=[2, 2], activation="LeakyRelu", activation_params=[0.2]),
        helper.make_node("FusedGemm", ["ga", "gb", "gc"], ["gemm_tanh"], domain=ms, alpha=0.7, beta=1.3, activation="Tanh"),
        helper.make_node("FusedMatMul", ["ma", "mb"], ["matmul_ta"], domain=ms, alpha=0.5, transA=1),
        helper.make_node("TransposeMatMul", ["mb", "mc"], ["matmul_tb"], domain=ms, transA=1, transB=1),
    ]
    outs = {"conv_relu": [1, 4, 6, 6], "conv_leaky": [1, 4, 2, 2], "gemm_tanh": [5, 3], "matmul_ta": [2, 3, 5], "matmul_tb": [2, 5, 6]}
    g = helper.make_graph(
        nodes, "fused", [helper.make_tensor_value_info(k, TensorProto.FLOAT, v) for k, v in shapes.items()],
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, v) for k, v in outs.items()],
    )
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "model.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ms, 1)]), path)
    feeds = {k: rng.standard_normal(v).astype(np.float32) for k, v in shapes.items()}
    got = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
    for i, (k, v) in enumerate(feeds.items()):
        with open(os.path.join(out, f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(v, k).SerializeToString())
    for i, v in enumerate(got):
        with open(os.path.join(out, f"output_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(v).SerializeToString())


if __name__ == "__main__":
    main()
