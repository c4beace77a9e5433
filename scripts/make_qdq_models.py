#!/usr/bin/env python3
"""Small QDQ models, as onnxruntime's static quantizer writes them, with onnxruntime's
outputs: the cases of tests/quantized_models.rs.

Usage: scripts/make_qdq_models.py OUTDIR

Each case is OUTDIR/NAME/{model.onnx, test_data_set_0/input_0.pb, test_data_set_0/output_0.pb,
step.txt}, a float model quantized per channel with u8 or i8 activations: a CNN (windows 3×3,
5×5 and 1×1, strides, dilation, channel counts that are not multiples of 4, ReLU) and an MLP
(a MatMul over a 3-D input, Gemms with a bias, one with B transposed; sizes that are not
multiples of 4 or of the kernel's tiles). step.txt holds the output's quantization step (its
last QuantizeLinear's scale).
"""
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
import onnxruntime as ort
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

# (name, in channels, out channels, kernel, stride, pad, dilation, relu)
LAYERS = [
    ("c1", 3, 10, 3, 1, 1, 1, True),
    ("c2", 10, 16, 3, 2, 1, 1, True),
    ("c3", 16, 20, 1, 1, 0, 1, True),
    ("c4", 20, 13, 5, 1, 4, 2, True),
    ("c5", 13, 24, 1, 2, 0, 1, False),
]
SHAPE = [1, 3, 23, 19]
MLP_SHAPE = [2, 6, 23]


def cnn_model(path):
    rng = np.random.default_rng(7)
    nodes, inits, x = [], [], "x"
    for name, ci, co, k, s, p, d, relu in LAYERS:
        w = rng.normal(0, 1.0 / np.sqrt(ci * k * k), (co, ci, k, k)).astype(np.float32)
        b = rng.normal(0, 0.1, co).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"{name}_w"), numpy_helper.from_array(b, f"{name}_b")]
        y = f"{name}_y"
        nodes.append(helper.make_node("Conv", [x, f"{name}_w", f"{name}_b"], [y], kernel_shape=[k, k], strides=[s, s], pads=[p] * 4, dilations=[d, d], name=name))
        if relu:
            nodes.append(helper.make_node("Relu", [y], [f"{name}_r"], name=f"{name}_relu"))
            y = f"{name}_r"
        x = y
    nodes.append(helper.make_node("Identity", [x], ["y"], name="out"))
    g = helper.make_graph(nodes, "qdq_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(m, path)


def mlp_model(path):
    """x [2, 6, 23] → MatMul [23, 40] → Relu → Reshape [12, 40] → Gemm [40, 30] + b → Relu →
    Gemm [17, 30]ᵀ + b."""
    rng = np.random.default_rng(8)
    w = lambda *s: rng.normal(0, 1.0 / np.sqrt(s[0] if len(s) == 2 else 1), s).astype(np.float32)
    inits = [
        numpy_helper.from_array(w(23, 40), "w1"),
        numpy_helper.from_array(np.array([12, 40], np.int64), "shape"),
        numpy_helper.from_array(w(40, 30), "w2"),
        numpy_helper.from_array(rng.normal(0, 0.1, 30).astype(np.float32), "b2"),
        numpy_helper.from_array(rng.normal(0, 1.0 / np.sqrt(30), (17, 30)).astype(np.float32), "w3"),
        numpy_helper.from_array(rng.normal(0, 0.1, 17).astype(np.float32), "b3"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h1"], name="mm1"),
        helper.make_node("Relu", ["h1"], ["r1"], name="relu1"),
        helper.make_node("Reshape", ["r1", "shape"], ["f1"], name="flat"),
        helper.make_node("Gemm", ["f1", "w2", "b2"], ["h2"], name="gemm2"),
        helper.make_node("Relu", ["h2"], ["r2"], name="relu2"),
        helper.make_node("Gemm", ["r2", "w3", "b3"], ["y"], name="gemm3", transB=1),
    ]
    g = helper.make_graph(nodes, "qdq_mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, MLP_SHAPE)], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


class Reader(CalibrationDataReader):
    def __init__(self, shape):
        rng = np.random.default_rng(1)
        self.data = iter([{"x": rng.uniform(-1, 1, shape).astype(np.float32)} for _ in range(8)])

    def get_next(self):
        return next(self.data, None)


def last_step(model):
    m = onnx.load(model)
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    q = [n for n in m.graph.node if n.op_type == "QuantizeLinear"][-1]
    return float(inits[q.input[1]].reshape(-1)[0])


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for kind, make, shape in [("cnn", cnn_model, SHAPE), ("mlp", mlp_model, MLP_SHAPE)]:
        fp = out / f"{kind}_float.onnx"
        make(fp)
        x = np.random.default_rng(2).uniform(-1, 1, shape).astype(np.float32)
        for sign, act in [("u8", QuantType.QUInt8), ("s8", QuantType.QInt8)]:
            name = f"qdq_{kind}_{sign}"
            case = out / name
            (case / "test_data_set_0").mkdir(parents=True, exist_ok=True)
            model = case / "model.onnx"
            quantize_static(str(fp), str(model), Reader(shape), quant_format=QuantFormat.QDQ, per_channel=True, activation_type=act, weight_type=QuantType.QInt8)
            sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
            (y,) = sess.run(None, {"x": x})
            (case / "test_data_set_0" / "input_0.pb").write_bytes(numpy_helper.from_array(x, "x").SerializeToString())
            (case / "test_data_set_0" / "output_0.pb").write_bytes(numpy_helper.from_array(y, "y").SerializeToString())
            (case / "step.txt").write_text(f"{last_step(model)!r}\n")
            print(f"{name}: output {list(y.shape)}, step {last_step(model)}")


if __name__ == "__main__":
    main()
