"""Writes model.onnx: the small CNN examples/finetune-digits trains from scratch.

x [N, 1, 8, 8] → Conv 3×3 (8) → Relu → MaxPool 2 → Conv 3×3 (16) → Relu → MaxPool 2 →
Flatten (64) → Gemm 64→32 → Relu → Gemm 32→10 (logits). Weights are PyTorch's default
initialisation (Kaiming-uniform with a = √5, i.e. U(±1/√fan_in) for weights and biases),
seeded, so the run is reproducible. The batch dim is symbolic (`N`): the example's build.rs
pins it to 32 for training, examples/web-digits to 1 for the page. Needs numpy and onnx
(scripts/setup_python.sh).
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

rng = np.random.default_rng(0)


def uniform(shape, fan_in):
    b = 1.0 / np.sqrt(fan_in)
    return rng.uniform(-b, b, size=shape).astype(np.float32)


inits = []


def param(name, shape, fan_in):
    inits.append(numpy_helper.from_array(uniform(shape, fan_in), name))
    return name


nodes = [
    helper.make_node("Conv", ["x", param("conv1.weight", (8, 1, 3, 3), 9), param("conv1.bias", (8,), 9)], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
    helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
    helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2], name="pool1"),
    helper.make_node("Conv", ["p1", param("conv2.weight", (16, 8, 3, 3), 72), param("conv2.bias", (16,), 72)], ["c2"], pads=[1, 1, 1, 1], name="conv2"),
    helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
    helper.make_node("MaxPool", ["r2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2], name="pool2"),
    helper.make_node("Flatten", ["p2"], ["f"], axis=1, name="flatten"),
    helper.make_node("Gemm", ["f", param("fc1.weight", (32, 64), 64), param("fc1.bias", (32,), 64)], ["h"], transB=1, name="fc1"),
    helper.make_node("Relu", ["h"], ["hr"], name="relu3"),
    helper.make_node("Gemm", ["hr", param("fc2.weight", (10, 32), 32), param("fc2.bias", (10,), 32)], ["logits"], transB=1, name="fc2"),
]
graph = helper.make_graph(
    nodes,
    "digits_cnn",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 8, 8])],
    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
    inits,
)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="burnc-examples")
onnx.checker.check_model(model)
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "model.onnx")
onnx.save(model, out)
print(out, os.path.getsize(out), "bytes")
