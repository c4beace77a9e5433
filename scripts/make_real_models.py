#!/usr/bin/env python3
"""The CPU benchmark's real-model set: the model classes users run, written with onnx.helper in
the form their exporters give them (random weights from a fixed seed), not light CNNs.

    python3 scripts/make_real_models.py OUT_DIR [--only NAME ...] [--check]

Writes OUT_DIR/<name>/model.onnx for each class:

- minilm_encoder: a BERT/MiniLM sentence encoder (6 layers, hidden 384, 12 heads, sequence 128):
  token/position/type embeddings (Gather), LayerNormalization, attention with an additive mask,
  GELU written with Erf as torch exports it, mean pooling.
- crnn_lstm: a CRNN text recogniser on a 1×64×256 line image: conv/BN-folded/ReLU/pool stages,
  the height folded into channels, a bidirectional LSTM over 64 steps, a 97-class head, LogSoftmax.
- svtr_attention: an SVTR-style recogniser: a strided conv patch embedding of a 3×48×320 line,
  4 pre-norm attention blocks (hidden 192, 6 heads), a 6625-class head (the large classifier).
- dbnet_fpn: a DBNet-style text detector on 3×320×320: a small backbone, an FPN (Resize ×2
  nearest, Add), the four levels upsampled and concatenated, a ConvTranspose head, Sigmoid.
- yolo_silu: a YOLOv8n-style detector on 3×320×320: Conv + SiLU (Sigmoid·Mul as exported),
  C2f blocks (Split, bottlenecks, Concat), SPPF (three MaxPools), a top-down path with Resize,
  per-level box/class heads concatenated.
- mobilenetv3: a MobileNetV3-small-style classifier on 3×224×224: HardSwish, depthwise convs,
  squeeze-excitation (GlobalAveragePool, 1×1 convs, HardSigmoid, Mul), a 1000-class head.
- lstm_vad: a small voice-activity model: 2-layer LSTM (hidden 64) over 100 frames of 40
  features, a Gemm and Sigmoid per frame.
- byte_conv1d: a 1-D conv/dense byte classifier: 2048 int32 bytes, an embedding (Gather),
  Conv1d stages with MaxPool, global max, two dense layers.

With --check, each model runs through onnxruntime once (the file is valid and runs).
"""
import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pydeps  # noqa: E402

pydeps.ensure("numpy", "onnx", "onnxruntime")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


class G:
    """A graph under construction: nodes, initializers, unique names."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.n = [], [], 0

    def name(self, base):
        self.n += 1
        return f"{base}_{self.n}"

    def w(self, shape, scale=None, base="w"):
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else int(shape[0])
        s = scale if scale is not None else 1.0 / np.sqrt(max(fan_in, 1))
        name = self.name(base)
        self.inits.append(numpy_helper.from_array((self.rng.standard_normal(shape) * s).astype(np.float32), name))
        return name

    def const(self, value, dtype=np.int64, base="c"):
        name = self.name(base)
        self.inits.append(numpy_helper.from_array(np.array(value, dtype=dtype), name))
        return name

    def op(self, op_type, ins, n_out=1, **attrs):
        outs = [self.name(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, ins, outs, name=outs[0], **attrs))
        return outs[0] if n_out == 1 else outs

    # Building blocks, in the form exporters write them.
    def conv(self, x, cin, cout, k, stride=1, group=1, bias=True, pad=None, dims=2):
        p = k // 2 if pad is None else pad
        ins = [x, self.w([cout, cin // group] + [k] * dims)]
        if bias:
            ins.append(self.w([cout], 0.1))
        return self.op("Conv", ins, kernel_shape=[k] * dims, strides=[stride] * dims, pads=[p] * (2 * dims), group=group)

    def silu(self, x):
        return self.op("Mul", [x, self.op("Sigmoid", [x])])

    def gelu(self, x):
        # 0.5 · x · (1 + erf(x / √2)), as torch.onnx writes nn.GELU.
        e = self.op("Erf", [self.op("Div", [x, self.const(np.sqrt(2.0), np.float32)])])
        return self.op("Mul", [self.op("Mul", [x, self.op("Add", [e, self.const(1.0, np.float32)])]), self.const(0.5, np.float32)])

    def layer_norm(self, x, d):
        return self.op("LayerNormalization", [x, self.const(1.0 + self.rng.standard_normal(d) * 0.1, np.float32), self.const(self.rng.standard_normal(d) * 0.02, np.float32)], axis=-1, epsilon=1e-5)

    def linear(self, x, din, dout):
        return self.op("Add", [self.op("MatMul", [x, self.w([din, dout])]), self.w([dout], 0.02)])

    def attention(self, x, batch, seq, d, heads, mask=None):
        hd = d // heads
        split = self.const([batch, seq, heads, hd])
        proj = []
        for _ in range(3):
            proj.append(self.op("Transpose", [self.op("Reshape", [self.linear(x, d, d), split])], perm=[0, 2, 1, 3]))
        q, k, v = proj
        s = self.op("Div", [self.op("MatMul", [q, self.op("Transpose", [k], perm=[0, 1, 3, 2])]), self.const(np.sqrt(hd), np.float32)])
        if mask is not None:
            s = self.op("Add", [s, mask])
        ctx = self.op("MatMul", [self.op("Softmax", [s], axis=-1), v])
        ctx = self.op("Reshape", [self.op("Transpose", [ctx], perm=[0, 2, 1, 3]), self.const([batch, seq, d])])
        return self.linear(ctx, d, d)

    def model(self, inputs, outputs, opset=18):
        graph = helper.make_graph(self.nodes, "model", inputs, outputs, self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="burnc make_real_models.py")
        m.ir_version = 8
        onnx.checker.check_model(m)
        return onnx.shape_inference.infer_shapes(m)


def tensor(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def minilm_encoder(g):
    layers, d, heads, seq, vocab, ffn = 6, 384, 12, 128, 30522, 1536
    ids = "input_ids"
    mask_in = "attention_mask"
    x = g.op("Add", [g.op("Gather", [g.w([vocab, d], 0.02), ids]), g.w([1, seq, d], 0.02)])
    x = g.op("Add", [x, g.w([1, 1, d], 0.02)])  # token type 0
    x = g.layer_norm(x, d)
    # (1 − mask) · −10000, broadcast over heads and queries, as BERT exports write it.
    m = g.op("Cast", [g.op("Unsqueeze", [g.op("Unsqueeze", [mask_in, g.const([1])]), g.const([2])])], to=TensorProto.FLOAT)
    m = g.op("Mul", [g.op("Sub", [g.const(1.0, np.float32), m]), g.const(-10000.0, np.float32)])
    for _ in range(layers):
        x = g.layer_norm(g.op("Add", [x, g.attention(x, 1, seq, d, heads, m)]), d)
        h = g.linear(g.gelu(g.linear(x, d, ffn)), ffn, d)
        x = g.layer_norm(g.op("Add", [x, h]), d)
    pooled = g.op("ReduceMean", [x, g.const([1])], keepdims=0)
    g.nodes[-1].output[0] = "sentence_embedding"
    return g.model([tensor(ids, TensorProto.INT64, [1, seq]), tensor(mask_in, TensorProto.INT64, [1, seq])], [tensor("sentence_embedding", TensorProto.FLOAT, [1, d])])


def crnn_lstm(g):
    x = "image"
    c = 1
    for cout, pool in [(64, (2, 2)), (128, (2, 2)), (256, None), (256, (2, 1)), (512, None), (512, (2, 1))]:
        x = g.op("Relu", [g.conv(x, c, cout, 3)])
        c = cout
        if pool:
            x = g.op("MaxPool", [x], kernel_shape=list(pool), strides=list(pool))
    # [1, 512, 4, 64] → [64, 1, 512·4] (time-major)
    x = g.op("Reshape", [x, g.const([1, 512 * 4, 64])])
    x = g.op("Transpose", [x], perm=[2, 0, 1])
    hidden = 256
    for layer in range(2):
        din = 2048 if layer == 0 else 2 * hidden
        y = g.op("LSTM", [x, g.w([2, 4 * hidden, din]), g.w([2, 4 * hidden, hidden]), g.w([2, 8 * hidden], 0.1)], 1, hidden_size=hidden, direction="bidirectional")
        # [T, 2, 1, H] → [T, 1, 2H]
        x = g.op("Reshape", [g.op("Transpose", [y], perm=[0, 2, 1, 3]), g.const([64, 1, 2 * hidden])])
    logits = g.linear(x, 2 * hidden, 97)
    g.op("LogSoftmax", [logits], axis=-1)
    g.nodes[-1].output[0] = "log_probs"
    return g.model([tensor("image", TensorProto.FLOAT, [1, 1, 64, 256])], [tensor("log_probs", TensorProto.FLOAT, [64, 1, 97])])


def svtr_attention(g):
    d, heads = 192, 6
    x = g.op("Relu", [g.conv("image", 3, 64, 3, stride=2)])
    x = g.op("Relu", [g.conv(x, 64, d, 3, stride=2)])  # [1, 192, 12, 80]
    seq = 12 * 80
    x = g.op("Transpose", [g.op("Reshape", [x, g.const([1, d, seq])])], perm=[0, 2, 1])
    for _ in range(4):
        x = g.op("Add", [x, g.attention(g.layer_norm(x, d), 1, seq, d, heads)])
        x = g.op("Add", [x, g.linear(g.gelu(g.linear(g.layer_norm(x, d), d, 4 * d)), 4 * d, d)])
    x = g.layer_norm(x, d)
    # Height pooled away: [1, 12, 80, d] mean over 12 → [1, 80, d]
    x = g.op("ReduceMean", [g.op("Reshape", [x, g.const([1, 12, 80, d])]), g.const([1])], keepdims=0)
    g.op("Softmax", [g.linear(x, d, 6625)], axis=-1)
    g.nodes[-1].output[0] = "probs"
    return g.model([tensor("image", TensorProto.FLOAT, [1, 3, 48, 320])], [tensor("probs", TensorProto.FLOAT, [1, 80, 6625])])


def dbnet_fpn(g):
    x, c, feats = "image", 3, []
    for cout, stride in [(16, 2), (24, 2), (40, 2), (80, 2), (160, 2)]:
        x = g.op("Relu", [g.conv(x, c, cout, 3, stride=stride)])
        x = g.op("Relu", [g.conv(x, cout, cout, 3, group=cout)])
        x = g.op("Relu", [g.conv(x, cout, cout, 1)])
        c = cout
        feats.append((x, cout))
    feats = feats[1:]  # strides 4, 8, 16, 32
    inner = [g.conv(f, ch, 96, 1, bias=False) for f, ch in feats]
    scales = g.const([1.0, 1.0, 2.0, 2.0], np.float32)
    up = inner[-1]
    outs = [up]
    for lat in reversed(inner[:-1]):
        up = g.op("Add", [lat, g.op("Resize", [up, "", scales], mode="nearest")])
        outs.insert(0, up)
    merged = []
    for i, o in enumerate(outs):
        p = g.conv(o, 96, 24, 3, bias=False)
        if i:
            p = g.op("Resize", [p, "", g.const([1.0, 1.0, 2.0 ** i, 2.0 ** i], np.float32)], mode="nearest")
        merged.append(p)
    x = g.op("Concat", merged, axis=1)  # [1, 96, 80, 80]
    x = g.op("Relu", [g.conv(x, 96, 24, 3)])
    x = g.op("Relu", [g.op("ConvTranspose", [x, g.w([24, 24, 2, 2]), g.w([24], 0.1)], kernel_shape=[2, 2], strides=[2, 2])])
    x = g.op("ConvTranspose", [x, g.w([24, 1, 2, 2]), g.w([1], 0.1)], kernel_shape=[2, 2], strides=[2, 2])
    g.op("Sigmoid", [x])
    g.nodes[-1].output[0] = "prob_map"
    return g.model([tensor("image", TensorProto.FLOAT, [1, 3, 320, 320])], [tensor("prob_map", TensorProto.FLOAT, [1, 1, 320, 320])])


def yolo_silu(g):
    def cbs(x, cin, cout, k=1, s=1):
        return g.silu(g.conv(x, cin, cout, k, stride=s))

    def c2f(x, cin, cout, n, shortcut=True):
        h = cout // 2
        y = cbs(x, cin, cout)
        parts = g.op("Split", [y, g.const([h, h])], 2, axis=1)
        ys = list(parts)
        cur = ys[-1]
        for _ in range(n):
            b = cbs(cbs(cur, h, h, 3), h, h, 3)
            cur = g.op("Add", [cur, b]) if shortcut else b
            ys.append(cur)
        return cbs(g.op("Concat", ys, axis=1), (2 + n) * h, cout)

    x = cbs("images", 3, 16, 3, 2)
    x = cbs(x, 16, 32, 3, 2)
    x = c2f(x, 32, 32, 1)
    x = cbs(x, 32, 64, 3, 2)
    p3 = c2f(x, 64, 64, 2)
    x = cbs(p3, 64, 128, 3, 2)
    p4 = c2f(x, 128, 128, 2)
    x = cbs(p4, 128, 256, 3, 2)
    x = c2f(x, 256, 256, 1)
    # SPPF
    y0 = cbs(x, 256, 128)
    pools = [y0]
    for _ in range(3):
        pools.append(g.op("MaxPool", [pools[-1]], kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2]))
    p5 = cbs(g.op("Concat", pools, axis=1), 512, 256)
    up = g.const([1.0, 1.0, 2.0, 2.0], np.float32)
    n4 = c2f(g.op("Concat", [g.op("Resize", [p5, "", up], mode="nearest"), p4], axis=1), 384, 128, 1, False)
    n3 = c2f(g.op("Concat", [g.op("Resize", [n4, "", up], mode="nearest"), p3], axis=1), 192, 64, 1, False)
    heads = []
    for f, ch in [(n3, 64), (n4, 128), (p5, 256)]:
        box = g.conv(cbs(cbs(f, ch, 64, 3), 64, 64, 3), 64, 64, 1)
        cls = g.conv(cbs(cbs(f, ch, 80, 3), 80, 80, 3), 80, 80, 1)
        o = g.op("Concat", [box, cls], axis=1)
        heads.append(g.op("Reshape", [o, g.const([1, 144, -1])]))
    out = g.op("Concat", heads, axis=2)
    box, cls = g.op("Split", [out, g.const([64, 80])], 2, axis=1)
    g.op("Concat", [box, g.op("Sigmoid", [cls])], axis=1)
    g.nodes[-1].output[0] = "output0"
    cells = 40 * 40 + 20 * 20 + 10 * 10
    return g.model([tensor("images", TensorProto.FLOAT, [1, 3, 320, 320])], [tensor("output0", TensorProto.FLOAT, [1, 144, cells])])


def mobilenetv3(g):
    def hswish(x):
        return g.op("HardSwish", [x])

    def se(x, c):
        s = g.op("GlobalAveragePool", [x])
        s = g.op("Relu", [g.conv(s, c, max(8, c // 4), 1)])
        s = g.op("HardSigmoid", [g.conv(s, max(8, c // 4), c, 1)], alpha=1.0 / 6, beta=0.5)
        return g.op("Mul", [x, s])

    x = hswish(g.conv("input", 3, 16, 3, stride=2))
    c = 16
    # (kernel, expansion, out, SE, hswish, stride), MobileNetV3-small's table
    for k, e, o, use_se, hs, s in [(3, 16, 16, 1, 0, 2), (3, 72, 24, 0, 0, 2), (3, 88, 24, 0, 0, 1), (5, 96, 40, 1, 1, 2),
                                   (5, 240, 40, 1, 1, 1), (5, 240, 40, 1, 1, 1), (5, 120, 48, 1, 1, 1), (5, 144, 48, 1, 1, 1),
                                   (5, 288, 96, 1, 1, 2), (5, 576, 96, 1, 1, 1), (5, 576, 96, 1, 1, 1)]:
        act = hswish if hs else (lambda t: g.op("Relu", [t]))
        y = act(g.conv(x, c, e, 1)) if e != c else x
        y = act(g.conv(y, e, e, k, stride=s, group=e))
        if use_se:
            y = se(y, e)
        y = g.conv(y, e, o, 1)
        x = g.op("Add", [x, y]) if s == 1 and c == o else y
        c = o
    x = hswish(g.conv(x, c, 576, 1))
    x = g.op("Flatten", [g.op("GlobalAveragePool", [x])], axis=1)
    x = hswish(g.op("Gemm", [x, g.w([1024, 576]), g.w([1024], 0.02)], transB=1))
    g.op("Gemm", [x, g.w([1000, 1024]), g.w([1000], 0.02)], transB=1)
    g.nodes[-1].output[0] = "logits"
    return g.model([tensor("input", TensorProto.FLOAT, [1, 3, 224, 224])], [tensor("logits", TensorProto.FLOAT, [1, 1000])])


def lstm_vad(g):
    hidden, feats, steps = 64, 40, 100
    x = "features"
    din = feats
    for _ in range(2):
        y = g.op("LSTM", [x, g.w([1, 4 * hidden, din]), g.w([1, 4 * hidden, hidden]), g.w([1, 8 * hidden], 0.1)], 1, hidden_size=hidden)
        x = g.op("Squeeze", [y, g.const([1])])  # [T, 1, H]
        din = hidden
    x = g.op("Reshape", [x, g.const([steps, hidden])])
    g.op("Sigmoid", [g.op("Gemm", [x, g.w([1, hidden]), g.w([1], 0.1)], transB=1)])
    g.nodes[-1].output[0] = "speech_prob"
    return g.model([tensor("features", TensorProto.FLOAT, [steps, 1, feats])], [tensor("speech_prob", TensorProto.FLOAT, [steps, 1])])


def byte_conv1d(g):
    x = g.op("Gather", [g.w([256, 32], 0.5), "bytes"])  # [1, 2048, 32]
    x = g.op("Transpose", [x], perm=[0, 2, 1])
    c = 32
    for cout in [64, 128, 128]:
        x = g.op("Relu", [g.conv(x, c, cout, 7, dims=1)])
        x = g.op("MaxPool", [x], kernel_shape=[4], strides=[4])
        c = cout
    x = g.op("Flatten", [g.op("GlobalMaxPool", [x])], axis=1)
    x = g.op("Relu", [g.op("Gemm", [x, g.w([64, c]), g.w([64], 0.02)], transB=1)])
    g.op("Gemm", [x, g.w([9, 64]), g.w([9], 0.02)], transB=1)
    g.nodes[-1].output[0] = "logits"
    return g.model([tensor("bytes", TensorProto.INT32, [1, 2048])], [tensor("logits", TensorProto.FLOAT, [1, 9])])


MODELS = {
    "minilm_encoder": minilm_encoder,
    "crnn_lstm": crnn_lstm,
    "svtr_attention": svtr_attention,
    "dbnet_fpn": dbnet_fpn,
    "yolo_silu": yolo_silu,
    "mobilenetv3": mobilenetv3,
    "lstm_vad": lstm_vad,
    "byte_conv1d": byte_conv1d,
}


def check(path):
    import onnxruntime as ort

    s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = {}
    for i in s.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in i.shape]
        if "int" in i.type:
            hi = 2 if "mask" in i.name else 256
            feeds[i.name] = np.random.default_rng(1).integers(0, hi, shape).astype(np.int64 if "int64" in i.type else np.int32)
        else:
            feeds[i.name] = np.random.default_rng(1).uniform(-1, 1, shape).astype(np.float32)
    outs = s.run(None, feeds)
    return [o.shape for o in outs]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--only", nargs="*", choices=sorted(MODELS), help="only these models")
    ap.add_argument("--check", action="store_true", help="run each through onnxruntime once")
    a = ap.parse_args()
    for i, name in enumerate(a.only or MODELS):
        path = a.out / name / "model.onnx"
        path.parent.mkdir(parents=True, exist_ok=True)
        m = MODELS[name](G(1000 + i))
        onnx.save(m, str(path))
        line = f"{name}: {len(m.graph.node)} nodes, {path.stat().st_size / 1e6:.1f} MB"
        if a.check:
            line += f", onnxruntime outputs {check(path)}"
        print(line, flush=True)


if __name__ == "__main__":
    main()
