#!/usr/bin/env python3
"""Models as onnxruntime's own tools leave them, for tests/contrib_ops.rs.

usage: make_optimized_models.py DATA OUT

DATA is the conformance data folder (its light_random models). For each case OUT/<case>/ gets
model.onnx, input_0.pb and output_0.pb (onnxruntime's output for that very file):

- opt_<model>: a light model after onnxruntime's graph optimiser at the `all` level
  (SessionOptions.optimized_model_filepath): com.microsoft.nchwc ReorderInput/ReorderOutput/
  Conv (with a fused Sum and activation)/MaxPool/AveragePool/GlobalAveragePool, FusedConv,
  FusedGemm. Such files are written for the CPU they were made on (the nchwc block is 16 with
  AVX-512, else 8), so they are made where the test runs.
- opt_mobile: a small mobile-style net written here (depthwise and pointwise convolutions, a
  residual sum, HardSigmoid, average pools, a nearest-neighbour upsampling, NHWC input) through
  the same optimiser.
- quant_<model>: a model quantized by onnxruntime.quantization.quantize_static (QOperator
  format: QLinearConv, QLinearAdd, QLinearGlobalAveragePool, QLinearConcat … ; per channel),
  calibrated on random inputs;
- optquant_<model>: that quantized model through the optimiser (channels-last QLinearConv,
  QLinearGlobalAveragePool, nchwc pools);
- opt_encoder, quant_encoder: a small BERT encoder through onnxruntime.transformers.optimizer
  (SkipLayerNormalization, BiasGelu), then quantize_dynamic (DynamicQuantizeLinear,
  MatMulInteger).
The light models' final Softmax is cut off first: their probabilities saturate.
"""
import glob
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

LIGHT = ["squeezenet", "shufflenet", "resnet50", "bvlc_alexnet"]
QUANT = ["squeezenet", "shufflenet", "inception_v1", "resnet50", "bvlc_alexnet"]


def strip_unused_inputs(path):
    """Old model files list their weights as inputs too; the optimiser keeps such names as
    inputs after it folds the weights away. Drop the inputs no node reads."""
    m = onnx.load(path)
    used = {i for n in m.graph.node for i in n.input}
    keep = [i for i in m.graph.input if i.name in used]
    del m.graph.input[:]
    m.graph.input.extend(keep)
    onnx.save(m, path)


def logits_model(src, dst):
    """`src` without its final Softmax, so the output compared is the logits (the light models'
    softmax saturates: the probabilities would hide any difference)."""
    m = onnx.load(src)
    for o in m.graph.output:
        n = next((n for n in m.graph.node if n.op_type == "Softmax" and n.output[0] == o.name), None)
        if n is not None:
            m.graph.node.remove(n)
            o.name = n.input[0]
    onnx.save(m, dst)
    return dst


def optimize(src, dst):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.optimized_model_filepath = dst
    so.log_severity_level = 3
    ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
    strip_unused_inputs(dst)


def write_case(out, model_path, x):
    s = ort.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    inp = s.get_inputs()[0]
    y = s.run(None, {inp.name: x})[0]
    with open(os.path.join(out, "input_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(x, inp.name).SerializeToString())
    with open(os.path.join(out, "output_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(y).SerializeToString())


def light_input(data, name):
    t = onnx.TensorProto()
    with open(glob.glob(os.path.join(data, "light_random", f"light_{name}_random", "test_data_set_0", "input_0.pb"))[0], "rb") as f:
        t.ParseFromString(f.read())
    return numpy_helper.to_array(t)


def mobile(path, rng):
    """NHWC image → conv 3x3/2 → [depthwise 3x3, HardSigmoid gate, pointwise 1x1, + residual]
    → AveragePool → Resize ×2 (nearest) → MaxPool → GlobalAveragePool → flatten."""
    def w(name, shape, scale=0.3):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)
    c = 32
    inits = [w("w0", [c, 3, 3, 3]), w("b0", [c]), w("wd", [c, 1, 3, 3]), w("bd", [c]), w("wp", [c, c, 1, 1], 0.2), w("bp", [c]),
             numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")]
    nodes = [
        helper.make_node("Transpose", ["x"], ["xc"], perm=[0, 3, 1, 2]),
        helper.make_node("Conv", ["xc", "w0", "b0"], ["c0"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c0"], ["r0"]),
        helper.make_node("Conv", ["r0", "wd", "bd"], ["d0"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=c),
        helper.make_node("HardSigmoid", ["d0"], ["g0"]),
        helper.make_node("Conv", ["g0", "wp", "bp"], ["p0"], kernel_shape=[1, 1]),
        helper.make_node("Add", ["p0", "r0"], ["s0"]),
        helper.make_node("Relu", ["s0"], ["s1"]),
        helper.make_node("AveragePool", ["s1"], ["a0"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Resize", ["a0", "", "scales"], ["u0"], mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
        helper.make_node("MaxPool", ["u0"], ["m0"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("GlobalAveragePool", ["m0"], ["gp"]),
        helper.make_node("Flatten", ["gp"], ["y"]),
    ]
    g = helper.make_graph(nodes, "mobile", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 32, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def quantize(src, dst, x, rng):
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process

    name = ort.InferenceSession(src, providers=["CPUExecutionProvider"]).get_inputs()[0].name

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.items = iter([{name: x}] + [{name: rng.standard_normal(x.shape).astype(np.float32)} for _ in range(3)])

        def get_next(self):
            return next(self.items, None)

    pre = dst + ".pre.onnx"
    quant_pre_process(src, pre, skip_optimization=True)
    quantize_static(pre, dst, Reader(), quant_format=QuantFormat.QOperator, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    os.remove(pre)
    strip_unused_inputs(dst)


def main():
    data, out = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(11)
    for name in LIGHT:
        d = os.path.join(out, f"opt_{name}")
        os.makedirs(d, exist_ok=True)
        src = logits_model(os.path.join(data, "light_random", f"light_{name}_random", "model.onnx"), os.path.join(d, "logits.onnx"))
        optimize(src, os.path.join(d, "model.onnx"))
        os.remove(src)
        write_case(d, os.path.join(d, "model.onnx"), light_input(data, name))
    d = os.path.join(out, "opt_mobile")
    os.makedirs(d, exist_ok=True)
    mobile(os.path.join(d, "plain.onnx"), rng)
    optimize(os.path.join(d, "plain.onnx"), os.path.join(d, "model.onnx"))
    os.remove(os.path.join(d, "plain.onnx"))
    write_case(d, os.path.join(d, "model.onnx"), rng.standard_normal([1, 32, 32, 3]).astype(np.float32))
    for name in QUANT:
        d = os.path.join(out, f"quant_{name}")
        os.makedirs(d, exist_ok=True)
        x = light_input(data, name)
        src = logits_model(os.path.join(data, "light_random", f"light_{name}_random", "model.onnx"), os.path.join(d, "logits.onnx"))
        quantize(src, os.path.join(d, "model.onnx"), x, rng)
        os.remove(src)
        write_case(d, os.path.join(d, "model.onnx"), x)
        # The quantized model through the optimiser too: onnxruntime's NHWC rewrite of 8-bit
        # convolutions (com.microsoft QLinearConv and QLinearGlobalAveragePool with
        # channels_last, Transposes around them) and nchwc pools.
        o = os.path.join(out, f"optquant_{name}")
        os.makedirs(o, exist_ok=True)
        optimize(os.path.join(d, "model.onnx"), os.path.join(o, "model.onnx"))
        write_case(o, os.path.join(o, "model.onnx"), x)
    encoder(out)
    print(f"make_optimized_models: wrote {out}")


def encoder(out):
    """A small BERT encoder (scripts/gpu_bench_models.py's MiniLM graph at hidden 64, 2 heads,
    2 layers, sequence 80) through onnxruntime.transformers.optimizer's own fusions (its
    attention pattern, without a mask, is not fused: SkipLayerNormalization and BiasGelu are),
    then that encoder quantized by quantize_dynamic (DynamicQuantizeLinear, MatMulInteger)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from gpu_bench_models import small_encoder
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.transformers.optimizer import optimize_model

    model, ids = small_encoder()
    d = os.path.join(out, "opt_encoder")
    os.makedirs(d, exist_ok=True)
    plain = os.path.join(d, "plain.onnx")
    onnx.save(model, plain)
    opt = optimize_model(plain, model_type="bert", num_heads=2, hidden_size=64, opt_level=0)
    opt.save_model_to_file(os.path.join(d, "model.onnx"))
    os.remove(plain)
    write_case(d, os.path.join(d, "model.onnx"), ids)
    q = os.path.join(out, "quant_encoder")
    os.makedirs(q, exist_ok=True)
    quantize_dynamic(os.path.join(d, "model.onnx"), os.path.join(q, "model.onnx"), weight_type=QuantType.QInt8, extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    write_case(q, os.path.join(q, "model.onnx"), ids)


if __name__ == "__main__":
    main()
