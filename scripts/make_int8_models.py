#!/usr/bin/env python3
"""The int8 benchmark set: QDQ models made with onnxruntime.quantization (static, per channel,
u8 activations and i8 weights, the quantizer's defaults otherwise) from float models of the
other sets, calibrated on seeded random inputs.

    python3 scripts/make_int8_models.py OUT_DIR [--only NAME ...] [--light DIR] [--real DIR]

Writes OUT_DIR/<name>/model.onnx:
- resnet50_qdq: the random-weight ResNet-50 of the light set (converted to opset 17 first: the
  quantizer's per-channel DequantizeLinear needs opset 13).
- mobilenetv3_qdq: the real set's MobileNetV3-small-style classifier.
- minilm_qdq: the real set's MiniLM encoder (its MatMuls quantized; token ids calibrated as 0s
  and small ids).
"""
import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import version_converter
import onnxruntime as ort
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
from onnxruntime.quantization.shape_inference import quant_pre_process

TYPES = {"tensor(float)": np.float32, "tensor(int64)": np.int64, "tensor(int32)": np.int32}


class Reader(CalibrationDataReader):
    """Eight seeded inputs: floats uniform in [-1, 1), integers (token ids) in [0, 100)."""

    def __init__(self, model):
        sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
        rng = np.random.default_rng(0)
        feeds = []
        for _ in range(8):
            f = {}
            for i in sess.get_inputs():
                shape = [d if isinstance(d, int) else 1 for d in i.shape]
                t = TYPES.get(i.type)
                if t is None:
                    raise SystemExit(f"{model}: input {i.name} of type {i.type}")
                f[i.name] = rng.uniform(-1, 1, shape).astype(t) if t == np.float32 else rng.integers(0, 100, shape).astype(t)
                if "mask" in i.name:
                    f[i.name] = np.ones(shape, t)
            feeds.append(f)
        self.data = iter(feeds)

    def get_next(self):
        return next(self.data, None)


def quantize(src, dst):
    with tempfile.TemporaryDirectory() as tmp:
        m = onnx.load(src)
        opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), 17)
        if opset < 13:
            m = version_converter.convert_version(m, 17)
        conv = Path(tmp) / "opset.onnx"
        onnx.save(m, conv)
        pre = Path(tmp) / "pre.onnx"
        quant_pre_process(str(conv), str(pre))
        dst.parent.mkdir(parents=True, exist_ok=True)
        quantize_static(str(pre), str(dst), Reader(pre), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)


def main():
    root = Path(__file__).resolve().parent.parent
    cache = Path.home() / ".cache" / "burnc"
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", type=Path)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--light", type=Path, default=root / "conformance-data" / "light_random")
    ap.add_argument("--real", type=Path, default=cache / "real-models")
    a = ap.parse_args()
    sources = {
        "resnet50_qdq": a.light / "light_resnet50_random" / "model.onnx",
        "mobilenetv3_qdq": a.real / "mobilenetv3" / "model.onnx",
        "minilm_qdq": a.real / "minilm_encoder" / "model.onnx",
    }
    for name, src in sources.items():
        if a.only and name not in a.only:
            continue
        if not src.exists():
            print(f"note: {src} not found; skipping {name}", file=sys.stderr)
            continue
        quantize(src, a.out / name / "model.onnx")
        print(f"{name}: {a.out / name / 'model.onnx'}")


if __name__ == "__main__":
    main()
