"""Exports the PyTorch models of tests/exported_models.rs to ONNX, with symbolic dims.

torch is not in CI: this ran once on a machine with PyTorch (`python3 export_torch.py OUTDIR`)
and the .onnx files are committed. Each model is exported at several opsets with the legacy
TorchScript exporter (opsets 7-20) and, where torch has it, the dynamo exporter (18+); which
(model, opset) pairs exported is listed in exported.json. Weights are seeded.
"""
import json
import os
import sys
import traceback

import torch
import torch.nn as nn
import torch.nn.functional as F

out = sys.argv[1] if len(sys.argv) > 1 else "."
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)


class Cnn(nn.Module):
    """Conv/BN/ReLU/MaxPool, adaptive average pooling and a view(x.size(0), -1) (a shape subgraph)."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.fc = nn.Linear(16 * 2 * 2, 5)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn(self.c1(x))), 2)
        x = F.relu(self.c2(x))
        x = F.adaptive_avg_pool2d(x, (2, 2))
        return self.fc(x.view(x.size(0), -1))


class Encoder(nn.Module):
    """A transformer encoder layer over a dynamic sequence length."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Linear(6, 16)
        self.layer = nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True)
        self.head = nn.Linear(16, 3)

    def forward(self, x):
        h = self.layer(self.emb(x))
        return self.head(h.mean(dim=1))


class Rnn(nn.Module):
    """A GRU over a dynamic sequence, the last step's state through a linear head."""

    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(4, 8, batch_first=True)
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        y, h = self.gru(x)
        return self.fc(y[:, -1, :])


class Upsample(nn.Module):
    """Bilinear and nearest upsampling of a dynamic-size image, then a 1x1 conv."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 1)

    def forward(self, x):
        a = F.interpolate(x, scale_factor=2.0, mode="nearest")
        b = F.interpolate(x, scale_factor=2.0, mode="bilinear", align_corners=False)
        return self.conv(a + b)


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(10, 16), nn.Tanh(), nn.Linear(16, 4), nn.Softmax(dim=-1))

    def forward(self, x):
        return self.net(x)


models = {
    # name: (module, example input, dynamic axes of input x, opsets)
    "cnn": (Cnn(), torch.randn(2, 3, 16, 16), {0: "batch", 2: "height", 3: "width"}, [9, 11, 13, 17]),
    "encoder": (Encoder(), torch.randn(2, 5, 6), {0: "batch", 1: "seq"}, [14, 17, 20]),
    "gru": (Rnn(), torch.randn(2, 7, 4), {0: "batch", 1: "seq"}, [9, 14, 17]),
    "upsample": (Upsample(), torch.randn(1, 2, 5, 6), {0: "batch", 2: "height", 3: "width"}, [11, 13, 19]),
    "mlp": (Mlp(), torch.randn(3, 10), {0: "batch"}, [7, 9, 13]),
}
done = []
for name, (m, x, axes, opsets) in models.items():
    m.eval()
    for opset in opsets:
        path = f"{out}/{name}_op{opset}.onnx"
        try:
            torch.onnx.export(
                m, (x,), path, opset_version=opset, input_names=["x"], output_names=["y"],
                dynamic_axes={"x": axes, "y": {0: "batch"}}, dynamo=False,
            )
            done.append({"model": name, "opset": opset, "file": os.path.basename(path), "exporter": "torchscript"})
            print("ok", path, os.path.getsize(path))
        except Exception as e:  # an opset this op set cannot use: record and go on
            print("FAILED", name, opset, type(e).__name__, str(e).splitlines()[0][:200])
    try:
        path = f"{out}/{name}_dynamo.onnx"
        dims = {k: torch.export.Dim(v, min=1, max=64) if v in ("batch", "seq") else torch.export.Dim(v, min=4, max=64) for k, v in axes.items()}
        torch.onnx.export(m, (x,), path, input_names=["x"], output_names=["y"], dynamic_shapes={"x": dims}, dynamo=True, opset_version=18)
        done.append({"model": name, "opset": 18, "file": os.path.basename(path), "exporter": "dynamo"})
        print("ok", path, os.path.getsize(path))
    except Exception as e:
        print("FAILED dynamo", name, type(e).__name__, str(e).splitlines()[0][:300])

with open(f"{out}/exported.json", "w") as f:
    json.dump({"torch": torch.__version__, "models": done}, f, indent=1)
print("torch", torch.__version__, len(done), "models")
