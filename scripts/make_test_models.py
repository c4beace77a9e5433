#!/usr/bin/env python3
"""Small ONNX models for the pass tests (tests/models/). Run: python3 scripts/make_test_models.py

dyn_shape_subgraph.onnx: x [batch, 3, H, W] -> Conv(3->8, 3x3, pad 1) -> Relu
  -> Shape -> Gather -> Unsqueeze/Concat([batch, 8, -1]) -> Reshape -> ReduceMean -> MatMul,
  and Flatten(axis=1) of the activations.
The Reshape target comes from a shape subgraph; with `--input x=1x3x32x32` it must fold into a
static Reshape, and every value gets a static shape.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "models")


def dyn_shape_subgraph():
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal((8,)).astype(np.float32), "b")
    idx0 = numpy_helper.from_array(np.array(0, dtype=np.int64), "idx0")
    idx1 = numpy_helper.from_array(np.array([1], dtype=np.int64), "idx1")
    minus1 = numpy_helper.from_array(np.array([-1], dtype=np.int64), "minus1")
    fc = numpy_helper.from_array(rng.standard_normal((8, 10)).astype(np.float32), "fc")
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c"], ["r"]),
        # Global average pool written as a shape subgraph: reshape to [batch, 8, -1], mean.
        helper.make_node("Shape", ["r"], ["s"]),
        helper.make_node("Gather", ["s", "idx0"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n"], ["n1"], axes=[0]),
        helper.make_node("Gather", ["s", "idx1"], ["ch"], axis=0),
        helper.make_node("Concat", ["n1", "ch", "minus1"], ["target"], axis=0),
        helper.make_node("Reshape", ["r", "target"], ["flat"]),
        helper.make_node("ReduceMean", ["flat"], ["pooled"], axes=[2], keepdims=0),
        helper.make_node("MatMul", ["pooled", "fc"], ["logits"]),
        # And a Flatten of the raw activations, to see the symbolic dims flow.
        helper.make_node("Flatten", ["r"], ["features"], axis=1),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, "H", "W"])
    outs = [
        helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 10]),
        helper.make_tensor_value_info("features", TensorProto.FLOAT, ["batch", "F"]),
    ]
    g = helper.make_graph(nodes, "dyn_shape_subgraph", [x], outs, [w, b, idx0, idx1, minus1, fc])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)], producer_name="burnc-tests")
    m.ir_version = 6
    onnx.checker.check_model(m)
    return m


def if_const_cond():
    """If whose condition is computed from a shape (folds to a constant): the branch is inlined."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])
    four = numpy_helper.from_array(np.array([4], dtype=np.int64), "four")
    one = numpy_helper.from_array(np.array([1], dtype=np.int64), "one")
    then_g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["t"])], "then", [], [helper.make_tensor_value_info("t", TensorProto.FLOAT, ["batch", 4])]
    )
    else_g = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["e"])], "else", [], [helper.make_tensor_value_info("e", TensorProto.FLOAT, ["batch", 4])]
    )
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "one"], ["s1"], axis=0),
        helper.make_node("Equal", ["s1", "four"], ["eq"]),
        helper.make_node("Squeeze", ["eq"], ["cond"], axes=[0]),
        helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g),
    ]
    g = helper.make_graph(nodes, "if_const_cond", [x], [y], [four, one])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)], producer_name="burnc-tests")
    m.ir_version = 6
    onnx.checker.check_model(m)
    return m


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    for name, fn in [("dyn_shape_subgraph", dyn_shape_subgraph), ("if_const_cond", if_const_cond)]:
        path = os.path.join(OUT, f"{name}.onnx")
        onnx.save(fn(), path)
        print("wrote", os.path.normpath(path))
