#!/usr/bin/env python3
"""An independent reference for burnc's training step: small CNNs, their gradients and the
optimizer updates written out in numpy from the math (no autodiff framework, no burnc code).

Usage: scripts/train_reference.py OUT_DIR

For each model (seeded, so every file is reproducible) writes OUT_DIR/<model>/:
  model.onnx        built with onnx.helper (opset 17, IR 8)
  x.npy             the input batch (float32)
  target.npy        class indices (int64, cross-entropy) or values (float32, mse)
and for each training case OUT_DIR/<model>/<case>/:
  expected.safetensors   every parameter after STEPS steps on that one batch (float32)
  losses.txt             the loss of each step (before its update), one per line, %.10e
  output.pb              the model's output on x with the updated parameters (float32
                         TensorProto, as `burnc run -o` writes it)
and OUT_DIR/cases.txt: one line per case, tab-separated: model, case, steps, then the flags
for `burnc train` (`--loss …  --optimizer … --lr … [--trainable PATTERN]`), which the Rust
test passes as they are. A case with `trainable` updates only the matching parameters (the
others are frozen: saved unchanged).

All arithmetic is float64 from the float32 initial values; burnc computes in float32, so the
two agree to rounding (the test allows rtol 1e-4). Optimizers follow torch.optim's formulas:
  SGD:   d = g + wd·p;  b = d (step 1) else μ·b + (1−τ)·d;  d = d + μ·b (nesterov) else b;
         p −= lr·d
  Adam:  d = g + wd·p (Adam) / p *= 1 − lr·wd (AdamW);  m = β1·m + (1−β1)·d;
         v = β2·v + (1−β2)·d²;  p −= lr/(1−β1^t) · m / (√v/√(1−β2^t) + ε)
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


sys.path.insert(0, HERE)
from pydeps import ensure  # noqa: E402

ensure("numpy", "onnx")

import fnmatch  # noqa: E402
import json  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

# --------------------------------------------------------------------------------------------
# Layers: forward returns (y, cache); backward(dy, cache) returns (dx, {param: grad}).
# --------------------------------------------------------------------------------------------


def im2col(x: np.ndarray, kh: int, kw: int, pad: int, stride: int) -> tuple[np.ndarray, int, int]:
    """[N,C,H,W] -> [N, C*kh*kw, OH*OW]; rows ordered (c, i, j) like a flattened OIHW kernel."""
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh = (h + 2 * pad - kh) // stride + 1
    ow = (w + 2 * pad - kw) // stride + 1
    cols = np.empty((n, c, kh, kw, oh, ow), dtype=x.dtype)
    for i in range(kh):
        for j in range(kw):
            cols[:, :, i, j] = xp[:, :, i : i + stride * oh : stride, j : j + stride * ow : stride]
    return cols.reshape(n, c * kh * kw, oh * ow), oh, ow


def col2im(cols: np.ndarray, shape: tuple, kh: int, kw: int, pad: int, stride: int, oh: int, ow: int) -> np.ndarray:
    """The adjoint of im2col: scatter-add the columns back into [N,C,H,W]."""
    n, c, h, w = shape
    cols = cols.reshape(n, c, kh, kw, oh, ow)
    xp = np.zeros((n, c, h + 2 * pad, w + 2 * pad), dtype=cols.dtype)
    for i in range(kh):
        for j in range(kw):
            xp[:, :, i : i + stride * oh : stride, j : j + stride * ow : stride] += cols[:, :, i, j]
    return xp[:, :, pad : pad + h, pad : pad + w]


class Conv:
    def __init__(self, w: str, b: str, pad: int = 0, stride: int = 1):
        self.w, self.b, self.pad, self.stride = w, b, pad, stride

    def forward(self, p, x):
        wt = p[self.w]
        m, _, kh, kw = wt.shape
        cols, oh, ow = im2col(x, kh, kw, self.pad, self.stride)
        y = np.einsum("mk,nkp->nmp", wt.reshape(m, -1), cols) + p[self.b][None, :, None]
        return y.reshape(x.shape[0], m, oh, ow), (x.shape, cols, oh, ow)

    def backward(self, p, dy, cache):
        xshape, cols, oh, ow = cache
        wt = p[self.w]
        m, _, kh, kw = wt.shape
        dy2 = dy.reshape(dy.shape[0], m, oh * ow)
        dw = np.einsum("nmp,nkp->mk", dy2, cols).reshape(wt.shape)
        db = dy2.sum(axis=(0, 2))
        dcols = np.einsum("mk,nmp->nkp", wt.reshape(m, -1), dy2)
        dx = col2im(dcols, xshape, kh, kw, self.pad, self.stride, oh, ow)
        return dx, {self.w: dw, self.b: db}


class Relu:
    def forward(self, p, x):
        return np.maximum(x, 0.0), x > 0

    def backward(self, p, dy, mask):
        return dy * mask, {}


class Sigmoid:
    def forward(self, p, x):
        s = 1.0 / (1.0 + np.exp(-x))
        return s, s

    def backward(self, p, dy, s):
        return dy * s * (1.0 - s), {}


class MaxPool2:
    """2x2 window, stride 2; the gradient goes to the first maximum in row-major order."""

    def forward(self, p, x):
        n, c, h, w = x.shape
        win = x.reshape(n, c, h // 2, 2, w // 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(n, c, h // 2, w // 2, 4)
        arg = win.argmax(axis=-1)
        return np.take_along_axis(win, arg[..., None], axis=-1)[..., 0], (x.shape, arg)

    def backward(self, p, dy, cache):
        (n, c, h, w), arg = cache
        win = np.zeros((n, c, h // 2, w // 2, 4))
        np.put_along_axis(win, arg[..., None], dy[..., None], axis=-1)
        return win.reshape(n, c, h // 2, w // 2, 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(n, c, h, w), {}


class AvgPool2:
    def forward(self, p, x):
        n, c, h, w = x.shape
        return x.reshape(n, c, h // 2, 2, w // 2, 2).mean(axis=(3, 5)), x.shape

    def backward(self, p, dy, shape):
        return np.repeat(np.repeat(dy, 2, axis=2), 2, axis=3) / 4.0, {}


class Flatten:
    def forward(self, p, x):
        return x.reshape(x.shape[0], -1), x.shape

    def backward(self, p, dy, shape):
        return dy.reshape(shape), {}


class Gemm:
    """y = x·Wᵀ + b (trans_b, W [out, in]) or x·W + b (W [in, out])."""

    def __init__(self, w: str, b: str, trans_b: bool):
        self.w, self.b, self.trans_b = w, b, trans_b

    def forward(self, p, x):
        wt = p[self.w]
        return (x @ wt.T if self.trans_b else x @ wt) + p[self.b], x

    def backward(self, p, dy, x):
        wt = p[self.w]
        if self.trans_b:
            return dy @ wt, {self.w: dy.T @ x, self.b: dy.sum(axis=0)}
        return dy @ wt.T, {self.w: x.T @ dy, self.b: dy.sum(axis=0)}


def forward(layers, p, x):
    caches = []
    for layer in layers:
        x, cache = layer.forward(p, x)
        caches.append(cache)
    return x, caches


def backward(layers, p, dy, caches):
    grads = {}
    for layer, cache in zip(reversed(layers), reversed(caches)):
        dy, g = layer.backward(p, dy, cache)
        grads.update(g)
    return grads


def cross_entropy(z: np.ndarray, t: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean over samples of −log softmax(z)[t], and its gradient in z."""
    n = z.shape[0]
    zmax = z.max(axis=1, keepdims=True)
    logp = z - zmax - np.log(np.exp(z - zmax).sum(axis=1, keepdims=True))
    loss = -logp[np.arange(n), t].mean()
    dz = np.exp(logp)
    dz[np.arange(n), t] -= 1.0
    return float(loss), dz / n


def mse(y: np.ndarray, t: np.ndarray) -> tuple[float, np.ndarray]:
    d = y - t
    return float((d * d).mean()), 2.0 * d / d.size


# --------------------------------------------------------------------------------------------
# Optimizers (torch.optim semantics), over float64 copies of the parameters.
# --------------------------------------------------------------------------------------------


def sgd_step(p, g, state, t, lr, momentum=0.0, dampening=0.0, nesterov=False, weight_decay=0.0):
    for k in p:
        d = g[k] + weight_decay * p[k] if weight_decay else g[k]
        if momentum:
            buf = d.copy() if t == 1 else momentum * state[k] + (1.0 - dampening) * d
            state[k] = buf
            d = d + momentum * buf if nesterov else buf
        p[k] = p[k] - lr * d


def adam_step(p, g, state, t, lr, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0, decoupled=False):
    for k in p:
        d = g[k]
        if weight_decay:
            if decoupled:
                p[k] = p[k] * (1.0 - lr * weight_decay)
            else:
                d = d + weight_decay * p[k]
        m, v = state.get(k, (np.zeros_like(d), np.zeros_like(d)))
        m = beta1 * m + (1.0 - beta1) * d
        v = beta2 * v + (1.0 - beta2) * d * d
        state[k] = (m, v)
        bc1 = 1.0 - beta1**t
        bc2 = 1.0 - beta2**t
        p[k] = p[k] - (lr / bc1) * m / (np.sqrt(v) / np.sqrt(bc2) + eps)


# --------------------------------------------------------------------------------------------
# Models and cases.
# --------------------------------------------------------------------------------------------


def he(rng, shape, fan_in):
    return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)


def small(rng, shape, scale=0.1):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def cnn_maxpool(rng):
    """x [4,1,8,8] -> Conv 3x3 pad 1 (4) -> Relu -> MaxPool 2 -> Conv 3x3 (8) -> Relu -> Flatten
    -> Gemm transB (32 -> 10); cross-entropy on class indices."""
    params = {
        "conv1.weight": he(rng, (4, 1, 3, 3), 9),
        "conv1.bias": small(rng, (4,)),
        "conv2.weight": he(rng, (8, 4, 3, 3), 36),
        "conv2.bias": small(rng, (8,)),
        "fc.weight": he(rng, (10, 32), 32),
        "fc.bias": small(rng, (10,)),
    }
    nodes = [
        helper.make_node("Conv", ["x", "conv1.weight", "conv1.bias"], ["c1"], name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "conv2.weight", "conv2.bias"], ["c2"], name="conv2", kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("Flatten", ["r2"], ["flat"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], name="fc", transB=1),
    ]
    layers = [
        Conv("conv1.weight", "conv1.bias", pad=1), Relu(), MaxPool2(),
        Conv("conv2.weight", "conv2.bias"), Relu(), Flatten(),
        Gemm("fc.weight", "fc.bias", trans_b=True),
    ]  # fmt: skip
    x = rng.standard_normal((4, 1, 8, 8)).astype(np.float32)
    target = rng.integers(0, 10, size=4).astype(np.int64)
    return dict(params=params, nodes=nodes, layers=layers, x=x, target=target, out_shape=[4, 10], loss="cross-entropy")


def cnn_avgpool(rng):
    """x [4,2,8,8] -> Conv 3x3 pad 1 stride 1 (4) -> Sigmoid -> AveragePool 2 -> Conv 3x3 stride 2
    pad 1 (6) -> Relu -> Flatten -> Gemm (24 -> 5, W [in, out]); mse against random values."""
    params = {
        "conv1.weight": he(rng, (4, 2, 3, 3), 18),
        "conv1.bias": small(rng, (4,)),
        "conv2.weight": he(rng, (6, 4, 3, 3), 36),
        "conv2.bias": small(rng, (6,)),
        "fc.weight": he(rng, (24, 5), 24),
        "fc.bias": small(rng, (5,)),
    }
    nodes = [
        helper.make_node("Conv", ["x", "conv1.weight", "conv1.bias"], ["c1"], name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Sigmoid", ["c1"], ["s1"], name="sigmoid1"),
        helper.make_node("AveragePool", ["s1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "conv2.weight", "conv2.bias"], ["c2"], name="conv2", kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("Flatten", ["r2"], ["flat"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["out"], name="fc"),
    ]
    layers = [
        Conv("conv1.weight", "conv1.bias", pad=1), Sigmoid(), AvgPool2(),
        Conv("conv2.weight", "conv2.bias", pad=1, stride=2), Relu(), Flatten(),
        Gemm("fc.weight", "fc.bias", trans_b=False),
    ]  # fmt: skip
    x = rng.standard_normal((4, 2, 8, 8)).astype(np.float32)
    target = rng.standard_normal((4, 5)).astype(np.float32)
    return dict(params=params, nodes=nodes, layers=layers, x=x, target=target, out_shape=[4, 5], loss="mse")


MODELS = {"cnn_maxpool": (cnn_maxpool, 7001), "cnn_avgpool": (cnn_avgpool, 7002)}

# (model, case, steps, optimizer name, keyword arguments of the step function = burnc flags)
CASES = [
    ("cnn_maxpool", "adam_1", 1, "adam", dict(lr=0.01)),
    ("cnn_maxpool", "adam_3", 3, "adam", dict(lr=0.01, beta1=0.8, beta2=0.99, eps=1e-6, weight_decay=0.05)),
    ("cnn_maxpool", "sgd_momentum_3", 3, "sgd", dict(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=0.01)),
    ("cnn_maxpool", "sgd_nesterov_3", 3, "sgd", dict(lr=0.05, momentum=0.9, nesterov=True)),
    ("cnn_maxpool", "adamw_3", 3, "adamw", dict(lr=0.01, weight_decay=0.1)),
    # Fine-tune the head only: the convolutions stay frozen (weights, not state, in generated code).
    ("cnn_maxpool", "adam_head_3", 3, "adam", dict(lr=0.01, trainable="fc.*")),
    ("cnn_avgpool", "adam_1", 1, "adam", dict(lr=0.01)),
    ("cnn_avgpool", "adamw_3", 3, "adamw", dict(lr=0.02, weight_decay=0.1, beta2=0.95)),
    ("cnn_avgpool", "sgd_momentum_3", 3, "sgd", dict(lr=0.1, momentum=0.5)),
]

# AdamW's default weight decay in torch (and burnc) is 0.01: pass it explicitly anyway.
ADAMW_DEFAULT_WD = 0.01


def flags(optimizer: str, kw: dict) -> list[str]:
    out = ["--optimizer", optimizer]
    for k, v in kw.items():
        if k == "trainable":
            out += ["--trainable", v]
        elif isinstance(v, bool):
            if v:
                out.append("--" + k.replace("_", "-"))
        else:
            out += ["--" + k.replace("_", "-"), repr(float(v))]
    return out


def write_safetensors(path: str, tensors: dict[str, np.ndarray]) -> None:
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        data = np.ascontiguousarray(tensors[name], dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for b in blobs:
            f.write(b)


def build_onnx(name: str, m: dict) -> onnx.ModelProto:
    inits = [numpy_helper.from_array(v, k) for k, v in m["params"].items()]
    graph = helper.make_graph(
        m["nodes"],
        name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(m["x"].shape))],
        [helper.make_tensor_value_info(m["nodes"][-1].output[0], TensorProto.FLOAT, m["out_shape"])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8, producer_name="burnc-train-reference")
    onnx.checker.check_model(model, full_check=True)
    return model


def run_case(m: dict, steps: int, optimizer: str, kw: dict) -> tuple[dict, list[float], np.ndarray]:
    p = {k: v.astype(np.float64) for k, v in m["params"].items()}
    x = m["x"].astype(np.float64)
    loss_fn = cross_entropy if m["loss"] == "cross-entropy" else mse
    target = m["target"] if m["loss"] == "cross-entropy" else m["target"].astype(np.float64)
    kw = dict(kw)
    pattern = kw.pop("trainable", "*")
    state: dict = {}
    losses = []
    for t in range(1, steps + 1):
        y, caches = forward(m["layers"], p, x)
        loss, dy = loss_fn(y, target)
        losses.append(loss)
        g = backward(m["layers"], p, dy, caches)
        assert set(g) == set(p), (sorted(g), sorted(p))
        trained = {k: v for k, v in p.items() if fnmatch.fnmatchcase(k, pattern)}
        assert trained, f"no parameter matches {pattern}"
        if optimizer == "sgd":
            sgd_step(trained, g, state, t, **kw)
        else:
            adam_step(trained, g, state, t, decoupled=optimizer == "adamw", **kw)
        p.update(trained)
    y, _ = forward(m["layers"], p, x)
    return p, losses, y


def check_gradients(m: dict) -> None:
    """Central differences on a few coordinates of every parameter: the hand-written backward
    must be right before it can judge anything."""
    p = {k: v.astype(np.float64) for k, v in m["params"].items()}
    x = m["x"].astype(np.float64)
    loss_fn = cross_entropy if m["loss"] == "cross-entropy" else mse
    target = m["target"] if m["loss"] == "cross-entropy" else m["target"].astype(np.float64)
    y, caches = forward(m["layers"], p, x)
    _, dy = loss_fn(y, target)
    g = backward(m["layers"], p, dy, caches)
    rng = np.random.default_rng(0)
    h = 1e-6
    for k in p:
        for _ in range(5):
            i = tuple(rng.integers(0, s) for s in p[k].shape)
            old = p[k][i]
            p[k][i] = old + h
            lp = loss_fn(forward(m["layers"], p, x)[0], target)[0]
            p[k][i] = old - h
            lm = loss_fn(forward(m["layers"], p, x)[0], target)[0]
            p[k][i] = old
            num = (lp - lm) / (2 * h)
            assert abs(num - g[k][i]) <= 1e-6 + 1e-4 * abs(num), f"{k}{i}: numeric {num}, analytic {g[k][i]}"


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = os.path.abspath(sys.argv[1])
    os.makedirs(out, exist_ok=True)
    models = {}
    for name, (make, seed) in MODELS.items():
        m = make(np.random.default_rng(seed))
        check_gradients(m)
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        onnx.save(build_onnx(name, m), os.path.join(d, "model.onnx"))
        np.save(os.path.join(d, "x.npy"), m["x"])
        np.save(os.path.join(d, "target.npy"), m["target"])
        models[name] = m
    lines = []
    for name, case, steps, optimizer, kw in CASES:
        m = models[name]
        if optimizer == "adamw" and "weight_decay" not in kw:
            kw = {**kw, "weight_decay": ADAMW_DEFAULT_WD}
        p, losses, y = run_case(m, steps, optimizer, kw)
        d = os.path.join(out, name, case)
        os.makedirs(d, exist_ok=True)
        write_safetensors(os.path.join(d, "expected.safetensors"), p)
        with open(os.path.join(d, "losses.txt"), "w") as f:
            f.writelines(f"{v:.10e}\n" for v in losses)
        with open(os.path.join(d, "output.pb"), "wb") as f:
            f.write(numpy_helper.from_array(y.astype(np.float32), m["nodes"][-1].output[0]).SerializeToString())
        cli = ["--loss", m["loss"], *flags(optimizer, kw)]
        lines.append("\t".join([name, case, str(steps), *cli]))
    with open(os.path.join(out, "cases.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"train_reference.py: {len(CASES)} cases in {out}")


if __name__ == "__main__":
    main()
