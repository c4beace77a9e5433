#!/usr/bin/env python3
"""onnxruntime references for the PyTorch-exported models in tests/models/exported/.

Usage: scripts/exported_refs.py OUT_DIR [MODELS_DIR]

MODELS_DIR (default tests/models/exported) holds the .onnx files and their exported.json. For
every model listed there and several input sizes (the symbolic dims — batch, sequence length,
height, width — take different values; a manifest entry's "sizes", else the table below), writes
OUT_DIR/<model file stem>/size_<k>/{x.npy, y.npy} with a seeded input and onnxruntime's output
(CPU, all graph optimizations off). A size onnxruntime itself refuses (an exporter that baked
the example's size into a Reshape) is skipped and listed in OUT_DIR/skipped.txt; OUT_DIR/cases.txt
lists the cases written.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


sys.path.insert(0, HERE)
from pydeps import ensure  # noqa: E402

ensure("numpy", "onnxruntime")

import numpy as np  # noqa: E402
import onnxruntime as ort  # noqa: E402

MODELS = os.path.join(HERE, "..", "tests", "models", "exported")
# Per model: input shapes to run (the first is the export's own example size class).
SIZES = {
    # The dynamo export decomposes adaptive pooling for the example's 4x4 map: H, W in 14..16.
    "cnn": [(1, 3, 16, 16), (2, 3, 14, 16), (3, 3, 15, 15)],
    # Sequence length 1 last: the smallest size a bounded-dims module must handle.
    "encoder": [(1, 5, 6), (2, 9, 6), (4, 3, 6), (3, 1, 6)],
    "gru": [(1, 7, 4), (2, 3, 4), (3, 12, 4), (2, 1, 4), (3, 7, 4)],
    "upsample": [(1, 2, 5, 6), (2, 2, 8, 3), (1, 2, 11, 13)],
    "mlp": [(1, 10), (3, 10), (8, 10)],
}


def main(out: str, models: str) -> None:
    meta = json.load(open(os.path.join(models, "exported.json")))
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    cases, skipped = [], []
    for m in meta["models"]:
        sess = ort.InferenceSession(os.path.join(models, m["file"]), opts, providers=["CPUExecutionProvider"])
        stem = m["file"][: -len(".onnx")]
        for k, shape in enumerate(m.get("sizes") or SIZES[m["model"]]):
            x = np.random.default_rng(k).standard_normal(shape).astype(np.float32)
            try:
                y = sess.run(None, {"x": x})[0]
            except Exception as e:  # noqa: BLE001 - the exporter fixed this dim
                skipped.append(f"{stem} size_{k} {shape}: {str(e).splitlines()[0][:160]}")
                continue
            d = os.path.join(out, stem, f"size_{k}")
            os.makedirs(d, exist_ok=True)
            np.save(os.path.join(d, "x.npy"), x)
            np.save(os.path.join(d, "y.npy"), y)
            cases.append(f"{m['file']} {stem}/size_{k} {m['opset']} {m['exporter'].replace(' ', '_')}")
    with open(os.path.join(out, "cases.txt"), "w") as f:
        f.write("\n".join(cases) + "\n")
    with open(os.path.join(out, "skipped.txt"), "w") as f:
        f.write("\n".join(skipped) + "\n")
    print(f"{len(cases)} cases, {len(skipped)} sizes onnxruntime refuses")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else MODELS)
