#!/usr/bin/env python3
"""Models whose time goes to elementwise chains, for `scripts/bench.py` (random weights, seeded):

- `ffn_gelu.onnx`: a transformer feed-forward block as exporters write it: MatMul, bias Add,
  GELU spelled out (Div by sqrt 2, Erf, Add 1, Mul x, Mul 0.5), MatMul, bias Add, residual Add.
  [1, 128, 384] → [1, 128, 1536] → [1, 128, 384].
- `silu_convs.onnx`: a YOLO-style stack of 3×3 convolutions, each followed by SiLU written as
  Sigmoid and Mul, [1, 32, 80, 80].

    python3 scripts/make_elementwise_bench.py OUT_DIR
"""
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def const(name, arr):
    return numpy_helper.from_array(np.asarray(arr, dtype=np.float32), name)


def ffn(rng):
    d, h, s = 384, 1536, 128
    inits = [
        const("w1", rng.standard_normal((d, h)) / np.sqrt(d)),
        const("b1", rng.standard_normal(h) * 0.1),
        const("w2", rng.standard_normal((h, d)) / np.sqrt(h)),
        const("b2", rng.standard_normal(d) * 0.1),
        const("sqrt2", np.sqrt(2.0)),
        const("one", 1.0),
        const("half", 0.5),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h0"]),
        helper.make_node("Add", ["h0", "b1"], ["h1"]),
        helper.make_node("Div", ["h1", "sqrt2"], ["g0"]),
        helper.make_node("Erf", ["g0"], ["g1"]),
        helper.make_node("Add", ["g1", "one"], ["g2"]),
        helper.make_node("Mul", ["h1", "g2"], ["g3"]),
        helper.make_node("Mul", ["g3", "half"], ["g4"]),
        helper.make_node("MatMul", ["g4", "w2"], ["o0"]),
        helper.make_node("Add", ["o0", "b2"], ["o1"]),
        helper.make_node("Add", ["o1", "x"], ["y"]),
    ]
    g = helper.make_graph(
        nodes, "ffn_gelu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, s, d])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, s, d])],
        inits,
    )
    return g


def silu_convs(rng):
    c, n = 32, 4
    inits, nodes = [], []
    x = "x"
    for i in range(n):
        inits += [const(f"w{i}", rng.standard_normal((c, c, 3, 3)) * np.sqrt(2.0 / (9 * c))), const(f"b{i}", rng.standard_normal(c) * 0.1)]
        nodes += [
            helper.make_node("Conv", [x, f"w{i}", f"b{i}"], [f"c{i}"], pads=[1, 1, 1, 1]),
            helper.make_node("Sigmoid", [f"c{i}"], [f"s{i}"]),
            helper.make_node("Mul", [f"c{i}", f"s{i}"], [f"a{i}"]),
        ]
        x = f"a{i}"
    g = helper.make_graph(
        nodes, "silu_convs",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, 80, 80])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, c, 80, 80])],
        inits,
    )
    return g


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    for name, make in [("ffn_gelu", ffn), ("silu_convs", silu_convs)]:
        m = helper.make_model(make(rng), opset_imports=[helper.make_opsetid("", 17)])
        m.ir_version = 8
        onnx.checker.check_model(m)
        onnx.save(m, out / f"{name}.onnx")
        print(out / f"{name}.onnx")


if __name__ == "__main__":
    main()
