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
    return g


def write_case(out, graph, feeds, expected=None, opset=17, domains=(("com.microsoft", 1),)):
    """OUT/model.onnx (`graph`, with the opsets of `domains`), OUT/input_<i>.pb from `feeds`
    and OUT/output_<i>.pb: `expected`, else onnxruntime's outputs (string outputs come back
    from onnxruntime as lists)."""
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "model.onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)] + [helper.make_opsetid(d, v) for d, v in domains]), path)
    if expected is None:
        expected = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, feeds)
    for i, (k, v) in enumerate(feeds.items()):
        with open(os.path.join(out, f"input_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(v, k).SerializeToString())
    for i, v in enumerate(expected):
        with open(os.path.join(out, f"output_{i}.pb"), "wb") as f:
            f.write(numpy_helper.from_array(np.asarray(v)).SerializeToString())


def main():
    out = sys.argv[1]
    rng = np.random.default_rng(7)
    feeds = {k: (rng.standard_normal(v) * (2.0 if k in "XS" else 0.5)).astype(np.float32) for k, v in SHAPES.items()}
    write_case(out, model(), feeds)
    g = helper.make_graph(
        [helper.make_node("BiasAdd", ["X", "B", "S"], ["y"], domain="com.microsoft")], "bias_add",
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, SHAPES[k]) for k in ["X", "B", "S"]],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 8])],
    )
    write_case(os.path.join(out, "bias_add"), g, {k: feeds[k] for k in ["X", "B", "S"]}, [feeds["X"] + feeds["B"] + feeds["S"]])
    fused(os.path.join(out, "fused"), rng)
    qlinear(os.path.join(out, "qlinear"), rng)
    for name, graph, feeds, expected in transformer(rng):
        write_case(os.path.join(out, name), graph, feeds, expected)
    dynamic_lstm(out, rng)
    matmul_nbits(os.path.join(out, "matmul_nbits"), rng)
    gather_block_quantized(os.path.join(out, "gather_block_quantized"), rng)
    strings(os.path.join(out, "strings"), rng)
    group_query_attention(out, rng)
    nhwc_conv(os.path.join(out, "nhwc_conv"), rng)
    print(f"make_contrib_models: wrote {out}")


def nhwc_conv(out, rng):
    """NhwcConv (onnxruntime has it for CUDA, not for its CPU): NHWC in and out, OIHW weights;
    the reference is onnxruntime's Conv between two Transposes."""
    x = rng.standard_normal([2, 6, 7, 4]).astype(np.float32)
    w = numpy_helper.from_array((rng.standard_normal([8, 2, 3, 3]) * 0.5).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal([8]).astype(np.float32), "b")
    attrs = dict(kernel_shape=[3, 3], pads=[1, 0, 1, 2], strides=[1, 2], group=2)
    io = ([helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6, 7, 4])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    ref = helper.make_graph([helper.make_node("Transpose", ["x"], ["xc"], perm=[0, 3, 1, 2]), helper.make_node("Conv", ["xc", "w", "b"], ["yc"], **attrs),
                             helper.make_node("Transpose", ["yc"], ["y"], perm=[0, 2, 3, 1])], "ref", *io, [w, b])
    want = ort.InferenceSession(helper.make_model(ref, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    g = helper.make_graph([helper.make_node("NhwcConv", ["x", "w", "b"], ["y"], domain="com.microsoft", **attrs)], "nhwc_conv", *io, [w, b])
    write_case(out, g, {"x": x}, want)


def group_query_attention(out, rng):
    """GroupQueryAttention as onnxruntime-genai's decoders use it: a right-padded first prompt,
    decode steps with a cache longer than the valid tokens (per-batch lengths from seqlens_k),
    a cache buffer shared between past and present, rotary embedding (both layouts), packed
    QKV, sliding window, softcap, 4 query heads per kv head."""
    cases = {
        "gqa_prompt": dict(B=2, S=4, P=0, Hq=4, Hkv=2, D=16, seqlens=[3, 1], total=4, do_rotary=1),
        "gqa_decode": dict(B=2, S=1, P=6, Hq=4, Hkv=2, D=16, seqlens=[6, 4], total=7, do_rotary=1, rotary_interleaved=1, scale=0.3, softcap=2.0),
        "gqa_shared_buffer": dict(B=2, S=1, P=8, Hq=4, Hkv=2, D=16, seqlens=[6, 4], total=7, local_window_size=3),
        "gqa_packed": dict(B=1, S=3, P=6, Hq=4, Hkv=1, D=16, seqlens=[8], total=9, packed=True),
    }
    for name, c in cases.items():
        B, S, P, Hq, Hkv, D = (c.pop(k) for k in ["B", "S", "P", "Hq", "Hkv", "D"])
        seqlens, total, packed = c.pop("seqlens"), c.pop("total"), c.pop("packed", False)
        f = lambda *shape: (rng.standard_normal(shape)).astype(np.float32)
        feeds = {}
        if packed:
            feeds["q"] = f(B, S, (Hq + 2 * Hkv) * D)
            names = ["q", "", ""]
        else:
            feeds.update(q=f(B, S, Hq * D), k=f(B, S, Hkv * D), v=f(B, S, Hkv * D))
            names = ["q", "k", "v"]
        if P:
            feeds.update(past_k=f(B, Hkv, P, D), past_v=f(B, Hkv, P, D))
            names += ["past_k", "past_v"]
        else:
            names += ["", ""]
        feeds["seqlens_k"] = np.array(seqlens, np.int32)
        feeds["total"] = np.array(total, np.int32)
        names += ["seqlens_k", "total"]
        if c.get("do_rotary"):
            half = D // 2
            angles = np.outer(np.arange(total + 8), 1.0 / (10000 ** (np.arange(half) / half)))
            feeds["cos"], feeds["sin"] = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
            names += ["cos", "sin"]
        node = helper.make_node("GroupQueryAttention", names, ["y", "present_k", "present_v"], domain="com.microsoft", num_heads=Hq, kv_num_heads=Hkv, **c)
        ins = [helper.make_tensor_value_info(k, TensorProto.INT32 if v.dtype == np.int32 else TensorProto.FLOAT, list(v.shape)) for k, v in feeds.items()]
        g = helper.make_graph([node], name, ins, [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ["y", "present_k", "present_v"]])
        write_case(os.path.join(out, name), g, feeds)


def strings(out, rng):
    """String tensors as a text-preprocessing front end uses them: case change, concatenation,
    regex match, a vocabulary lookup, splitting, equality, and Cast to and from string."""
    S = TensorProto.STRING
    nodes = [
        # onnxruntime's default locale (en_US.UTF-8) needs a language pack; C maps ASCII only.
        helper.make_node("StringNormalizer", ["text"], ["upper"], case_change_action="UPPER", locale="C"),
        helper.make_node("StringConcat", ["upper", "suffix"], ["joined"]),
        helper.make_node("RegexFullMatch", ["text"], ["matched"], pattern=r"[a-z]+\s\d+"),
        helper.make_node("LabelEncoder", ["text"], ["ids"], domain="ai.onnx.ml", keys_strings=["apple 12", "pear", "fig 7"], values_int64s=[3, 1, 4], default_int64=-1),
        helper.make_node("StringSplit", ["text"], ["pieces", "counts"], delimiter=" "),
        helper.make_node("Equal", ["text", "probe"], ["same"]),
        helper.make_node("Cast", ["num"], ["num_text"], to=S),
        helper.make_node("Cast", ["num_text"], ["num_back"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["digits"], ["parsed"], to=TensorProto.INT64),
    ]
    g = helper.make_graph(
        nodes, "strings",
        [helper.make_tensor_value_info("text", S, [4]), helper.make_tensor_value_info("num", TensorProto.FLOAT, [5]), helper.make_tensor_value_info("digits", S, [3])],
        [helper.make_tensor_value_info(n, t, None) for n, t in [("joined", S), ("matched", TensorProto.BOOL), ("ids", TensorProto.INT64), ("pieces", S), ("counts", TensorProto.INT64), ("same", TensorProto.BOOL), ("num_text", S), ("num_back", TensorProto.FLOAT), ("parsed", TensorProto.INT64)]],
        [numpy_helper.from_array(np.array(["!"], dtype=object), "suffix"), numpy_helper.from_array(np.array(["pear"], dtype=object), "probe")],
    )
    feeds = {
        "text": np.array(["apple 12", "pear", "Grüße aus Köln", "fig 7"], dtype=object),
        "num": np.array([0.3, -1234567.8, 1e-7, 42.0, rng.standard_normal()], dtype=np.float32),
        "digits": np.array(["17", " -4", "+250"], dtype=object),
    }
    write_case(out, g, feeds, opset=21, domains=(("ai.onnx.ml", 2),))

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
    write_case(out, g, {k: rng.standard_normal(v).astype(np.float32) for k, v in shapes.items()})


def qlinear(out, rng):
    """onnxruntime's quantized elementwise ops on uint8 (per-tensor scales and zero points as
    initializers), and the com.microsoft QuantizeLinear / DequantizeLinear."""
    ms = "com.microsoft"
    f32, u8 = TensorProto.FLOAT, TensorProto.UINT8
    inits = [
        helper.make_tensor("sa", f32, [], [0.05]), helper.make_tensor("za", u8, [], [120]),
        helper.make_tensor("sb", f32, [], [0.03]), helper.make_tensor("zb", u8, [], [130]),
        helper.make_tensor("sc", f32, [], [0.07]), helper.make_tensor("zc", u8, [], [110]),
        helper.make_tensor("ss", f32, [], [1.0 / 256]), helper.make_tensor("zs", u8, [], [0]),
    ]
    nodes = [
        helper.make_node("QLinearAdd", ["a", "sa", "za", "b", "sb", "zb", "sc", "zc"], ["add"], domain=ms),
        helper.make_node("QLinearMul", ["a", "sa", "za", "b", "sb", "zb", "sc", "zc"], ["mul"], domain=ms),
        helper.make_node("QLinearSigmoid", ["a", "sa", "za", "ss", "zs"], ["sigmoid"], domain=ms),
        helper.make_node("QLinearLeakyRelu", ["a", "sa", "za", "sc", "zc"], ["leaky"], domain=ms, alpha=0.1),
        helper.make_node("QLinearGlobalAveragePool", ["a", "sa", "za", "sc", "zc"], ["gap"], domain=ms),
        helper.make_node("QLinearConcat", ["sc", "zc", "a", "sa", "za", "b", "sb", "zb"], ["cat"], domain=ms, axis=1),
        helper.make_node("QLinearAveragePool", ["a", "sa", "za", "sc", "zc"], ["avg"], domain=ms, kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("QLinearAveragePool", ["a", "sa", "za", "sc", "zc"], ["avg_pad"], domain=ms, kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1),
        helper.make_node("DequantizeLinear", ["a", "sa", "za"], ["deq"], domain=ms),
        helper.make_node("QuantizeLinear", ["f", "sc", "zc"], ["quant"], domain=ms),
    ]
    shape = [2, 3, 4, 4]
    outs = {"add": (u8, shape), "mul": (u8, shape), "sigmoid": (u8, shape), "leaky": (u8, shape), "gap": (u8, [2, 3, 1, 1]), "cat": (u8, [2, 6, 4, 4]), "avg": (u8, [2, 3, 2, 2]), "avg_pad": (u8, shape), "deq": (f32, shape), "quant": (u8, shape)}
    g = helper.make_graph(
        nodes, "qlinear", [helper.make_tensor_value_info("a", u8, shape), helper.make_tensor_value_info("b", u8, shape), helper.make_tensor_value_info("f", f32, shape)],
        [helper.make_tensor_value_info(k, t, sh) for k, (t, sh) in outs.items()], inits,
    )
    feeds = {"a": rng.integers(0, 256, shape).astype(np.uint8), "b": rng.integers(0, 256, shape).astype(np.uint8), "f": (rng.standard_normal(shape) * 5).astype(np.float32)}
    write_case(out, g, feeds)


def transformer(rng):
    """The attention-family, embedding and quantized-product ops of onnxruntime's transformer
    optimizer and quantizer, one small graph each: (name, graph, feeds, expected or None for
    onnxruntime's outputs). BiasSplitGelu has no onnxruntime CPU kernel: numpy's reference."""
    import math

    ms = "com.microsoft"
    f32, i32, u8, i8 = TensorProto.FLOAT, TensorProto.INT32, TensorProto.UINT8, TensorProto.INT8
    vi = helper.make_tensor_value_info
    normal = lambda *shape: rng.standard_normal(shape).astype(np.float32)
    # 1 for real keys, 0 for padding at the end of each row.
    mask = np.array([[1, 1, 1, 1], [1, 1, 0, 0]], dtype=np.int32)

    x, bias = normal(2, 3, 8), normal(8)
    t = x + bias
    erf = np.vectorize(math.erf)
    split_gelu = t[..., :4] * (0.5 * t[..., 4:] * (1 + erf(t[..., 4:] / math.sqrt(2)))).astype(np.float32)
    yield ("bias_split_gelu", helper.make_graph([helper.make_node("BiasSplitGelu", ["x", "bias"], ["y"], domain=ms)], "bias_split_gelu",
                                                [vi("x", f32, [2, 3, 8]), vi("bias", f32, [8])], [vi("y", f32, [2, 3, 4])]),
           {"x": x, "bias": bias}, [split_gelu.astype(np.float32)])

    # Quantized products: per-column B scales and zero points, as the quantizer writes them.
    inits = [
        helper.make_tensor("a_scale", f32, [], [0.04]), helper.make_tensor("a_zero", u8, [], [128]),
        numpy_helper.from_array((rng.random(5) * 0.02 + 0.01).astype(np.float32), "b_scale"),
        numpy_helper.from_array(np.zeros(5, np.int8), "b_zero"),
        numpy_helper.from_array(rng.integers(-100, 100, (8, 5)).astype(np.int8), "b"),
        numpy_helper.from_array(rng.integers(-100, 100, (5, 8)).astype(np.int8), "bt"),
        numpy_helper.from_array(normal(5), "bias"),
        numpy_helper.from_array(rng.integers(-2000, 2000, 5).astype(np.int32), "c"),
    ]
    nodes = [
        helper.make_node("MatMulIntegerToFloat", ["qa", "b", "a_scale", "b_scale", "a_zero", "b_zero", "bias"], ["mmitf"], domain=ms),
        helper.make_node("DynamicQuantizeMatMul", ["fa", "b", "b_scale", "b_zero", "bias"], ["dqmm"], domain=ms),
        helper.make_node("QGemm", ["qg", "a_scale", "a_zero", "bt", "b_scale", "b_zero", "c"], ["qgemm"], domain=ms, transB=1, alpha=0.5),
    ]
    yield ("quantized_products", helper.make_graph(nodes, "quantized_products", [vi("qa", u8, [2, 3, 8]), vi("fa", f32, [2, 3, 8]), vi("qg", u8, [4, 8])],
                                                   [vi("mmitf", f32, [2, 3, 5]), vi("dqmm", f32, [2, 3, 5]), vi("qgemm", f32, [4, 5])], inits),
           {"qa": rng.integers(0, 256, (2, 3, 8)).astype(np.uint8), "fa": normal(2, 3, 8) * 3, "qg": rng.integers(0, 256, (4, 8)).astype(np.uint8)}, None)

    # Attention (packed projection) and MultiHeadAttention, 2 heads of 4, a padding mask.
    nodes = [
        helper.make_node("Attention", ["x", "w", "wb", "mask"], ["attn"], domain=ms, num_heads=2),
        helper.make_node("MultiHeadAttention", ["q", "k", "v", "qkv_bias", "mask"], ["mha"], domain=ms, num_heads=2),
        helper.make_node("MultiHeadAttention", ["q", "k", "v"], ["mha_plain"], domain=ms, num_heads=2, scale=0.3),
    ]
    inputs = {"x": [2, 4, 8], "w": [8, 24], "wb": [24], "q": [2, 3, 8], "k": [2, 4, 8], "v": [2, 4, 8], "qkv_bias": [24]}
    g = helper.make_graph(nodes, "attention", [vi(k, f32, s) for k, s in inputs.items()] + [vi("mask", i32, [2, 4])],
                          [vi("attn", f32, [2, 4, 8]), vi("mha", f32, [2, 3, 8]), vi("mha_plain", f32, [2, 3, 8])])
    feeds = {k: normal(*s) for k, s in inputs.items()}
    feeds["mask"] = mask
    yield ("attention", g, feeds, None)

    # QAttention (8-bit input and weights, per-tensor and per-column weight scales), a mask.
    inits = [
        numpy_helper.from_array(rng.integers(-100, 100, (8, 24)).astype(np.int8), "qw"),
        numpy_helper.from_array(normal(24), "qb"),
        helper.make_tensor("x_scale", f32, [], [0.03]), helper.make_tensor("x_zero", u8, [], [120]),
        helper.make_tensor("w_scale", f32, [], [0.02]), helper.make_tensor("w_zero", TensorProto.INT8, [], [3]),
        numpy_helper.from_array((rng.random(24) * 0.02 + 0.005).astype(np.float32), "w_scales"),
        numpy_helper.from_array(np.zeros(24, np.int8), "w_zeros"),
    ]
    nodes = [
        helper.make_node("QAttention", ["qx", "qw", "qb", "x_scale", "w_scale", "mask", "x_zero", "w_zero"], ["qattn"], domain=ms, num_heads=2),
        helper.make_node("QAttention", ["qx", "qw", "qb", "x_scale", "w_scales", "", "x_zero", "w_zeros"], ["qattn_cols"], domain=ms, num_heads=2, unidirectional=1),
    ]
    g = helper.make_graph(nodes, "qattention", [vi("qx", u8, [2, 4, 8]), vi("mask", i32, [2, 4])], [vi("qattn", f32, [2, 4, 8]), vi("qattn_cols", f32, [2, 4, 8])], inits)
    yield ("qattention", g, {"qx": rng.integers(0, 256, (2, 4, 8)).astype(np.uint8), "mask": mask}, None)

    # SimplifiedLayerNormalization: onnxruntime's RMS normalization, in the default domain.
    g = helper.make_graph([helper.make_node("SimplifiedLayerNormalization", ["x", "scale"], ["y"], axis=-1, epsilon=1e-5)], "simplified_ln",
                          [vi("x", f32, [2, 3, 8]), vi("scale", f32, [8])], [vi("y", f32, [2, 3, 8])])
    yield ("simplified_layer_norm", g, {"x": normal(2, 3, 8), "scale": normal(8)}, None)

    # RotaryEmbedding on [batch, sequence, hidden] (2 heads of 8), halves and interleaved.
    cache = {k: numpy_helper.from_array(f(np.outer(np.arange(16), 1.0 / 10000 ** (np.arange(4) / 4))).astype(np.float32), k) for k, f in [("cos", np.cos), ("sin", np.sin)]}
    nodes = [helper.make_node("RotaryEmbedding", ["x", "pos", "cos", "sin"], [f"rope{i}"], domain=ms, num_heads=2, interleaved=i) for i in (0, 1)]
    g = helper.make_graph(nodes, "rotary", [vi("x", f32, [2, 3, 16]), vi("pos", TensorProto.INT64, [2, 3])],
                          [vi("rope0", f32, [2, 3, 16]), vi("rope1", f32, [2, 3, 16])], list(cache.values()))
    yield ("rotary_embedding", g, {"x": normal(2, 3, 16), "pos": np.array([[0, 1, 2], [5, 9, 15]], dtype=np.int64)}, None)

    # EmbedLayerNormalization with segments and a mask (its mask_index output).
    inits = [numpy_helper.from_array(normal(*s), k) for k, s in {"word": [10, 8], "pos": [6, 8], "seg": [2, 8], "gamma": [8], "beta": [8]}.items()]
    node = helper.make_node("EmbedLayerNormalization", ["ids", "segs", "word", "pos", "seg", "gamma", "beta", "mask"], ["emb", "mask_index", "emb_sum"], domain=ms, epsilon=1e-5)
    g = helper.make_graph([node], "embed_layer_norm", [vi("ids", i32, [2, 4]), vi("segs", i32, [2, 4]), vi("mask", i32, [2, 4])],
                          [vi("emb", f32, [2, 4, 8]), vi("mask_index", i32, [2]), vi("emb_sum", f32, [2, 4, 8])], inits)
    feeds = {"ids": rng.integers(0, 10, (2, 4)).astype(np.int32), "segs": rng.integers(0, 2, (2, 4)).astype(np.int32), "mask": mask}
    yield ("embed_layer_norm", g, feeds, None)


def dynamic_lstm(out, rng):
    """A bidirectional LSTM quantized by onnxruntime.quantization.quantize_dynamic (which writes
    DynamicQuantizeLSTM), as two cases over the same model: `dynamic_quantize_lstm`, whose
    reference is onnxruntime's LSTM over the dequantized weights (what burnc computes: checked
    at the usual tolerance), and `dynamic_quantize_lstm_ort`, onnxruntime's own quantized kernel
    (which also rounds X and the hidden state to 8 bits each step: checked at its quantization
    tests' rtol 1e-2, atol 0.05)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    seq, batch, inp, hidden, dirs = 7, 2, 5, 6, 2
    f32 = TensorProto.FLOAT
    params = {"W": (dirs, 4 * hidden, inp), "R": (dirs, 4 * hidden, hidden), "B": (dirs, 8 * hidden)}
    weights = {k: (rng.standard_normal(sh) * (0.2 if k == "B" else 0.4)).astype(np.float32) for k, sh in params.items()}
    node = helper.make_node("LSTM", ["x", "W", "R", "B"], ["y", "y_h", "y_c"], hidden_size=hidden, direction="bidirectional")
    io = ([helper.make_tensor_value_info("x", f32, [seq, batch, inp])],
          [helper.make_tensor_value_info("y", f32, [seq, dirs, batch, hidden]), helper.make_tensor_value_info("y_h", f32, [dirs, batch, hidden]),
           helper.make_tensor_value_info("y_c", f32, [dirs, batch, hidden])])
    lstm = lambda ws: helper.make_model(helper.make_graph([node], "lstm", *io, [numpy_helper.from_array(v, k) for k, v in ws.items()]), opset_imports=[helper.make_opsetid("", 14)])
    work = os.path.join(out, "dynamic_quantize_lstm_work")
    os.makedirs(work, exist_ok=True)
    onnx.save(lstm(weights), os.path.join(work, "float.onnx"))
    quantize_dynamic(os.path.join(work, "float.onnx"), os.path.join(work, "quantized.onnx"), weight_type=QuantType.QInt8)
    q = onnx.load(os.path.join(work, "quantized.onnx"))
    n = next(n for n in q.graph.node if n.op_type == "DynamicQuantizeLSTM")
    init = {i.name: numpy_helper.to_array(i) for i in q.graph.initializer}

    def dequantized(qi, si, zi):
        s, z = init[n.input[si]], init[n.input[zi]].astype(np.float32)
        shape = (s.shape[0], 1, 1) if s.ndim == 1 else (s.shape[0], 1, s.shape[1])
        return ((init[n.input[qi]].astype(np.float32) - z.reshape(shape)) * s.reshape(shape)).transpose(0, 2, 1).astype(np.float32)

    exact = dict(weights, W=dequantized(1, 8, 9), R=dequantized(2, 10, 11))
    onnx.save(lstm(exact), os.path.join(work, "dequantized.onnx"))
    feeds = {"x": rng.standard_normal((seq, batch, inp)).astype(np.float32)}
    want = ort.InferenceSession(os.path.join(work, "dequantized.onnx"), providers=["CPUExecutionProvider"]).run(None, feeds)
    write_case(os.path.join(out, "dynamic_quantize_lstm"), q.graph, feeds, want)
    write_case(os.path.join(out, "dynamic_quantize_lstm_ort"), q.graph, feeds)



def pack_nbits(q, bits):
    """[rows, values] of unsigned `bits`-bit ints as MatMulNBits packs them per row: 8 bits a
    byte each, 4 bits two to a byte, the even value in the low nibble (an odd count padded)."""
    q = q.astype(np.uint8)
    if bits == 8:
        return q
    if q.shape[1] % 2:
        q = np.concatenate([q, np.zeros((q.shape[0], 1), np.uint8)], axis=1)
    return (q[:, 0::2] | (q[:, 1::2] << 4)).astype(np.uint8)


def nbits_node(rng, name, a, k, n, bits, block, zero, bias):
    """One MatMulNBits node on input `a` with random packed weights as initializers; `zero` is
    "packed" (uint8), "float" or None (the default 2^(bits-1))."""
    blocks = -(-k // block)
    q = rng.integers(0, 1 << bits, size=(n, blocks * block))
    b = pack_nbits(q, bits).reshape(n, blocks, block * bits // 8)
    scales = (rng.random(n * blocks) * 0.05 + 0.005).astype(np.float32)
    inits = [numpy_helper.from_array(b, f"{name}_b"), numpy_helper.from_array(scales, f"{name}_scales")]
    ins = [a, f"{name}_b", f"{name}_scales"]
    if zero == "packed":
        z = pack_nbits(rng.integers(0, 1 << bits, size=(n, blocks)), bits).reshape(-1)
        inits.append(numpy_helper.from_array(z, f"{name}_zp"))
        ins.append(f"{name}_zp")
    elif zero == "float":
        inits.append(numpy_helper.from_array((rng.random(n * blocks) * (1 << bits)).astype(np.float32), f"{name}_zp"))
        ins.append(f"{name}_zp")
    elif bias:
        ins.append("")
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(n).astype(np.float32), f"{name}_bias"))
        ins += ["", f"{name}_bias"]
    node = helper.make_node("MatMulNBits", ins, [name], domain="com.microsoft", K=k, N=n, bits=bits, block_size=block)
    return node, inits


def matmul_nbits(out, rng):
    """MatMulNBits (onnxruntime-genai's int4 and int8 block-quantized weights): 4 bits with
    packed zero points and a bias, a padded last block without zero points, float zero points,
    and 8 bits; onnxruntime's outputs (accuracy_level 0: f32 arithmetic)."""
    cases = [
        ("q4_zp_bias", "x3", 96, 40, 4, 32, "packed", True),
        ("q4_padded", "x1", 100, 24, 4, 16, None, False),
        ("q4_float_zp", "x3", 96, 8, 4, 64, "float", False),
        ("q8_zp", "x3", 96, 16, 8, 32, "packed", True),
        ("q4_wide", "x2", 256, 64, 4, 128, "packed", False),
    ]
    inputs = {"x3": [2, 3, 96], "x1": [1, 100], "x2": [2, 256]}
    nodes, inits, outs = [], [], []
    for name, a, k, n, bits, block, zero, bias in cases:
        node, i = nbits_node(rng, name, a, k, n, bits, block, zero, bias)
        nodes.append(node)
        inits += i
        outs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, inputs[a][:-1] + [n]))
    g = helper.make_graph(nodes, "matmul_nbits", [helper.make_tensor_value_info(k, TensorProto.FLOAT, v) for k, v in inputs.items()], outs, initializer=inits)
    feeds = {k: rng.standard_normal(v).astype(np.float32) for k, v in inputs.items()}
    write_case(out, g, feeds)



def gather_block_quantized(out, rng):
    """GatherBlockQuantized as onnxruntime's MatMulNBitsQuantizer writes it for embedding
    tables (op_types_to_quantize with Gather): uint4 with zero points (asymmetric) and int4
    without (symmetric); and 8 bits (uint8 data, `bits` = 8), which the quantizer does not
    write, by hand. One output per table, onnxruntime's outputs."""
    import onnx_ir  # noqa: F401  (the quantizer needs it; fail here with its name if missing)
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    ids = np.array([[1, 5, 63], [0, 0, 7]], np.int64)
    outs = []
    for name, bits, symmetric in [("u4_zp", 4, False), ("i4_sym", 4, True)]:
        table = numpy_helper.from_array(rng.standard_normal((64, 96)).astype(np.float32), f"{name}_table")
        g = helper.make_graph([helper.make_node("Gather", [f"{name}_table", "ids"], [name])], name,
                              [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 3])],
                              [helper.make_tensor_value_info(name, TensorProto.FLOAT, [2, 3, 96])], initializer=[table])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
        q = MatMulNBitsQuantizer(m, bits=bits, block_size=32, is_symmetric=symmetric, op_types_to_quantize=("Gather",), quant_axes=(("Gather", 1),))
        q.process()
        outs.append(q.model.model.graph)
    # One model: the three quantized tables side by side.
    nodes = [n for g in outs for n in g.node]
    inits = [i for g in outs for i in g.initializer]
    assert [n.op_type for n in nodes] == ["GatherBlockQuantized"] * 2, [n.op_type for n in nodes]
    inits += [numpy_helper.from_array(rng.integers(0, 256, (64, 96)).astype(np.uint8), "u8_data"),
              numpy_helper.from_array((rng.random((64, 3)) * 0.02 + 0.001).astype(np.float32), "u8_scales"),
              numpy_helper.from_array(rng.integers(0, 256, (64, 3)).astype(np.uint8), "u8_zp")]
    nodes.append(helper.make_node("GatherBlockQuantized", ["u8_data", "ids", "u8_scales", "u8_zp"], ["u8_out"], domain="com.microsoft", bits=8, block_size=32, gather_axis=0, quantize_axis=1))
    outs.append(helper.make_graph([], "u8", [], [helper.make_tensor_value_info("u8_out", TensorProto.FLOAT, [2, 3, 96])]))
    g = helper.make_graph(nodes, "gather_block_quantized", [helper.make_tensor_value_info("ids", TensorProto.INT64, [2, 3])],
                          [o for g in outs for o in g.output], initializer=inits)
    write_case(out, g, {"ids": ids}, opset=21)
    # The same tables without zero points (uint4 centred on 0, uint8 on 128).
    for n in g.node:
        del n.input[3:]
    del g.initializer[:]
    g.initializer.extend(i for i in inits if "zero" not in i.name and i.name != "u8_zp")
    write_case(out + "_default_zero", g, {"ids": ids}, opset=21)


if __name__ == "__main__":
    main()
