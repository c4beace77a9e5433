"""Writes the PyTorch checkpoint fixtures of burnc's `.pt` reader tests with real torch.

torch is not in CI, so the files are committed; this script is how they were made (run once
on a machine with PyTorch: `python3 make_fixtures.py OUTDIR`). `manifest.json` lists, per
file, every tensor key with its dtype, shape and values (flattened, C order, as floats), which
the Rust tests compare against.
"""
import json
import os
import sys
from collections import OrderedDict

import torch

out = sys.argv[1] if len(sys.argv) > 1 else "."
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)
manifest = {}


def record(name, sd, prefix=""):
    entries = manifest.setdefault(name, {})
    for k, v in sd.items():
        key = f"{prefix}{k}"
        if isinstance(v, torch.Tensor):
            entries[key] = {
                "dtype": str(v.dtype).replace("torch.", ""),
                "shape": list(v.shape),
                "values": v.detach().to(torch.float64).contiguous().reshape(-1).tolist(),
            }
        elif isinstance(v, dict):
            record(name, v, f"{key}.")


# A small CNN's state_dict, default (zip) format.
net = torch.nn.Sequential(
    torch.nn.Conv2d(1, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 10)
)
sd = net.state_dict()
torch.save(sd, f"{out}/cnn_state_dict.pt")
record("cnn_state_dict.pt", sd)

# Every dtype a state_dict commonly holds.
mixed = OrderedDict(
    f32=torch.randn(2, 3),
    f16=torch.randn(3, 2).half(),
    bf16=torch.randn(4).bfloat16(),
    f64=torch.randn(2, 2).double(),
    i64=torch.arange(5),
    i32=torch.arange(6, dtype=torch.int32).reshape(2, 3),
    i8=torch.tensor([-3, 0, 7], dtype=torch.int8),
    u8=torch.tensor([0, 255, 9], dtype=torch.uint8),
    flag=torch.tensor([True, False, True]),
    scalar=torch.tensor(2.5),
    empty=torch.zeros(0, 3),
)
torch.save(mixed, f"{out}/dtypes.pt")
record("dtypes.pt", mixed)

# Views: shared storage, a storage offset, a transposed (non-contiguous) tensor, a strided slice.
base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
views = OrderedDict(
    base=base,
    row2=base[2],
    cols=base[:, 1:4],
    t=base.t(),
    every_other=base[:, ::2],
)
torch.save(views, f"{out}/views.pt")
record("views.pt", views)

# A training checkpoint: tensors nested under "model", other entries of other types.
ckpt = {"epoch": 3, "model": net.state_dict(), "lr": 0.01, "note": "nested", "hist": [1.0, 2.0]}
torch.save(ckpt, f"{out}/checkpoint.pt")
record("checkpoint.pt", ckpt)

# The legacy (pre-1.6, non-zip) format.
torch.save(OrderedDict(w=torch.randn(3, 2)), f"{out}/legacy.pt", _use_new_zipfile_serialization=False)
record("legacy.pt", torch.load(f"{out}/legacy.pt"))

with open(f"{out}/manifest.json", "w") as f:
    json.dump({"torch": torch.__version__, "files": manifest}, f, indent=1)
print("torch", torch.__version__)
for name in sorted(os.listdir(out)):
    print(name, os.path.getsize(f"{out}/{name}"))
