#!/usr/bin/env python3
"""The two models of the GPU benchmark, with random weights both sides can make from a seed.

    python3 scripts/gpu_bench_models.py OUT_DIR      # writes OUT_DIR/resnet50.onnx, minilm.onnx

ResNet-50 (torchvision's layout, 224×224) and a MiniLM-L6 encoder (BERT: hidden 384, 6 layers,
12 heads, FFN 1536, sequence 128). Every weight comes from `uniform(key, shape)`, a counter hash
(splitmix64) of the seed, the tensor's name and the element index: the same numbers on any
machine and any numpy, so the GPU machine rebuilds the same models (and fills the PyTorch ones,
whose parameter names these are) instead of carrying hundreds of megabytes.

The ONNX files are what `torch.onnx.export` makes of such models in eval mode: BatchNorm folded
into the convolutions, BERT's embeddings, attention and GELU spelled with standard ops. Their
batch dim is symbolic (`batch`); the benchmark pins it.
"""
import os
import sys
import zlib

import numpy as np

SEED = 20261203
SEQ = 128
BERT = dict(vocab=30522, hidden=384, layers=6, heads=12, ffn=1536, max_pos=512, eps=1e-12)
BN_EPS = 1e-5


def uniform(key, shape, lo=-1.0, hi=1.0):
    """Deterministic values uniform in [lo, hi): splitmix64 of (seed, crc32(key), index)."""
    n = int(np.prod(shape)) if shape else 1
    with np.errstate(over="ignore"):
        z = np.arange(n, dtype=np.uint64) + np.uint64((SEED << 32) ^ zlib.crc32(key.encode()))
        z = z * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(40)).astype(np.float64) / float(1 << 24)
    return (lo + (hi - lo) * u).astype(np.float32).reshape(shape)


# ---------------------------------------------------------------- ResNet-50 (torchvision names)

def resnet50_params():
    """torchvision.models.resnet50's state dict (BatchNorm in eval: running stats)."""
    p = {}

    def conv(name, cout, cin, k):
        bound = np.sqrt(6.0 / (cin * k * k))  # He-uniform: activations keep their scale
        p[f"{name}.weight"] = uniform(f"{name}.weight", (cout, cin, k, k), -bound, bound)

    def bn(name, c, gamma=(0.5, 1.0)):
        p[f"{name}.weight"] = uniform(f"{name}.weight", (c,), *gamma)
        p[f"{name}.bias"] = uniform(f"{name}.bias", (c,), -0.1, 0.1)
        p[f"{name}.running_mean"] = uniform(f"{name}.running_mean", (c,), -0.1, 0.1)
        p[f"{name}.running_var"] = uniform(f"{name}.running_var", (c,), 0.5, 1.5)

    conv("conv1", 64, 3, 7)
    bn("bn1", 64)
    cin = 64
    for li, (blocks, planes) in enumerate([(3, 64), (4, 128), (6, 256), (3, 512)], 1):
        for b in range(blocks):
            pre = f"layer{li}.{b}"
            conv(f"{pre}.conv1", planes, cin, 1)
            bn(f"{pre}.bn1", planes)
            conv(f"{pre}.conv2", planes, planes, 3)
            bn(f"{pre}.bn2", planes)
            conv(f"{pre}.conv3", planes * 4, planes, 1)
            # A small last scale keeps the residual sum from growing block after block.
            bn(f"{pre}.bn3", planes * 4, gamma=(0.1, 0.3))
            if b == 0:
                conv(f"{pre}.downsample.0", planes * 4, cin, 1)
                bn(f"{pre}.downsample.1", planes * 4)
            cin = planes * 4
    bound = 1.0 / np.sqrt(2048)
    p["fc.weight"] = uniform("fc.weight", (1000, 2048), -bound, bound)
    p["fc.bias"] = uniform("fc.bias", (1000,), -bound, bound)
    return p


def resnet50_onnx(p):
    from onnx import TensorProto, helper, numpy_helper

    nodes, inits = [], []
    count = [0]

    def fresh(tag):
        count[0] += 1
        return f"{tag}_{count[0]}"

    def conv_bn(x, conv, bn, stride, pad, relu):
        w = p[f"{conv}.weight"]
        s = p[f"{bn}.weight"] / np.sqrt(p[f"{bn}.running_var"] + BN_EPS)
        wf = (w * s[:, None, None, None]).astype(np.float32)
        bf = (p[f"{bn}.bias"] - p[f"{bn}.running_mean"] * s).astype(np.float32)
        inits.extend([numpy_helper.from_array(wf, f"{conv}.weight"), numpy_helper.from_array(bf, f"{conv}.bias")])
        y = fresh(conv)
        k = w.shape[2]
        nodes.append(helper.make_node("Conv", [x, f"{conv}.weight", f"{conv}.bias"], [y], kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4))
        if relu:
            r = fresh("relu")
            nodes.append(helper.make_node("Relu", [y], [r]))
            return r
        return y

    x = conv_bn("input", "conv1", "bn1", 2, 3, True)
    mp = fresh("maxpool")
    nodes.append(helper.make_node("MaxPool", [x], [mp], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]))
    x = mp
    for li, blocks in enumerate([3, 4, 6, 3], 1):
        for b in range(blocks):
            pre = f"layer{li}.{b}"
            stride = 2 if (b == 0 and li > 1) else 1
            h = conv_bn(x, f"{pre}.conv1", f"{pre}.bn1", 1, 0, True)
            h = conv_bn(h, f"{pre}.conv2", f"{pre}.bn2", stride, 1, True)
            h = conv_bn(h, f"{pre}.conv3", f"{pre}.bn3", 1, 0, False)
            idn = conv_bn(x, f"{pre}.downsample.0", f"{pre}.downsample.1", stride, 0, False) if b == 0 else x
            s, r = fresh("add"), fresh("relu")
            nodes.append(helper.make_node("Add", [h, idn], [s]))
            nodes.append(helper.make_node("Relu", [s], [r]))
            x = r
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["pooled"]))
    nodes.append(helper.make_node("Flatten", ["pooled"], ["flat"], axis=1))
    inits.extend([numpy_helper.from_array(p["fc.weight"], "fc.weight"), numpy_helper.from_array(p["fc.bias"], "fc.bias")])
    nodes.append(helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], transB=1))
    g = helper.make_graph(
        nodes, "resnet50", [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, 224, 224])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1000])], inits,
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="burnc gpu_bench_models.py")


def resnet50_input(batch):
    return uniform("resnet50.input", (batch, 3, 224, 224))


# ------------------------------------------------------------ MiniLM-L6 (transformers' BertModel)

def minilm_params():
    """transformers.BertModel's state dict (no pooler) for the MiniLM-L6 shape."""
    c, p = BERT, {}
    h, f = c["hidden"], c["ffn"]

    def lin(name, cout, cin):
        p[f"{name}.weight"] = uniform(f"{name}.weight", (cout, cin), -0.035, 0.035)  # std 0.02
        p[f"{name}.bias"] = uniform(f"{name}.bias", (cout,), -0.02, 0.02)

    def ln(name):
        p[f"{name}.weight"] = uniform(f"{name}.weight", (h,), 0.8, 1.2)
        p[f"{name}.bias"] = uniform(f"{name}.bias", (h,), -0.05, 0.05)

    for name, rows in [("word_embeddings", c["vocab"]), ("position_embeddings", c["max_pos"]), ("token_type_embeddings", 2)]:
        p[f"embeddings.{name}.weight"] = uniform(f"embeddings.{name}.weight", (rows, h), -0.035, 0.035)
    ln("embeddings.LayerNorm")
    for i in range(c["layers"]):
        pre = f"encoder.layer.{i}"
        for part in ["query", "key", "value"]:
            lin(f"{pre}.attention.self.{part}", h, h)
        lin(f"{pre}.attention.output.dense", h, h)
        ln(f"{pre}.attention.output.LayerNorm")
        lin(f"{pre}.intermediate.dense", f, h)
        lin(f"{pre}.output.dense", h, f)
        ln(f"{pre}.output.LayerNorm")
    return p


def minilm_onnx(p):
    from onnx import TensorProto, helper, numpy_helper

    c = BERT
    h, heads = c["hidden"], c["heads"]
    d = h // heads
    nodes, inits = [], []
    count = [0]

    def fresh(tag):
        count[0] += 1
        return f"{tag}_{count[0]}"

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def node(op, ins, **attrs):
        y = fresh(op.lower())
        nodes.append(helper.make_node(op, ins, [y], **attrs))
        return y

    def linear(x, name):
        # x @ W^T + b, as the exporter writes nn.Linear on 3-D inputs.
        wt = const(f"{name}.weight_t", np.ascontiguousarray(p[f"{name}.weight"].T))
        return node("Add", [node("MatMul", [x, wt]), const(f"{name}.bias", p[f"{name}.bias"])])

    def layer_norm(x, name):
        return node("LayerNormalization", [x, const(f"{name}.weight", p[f"{name}.weight"]), const(f"{name}.bias", p[f"{name}.bias"])], axis=-1, epsilon=c["eps"])

    heads_shape = const("heads_shape", np.array([0, SEQ, heads, d], dtype=np.int64))
    hidden_shape = const("hidden_shape", np.array([0, SEQ, h], dtype=np.int64))
    scale = const("attn_scale", np.array(1.0 / np.sqrt(d), dtype=np.float32))
    half, one, rsqrt2 = const("half", np.array(0.5, np.float32)), const("one", np.array(1.0, np.float32)), const("sqrt2", np.array(np.sqrt(2.0), np.float32))

    word = node("Gather", [const("embeddings.word_embeddings.weight", p["embeddings.word_embeddings.weight"]), "input_ids"], axis=0)
    # Token type 0 everywhere and positions 0..SEQ: one constant row block, as exported.
    pos_type = p["embeddings.position_embeddings.weight"][:SEQ] + p["embeddings.token_type_embeddings.weight"][0]
    x = layer_norm(node("Add", [word, const("embeddings.position_and_type", pos_type.astype(np.float32))]), "embeddings.LayerNorm")
    for i in range(c["layers"]):
        pre = f"encoder.layer.{i}"
        q, k, v = (node("Reshape", [linear(x, f"{pre}.attention.self.{part}"), heads_shape]) for part in ["query", "key", "value"])
        q = node("Transpose", [q], perm=[0, 2, 1, 3])
        k = node("Transpose", [k], perm=[0, 2, 3, 1])
        v = node("Transpose", [v], perm=[0, 2, 1, 3])
        probs = node("Softmax", [node("Mul", [node("MatMul", [q, k]), scale])], axis=-1)
        ctx = node("Reshape", [node("Transpose", [node("MatMul", [probs, v])], perm=[0, 2, 1, 3]), hidden_shape])
        x = layer_norm(node("Add", [linear(ctx, f"{pre}.attention.output.dense"), x]), f"{pre}.attention.output.LayerNorm")
        u = linear(x, f"{pre}.intermediate.dense")
        gelu = node("Mul", [node("Mul", [u, half]), node("Add", [node("Erf", [node("Div", [u, rsqrt2])]), one])])
        x = layer_norm(node("Add", [linear(gelu, f"{pre}.output.dense"), x]), f"{pre}.output.LayerNorm")
    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))
    g = helper.make_graph(
        nodes, "minilm_l6", [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", SEQ])],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", SEQ, h])], inits,
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="burnc gpu_bench_models.py")


def minilm_input(batch):
    u = uniform("minilm.input_ids", (batch, SEQ), 0.0, 1.0)
    return np.minimum((u * BERT["vocab"]).astype(np.int64), BERT["vocab"] - 1)


def small_encoder():
    """The MiniLM graph at test size (hidden 64, 2 heads of 32, 2 layers, sequence 80: partial
    64-row tiles), and its input for batch 3: for checks of the fused attention."""
    global BERT, SEQ
    saved = (BERT, SEQ)
    BERT, SEQ = dict(vocab=100, hidden=64, layers=2, heads=2, ffn=128, max_pos=96, eps=1e-12), 80
    try:
        model = minilm_onnx(minilm_params())
        ids = np.minimum((uniform("small_encoder.ids", (3, SEQ), 0.0, 1.0) * 100).astype(np.int64), 99)
    finally:
        BERT, SEQ = saved
    return model, ids


def small_cnn():
    """A ResNet-style block at test size for the Hopper path: a 3-channel image (copied NHWC
    with a zero channel), then 3×3 convolutions over 8×96×96 pixels, enough 128-row tiles to
    run on wgmma, with bias, Relu and a residual Add in their epilogues; and its input."""
    from onnx import TensorProto, helper, numpy_helper

    batch, hw = 8, 96
    w = lambda name, *shape: numpy_helper.from_array(uniform(f"small_cnn.{name}", shape, -0.2, 0.2), name)
    conv = lambda x, wt, b, y, k=3: helper.make_node("Conv", [x, wt, b], [y], pads=[k // 2] * 4)
    nodes = [
        conv("x", "w1", "b1", "c1", 7), helper.make_node("Relu", ["c1"], ["r1"]),
        conv("r1", "w2", "b2", "c2"), helper.make_node("Relu", ["c2"], ["r2"]),
        conv("r2", "w3", "b3", "c3"), helper.make_node("Add", ["c3", "r1"], ["s3"]), helper.make_node("Relu", ["s3"], ["r3"]),
        helper.make_node("GlobalAveragePool", ["r3"], ["y"]),
    ]
    inits = [w("w1", 64, 3, 7, 7), w("b1", 64), w("w2", 128, 64, 3, 3), w("b2", 128), w("w3", 64, 128, 3, 3), w("b3", 64)]
    g = helper.make_graph(nodes, "small_cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, hw, hw])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 64, 1, 1])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), uniform("small_cnn.x", (batch, 3, hw, hw))


MODELS = {
    "resnet50": (resnet50_params, resnet50_onnx, resnet50_input, "input"),
    "minilm": (minilm_params, minilm_onnx, minilm_input, "input_ids"),
}


def main():
    """gpu_bench_models.py [DIR] writes both models; --small-encoder PATH and --small-cnn PATH
    the test models."""
    import onnx

    if sys.argv[1:2] == ["--small-encoder"]:
        onnx.save(small_encoder()[0], sys.argv[2])
        return
    if sys.argv[1:2] == ["--small-cnn"]:
        onnx.save(small_cnn()[0], sys.argv[2])
        return
    out = sys.argv[1] if len(sys.argv) > 1 else "gpu/bench/models"
    os.makedirs(out, exist_ok=True)
    for name, (params, build, _, _) in MODELS.items():
        path = os.path.join(out, f"{name}.onnx")
        onnx.save(build(params()), path)
        print(f"gpu_bench_models: wrote {path} ({os.path.getsize(path) >> 20} MiB)")


if __name__ == "__main__":
    main()
