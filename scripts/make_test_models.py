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


def loop_runtime():
    """Loop whose trip count and exit condition are known only at run time:
    y <- 1.5 * y + x and n <- n + 1 while sum(y) < limit, at most M times."""
    M = helper.make_tensor_value_info("M", TensorProto.INT64, [])
    limit = helper.make_tensor_value_info("limit", TensorProto.FLOAT, [])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])
    n = helper.make_tensor_value_info("n", TensorProto.INT64, [])
    body = helper.make_graph(
        [
            helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(np.array(1.5, dtype=np.float32))),
            helper.make_node("Constant", [], ["one"], value=numpy_helper.from_array(np.array(1, dtype=np.int64))),
            helper.make_node("Mul", ["y_in", "k"], ["ys"]),
            helper.make_node("Add", ["ys", "x"], ["y_out"]),
            helper.make_node("Add", ["n_in", "one"], ["n_out"]),
            helper.make_node("ReduceSum", ["y_out"], ["total"], keepdims=0),
            helper.make_node("Less", ["total", "limit"], ["cond_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("y_in", TensorProto.FLOAT, [3]),
            helper.make_tensor_value_info("n_in", TensorProto.INT64, []),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("y_out", TensorProto.FLOAT, [3]),
            helper.make_tensor_value_info("n_out", TensorProto.INT64, []),
        ],
    )
    init = [
        numpy_helper.from_array(np.array(True), "go"),
        numpy_helper.from_array(np.zeros(3, dtype=np.float32), "y0"),
        numpy_helper.from_array(np.array(0, dtype=np.int64), "n0"),
    ]
    nodes = [helper.make_node("Loop", ["M", "go", "y0", "n0"], ["y", "n"], body=body)]
    g = helper.make_graph(nodes, "loop_runtime", [M, limit, x], [y, n], init)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="burnc-tests")
    m.ir_version = 7
    onnx.checker.check_model(m)
    return m


def if_runtime():
    """If on a condition that is a graph input: both branches read outer values."""
    flag = helper.make_tensor_value_info("flag", TensorProto.BOOL, [])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3) / 4, "w")
    then_g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Add", ["r", "w"], ["t"])],
        "then", [], [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 3])],
    )
    else_g = helper.make_graph(
        [helper.make_node("Neg", ["x"], ["e"])], "else", [], [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2, 3])]
    )
    nodes = [
        helper.make_node("Exp", ["x"], ["ex"]),
        helper.make_node("If", ["flag"], ["b"], then_branch=then_g, else_branch=else_g),
        helper.make_node("Mul", ["b", "ex"], ["y"]),
    ]
    g = helper.make_graph(nodes, "if_runtime", [flag, x], [y], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="burnc-tests")
    m.ir_version = 7
    onnx.checker.check_model(m)
    return m


def scan_axes():
    """Scan over axis 1, reversed, stacking its output along axis 1: s <- s + x[:, t]; y[:, t] = 2 s."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    s0 = helper.make_tensor_value_info("s0", TensorProto.FLOAT, [2])
    s = helper.make_tensor_value_info("s", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])
    body = helper.make_graph(
        [
            helper.make_node("Add", ["s_in", "xt"], ["s_out"]),
            helper.make_node("Add", ["s_out", "s_out"], ["yt"]),
        ],
        "body",
        [helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [2]), helper.make_tensor_value_info("xt", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [2]), helper.make_tensor_value_info("yt", TensorProto.FLOAT, [2])],
    )
    nodes = [
        helper.make_node(
            "Scan", ["s0", "x"], ["s", "y"], body=body, num_scan_inputs=1,
            scan_input_axes=[1], scan_input_directions=[1], scan_output_axes=[1],
        )
    ]
    g = helper.make_graph(nodes, "scan_axes", [s0, x], [s, y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)], producer_name="burnc-tests")
    m.ir_version = 7
    onnx.checker.check_model(m)
    return m


def mlp_dropout_ln():
    """Training test model: x [8, 16] -> Gemm 16->32 -> LayerNormalization -> Relu -> Dropout(0.3)
    -> Gemm 32->4 (logits)."""
    rng = np.random.default_rng(3)
    init = [
        numpy_helper.from_array((rng.standard_normal((32, 16)) * 0.3).astype(np.float32), "fc1.weight"),
        numpy_helper.from_array(np.zeros(32, np.float32), "fc1.bias"),
        numpy_helper.from_array(np.ones(32, np.float32), "ln.weight"),
        numpy_helper.from_array(np.zeros(32, np.float32), "ln.bias"),
        numpy_helper.from_array((rng.standard_normal((4, 32)) * 0.2).astype(np.float32), "fc2.weight"),
        numpy_helper.from_array(np.zeros(4, np.float32), "fc2.bias"),
        numpy_helper.from_array(np.array(0.3, np.float32), "ratio"),
    ]
    nodes = [
        helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h"], transB=1),
        helper.make_node("LayerNormalization", ["h", "ln.weight", "ln.bias"], ["n"], axis=-1),
        helper.make_node("Relu", ["n"], ["r"]),
        helper.make_node("Dropout", ["r", "ratio"], ["d"]),
        helper.make_node("Gemm", ["d", "fc2.weight", "fc2.bias"], ["logits"], transB=1),
    ]
    g = helper.make_graph(
        nodes, "mlp_dropout_ln",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 16])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [8, 4])], init,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="burnc-tests")
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def cnn_bn():
    """Training test model: x [4, 2, 6, 6] -> Conv 2->4 3x3 -> BatchNormalization (inference)
    -> Relu -> GlobalAveragePool -> Flatten -> Gemm 4->3."""
    rng = np.random.default_rng(4)
    init = [
        numpy_helper.from_array((rng.standard_normal((4, 2, 3, 3)) * 0.4).astype(np.float32), "conv.weight"),
        numpy_helper.from_array(np.zeros(4, np.float32), "conv.bias"),
        numpy_helper.from_array(np.ones(4, np.float32), "bn.weight"),
        numpy_helper.from_array(np.zeros(4, np.float32), "bn.bias"),
        numpy_helper.from_array((rng.standard_normal(4) * 0.1).astype(np.float32), "bn.running_mean"),
        numpy_helper.from_array((rng.uniform(0.5, 1.5, 4)).astype(np.float32), "bn.running_var"),
        numpy_helper.from_array((rng.standard_normal((3, 4)) * 0.5).astype(np.float32), "fc.weight"),
        numpy_helper.from_array(np.zeros(3, np.float32), "fc.bias"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "conv.weight", "conv.bias"], ["c"]),
        helper.make_node("BatchNormalization", ["c", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"], ["b"]),
        helper.make_node("Relu", ["b"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["logits"], transB=1),
    ]
    g = helper.make_graph(
        nodes, "cnn_bn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 2, 6, 6])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [4, 3])], init,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="burnc-tests")
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    for name, fn in [
        ("dyn_shape_subgraph", dyn_shape_subgraph),
        ("if_const_cond", if_const_cond),
        ("loop_runtime", loop_runtime),
        ("if_runtime", if_runtime),
        ("scan_axes", scan_axes),
        ("mlp_dropout_ln", mlp_dropout_ln),
        ("cnn_bn", cnn_bn),
    ]:
        path = os.path.join(OUT, f"{name}.onnx")
        onnx.save(fn(), path)
        print("wrote", os.path.normpath(path))
