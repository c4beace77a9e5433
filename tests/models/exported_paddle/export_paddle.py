"""Exports the PaddlePaddle models of tests/exported_models.rs to ONNX with paddle2onnx.

Paddle is not in CI: this ran once in a virtualenv (`pip install paddlepaddle==3.3.1
paddle2onnx==2.1.0 packaging`, then `python export_paddle.py OUTDIR`) and the .onnx files are
committed. Dims given as None in the InputSpec (batch, height, width, sequence) stay symbolic in
the ONNX file. Which (model, opset) pairs exported is listed in exported.json, with the input
sizes the tests run. Weights are seeded.
"""
import json
import os
import sys

import numpy as np
import paddle
import paddle.nn as nn
import paddle.nn.functional as F
import paddle2onnx

out = sys.argv[1] if len(sys.argv) > 1 else "."
os.makedirs(out, exist_ok=True)
paddle.seed(0)
np.random.seed(0)


class Cnn(nn.Layer):
    """Conv/BN/ReLU/MaxPool, a grouped conv with hardswish, average pooling to 1x1 (paddle2onnx
    refuses adaptive pooling to other sizes on dynamic inputs), flatten, Linear, softmax."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2D(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2D(8)
        self.c2 = nn.Conv2D(8, 16, 3, stride=2, padding=1, groups=2)
        self.fc = nn.Linear(16, 5)
        rng = np.random.default_rng(1)
        self.bn._mean.set_value(rng.uniform(-0.5, 0.5, [8]).astype("float32"))
        self.bn._variance.set_value(rng.uniform(0.5, 1.5, [8]).astype("float32"))

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.c1(x))), 2)
        x = F.hardswish(self.c2(x))
        x = F.adaptive_avg_pool2d(x, 1)
        return F.softmax(self.fc(paddle.flatten(x, 1)), -1)


class Lstm(nn.Layer):
    """A bidirectional LSTM over a dynamic sequence, the last step through a Linear head."""

    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(4, 8, direction="bidirect")
        self.fc = nn.Linear(16, 3)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.fc(y[:, -1, :])


class Encoder(nn.Layer):
    """A transformer encoder layer (paddle.nn.TransformerEncoderLayer) over a dynamic sequence."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Linear(6, 16)
        self.layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, activation="gelu")
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        return self.head(self.layer(self.emb(x)).mean(axis=1))


class Upsample(nn.Layer):
    """Nearest and bilinear (align_corners both ways) upsampling of a dynamic-size image to
    twice its size, the size computed from paddle.shape (a shape subgraph feeding Resize's sizes;
    paddle2onnx 2.1 fails on scale_factor with Paddle 3.3), then a 1x1 conv."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2D(2, 3, 1)

    def forward(self, x):
        s = paddle.shape(x)[2:4] * 2
        a = F.interpolate(x, size=s, mode="nearest")
        b = F.interpolate(x, size=s, mode="bilinear", align_corners=False)
        c = F.interpolate(x, size=s, mode="bilinear", align_corners=True)
        return self.conv(a + b - c)


class Mlp(nn.Layer):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(10, 16)
        self.l2 = nn.Linear(16, 4)

    def forward(self, x):
        h = F.gelu(self.l1(x))
        return F.log_softmax(self.l2(h), -1)


# name: (module, input spec shape, opsets, input sizes the tests run)
MODELS = {
    "pd_cnn": (Cnn(), [None, 3, None, None], [9, 13, 17, 21], [[1, 3, 16, 16], [2, 3, 12, 20], [3, 3, 9, 9]]),
    "pd_lstm": (Lstm(), [None, None, 4], [9, 13, 17, 21], [[1, 6, 4], [3, 2, 4], [2, 11, 4]]),
    "pd_encoder": (Encoder(), [None, None, 6], [13, 17, 21], [[1, 5, 6], [2, 9, 6], [4, 3, 6]]),
    "pd_upsample": (Upsample(), [None, 2, None, None], [11, 13, 17, 19, 21], [[1, 2, 5, 6], [2, 2, 8, 3], [1, 2, 11, 13]]),
    "pd_mlp": (Mlp(), [None, 10], [7, 9, 13, 21], [[1, 10], [3, 10], [8, 10]]),
}



def file_opset(path):
    """The default-domain opset the file declares (an exporter may raise the one asked for)."""
    import onnx
    return next(o.version for o in onnx.load(path).opset_import if o.domain in ("", "ai.onnx"))


done = []
for name, (m, shape, opsets, sizes) in MODELS.items():
    m.eval()
    spec = [paddle.static.InputSpec(shape, "float32", "x")]
    for opset in opsets:
        stem = os.path.join(out, f"{name}_op{opset}")
        try:
            paddle.onnx.export(m, stem, input_spec=spec, opset_version=opset)
            path = stem + ".onnx"
            done.append({"model": name, "opset": file_opset(path), "asked_opset": opset, "file": os.path.basename(path), "exporter": f"paddle2onnx {paddle2onnx.__version__}", "sizes": sizes})
            print("ok", path, os.path.getsize(path))
        except Exception as e:  # an opset paddle2onnx cannot target for these ops: record and go on
            print("FAILED", name, opset, type(e).__name__, str(e).splitlines()[0][:200] if str(e) else "")

with open(os.path.join(out, "exported.json"), "w") as f:
    json.dump({"paddlepaddle": paddle.__version__, "paddle2onnx": paddle2onnx.__version__, "models": done}, f, indent=1)
print("paddle", paddle.__version__, len(done), "models")
