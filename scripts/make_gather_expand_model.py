"""A data-movement benchmark model: Gather (constant indices, axis 1, then the last axis),
ReduceMean, Expand, Add over x [1, 256, 64, 64]. Compare two burnc builds with
`burnc bench OUT.onnx --work-dir D` and the printed harnesses run interleaved.

Usage: python3 scripts/make_gather_expand_model.py OUT.onnx
"""
import sys
import onnx, numpy as np
from onnx import helper, TensorProto, numpy_helper
rng = np.random.default_rng(0)
# Gather with constant indices on axis 1 (channel pick), then on the last axis; Expand of a per-channel vector.
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 256, 64, 64])
idx1 = numpy_helper.from_array(rng.integers(0, 256, 128).astype(np.int64), "idx1")
idx3 = numpy_helper.from_array(rng.integers(0, 64, 48).astype(np.int64), "idx3")
shape = numpy_helper.from_array(np.array([1, 128, 64, 48], np.int64), "shape")
nodes = [
  helper.make_node("Gather", ["x", "idx1"], ["g1"], axis=1),
  helper.make_node("Gather", ["g1", "idx3"], ["g3"], axis=3),
  helper.make_node("ReduceMean", ["g3"], ["m"], axes=[2, 3], keepdims=1),
  helper.make_node("Expand", ["m", "shape"], ["e"]),
  helper.make_node("Add", ["e", "g3"], ["y"]),
]
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
g = helper.make_graph(nodes, "gx", [x], [y], [idx1, idx3, shape])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
onnx.save(m, sys.argv[1] if len(sys.argv) > 1 else "gather_expand.onnx")
