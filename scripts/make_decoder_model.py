#!/usr/bin/env python3
"""A small decoder-only transformer's decode step with a KV cache, written with onnx.helper and
its MatMuls quantized by onnxruntime's own MatMulNBitsQuantizer (int4 or int8 blocks), as
onnxruntime-genai models are.

    python3 scripts/make_decoder_model.py OUT_DIR [--layers 4 --hidden 512 --heads 8 --ffn 1536
        --vocab 4096 --past 128 --bits 4 --block 32] [--reference]

One step: token ids [1, 1] → embedding (+ a learned position) → per layer pre-LayerNorm
attention (q, k, v projections; the new key and value appended to the cache of `past` steps;
softmax over past + 1 keys; output projection) and a SiLU-gated MLP, each closed by a residual
add → final LayerNorm → the vocabulary head. Outputs: logits [1, 1, vocab] and each layer's
present key and value [1, heads, past + 1, head_dim]. Random weights from a fixed seed.

Writes OUT_DIR/model.onnx (quantized) and OUT_DIR/model_f32.onnx; with --reference also the
inputs (token id 7, caches from the seed) as OUT_DIR/input_<i>.pb and onnxruntime's outputs of
the quantized model as OUT_DIR/output_<i>.pb.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pydeps  # noqa: E402

pydeps.ensure("numpy", "onnx", "onnxruntime", "onnx_ir")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def build(a, rng):
    d, h, f, v, p = a.hidden, a.heads, a.ffn, a.vocab, a.past
    hd = d // h
    nodes, inits = [], []

    def w(name, shape, scale=0.02):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def const(name, value, dtype=np.int64):
        inits.append(numpy_helper.from_array(np.array(value, dtype=dtype), name))
        return name

    def node(op, ins, out, **attrs):
        nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))
        return out

    def layer_norm(x, name):
        gamma = const(f"{name}.g", 1.0 + rng.standard_normal(d) * 0.1, np.float32)
        return node("LayerNormalization", [x, gamma, const(f"{name}.b", rng.standard_normal(d) * 0.02, np.float32)], name, axis=-1, epsilon=1e-5)

    heads_shape = const("heads_shape", [1, 1, h, hd])
    flat_shape = const("flat_shape", [1, 1, d])
    scale = const("scale", 1.0 / np.sqrt(hd), np.float32)
    tok = node("Gather", [w("embed", [v, d]), "input_ids"], "tok")
    x = node("Add", [tok, w("pos", [1, 1, d])], "x0")
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, 1])]
    outputs = []
    for i in range(a.layers):
        pre = f"l{i}"
        xn = layer_norm(x, f"{pre}.ln1")
        proj = {}
        for t in "qkv":
            m = node("MatMul", [xn, w(f"{pre}.{t}", [d, d])], f"{pre}.{t}_proj")
            r = node("Reshape", [m, heads_shape], f"{pre}.{t}_heads")
            proj[t] = node("Transpose", [r], f"{pre}.{t}_t", perm=[0, 2, 1, 3])
        for t in "kv":
            inputs.append(helper.make_tensor_value_info(f"past_{t}_{i}", TensorProto.FLOAT, [1, h, p, hd]))
            proj[t] = node("Concat", [f"past_{t}_{i}", proj[t]], f"present_{t}_{i}", axis=2)
            outputs.append(helper.make_tensor_value_info(proj[t], TensorProto.FLOAT, [1, h, p + 1, hd]))
        kt = node("Transpose", [proj["k"]], f"{pre}.kt", perm=[0, 1, 3, 2])
        s = node("Mul", [node("MatMul", [proj["q"], kt], f"{pre}.qk"), scale], f"{pre}.scores")
        ctx = node("MatMul", [node("Softmax", [s], f"{pre}.probs", axis=-1), proj["v"]], f"{pre}.ctx")
        ctx = node("Reshape", [node("Transpose", [ctx], f"{pre}.ctx_t", perm=[0, 2, 1, 3]), flat_shape], f"{pre}.ctx_flat")
        x = node("Add", [x, node("MatMul", [ctx, w(f"{pre}.o", [d, d])], f"{pre}.o_proj")], f"{pre}.x1")
        xn = layer_norm(x, f"{pre}.ln2")
        gate = node("MatMul", [xn, w(f"{pre}.gate", [d, f])], f"{pre}.gate_proj")
        up = node("MatMul", [xn, w(f"{pre}.up", [d, f])], f"{pre}.up_proj")
        act = node("Mul", [node("Mul", [gate, node("Sigmoid", [gate], f"{pre}.sig")], f"{pre}.silu"), up], f"{pre}.act")
        x = node("Add", [x, node("MatMul", [act, w(f"{pre}.down", [f, d])], f"{pre}.down_proj")], f"{pre}.x2")
    logits = node("MatMul", [layer_norm(x, "ln_f"), w("head", [d, v])], "logits")
    outputs.insert(0, helper.make_tensor_value_info(logits, TensorProto.FLOAT, [1, 1, v]))
    g = helper.make_graph(nodes, "decoder_step", inputs, outputs, initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    for name, default in [("layers", 4), ("hidden", 512), ("heads", 8), ("ffn", 1536), ("vocab", 4096), ("past", 128), ("bits", 4), ("block", 32)]:
        ap.add_argument(f"--{name}", type=int, default=default)
    ap.add_argument("--reference", action="store_true")
    a = ap.parse_args()
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    os.makedirs(a.out, exist_ok=True)
    rng = np.random.default_rng(11)
    model = build(a, rng)
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(a.out, "model_f32.onnx"))
    q = MatMulNBitsQuantizer(model, bits=a.bits, block_size=a.block, is_symmetric=False, accuracy_level=0)
    q.process()
    path = os.path.join(a.out, "model.onnx")
    q.model.save_model_to_file(path, use_external_data_format=False)
    ops = [n.op_type for n in onnx.load(path).graph.node]
    print(f"make_decoder_model: {path}: {ops.count('MatMulNBits')} MatMulNBits ({a.bits}-bit, block {a.block}), {len(ops)} nodes")
    if a.reference:
        import onnxruntime as ort

        sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        feeds = {"input_ids": np.array([[7]], np.int64)}
        for i in sess.get_inputs()[1:]:
            feeds[i.name] = rng.standard_normal(i.shape).astype(np.float32)
        for i, (k, v) in enumerate(feeds.items()):
            with open(os.path.join(a.out, f"input_{i}.pb"), "wb") as fh:
                fh.write(numpy_helper.from_array(v, k).SerializeToString())
        for i, v in enumerate(sess.run(None, feeds)):
            with open(os.path.join(a.out, f"output_{i}.pb"), "wb") as fh:
                fh.write(numpy_helper.from_array(v).SerializeToString())


if __name__ == "__main__":
    main()
